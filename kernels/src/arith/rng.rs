//! Counter-based randomness: Philox 4×32-10, uniform floats and permutations.
//!
//! # Contract
//!
//! [`philox4x32_10`] is Salmon et al.'s Philox4x32 with 10 rounds, exactly as
//! Random123 defines it (checked against its known-answer vectors). Being
//! counter-based, word `i` of a stream is a pure function of `(key, counter)`,
//! so any device can produce any slice of it in parallel.
//!
//! A [`RandomStream`] is a 64-bit seed (the key, low word first) and a 64-bit
//! stream id. Its word `i` is lane `i mod 4` of the block at counter
//! `[lo(i/4), hi(i/4), lo(stream), hi(stream)]`.
//!
//! - Uniform `u_i` in `[0, 1)`: `(word_i >> 8) · 2⁻²⁴`, exact.
//! - Uniform in `[low, high)`: `low + (high − low) ⊗ u_i`, `⊗` the contract
//!   multiplication (the result may equal `high` after rounding).
//! - Permutation of `0..n` (Fisher–Yates, from the top): for `i = n−1` down to
//!   1, draw number `d = n−1−i` picks `j = (word_d · (i + 1)) >> 32` (a 64-bit
//!   product), and positions `i` and `j` swap. The multiply-shift map has a
//!   bias below `n / 2³²`, which is negligible and, above all, deterministic.
//! - Normal draws (Box–Muller): block `b`'s words `(w₀, w₁)` make draws `4b` and
//!   `4b + 1`, and `(w₂, w₃)` draws `4b + 2` and `4b + 3`. From a pair `(w, w′)`:
//!   `u = 1 − u(w)` in `(0, 1]` (exact), `ρ = sqrt(−2 ⊗ log u)`, `(s, c) =
//!   sin_cos_turns(u(w′))`, and the draws are `ρ ⊗ c`, then `ρ ⊗ s`; scaled,
//!   `mean + deviation ⊗ z`. `log`, `sqrt` and `sin_cos_turns` are the pinned functions
//!   of [`crate::arith::math`], never libm's (RepOps' known bugs were libm `sin`/`cos`).

use alloc::vec::Vec;

use crate::arith::math::{log, sin_cos_turns, sqrt};
use crate::arith::mul;

/// Philox4x32 round multipliers.
const PHILOX_MULTIPLIERS: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
/// Philox4x32 key schedule increments (the golden ratio and √3 − 1).
const PHILOX_WEYL: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
/// Rounds of Philox4x32-10.
const PHILOX_ROUNDS: usize = 10;
/// 2⁻²⁴, the spacing of uniform floats.
const UNIFORM_SPACING: f32 = f32::from_bits(0x3380_0000);

/// The 64-bit product of `a` and `b` as `(high, low)` words.
#[inline(always)]
fn multiply_high_low(a: u32, b: u32) -> (u32, u32) {
	let product = u64::from(a) * u64::from(b);
	((product >> 32) as u32, product as u32)
}

/// Philox4x32-10: the random block at `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
	let [mut x0, mut x1, mut x2, mut x3] = counter;
	let [mut k0, mut k1] = key;
	for round in 0..PHILOX_ROUNDS {
		if round > 0 {
			k0 = k0.wrapping_add(PHILOX_WEYL[0]);
			k1 = k1.wrapping_add(PHILOX_WEYL[1]);
		}
		let (high0, low0) = multiply_high_low(PHILOX_MULTIPLIERS[0], x0);
		let (high1, low1) = multiply_high_low(PHILOX_MULTIPLIERS[1], x2);
		(x0, x1, x2, x3) = (high1 ^ x1 ^ k0, low1, high0 ^ x3 ^ k1, low0);
	}
	[x0, x1, x2, x3]
}

/// A reproducible stream of random words: a seed and a stream id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomStream {
	/// The Philox key: the seed's low and high words.
	key: [u32; 2],
	/// The stream id, in the counter's upper two words.
	stream: u64,
}

impl RandomStream {
	/// Stream `stream` of seed `seed`.
	pub fn new(seed: u64, stream: u64) -> Self {
		Self { key: [seed as u32, (seed >> 32) as u32], stream }
	}

	/// Block `block` of the stream: words `4·block` to `4·block + 3`.
	pub fn block(&self, block: u64) -> [u32; 4] {
		philox4x32_10([block as u32, (block >> 32) as u32, self.stream as u32, (self.stream >> 32) as u32], self.key)
	}

	/// Word `index` of the stream.
	pub fn word(&self, index: u64) -> u32 {
		let block = self.block(index / 4);
		block[(index % 4) as usize]
	}

	/// Uniform float `index` in `[0, 1)`.
	pub fn uniform(&self, index: u64) -> f32 {
		uniform_from_word(self.word(index))
	}

	/// Fills `out` with uniform floats `0..out.len()` mapped to `[low, high)`.
	pub fn fill_uniform(&self, low: f32, high: f32, out: &mut [f32]) {
		let width = high - low;
		for (block_index, values) in out.chunks_mut(4).enumerate() {
			let words = self.block(block_index as u64);
			for (value, &word) in values.iter_mut().zip(&words) {
				*value = low + mul(width, uniform_from_word(word));
			}
		}
	}

	/// Standard normal draw `index` (Box–Muller over block `index / 4`).
	pub fn normal(&self, index: u64) -> f32 {
		let block = self.block(index / 4);
		let pair = normal_pair_from_words(block[(index % 4 / 2 * 2) as usize], block[(index % 4 / 2 * 2 + 1) as usize]);
		if index % 2 == 0 {
			pair.0
		} else {
			pair.1
		}
	}

	/// Fills `out` with normal draws `0..out.len()`, scaled: `mean + deviation ⊗ z_i`
	/// (a transformer's N(0, 0.02) initialisation is `fill_normal(0.0, 0.02, ..)`).
	pub fn fill_normal(&self, mean: f32, deviation: f32, out: &mut [f32]) {
		for (block_index, values) in out.chunks_mut(4).enumerate() {
			let [w0, w1, w2, w3] = self.block(block_index as u64);
			let (a, b) = normal_pair_from_words(w0, w1);
			let (c, d) = normal_pair_from_words(w2, w3);
			for (value, z) in values.iter_mut().zip([a, b, c, d]) {
				*value = mean + mul(deviation, z);
			}
		}
	}

	/// A uniformly shuffled permutation of `0..n`.
	pub fn permutation(&self, n: u32) -> Vec<u32> {
		let mut order: Vec<u32> = (0..n).collect();
		// Draw `d` is word `d` of the stream; each Philox block serves four draws.
		let mut block = [0u32; 4];
		for (draw, position) in (1..n).rev().enumerate() {
			if draw % 4 == 0 {
				block = self.block(draw as u64 / 4);
			}
			let word = block.get(draw % 4).copied().unwrap_or_default();
			let span = u64::from(position) + 1;
			let pick = ((u64::from(word) * span) >> 32) as usize;
			order.swap(position as usize, pick);
		}
		order
	}
}

/// Rounds of [`RandomPermutation`]'s Feistel network.
pub const FEISTEL_ROUNDS: u32 = 8;

/// A uniformly keyed permutation of `0..n` with random access: element `i`
/// costs the same whatever `n` is, so a referee can draw one batch's samples
/// without building the whole epoch's order.
///
/// The permutation is a Feistel network on `b = ⌈log₂ n⌉` bits (split into a
/// left half of `⌊b/2⌋` bits and a right half of the rest, the halves trading
/// widths each round), with [`FEISTEL_ROUNDS`] rounds whose round function is
/// word 0 of Philox block `round · 2³² + right` of the stream, cut to the
/// width it is XORed into. Values `≥ n` are walked through the network again
/// (cycle-walking), which ends because the walk stays on the cycle of its
/// start; as `2^b < 2n`, a walk takes fewer than two passes on average.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomPermutation {
	stream: RandomStream,
	n: u32,
	bits: u32,
}

impl RandomPermutation {
	/// The permutation of `0..n` keyed by `stream`.
	pub fn new(stream: RandomStream, n: u32) -> Self {
		let bits = if n <= 1 { 0 } else { u32::BITS - (n - 1).leading_zeros() };
		Self { stream, n, bits }
	}

	/// Elements permuted.
	pub fn len(&self) -> u32 {
		self.n
	}

	/// Whether it permutes nothing.
	pub fn is_empty(&self) -> bool {
		self.n == 0
	}

	/// The element at position `index`, or `None` past the end.
	pub fn get(&self, index: u32) -> Option<u32> {
		if index >= self.n {
			return None;
		}
		let mut value = index;
		loop {
			value = self.encrypt(value);
			if value < self.n {
				return Some(value);
			}
		}
	}

	/// One pass through the Feistel network on `bits` bits.
	fn encrypt(&self, value: u32) -> u32 {
		let mask = |bits: u32| (1u64 << bits) - 1;
		let (mut left_bits, mut right_bits) = (self.bits / 2, self.bits - self.bits / 2);
		let (mut left, mut right) = (u64::from(value) >> right_bits, u64::from(value) & mask(right_bits));
		for round in 0..u64::from(FEISTEL_ROUNDS) {
			let f = u64::from(self.stream.block(round << 32 | right)[0]) & mask(left_bits);
			(left, right) = (right, left ^ f);
			(left_bits, right_bits) = (right_bits, left_bits);
		}
		((left << right_bits) | right) as u32
	}
}

/// The two standard normal draws Box–Muller makes from two random words (the module's
/// contract): `(ρ ⊗ cos, ρ ⊗ sin)`.
#[inline(always)]
pub fn normal_pair_from_words(first: u32, second: u32) -> (f32, f32) {
	// 1 − k·2⁻²⁴ is exact, and never 0: log's argument is in (0, 1].
	let u = 1.0 - uniform_from_word(first);
	let radius = sqrt(mul(-2.0, log(u)));
	let (sin, cos) = sin_cos_turns(uniform_from_word(second));
	(mul(radius, cos), mul(radius, sin))
}

/// The uniform float in `[0, 1)` that a random word maps to: its top 24 bits times 2⁻²⁴.
#[inline(always)]
pub fn uniform_from_word(word: u32) -> f32 {
	((word >> 8) as f32) * UNIFORM_SPACING
}

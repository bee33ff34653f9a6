//! Multi-head attention's layout and its batched contractions.
//!
//! # Contract
//!
//! - **Heads** are bit copies, no arithmetic: [`split_heads`] takes `[sequences, T, heads ·
//!   d]` (a projection's output, each position's heads side by side) to `[sequences ·
//!   heads, T, d]` (one block per sequence and head, in sequence-major order), and
//!   [`merge_heads`] takes it back.
//! - **Batched contractions** ([`batched_matmul`]): block `b` of the output is the matmul
//!   of block `b` of each operand, each block under the contraction rule (operands rounded
//!   to 12 significant bits, 32-wide K-chunks folded in order), with the same shape and
//!   layout for every block. A dispute over one narrows to one block's K-chunk exactly as
//!   over a single matmul. Attention's four are `Z = Q·Kᵀ` (`rhs_transposed`),
//!   `O = P·V`, and in the backward pass `dP = dO·Vᵀ`, `dV = Pᵀ·dO`, `dQ = dZ·K`,
//!   `dK = dZᵀ·Q`, with the causal softmax ([`crate::ops::attention`]) between.

use crate::error::{check_len, check_nonzero, element_count, KernelError};
use crate::ops::contraction::{Contraction, MatmulLayout, MatmulShape};

/// The shape of multi-head activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadsShape {
	/// Sequences in the batch.
	pub sequences: usize,
	/// Positions in a sequence.
	pub positions: usize,
	/// Heads.
	pub heads: usize,
	/// Width of one head, `d`.
	pub head_width: usize,
}

impl HeadsShape {
	/// Elements of the activations, in either layout, after checking the shape.
	pub fn values_len(&self) -> Result<usize, KernelError> {
		check_nonzero("sequences", self.sequences)?;
		check_nonzero("positions", self.positions)?;
		check_nonzero("heads", self.heads)?;
		check_nonzero("head_width", self.head_width)?;
		element_count(&[self.sequences, self.positions, self.heads, self.head_width])
	}

	/// Where element `element` of a copy's output comes from in its input: for
	/// `split_heads` (`split`) a blocked element's place side by side, for `merge_heads` a
	/// side-by-side element's place in the blocks. What the referee reads to recompute a
	/// segment of either copy.
	pub fn source_index(&self, split: bool, element: usize) -> usize {
		let (d, t, h) = (self.head_width.max(1), self.positions.max(1), self.heads.max(1));
		let (row, column) = (element / d, element % d);
		if split {
			// Blocked row `(s·H + h)·T + t`.
			let (block, position) = (row / t, row % t);
			let (sequence, head) = (block / h, block % h);
			((sequence * t + position) * h + head) * d + column
		} else {
			// Side-by-side row `(s·T + t)·H + h`.
			let (place, head) = (row / h, row % h);
			let (sequence, position) = (place / t, place % t);
			((sequence * h + head) * t + position) * d + column
		}
	}

	/// Calls `copy(side_by_side, blocked)` with the offsets of every head row in both
	/// layouts: `[s, t, h·d]` and `[s·heads + h, t, d]`.
	fn each_row(&self, mut copy: impl FnMut(usize, usize)) {
		let d = self.head_width;
		for sequence in 0..self.sequences {
			for position in 0..self.positions {
				for head in 0..self.heads {
					let side_by_side = ((sequence * self.positions + position) * self.heads + head) * d;
					let blocked = ((sequence * self.heads + head) * self.positions + position) * d;
					copy(side_by_side, blocked);
				}
			}
		}
	}
}

/// `[sequences, T, heads · d]` to `[sequences · heads, T, d]`, a bit copy.
pub fn split_heads(shape: HeadsShape, side_by_side: &[f32], blocked: &mut [f32]) -> Result<(), KernelError> {
	let len = shape.values_len()?;
	check_len("side_by_side", side_by_side.len(), len)?;
	check_len("blocked", blocked.len(), len)?;
	let d = shape.head_width;
	shape.each_row(|from, to| blocked[to..to + d].copy_from_slice(&side_by_side[from..from + d]));
	Ok(())
}

/// `[sequences · heads, T, d]` back to `[sequences, T, heads · d]`, a bit copy.
pub fn merge_heads(shape: HeadsShape, blocked: &[f32], side_by_side: &mut [f32]) -> Result<(), KernelError> {
	let len = shape.values_len()?;
	check_len("blocked", blocked.len(), len)?;
	check_len("side_by_side", side_by_side.len(), len)?;
	let d = shape.head_width;
	shape.each_row(|to, from| side_by_side[to..to + d].copy_from_slice(&blocked[from..from + d]));
	Ok(())
}

/// `blocks` matmuls of one shape and layout, block `b` of `out` from block `b` of `lhs`
/// and of `rhs` (each operand's blocks consecutive).
pub fn batched_matmul(
	blocks: usize,
	shape: MatmulShape,
	layout: MatmulLayout,
	lhs: &[f32],
	rhs: &[f32],
	out: &mut [f32],
) -> Result<(), KernelError> {
	Contraction::BatchedMatmul { blocks, shape, layout }.compute(lhs, rhs, out)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::attention::{causal_softmax, causal_softmax_grad, CausalShape};
	use alloc::vec;
	use alloc::vec::Vec;

	fn values(seed: u64, len: usize) -> Vec<f32> {
		let mut out = vec![0.0; len];
		crate::RandomStream::new(seed, 23).fill_uniform(-1.0, 1.0, &mut out);
		out
	}

	const PLAIN: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: false };
	const RHS_T: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: true };
	const LHS_T: MatmulLayout = MatmulLayout { lhs_transposed: true, rhs_transposed: false };

	/// Splitting puts head `h` of sequence `s` in block `s·heads + h`; merging undoes it.
	#[test]
	fn heads_split_into_blocks_and_merge_back() {
		let shape = HeadsShape { sequences: 2, positions: 3, heads: 4, head_width: 5 };
		let x = values(1, shape.values_len().unwrap());
		let mut blocked = vec![0.0; x.len()];
		split_heads(shape, &x, &mut blocked).unwrap();
		// Sequence 1, position 2, head 3, element 4.
		assert_eq!(blocked[((4 + 3) * 3 + 2) * 5 + 4].to_bits(), x[((3 + 2) * 4 + 3) * 5 + 4].to_bits());
		let mut back = vec![0.0; x.len()];
		merge_heads(shape, &blocked, &mut back).unwrap();
		assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), x.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
		assert_eq!(split_heads(shape, &x[1..], &mut blocked), Err(KernelError::LengthMismatch { operand: "side_by_side", expected: 120, actual: 119 }));
	}

	/// Causal self-attention from the operators (per-block `Q·Kᵀ`, the causal softmax,
	/// `P·V`, and their backward contractions) against central differences of the same
	/// attention in f64, for a loss `Σ O ⊗ W`. The contractions round their operands to 12
	/// bits, so the match is to a few parts in a thousand.
	#[test]
	fn attention_from_the_operators_has_the_gradient_of_attention() {
		let (blocks, t, d) = (3, 9, 8);
		let scale = crate::arith::math::rsqrt(d as f32);
		let (q, k, v, w) = (values(2, blocks * t * d), values(3, blocks * t * d), values(4, blocks * t * d), values(5, blocks * t * d));
		let scores_shape = MatmulShape { m: t, k: d, n: t };
		let value_shape = MatmulShape { m: t, k: t, n: d };
		let causal = CausalShape { blocks, positions: t, scale };
		let mut scores = vec![0.0; blocks * t * t];
		batched_matmul(blocks, scores_shape, RHS_T, &q, &k, &mut scores).unwrap();
		let mut probs = vec![0.0; scores.len()];
		causal_softmax(causal, &scores, &mut probs).unwrap();
		let mut out = vec![0.0; q.len()];
		batched_matmul(blocks, value_shape, PLAIN, &probs, &v, &mut out).unwrap();
		// Backward from dO = W.
		let mut probs_grad = vec![0.0; probs.len()];
		batched_matmul(blocks, MatmulShape { m: t, k: d, n: t }, RHS_T, &w, &v, &mut probs_grad).unwrap();
		let mut v_grad = vec![0.0; v.len()];
		batched_matmul(blocks, MatmulShape { m: t, k: t, n: d }, LHS_T, &probs, &w, &mut v_grad).unwrap();
		let mut scores_grad = vec![0.0; scores.len()];
		causal_softmax_grad(causal, &probs, &probs_grad, &mut scores_grad).unwrap();
		let mut q_grad = vec![0.0; q.len()];
		batched_matmul(blocks, MatmulShape { m: t, k: t, n: d }, PLAIN, &scores_grad, &k, &mut q_grad).unwrap();
		let mut k_grad = vec![0.0; k.len()];
		batched_matmul(blocks, MatmulShape { m: t, k: t, n: d }, LHS_T, &scores_grad, &q, &mut k_grad).unwrap();
		let _ = value_shape;

		// The same attention in f64: loss = Σ_b Σ_i Σ_e O[b,i,e] W[b,i,e].
		let wide = |x: &[f32]| x.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
		let forward = |q: &[f64], k: &[f64], v: &[f64]| -> Vec<f64> {
			let mut out = vec![0.0; blocks * t * d];
			for b in 0..blocks {
				let at = |x: &[f64], row: usize, e: usize| x[(b * t + row) * d + e];
				for i in 0..t {
					let z: Vec<f64> = (0..=i).map(|j| (0..d).map(|e| at(q, i, e) * at(k, j, e)).sum::<f64>() / (d as f64).sqrt()).collect();
					let max = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
					let sum: f64 = z.iter().map(|z| (z - max).exp()).sum();
					for e in 0..d {
						out[(b * t + i) * d + e] = (0..=i).map(|j| (z[j] - max).exp() / sum * at(v, j, e)).sum();
					}
				}
			}
			out
		};
		let loss = |q: &[f64], k: &[f64], v: &[f64]| -> f64 { forward(q, k, v).iter().zip(&w).map(|(o, &w)| o * f64::from(w)).sum() };
		let (q64, k64, v64) = (wide(&q), wide(&k), wide(&v));
		for (index, (&got, expected)) in out.iter().zip(forward(&q64, &k64, &v64)).enumerate() {
			assert!((f64::from(got) - expected).abs() < 5e-3, "O[{index}]: {got} against {expected}");
		}
		let h = 1e-6;
		for (name, analytic, which) in [("dQ", &q_grad, 0), ("dK", &k_grad, 1), ("dV", &v_grad, 2)] {
			for index in (0..analytic.len()).step_by(7) {
				let mut operands = [q64.clone(), k64.clone(), v64.clone()];
				operands[which][index] += h;
				let up = loss(&operands[0], &operands[1], &operands[2]);
				operands[which][index] -= 2.0 * h;
				let down = loss(&operands[0], &operands[1], &operands[2]);
				let expected = (up - down) / (2.0 * h);
				let got = f64::from(analytic[index]);
				assert!((got - expected).abs() < 5e-3 * (1.0 + expected.abs()), "{name}[{index}]: {got} against {expected}");
			}
		}
	}

	/// Each block is the single matmul of its blocks, bit for bit; bad lengths are refused.
	#[test]
	fn a_batch_is_its_blocks_matmuls() {
		let shape = MatmulShape { m: 5, k: 40, n: 6 };
		let (lhs, rhs) = (values(6, 3 * 200), values(7, 3 * 240));
		let mut out = vec![0.0; 3 * 30];
		batched_matmul(3, shape, PLAIN, &lhs, &rhs, &mut out).unwrap();
		for b in 0..3 {
			let mut alone = vec![0.0; 30];
			crate::ops::matmul::matmul(shape, PLAIN, &lhs[b * 200..(b + 1) * 200], &rhs[b * 240..(b + 1) * 240], &mut alone).unwrap();
			assert_eq!(alone.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), out[b * 30..(b + 1) * 30].iter().map(|v| v.to_bits()).collect::<Vec<_>>());
		}
		assert_eq!(batched_matmul(3, shape, PLAIN, &lhs, &rhs[1..], &mut out), Err(KernelError::LengthMismatch { operand: "rhs", expected: 720, actual: 719 }));
		assert_eq!(batched_matmul(0, shape, PLAIN, &[], &[], &mut []), Err(KernelError::EmptyDimension { dimension: "blocks" }));
	}
}

//! The arithmetic every operator is built from: the determinism contract in code.
//!
//! `docs/kernels.md` explains the choices; this module states them exactly.
//!
//! 1. **Operations.** Only IEEE-754 binary32 addition, subtraction and
//!    multiplication, rounded to nearest-even, plus operations that are exact on
//!    every device: comparisons, `max`/`min` of non-NaN values, sign changes, bit
//!    and integer operations on `to_bits()`, and conversions between `f32` and
//!    integers of values that convert exactly. Vulkan guarantees correct rounding
//!    for these three operations only; division, `sqrt`, `exp` and `log` are
//!    built from them in [`crate::arith::math`].
//! 2. **Products.** Every product passes through [`flush`] before it is used:
//!    [`mul`] is the only multiplication operators use. The flush is an integer
//!    mask on the product's bits, so no compiler can fuse the product into a
//!    following addition (FMA contraction needs the unrounded product to feed the
//!    add directly). The one exception is the contraction of
//!    [`quantize_operand`]-rounded operands (matmul, convolution), whose products
//!    are exact, so fusing or not gives the same bits.
//! 3. **Tiny values.** `flush` replaces every value below 2⁻¹⁰³ in magnitude by
//!    `+0`. Every value the contract produces is therefore a multiple of 2⁻¹²⁶:
//!    products are flushed onto that grid, and sums and differences of grid
//!    values stay on it (they are exact while below 2⁻¹⁰², and round to coarser
//!    multiples above). A non-zero multiple of 2⁻¹²⁶ is a normal number, so no
//!    subnormal ever exists, and a device that flushes subnormals (or one that
//!    does not) computes the same bits. The threshold sits 23 binades above the
//!    subnormal range, so every device's treatment of an underflowing product
//!    (flushed before or after rounding, or kept) lands below it and is erased.
//! 4. **Reductions.** Sums run in 32-wide chunks: each chunk is summed
//!    sequentially from `+0` in index order, then the chunk sums are folded
//!    sequentially from `+0` in chunk order ([`chunked_sum`]). Never split-K,
//!    never atomics, never a tree that depends on the device.
//! 5. **Zero sign and non-finite values.** The sign of a zero is not part of the
//!    contract (Vulkan may drop it): hashes encode `-0` as `+0`
//!    ([`canonical_bits`]) and no operator lets a zero's sign reach a non-zero
//!    result. Infinities and NaNs are outside the contract: a training step that
//!    produces one is invalid, and its bits are not compared.


/// Width of a reduction chunk: the K-chunk of a contraction and the chunk of every sum.
pub mod math;
pub mod rng;

pub const CHUNK: usize = 32;

/// Edge of an output tile: the unit a dispute narrows a contraction to (with one K-chunk).
///
/// The tile is a commitment layout, not an arithmetic rule: an output element's
/// value depends on the K-chunking only, so a device may tile however it likes.
pub const TILE: usize = 32;

/// Smallest magnitude that [`flush`] keeps: 2⁻¹⁰³.
pub const FLUSH_THRESHOLD: f32 = f32::from_bits(FLUSH_EXPONENT_FIELD << MANTISSA_BITS);

/// Significand bits (the implicit leading one included) that
/// [`quantize_operand`] keeps: products of two such values need at most 24 bits
/// and are exact in `f32`.
pub const OPERAND_SIGNIFICAND_BITS: u32 = 12;

/// Smallest magnitude that [`quantize_operand`] keeps: 2⁻⁵², so that every
/// operand is a multiple of 2⁻⁶³ and every product a multiple of 2⁻¹²⁶.
pub const OPERAND_FLUSH_THRESHOLD: f32 = f32::from_bits(OPERAND_EXPONENT_FIELD << MANTISSA_BITS);

/// Bits of the `f32` mantissa field.
pub(crate) const MANTISSA_BITS: u32 = 23;
/// The sign bit of an `f32`.
pub(crate) const SIGN_MASK: u32 = 0x8000_0000;
/// The exponent field of an `f32`.
pub(crate) const EXPONENT_MASK: u32 = 0x7F80_0000;
/// Exponent field of 2⁻¹⁰³ (bias 127).
const FLUSH_EXPONENT_FIELD: u32 = 127 - 103;
/// Exponent field of 2⁻⁵² (bias 127).
const OPERAND_EXPONENT_FIELD: u32 = 127 - 52;
/// Low mantissa bits that [`quantize_operand`] rounds away.
const OPERAND_DROPPED_BITS: u32 = MANTISSA_BITS + 1 - OPERAND_SIGNIFICAND_BITS;

/// Replaces a value below [`FLUSH_THRESHOLD`] in magnitude (zeros of either
/// sign included) by `+0`; returns every other value unchanged.
///
/// Written as an integer mask so that a port computes it with integer
/// operations too, which also keeps the product it is applied to from being
/// fused into a later addition.
#[inline(always)]
pub fn flush(value: f32) -> f32 {
	let bits = value.to_bits();
	let keep = if bits & EXPONENT_MASK >= FLUSH_EXPONENT_FIELD << MANTISSA_BITS { u32::MAX } else { 0 };
	f32::from_bits(bits & keep)
}

/// The contract's multiplication: the correctly rounded product, flushed.
#[inline(always)]
pub fn mul(a: f32, b: f32) -> f32 {
	flush(a * b)
}

/// Rounds a contraction operand to [`OPERAND_SIGNIFICAND_BITS`] significant
/// bits, to nearest with ties to even, and replaces results below
/// [`OPERAND_FLUSH_THRESHOLD`] in magnitude by `+0`.
///
/// This is the precision NVIDIA's TF32 tensor cores give fp32 matmuls (one bit
/// more), chosen because it makes every product exact: see the module docs.
#[inline(always)]
pub fn quantize_operand(value: f32) -> f32 {
	let bits = value.to_bits();
	let magnitude = bits & !SIGN_MASK;
	let half = (1u32 << (OPERAND_DROPPED_BITS - 1)) - 1;
	let odd = (magnitude >> OPERAND_DROPPED_BITS) & 1;
	// A carry out of the mantissa into the exponent is the correct rounding.
	let rounded = (magnitude + half + odd) & !((1u32 << OPERAND_DROPPED_BITS) - 1);
	if rounded >= OPERAND_EXPONENT_FIELD << MANTISSA_BITS {
		f32::from_bits(rounded | (bits & SIGN_MASK))
	} else {
		0.0
	}
}

/// The bits a hash sees for `value`: `-0` is encoded as `+0`.
#[inline(always)]
pub fn canonical_bits(value: f32) -> u32 {
	if value == 0.0 {
		0
	} else {
		value.to_bits()
	}
}

/// Brings external values (a dataset, hyper-parameters, loaded weights) onto
/// the contract's grid by flushing each one; see rule 3 of the module docs.
pub fn canonicalize(values: &mut [f32]) {
	for value in values {
		*value = flush(*value);
	}
}

/// Sums `values` in the contract's order: 32-wide chunks, each summed
/// sequentially from `+0`, and the chunk sums folded sequentially from `+0`.
///
/// No flush is needed inside: sums of grid values stay on the grid.
pub fn chunked_sum(values: impl IntoIterator<Item = f32>) -> f32 {
	let mut total = 0.0f32;
	let mut chunk_sum = 0.0f32;
	let mut in_chunk = 0usize;
	for value in values {
		chunk_sum += value;
		in_chunk += 1;
		if in_chunk == CHUNK {
			total += chunk_sum;
			chunk_sum = 0.0;
			in_chunk = 0;
		}
	}
	if in_chunk > 0 {
		total += chunk_sum;
	}
	total
}

/// Number of [`CHUNK`]-wide chunks that cover `len` elements.
#[inline]
pub fn chunk_count(len: usize) -> usize {
	len.div_ceil(CHUNK)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn flush_keeps_the_threshold_and_drops_below_it() {
		assert_eq!(FLUSH_THRESHOLD, 2f32.powi(-103));
		assert_eq!(flush(FLUSH_THRESHOLD), FLUSH_THRESHOLD);
		assert_eq!(flush(-FLUSH_THRESHOLD), -FLUSH_THRESHOLD);
		let below = f32::from_bits(FLUSH_THRESHOLD.to_bits() - 1);
		assert_eq!(flush(below).to_bits(), 0);
		assert_eq!(flush(-below).to_bits(), 0);
		assert_eq!(flush(-0.0).to_bits(), 0);
		assert_eq!(flush(f32::from_bits(1)).to_bits(), 0);
		assert_eq!(flush(1.5), 1.5);
		assert_eq!(flush(f32::MAX), f32::MAX);
	}

	#[test]
	fn quantize_rounds_to_nearest_even_at_twelve_bits() {
		// 1 + 2^-11 is representable; 1 + 2^-12 is a tie that rounds to even (1).
		assert_eq!(quantize_operand(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-11));
		assert_eq!(quantize_operand(1.0 + 2f32.powi(-12)), 1.0);
		assert_eq!(quantize_operand(1.0 + 3.0 * 2f32.powi(-12)), 1.0 + 2.0 * 2f32.powi(-11));
		assert_eq!(quantize_operand(1.0 + 2f32.powi(-12) + 2f32.powi(-20)), 1.0 + 2f32.powi(-11));
		assert_eq!(quantize_operand(-3.0), -3.0);
		// Just below 2: rounds up across the binade.
		assert_eq!(quantize_operand(f32::from_bits(0x3FFF_FFFF)), 2.0);
		assert_eq!(quantize_operand(OPERAND_FLUSH_THRESHOLD), OPERAND_FLUSH_THRESHOLD);
		assert_eq!(quantize_operand(OPERAND_FLUSH_THRESHOLD * 0.75).to_bits(), 0);
		assert_eq!(quantize_operand(-0.0).to_bits(), 0);
	}

	#[test]
	fn quantized_products_are_exact_and_on_the_grid() {
		let samples = [1.0f32 / 3.0, -7.123_456, 2f32.powi(-52) * 1.999, 1.0e15, -0.1, 2f32.powi(-40) * 1.3];
		for &a in &samples {
			for &b in &samples {
				let (qa, qb) = (quantize_operand(a), quantize_operand(b));
				let exact = f64::from(qa) * f64::from(qb);
				assert_eq!(f64::from(qa * qb), exact);
				let on_grid = exact / 2f64.powi(-126);
				assert_eq!(on_grid, on_grid.trunc());
			}
		}
	}

	#[test]
	fn chunked_sum_folds_chunks_in_order() {
		let values: [f32; 70] = core::array::from_fn(|i| 1.0 / (i as f32 + 1.0));
		let mut expected = 0.0f32;
		for chunk in values.chunks(CHUNK) {
			let mut partial = 0.0f32;
			for &v in chunk {
				partial += v;
			}
			expected += partial;
		}
		assert_eq!(chunked_sum(values).to_bits(), expected.to_bits());
		assert_eq!(chunked_sum(core::iter::empty()).to_bits(), 0);
		assert_eq!(chunk_count(64), 2);
		assert_eq!(chunk_count(65), 3);
	}

	#[test]
	fn canonical_bits_merge_zero_signs() {
		assert_eq!(canonical_bits(-0.0), canonical_bits(0.0));
		assert_eq!(canonical_bits(-1.0), (-1.0f32).to_bits());
	}
}

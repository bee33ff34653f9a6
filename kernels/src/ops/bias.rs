//! Bias addition and its gradient.
//!
//! # Contract
//!
//! A bias broadcasts over a tensor laid out as `[outer, channels, inner]`
//! ([`BiasLayout`]): a dense layer's `[rows, features]` is
//! `outer = rows, inner = 1`, a convolution's `[N, C, OH, OW]` is
//! `outer = N, inner = OH·OW`.
//!
//! - Forward: `x[o,c,i] ← x[o,c,i] + b[c]`, one correctly rounded addition.
//! - Gradient: `db[c]` sums `dy[o,c,i]` over the sequence `(o, i)` flattened in
//!   that order (o outer), in 32-wide chunks, each chunk sequentially from
//!   `+0`, the chunk sums folded sequentially from `+0` (the contract's
//!   [`chunked_sum`](crate::arith::chunked_sum)). No products, so no flush.

use alloc::vec;

use crate::arith::CHUNK;
use crate::error::{check_len, check_nonzero, element_count, KernelError};

/// How a per-channel bias broadcasts over a `[outer, channels, inner]` tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BiasLayout {
	/// Extent before the channel axis (the batch).
	pub outer: usize,
	/// Extent of the channel axis: the bias length.
	pub channels: usize,
	/// Extent after the channel axis (spatial positions; 1 for a dense layer).
	pub inner: usize,
}

impl BiasLayout {
	/// A dense layer's `[rows, features]` activations.
	pub fn dense(rows: usize, features: usize) -> Self {
		Self { outer: rows, channels: features, inner: 1 }
	}

	/// A convolution's `[batch, channels, spatial]` activations.
	pub fn channels_first(batch: usize, channels: usize, spatial: usize) -> Self {
		Self { outer: batch, channels, inner: spatial }
	}

	/// Elements of the tensor the bias broadcasts over, after validation.
	pub fn values_len(&self) -> Result<usize, KernelError> {
		check_nonzero("outer", self.outer)?;
		check_nonzero("channels", self.channels)?;
		check_nonzero("inner", self.inner)?;
		element_count(&[self.outer, self.channels, self.inner])
	}
}

/// `values[o,c,i] += bias[c]`.
pub fn bias_add(layout: BiasLayout, values: &mut [f32], bias: &[f32]) -> Result<(), KernelError> {
	check_len("values", values.len(), layout.values_len()?)?;
	check_len("bias", bias.len(), layout.channels)?;
	// Walk [outer, channels, inner] as nested runs rather than dividing each
	// position: the same one addition per element.
	for block in values.chunks_exact_mut(layout.channels * layout.inner) {
		if layout.inner == 1 {
			// A dense layer's row: one vectorisable pass.
			for (element, &value) in block.iter_mut().zip(bias) {
				*element += value;
			}
			continue;
		}
		for (run, &value) in block.chunks_exact_mut(layout.inner).zip(bias) {
			for element in run {
				*element += value;
			}
		}
	}
	Ok(())
}

/// `bias_grad[c]` = chunked sum of `out_grad[o,c,i]` over `(o, i)`.
pub fn bias_grad(layout: BiasLayout, out_grad: &[f32], bias_grad: &mut [f32]) -> Result<(), KernelError> {
	check_len("out_grad", out_grad.len(), layout.values_len()?)?;
	check_len("bias_grad", bias_grad.len(), layout.channels)?;
	// All channels see the same (o, i) sequence, so they share chunk boundaries:
	// accumulate every channel's current chunk side by side.
	let mut chunk_sums = vec![0.0f32; layout.channels];
	bias_grad.fill(0.0);
	let mut in_chunk = 0usize;
	for outer in 0..layout.outer {
		for inner in 0..layout.inner {
			for (channel, sum) in chunk_sums.iter_mut().enumerate() {
				let at = (outer * layout.channels + channel) * layout.inner + inner;
				*sum += out_grad.get(at).copied().unwrap_or_default();
			}
			in_chunk += 1;
			if in_chunk == CHUNK {
				fold_into(bias_grad, &mut chunk_sums);
				in_chunk = 0;
			}
		}
	}
	if in_chunk > 0 {
		fold_into(bias_grad, &mut chunk_sums);
	}
	Ok(())
}

/// `totals += chunk_sums`, then clears `chunk_sums` for the next chunk.
fn fold_into(totals: &mut [f32], chunk_sums: &mut [f32]) {
	for (total, sum) in totals.iter_mut().zip(chunk_sums.iter_mut()) {
		*total += *sum;
		*sum = 0.0;
	}
}

//! Softmax cross-entropy over class logits, with its gradient; arg-max for accuracy.
//!
//! # Contract
//!
//! Logits are `[rows, classes]`, labels one `u32` per row; the loss is the
//! mean over rows (PyTorch's default reduction). `⊗` is the contract
//! multiplication, `exp`, `log` and `recip` are [`crate::arith::math`]'s. Per row:
//!
//! 1. `m` = the maximum logit (exact; order does not matter);
//! 2. `d_j = z_j − m` and `e_j = exp(d_j)`;
//! 3. `s` = chunked sum of `e_j` over j (32-wide chunks, each sequential from
//!    `+0`, chunk sums folded from `+0`), and `r = recip(s)`;
//! 4. row loss `ℓ = log(s) − d_t`, t the label;
//! 5. gradient `dz_j = ((e_j ⊗ r) − [j = t]) ⊗ b` with `b = recip(rows)`.
//!
//! The loss is `(chunked sum of ℓ over rows) ⊗ b`.
//!
//! A row as wide as a vocabulary splits into spans of whole 32-wide chunks without new
//! arithmetic: `m` is the largest of the spans' maxima ([`span_max`], exact), and step 3's
//! chunk sums fold sequentially, so the fold over a row is the fold over its spans, each
//! continuing from the state the one before left ([`span_fold`]); with `m` and `s` known,
//! each span's gradient is its own ([`span_grad`], from the `e_j` its fold staged). A piece of a dispute then reads one
//! span, never the whole row; [`softmax_row`] is these pieces over one span.

use crate::arith::{chunked_sum, mul, CHUNK};
use crate::error::{check_len, check_nonzero, element_count, KernelError};
use crate::arith::math::{exp, log, recip};

/// Dimensions of a batch of class logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassifierShape {
	/// Rows (examples).
	pub rows: usize,
	/// Classes per row.
	pub classes: usize,
}

impl ClassifierShape {
	/// Elements of the logits, after validation.
	pub fn logits_len(&self) -> Result<usize, KernelError> {
		check_nonzero("rows", self.rows)?;
		check_nonzero("classes", self.classes)?;
		element_count(&[self.rows, self.classes])
	}
}

/// Checks the logits and labels against `shape`, every label against the class count.
fn validate(shape: ClassifierShape, logits: &[f32], labels: &[u32]) -> Result<(), KernelError> {
	check_len("logits", logits.len(), shape.logits_len()?)?;
	check_len("labels", labels.len(), shape.rows)?;
	for (row, &label) in labels.iter().enumerate() {
		if usize::try_from(label).map_or(true, |label| label >= shape.classes) {
			return Err(KernelError::LabelOutOfRange { row, label, classes: shape.classes });
		}
	}
	Ok(())
}

/// Mean softmax cross-entropy of `logits` against `labels`; writes its
/// gradient with respect to the logits into `logits_grad` and returns the loss.
pub fn softmax_cross_entropy(
	shape: ClassifierShape,
	logits: &[f32],
	labels: &[u32],
	logits_grad: &mut [f32],
) -> Result<f32, KernelError> {
	validate(shape, logits, labels)?;
	check_len("logits_grad", logits_grad.len(), logits.len())?;
	let batch_scale = recip(shape.rows as f32);
	let mut row_losses = alloc::vec::Vec::with_capacity(shape.rows);
	for ((row_logits, row_grad), &label) in
		logits.chunks_exact(shape.classes).zip(logits_grad.chunks_exact_mut(shape.classes)).zip(labels)
	{
		row_losses.push(softmax_row(row_logits, label as usize, batch_scale, row_grad));
	}
	Ok(mul(chunked_sum(row_losses), batch_scale))
}

/// Steps 1–5 for one row whose label is valid: writes `dz` into `row_grad`
/// and returns the row loss `ℓ`. `batch_scale` is `recip(rows)`.
///
/// The referee recomputes rows one at a time through this same function.
pub fn softmax_row(row_logits: &[f32], label: usize, batch_scale: f32, row_grad: &mut [f32]) -> f32 {
	let max = span_max(row_logits);
	let sum = span_fold(row_logits, max, 0.0, row_grad);
	span_grad(row_grad, 0, label, sum, batch_scale);
	row_loss(max, sum, row_logits.get(label).copied().unwrap_or_default())
}

/// Step 1 over a span of a row: its largest logit. The row's `m` is the largest of its
/// spans' (exact, in any order).
pub fn span_max(span_logits: &[f32]) -> f32 {
	span_logits.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// Steps 2–3 continued over a span of whole 32-wide chunks (the row's last span may end
/// in a partial one): stages `e_j = exp(z_j − max)` in `exps` and, from `state`, the fold
/// the spans before left (`+0` for the first), adds each chunk's sum of them from `+0` in
/// order. After the row's last span the state is the row's `s`.
pub fn span_fold(span_logits: &[f32], max: f32, state: f32, exps: &mut [f32]) -> f32 {
	let mut total = state;
	for (chunk, staged) in span_logits.chunks(CHUNK).zip(exps.chunks_mut(CHUNK)) {
		let mut chunk_sum = 0.0f32;
		for (e, &z) in staged.iter_mut().zip(chunk) {
			*e = exp(z - max);
			chunk_sum += *e;
		}
		total += chunk_sum;
	}
	total
}

/// Step 5 over a span of a row whose first column is `first`, in place: the span's `e_j`,
/// staged by [`span_fold`], become `dz_j = ((e_j ⊗ recip(s)) − [j = label]) ⊗ batch_scale`.
pub fn span_grad(values: &mut [f32], first: usize, label: usize, sum: f32, batch_scale: f32) {
	let inverse_sum = recip(sum);
	for (column, value) in values.iter_mut().enumerate() {
		let target = if first + column == label { 1.0 } else { 0.0 };
		*value = mul(mul(*value, inverse_sum) - target, batch_scale);
	}
}

/// Step 4: the row loss `ℓ = log(s) − (z_t − m)` from the row's `m`, `s` and label logit.
pub fn row_loss(max: f32, sum: f32, label_logit: f32) -> f32 {
	log(sum) - (label_logit - max)
}

/// Index of each row's largest logit (the first one on ties), for accuracy.
pub fn argmax_rows(shape: ClassifierShape, logits: &[f32], predictions: &mut [u32]) -> Result<(), KernelError> {
	check_len("logits", logits.len(), shape.logits_len()?)?;
	check_len("predictions", predictions.len(), shape.rows)?;
	for (row_logits, prediction) in logits.chunks_exact(shape.classes).zip(predictions.iter_mut()) {
		let mut best = 0usize;
		for (class, &z) in row_logits.iter().enumerate() {
			if z > row_logits.get(best).copied().unwrap_or(f32::NEG_INFINITY) {
				best = class;
			}
		}
		*prediction = best as u32;
	}
	Ok(())
}

#[cfg(test)]
mod tests {
	use super::*;
	use alloc::vec;
	use alloc::vec::Vec;

	/// A vocabulary-wide row (50,000 logits, not a whole number of chunks) recomputed span
	/// by span, as a dispute's pieces would, gives the whole row's loss and gradient bit for
	/// bit: the maximum from the spans' maxima, the sum by folding the spans in order from
	/// `+0`, and each span's gradient from the two.
	#[test]
	fn a_wide_row_recomputed_span_by_span_is_the_whole_row() {
		let width = 50_000;
		let mut logits = vec![0.0f32; width];
		crate::RandomStream::new(5, 19).fill_uniform(-12.0, 12.0, &mut logits);
		let (label, batch_scale) = (31_337, recip(64.0));
		let mut whole = vec![0.0f32; width];
		let loss = softmax_row(&logits, label, batch_scale, &mut whole);

		let span = 40 * CHUNK;
		let max = logits.chunks(span).map(span_max).fold(f32::NEG_INFINITY, f32::max);
		let mut pieces = vec![0.0f32; width];
		let sum = logits
			.chunks(span)
			.zip(pieces.chunks_mut(span))
			.fold(0.0, |state, (span_logits, exps)| span_fold(span_logits, max, state, exps));
		for (index, values) in pieces.chunks_mut(span).enumerate() {
			span_grad(values, index * span, label, sum, batch_scale);
		}
		let bits = |values: &[f32]| values.iter().map(|value| value.to_bits()).collect::<Vec<u32>>();
		assert_eq!(bits(&pieces), bits(&whole));
		assert_eq!(row_loss(max, sum, logits[label]).to_bits(), loss.to_bits());
		assert!(whole[label] < 0.0 && whole.iter().enumerate().all(|(j, &dz)| j == label || dz >= 0.0));
	}
}

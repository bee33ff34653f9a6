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

use crate::arith::{chunked_sum, mul};
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
	let max = row_logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
	// Stage e_j in the gradient row; it becomes dz_j below.
	for (e, &z) in row_grad.iter_mut().zip(row_logits) {
		*e = exp(z - max);
	}
	let sum = chunked_sum(row_grad.iter().copied());
	let inverse_sum = recip(sum);
	let label_shifted = row_logits.get(label).copied().unwrap_or_default() - max;
	for (class, dz) in row_grad.iter_mut().enumerate() {
		let target = if class == label { 1.0 } else { 0.0 };
		*dz = mul(mul(*dz, inverse_sum) - target, batch_scale);
	}
	log(sum) - label_shifted
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

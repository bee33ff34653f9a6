//! The sum of two values of the same shape: the residual stream's `h + f(h)`, and a value
//! read by several operators summing its readers' gradients in graph order.
//!
//! # Contract
//!
//! `into_i = into_i + other_i`: one correctly rounded `f32` addition per element, nothing
//! else. Where three or more terms meet, the caller adds them one at a time in the order
//! the graph writes down (two terms commute bit for bit; three do not).

use crate::error::{check_len, KernelError};

/// `into += other`, element by element.
pub fn add_assign(into: &mut [f32], other: &[f32]) -> Result<(), KernelError> {
	check_len("other", other.len(), into.len())?;
	for (total, &value) in into.iter_mut().zip(other) {
		*total += value;
	}
	Ok(())
}

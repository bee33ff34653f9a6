//! Row gathering: assembling a batch from a dataset by index.
//!
//! # Contract
//!
//! A pure copy: `destination[r] = source[indices[r]]`, row by row, bits
//! unchanged. No arithmetic, so nothing to pin.

use crate::error::{check_len, check_nonzero, element_count, KernelError};

/// Copies rows `indices[0], indices[1], …` of `source` (rows of `row_len`
/// elements) into consecutive rows of `destination`.
pub fn gather_rows(
	source: &[f32],
	row_len: usize,
	indices: &[u32],
	destination: &mut [f32],
) -> Result<(), KernelError> {
	check_nonzero("row_len", row_len)?;
	check_len("destination", destination.len(), element_count(&[indices.len(), row_len])?)?;
	let source_rows = source.len() / row_len;
	check_len("source", source.len(), element_count(&[source_rows, row_len])?)?;
	for (row, &index) in destination.chunks_exact_mut(row_len).zip(indices) {
		let start = usize::try_from(index).map_err(|_| KernelError::IndexOutOfRange { index, rows: source_rows })?;
		let values = source
			.get(start.saturating_mul(row_len)..start.saturating_mul(row_len).saturating_add(row_len))
			.filter(|_| start < source_rows)
			.ok_or(KernelError::IndexOutOfRange { index, rows: source_rows })?;
		row.copy_from_slice(values);
	}
	Ok(())
}

//! The backward pass of a table looked up by index (token and position embeddings): a
//! scatter-add in a pinned order.
//!
//! # Contract
//!
//! The forward pass is [`crate::ops::gather::gather_rows`], a copy: `y[r] = table[ids[r]]`.
//! Its backward pass, for every table row `v` and column `c`:
//! `dtable[v][c] = Σ_{r : ids[r] = v} dy[r][c]`, over the rows that looked `v` up in
//! increasing row order, as a chunked sum from `+0` (rule 4); a table row nobody looked up
//! gets `+0`. For a batch of sequences laid out row-major (`r = sequence · T + position`)
//! the order is by token, then by sequence, then by position. Never float atomics: a
//! device sorts the rows by index (a stable counting sort keeps each index's rows in row
//! order) and sums each index's rows.
//!
//! The gradient is written, not accumulated: a table with two consumers (embeddings tied
//! to the output projection) sums its gradients in graph order, outside the operator.

use alloc::vec;
use alloc::vec::Vec;

use crate::arith::chunked_sum;
use crate::error::{check_len, check_nonzero, element_count, KernelError};

/// The rows that looked up each table row, in row order: `(starts, rows)` where the rows
/// of table row `v` are `rows[starts[v]..starts[v + 1]]` (a stable counting sort).
/// Refuses an index not below `table_rows`.
pub fn rows_by_index(ids: &[u32], table_rows: usize) -> Result<(Vec<usize>, Vec<usize>), KernelError> {
	let mut starts = vec![0usize; table_rows + 1];
	for &id in ids {
		let index = usize::try_from(id)
			.ok()
			.filter(|&index| index < table_rows)
			.ok_or(KernelError::IndexOutOfRange { index: id, rows: table_rows })?;
		starts[index + 1] += 1;
	}
	for v in 0..table_rows {
		starts[v + 1] += starts[v];
	}
	let mut next = starts.clone();
	let mut rows = vec![0usize; ids.len()];
	for (row, &id) in ids.iter().enumerate() {
		// Checked above: every id indexes the table.
		let slot = &mut next[id as usize];
		rows[*slot] = row;
		*slot += 1;
	}
	Ok((starts, rows))
}

/// The table's gradient `dtable` (`table_rows × row_len`) from the output gradient `dy`
/// (`ids.len() × row_len`) of the lookup of `ids`.
pub fn scatter_add_rows(dy: &[f32], row_len: usize, ids: &[u32], table_rows: usize, dtable: &mut [f32]) -> Result<(), KernelError> {
	check_nonzero("row_len", row_len)?;
	check_nonzero("table_rows", table_rows)?;
	check_len("dy", dy.len(), element_count(&[ids.len(), row_len])?)?;
	check_len("dtable", dtable.len(), element_count(&[table_rows, row_len])?)?;
	let (starts, rows) = rows_by_index(ids, table_rows)?;
	for (v, out) in dtable.chunks_exact_mut(row_len).enumerate() {
		let looked_up = &rows[starts[v]..starts[v + 1]];
		for (column, total) in out.iter_mut().enumerate() {
			*total = chunked_sum(looked_up.iter().map(|&row| dy[row * row_len + column]));
		}
	}
	Ok(())
}

#[cfg(test)]
mod tests {
	use super::*;

	/// Each table row's gradient is the chunked sum of the rows that looked it up, in row
	/// order, bit for bit: with more than a chunk of them (so the sum folds), a table row
	/// never looked up gets `+0`, and an index out of the table is refused.
	#[test]
	fn each_table_row_sums_its_lookups_in_row_order() {
		let (table_rows, row_len) = (5, 3);
		// Token 1 is looked up 40 times, token 3 twice, token 4 once, tokens 0 and 2 never.
		let mut ids: Vec<u32> = (0..40).map(|_| 1).collect();
		ids.insert(7, 3);
		ids.insert(29, 4);
		ids.push(3);
		let mut dy = vec![0.0f32; ids.len() * row_len];
		crate::RandomStream::new(9, 17).fill_uniform(-1.0, 1.0, &mut dy);
		let mut dtable = vec![f32::NAN; table_rows * row_len];
		scatter_add_rows(&dy, row_len, &ids, table_rows, &mut dtable).unwrap();
		for v in 0..table_rows {
			for column in 0..row_len {
				let expected = chunked_sum(
					ids.iter().enumerate().filter(|&(_, &id)| id as usize == v).map(|(row, _)| dy[row * row_len + column]),
				);
				assert_eq!(dtable[v * row_len + column].to_bits(), expected.to_bits(), "table row {v} column {column}");
			}
		}
		assert!(dtable[..row_len].iter().chain(&dtable[2 * row_len..3 * row_len]).all(|g| g.to_bits() == 0));
		let (starts, rows) = rows_by_index(&ids, table_rows).unwrap();
		assert_eq!(starts, [0, 0, 40, 40, 42, 43]);
		assert!(rows[..40].windows(2).all(|pair| pair[0] < pair[1]), "a token's rows are in row order");
		ids[3] = 5;
		assert_eq!(
			scatter_add_rows(&dy, row_len, &ids, table_rows, &mut dtable),
			Err(KernelError::IndexOutOfRange { index: 5, rows: 5 })
		);
	}
}

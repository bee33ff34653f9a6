//! The running sums of the reductions: the pieces that let the referee judge
//! a bias gradient, the loss and the clipping norm a chunk at a time.
//!
//! # Why
//!
//! A reduction's output depends on every element of its input, so judging it
//! whole would cost the referee time in proportion to the model. Rule 4 folds
//! 32-term chunk sums in sequence, so the running total after any chunk is a
//! natural checkpoint, as a contraction's accumulator after a K-chunk is. A
//! reduction's piece tree therefore starts with these running totals, its
//! *partials*, arranged in lanes of spans:
//!
//! | operator | lanes | one span | words | a piece reads |
//! |---|---|---|---|---|
//! | bias gradient | one per 32-channel tile | one 32-position chunk of `(outer, inner)` | the tile's running sums | ≤ 32×32 output-gradient elements |
//! | softmax cross-entropy | one | one 32-row chunk of row losses | 1 | ≤ 32 rows of logits and their labels |
//! | the same, rows wider than [`LOSS_SPAN`]: a max lane per row | | one span of the row | 1 | one span of logits |
//! | a sum lane per row | | one span of the row | 3 | one span of logits, the label, the row's maximum |
//! | the loss lane | | [`LOSS_LANE_ROWS`] row losses | 2 | those rows' last sum partials |
//! | clipping | one per gradient tensor | 32 chunks (1,024 elements) of `g ⊗ g` | 1 | ≤ 1,024 gradient elements |
//! | clipping, last lane (totals) | | one tensor | 1 | two earlier partials |
//! | a norm's backward, `dγ` | one per 32-column tile | one 32-row chunk of `dy ⊗ x̂` | the tile's running sums | the tile's `dy` and the forward's `x̂` |
//! | the same, `dβ` (LayerNorm) | one per 32-column tile | one 32-row chunk of `dy` | the tile's running sums | the tile's `dy` |
//! | a scatter-add (an embedding's gradient) | one per (table row, 32-column tile) | [`SCATTER_SPAN`] looked-up rows | `[count, totals, chunk sums]` of the tile | the span's ids, and the tile's `dy` of the rows that looked the table row up |
//!
//! A partial is `previous + Σ(span)`, where `previous` is the lane's partial
//! before it (`+0` for the first) and `Σ` folds the span's chunk sums exactly
//! as [`chunked_sum`](crate::arith::chunked_sum) does. So a lane's last
//! partial equals the operator's sum bit for bit. The totals lane of clipping
//! is `T_i = T_{i−1} + (tensor i's last partial)` from `T_{−1} = +0`, the fold
//! of [`global_grad_norm`](crate::ops::optim::global_grad_norm).
//!
//! The output segments, which follow the partials in the piece tree, read
//! partials instead of whole inputs:
//!
//! - a bias-gradient segment is its tile's last partial;
//! - the loss is the last partial `⊗ recip(rows)` (for wide rows, `total + chunk`);
//! - a logits-gradient segment recomputes the rows it touches ([`softmax_row`]), or for
//!   wide rows its own elements from their rows' last sum partials ([`span_grad`]);
//! - a clipped gradient segment scales its input segment by the coefficient of
//!   `sqrt(last total)` ([`clip_coefficient`]); the norm is that square root;
//! - a norm's `dx` segment recomputes the rows it touches ([`backward_row`]), its `dγ` and
//!   `dβ` segments are their tiles' last partials;
//! - a scatter-add's segment finishes its lanes' last partials: `total + chunk` where the
//!   last chunk is not empty, as [`chunked_sum`](crate::arith::chunked_sum) ends.
//!
//! The same functions compute the partials on the prover's host
//! ([`Reduction::partials`]) and single pieces in the referee, through a
//! [`Source`] of input words and earlier pieces.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::ops::bias::BiasLayout;
use crate::arith::{mul, CHUNK, TILE};
use crate::error::KernelError;
use crate::ops::loss::{row_loss, softmax_row, span_fold, span_grad, span_max, ClassifierShape};
use crate::arith::math::{exp, recip, sqrt};
use crate::proof::merkle::SEGMENT;
use crate::ops::norm::{backward_row, Norm, NormShape, RowScratch};
use crate::ops::optim::clip_coefficient;

// A bias-gradient tile is exactly one output segment (`output_segment` reads a
// segment's channels from the partial of the lane with the segment's number).
const _: () = assert!(TILE == SEGMENT);

/// Chunks per span of a clipping lane.
pub const NORM_SPAN_CHUNKS: usize = 32;
/// Gradient elements per span of a clipping lane.
pub const NORM_SPAN: usize = NORM_SPAN_CHUNKS * CHUNK;

/// Classes per span of a wide loss row: rows of more classes than this are *wide*, and
/// their pieces read one span of a row at a time (see [`Reduction::SoftmaxCrossEntropy`]).
pub const LOSS_SPAN_CHUNKS: usize = 32;
/// Logits per span of a wide loss row.
pub const LOSS_SPAN: usize = LOSS_SPAN_CHUNKS * CHUNK;
/// Rows per span of a wide loss's loss lane: half a rule-4 chunk, so that a partial reads
/// its rows' sums and the partial before it without exceeding the referee's opened pieces.
pub const LOSS_LANE_ROWS: usize = CHUNK / 2;

/// Looked-up rows per span of a scatter-add lane: a partial reads at most this many rows
/// of one 32-column tile.
pub const SCATTER_SPAN: usize = 512;

/// Whether `shape`'s rows are wider than one [`LOSS_SPAN`].
pub fn is_wide(shape: ClassifierShape) -> bool {
	shape.classes > LOSS_SPAN
}

/// A reduction operator, with what its pieces' layout depends on.
#[derive(Clone, Debug, PartialEq)]
pub enum Reduction {
	/// The bias gradient: input the output gradient, output the bias gradient.
	BiasGrad(BiasLayout),
	/// Softmax cross-entropy: inputs logits and labels; outputs the loss and the logits' gradient.
	///
	/// Rows of at most [`LOSS_SPAN`] classes have one lane of row losses, a partial per
	/// 32-row chunk that recomputes its rows whole. A *wide* row (a vocabulary) is never
	/// read whole: its lanes are, for each row `r` in order, a **max lane** (one word: the
	/// running maximum after each [`LOSS_SPAN`] of the row, the first span's own maximum
	/// first), then for each row a **sum lane** (three words `[s, z_t, m]`: the running
	/// [`span_fold`] of `exp(z − m)` with `m` the max lane's last partial, the label's
	/// logit once a span holding it is passed (`+0` before), and `m`), then one **loss
	/// lane** of [`LOSS_LANE_ROWS`]-row spans (two words `[total, chunk]`: rule 4's fold of
	/// row losses `log(s) − (z_t − m)`, `chunk` the running sum inside the current 32-row
	/// chunk and `total` the chunks before it). A piece then reads one span of one row, or
	/// sixteen rows' sum partials.
	SoftmaxCrossEntropy(ClassifierShape),
	/// Global-norm clipping: inputs every gradient; outputs the clipped gradients, then the norm.
	ClipGradNorm {
		/// The largest norm left unscaled.
		max_norm: f32,
		/// Elements of each gradient, in input order.
		lens: Vec<usize>,
	},
	/// A normalisation's backward: inputs `x`, the gain, `dy` and the forward's `x̂`; outputs
	/// `dx`, `dγ` and for LayerNorm `dβ`. The lanes are `dγ`'s 32-column tiles, then `dβ`'s;
	/// a span is a 32-row chunk. A `dγ` partial reads its tile of `x̂`, never a whole row.
	NormGrad(NormShape),
	/// The gradient of a row lookup: inputs `dy` and the ids; output the table's gradient,
	/// each table row's chunked sum, in row order, of the rows that looked it up. A lane is
	/// one (table row, 32-column tile), in table order; a span is [`SCATTER_SPAN`] looked-up
	/// rows. A partial is `[count, total_j…, chunk_j…]`: rule 4's state after the span, the
	/// matching rows in the current chunk (an exact small integer), the fold of the closed
	/// chunks and the open chunk's sum, per column.
	ScatterAddRows {
		/// Words per row.
		row_len: usize,
		/// Rows of the table.
		table_rows: usize,
		/// Rows looked up.
		rows: usize,
	},
}

/// What recomputing one piece reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reads {
	/// `(input position, element range)` pairs.
	pub inputs: Vec<(usize, Range<usize>)>,
	/// Earlier pieces of the same operator, by piece index.
	pub pieces: Vec<usize>,
}

impl Reads {
	/// The segments of input `position` that the ranges touch, sorted and distinct.
	pub fn segments(&self, position: usize) -> Vec<usize> {
		let mut segments: Vec<usize> = self
			.inputs
			.iter()
			.filter(|(input, range)| *input == position && !range.is_empty())
			.flat_map(|(_, range)| range.start / SEGMENT..=(range.end - 1) / SEGMENT)
			.collect();
		segments.sort_unstable();
		segments.dedup();
		segments
	}
}

/// Where a piece's inputs come from: the prover's full tensors, or the
/// referee's proven openings.
pub trait Source {
	/// What a missing or malformed input is reported as.
	type Error: From<KernelError>;
	/// Word `index` of input `position`: an `f32`'s canonical bits or a `u32`.
	fn word(&self, position: usize, index: usize) -> Result<u32, Self::Error>;
	/// Piece `index` of this operator, which must hold `len` elements.
	fn piece(&self, index: usize, len: usize) -> Result<Vec<f32>, Self::Error>;
}

impl Reduction {
	/// Lanes of partials.
	pub fn lanes(&self) -> usize {
		match self {
			Self::BiasGrad(layout) => layout.channels.div_ceil(TILE),
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => 2 * shape.rows + 1,
			Self::SoftmaxCrossEntropy(_) => 1,
			Self::ClipGradNorm { lens, .. } => lens.len() + 1,
			Self::NormGrad(shape) => norm_tiles(*shape) * if shape.norm == Norm::Layer { 2 } else { 1 },
			Self::ScatterAddRows { row_len, table_rows, .. } => table_rows.saturating_mul(row_len.div_ceil(TILE)),
		}
	}

	/// Spans (partials) of lane `lane`; zero past the last lane.
	pub fn spans(&self, lane: usize) -> usize {
		if lane >= self.lanes() {
			return 0;
		}
		match self {
			Self::BiasGrad(layout) => layout.outer.saturating_mul(layout.inner).div_ceil(CHUNK),
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => match WideLane::of(*shape, lane) {
				WideLane::Max(_) | WideLane::Sum(_) => shape.classes.div_ceil(LOSS_SPAN),
				WideLane::Loss => shape.rows.div_ceil(LOSS_LANE_ROWS),
			},
			Self::SoftmaxCrossEntropy(shape) => shape.rows.div_ceil(CHUNK),
			Self::ClipGradNorm { lens, .. } => lens.get(lane).map_or(lens.len(), |len| len.div_ceil(NORM_SPAN)),
			Self::NormGrad(shape) => shape.rows.div_ceil(CHUNK),
			Self::ScatterAddRows { rows, .. } => rows.div_ceil(SCATTER_SPAN),
		}
	}

	/// Partials in all: the first pieces of the operator's tree.
	pub fn len(&self) -> usize {
		if let Self::ScatterAddRows { rows, .. } = self {
			return self.lanes().saturating_mul(rows.div_ceil(SCATTER_SPAN));
		}
		if let Self::SoftmaxCrossEntropy(shape) = self {
			if is_wide(*shape) {
				return 2 * shape.rows * shape.classes.div_ceil(LOSS_SPAN) + shape.rows.div_ceil(LOSS_LANE_ROWS);
			}
		}
		(0..self.lanes()).map(|lane| self.spans(lane)).sum()
	}

	/// Whether there are no partials (never, for a valid operator).
	pub fn is_empty(&self) -> bool {
		self.len() == 0
	}

	/// Piece index of partial `(lane, span)`.
	pub fn index(&self, lane: usize, span: usize) -> Option<usize> {
		if span >= self.spans(lane) {
			return None;
		}
		// Every lane of a scatter-add has the same spans: no walk over its lanes.
		if let Self::ScatterAddRows { rows, .. } = self {
			return Some(lane * rows.div_ceil(SCATTER_SPAN) + span);
		}
		// A wide loss's row lanes all have a row's spans: no walk over its thousands of lanes.
		if let Self::SoftmaxCrossEntropy(shape) = self {
			if is_wide(*shape) {
				return Some(lane.min(2 * shape.rows) * shape.classes.div_ceil(LOSS_SPAN) + span);
			}
		}
		Some((0..lane).map(|l| self.spans(l)).sum::<usize>() + span)
	}

	/// The `(lane, span)` of partial `index`.
	pub fn locate(&self, index: usize) -> Option<(usize, usize)> {
		if let Self::ScatterAddRows { rows, .. } = self {
			let spans = rows.div_ceil(SCATTER_SPAN).max(1);
			return (index < self.len()).then_some((index / spans, index % spans));
		}
		if let Self::SoftmaxCrossEntropy(shape) = self {
			if is_wide(*shape) {
				let row_spans = shape.classes.div_ceil(LOSS_SPAN);
				let (lane, span) = (index / row_spans, index % row_spans);
				if lane < 2 * shape.rows {
					return Some((lane, span));
				}
				let span = index - 2 * shape.rows * row_spans;
				return (span < self.spans(2 * shape.rows)).then_some((2 * shape.rows, span));
			}
		}
		let mut rest = index;
		for lane in 0..self.lanes() {
			let spans = self.spans(lane);
			if rest < spans {
				return Some((lane, rest));
			}
			rest -= spans;
		}
		None
	}

	/// Words in a partial of lane `lane`.
	pub fn width(&self, lane: usize) -> usize {
		match self {
			Self::BiasGrad(layout) => layout.channels.saturating_sub(lane * TILE).min(TILE),
			Self::NormGrad(shape) => norm_columns(*shape, lane).len(),
			Self::ScatterAddRows { row_len, .. } => 1 + 2 * scatter_columns(*row_len, lane).len(),
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => match WideLane::of(*shape, lane) {
				WideLane::Max(_) => 1,
				WideLane::Sum(_) => 3,
				WideLane::Loss => 2,
			},
			_ => 1,
		}
	}

	/// The last partial of lane `lane`.
	fn last(&self, lane: usize) -> Result<usize, KernelError> {
		self.index(lane, self.spans(lane).saturating_sub(1)).ok_or(KernelError::PieceOutOfRange { what: "lane", index: lane, count: self.lanes() })
	}

	/// The last total of clipping: the sum of squares of every gradient.
	fn total_piece(&self) -> Result<usize, KernelError> {
		self.last(self.lanes().saturating_sub(1))
	}

	/// The partial before `(lane, span)` in its lane, if any.
	fn previous(&self, lane: usize, span: usize) -> Option<usize> {
		span.checked_sub(1).and_then(|span| self.index(lane, span))
	}

	/// What recomputing partial `(lane, span)` reads.
	pub fn partial_reads(&self, lane: usize, span: usize) -> Result<Reads, KernelError> {
		if span >= self.spans(lane) {
			return Err(KernelError::PieceOutOfRange { what: "span", index: span, count: self.spans(lane) });
		}
		let mut reads = Reads { inputs: Vec::new(), pieces: self.previous(lane, span).into_iter().collect() };
		match self {
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => match WideLane::of(*shape, lane) {
				WideLane::Max(row) => reads.inputs.push((0, wide_span(*shape, row, span))),
				WideLane::Sum(row) => {
					reads.inputs.push((0, wide_span(*shape, row, span)));
					reads.inputs.push((1, row..row + 1));
					reads.pieces.push(self.last(row)?);
				},
				WideLane::Loss => {
					for row in loss_lane_rows(span, shape.rows) {
						reads.pieces.push(self.last(shape.rows + row)?);
					}
				},
			},
			Self::BiasGrad(layout) => {
				for channel in lane * TILE..lane * TILE + self.width(lane) {
					reads.inputs.extend(runs(*layout, channel, span).map(|run| (0, run)));
				}
			},
			Self::SoftmaxCrossEntropy(shape) => {
				let rows = chunk_range(span, shape.rows);
				reads.inputs.push((0, rows.start * shape.classes..rows.end * shape.classes));
				reads.inputs.push((1, rows));
			},
			Self::ClipGradNorm { lens, .. } => match lens.get(lane) {
				Some(&len) => reads.inputs.push((lane, span_range(span, len))),
				// The totals lane: the total before, and tensor `span`'s sum of squares.
				None => reads.pieces.push(self.last(span)?),
			},
			// The span's ids; the `dy` rows it reads depend on them ([`Reduction::data_reads`]).
			Self::ScatterAddRows { rows, .. } => reads.inputs.push((1, scatter_rows(span, *rows))),
			Self::NormGrad(shape) => {
				let (rows, columns) = (chunk_range(span, shape.rows), norm_columns(*shape, lane));
				let tile = |position: usize| rows.clone().map(move |row| (position, row * shape.width + columns.start..row * shape.width + columns.end));
				reads.inputs.extend(tile(2));
				if lane < norm_tiles(*shape) {
					reads.inputs.extend(tile(NORMALISED));
				}
			},
		}
		Ok(reads)
	}

	/// The reads of partial `(lane, span)` that depend on its inputs' words (`word(position,
	/// index)`): a scatter-add's `dy` rows, in its tile, of the span's rows that looked its
	/// table row up. Nothing for any other reduction.
	pub fn data_reads(&self, lane: usize, span: usize, word: impl Fn(usize, usize) -> Option<u32>) -> Vec<(usize, Range<usize>)> {
		let Self::ScatterAddRows { row_len, rows, .. } = self else { return Vec::new() };
		let (table_row, columns) = (lane / row_len.div_ceil(TILE).max(1), scatter_columns(*row_len, lane));
		scatter_rows(span, *rows)
			.filter(|&row| word(1, row).is_some_and(|id| id as usize == table_row))
			.map(|row| (0, row * row_len + columns.start..row * row_len + columns.end))
			.collect()
	}

	/// Recomputes partial `(lane, span)` from `source`.
	pub fn partial<S: Source>(&self, lane: usize, span: usize, source: &S) -> Result<Vec<f32>, S::Error> {
		if span >= self.spans(lane) {
			return Err(KernelError::PieceOutOfRange { what: "span", index: span, count: self.spans(lane) }.into());
		}
		if let Self::SoftmaxCrossEntropy(shape) = self {
			if is_wide(*shape) {
				return self.wide_partial(*shape, lane, span, source);
			}
		}
		let width = self.width(lane);
		let mut running = match self.previous(lane, span) {
			Some(index) => source.piece(index, width)?,
			None => vec![0.0; width],
		};
		match self {
			Self::BiasGrad(layout) => {
				for (slot, channel) in running.iter_mut().zip(lane * TILE..) {
					// One chunk sum per channel, sequential from +0 over the span's positions.
					let mut sum = 0.0f32;
					for index in runs(*layout, channel, span).flatten() {
						sum += f32::from_bits(source.word(0, index)?);
					}
					*slot += sum;
				}
			},
			Self::SoftmaxCrossEntropy(shape) => {
				let (mut logits, mut grad) = (Vec::with_capacity(shape.classes), vec![0.0f32; shape.classes]);
				let mut sum = 0.0f32;
				for row in chunk_range(span, shape.rows) {
					sum += narrow_row_loss(*shape, row, source, &mut logits, &mut grad)?;
				}
				add_to_first(&mut running, sum);
			},
			Self::ClipGradNorm { lens, .. } => match lens.get(lane) {
				Some(&len) => {
					let range = span_range(span, len);
					let mut start = range.start;
					while start < range.end {
						let mut sum = 0.0f32;
						for index in start..(start + CHUNK).min(range.end) {
							let g = f32::from_bits(source.word(lane, index)?);
							sum += mul(g, g);
						}
						add_to_first(&mut running, sum);
						start += CHUNK;
					}
				},
				None => {
					let tensor_sum = source.piece(self.last(span)?, 1)?;
					add_to_first(&mut running, tensor_sum.first().copied().unwrap_or_default());
				},
			},
			Self::ScatterAddRows { row_len, table_rows, rows } => {
				let (table_row, columns) = (lane / row_len.div_ceil(TILE).max(1), scatter_columns(*row_len, lane));
				let count = columns.len();
				for row in scatter_rows(span, *rows) {
					if scatter_id(*table_rows, row, source)? != table_row {
						continue;
					}
					for (offset, column) in columns.clone().enumerate() {
						let dy = f32::from_bits(source.word(0, row * row_len + column)?);
						if let Some(chunk) = running.get_mut(1 + count + offset) {
							*chunk += dy;
						}
					}
					let mut in_chunk = word_at(&running, 0) + 1.0;
					// A full chunk joins the total, and the next chunk starts from +0.
					if in_chunk == CHUNK as f32 {
						let (totals, chunks) = running.get_mut(1..).unwrap_or_default().split_at_mut(count);
						for (total, chunk) in totals.iter_mut().zip(chunks) {
							*total += core::mem::take(chunk);
						}
						in_chunk = 0.0;
					}
					if let Some(slot) = running.first_mut() {
						*slot = in_chunk;
					}
				}
			},
			Self::NormGrad(shape) => {
				let (rows, columns) = (chunk_range(span, shape.rows), norm_columns(*shape, lane));
				let word = |position: usize, index: usize| -> Result<f32, S::Error> { Ok(f32::from_bits(source.word(position, index)?)) };
				// `dγ` sums `dy ⊗ x̂`, with the forward's `x̂`; `dβ` sums `dy`.
				let mut terms = vec![0.0f32; rows.len() * columns.len()];
				for (row, terms) in rows.clone().zip(terms.chunks_exact_mut(columns.len().max(1))) {
					for (term, index) in terms.iter_mut().zip(columns.clone().map(|column| row * shape.width + column)) {
						let dy = word(2, index)?;
						*term = if lane < norm_tiles(*shape) { mul(dy, word(NORMALISED, index)?) } else { dy };
					}
				}
				for (offset, slot) in running.iter_mut().enumerate() {
					// One chunk sum per column, sequential from +0 over the span's rows.
					let mut sum = 0.0f32;
					for row in 0..rows.len() {
						sum += word_at(&terms, row * columns.len() + offset);
					}
					*slot += sum;
				}
			},
		}
		Ok(running)
	}

	/// What recomputing segment `segment` of output `value` reads.
	pub fn output_reads(&self, value: usize, segment: usize) -> Result<Reads, KernelError> {
		let mut reads = Reads::default();
		match self {
			Self::BiasGrad(_) => reads.pieces.push(self.last(segment)?),
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => {
				if value == 0 {
					reads.pieces.push(self.last(2 * shape.rows)?);
				} else {
					let elements = segment_range(segment, shape.logits_len()?)?;
					let rows = self.gradient_rows(*shape, segment)?;
					reads.inputs.push((0, elements));
					reads.inputs.push((1, rows.clone()));
					for row in rows {
						reads.pieces.push(self.last(shape.rows + row)?);
					}
				}
			},
			Self::SoftmaxCrossEntropy(shape) => {
				if value == 0 {
					reads.pieces.push(self.last(0)?);
				} else {
					let rows = self.gradient_rows(*shape, segment)?;
					reads.inputs.push((0, rows.start * shape.classes..rows.end * shape.classes));
					reads.inputs.push((1, rows));
				}
			},
			Self::ClipGradNorm { lens, .. } => {
				reads.pieces.push(self.total_piece()?);
				if let Some(&len) = lens.get(value) {
					reads.inputs.push((value, segment_range(segment, len)?));
				}
			},
			// Each element's lane's last partial.
			Self::ScatterAddRows { row_len, table_rows, .. } => {
				let elements = segment_range(segment, table_rows.saturating_mul(*row_len))?;
				let mut lanes: Vec<usize> = elements.map(|element| scatter_lane(*row_len, element)).collect();
				lanes.dedup();
				for lane in lanes {
					reads.pieces.push(self.last(lane)?);
				}
			},
			// `dx` from its rows whole (`x`, the whole gain, `dy`); `dγ`, `dβ` from last partials.
			Self::NormGrad(shape) => match value {
				0 => {
					let rows = norm_rows(*shape, segment)?;
					let stretch = rows.start * shape.width..rows.end * shape.width;
					reads.inputs.extend([(0, stretch.clone()), (1, 0..shape.width), (2, stretch)]);
				},
				_ => reads.pieces.push(self.last((value - 1) * norm_tiles(*shape) + segment)?),
			},
		}
		Ok(reads)
	}

	/// Recomputes segment `segment` of output `value` from `source`.
	pub fn output_segment<S: Source>(&self, value: usize, segment: usize, source: &S) -> Result<Vec<f32>, S::Error> {
		match self {
			Self::BiasGrad(_) => source.piece(self.last(segment)?, self.width(segment)),
			Self::SoftmaxCrossEntropy(shape) if is_wide(*shape) => self.wide_output_segment(*shape, value, segment, source),
			Self::SoftmaxCrossEntropy(shape) => {
				if value == 0 {
					let sum = source.piece(self.last(0)?, 1)?;
					let mean = mul(sum.first().copied().unwrap_or_default(), recip(shape.rows as f32));
					return Ok(vec![mean]);
				}
				let len = shape.logits_len()?;
				let elements = segment_range(segment, len)?;
				let rows = self.gradient_rows(*shape, segment)?;
				let mut grads = Vec::with_capacity(rows.len() * shape.classes);
				let (mut logits, mut grad) = (Vec::with_capacity(shape.classes), vec![0.0f32; shape.classes]);
				for row in rows.clone() {
					narrow_row_loss(*shape, row, source, &mut logits, &mut grad)?;
					grads.extend_from_slice(&grad);
				}
				let offset = rows.start * shape.classes;
				Ok(grads.get(elements.start - offset..elements.end - offset).map(<[f32]>::to_vec).unwrap_or_default())
			},
			Self::ScatterAddRows { row_len, table_rows, .. } => {
				let elements = segment_range(segment, table_rows.saturating_mul(*row_len))?;
				let mut out = Vec::with_capacity(elements.len());
				let mut cached: Option<(usize, Vec<f32>)> = None;
				for element in elements {
					let lane = scatter_lane(*row_len, element);
					let partial = match &cached {
						Some((at, partial)) if *at == lane => partial,
						_ => &cached.insert((lane, source.piece(self.last(lane)?, self.width(lane))?)).1,
					};
					let (count, offset) = (scatter_columns(*row_len, lane).len(), element % row_len % TILE);
					let (total, chunk) = (word_at(partial, 1 + offset), word_at(partial, 1 + count + offset));
					out.push(if word_at(partial, 0) > 0.0 { total + chunk } else { total });
				}
				Ok(out)
			},
			Self::NormGrad(shape) => {
				if value > 0 {
					let lane = (value - 1) * norm_tiles(*shape) + segment;
					return source.piece(self.last(lane)?, self.width(lane));
				}
				let elements = segment_range(segment, shape.values_len()?)?;
				let rows = norm_rows(*shape, segment)?;
				let word = |position: usize, index: usize| -> Result<f32, S::Error> { Ok(f32::from_bits(source.word(position, index)?)) };
				let gain = (0..shape.width).map(|column| word(1, column)).collect::<Result<Vec<f32>, _>>()?;
				let (mut normalised, mut g) = (vec![0.0f32; shape.width], vec![0.0f32; shape.width]);
				let mut dx = vec![0.0f32; rows.len() * shape.width];
				for (row, dx_row) in rows.clone().zip(dx.chunks_exact_mut(shape.width.max(1))) {
					let stretch = row * shape.width..(row + 1) * shape.width;
					let x = stretch.clone().map(|index| word(0, index)).collect::<Result<Vec<f32>, _>>()?;
					let dy = stretch.map(|index| word(2, index)).collect::<Result<Vec<f32>, _>>()?;
					backward_row(*shape, &x, &gain, &dy, RowScratch { normalised: &mut normalised, g: &mut g }, dx_row);
				}
				let offset = rows.start * shape.width;
				Ok(dx.get(elements.start - offset..elements.end - offset).map(<[f32]>::to_vec).unwrap_or_default())
			},
			Self::ClipGradNorm { max_norm, lens } => {
				let total = source.piece(self.total_piece()?, 1)?;
				let norm = sqrt(total.first().copied().unwrap_or_default());
				let Some(&len) = lens.get(value) else { return Ok(vec![norm]) };
				let coefficient = clip_coefficient(norm, *max_norm);
				segment_range(segment, len)?
					.map(|index| {
						let g = f32::from_bits(source.word(value, index)?);
						Ok(coefficient.map_or(g, |c| mul(g, c)))
					})
					.collect()
			},
		}
	}

	/// Every partial in piece order, computed from the inputs that `word`
	/// reads: what the prover commits. `fault` = `(piece, element, bit)` flips
	/// one bit of one partial, which the later partials of its lane then
	/// carry, as a wrong partial sum would (for the dispute tests). Holds every
	/// partial at once: [`Reduction::for_each_partial`] is the way for a whole step.
	pub fn partials<E, F>(&self, word: F, fault: Option<(usize, usize, u32)>) -> Result<Vec<Vec<f32>>, E>
	where
		E: From<KernelError>,
		F: Fn(usize, usize) -> Result<u32, E>,
	{
		let mut done = Vec::with_capacity(self.len());
		self.for_each_partial(word, fault, |_, partial| {
			done.push(partial.to_vec());
			Ok(())
		})?;
		Ok(done)
	}

	/// [`Reduction::partials`] one at a time: `visit` gets each partial's piece index and
	/// words, in piece order. It holds the current lane's latest partial and, where a
	/// partial reads other lanes (a wide loss, clipping's totals), each lane's last; never
	/// every partial, which for a GPT-2-sized scatter-add is 20 million of up to 65 words.
	pub fn for_each_partial<E, F, V>(&self, word: F, fault: Option<(usize, usize, u32)>, mut visit: V) -> Result<(), E>
	where
		E: From<KernelError>,
		F: Fn(usize, usize) -> Result<u32, E>,
		V: FnMut(usize, &[f32]) -> Result<(), E>,
	{
		/// The inputs, the lane's latest partial and the finished lanes' last partials, each
		/// with its piece index (the lasts in increasing order).
		struct Building<'a, E, F> {
			word: &'a F,
			latest: Option<&'a (usize, Vec<f32>)>,
			lasts: &'a [(usize, Vec<f32>)],
			error: core::marker::PhantomData<E>,
		}
		impl<E: From<KernelError>, F: Fn(usize, usize) -> Result<u32, E>> Source for Building<'_, E, F> {
			type Error = E;
			fn word(&self, position: usize, index: usize) -> Result<u32, E> {
				(self.word)(position, index)
			}
			fn piece(&self, index: usize, _len: usize) -> Result<Vec<f32>, E> {
				let last = || self.lasts.binary_search_by_key(&index, |(at, _)| *at).ok().and_then(|found| self.lasts.get(found));
				let held = self.latest.filter(|(at, _)| *at == index).or_else(last);
				held.map(|(_, partial)| partial.clone()).ok_or_else(|| KernelError::MissingInput { position: usize::MAX, index }.into())
			}
		}
		let reads_other_lanes = matches!(self, Self::SoftmaxCrossEntropy(_) | Self::ClipGradNorm { .. });
		let error = core::marker::PhantomData;
		let looked_up = self.scatter_lookups(&Building { word: &word, latest: None, lasts: &[], error })?;
		let mut lasts: Vec<(usize, Vec<f32>)> = Vec::new();
		let mut index = 0;
		for lane in 0..self.lanes() {
			let mut latest: Option<(usize, Vec<f32>)> = None;
			for span in 0..self.spans(lane) {
				// A scatter-add lane whose table row the span does not look up carries its
				// partial through unchanged (what `partial` computes, without its walk over
				// the span's ids): only the lanes a span touches are recomputed.
				let carried = match (self, looked_up.get(span)) {
					(Self::ScatterAddRows { row_len, .. }, Some(rows)) => rows.binary_search(&(lane / row_len.div_ceil(TILE).max(1))).is_err(),
					_ => false,
				};
				let mut partial = match (carried, latest.take()) {
					(true, Some((_, partial))) => partial,
					(true, None) => vec![0.0; self.width(lane)],
					(false, before) => self.partial(lane, span, &Building { word: &word, latest: before.as_ref(), lasts: &lasts, error })?,
				};
				if let Some((target, element, bit)) = fault {
					if target == index {
						crate::job::fault::flip(&mut partial, element, bit);
					}
				}
				visit(index, &partial)?;
				latest = Some((index, partial));
				index += 1;
			}
			if let Some(last) = latest.filter(|_| reads_other_lanes) {
				lasts.push(last);
			}
		}
		Ok(())
	}

	/// For a scatter-add, the table rows each span looks up, sorted and distinct, read in
	/// one pass over the ids (an id out of range is the error `partial` reports first);
	/// empty for any other reduction.
	fn scatter_lookups<S: Source>(&self, source: &S) -> Result<Vec<Vec<usize>>, S::Error> {
		let Self::ScatterAddRows { table_rows, rows, .. } = *self else { return Ok(Vec::new()) };
		(0..rows.div_ceil(SCATTER_SPAN))
			.map(|span| {
				let mut ids = scatter_rows(span, rows).map(|row| scatter_id(table_rows, row, source)).collect::<Result<Vec<usize>, _>>()?;
				ids.sort_unstable();
				ids.dedup();
				Ok(ids)
			})
			.collect()
	}

	/// Recomputes partial `(lane, span)` of a wide loss ([`Reduction::SoftmaxCrossEntropy`]).
	fn wide_partial<S: Source>(&self, shape: ClassifierShape, lane: usize, span: usize, source: &S) -> Result<Vec<f32>, S::Error> {
		let previous = match self.previous(lane, span) {
			Some(index) => Some(source.piece(index, self.width(lane))?),
			None => None,
		};
		let word = |index: usize| -> Result<f32, S::Error> { Ok(f32::from_bits(source.word(0, index)?)) };
		match WideLane::of(shape, lane) {
			WideLane::Max(row) => {
				let logits = wide_span(shape, row, span).map(word).collect::<Result<Vec<f32>, _>>()?;
				let max = span_max(&logits);
				Ok(vec![previous.and_then(|p| p.first().copied()).map_or(max, |before| before.max(max))])
			},
			WideLane::Sum(row) => {
				let label = checked_label(shape, row, source)?;
				let max = source.piece(self.last(row)?, 1)?.first().copied().unwrap_or_default();
				let (before, mut label_logit) = previous.map_or((0.0, 0.0), |p| (word_at(&p, 0), word_at(&p, 1)));
				let columns = wide_span(shape, 0, span);
				let logits = wide_span(shape, row, span).map(word).collect::<Result<Vec<f32>, _>>()?;
				let mut exps = vec![0.0f32; logits.len()];
				let sum = span_fold(&logits, max, before, &mut exps);
				if columns.contains(&label) {
					label_logit = logits.get(label - columns.start).copied().unwrap_or_default();
				}
				Ok(vec![sum, label_logit, max])
			},
			WideLane::Loss => {
				// A new 32-row chunk starts on even spans: the chunk before joins the total.
				let (total, mut chunk) = match previous {
					None => (0.0, 0.0),
					Some(p) if span % 2 == 0 => (word_at(&p, 0) + word_at(&p, 1), 0.0),
					Some(p) => (word_at(&p, 0), word_at(&p, 1)),
				};
				for row in loss_lane_rows(span, shape.rows) {
					let sum = source.piece(self.last(shape.rows + row)?, 3)?;
					chunk += row_loss(word_at(&sum, 2), word_at(&sum, 0), word_at(&sum, 1));
				}
				Ok(vec![total, chunk])
			},
		}
	}

	/// Recomputes output segment `segment` of output `value` of a wide loss: the loss from the
	/// loss lane's last partial, or 32 gradient elements from their rows' sum partials.
	fn wide_output_segment<S: Source>(&self, shape: ClassifierShape, value: usize, segment: usize, source: &S) -> Result<Vec<f32>, S::Error> {
		let batch_scale = recip(shape.rows as f32);
		if value == 0 {
			let last = source.piece(self.last(2 * shape.rows)?, 2)?;
			return Ok(vec![mul(word_at(&last, 0) + word_at(&last, 1), batch_scale)]);
		}
		let elements = segment_range(segment, shape.logits_len()?)?;
		let mut grads = Vec::with_capacity(elements.len());
		for row in self.gradient_rows(shape, segment)? {
			let label = checked_label(shape, row, source)?;
			let sum = source.piece(self.last(shape.rows + row)?, 3)?;
			let row_elements = elements.start.max(row * shape.classes)..elements.end.min((row + 1) * shape.classes);
			let first = row_elements.start - row * shape.classes;
			let mut values = Vec::with_capacity(row_elements.len());
			for index in row_elements {
				values.push(exp(f32::from_bits(source.word(0, index)?) - word_at(&sum, 2)));
			}
			span_grad(&mut values, first, label, word_at(&sum, 0), batch_scale);
			grads.extend_from_slice(&values);
		}
		Ok(grads)
	}

	/// The rows a segment of the logits' gradient touches.
	fn gradient_rows(&self, shape: ClassifierShape, segment: usize) -> Result<Range<usize>, KernelError> {
		let elements = segment_range(segment, shape.logits_len()?)?;
		let classes = shape.classes.max(1);
		Ok(elements.start / classes..(elements.end - 1) / classes + 1)
	}
}

/// Row `row`'s loss, its gradient written into `grad`, from the logits and
/// label that `source` holds (`logits` is scratch space, reused across rows).
fn narrow_row_loss<S: Source>(
	shape: ClassifierShape,
	row: usize,
	source: &S,
	logits: &mut Vec<f32>,
	grad: &mut [f32],
) -> Result<f32, S::Error> {
	let class = checked_label(shape, row, source)?;
	logits.clear();
	for index in row * shape.classes..(row + 1) * shape.classes {
		logits.push(f32::from_bits(source.word(0, index)?));
	}
	Ok(softmax_row(logits, class, recip(shape.rows as f32), grad))
}

/// What a lane of a wide loss holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WideLane {
	/// The running maximum of row `r`.
	Max(usize),
	/// The running sum, label logit and maximum of row `r`.
	Sum(usize),
	/// The fold of the row losses.
	Loss,
}

impl WideLane {
	/// Lane `lane` of a wide loss of `shape`.
	fn of(shape: ClassifierShape, lane: usize) -> Self {
		if lane < shape.rows {
			Self::Max(lane)
		} else if lane < 2 * shape.rows {
			Self::Sum(lane - shape.rows)
		} else {
			Self::Loss
		}
	}
}

/// The logits' storage range of span `span` of row `row`.
fn wide_span(shape: ClassifierShape, row: usize, span: usize) -> Range<usize> {
	let columns = (span * LOSS_SPAN).min(shape.classes)..((span + 1) * LOSS_SPAN).min(shape.classes);
	row * shape.classes + columns.start..row * shape.classes + columns.end
}

/// The rows of span `span` of a wide loss's loss lane.
fn loss_lane_rows(span: usize, rows: usize) -> Range<usize> {
	(span * LOSS_LANE_ROWS).min(rows)..((span + 1) * LOSS_LANE_ROWS).min(rows)
}

/// Row `row`'s label, or the kernel's error when it names no class.
fn checked_label<S: Source>(shape: ClassifierShape, row: usize, source: &S) -> Result<usize, S::Error> {
	let label = source.word(1, row)?;
	let class = usize::try_from(label).ok().filter(|&class| class < shape.classes);
	Ok(class.ok_or(KernelError::LabelOutOfRange { row, label, classes: shape.classes })?)
}

/// Word `index` of a partial (`+0` past its end; lengths are checked when it is read).
fn word_at(values: &[f32], index: usize) -> f32 {
	values.get(index).copied().unwrap_or_default()
}

/// `values[0] += addend` (partials of one word).
fn add_to_first(values: &mut [f32], addend: f32) {
	if let Some(first) = values.first_mut() {
		*first += addend;
	}
}

/// The looked-up rows of span `span` of a scatter-add over `rows` rows.
fn scatter_rows(span: usize, rows: usize) -> Range<usize> {
	(span * SCATTER_SPAN).min(rows)..((span + 1) * SCATTER_SPAN).min(rows)
}

/// The columns of scatter-add lane `lane` (table row `lane / tiles`, tile `lane % tiles`).
fn scatter_columns(row_len: usize, lane: usize) -> Range<usize> {
	let tile = lane % row_len.div_ceil(TILE).max(1);
	(tile * TILE).min(row_len)..((tile + 1) * TILE).min(row_len)
}

/// The scatter-add lane of element `element` of the table's gradient.
fn scatter_lane(row_len: usize, element: usize) -> usize {
	let row_len = row_len.max(1);
	element / row_len * row_len.div_ceil(TILE) + element % row_len / TILE
}

/// Looked-up row `row`'s id, or the kernel's error when it names no table row.
fn scatter_id<S: Source>(table_rows: usize, row: usize, source: &S) -> Result<usize, S::Error> {
	let id = source.word(1, row)?;
	let index = usize::try_from(id).ok().filter(|&index| index < table_rows);
	Ok(index.ok_or(KernelError::IndexOutOfRange { index: id, rows: table_rows })?)
}

/// The input position of a norm's backward that holds the forward's `x̂`.
const NORMALISED: usize = 3;

/// 32-column tiles of a norm's parameter gradients: the lanes of each.
fn norm_tiles(shape: NormShape) -> usize {
	shape.width.div_ceil(TILE)
}

/// The columns of lane `lane` of a norm's backward (`dγ`'s tiles, then `dβ`'s).
fn norm_columns(shape: NormShape, lane: usize) -> Range<usize> {
	let tile = lane % norm_tiles(shape).max(1);
	(tile * TILE).min(shape.width)..((tile + 1) * TILE).min(shape.width)
}

/// The rows a segment of a norm's `dx` touches.
fn norm_rows(shape: NormShape, segment: usize) -> Result<Range<usize>, KernelError> {
	let elements = segment_range(segment, shape.values_len()?)?;
	let width = shape.width.max(1);
	Ok(elements.start / width..(elements.end - 1) / width + 1)
}

/// The rule-4 chunk `chunk` of a sequence of `len` terms.
fn chunk_range(chunk: usize, len: usize) -> Range<usize> {
	(chunk * CHUNK).min(len)..((chunk + 1) * CHUNK).min(len)
}

/// Span `span` of a clipping lane over a gradient of `len` elements.
fn span_range(span: usize, len: usize) -> Range<usize> {
	(span * NORM_SPAN).min(len)..((span + 1) * NORM_SPAN).min(len)
}

/// Segment `segment` of a value of `len` elements, or an error past its end.
fn segment_range(segment: usize, len: usize) -> Result<Range<usize>, KernelError> {
	let range = crate::proof::merkle::segment_range(len, segment);
	let count = crate::proof::merkle::segment_count(len);
	Some(range).filter(|range| !range.is_empty()).ok_or(KernelError::PieceOutOfRange { what: "segment", index: segment, count })
}

/// The storage ranges that channel `channel`'s positions of chunk `chunk`
/// occupy, in position order (the order the chunk sums them).
fn runs(layout: BiasLayout, channel: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
	let inner = layout.inner.max(1);
	let positions = chunk_range(chunk, layout.outer.saturating_mul(inner));
	let mut position = positions.start;
	core::iter::from_fn(move || {
		if position >= positions.end {
			return None;
		}
		let (outer, offset) = (position / inner, position % inner);
		let run = (inner - offset).min(positions.end - position);
		let start = (outer * layout.channels + channel) * inner + offset;
		position += run;
		Some(start..start + run)
	})
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::bias::bias_grad;
	use crate::arith::canonical_bits;
	use crate::ops::loss::softmax_cross_entropy;
	use crate::ops::optim::clip_grad_norm;
	use crate::arith::rng::RandomStream;

	/// Full tensors as a source, with the partials computed from them.
	struct Full<'a> {
		inputs: &'a [Vec<u32>],
		partials: &'a [Vec<f32>],
	}

	impl Source for Full<'_> {
		type Error = KernelError;
		fn word(&self, position: usize, index: usize) -> Result<u32, KernelError> {
			self.inputs.get(position).and_then(|input| input.get(index)).copied().ok_or(KernelError::MissingInput { position, index })
		}
		fn piece(&self, index: usize, len: usize) -> Result<Vec<f32>, KernelError> {
			self.partials.get(index).filter(|piece| piece.len() == len).cloned().ok_or(KernelError::MissingInput { position: usize::MAX, index })
		}
	}

	fn values(seed: u64, len: usize, scale: f32) -> Vec<f32> {
		let mut out = vec![0.0; len];
		RandomStream::new(seed, 0).fill_uniform(-scale, scale, &mut out);
		out
	}

	fn words(values: &[f32]) -> Vec<u32> {
		values.iter().map(|&v| canonical_bits(v)).collect()
	}

	/// Every output segment, recomputed from the partials, in storage order.
	fn outputs(reduction: &Reduction, inputs: &[Vec<u32>], value: usize, len: usize) -> Vec<u32> {
		let word = |position: usize, index: usize| -> Result<u32, KernelError> {
			inputs.get(position).and_then(|input| input.get(index)).copied().ok_or(KernelError::MissingInput { position, index })
		};
		let partials = reduction.partials(word, None).unwrap();
		assert_eq!(partials.len(), reduction.len());
		let source = Full { inputs, partials: &partials };
		(0..len.div_ceil(SEGMENT)).flat_map(|s| words(&reduction.output_segment(value, s, &source).unwrap())).collect()
	}

	/// The scatter-add's partials, computed in one pass over the ids (lanes a span does not
	/// look up carried through), are every partial `partial` recomputes alone, bit for bit:
	/// spans that end mid-way, ragged tiles, table rows never or often looked up, and a
	/// faulted piece carried on; an id out of range is the same error.
	#[test]
	fn a_scatter_adds_partials_in_one_pass_are_each_partial_recomputed_alone() {
		for (seed, table_rows, row_len, rows) in [(11u64, 7usize, 45usize, 1_100usize), (12, 300, 32, 600), (13, 3, 1, 513)] {
			let dy = words(&values(seed, rows * row_len, 2.0));
			// Skewed ids: low table rows often, some never.
			let ids: Vec<u32> = (0..rows).map(|row| ((row * row % 97) % table_rows.div_ceil(2).max(1) + (row % 5 == 0) as usize) as u32).collect();
			let reduction = Reduction::ScatterAddRows { row_len, table_rows, rows };
			let inputs = [dy, ids];
			let word = |position: usize, index: usize| -> Result<u32, KernelError> {
				inputs.get(position).and_then(|input| input.get(index)).copied().ok_or(KernelError::MissingInput { position, index })
			};
			for fault in [None, Some((reduction.len() / 3, 2, 9))] {
				let partials = reduction.partials(word, fault).unwrap();
				assert_eq!(partials.len(), reduction.len());
				for (index, piece) in partials.iter().enumerate() {
					let (lane, span) = reduction.locate(index).unwrap();
					let source = Full { inputs: &inputs, partials: &partials };
					let mut alone = reduction.partial(lane, span, &source).unwrap();
					if fault.is_some_and(|(target, ..)| target == index) {
						crate::job::fault::flip(&mut alone, 2, 9);
					}
					assert_eq!(words(&alone), words(piece), "table {table_rows} × {row_len}, lane {lane}, span {span}, fault {fault:?}");
				}
			}
			let mut bad = inputs.clone();
			bad[1][rows - 1] = table_rows as u32;
			let word = |position: usize, index: usize| -> Result<u32, KernelError> { Ok(bad[position][index]) };
			assert_eq!(reduction.partials(word, None), Err(KernelError::IndexOutOfRange { index: table_rows as u32, rows: table_rows }));
		}
	}

	#[test]
	fn partials_fold_to_the_bias_gradient_bit_for_bit() {
		for (seed, layout) in [(1, BiasLayout::dense(37, 70)), (2, BiasLayout::channels_first(5, 33, 29)), (3, BiasLayout::dense(64, 32))] {
			let out_grad = values(seed, layout.values_len().unwrap(), 3.0);
			let mut expected = vec![0.0; layout.channels];
			bias_grad(layout, &out_grad, &mut expected).unwrap();
			let reduction = Reduction::BiasGrad(layout);
			assert_eq!(outputs(&reduction, &[words(&out_grad)], 0, layout.channels), words(&expected), "{layout:?}");
		}
	}

	#[test]
	fn partials_give_the_loss_and_its_gradient_bit_for_bit() {
		for (seed, shape) in [(4, ClassifierShape { rows: 70, classes: 13 }), (5, ClassifierShape { rows: 32, classes: 40 })] {
			let logits = values(seed, shape.logits_len().unwrap(), 8.0);
			let labels: Vec<u32> = (0..shape.rows).map(|r| ((r * 7) % shape.classes) as u32).collect();
			let mut grad = vec![0.0; logits.len()];
			let loss = softmax_cross_entropy(shape, &logits, &labels, &mut grad).unwrap();
			let reduction = Reduction::SoftmaxCrossEntropy(shape);
			let inputs = [words(&logits), labels.clone()];
			assert_eq!(outputs(&reduction, &inputs, 0, 1), words(&[loss]));
			assert_eq!(outputs(&reduction, &inputs, 1, logits.len()), words(&grad));
		}
		// A label out of range is the kernel's named error.
		let shape = ClassifierShape { rows: 2, classes: 3 };
		let source = Full { inputs: &[vec![0; 6], vec![0, 3]], partials: &[] };
		let error = Reduction::SoftmaxCrossEntropy(shape).partial(0, 0, &source);
		assert_eq!(error, Err(KernelError::LabelOutOfRange { row: 1, label: 3, classes: 3 }));
	}

	/// A vocabulary-wide loss (rows of 50,257 and of 1,025 classes, row counts that end
	/// mid-chunk and mid-span) folds to the same loss and gradient as the whole-row kernel,
	/// and no piece reads more than one span of one row or sixteen rows' sum partials.
	#[test]
	fn wide_rows_give_the_loss_and_its_gradient_bit_for_bit_a_span_at_a_time() {
		for (seed, shape) in [(8, ClassifierShape { rows: 3, classes: 50_257 }), (9, ClassifierShape { rows: 37, classes: 1_025 })] {
			assert!(is_wide(shape));
			let logits = values(seed, shape.logits_len().unwrap(), 12.0);
			let labels: Vec<u32> = (0..shape.rows).map(|r| ((r * 7919 + 1024) % shape.classes) as u32).collect();
			let mut grad = vec![0.0; logits.len()];
			let loss = softmax_cross_entropy(shape, &logits, &labels, &mut grad).unwrap();
			let reduction = Reduction::SoftmaxCrossEntropy(shape);
			let spans = shape.classes.div_ceil(LOSS_SPAN);
			assert_eq!(reduction.len(), 2 * shape.rows * spans + shape.rows.div_ceil(LOSS_LANE_ROWS));
			let inputs = [words(&logits), labels.clone()];
			assert_eq!(outputs(&reduction, &inputs, 0, 1), words(&[loss]), "{shape:?}");
			assert_eq!(outputs(&reduction, &inputs, 1, logits.len()), words(&grad), "{shape:?}");
			// Numbered lane by lane, as the walk over the lanes numbers them.
			let mut walked = 0;
			for lane in 0..reduction.lanes() {
				for span in 0..reduction.spans(lane) {
					assert_eq!((reduction.index(lane, span), reduction.locate(walked)), (Some(walked), Some((lane, span))));
					walked += 1;
				}
			}
			assert_eq!((walked, reduction.locate(walked)), (reduction.len(), None));
			for index in 0..reduction.len() {
				let (lane, span) = reduction.locate(index).unwrap();
				let reads = reduction.partial_reads(lane, span).unwrap();
				let words: usize = reads.inputs.iter().map(|(_, range)| range.len()).sum();
				assert!(words <= LOSS_SPAN + 1 && reads.pieces.len() <= LOSS_LANE_ROWS + 1, "{index}: {reads:?}");
				assert!(reads.pieces.iter().all(|&piece| piece < index));
			}
			let segments = shape.logits_len().unwrap().div_ceil(SEGMENT);
			for segment in [0, segments / 2, segments - 1] {
				let reads = reduction.output_reads(1, segment).unwrap();
				assert!(reads.inputs.iter().all(|(_, range)| range.len() <= SEGMENT) && reads.pieces.len() <= 2);
			}
		}
		// A label out of range is the kernel's named error in the row's sum lane.
		let shape = ClassifierShape { rows: 2, classes: 2_000 };
		let logits = vec![0u32; 4_000];
		let reduction = Reduction::SoftmaxCrossEntropy(shape);
		let partials = reduction.partials(|position, index| Ok::<u32, KernelError>(if position == 0 { logits[index] } else { [0, 2_000][index] }), None);
		assert_eq!(partials, Err(KernelError::LabelOutOfRange { row: 1, label: 2_000, classes: 2_000 }));
	}

	#[test]
	fn partials_give_the_norm_and_the_clipped_gradients_bit_for_bit() {
		let lens = [3000usize, 70, 1025, 1024];
		for (seed, max_norm) in [(6u64, 0.5f32), (7, 1.0e6)] {
			let grads: Vec<Vec<f32>> = lens.iter().zip(seed * 10..).map(|(&len, s)| values(s, len, 1.0)).collect();
			let mut clipped = grads.clone();
			let mut slices: Vec<&mut [f32]> = clipped.iter_mut().map(Vec::as_mut_slice).collect();
			let norm = clip_grad_norm(&mut slices, max_norm).unwrap();
			let reduction = Reduction::ClipGradNorm { max_norm, lens: lens.to_vec() };
			assert_eq!(reduction.lanes(), lens.len() + 1);
			assert_eq!(reduction.len(), 3 + 1 + 2 + 1 + lens.len());
			let inputs: Vec<Vec<u32>> = grads.iter().map(|g| words(g)).collect();
			for (value, expected) in clipped.iter().enumerate() {
				assert_eq!(outputs(&reduction, &inputs, value, expected.len()), words(expected), "tensor {value}");
			}
			assert_eq!(outputs(&reduction, &inputs, lens.len(), 1), words(&[norm]));
		}
	}

	#[test]
	fn pieces_are_numbered_lane_by_lane_and_reads_stay_in_their_span() {
		let reduction = Reduction::ClipGradNorm { max_norm: 1.0, lens: vec![2048, 10] };
		assert_eq!((0..reduction.len()).map(|i| reduction.locate(i).unwrap()).collect::<Vec<_>>(), [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]);
		assert_eq!(reduction.locate(5), None);
		assert_eq!(reduction.index(2, 1), Some(4));
		assert_eq!(reduction.index(1, 1), None);
		let reads = reduction.partial_reads(0, 1).unwrap();
		assert_eq!(reads.inputs, [(0, 1024..2048)]);
		assert_eq!(reads.pieces, [0]);
		assert_eq!(reads.segments(0), (32..64).collect::<Vec<_>>());
		assert_eq!(reduction.partial_reads(2, 1).unwrap().pieces, [3, 2]);
		assert!(reduction.partial_reads(1, 1).is_err());
		// A convolution's bias gradient: runs along the spatial positions of each channel.
		let conv = Reduction::BiasGrad(BiasLayout::channels_first(3, 2, 20));
		let reads = conv.partial_reads(0, 1).unwrap();
		// Positions 32..60 are (o = 1, i = 12..20) and (o = 2, i = 0..20); channel c of image o starts at (2o + c)·20.
		assert_eq!(reads.inputs, [(0, 52..60), (0, 80..100), (0, 72..80), (0, 100..120)]);
	}

	/// A GPT-2-wide norm's `dγ` partial reads a 32 × 32 tile of `dy` and of the forward's
	/// `x̂`, never `x` (whose whole rows it would need), and its `dβ` partial the `dy` tile;
	/// the `dx` segment alone reads whole rows.
	#[test]
	fn a_norm_backwards_parameter_partials_read_tiles_not_rows() {
		let shape = NormShape { norm: Norm::Layer, rows: 100, width: 768, epsilon: 1e-5 };
		let reduction = Reduction::NormGrad(shape);
		let tile = |position: usize, columns: Range<usize>| (32..64).map(move |row| (position, row * 768 + columns.start..row * 768 + columns.end));
		let reads = reduction.partial_reads(1, 1).unwrap();
		assert_eq!(reads.inputs, tile(2, 32..64).chain(tile(NORMALISED, 32..64)).collect::<Vec<_>>());
		assert_eq!(reads.pieces, [reduction.index(1, 0).unwrap()]);
		let words: usize = reads.inputs.iter().map(|(_, range)| range.len()).sum();
		assert_eq!(words, 2 * 32 * 32);
		// `dβ`'s lanes follow `dγ`'s 24 tiles.
		let reads = reduction.partial_reads(24 + 1, 0).unwrap();
		assert_eq!(reads.inputs, tile(2, 32..64).map(|(position, range)| (position, range.start - 32 * 768..range.end - 32 * 768)).collect::<Vec<_>>());
		// Segment 24 of `dx` is row 1's first 32 elements.
		let dx = reduction.output_reads(0, 24).unwrap();
		assert_eq!(dx.inputs, [(0, 768..2 * 768), (1, 0..768), (2, 768..2 * 768)]);
	}
}

//! What judging one piece of a job can cost at most, from the job's shape alone,
//! and the bounds a job must meet for the chain to accept it: so the chain can
//! refuse jobs whose disputes it could not afford, and weigh a dispute by its job.
//!
//! The referee's work for one piece is bounded by what it reads: the opened
//! words (input segments, earlier pieces), the Merkle hashes that prove them,
//! the graph it rebuilds, and the arithmetic of the piece. Per kind of piece:
//!
//! | piece | words read, at most |
//! |---|---|
//! | contraction accumulator (one 32×32×32 chunk) | 2 × 1,024 operand elements (a matmul's block: 32 runs of 32 words, 64 segments at worst; a convolution's: each element in its own segment at worst), and the previous 32 × 32 accumulator |
//! | contraction output segment | the final accumulators of the tiles its 32 elements lie in: 32 × 1,024 |
//! | reduction partial | 1,024 inputs (two more segments when unaligned, per lane), or 32 logit rows of `classes` and their labels, and one earlier partial; for rows wider than [`LOSS_SPAN`], one span of one row, its label and two earlier partials, or sixteen rows' sum partials and the partial before |
//! | reduction output segment | 32 inputs and the partials behind them |
//! | element-wise, optimizer segment | 32 elements of each of at most 4 inputs (the 256-element chunk around them for a state input), and for bias add 32 bias segments (4 chunks of a state bias) |
//! | contraction accumulator with a weight operand | the weight's block in state chunks: 64 for a matmul or a forward convolution, per crossed output channel `32 × taps` words for an input gradient |
//! | commit chunk | 8 segments of one optimizer output |
//! | batch segment | 32 samples' words (or 32 tokens), each in its own dataset segment at worst; the sample order costs at most 32 random-access draws, whatever the set's size |
//!
//! An MLP or CNN job whose loss pieces would outgrow the contraction's bound (more than
//! [`MAX_CLASSES`] classes) is refused by [`validate_job`]. Wider rows (a vocabulary) are
//! read a span at a time ([`crate::proof::reduction::Reduction::SoftmaxCrossEntropy`]).
//!
//! Earlier pieces of the disputed operator are proven in its own piece tree, so they
//! are counted apart from input segments, at that tree's depth.

use super::{DataCommitment, RefereeError};
use crate::job::data::MAX_SAMPLES;
use crate::arith::{CHUNK, TILE};
use crate::ops::contraction::Contraction;
use crate::proof::graph::{Graph, OpKind, Origin};
use crate::proof::state_tree::CHUNK_WORDS;
use crate::proof::merkle::{depth, SEGMENT};
use crate::proof::reduction::{is_wide, LOSS_LANE_ROWS, LOSS_SPAN, SCATTER_SPAN};
use crate::job::model::{ModelConfig, TrainConfig};

/// Most classes a job may have: a loss partial then reads at most
/// 32 × 1,025 words, about what a contraction chunk reads.
pub const MAX_CLASSES: u32 = 1024;

/// Most input segments one piece's openings may hold: the two operand blocks of
/// a K-chunk, each element in a segment of its own, and a loss piece's rows.
pub const MAX_OPENED_SEGMENTS: usize = 2 * TILE * CHUNK + 2 * SEGMENT;

/// Most earlier pieces one piece's openings may hold: the final accumulators of
/// the tiles a contraction's output segment lies in.
pub const MAX_OPENED_PIECES: usize = SEGMENT;

/// Upper bounds on the referee's work for any one piece of a job's step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieceCost {
	/// Words opened: input segments and earlier pieces.
	pub words: u64,
	/// Merkle hashes checking them: leaves, multiproof nodes, and the proofs
	/// of the state, operator, producer and claim leaves.
	pub hashes: u64,
	/// Operators of the step, which the referee rebuilds as a graph.
	pub operators: u64,
}

impl PieceCost {
	/// The larger of two bounds, field by field.
	fn max(self, other: Self) -> Self {
		Self {
			words: self.words.max(other.words),
			hashes: self.hashes.max(other.hashes),
			operators: self.operators.max(other.operators),
		}
	}
}

/// What the worst piece of an operator opens: words, and the Merkle leaves
/// they lie in, segments (and earlier pieces) and state chunks apart, since a
/// chunk leaf is sixteen BLAKE3 compressions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Reads {
	words: u64,
	segments: u64,
	chunks: u64,
	/// Earlier pieces of the operator itself, proven in its own piece tree.
	pieces: u64,
}

impl Reads {
	/// `segments` leaves of `words` words in all.
	fn segments(words: u64, segments: u64) -> Self {
		Self { words, segments, chunks: 0, pieces: 0 }
	}

	/// `pieces` earlier pieces of the operator, `words` words in all.
	fn pieces(words: u64, pieces: u64) -> Self {
		Self { words, segments: 0, chunks: 0, pieces }
	}

	/// Either of two pieces' reads: the larger of each field.
	fn or(self, other: Self) -> Self {
		Self {
			words: self.words.max(other.words),
			segments: self.segments.max(other.segments),
			chunks: self.chunks.max(other.chunks),
			pieces: self.pieces.max(other.pieces),
		}
	}

	/// The two reads together.
	fn and(self, other: Self) -> Self {
		Self {
			words: self.words + other.words,
			segments: self.segments + other.segments,
			chunks: self.chunks + other.chunks,
			pieces: self.pieces + other.pieces,
		}
	}
}

/// State chunks one K-chunk's block (32 depth × 32 columns) of a contraction's
/// right operand spans, when that operand is a state tensor (the weight): a
/// matmul or forward convolution block is 32 runs of at most 32 contiguous
/// words, two chunks each at worst; the input gradient's is, per output
/// channel it crosses, one stretch of at most `32 × taps` words.
fn state_block_chunks(contraction: Contraction) -> u64 {
	let (tile, chunk, chunk_words) = (TILE as u64, CHUNK as u64, CHUNK_WORDS as u64);
	let bound = match contraction {
		Contraction::Matmul { .. } | Contraction::BatchedMatmul { .. } | Contraction::Conv2d(_) => 2 * tile,
		Contraction::Conv2dInputGrad(shape) => {
			let taps = (shape.kernel_height as u64).saturating_mul(shape.kernel_width as u64).max(1);
			let channels = chunk.div_ceil(taps) + 1;
			channels.saturating_mul((2 * tile).min((tile.saturating_mul(taps)).div_ceil(chunk_words) + 1))
		},
		// Its operands are activations and gradients; a state operand would be read element by element.
		Contraction::Conv2dWeightGrad(_) => tile * chunk,
	};
	bound.min(tile * chunk)
}

/// The segments one K-chunk's block (32 rows or columns × 32 depth) of a contraction's
/// operand spans, when that operand is an activation or a gradient. A matmul's block, in
/// either layout and in any block of a batched matmul, is 32 runs of at most 32
/// contiguous words (`lhs_index` and `rhs_index` step by one along the row, or along the
/// depth when transposed): two segments each at worst. A convolution's block gathers its
/// elements through the kernel's taps and strides, each in a segment of its own at worst.
fn activation_block(contraction: Contraction) -> Reads {
	let (tile, chunk, segment) = (TILE as u64, CHUNK as u64, SEGMENT as u64);
	match contraction {
		Contraction::Matmul { .. } | Contraction::BatchedMatmul { .. } => {
			let runs = tile.max(chunk);
			Reads::segments(2 * runs * segment, 2 * runs)
		},
		Contraction::Conv2d(_) | Contraction::Conv2dInputGrad(_) | Contraction::Conv2dWeightGrad(_) => {
			Reads::segments(tile * chunk * segment, tile * chunk)
		},
	}
}

/// The segments of a stretch of `words` contiguous words at worst alignment.
fn contiguous(words: u64) -> Reads {
	let segments = words.div_ceil(SEGMENT as u64) + 1;
	Reads::segments(segments * SEGMENT as u64, segments)
}

/// What the worst piece of operator `operator` opens.
fn operator_reads(graph: &Graph, operator: usize) -> Result<Reads, RefereeError> {
	let node = graph.node(operator).map_err(|_| RefereeError::InvalidJob)?;
	let is_state = |position: usize| {
		node.inputs.get(position).and_then(|&id| graph.value(id)).is_some_and(|value| matches!(value.origin, Origin::State(_)))
	};
	let (tile, chunk, segment, chunk_words) = (TILE as u64, CHUNK as u64, SEGMENT as u64, CHUNK_WORDS as u64);
	let block = tile * chunk;
	// A segment of input `position`: the whole chunk it lies in when the input is state.
	let one_segment = |position: usize| {
		if is_state(position) { Reads { words: chunk_words, chunks: 1, ..Reads::default() } } else { Reads::segments(segment, 1) }
	};
	Ok(match node.kind {
		// An accumulator: two operand blocks (every element in a segment of its own at
		// worst, or a weight's block in chunks) and the previous accumulator; an output
		// segment reads up to 32 tiles.
		OpKind::Contract(contraction) => {
			let operand = |position: usize| {
				if is_state(position) {
					let chunks = state_block_chunks(contraction);
					Reads { words: chunks * chunk_words, chunks, ..Reads::default() }
				} else {
					activation_block(contraction)
				}
			};
			let accumulator = operand(0).and(operand(1)).and(Reads::segments(tile * tile, 1));
			let output = Reads::segments(segment * tile * tile, segment);
			if accumulator.words >= output.words { accumulator } else { output }
		},
		// Its input's segment, and the bias of its 32 elements' channels: at most 32
		// segments, or (a cyclic run of channels) four chunks of a state bias.
		OpKind::BiasAdd(_) => {
			let bias = if is_state(1) { Reads { words: 4 * chunk_words, chunks: 4, ..Reads::default() } } else { Reads::segments(segment * segment, segment) };
			Reads::segments(segment, 1).and(bias)
		},
		OpKind::Sgd(_) | OpKind::AdamW(_) => {
			(0..node.inputs.len()).map(one_segment).fold(Reads::default(), Reads::and)
		},
		// A chunk of the new state: eight segments of one optimizer output.
		OpKind::Commit => Reads::segments(chunk_words, chunk_words / segment),
		OpKind::Activation(_) | OpKind::ActivationGrad(_) => Reads::segments(2 * segment, 2),
		// A wide row's span of logits (two segments more when unaligned), its label's
		// segment, the partial before and the row's maximum; or a loss-lane partial's
		// sixteen sum partials and the partial before; or a gradient segment's logits,
		// labels and two rows' sum partials.
		OpKind::SoftmaxCrossEntropy(shape) if is_wide(shape) => {
			let span = LOSS_SPAN as u64;
			let row_partial = Reads::segments(span + 3 * segment, span / segment + 3).and(Reads::pieces(3 + 1, 2));
			let rows = LOSS_LANE_ROWS as u64;
			let loss_partial = Reads::pieces(3 * rows + 2, rows + 1);
			let gradient = Reads::segments(3 * segment, 3).and(Reads::pieces(2 * 3, 2));
			row_partial.or(loss_partial).or(gradient)
		},
		OpKind::SoftmaxCrossEntropy(shape) => {
			let classes = shape.classes as u64;
			// 32 rows of logits (two segments more per row when unaligned) and labels, and a partial.
			let rows = segment * (classes + 2 * segment) + 2 * segment + segment;
			Reads::segments(rows, rows.div_ceil(segment) + 2 * segment)
		},
		// 1,024 inputs (a lane may start mid-segment) and an earlier partial.
		OpKind::BiasGrad(_) | OpKind::ClipGradNorm(_) => {
			let words = block + 2 * segment * segment + tile;
			Reads::segments(words, words.div_ceil(segment) + tile)
		},
		OpKind::Batch => Reads::segments(segment * segment, segment),
		OpKind::Residual => Reads::segments(2 * segment, 2),
		// One input element per output element, each in a segment of its own at worst.
		OpKind::SplitHeads(_) | OpKind::MergeHeads(_) => Reads::segments(segment * segment, segment),
		// Up to 32 rows' ids, and one table element per output element: a chunk each
		// when the table is state (an embedding).
		OpKind::Gather { .. } => {
			let table = if is_state(0) { Reads { words: segment * chunk_words, chunks: segment, ..Reads::default() } } else { Reads::segments(segment * segment, segment) };
			Reads::segments(2 * segment, 2).and(table)
		},
		// The whole rows the segment's 32 elements lie in (a stretch under `2w + 32`
		// words), and the gain and bias at their columns (two runs of at most 32 words).
		OpKind::Norm(shape) => {
			let rows = contiguous(2 * shape.width as u64 + segment);
			let columns = |position: usize| {
				if is_state(position) { Reads { words: 4 * chunk_words, chunks: 4, ..Reads::default() } } else { Reads::segments(4 * segment, 4) }
			};
			let bias = if shape.norm == crate::ops::norm::Norm::Layer { columns(2) } else { Reads::default() };
			rows.and(columns(1)).and(bias)
		},
		// The visible keys of the rows the segment lies in: inside a stretch under `2T + 32`
		// words, of one operand (the forward) or two (the backward).
		OpKind::CausalSoftmax(shape) => contiguous(2 * shape.positions as u64 + segment),
		OpKind::CausalSoftmaxGrad(shape) => {
			let rows = contiguous(2 * shape.positions as u64 + segment);
			rows.and(rows)
		},
		// A `dγ` partial: the tile's `dy` and `x̂` (32 runs of at most 32 words each) and the
		// partial before; or a `dx` segment: the rows it touches of `x` and `dy` and the
		// whole gain.
		OpKind::NormGrad(shape) => {
			let width = shape.width as u64;
			let partial = Reads::segments(4 * tile * segment, 4 * tile).and(Reads::pieces(segment, 1));
			let rows = contiguous(2 * width + segment);
			let gain = if is_state(1) {
				let chunks = width.div_ceil(chunk_words) + 1;
				Reads { words: chunks * chunk_words, chunks, ..Reads::default() }
			} else {
				contiguous(width)
			};
			partial.or(rows.and(rows).and(gain))
		},
		// A partial: its span's ids, a tile's run of `dy` (two segments at worst) for each of
		// them that looked its table row up, and the partial before; or a segment: the last
		// partials of its elements' lanes (one per element at worst).
		OpKind::ScatterAddRows { .. } => {
			let span = SCATTER_SPAN as u64;
			let partial_width = 1 + 2 * tile;
			let partial = contiguous(span).and(Reads::segments(span * segment, 2 * span)).and(Reads::pieces(partial_width, 1));
			partial.or(Reads::pieces(segment * partial_width, segment))
		},
	})
}

/// Bounds on judging any one piece of a step of `graph`, with a trace of
/// `steps` steps and a training set of `dataset_segments` segments: the
/// largest of [`piece_cost`] over the operators.
///
/// Linear in the operators (the deepest earlier piece tree is carried from one operator
/// to the next, the state tree's depth taken once), so that the chain's validation of a deep transformer at submission stays
/// a small share of its weight.
pub fn worst_piece(graph: &Graph, steps: u32, dataset_segments: u64) -> Result<PieceCost, RefereeError> {
	let mut worst = PieceCost::default();
	let state_depth = u64::from(depth(graph.state_chunks()));
	let mut earlier_depth = 0;
	for operator in 0..graph.nodes.len() {
		let pieces = graph.piece_count(operator).map_err(|_| RefereeError::InvalidJob)?;
		let depths = Depths { state: state_depth, earlier: earlier_depth, pieces: u64::from(depth(pieces)) };
		worst = worst.max(operator_piece_cost(graph, operator, steps, dataset_segments, depths)?);
		earlier_depth = earlier_depth.max(depths.pieces);
	}
	Ok(worst)
}

/// The depths of the trees a piece's openings are proven in.
#[derive(Clone, Copy)]
struct Depths {
	/// The state tree's.
	state: u64,
	/// The deepest piece tree of the operators before the disputed one.
	earlier: u64,
	/// The disputed operator's own piece tree's.
	pieces: u64,
}

/// Bounds on judging any one piece of operator `operator` of a step of `graph`.
pub fn piece_cost(graph: &Graph, operator: usize, steps: u32, dataset_segments: u64) -> Result<PieceCost, RefereeError> {
	let earlier = (0..operator)
		.filter_map(|producer| graph.piece_count(producer).ok())
		.map(|count| u64::from(depth(count)))
		.max()
		.unwrap_or(0);
	let pieces = graph.piece_count(operator).map_err(|_| RefereeError::InvalidJob)?;
	let depths = Depths { state: u64::from(depth(graph.state_chunks())), earlier, pieces: u64::from(depth(pieces)) };
	operator_piece_cost(graph, operator, steps, dataset_segments, depths)
}

/// [`piece_cost`], given the depths of the trees its openings are proven in.
fn operator_piece_cost(graph: &Graph, operator: usize, steps: u32, dataset_segments: u64, depths: Depths) -> Result<PieceCost, RefereeError> {
	let node = graph.node(operator).map_err(|_| RefereeError::InvalidJob)?;
	let operators = graph.nodes.len() as u64;
	let operator_depth = u64::from(depth(graph.nodes.len()));
	let Depths { state: state_depth, earlier: earlier_depth, pieces: piece_depth } = depths;
	// The deepest tree an input can be proven in: a producer's pieces, the state, or the dataset.
	let input_depth = earlier_depth.max(u64::from(depth(dataset_segments as usize)));
	let reads = operator_reads(graph, operator)?;
	// Each segment leaf is one hash (a segment is one BLAKE2b block) and brings at
	// most one path of nodes; a state chunk is sixteen BLAKE3 compressions and a
	// path in the state tree; the state, the disputed and producer operator leaves
	// (at most 5), the claim (a chunk for `Commit`) and the earlier pieces add their
	// own paths.
	let chunk_hashes = (CHUNK_WORDS / 16) as u64;
	let claim = if node.kind == OpKind::Commit { chunk_hashes } else { 0 };
	let hashes = reads.segments * (1 + input_depth)
		+ reads.pieces * (1 + piece_depth)
		+ reads.chunks * (chunk_hashes + state_depth)
		+ claim
		+ (u64::from(depth(steps as usize)) + 2)
		+ 6 * (operator_depth + 1)
		+ 3 * (piece_depth + 1);
	Ok(PieceCost { words: reads.words, hashes, operators })
}

/// Why a job's shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobError {
	/// The model and hyper-parameters do not describe a valid step (what [`Graph::build`] refuses).
	InvalidShape,
	/// More classes than [`MAX_CLASSES`].
	TooManyClasses,
	/// The training set's words do not fit `u32`, it exceeds `MAX_SAMPLES`, or
	/// the unit's shard lies outside it or holds fewer samples than a batch.
	InvalidData,
}

/// Checks a job's model and hyper-parameters as the trainer and the referee
/// will use them, and the bounds that keep its disputes affordable; returns
/// its step graph.
pub fn validate_job(model: &ModelConfig, train: &TrainConfig) -> Result<Graph, JobError> {
	// A transformer's loss reads its vocabulary a span at a time; its own bounds hold it.
	if model.classes() > MAX_CLASSES && !matches!(model, ModelConfig::Transformer(_)) {
		return Err(JobError::TooManyClasses);
	}
	Graph::build(model, train).map_err(|_| JobError::InvalidShape)
}

/// Checks a job's data commitment against its step `graph`, as the trainer and
/// the referee use it; returns the training set's word count.
pub fn validate_data(graph: &Graph, data: &DataCommitment) -> Result<usize, JobError> {
	let words = graph.data_layout(data.samples as usize).words().ok_or(JobError::InvalidData)?;
	let shard_end = data.first_sample.checked_add(data.shard_samples).ok_or(JobError::InvalidData)?;
	let shard = data.shard_samples as usize;
	if data.samples as usize > MAX_SAMPLES || shard_end > data.samples || shard < graph.batch {
		return Err(JobError::InvalidData);
	}
	Ok(words)
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::contraction::{ChunkId, MatmulLayout, MatmulShape};

	/// The distinct segments one accumulator of `contraction` opens of each operand, as
	/// the prover's `requirements` collects them.
	fn opened_segments(contraction: Contraction, id: ChunkId) -> (usize, usize) {
		let extent = contraction.extent(id).unwrap();
		let (mut lhs, mut rhs) = (Vec::new(), Vec::new());
		for k in extent.depth.clone() {
			lhs.extend(extent.rows.clone().filter_map(|row| contraction.lhs_index(row, k)).map(|i| i / SEGMENT));
			rhs.extend(extent.cols.clone().filter_map(|col| contraction.rhs_index(extent.rows.start, k, col)).map(|i| i / SEGMENT));
		}
		for list in [&mut lhs, &mut rhs] {
			list.sort_unstable();
			list.dedup();
		}
		(lhs.len(), rhs.len())
	}

	/// Every accumulator of a matmul, plain or batched, in every layout and at shapes that
	/// leave every tile and chunk unaligned, opens no more segments of either operand than
	/// the layout's bound; and some reach it, so the bound is not loose by a factor.
	#[test]
	fn a_matmuls_operand_blocks_stay_within_the_layouts_bound() {
		let bound = activation_block(MatmulShape { m: 1, k: 1, n: 1 }.contraction(MatmulLayout::default())).segments as usize;
		let mut most = 0;
		for (m, k, n) in [(37, 45, 70), (64, 64, 64), (5, 100, 33), (100, 7, 3)] {
			let shape = MatmulShape { m, k, n };
			for lhs_transposed in [false, true] {
				for rhs_transposed in [false, true] {
					let layout = MatmulLayout { lhs_transposed, rhs_transposed };
					for contraction in [shape.contraction(layout), Contraction::BatchedMatmul { blocks: 3, shape, layout }] {
						let grid = contraction.grid().unwrap();
						for tile_row in 0..grid.tile_rows {
							for tile_col in 0..grid.tile_cols {
								for chunk in 0..grid.chunks {
									let (lhs, rhs) = opened_segments(contraction, ChunkId { tile_row, tile_col, chunk });
									assert!(lhs <= bound && rhs <= bound, "{contraction:?} {tile_row},{tile_col},{chunk}: {lhs} and {rhs} segments");
									most = most.max(lhs).max(rhs);
								}
							}
						}
					}
				}
			}
		}
		assert_eq!(bound, 64);
		assert!(most > bound / 2, "the widest block opened {most} segments");
	}
}

//! The prover's side of a dispute (`std` only; the runtime compiles the judge,
//! not this): what judging a piece reads, and building a party's [`Openings`]
//! and [`StepBinding`] from its own trace.

use alloc::vec::Vec;

use super::binding::{loss_piece, request_chunks, BindingError, StateChunk, StepBinding};
use crate::arith::canonical_bits;
use super::{
	batch_elements, batch_source, BatchWord, bias_channel, output_coordinates, words_of, DataCommitment, Dispute, InputOpening,
	OperatorOpening, Openings, PieceOpening, Position, RefereeError, SegmentOpening, StateOpening, TraceCommitment,
};
use crate::job::data::DataLayout;
use crate::job::training_data::DataRef;
use crate::proof::graph::{Graph, GraphError, OpKind, Origin, Piece};
use crate::proof::hash::Digest;
use crate::proof::merkle::{segment_range, MerkleTree, SEGMENT};
use crate::proof::state_tree::{chunk_range, locate_chunk, state_chunk_count, CHUNK_WORDS};
use crate::proof::reduction::{Reads, Reduction};
use crate::job::trace::{Boundary, HostTensor, StepTrace};
use crate::proof::chain::TracedStep;
use crate::proof::merkle::MerkleError;
use super::boundary::{BoundaryOpening, SegmentBinding};

/// Availability request `index` for `state` (its tensors: parameters, then
/// moments), answered: its state chunks' words and their multiproof in the state
/// tree, with `boundary`, which opens the unit's boundary (its state root) at the
/// requested step. [`super::open_state_chunk`] accepts it.
pub fn state_chunk(state: &[Vec<f32>], index: u32, boundary: BoundaryOpening) -> Result<StateChunk, BindingError> {
	let lens = || state.iter().map(Vec::len);
	let range = request_chunks(state_chunk_count(lens()), index)?;
	let tree = crate::job::trace::state_tree(state).map_err(|_| BindingError::InvalidChunkProof)?;
	let proof = tree.multiproof(&range.clone().collect::<Vec<_>>()).map_err(|_| BindingError::InvalidChunkProof)?;
	let mut chunks = Vec::with_capacity(range.len());
	for index in range {
		let (tensor, chunk) = locate_chunk(lens(), index).ok_or(BindingError::ChunkOutOfRange)?;
		let values = state.get(tensor).map_or(&[][..], Vec::as_slice);
		let words = values.get(chunk_range(values.len(), chunk)).unwrap_or_default();
		chunks.push(words.iter().map(|&value| canonical_bits(value)).collect());
	}
	Ok(StateChunk { boundary, chunks, proof })
}

/// A unit's boundaries as its prover keeps them, with their tree, whose root is the
/// unit's segment root (the learning proof's `trace_root`).
#[derive(Clone, Debug)]
pub struct UnitBoundaries {
	/// Each segment's boundary, in order.
	pub boundaries: Vec<Boundary>,
	/// The Merkle tree over their leaves.
	pub tree: MerkleTree,
}

impl UnitBoundaries {
	/// The unit's boundaries, in order, and their tree.
	pub fn new(boundaries: Vec<Boundary>) -> Result<Self, MerkleError> {
		let tree = MerkleTree::new(boundaries.iter().map(Boundary::leaf).collect())?;
		Ok(Self { boundaries, tree })
	}

	/// The segment root.
	pub fn root(&self) -> Digest {
		self.tree.root()
	}

	/// The opening of boundary `segment`.
	pub fn opening(&self, segment: u32) -> Option<BoundaryOpening> {
		let boundary = self.boundaries.get(segment as usize)?;
		super::boundary::boundary_opening(&self.tree, segment, boundary.state_root, boundary.record).ok()
	}

	/// The opening of the last boundary: the unit's final state.
	pub fn final_opening(&self) -> Option<BoundaryOpening> {
		self.opening(u32::try_from(self.boundaries.len().checked_sub(1)?).ok()?)
	}

	/// The opening of the boundary before segment `segment`, if it has one.
	pub fn start_opening(&self, segment: u32) -> Option<Option<BoundaryOpening>> {
		match segment.checked_sub(1) {
			None => Some(None),
			Some(before) => Some(Some(self.opening(before)?)),
		}
	}
}

/// One segment's step-level trace, as its prover keeps it once re-executed.
#[derive(Clone, Debug)]
pub struct SegmentTrace {
	/// Global number of the segment's first step.
	pub first_step: u32,
	/// The state root it starts from.
	pub start_state_root: Digest,
	/// Each step's state hash, state root and record.
	pub steps: Vec<TracedStep>,
	/// The step-level tree over the steps' leaves.
	pub tree: MerkleTree,
}

impl SegmentTrace {
	/// The trace of the segment that starts at `first_step` from `start_state_root`.
	pub fn new(first_step: u32, start_state_root: Digest, steps: Vec<TracedStep>) -> Result<Self, MerkleError> {
		let tree = MerkleTree::new(steps.iter().map(|step| crate::proof::chain::trace_leaf(&step.state_hash)).collect())?;
		Ok(Self { first_step, start_state_root, steps, tree })
	}

	/// The trace root.
	pub fn root(&self) -> Digest {
		self.tree.root()
	}

	/// The opening of the state before global step `step` (one past the last: the
	/// segment's end state).
	pub fn state_opening(&self, step: u32) -> Option<StateOpening> {
		traced_state_opening(&self.steps, &self.tree, self.first_step, &self.start_state_root, step)
	}

	/// The binding of this trace to its boundaries: `start` opens the boundary before
	/// it (`None` for the unit's first segment), `end` the party's boundary at its end.
	pub fn binding(&self, start: Option<BoundaryOpening>, end: BoundaryOpening) -> Option<SegmentBinding> {
		let last = self.steps.len().checked_sub(1)?;
		let previous = match last.checked_sub(1) {
			Some(before) => self.steps.get(before)?.state_hash,
			None => crate::proof::chain::anchor_hash(&self.start_state_root),
		};
		Some(SegmentBinding { start, end, previous, proof: self.tree.proof(last).ok()? })
	}

	/// What a case over this trace is opened from.
	pub fn run_opening<'a>(
		&'a self,
		dataset: impl Into<DataRef<'a>>,
		dataset_tree: &'a MerkleTree,
		shard: core::ops::Range<usize>,
	) -> RunOpening<'a> {
		let dataset = dataset.into();
		RunOpening { trace: &self.tree, first_step: self.first_step, start_state_root: self.start_state_root, dataset, dataset_tree, shard }
	}
}


/// The opening of the state a segment's trace commits before global step `step`,
/// from the trace's `steps` (its first at `first_step`), its step-level `tree` and
/// the state root the segment starts from: the step before, proven in the tree, or
/// the anchor at the start. `None` for a step outside the trace.
pub fn traced_state_opening(
	steps: &[TracedStep],
	tree: &MerkleTree,
	first_step: u32,
	start_state_root: &Digest,
	step: u32,
) -> Option<StateOpening> {
	let position = step.checked_sub(first_step)? as usize;
	let Some(last) = position.checked_sub(1) else { return Some(StateOpening::Anchor) };
	let traced = steps.get(last)?;
	let previous = match last.checked_sub(1) {
		Some(before) => steps.get(before)?.state_hash,
		None => crate::proof::chain::anchor_hash(start_state_root),
	};
	Some(StateOpening::Step { previous, state_root: traced.state_root, record: traced.record, proof: tree.proof(last).ok()? })
}

/// What judging one piece reads: `(input position, segment indices)` pairs,
/// and indices of earlier pieces of the same operator.
pub type Requirements = (Vec<(usize, Vec<usize>)>, Vec<usize>);

/// The input segments and earlier pieces that judging piece `piece` of
/// `operator` reads: `(input position, segments)` pairs and piece indices.
///
/// The prover uses it to build a party's [`Openings`]; the referee itself reads
/// lazily and reports whatever is missing.
pub fn requirements(graph: &Graph, operator: usize, piece: usize) -> Result<Requirements, GraphError> {
	let node = graph.node(operator)?;
	let decoded = graph.piece(operator, piece)?;
	let input_len = |position: usize| node.inputs.get(position).and_then(|&id| graph.value(id)).map_or(0, |v| v.len);
	let mut inputs: Vec<(usize, Vec<usize>)> = Vec::new();
	let mut pieces = Vec::new();
	match (node.kind, decoded) {
		(OpKind::Contract(contraction), Piece::Accumulator(id)) => {
			let extent = contraction.extent(id)?;
			let mut lhs: Vec<usize> = Vec::new();
			let mut rhs: Vec<usize> = Vec::new();
			for k in extent.depth.clone() {
				for row in extent.rows.clone() {
					lhs.extend(contraction.lhs_index(row, k).map(|i| i / SEGMENT));
				}
				for col in extent.cols.clone() {
					rhs.extend(contraction.rhs_index(extent.rows.start, k, col).map(|i| i / SEGMENT));
				}
			}
			for list in [&mut lhs, &mut rhs] {
				list.sort_unstable();
				list.dedup();
			}
			inputs.push((0, lhs));
			inputs.push((1, rhs));
			if id.chunk > 0 {
				pieces.push(piece - 1);
			}
		},
		(OpKind::Contract(contraction), Piece::Segment { value, segment }) => {
			let grid = contraction.grid()?;
			let len = graph.piece_values(operator)?.get(value).and_then(|&id| graph.value(id)).map_or(0, |v| v.len);
			for index in segment * SEGMENT..(segment * SEGMENT + SEGMENT).min(len) {
				if let Some((row, col)) = output_coordinates(contraction, index) {
					let tile = contraction.tile_at(row, col, grid.chunks - 1);
					pieces.push(Graph::accumulator_index(&grid, tile));
				}
			}
			pieces.sort_unstable();
			pieces.dedup();
		},
		(OpKind::Activation(_), Piece::Segment { segment, .. }) => inputs.push((0, vec![segment])),
		(OpKind::ActivationGrad(_), Piece::Segment { segment, .. }) => {
			inputs.extend((0..2).map(|p| (p, vec![segment])));
		},
		(OpKind::BiasAdd(layout), Piece::Segment { segment, .. }) => {
			let len = node.inputs.first().and_then(|&id| graph.value(id)).map_or(0, |v| v.len);
			let mut bias: Vec<usize> =
				(segment * SEGMENT..(segment * SEGMENT + SEGMENT).min(len)).map(|i| bias_channel(layout, i) / SEGMENT).collect();
			bias.sort_unstable();
			bias.dedup();
			inputs.push((0, vec![segment]));
			inputs.push((1, bias));
		},
		(OpKind::Sgd(_) | OpKind::AdamW(_), Piece::Segment { segment, .. }) => {
			inputs.extend((0..node.inputs.len()).map(|p| (p, vec![segment])));
		},
		(OpKind::Residual, Piece::Segment { segment, .. }) => inputs.extend((0..2).map(|p| (p, vec![segment]))),
		(OpKind::SplitHeads(shape) | OpKind::MergeHeads(shape), Piece::Segment { segment, .. }) => {
			let split = matches!(node.kind, OpKind::SplitHeads(_));
			let elements = segment_range(shape.values_len()?, segment);
			inputs.push((0, segments_of(elements.map(|element| shape.source_index(split, element)))));
		},
		// The ids of the segment's rows; the table's segments depend on them ([`gather_reads`]).
		(OpKind::Gather { row_len }, Piece::Segment { segment, .. }) => {
			let row_len = row_len.max(1);
			let out_len = input_len(1).saturating_mul(row_len);
			inputs.push((1, segments_of(segment_range(out_len, segment).map(|element| element / row_len))));
		},
		// The whole rows of the segment's elements, and for `y` (value 0) the gain (and bias)
		// at their columns.
		(OpKind::Norm(shape), Piece::Segment { value, segment }) => {
			let width = shape.width.max(1);
			let elements = segment_range(shape.values_len()?, segment);
			let rows = elements.start / width..elements.end.div_ceil(width);
			inputs.push((0, segments_of(rows.start * width..rows.end * width)));
			if value == 1 {
				return Ok((inputs, pieces));
			}
			let columns = segments_of(elements.map(|element| element % width));
			if shape.norm == crate::ops::norm::Norm::Layer {
				inputs.push((2, columns.clone()));
			}
			inputs.insert(1, (1, columns));
		},
		// The visible keys of every row that has a visible element in the segment.
		(OpKind::CausalSoftmax(shape) | OpKind::CausalSoftmaxGrad(shape), Piece::Segment { segment, .. }) => {
			let t = shape.positions.max(1);
			let mut rows: Vec<usize> = segment_range(shape.scores_len()?, segment)
				.filter(|&element| element % t < shape.visible(element / t).len())
				.map(|element| element / t)
				.collect();
			rows.dedup();
			let read = segments_of(rows.into_iter().flat_map(|row| shape.visible(row)));
			let operands = if matches!(node.kind, OpKind::CausalSoftmax(_)) { 1 } else { 2 };
			inputs.extend((0..operands).map(|position| (position, read.clone())));
		},
		(OpKind::Commit, Piece::Chunk { value, chunk }) => {
			let len = node.inputs.get(value).and_then(|&id| graph.value(id)).map_or(0, |v| v.len);
			inputs.push((value, super::chunk_segments(len, chunk).collect()));
		},
		(OpKind::SoftmaxCrossEntropy(_) | OpKind::BiasGrad(_) | OpKind::ClipGradNorm(_) | OpKind::NormGrad(_) | OpKind::ScatterAddRows { .. }, _) => {
			let reduction = graph.reduction(operator)?.ok_or(GraphError::PieceOutOfRange { piece, count: 0 })?;
			let reads = match decoded {
				Piece::Partial { lane, span } => reduction.partial_reads(lane, span)?,
				Piece::Segment { value, segment } => reduction.output_reads(value, segment)?,
				Piece::Accumulator(_) | Piece::Chunk { .. } => Reads::default(),
			};
			for position in 0..node.inputs.len() {
				let segments = reads.segments(position);
				if !segments.is_empty() {
					inputs.push((position, segments));
				}
			}
			pieces = reads.pieces;
		},
		_ => {},
	}
	Ok((inputs, pieces))
}

/// What the prover holds about the disputed segment of its run, to open a case.
pub struct RunOpening<'a> {
	/// The segment's step-level tree (leaves `trace_leaf(h_t)`).
	pub trace: &'a MerkleTree,
	/// Global number of the segment's first step.
	pub first_step: u32,
	/// The state root the segment starts from.
	pub start_state_root: Digest,
	/// The job's whole training set (a classification set or a token stream), to open batch rows.
	pub dataset: DataRef<'a>,
	/// Its tree ([`DataRef::tree`]), built once for every case.
	pub dataset_tree: &'a MerkleTree,
	/// The samples of the set the run trains on (the whole set for a step-range unit).
	pub shard: core::ops::Range<usize>,
}

impl RunOpening<'_> {
	/// The segment's trace commitment, as the chain binds it ([`super::boundary::bind_segment`]).
	pub fn trace_commitment(&self) -> TraceCommitment {
		TraceCommitment {
			trace_root: self.trace.root(),
			first_step: self.first_step,
			steps: self.trace.len() as u32,
			start_state_root: self.start_state_root,
		}
	}

	/// The job's data commitment for this run of `graph`.
	pub fn data_commitment(&self, graph: &Graph) -> Result<DataCommitment, RefereeError> {
		let u32_of = |n: usize| u32::try_from(n).map_err(|_| RefereeError::InvalidJob);
		Ok(DataCommitment {
			root: self.dataset_tree.root(),
			samples: u32_of(self.dataset.samples(graph.input_len))?,
			first_sample: u32_of(self.shard.start)?,
			shard_samples: u32_of(self.shard.len())?,
		})
	}

	/// The opening of the state before traced step `step` (its previous state hash).
	fn previous_state(&self, step: &StepTrace) -> Result<StateOpening, RefereeError> {
		let number = step.record.step;
		let position = number.checked_sub(self.first_step).ok_or(RefereeError::StepOutOfRange { step: number })?;
		Ok(if position == 0 {
			StateOpening::Anchor
		} else {
			StateOpening::Step {
				previous: step.previous_previous_hash,
				state_root: step.previous_state_root,
				record: step.previous_record,
				proof: self.trace.proof(position as usize - 1).map_err(|_| RefereeError::InvalidStateProof)?,
			}
		})
	}
}

/// The binding of a traced step's operator root to the run's trace
/// ([`bind_step`](super::bind_step)).
pub fn open_step_binding(graph: &Graph, step: &StepTrace, run: &RunOpening<'_>) -> Result<StepBinding, RefereeError> {
	let number = step.record.step;
	let position = number.checked_sub(run.first_step).ok_or(RefereeError::StepOutOfRange { step: number })?;
	let last = graph.nodes.len().checked_sub(1).ok_or(RefereeError::InvalidJob)?;
	let operator_proof = |id: usize| step.operators.proof(id).map_err(|_| RefereeError::InvalidJob);
	let (loss_operator, loss_leaf, _) = loss_piece(graph).map_err(|_| RefereeError::InvalidJob)?;
	let loss_tree = step.pieces.get(loss_operator as usize).ok_or(RefereeError::InvalidJob)?;
	Ok(StepBinding {
		previous: run.previous_state(step)?,
		proof: run.trace.proof(position as usize).map_err(|_| RefereeError::StepOutOfRange { step: number })?,
		state_root: step.state_root,
		state_proof: operator_proof(last)?,
		loss: canonical_bits(step.record.loss),
		loss_root: loss_tree.root(),
		loss_operator_proof: operator_proof(loss_operator as usize)?,
		loss_proof: loss_tree.proof(loss_leaf as usize).map_err(|_| RefereeError::InvalidJob)?,
	})
}

/// Builds the [`Dispute`] the chain would hold and this run's [`Openings`] for
/// piece `piece` of `operator` of a traced step, with this trace's leaf as the claim.
pub fn open_case(
	graph: &Graph,
	step: &StepTrace,
	run: &RunOpening<'_>,
	operator: usize,
	piece: usize,
) -> Result<(Dispute, Openings), RefereeError> {
	let invalid = |_| RefereeError::InvalidJob;
	let number = step.record.step;
	let pieces_tree = step.pieces.get(operator).ok_or(RefereeError::OperatorOutOfRange {
		operator: operator as u32,
		count: step.pieces.len() as u32,
	})?;
	let previous_state = run.previous_state(step)?;
	let node = graph.node(operator).map_err(invalid)?;
	let (needed_inputs, needed_pieces) = requirements(graph, operator, piece).map_err(|error| match error {
		GraphError::PieceOutOfRange { count, .. } => RefereeError::PieceOutOfRange { piece: piece as u32, count: count as u32 },
		_ => RefereeError::InvalidJob,
	})?;
	let mut operators = Vec::new();
	let mut inputs = Vec::new();
	let dataset = graph.data_layout(run.dataset.samples(graph.input_len));
	if let (OpKind::Batch, Piece::Segment { value, segment }) = (node.kind, graph.piece(operator, piece).map_err(invalid)?) {
		// The batch reads the dataset rows of this step's samples.
		let segments = batch_reads(graph, dataset, &step.samples, value, segment)?;
		if !segments.is_empty() {
			let openings = segments
				.iter()
				.map(|&s| SegmentOpening {
					segment: s as u32,
					words: (s * SEGMENT..(s + 1) * SEGMENT).map_while(|w| run.dataset.word(w)).collect(),
				})
				.collect();
			let proof = run.dataset_tree.multiproof(&segments).map_err(|_| RefereeError::InvalidJob)?;
			inputs.push(InputOpening { input: 0, segments: openings, proof });
		}
	}
	let mut needed_inputs = needed_inputs;
	let ids = || node.inputs.get(1).and_then(|&id| step.values.get(id)).ok_or(RefereeError::InvalidJob);
	match (node.kind, graph.piece(operator, piece).map_err(invalid)?) {
		(OpKind::Gather { row_len }, Piece::Segment { segment, .. }) => {
			needed_inputs.insert(0, (0, gather_reads(graph, operator, row_len, segment, ids()?)?));
		},
		(_, Piece::Partial { lane, span }) => {
			let reduction = graph.reduction(operator).map_err(invalid)?.ok_or(RefereeError::InvalidJob)?;
			let reads = data_reads(&reduction, lane, span, ids);
			if !reads.is_empty() {
				needed_inputs.insert(0, (0, reads));
			}
		},
		_ => {},
	}
	for (position, segments) in needed_inputs {
		let id = *node.inputs.get(position).ok_or(RefereeError::NoSuchInput { input: position as u32 })?;
		let value = graph.value(id).ok_or(RefereeError::InvalidJob)?;
		let host = step.values.get(id).ok_or(RefereeError::InvalidJob)?;
		if let Origin::State(tensor) = value.origin {
			// A state tensor opens in whole chunks, proven in the state tree.
			let mut chunks: Vec<usize> = segments.iter().map(|&segment| segment / super::SEGMENTS_PER_CHUNK).collect();
			chunks.sort_unstable();
			chunks.dedup();
			let mut openings = Vec::with_capacity(chunks.len());
			let mut leaves = Vec::with_capacity(chunks.len());
			for chunk in chunks {
				leaves.push(graph.state_chunk_index(tensor, chunk).ok_or(RefereeError::InvalidJob)?);
				let words = chunk_range(value.len, chunk).map_while(|index| host.word(index)).collect();
				openings.push(SegmentOpening { segment: chunk as u32, words });
			}
			let proof = step.previous_state.multiproof(&leaves).map_err(|_| RefereeError::InvalidJob)?;
			inputs.push(InputOpening { input: position as u32, segments: openings, proof });
			continue;
		}
		let (tree, values, value_position, skip) = match value.origin {
			Origin::State(_) => return Err(RefereeError::InvalidJob),
			Origin::Node { node: producer, output } => {
				if !operators.iter().any(|o: &OperatorOpening| o.operator as usize == producer) {
					let tree = step.pieces.get(producer).ok_or(RefereeError::InvalidJob)?;
					operators.push(OperatorOpening {
						operator: producer as u32,
						piece_root: tree.root(),
						proof: step.operators.proof(producer).map_err(|_| RefereeError::InvalidJob)?,
					});
				}
				let tree = step.pieces.get(producer).ok_or(RefereeError::InvalidJob)?;
				let skip = graph.accumulator_count(producer).map_err(invalid)?;
				(tree, graph.piece_values(producer).map_err(invalid)?, output, skip)
			},
		};
		let mut openings = Vec::with_capacity(segments.len());
		let mut leaves = Vec::with_capacity(segments.len());
		for segment in segments {
			leaves.push(graph.segment_leaf_index(values, value_position, segment, skip).ok_or(RefereeError::InvalidJob)?);
			openings.push(SegmentOpening { segment: segment as u32, words: host.segment_words(segment) });
		}
		let proof = tree.multiproof(&leaves).map_err(|_| RefereeError::InvalidJob)?;
		inputs.push(InputOpening { input: position as u32, segments: openings, proof });
	}
	// The running sums the disputed piece reads, recomputed from this trace's inputs; only
	// those are kept.
	let mut kept = alloc::collections::BTreeMap::new();
	if !needed_pieces.is_empty() {
		crate::job::trace::for_each_running_sum(graph, operator, &step.values, (None, None), |index, sum| {
			if needed_pieces.contains(&index) {
				kept.insert(index, words_of(sum));
			}
			Ok::<(), RefereeError>(())
		})?;
	}
	let mut piece_openings = Vec::new();
	for index in needed_pieces {
		let words = kept.remove(&index).ok_or(RefereeError::InvalidJob)?;
		piece_openings.push(PieceOpening {
			piece: index as u32,
			words,
			proof: pieces_tree.proof(index).map_err(|_| RefereeError::InvalidJob)?,
		});
	}
	let out_of_range = RefereeError::PieceOutOfRange { piece: piece as u32, count: pieces_tree.len() as u32 };
	let dispute = Dispute {
		trace: run.trace_commitment(),
		data: run.data_commitment(graph)?,
		position: Position { step: number, operator: operator as u32, piece: piece as u32 },
		operator_root: step.operators.root(),
		piece_root: pieces_tree.root(),
	};
	let openings = Openings {
		previous_state,
		operators,
		inputs,
		operator_proof: step.operators.proof(operator).map_err(|_| RefereeError::InvalidJob)?,
		pieces: piece_openings,
		claimed_output: *pieces_tree.leaves().get(piece).ok_or(out_of_range)?,
		claim_proof: pieces_tree.proof(piece).map_err(|_| out_of_range)?,
	};
	Ok((dispute, openings))
}

/// The table segments that segment `segment` of gather `operator` (rows of `row_len`)
/// reads, given its ids: what the prover opens of the table.
pub(super) fn gather_reads(graph: &Graph, operator: usize, row_len: usize, segment: usize, ids: &HostTensor) -> Result<Vec<usize>, RefereeError> {
	let node = graph.node(operator).map_err(|_| RefereeError::InvalidJob)?;
	let rows = node.inputs.get(1).and_then(|&id| graph.value(id)).map_or(0, |value| value.len);
	let row_len = row_len.max(1);
	let mut table = Vec::with_capacity(SEGMENT);
	for element in segment_range(rows.saturating_mul(row_len), segment) {
		let row = ids.word(element / row_len).ok_or(RefereeError::InvalidJob)? as usize;
		table.push(row.saturating_mul(row_len).saturating_add(element % row_len));
	}
	Ok(segments_of(table.into_iter()))
}

/// The input-0 segments a partial reads that depend on the ids (input 1) `ids` gives: a
/// scatter-add's `dy` rows ([`Reduction::data_reads`]).
pub(super) fn data_reads<'a>(
	reduction: &Reduction,
	lane: usize,
	span: usize,
	ids: impl FnOnce() -> Result<&'a HostTensor, RefereeError>,
) -> Vec<usize> {
	if !matches!(reduction, Reduction::ScatterAddRows { .. }) {
		return Vec::new();
	}
	let Ok(ids) = ids() else { return Vec::new() };
	let ranges = reduction.data_reads(lane, span, |position, index| if position == 1 { ids.word(index) } else { None });
	segments_of(ranges.into_iter().flat_map(|(_, range)| range))
}

/// The sorted, distinct segments of the elements `elements`.
fn segments_of(elements: impl Iterator<Item = usize>) -> Vec<usize> {
	let mut segments: Vec<usize> = elements.map(|element| element / SEGMENT).collect();
	segments.sort_unstable();
	segments.dedup();
	segments
}

/// The dataset segments that segment `segment` of the batch's value `value`
/// reads, given the step's sample indices: what the prover opens for
/// [`batch_segment`].
fn batch_reads(graph: &Graph, dataset: DataLayout, indices: &[u32], value: usize, segment: usize) -> Result<Vec<usize>, RefereeError> {
	let mut segments = Vec::new();
	for element in batch_elements(graph, value, segment)? {
		if let BatchWord::Data(word) = batch_source(graph, dataset, (0, indices), value, element)? {
			segments.push(word / SEGMENT);
		}
	}
	segments.sort_unstable();
	segments.dedup();
	Ok(segments)
}


/// The first piece of a traced step, in operator order and then piece order,
/// that holds NaN or an infinity: the piece a solver opens to prove that the
/// step diverges. Its inputs are finite (every earlier piece is), so the referee
/// recomputes it and answers [`RefereeError::NonFiniteOutput`]: the step is
/// invalid under rule 7, and nobody is at fault. `None` for a finite step.
pub fn first_non_finite_piece(graph: &Graph, step: &StepTrace) -> Result<Option<(usize, usize)>, RefereeError> {
	let invalid = |_| RefereeError::InvalidJob;
	let finite = |values: &[f32]| values.iter().all(|value| value.is_finite());
	for (operator, node) in graph.nodes.iter().enumerate() {
		// Running sums first, as the piece tree orders them.
		let mut first_bad = None;
		crate::job::trace::for_each_running_sum(graph, operator, &step.values, (None, None), |index, sum| {
			if first_bad.is_none() && !finite(sum) {
				first_bad = Some(index);
			}
			Ok::<(), RefereeError>(())
		})?;
		if let Some(piece) = first_bad {
			return Ok(Some((operator, piece)));
		}
		// Then each output's segments (the batch's labels and indices are
		// integers), or for `Commit` the new state's chunks.
		let values = graph.piece_values(operator).map_err(invalid)?;
		if node.kind == OpKind::Commit {
			for (tensor, &id) in values.iter().enumerate() {
				let Some(crate::job::trace::HostTensor::F32(values)) = step.values.get(id) else { continue };
				if let Some(bad) = values.iter().position(|value| !value.is_finite()) {
					let piece = graph.state_chunk_index(tensor, bad / CHUNK_WORDS).ok_or(RefereeError::InvalidJob)?;
					return Ok(Some((operator, piece)));
				}
			}
			continue;
		}
		let skip = graph.accumulator_count(operator).map_err(invalid)?;
		for (position, &id) in values.iter().enumerate() {
			let Some(crate::job::trace::HostTensor::F32(tensor)) = step.values.get(id) else { continue };
			if let Some(bad) = tensor.iter().position(|value| !value.is_finite()) {
				let piece = graph.segment_leaf_index(values, position, bad / SEGMENT, skip).ok_or(RefereeError::InvalidJob)?;
				return Ok(Some((operator, piece)));
			}
		}
	}
	Ok(None)
}

//! How each level of a dispute binds to the level above, and the shape every
//! level must have: the checks the chain runs between bisection levels, so that
//! a party cannot enter a level with a root that does not belong to the leaf
//! the level above ended on.
//!
//! - **Steps → operators.** The step level ends on step `t`, the first step of the
//!   disputed segment whose state hash the parties disagree on. Each party then
//!   names its operator root of step `t`, and [`bind_step`] checks it: the
//!   operator tree's `Commit` leaf commits the state root after the step and the
//!   loss operator's piece tree the loss, and with `ℓ_t = record_hash(ℓ_{t−1}, t,
//!   loss)`, `h_t = state_hash(h_{t−1}, t, state root, ℓ_t)` must be the party's
//!   leaf `t`, chained from its proven `h_{t−1}` and `ℓ_{t−1}` (the anchor of the
//!   segment's start state, and no record, for its first step). A party with a
//!   wrong `h_t` (a wrong reported loss among them) cannot present the honest
//!   operator tree. The batch is not bound here: it follows from the job's seed
//!   and the step, and the referee judges the `Batch` operator's pieces against
//!   the dataset root.
//! - **Operators → pieces.** Level 2 ends on operator `j`. Each party names its
//!   piece root of `j`, and [`bind_operator`] checks that the operator leaf
//!   `j` under the party's operator root commits it, with the kind and piece
//!   count the job's graph gives operator `j`.
//! - **Shapes.** [`level_leaves`] gives each level's leaf count from the job
//!   alone; a [`Game`](crate::proof::bisection::Game) started from it makes the party
//!   whose tree has another shape lose.
//! - **Ends of a unit.** [`open_state`] proves the state root before any step
//!   of a segment's trace, and [`super::boundary::unit_final_state_root`] the state
//!   root after a unit's last step:
//!   the chain ties unit `i + 1`'s start state to unit `i`'s proven end with it.
//! - **Availability.** [`open_state_chunk`] proves a chunk of the state a unit
//!   commits at one of its boundaries: what a solver posts when the chain demands a
//!   piece of a checkpoint or of its final model, to show it holds (and serves)
//!   what it committed.

use super::boundary::{open_boundary, BoundaryOpening, UnitCommitment};
use super::{StateOpening, TraceCommitment};
use crate::proof::graph::{Graph, OpKind};
use crate::proof::hash::Digest;
use crate::proof::graph::Origin;
use crate::proof::merkle::{index_segment_leaf, MerkleProof, MultiProof, TreeKind};
use crate::proof::state_tree::{chunk_range, locate_chunk, verify_chunks};
use alloc::vec::Vec;
use crate::proof::chain::{anchor_hash, operator_leaf, record_hash, state_hash, trace_leaf};

codec_types! {
	/// A level of a dispute.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum Level {
		/// The unit's segment-level tree: one leaf per checkpoint boundary.
		Segments,
		/// The disputed segment's step-level tree.
		Steps,
		/// A step's operator-level tree.
		Operators,
		/// An operator's piece tree.
		Pieces {
			/// The operator.
			operator: u32,
		},
	}

	/// What binds a party's operator root of step `t` to its trace.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct StepBinding {
		/// Proves `h_{t−1}` and `ℓ_{t−1}`, the state hash and record step `t` chains from.
		pub previous: StateOpening,
		/// Inclusion of `trace_leaf(h_t)` at step `t` in the party's step-level tree.
		pub proof: MerkleProof,
		/// The state root after step `t`: the `Commit` operator's piece root.
		pub state_root: Digest,
		/// Inclusion of the `Commit` operator's leaf in the operator-level tree.
		pub state_proof: MerkleProof,
		/// The step's loss, as canonical bits: the loss operator's loss output.
		pub loss: u32,
		/// The loss operator's piece root.
		pub loss_root: Digest,
		/// Inclusion of the loss operator's leaf in the operator-level tree.
		pub loss_operator_proof: MerkleProof,
		/// Inclusion of the loss's segment leaf in the loss operator's piece tree.
		pub loss_proof: MerkleProof,
	}

	/// A chunk of the state a trace commits at one step, opened: what a solver posts to
	/// answer an availability request ([`open_state_chunk`]).
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct StateChunk {
		/// Opens the unit's boundary at the step: its state root.
		pub boundary: BoundaryOpening,
		/// The state chunks the request covers, in order: each one's canonical
		/// words, at most [`crate::proof::state_tree::CHUNK_WORDS`] of them (a tensor's last chunk is
		/// shorter by its zero padding).
		pub chunks: Vec<Vec<u32>>,
		/// Their inclusion in the state tree.
		pub proof: MultiProof,
	}

	/// Why a root does not belong to the level above.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum BindingError {
		/// The step is not in the trace (or, for a state, not at or after its start).
		StepOutOfRange,
		/// The state before the step does not open against the trace root or the start state.
		InvalidStateProof,
		/// The state hash the operator tree implies is not the party's leaf for the step.
		InvalidStepHash,
		/// An operator leaf does not open against the operator root with the
		/// kind and piece count the job's graph gives it.
		InvalidOperatorProof {
			/// The operator.
			operator: u32,
		},
		/// The loss is not finite, or not the loss operator's committed output.
		InvalidLossProof,
		/// The operator is not in the step's graph.
		OperatorOutOfRange,
		/// The job's graph has no `Batch` first and `Commit` last operator.
		InvalidJob,
		/// The state has no such chunk.
		ChunkOutOfRange,
		/// The chunk's words do not open against the state root.
		InvalidChunkProof,
	}
}

/// State chunks ([`crate::proof::state_tree`]) one availability request covers:
/// 4 KiB of weights, which one transaction carries with its proofs in a few
/// kilobytes more.
pub const CHUNKS_PER_REQUEST: usize = 4;

/// The state chunks availability request `index` covers, in a state of
/// `chunk_count` chunks: runs of [`CHUNKS_PER_REQUEST`], the last one possibly
/// shorter.
pub fn request_chunks(chunk_count: usize, index: u32) -> Result<core::ops::Range<usize>, BindingError> {
	let first = (index as usize)
		.checked_mul(CHUNKS_PER_REQUEST)
		.filter(|&first| first < chunk_count)
		.ok_or(BindingError::ChunkOutOfRange)?;
	Ok(first..first.saturating_add(CHUNKS_PER_REQUEST).min(chunk_count))
}

/// Availability requests that cover a state of `graph`: its chunks in runs of
/// [`CHUNKS_PER_REQUEST`].
pub fn state_chunks(graph: &Graph) -> usize {
	graph.state_chunks().div_ceil(CHUNKS_PER_REQUEST)
}

/// Checks that `chunk` answers availability request `index` for the state
/// `unit` commits at its boundary before global step `step` (the end of one of
/// its segments; the unit's end is its final state): its boundary opening
/// proves the state root, and the request's state chunks, every one in order,
/// open against that root in the state tree.
pub fn open_state_chunk(graph: &Graph, unit: &UnitCommitment, step: u32, index: u32, chunk: &StateChunk) -> Result<(), BindingError> {
	let segment = boundary_before(unit, step).ok_or(BindingError::StepOutOfRange)?;
	let (state_root, _) = open_boundary(unit, segment, &chunk.boundary).map_err(|_| BindingError::InvalidStateProof)?;
	let (lens, leaf_count) = (graph.state_lens(), graph.state_chunks());
	let range = request_chunks(leaf_count, index)?;
	if chunk.chunks.len() != range.len() {
		return Err(BindingError::InvalidChunkProof);
	}
	// Each chunk holds exactly its tensor's words in it, as the prover's tree hashed them.
	let lens: Vec<usize> = lens.collect();
	let mut opened: Vec<(u32, &[u32])> = Vec::with_capacity(range.len());
	for (words, index) in chunk.chunks.iter().zip(range) {
		let (tensor, within) = locate_chunk(lens.iter().copied(), index).ok_or(BindingError::ChunkOutOfRange)?;
		let len = lens.get(tensor).copied().unwrap_or(0);
		let index = u32::try_from(index).map_err(|_| BindingError::ChunkOutOfRange)?;
		if words.len() != chunk_range(len, within).len() {
			return Err(BindingError::InvalidChunkProof);
		}
		opened.push((index, words.as_slice()));
	}
	if !verify_chunks(&state_root, leaf_count, &opened, &chunk.proof) {
		return Err(BindingError::InvalidChunkProof);
	}
	Ok(())
}

/// The segment of `unit` that ends right before global step `step`, if one does:
/// the boundaries a unit commits are its segments' ends.
pub fn boundary_before(unit: &UnitCommitment, step: u32) -> Option<u32> {
	let segments = unit.segments();
	let segment = segments.of_step(step.checked_sub(1)?)?;
	(segments.range(segment)?.end == step).then_some(segment)
}

/// Which node function the tree a dispute bisects at `level` uses: the state
/// tree's for `Commit`'s pieces, the segment trees' for every other level.
pub fn level_kind(graph: &Graph, level: Level) -> Result<TreeKind, BindingError> {
	match level {
		Level::Pieces { operator } => graph.piece_tree_kind(operator as usize).map_err(|_| BindingError::OperatorOutOfRange),
		Level::Segments | Level::Steps | Level::Operators => Ok(TreeKind::Segments),
	}
}

/// Leaves of the tree a dispute bisects at `level`, from the job's graph, the
/// unit's commitment and, below the segment level, the disputed segment's trace
/// commitment (its steps come from the unit's grid, never from a party).
pub fn level_leaves(graph: &Graph, unit: &UnitCommitment, segment: Option<&TraceCommitment>, level: Level) -> Result<u32, BindingError> {
	let count = match (level, segment) {
		(Level::Segments, _) => return Ok(unit.segments().count()),
		(Level::Steps, Some(trace)) => return Ok(trace.steps),
		(Level::Steps, None) => return Err(BindingError::StepOutOfRange),
		(Level::Operators, _) => graph.nodes.len(),
		(Level::Pieces { operator }, _) => graph.piece_count(operator as usize).map_err(|_| BindingError::OperatorOutOfRange)?,
	};
	u32::try_from(count).map_err(|_| BindingError::InvalidJob)
}

/// Opens the state before global step `step` of `trace` (a segment's step-level
/// trace): returns the state hash it chains from (`h_{step−1}`, or the segment's
/// anchor before its first step), its state root, and the record there (zeros
/// before the first step). `step` may be one past the trace's last step: that
/// opens the trace's final state.
pub fn open_state(trace: &TraceCommitment, step: u32, opening: &StateOpening) -> Result<(Digest, Digest, Digest), BindingError> {
	let position = step.checked_sub(trace.first_step).filter(|&p| p <= trace.steps).ok_or(BindingError::StepOutOfRange)?;
	match opening {
		StateOpening::Anchor if position == 0 => Ok((anchor_hash(&trace.start_state_root), trace.start_state_root, [0; 32])),
		StateOpening::Step { previous, state_root, record, proof } if position > 0 => {
			let hash = state_hash(previous, step - 1, state_root, record);
			if proof.index == position - 1 && proof.leaf_count == trace.steps && proof.verify(&trace.trace_root, &trace_leaf(&hash)) {
				Ok((hash, *state_root, *record))
			} else {
				Err(BindingError::InvalidStateProof)
			}
		},
		_ => Err(BindingError::InvalidStateProof),
	}
}

/// Checks that operator `operator`'s leaf under `operator_root` commits
/// `piece_root`, with the kind and piece count the job's `graph` gives it.
pub fn bind_operator(
	graph: &Graph,
	operator: u32,
	operator_root: &Digest,
	piece_root: &Digest,
	proof: &MerkleProof,
) -> Result<(), BindingError> {
	let id = operator as usize;
	let node = graph.node(id).map_err(|_| BindingError::OperatorOutOfRange)?;
	let count = graph.piece_count(id).map_err(|_| BindingError::OperatorOutOfRange)?;
	let count = u32::try_from(count).map_err(|_| BindingError::InvalidJob)?;
	let leaf = operator_leaf(operator, node.kind.code(), count, piece_root);
	if proof.index != operator || proof.leaf_count as usize != graph.nodes.len() || !proof.verify(operator_root, &leaf) {
		return Err(BindingError::InvalidOperatorProof { operator });
	}
	Ok(())
}

/// Checks that `operator_root` is the operator tree of step `step` of the
/// party's `trace`: its batch and commit leaves give the state hash that is the
/// party's leaf `step`, chained from its proven previous state hash. Returns
/// that state hash, `h_step`.
pub fn bind_step(graph: &Graph, trace: &TraceCommitment, step: u32, operator_root: &Digest, binding: &StepBinding) -> Result<Digest, BindingError> {
	let position = step.checked_sub(trace.first_step).filter(|&p| p < trace.steps).ok_or(BindingError::StepOutOfRange)?;
	let (previous, _, previous_record) = open_state(trace, step, &binding.previous)?;
	let last = graph.nodes.len().checked_sub(1).ok_or(BindingError::InvalidJob)?;
	let ends = (graph.nodes.first().map(|node| node.kind), graph.nodes.last().map(|node| node.kind));
	if ends != (Some(OpKind::Batch), Some(OpKind::Commit)) {
		return Err(BindingError::InvalidJob);
	}
	bind_operator(graph, last as u32, operator_root, &binding.state_root, &binding.state_proof)?;
	let (loss_operator, loss_leaf, loss_pieces) = loss_piece(graph)?;
	bind_operator(graph, loss_operator, operator_root, &binding.loss_root, &binding.loss_operator_proof)?;
	let proof = &binding.loss_proof;
	let leaf = index_segment_leaf(&[binding.loss]);
	if !f32::from_bits(binding.loss).is_finite()
		|| proof.index != loss_leaf
		|| proof.leaf_count != loss_pieces
		|| !proof.verify(&binding.loss_root, &leaf)
	{
		return Err(BindingError::InvalidLossProof);
	}
	let record = record_hash(&previous_record, step, binding.loss);
	let hash = state_hash(&previous, step, &binding.state_root, &record);
	let proof = &binding.proof;
	if proof.index != position || proof.leaf_count != trace.steps || !proof.verify(&trace.trace_root, &trace_leaf(&hash)) {
		return Err(BindingError::InvalidStepHash);
	}
	Ok(hash)
}

/// Where the step's loss is committed: the loss operator, the piece index of
/// the loss's (one-element) segment in its piece tree, and that tree's leaf count.
pub(crate) fn loss_piece(graph: &Graph) -> Result<(u32, u32, u32), BindingError> {
	let Some(Origin::Node { node, output }) = graph.value(graph.loss).map(|value| value.origin) else {
		return Err(BindingError::InvalidJob);
	};
	let invalid = |_| BindingError::InvalidJob;
	let skip = graph.accumulator_count(node).map_err(invalid)?;
	let values = graph.piece_values(node).map_err(invalid)?;
	let leaf = graph.segment_leaf_index(values, output, 0, skip).ok_or(BindingError::InvalidJob)?;
	let count = graph.piece_count(node).map_err(invalid)?;
	let u32_of = |n: usize| u32::try_from(n).map_err(|_| BindingError::InvalidJob);
	Ok((u32_of(node)?, u32_of(leaf)?, u32_of(count)?))
}

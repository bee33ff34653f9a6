//! The referee: recomputes one disputed piece of one operator of one step from
//! inputs proven against the claimant's committed roots, and says whether the
//! claimed output is right.
//!
//! This is the function the chain runs (`no_std`, no panics on any input). Its
//! inputs come in two parts, so that no party can choose what it is judged against:
//!
//! - a [`Dispute`], built by the chain from its own records: the claimant's
//!   [`TraceCommitment`] (its learning proof: trace root, step range, the
//!   state root it starts from), the job's [`DataCommitment`] (training set
//!   root, the unit's shard), the [`Position`] the three bisection levels
//!   ended on ([`crate::proof::bisection`]), and the claimant's operator root of that
//!   step and piece root of that operator, which the game fixed and bound
//!   level by level ([`bind_step`], [`bind_operator`]);
//! - [`Openings`], supplied by a party: preimages and Merkle proofs only.
//!
//! After the three levels the two parties agree on the state hash before step
//! `t`, on every operator leaf before operator `j`, and on every piece before
//! piece `p` of operator `j`; they disagree on piece `p`. The openings hold:
//!
//! - the state before step `t` (the previous state hash's preimage with its
//!   proof in the step-level tree, or nothing for the unit's first step, whose
//!   state root the chain holds);
//! - the proof of operator `j`'s own leaf under the operator root, which binds
//!   the piece root and the piece count to it;
//! - openings of the operator leaves that produced the inputs it reads;
//! - the input segments it reads, each input's with one multiproof in its
//!   producer's tree; an input read from the state before the step is opened
//!   in whole state chunks of 256 words ([`crate::proof::state_tree`]), proven
//!   against the previous state root;
//! - the pieces of operator `j` before `p` that it reads (the previous
//!   accumulator of a K-chunk, or the final accumulators behind an output segment);
//! - the claimed leaf of piece `p`, with its proof under the claimant's piece root.
//!
//! Every opening must lie in the agreed prefix: operators before `j`, pieces
//! before `p`. Every `f32` word opened must be finite (rule 7: a step that
//! produces NaN or an infinity is invalid, and NaN bit patterns differ between
//! CPUs, so no verdict may depend on one). [`judge`] checks every proof,
//! recomputes piece `p` with the reference operators, and returns [`Verdict`]
//! if the claim is right, [`RefereeError::WrongClaimedOutput`] (with the
//! recomputed hash) if not, and [`RefereeError::NonFiniteOutput`] if the
//! recomputation from finite, proven inputs is not finite: the step diverges,
//! which no honest trace contains.
//!
//! Cost: an accumulator piece is one 32×32×32 chunk. A reduction's partial
//! reads at most 1,024 input elements (or 32 rows of logits) and one earlier
//! partial ([`crate::proof::reduction`]). An output segment of a contraction or a
//! reduction or an element-wise operator's segment is at most 32 elements plus
//! the proofs and the partials it reads (a whole 256-element chunk for each
//! state segment it reads); bias add also reads the bias of its elements'
//! channels; a `Commit` piece is one state chunk, eight segments of the
//! optimizer's outputs. So no piece's cost grows with the batch or the
//! model, except a loss piece's with the class count (bounded by
//! [`MAX_CLASSES`]). A `Batch` piece reads the dataset rows of its samples,
//! proven against the job's dataset root, and draws their places in the epoch's
//! order by random access, at the same cost whatever the training set's size.
//! [`worst_piece`] bounds the cost for a job's shape; [`validate_job`] refuses
//! shapes beyond the bounds.

pub mod aggregate;
mod binding;
pub mod boundary;
mod cost;
#[cfg(feature = "std")]
mod prover;
#[cfg(all(test, feature = "std"))]
mod transformer_pieces;

pub use binding::{
	bind_operator, bind_step, boundary_before, level_leaves, level_kind, open_state, open_state_chunk, request_chunks, state_chunks, BindingError,
	Level, StateChunk, StepBinding, CHUNKS_PER_REQUEST,
};
pub use cost::{
	piece_cost, validate_data, validate_job, worst_piece, JobError, PieceCost, MAX_CLASSES, MAX_OPENED_PIECES, MAX_OPENED_SEGMENTS,
};
#[cfg(feature = "std")]
pub use prover::{
	first_non_finite_piece, open_case, open_step_binding, requirements, state_chunk, traced_state_opening, Requirements, RunOpening,
	SegmentTrace, UnitBoundaries,
};

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use crate::ops::activation::{activation_backward, activation_forward};
use crate::ops::bias::BiasLayout;
use crate::arith::canonical_bits;
use crate::ops::contraction::{chunk_partial_sums, fold_chunk_partials, ChunkId, Contraction};
use crate::job::data::DataLayout;
use crate::proof::graph::{BatchKind, Graph, GraphError, OpKind, Origin, Piece, ValueKind};
use crate::proof::hash::Digest;
pub use crate::proof::chain::TracedStep;
use crate::proof::merkle::{index_segment_leaf, segment_count, segment_range, MerkleProof, MultiProof, TreeKind, SEGMENT};
use crate::proof::state_tree::{chunk_leaf_words, chunk_range, CHUNK_WORDS};
use crate::job::model::{ModelConfig, TrainConfig};
use crate::ops::optim::{adamw_step, sgd_momentum_step};
use crate::proof::reduction::Source;

codec_types! {
	/// A unit's learning proof as the chain records it for one party: what
	/// every level of a dispute over the unit is judged against.
	#[derive(Clone, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct TraceCommitment {
		/// Root of the step-level tree (leaves `trace_leaf(h_t)`).
		pub trace_root: Digest,
		/// Global number of the trace's first step.
		pub first_step: u32,
		/// Steps in the trace: the step-level tree's leaf count.
		pub steps: u32,
		/// State root of the model the unit starts from: the job's initial
		/// state, the previous unit's proven final state, or a checkpoint's.
		/// The first step chains from its anchor, `anchor_hash(start_state_root)`.
		pub start_state_root: Digest,
	}

	/// The training data a unit draws its batches from.
	#[derive(Clone, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct DataCommitment {
		/// Root of the job's whole training set ([`Dataset::tree`](crate::job::data::Dataset::tree)).
		pub root: Digest,
		/// Samples in the whole training set.
		pub samples: u32,
		/// First sample of the unit's shard (0 for a step-range unit).
		pub first_sample: u32,
		/// Samples in the shard (`samples` for a step-range unit).
		pub shard_samples: u32,
	}

	/// Where the three bisection levels ended.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Position {
		/// The disputed global step.
		pub step: u32,
		/// The disputed operator of that step.
		pub operator: u32,
		/// The disputed piece of that operator (an accumulator, a partial or an output segment).
		pub piece: u32,
	}

	/// What the referee judges against, all of it from the chain's records and
	/// the game's state, never from a party's submission.
	#[derive(Clone, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Dispute {
		/// The claimant's learning proof.
		pub trace: TraceCommitment,
		/// The job's training set and the unit's shard.
		pub data: DataCommitment,
		/// The disputed piece.
		pub position: Position,
		/// The claimant's operator root of the disputed step, bound to its trace by [`bind_step`].
		pub operator_root: Digest,
		/// The claimant's piece root of the disputed operator, bound by [`bind_operator`].
		pub piece_root: Digest,
	}

	/// How the state before a step is proven.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub enum StateOpening {
		/// The step is the trace's first: its state is the chain's `start_state_root`.
		Anchor,
		/// The state hash after the step before, opened and proven in the step-level tree.
		Step {
			/// The state hash before that one.
			previous: Digest,
			/// The state root after the step before.
			state_root: Digest,
			/// The record after the step before ([`crate::proof::chain::record_hash`]).
			record: Digest,
			/// Inclusion of that state hash in the step-level tree.
			proof: MerkleProof,
		},
	}

	/// An operator leaf of the disputed step, opened and proven.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct OperatorOpening {
		/// Operator id (before the disputed one).
		pub operator: u32,
		/// Its piece root.
		pub piece_root: Digest,
		/// Inclusion of its leaf in the operator-level tree.
		pub proof: MerkleProof,
	}

	/// One leaf's worth of a value: a segment, or for a value of the state before
	/// the step, a state chunk.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct SegmentOpening {
		/// Segment index within the value, or for a state tensor its chunk index.
		pub segment: u32,
		/// Its canonical words (`f32` bits or `u32`s): at most 32 for a segment,
		/// at most 256 for a state chunk.
		pub words: Vec<u32>,
	}

	/// Segments of one input of the disputed operator (state chunks for a state
	/// tensor), proven together.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct InputOpening {
		/// Position in the operator's input list.
		pub input: u32,
		/// The segments, in increasing segment order.
		pub segments: Vec<SegmentOpening>,
		/// Their inclusion in the producer's tree (the state tree or a piece tree).
		pub proof: MultiProof,
	}

	/// A piece of the disputed operator before the disputed one, proven in its piece tree.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct PieceOpening {
		/// Piece index.
		pub piece: u32,
		/// Its canonical words.
		pub words: Vec<u32>,
		/// Inclusion in the disputed operator's piece tree.
		pub proof: MerkleProof,
	}

	/// A party's openings for one disputed piece: preimages and proofs, every
	/// one checked against the [`Dispute`]'s roots.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct Openings {
		/// The state before the step.
		pub previous_state: StateOpening,
		/// Inclusion of the disputed operator's own leaf in the operator-level tree,
		/// which binds [`Dispute::piece_root`] and the piece count to
		/// [`Dispute::operator_root`].
		pub operator_proof: MerkleProof,
		/// Leaves of the operators whose outputs are read.
		pub operators: Vec<OperatorOpening>,
		/// The input segments read.
		pub inputs: Vec<InputOpening>,
		/// Earlier pieces of the disputed operator that are read.
		pub pieces: Vec<PieceOpening>,
		/// The claimant's leaf hash of the disputed piece.
		pub claimed_output: Digest,
		/// Its inclusion at the disputed piece's index under [`Dispute::piece_root`].
		pub claim_proof: MerkleProof,
	}

	/// The claim is right: the recomputed piece has the claimed leaf hash.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Verdict {
		/// The leaf hash of the recomputed piece (equal to the claim).
		pub output: Digest,
	}

	/// Why the referee rejected a claim. `WrongClaimedOutput` means the claim
	/// is wrong; `NonFiniteOutput` that the step diverges (nobody's fault);
	/// every other error that the openings are bad.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum RefereeError {
		/// The claimed output is wrong; the recomputed leaf hash is given.
		WrongClaimedOutput {
			/// The claim.
			claimed: Digest,
			/// What the reference computes.
			recomputed: Digest,
		},
		/// Recomputing the piece from finite, proven inputs gives NaN or an
		/// infinity: the step diverges under rule 7, whatever either party claims.
		NonFiniteOutput,
		/// An opened `f32` word is NaN or an infinity: no valid trace contains one.
		NonFiniteInput {
			/// Input position, or `u32::MAX` for a piece of the disputed operator.
			input: u32,
		},
		/// The claimed leaf is not at the disputed piece's index under the piece root.
		InvalidClaimProof,
		/// An input's segments do not lead to its producer's root: a wrong word,
		/// proof, segment index or segment length.
		InvalidInputProof {
			/// Input position.
			input: u32,
		},
		/// The previous state's opening does not match the trace root or the start state.
		InvalidStateProof,
		/// An operator leaf's proof does not lead to the operator root.
		InvalidOperatorProof {
			/// The operator.
			operator: u32,
		},
		/// A piece's proof does not lead to the piece root.
		InvalidPieceProof {
			/// The piece.
			piece: u32,
		},
		/// The disputed piece is not in the operator's piece range.
		PieceOutOfRange {
			/// The piece asked for.
			piece: u32,
			/// Pieces of the operator.
			count: u32,
		},
		/// The disputed operator is not in the step's graph.
		OperatorOutOfRange {
			/// The operator asked for.
			operator: u32,
			/// Operators in the step.
			count: u32,
		},
		/// The step is outside the trace.
		StepOutOfRange {
			/// The step asked for.
			step: u32,
		},
		/// An opening lies outside the agreed prefix (an operator or piece not before the disputed one).
		NotAgreed,
		/// An input position that the operator does not have.
		NoSuchInput {
			/// The position.
			input: u32,
		},
		/// A segment the recomputation reads was not opened.
		MissingInput {
			/// Input position.
			input: u32,
			/// Segment index.
			segment: u32,
		},
		/// The producer of an input was not opened.
		MissingOperator {
			/// The producer.
			operator: u32,
		},
		/// A piece the recomputation reads was not opened.
		MissingPiece {
			/// The piece.
			piece: u32,
		},
		/// More openings than judging any piece needs, or one opened twice.
		TooManyOpenings,
		/// The model, hyper-parameters or data commitment do not describe a valid step.
		InvalidJob,
		/// A reference operator refused the proven inputs (for example a label out of range).
		KernelRejected,
	}
}

impl From<crate::error::KernelError> for RefereeError {
	fn from(_: crate::error::KernelError) -> Self {
		Self::KernelRejected
	}
}

/// Proven segments of one input, keyed by segment index.
type Segments<'a> = BTreeMap<usize, &'a [u32]>;

/// Judges the claimant's output at `dispute`'s position, for a job with `model`
/// and `train`, from a party's `openings`: `Ok` if the claimed output is right.
///
/// This is the entry point the runtime exposes. It never panics.
pub fn judge(model: &ModelConfig, train: &TrainConfig, dispute: &Dispute, openings: &Openings) -> Result<Verdict, RefereeError> {
	let graph = validate_job(model, train).map_err(|_| RefereeError::InvalidJob)?;
	judge_step(&graph, train.seed, dispute, openings)
}

/// [`judge`] on a step graph the caller has built and bounded, with the job's sample-order
/// `seed`: the one judgement every model's graph goes through, once its job is checked.
pub fn judge_step(graph: &Graph, seed: u64, dispute: &Dispute, openings: &Openings) -> Result<Verdict, RefereeError> {
	let output = recompute_step(graph, seed, dispute, openings)?;
	if output == openings.claimed_output {
		Ok(Verdict { output })
	} else {
		Err(RefereeError::WrongClaimedOutput { claimed: openings.claimed_output, recomputed: output })
	}
}

/// Checks every opening against `dispute` and recomputes the disputed piece;
/// returns its leaf hash.
pub fn recompute(model: &ModelConfig, train: &TrainConfig, dispute: &Dispute, openings: &Openings) -> Result<Digest, RefereeError> {
	let graph = validate_job(model, train).map_err(|_| RefereeError::InvalidJob)?;
	recompute_step(&graph, train.seed, dispute, openings)
}

/// [`recompute`] on a step graph the caller has built and bounded, with the job's `seed`.
pub fn recompute_step(graph: &Graph, seed: u64, dispute: &Dispute, openings: &Openings) -> Result<Digest, RefereeError> {
	let Position { step, operator: operator_id, piece: piece_id } = dispute.position;
	let operator = operator_id as usize;
	let node_count = graph.nodes.len();
	let node = graph
		.node(operator)
		.map_err(|_| RefereeError::OperatorOutOfRange { operator: operator_id, count: node_count as u32 })?
		.clone();
	let piece_count = graph.piece_count(operator).map_err(|_| RefereeError::InvalidJob)?;
	let piece_index = piece_id as usize;
	let piece = graph.piece(operator, piece_index).map_err(|error| match error {
		GraphError::PieceOutOfRange { .. } => RefereeError::PieceOutOfRange { piece: piece_id, count: piece_count as u32 },
		_ => RefereeError::InvalidJob,
	})?;
	let position = step.checked_sub(dispute.trace.first_step).filter(|&p| p < dispute.trace.steps);
	if position.is_none() {
		return Err(RefereeError::StepOutOfRange { step });
	}
	let (_, state_root, _) = open_state(&dispute.trace, step, &openings.previous_state).map_err(|_| RefereeError::InvalidStateProof)?;

	// The disputed operator's piece root is the one its leaf commits, with this piece count;
	// the claim is the leaf at the disputed index under that root.
	bind_operator(&graph, operator_id, &dispute.operator_root, &dispute.piece_root, &openings.operator_proof)
		.map_err(|_| RefereeError::InvalidOperatorProof { operator: operator_id })?;
	let claim = &openings.claim_proof;
	let piece_kind = graph.piece_tree_kind(operator).map_err(|_| RefereeError::InvalidJob)?;
	let claim_opens = claim.verify_in(piece_kind, &dispute.piece_root, &openings.claimed_output);
	if claim.index != piece_id || claim.leaf_count as usize != piece_count || !claim_opens {
		return Err(RefereeError::InvalidClaimProof);
	}

	// Producer operators' piece roots.
	let mut producer_roots: BTreeMap<usize, Digest> = BTreeMap::new();
	for opening in &openings.operators {
		let producer = opening.operator as usize;
		if producer >= operator {
			return Err(RefereeError::NotAgreed);
		}
		bind_operator(&graph, opening.operator, &dispute.operator_root, &opening.piece_root, &opening.proof)
			.map_err(|_| RefereeError::InvalidOperatorProof { operator: opening.operator })?;
		if producer_roots.insert(producer, opening.piece_root).is_some() {
			return Err(RefereeError::TooManyOpenings);
		}
	}

	// Earlier pieces of the disputed operator: running sums, all `f32`.
	let mut pieces: BTreeMap<usize, &[u32]> = BTreeMap::new();
	if openings.pieces.len() > MAX_OPENED_PIECES {
		return Err(RefereeError::TooManyOpenings);
	}
	for opening in &openings.pieces {
		let index = opening.piece as usize;
		if index >= piece_index {
			return Err(RefereeError::NotAgreed);
		}
		let proof = &opening.proof;
		let leaf = index_segment_leaf(&opening.words);
		if proof.index != opening.piece || proof.leaf_count as usize != piece_count || !proof.verify(&dispute.piece_root, &leaf) {
			return Err(RefereeError::InvalidPieceProof { piece: opening.piece });
		}
		if !all_finite(&opening.words) {
			return Err(RefereeError::NonFiniteInput { input: u32::MAX });
		}
		if pieces.insert(index, opening.words.as_slice()).is_some() {
			return Err(RefereeError::TooManyOpenings);
		}
	}

	// Input segments, each input's proven at once in the tree of the value's producer
	// (for the batch operator, input 0 is the training set, proven in the dataset tree).
	let data = &dispute.data;
	let layout = graph.data_layout(data.samples as usize);
	let is_batch = node.kind == OpKind::Batch;
	// Only the batch reads the dataset; a data commitment the trainer would refuse is
	// not a valid job (the chain refuses such jobs).
	let dataset_words = match validate_data(&graph, data) {
		Ok(words) => words,
		Err(_) if is_batch => return Err(RefereeError::InvalidJob),
		Err(_) => 0,
	};
	let mut inputs: Vec<Segments> = vec![Segments::new(); if is_batch { 1 } else { node.inputs.len() }];
	// The openings' size bounds the work: at most the segments the costliest piece reads.
	let opened: usize = openings.inputs.iter().map(|opening| opening.segments.len()).sum();
	if opened > MAX_OPENED_SEGMENTS {
		return Err(RefereeError::TooManyOpenings);
	}
	for opening in &openings.inputs {
		let position = opening.input as usize;
		let no_such_input = RefereeError::NoSuchInput { input: opening.input };
		// The input's tree, leaf count, length, where its segments lie, and which words are `f32`s.
		// A state tensor is opened in chunks, proven in the state tree.
		let mut state_tensor = None;
		let (root, leaf_count, value_len, placement, f32_words) = if is_batch {
			if position != 0 {
				return Err(no_such_input);
			}
			// A classification set's features come first, then its labels; a stream is tokens.
			(data.root, segment_count(dataset_words), dataset_words, None, layout.f32_words())
		} else {
			let value_id = *node.inputs.get(position).ok_or(no_such_input)?;
			let value = graph.value(value_id).copied().ok_or(RefereeError::InvalidJob)?;
			let f32_words = if value.kind == ValueKind::F32 { 0..value.len } else { 0..0 };
			match value.origin {
				Origin::State(index) => {
					state_tensor = Some(index);
					(state_root, graph.state_chunks(), value.len, None, f32_words)
				},
				Origin::Node { node: producer, output } => {
					let root = *producer_roots.get(&producer).ok_or(RefereeError::MissingOperator { operator: producer as u32 })?;
					let count = graph.piece_count(producer).map_err(|_| RefereeError::InvalidJob)?;
					let skip = graph.accumulator_count(producer).map_err(|_| RefereeError::InvalidJob)?;
					let values = graph.piece_values(producer).map_err(|_| RefereeError::InvalidJob)?;
					(root, count, value.len, Some((values, output, skip)), f32_words)
				},
			}
		};
		let bad = RefereeError::InvalidInputProof { input: opening.input };
		let slot = inputs.get_mut(position).ok_or(no_such_input)?;
		if opening.proof.indices.len() != opening.segments.len() {
			return Err(bad);
		}
		let mut leaves = Vec::with_capacity(opening.segments.len());
		for (segment, &proven_index) in opening.segments.iter().zip(&opening.proof.indices) {
			let index = match (state_tensor, placement) {
				(Some(tensor), _) => graph.state_chunk_index(tensor, segment.segment as usize),
				(None, Some((values, value_position, skip))) => {
					graph.segment_leaf_index(values, value_position, segment.segment as usize, skip)
				},
				// The dataset tree holds nothing but the dataset's segments.
				(None, None) => Some(segment.segment as usize).filter(|&index| index < leaf_count),
			};
			let index = index.ok_or(bad)?;
			let elements = opened_range(state_tensor.is_some(), value_len, segment.segment as usize);
			if segment.words.len() != elements.len() || proven_index as usize != index {
				return Err(bad);
			}
			leaves.push(match state_tensor {
				Some(_) => chunk_leaf_words(&segment.words, index as u64),
				None => index_segment_leaf(&segment.words),
			});
		}
		let kind = if state_tensor.is_some() { TreeKind::State } else { TreeKind::Segments };
		if !opening.proof.verify_in(kind, &root, leaf_count, &leaves) {
			return Err(bad);
		}
		// Only proven words are judged: a non-finite one means the producer's
		// commitment holds a value no valid trace contains.
		for segment in &opening.segments {
			let elements = opened_range(state_tensor.is_some(), value_len, segment.segment as usize);
			let finite = segment.words.iter().zip(elements).all(|(&word, element)| !f32_words.contains(&element) || is_finite(word));
			if !finite {
				return Err(RefereeError::NonFiniteInput { input: opening.input });
			}
		}
		if !slot.is_empty() {
			// One opening per input position.
			return Err(RefereeError::TooManyOpenings);
		}
		for segment in &opening.segments {
			if state_tensor.is_some() {
				// A chunk is the eight segments it starts with, as the operators read them.
				let first = (segment.segment as usize).saturating_mul(SEGMENTS_PER_CHUNK);
				for (offset, words) in segment.words.chunks(SEGMENT).enumerate() {
					slot.insert(first + offset, words);
				}
			} else {
				slot.insert(segment.segment as usize, segment.words.as_slice());
			}
		}
	}

	let reader = Inputs { graph: &graph, segments: &inputs, last: core::cell::Cell::new(None) };
	let words = match (node.kind, piece) {
		(OpKind::Contract(contraction), Piece::Accumulator(id)) => {
			let grid = contraction.grid()?;
			let previous = if id.chunk == 0 {
				None
			} else {
				let index = Graph::accumulator_index(&grid, ChunkId { chunk: id.chunk - 1, ..id });
				let words = pieces.get(&index).ok_or(RefereeError::MissingPiece { piece: index as u32 })?;
				// The accumulator before has the tile's shape, or it is not a proper opening.
				let extent = contraction.extent(id)?;
				if words.len() != extent.rows.len() * extent.cols.len() {
					return Err(RefereeError::InvalidPieceProof { piece: index as u32 });
				}
				Some(words)
			};
			accumulator_piece(contraction, id, &reader, previous)?
		},
		(OpKind::Contract(contraction), Piece::Segment { value, segment }) => {
			let len = reader.piece_value_len(operator, value)?;
			contraction_output_segment(contraction, len, segment, &pieces)?
		},
		(OpKind::Batch, Piece::Segment { value, segment }) => {
			batch_segment(graph, data, seed, step, value, segment, &reader)?
		},
		(_, Piece::Partial { lane, span }) => {
			let reduction = graph.reduction(operator).map_err(|_| RefereeError::InvalidJob)?.ok_or(RefereeError::InvalidJob)?;
			words_of(&reduction.partial(lane, span, &Proven { reader: &reader, pieces: &pieces })?)
		},
		(
			OpKind::BiasGrad(_) | OpKind::SoftmaxCrossEntropy(_) | OpKind::ClipGradNorm(_) | OpKind::NormGrad(_) | OpKind::ScatterAddRows { .. },
			Piece::Segment { value, segment },
		) => {
			let reduction = graph.reduction(operator).map_err(|_| RefereeError::InvalidJob)?.ok_or(RefereeError::InvalidJob)?;
			words_of(&reduction.output_segment(value, segment, &Proven { reader: &reader, pieces: &pieces })?)
		},
		(_, Piece::Segment { value, segment }) => {
			operator_segment(graph, operator, step, value, segment, &reader)?
		},
		(OpKind::Commit, Piece::Chunk { value, chunk }) => {
			// The new state's chunk: the optimizer's outputs it copies, eight segments.
			let len = reader.piece_value_len(operator, value)?;
			let mut words = Vec::with_capacity(CHUNK_WORDS);
			for segment in chunk_segments(len, chunk) {
				words.extend_from_slice(reader.segment(value, segment)?);
			}
			if !all_finite(&words) {
				return Err(RefereeError::NonFiniteOutput);
			}
			return Ok(chunk_leaf_words(&words, piece_index as u64));
		},
		(_, Piece::Accumulator(_) | Piece::Chunk { .. }) => return Err(RefereeError::InvalidJob),
	};
	// Only the batch's labels and sample indices (and all of a token batch) are `u32`s;
	// every other piece is `f32`s.
	let integer_words = is_batch && (graph.batch_kind == BatchKind::Windows || !matches!(piece, Piece::Segment { value: 0, .. }));
	if !integer_words && !all_finite(&words) {
		return Err(RefereeError::NonFiniteOutput);
	}
	Ok(index_segment_leaf(&words))
}

/// Segments of a chunk of state: 256 words in segments of 32.
pub(crate) const SEGMENTS_PER_CHUNK: usize = CHUNK_WORDS / SEGMENT;

/// The elements of a value of `len` elements that opening `index` holds: state
/// chunk `index` for a state tensor, segment `index` for any other value.
fn opened_range(is_state: bool, len: usize, index: usize) -> core::ops::Range<usize> {
	if is_state { chunk_range(len, index) } else { segment_range(len, index) }
}

/// The segments of a value of `len` elements that lie in its state chunk `chunk`.
pub(crate) fn chunk_segments(len: usize, chunk: usize) -> core::ops::Range<usize> {
	let first = chunk.saturating_mul(SEGMENTS_PER_CHUNK).min(segment_count(len));
	first..first.saturating_add(SEGMENTS_PER_CHUNK).min(segment_count(len))
}

/// Whether `word`, as an `f32`, is neither NaN nor an infinity.
fn is_finite(word: u32) -> bool {
	f32::from_bits(word).is_finite()
}

/// Whether every word of `words`, as `f32`s, is finite.
fn all_finite(words: &[u32]) -> bool {
	words.iter().all(|&word| is_finite(word))
}

/// Read access to the proven input segments of the disputed operator.
struct Inputs<'a> {
	graph: &'a Graph,
	segments: &'a [Segments<'a>],
	/// The segment read last, `(input, segment, words)`: pieces read their
	/// inputs in runs along segments, so most reads skip the map.
	last: core::cell::Cell<Option<(usize, usize, &'a [u32])>>,
}

impl<'a> Inputs<'a> {
	/// Elements of piece value `value` of operator `operator`.
	fn piece_value_len(&self, operator: usize, value: usize) -> Result<usize, RefereeError> {
		let values = self.graph.piece_values(operator).map_err(|_| RefereeError::InvalidJob)?;
		let id = values.get(value).ok_or(RefereeError::InvalidJob)?;
		Ok(self.graph.value(*id).map_or(0, |v| v.len))
	}

	/// The words of segment `segment` of input `position`.
	fn segment(&self, position: usize, segment: usize) -> Result<&'a [u32], RefereeError> {
		self.segments
			.get(position)
			.and_then(|map| map.get(&segment))
			.copied()
			.ok_or(RefereeError::MissingInput { input: position as u32, segment: segment as u32 })
	}

	/// Segment `segment` of input `position` as `f32`s.
	fn segment_f32(&self, position: usize, segment: usize) -> Result<Vec<f32>, RefereeError> {
		Ok(self.segment(position, segment)?.iter().map(|&w| f32::from_bits(w)).collect())
	}

	/// Word `index` of input `position`.
	fn word(&self, position: usize, index: usize) -> Result<u32, RefereeError> {
		let number = index / SEGMENT;
		let words = match self.last.get() {
			Some((input, segment, words)) if input == position && segment == number => words,
			_ => {
				let words = self.segment(position, number)?;
				self.last.set(Some((position, number, words)));
				words
			},
		};
		let missing = RefereeError::MissingInput { input: position as u32, segment: number as u32 };
		words.get(index % SEGMENT).copied().ok_or(missing)
	}

	/// Element `index` of input `position` as an `f32`.
	fn element(&self, position: usize, index: usize) -> Result<f32, RefereeError> {
		self.word(position, index).map(f32::from_bits)
	}
}

/// What element of a batch's value holds: a word of the job's training data it copies,
/// or a word it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchWord {
	/// The training data's word at this index (a feature, a label or a token).
	Data(usize),
	/// This word: a sample's index, or a token's position in its window.
	Literal(u32),
}

/// Where element `element` of the batch's value `value` comes from, in a training set
/// laid out as `layout`. `indices` are the step's sample indices (a stream's windows) of
/// the rows from `first_row` on.
///
/// A classification batch is features, labels and sample indices, a row per sample; a
/// token batch is input tokens, target tokens and positions, a row per position of each
/// window: row `s·T + t` of window `w` reads token `w·T + t` and its target `w·T + t + 1`.
pub(crate) fn batch_source(
	graph: &Graph,
	layout: DataLayout,
	(first_row, indices): (usize, &[u32]),
	value: usize,
	element: usize,
) -> Result<BatchWord, RefereeError> {
	let row = batch_row(graph, value, element);
	let sample = row.checked_sub(first_row).and_then(|at| indices.get(at)).map(|&i| i as usize).ok_or(RefereeError::InvalidJob)?;
	let column = element % graph.input_len.max(1);
	Ok(match (layout, value) {
		(DataLayout::Samples(dataset), 0) => BatchWord::Data(dataset.feature_word(sample, column)),
		(DataLayout::Samples(dataset), 1) => BatchWord::Data(dataset.label_word(sample)),
		(DataLayout::Samples(_), _) => BatchWord::Literal(sample as u32),
		(DataLayout::Windows(windows), 0) => BatchWord::Data(windows.token_word(sample, column)),
		(DataLayout::Windows(windows), 1) => BatchWord::Data(windows.token_word(sample, column + 1)),
		(DataLayout::Windows(_), _) => BatchWord::Literal(column as u32),
	})
}

/// The batch row (sample, or window) element `element` of the batch's value `value` lies in.
fn batch_row(graph: &Graph, value: usize, element: usize) -> usize {
	if value == 0 || graph.batch_kind == BatchKind::Windows {
		element / graph.input_len.max(1)
	} else {
		element
	}
}

/// The elements of segment `segment` of the batch's value `value` (features, labels,
/// sample indices; or input tokens, targets, positions).
pub(crate) fn batch_elements(graph: &Graph, value: usize, segment: usize) -> Result<core::ops::Range<usize>, RefereeError> {
	let rows = graph.batch.checked_mul(graph.input_len).ok_or(RefereeError::InvalidJob)?;
	let lens = match graph.batch_kind {
		BatchKind::Samples => [rows, graph.batch, graph.batch],
		BatchKind::Windows => [rows; 3],
	};
	let len = lens.get(value).copied().ok_or(RefereeError::InvalidJob)?;
	let elements = segment_range(len, segment);
	if elements.is_empty() {
		return Err(RefereeError::InvalidJob);
	}
	Ok(elements)
}

/// Recomputes segment `segment` of the batch's value `value` of step `step`:
/// the sample indices of its rows drawn from the seed inside the unit's shard,
/// as every trainer draws them (by random access: only these rows, at a cost
/// independent of the shard's size), and the features, labels or tokens read from
/// the proven words of the whole training set, at the samples' places in it.
fn batch_segment(
	graph: &Graph,
	data: &DataCommitment,
	seed: u64,
	step: u32,
	value: usize,
	segment: usize,
	reader: &Inputs<'_>,
) -> Result<Vec<u32>, RefereeError> {
	let layout = graph.data_layout(data.samples as usize);
	let elements = batch_elements(graph, value, segment)?;
	// Only the rows the segment's elements lie in are drawn: at most 32.
	let first_row = batch_row(graph, value, elements.start);
	let last_row = batch_row(graph, value, elements.end.saturating_sub(1));
	let indices = (first_row..=last_row)
		.map(|row| crate::job::trace::batch_sample(shard(data), graph.batch, seed, step, row))
		.collect::<Result<Vec<u32>, _>>()?;
	elements
		.map(|element| match batch_source(graph, layout, (first_row, &indices), value, element)? {
			BatchWord::Data(word) => reader.word(0, word),
			BatchWord::Literal(word) => Ok(word),
		})
		.collect()
}

/// The samples of the whole training set that a unit trains on.
fn shard(data: &DataCommitment) -> core::ops::Range<usize> {
	let first = data.first_sample as usize;
	first..first.saturating_add(data.shard_samples as usize)
}

/// A reduction's view of the proven openings: input words and earlier pieces.
struct Proven<'a> {
	reader: &'a Inputs<'a>,
	pieces: &'a BTreeMap<usize, &'a [u32]>,
}

impl Source for Proven<'_> {
	type Error = RefereeError;

	fn word(&self, position: usize, index: usize) -> Result<u32, RefereeError> {
		self.reader.word(position, index)
	}

	fn piece(&self, index: usize, len: usize) -> Result<Vec<f32>, RefereeError> {
		let words = self.pieces.get(&index).ok_or(RefereeError::MissingPiece { piece: index as u32 })?;
		if words.len() != len {
			return Err(RefereeError::InvalidPieceProof { piece: index as u32 });
		}
		Ok(words.iter().map(|&w| f32::from_bits(w)).collect())
	}
}

/// The channel of element `index` of a `[outer, channels, inner]` tensor.
pub(crate) fn bias_channel(layout: BiasLayout, index: usize) -> usize {
	(index / layout.inner.max(1)) % layout.channels.max(1)
}

/// Canonical words of `values`.
pub(crate) fn words_of(values: &[f32]) -> Vec<u32> {
	values.iter().map(|&v| canonical_bits(v)).collect()
}

/// Recomputes accumulator `id`: the chunk's partial sums from the proven
/// operand blocks, added to the previous accumulator (or to `+0`).
fn accumulator_piece(
	contraction: Contraction,
	id: ChunkId,
	reader: &Inputs<'_>,
	previous: Option<&&[u32]>,
) -> Result<Vec<u32>, RefereeError> {
	let extent = contraction.extent(id)?;
	let (rows, cols, depth) = (extent.rows.len(), extent.cols.len(), extent.depth.len());
	let mut lhs = Vec::with_capacity(rows * depth);
	for row in extent.rows.clone() {
		for k in extent.depth.clone() {
			lhs.push(match contraction.lhs_index(row, k) {
				Some(index) => reader.element(0, index)?,
				None => 0.0,
			});
		}
	}
	let mut rhs = Vec::with_capacity(depth * cols);
	for k in extent.depth.clone() {
		for col in extent.cols.clone() {
			rhs.push(match contraction.rhs_index(extent.rows.start, k, col) {
				Some(index) => reader.element(1, index)?,
				None => 0.0,
			});
		}
	}
	let partial = chunk_partial_sums(&lhs, &rhs, rows, cols, depth)?;
	let folded = match previous {
		None => fold_chunk_partials([partial.as_slice()], partial.len())?,
		Some(words) => {
			let previous: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
			fold_chunk_partials([previous.as_slice(), partial.as_slice()], partial.len())?
		},
	};
	Ok(words_of(&folded))
}

/// The `(row, col)` of output element `index` in a contraction's matrix view.
pub fn output_coordinates(contraction: Contraction, index: usize) -> Option<(usize, usize)> {
	let (row, col) = match contraction {
		Contraction::Matmul { shape, .. } | Contraction::BatchedMatmul { shape, .. } => {
			(index / shape.n.max(1), index % shape.n.max(1))
		},
		Contraction::Conv2d(shape) => {
			let plane = shape.out_height() * shape.out_width();
			let (image, rest) = (index / (shape.out_channels * plane).max(1), index % (shape.out_channels * plane).max(1));
			(image * plane + rest % plane.max(1), rest / plane.max(1))
		},
		Contraction::Conv2dInputGrad(shape) => {
			let plane = shape.height * shape.width;
			let (image, rest) = (index / (shape.in_channels * plane).max(1), index % (shape.in_channels * plane).max(1));
			(image * plane + rest % plane.max(1), rest / plane.max(1))
		},
		Contraction::Conv2dWeightGrad(shape) => {
			let taps = shape.in_channels * shape.kernel_height * shape.kernel_width;
			(index / taps.max(1), index % taps.max(1))
		},
	};
	// The inverse must agree with the forward map; anything else is out of range.
	(contraction.output_index(row, col) == index).then_some((row, col))
}

/// An output segment of a contraction, read from the final accumulators of the tiles it touches.
fn contraction_output_segment(
	contraction: Contraction,
	len: usize,
	segment: usize,
	pieces: &BTreeMap<usize, &[u32]>,
) -> Result<Vec<u32>, RefereeError> {
	let grid = contraction.grid()?;
	let dims = contraction.dims()?;
	let elements = segment_range(len, segment);
	let mut out = Vec::with_capacity(elements.len());
	for index in elements {
		let (row, col) = output_coordinates(contraction, index).ok_or(RefereeError::InvalidJob)?;
		if row >= dims.rows || col >= dims.cols {
			return Err(RefereeError::InvalidJob);
		}
		let last = contraction.tile_at(row, col, grid.chunks - 1);
		let piece = Graph::accumulator_index(&grid, last);
		let tile = pieces.get(&piece).ok_or(RefereeError::MissingPiece { piece: piece as u32 })?;
		let extent = contraction.extent(last)?;
		let at = (row - extent.rows.start) * extent.cols.len() + (col - extent.cols.start);
		out.push(*tile.get(at).ok_or(RefereeError::InvalidPieceProof { piece: piece as u32 })?);
	}
	Ok(out)
}

/// Recomputes segment `segment` of piece value `value` of operator `operator`, one that
/// is neither a contraction nor a reduction.
fn operator_segment(
	graph: &Graph,
	operator: usize,
	step: u32,
	value: usize,
	segment: usize,
	reader: &Inputs<'_>,
) -> Result<Vec<u32>, RefereeError> {
	let node = graph.node(operator).map_err(|_| RefereeError::InvalidJob)?;
	let input_len = |position: usize| {
		node.inputs.get(position).and_then(|&id| graph.value(id)).map(|value| value.len).ok_or(RefereeError::InvalidJob)
	};
	let canonical = |position: usize, index: usize| reader.element(position, index).map(canonical_bits);
	match node.kind {
		OpKind::Activation(activation) => {
			let x = reader.segment_f32(0, segment)?;
			let mut y = vec![0.0f32; x.len()];
			activation_forward(activation, &x, &mut y)?;
			Ok(words_of(&y))
		},
		OpKind::ActivationGrad(activation) => {
			let (x, dy) = (reader.segment_f32(0, segment)?, reader.segment_f32(1, segment)?);
			let mut dx = vec![0.0f32; x.len()];
			activation_backward(activation, &x, &dy, &mut dx)?;
			Ok(words_of(&dx))
		},
		OpKind::BiasAdd(layout) => {
			// `bias_add`'s one rounded addition per element, with the element's channel
			// found from its index; only the bias segments of those channels are read.
			let values = reader.segment_f32(0, segment)?;
			values
				.iter()
				.zip(segment * SEGMENT..)
				.map(|(&value, index)| Ok(canonical_bits(value + reader.element(1, bias_channel(layout, index))?)))
				.collect()
		},
		OpKind::Sgd(hyper) => {
			let (mut p, g, mut v) =
				(reader.segment_f32(0, segment)?, reader.segment_f32(1, segment)?, reader.segment_f32(2, segment)?);
			sgd_momentum_step(&hyper, &mut p, &g, &mut v)?;
			Ok(words_of(if value == 0 { &p } else { &v }))
		},
		OpKind::AdamW(hyper) => {
			let scalars = graph.adamw_scalars(hyper, step)?;
			let mut p = reader.segment_f32(0, segment)?;
			let g = reader.segment_f32(1, segment)?;
			let (mut m, mut v) = (reader.segment_f32(2, segment)?, reader.segment_f32(3, segment)?);
			adamw_step(&scalars, &mut p, &g, &mut m, &mut v)?;
			Ok(words_of(match value {
				0 => &p,
				1 => &m,
				_ => &v,
			}))
		},
		OpKind::Commit => Ok(reader.segment(value, segment)?.to_vec()),
		OpKind::Residual => {
			let (into, other) = (reader.segment_f32(0, segment)?, reader.segment_f32(1, segment)?);
			Ok(into.iter().zip(&other).map(|(&into, &other)| canonical_bits(into + other)).collect())
		},
		// Bit copies: each output element is one input element.
		OpKind::SplitHeads(shape) | OpKind::MergeHeads(shape) => {
			let split = matches!(node.kind, OpKind::SplitHeads(_));
			segment_range(shape.values_len()?, segment).map(|element| canonical(0, shape.source_index(split, element))).collect()
		},
		OpKind::Gather { row_len } => {
			let table_rows = input_len(0)? / row_len.max(1);
			let out_len = input_len(1)?.saturating_mul(row_len);
			segment_range(out_len, segment)
				.map(|element| {
					let row = reader.word(1, element / row_len)? as usize;
					if row >= table_rows {
						return Err(RefereeError::KernelRejected);
					}
					canonical(0, row * row_len + element % row_len)
				})
				.collect()
		},
		// A row's statistics from its whole input row, then `x̂` (value 1) or its elements'
		// affine map (value 0).
		OpKind::Norm(shape) => {
			let width = shape.width.max(1);
			let k = crate::arith::math::recip(width as f32);
			let mut row_cache: Option<(usize, Vec<f32>)> = None;
			let mut out = Vec::with_capacity(SEGMENT);
			for element in segment_range(shape.values_len()?, segment) {
				let (row, column) = (element / width, element % width);
				let normalised = match &row_cache {
					Some((cached, normalised)) if *cached == row => normalised,
					_ => {
						let x = (row * width..(row + 1) * width).map(|index| reader.element(0, index)).collect::<Result<Vec<_>, _>>()?;
						let mut normalised = vec![0.0f32; width];
						crate::ops::norm::normalise_row(shape.norm, shape.epsilon, k, &x, &mut normalised);
						&row_cache.insert((row, normalised)).1
					},
				};
				let normalised = normalised.get(column).copied().unwrap_or_default();
				if value == 1 {
					out.push(canonical_bits(normalised));
					continue;
				}
				let scaled = crate::arith::mul(normalised, reader.element(1, column)?);
				out.push(canonical_bits(match shape.norm {
					crate::ops::norm::Norm::Layer => scaled + reader.element(2, column)?,
					crate::ops::norm::Norm::Rms => scaled,
				}));
			}
			Ok(out)
		},
		// A row's probabilities (or their gradient) from its visible keys; masked keys are `+0`.
		OpKind::CausalSoftmax(shape) | OpKind::CausalSoftmaxGrad(shape) => {
			let forward = matches!(node.kind, OpKind::CausalSoftmax(_));
			let t = shape.positions.max(1);
			let mut row_cache: Option<(usize, Vec<f32>)> = None;
			let mut out = Vec::with_capacity(SEGMENT);
			for element in segment_range(shape.scores_len()?, segment) {
				let (row, column) = (element / t, element % t);
				let visible = shape.visible(row);
				if column >= visible.len() {
					out.push(0);
					continue;
				}
				let computed = match &row_cache {
					Some((cached, computed)) if *cached == row => computed,
					_ => {
						let read = |position: usize| visible.clone().map(|index| reader.element(position, index)).collect::<Result<Vec<_>, _>>();
						let mut computed = vec![0.0f32; visible.len()];
						if forward {
							crate::ops::attention::softmax_row(&read(0)?, shape.scale, &mut computed);
						} else {
							crate::ops::attention::softmax_row_grad(&read(0)?, &read(1)?, shape.scale, &mut computed);
						}
						&row_cache.insert((row, computed)).1
					},
				};
				out.push(canonical_bits(computed.get(column).copied().unwrap_or_default()));
			}
			Ok(out)
		},
		// Judged by `recompute` before it comes here.
		OpKind::Batch
		| OpKind::Contract(_)
		| OpKind::BiasGrad(_)
		| OpKind::SoftmaxCrossEntropy(_)
		| OpKind::ClipGradNorm(_)
		| OpKind::NormGrad(_)
		| OpKind::ScatterAddRows { .. } => Err(RefereeError::InvalidJob),
	}
}


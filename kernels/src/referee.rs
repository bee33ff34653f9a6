//! The referee: recomputes one disputed piece of one operator of one step from
//! inputs proven against the committed roots, and says whether the claimed
//! output is right.
//!
//! This is the function the chain runs (`no_std`, no panics on any input).
//! After the three bisection rounds ([`crate::bisection`]) the two parties
//! agree on the state hash before step `t`, on every operator leaf before
//! operator `j`, and on every piece before piece `p` of operator `j`; they
//! disagree on piece `p`. The referee then gets:
//!
//! - the job's model and hyper-parameters (from which it rebuilds the step's
//!   [`Graph`], so operator ids and piece ids mean the same to everyone);
//! - [`Commitments`]: the trace root, its step range and anchor, and the
//!   claimant's operator root for step `t` and piece root for operator `j`;
//! - an opening of the state before step `t` (the previous state hash's
//!   preimage with its proof in the step-level tree, or the anchor's preimage);
//! - the proof of operator `j`'s own leaf under the operator root, which binds
//!   the piece root and the piece count to it;
//! - openings of the operator leaves that produced the inputs it reads;
//! - the input segments it reads, each input's with one multiproof in its
//!   producer's tree;
//! - the pieces of operator `j` before `p` that it reads (the previous
//!   accumulator of a K-chunk, or the final accumulators behind an output segment);
//! - the claimed leaf hash of piece `p`.
//!
//! Every opening must lie in the agreed prefix: operators before `j`, pieces
//! before `p`. [`referee`] checks every proof, recomputes piece `p` with the
//! reference operators, and returns [`Verdict`] if the claim is right and
//! [`RefereeError::WrongClaimedOutput`] (with the recomputed hash) if not.
//!
//! Cost: an accumulator piece is one 32×32×32 chunk. A reduction's partial
//! reads at most 1,024 input elements (or 32 rows of logits) and one earlier
//! partial ([`crate::reduction`]). An output segment of a contraction or a
//! reduction, an element-wise operator's segment or a `Commit` segment is at
//! most 32 elements plus the proofs and the partials it reads; bias add also
//! reads the bias segments of its elements' channels. So no piece's cost grows with the batch or the
//! model, except a loss piece's with the class count and a `Batch` piece's with
//! the training set's size (it draws the epoch's permutation). A `Batch` piece
//! reads the dataset rows of its samples, proven against the job's dataset root.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use crate::activation::{activation_backward, activation_forward};
use crate::bias::BiasLayout;
use crate::contract::canonical_bits;
use crate::data::{Dataset, DatasetLayout};
use crate::contraction::{chunk_partial_sums, fold_chunk_partials, ChunkId, Contraction};
use crate::graph::{Graph, GraphError, OpKind, Origin, Piece};
use crate::hash::Digest;
use crate::merkle::{index_segment_leaf, segment_count, segment_range, MerkleProof, MerkleTree, MultiProof, SEGMENT};
use crate::model::{ModelConfig, TrainConfig};
use crate::optim::{adamw_step, sgd_momentum_step};
use crate::reduction::{Reads, Source};
use crate::trace::{anchor_hash, operator_leaf, state_hash, trace_leaf};

#[cfg(feature = "codec")]
macro_rules! codec_types {
	($($item:item)*) => {
		$(
			#[derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, scale_info::TypeInfo)]
			$item
		)*
	};
}
#[cfg(not(feature = "codec"))]
macro_rules! codec_types {
	($($item:item)*) => { $($item)* };
}

codec_types! {
	/// The roots a dispute is judged against, taken from the chain's records.
	#[derive(Clone, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Commitments {
		/// Root of the step-level tree (the learning proof's trace root).
		pub trace_root: Digest,
		/// Global number of the trace's first step.
		pub first_step: u32,
		/// Steps in the trace: the step-level tree's leaf count.
		pub steps: u32,
		/// Hash of the state the first step starts from.
		pub anchor: Digest,
		/// The claimant's operator-level root of the disputed step.
		pub operator_root: Digest,
		/// The claimant's piece root of the disputed operator.
		pub piece_root: Digest,
		/// The job's training set: the root of [`Dataset::tree`](crate::data::Dataset::tree).
		pub dataset_root: Digest,
		/// Samples in the training set.
		pub samples: u32,
	}

	/// How the state before the disputed step is proven.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub enum StateOpening {
		/// The disputed step is the trace's first: the state root behind the anchor.
		Anchor {
			/// The initial state root.
			state_root: Digest,
		},
		/// The state hash after the step before, opened and proven in the step-level tree.
		Step {
			/// The state hash before that one.
			previous: Digest,
			/// The state root after the step before.
			state_root: Digest,
			/// The batch root of the step before.
			batch_root: Digest,
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

	/// One segment of a value.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct SegmentOpening {
		/// Segment index within the value.
		pub segment: u32,
		/// Its canonical words (`f32` bits or `u32`s), at most 32.
		pub words: Vec<u32>,
	}

	/// Segments of one input of the disputed operator, proven together.
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

	/// Everything the referee needs to judge one piece.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct RefereeCase {
		/// The roots the case is judged against.
		pub commitments: Commitments,
		/// The disputed global step.
		pub step: u32,
		/// The disputed operator.
		pub operator: u32,
		/// The disputed piece of that operator (an accumulator or an output segment).
		pub chunk: u32,
		/// The state before the step.
		pub previous_state: StateOpening,
		/// Inclusion of the disputed operator's own leaf in the operator-level tree,
		/// which binds [`Commitments::piece_root`] and the piece count to
		/// [`Commitments::operator_root`].
		pub operator_proof: MerkleProof,
		/// Leaves of the operators whose outputs are read.
		pub operators: Vec<OperatorOpening>,
		/// The input segments read.
		pub inputs: Vec<InputOpening>,
		/// Earlier pieces of the disputed operator that are read.
		pub pieces: Vec<PieceOpening>,
		/// The claimed leaf hash of the disputed piece.
		pub claimed_output: Digest,
	}

	/// The claim is right: the recomputed piece has the claimed leaf hash.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct Verdict {
		/// The leaf hash of the recomputed piece (equal to the claim).
		pub output: Digest,
	}

	/// Why the referee rejected a case. Every error but `WrongClaimedOutput`
	/// means the openings are bad, not that the claim is.
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
		/// An input's segments do not lead to its producer's root: a wrong word,
		/// proof, segment index or segment length.
		InvalidInputProof {
			/// Input position.
			input: u32,
		},
		/// The previous state's opening does not match the trace root or the anchor.
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
		ChunkOutOfRange {
			/// The piece asked for.
			chunk: u32,
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
		/// The model or hyper-parameters do not describe a valid step.
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

/// Judges `case` for a job with `model` and `train`: `Ok` if the claimed output is right.
///
/// This is the entry point the runtime exposes. It never panics.
pub fn referee(model: &ModelConfig, train: &TrainConfig, case: &RefereeCase) -> Result<Verdict, RefereeError> {
	let output = recompute(model, train, case)?;
	if output == case.claimed_output {
		Ok(Verdict { output })
	} else {
		Err(RefereeError::WrongClaimedOutput { claimed: case.claimed_output, recomputed: output })
	}
}

/// Checks every opening of `case` and recomputes the disputed piece; returns its leaf hash.
pub fn recompute(model: &ModelConfig, train: &TrainConfig, case: &RefereeCase) -> Result<Digest, RefereeError> {
	let graph = Graph::build(model, train).map_err(|_| RefereeError::InvalidJob)?;
	let operator = case.operator as usize;
	let node_count = graph.nodes.len();
	let node = graph
		.node(operator)
		.map_err(|_| RefereeError::OperatorOutOfRange { operator: case.operator, count: node_count as u32 })?
		.clone();
	let piece_count = graph.piece_count(operator).map_err(|_| RefereeError::InvalidJob)?;
	let chunk = case.chunk as usize;
	let piece = graph.piece(operator, chunk).map_err(|error| match error {
		GraphError::PieceOutOfRange { .. } => RefereeError::ChunkOutOfRange { chunk: case.chunk, count: piece_count as u32 },
		_ => RefereeError::InvalidJob,
	})?;
	let state_root = verify_previous_state(&case.commitments, case.step, &case.previous_state)?;

	// The disputed operator's piece root is the one its leaf commits, with this piece count.
	let leaf = operator_leaf(case.operator, node.kind.code(), piece_count as u32, &case.commitments.piece_root);
	let proof = &case.operator_proof;
	if proof.index != case.operator || proof.leaf_count as usize != node_count || !proof.verify(&case.commitments.operator_root, &leaf) {
		return Err(RefereeError::InvalidOperatorProof { operator: case.operator });
	}

	// Producer operators' piece roots.
	let mut producer_roots: BTreeMap<usize, Digest> = BTreeMap::new();
	for opening in &case.operators {
		let producer = opening.operator as usize;
		if producer >= operator {
			return Err(RefereeError::NotAgreed);
		}
		let producer_node = graph.node(producer).map_err(|_| RefereeError::InvalidOperatorProof { operator: opening.operator })?;
		let count = graph.piece_count(producer).map_err(|_| RefereeError::InvalidJob)?;
		let leaf = operator_leaf(opening.operator, producer_node.kind.code(), count as u32, &opening.piece_root);
		let proof = &opening.proof;
		if proof.index != opening.operator || proof.leaf_count as usize != node_count || !proof.verify(&case.commitments.operator_root, &leaf) {
			return Err(RefereeError::InvalidOperatorProof { operator: opening.operator });
		}
		producer_roots.insert(producer, opening.piece_root);
	}

	// Earlier pieces of the disputed operator.
	let mut pieces: BTreeMap<usize, &[u32]> = BTreeMap::new();
	for opening in &case.pieces {
		let index = opening.piece as usize;
		if index >= chunk {
			return Err(RefereeError::NotAgreed);
		}
		let proof = &opening.proof;
		let leaf = index_segment_leaf(&opening.words);
		if proof.index != opening.piece || proof.leaf_count as usize != piece_count || !proof.verify(&case.commitments.piece_root, &leaf) {
			return Err(RefereeError::InvalidPieceProof { piece: opening.piece });
		}
		pieces.insert(index, opening.words.as_slice());
	}

	// Input segments, each input's proven at once in the tree of the value's producer
	// (for the batch operator, input 0 is the training set, proven in the dataset tree).
	let dataset = DatasetLayout { samples: case.commitments.samples as usize, feature_len: graph.input_len };
	let is_batch = node.kind == OpKind::Batch;
	// Only the batch reads the dataset. One too large to draw its sample order in the
	// runtime is not a valid job (the chain refuses such jobs).
	let dataset_words = match dataset.words() {
		Some(words) if dataset.samples <= crate::data::MAX_SAMPLES => words,
		_ if is_batch => return Err(RefereeError::InvalidJob),
		_ => 0,
	};
	let mut inputs: Vec<Segments> = vec![Segments::new(); if is_batch { 1 } else { node.inputs.len() }];
	for opening in &case.inputs {
		let position = opening.input as usize;
		let no_such_input = RefereeError::NoSuchInput { input: opening.input };
		let (root, leaf_count, value_len, placement) = if is_batch {
			if position != 0 {
				return Err(no_such_input);
			}
			(case.commitments.dataset_root, segment_count(dataset_words), dataset_words, None)
		} else {
			let value_id = *node.inputs.get(position).ok_or(no_such_input)?;
			let value = graph.value(value_id).copied().ok_or(RefereeError::InvalidJob)?;
			match value.origin {
				Origin::State(index) => {
					let total: usize = graph.state.iter().map(|&id| segment_count(graph.value(id).map_or(0, |v| v.len))).sum();
					(state_root, total, value.len, Some((graph.state.as_slice(), index, 0)))
				},
				Origin::Node { node: producer, output } => {
					let root = *producer_roots.get(&producer).ok_or(RefereeError::MissingOperator { operator: producer as u32 })?;
					let count = graph.piece_count(producer).map_err(|_| RefereeError::InvalidJob)?;
					let skip = graph.accumulator_count(producer).map_err(|_| RefereeError::InvalidJob)?;
					let values = graph.piece_values(producer).map_err(|_| RefereeError::InvalidJob)?;
					(root, count, value.len, Some((values, output, skip)))
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
			let index = match placement {
				Some((values, value_position, skip)) => graph.segment_leaf_index(values, value_position, segment.segment as usize, skip),
				// The dataset tree holds nothing but the dataset's segments.
				None => Some(segment.segment as usize).filter(|&index| index < leaf_count),
			};
			let index = index.ok_or(bad)?;
			if segment.words.len() != segment_range(value_len, segment.segment as usize).len() || proven_index as usize != index {
				return Err(bad);
			}
			leaves.push(index_segment_leaf(&segment.words));
		}
		if !opening.proof.verify(&root, leaf_count, &leaves) {
			return Err(bad);
		}
		for segment in &opening.segments {
			slot.insert(segment.segment as usize, segment.words.as_slice());
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
			batch_segment(&graph, dataset, train.seed, case.step, value, segment, &reader)?
		},
		(_, Piece::Partial { lane, span }) => {
			let reduction = graph.reduction(operator).map_err(|_| RefereeError::InvalidJob)?.ok_or(RefereeError::InvalidJob)?;
			words_of(&reduction.partial(lane, span, &Proven { reader: &reader, pieces: &pieces })?)
		},
		(OpKind::BiasGrad(_) | OpKind::SoftmaxCrossEntropy(_) | OpKind::ClipGradNorm(_), Piece::Segment { value, segment }) => {
			let reduction = graph.reduction(operator).map_err(|_| RefereeError::InvalidJob)?.ok_or(RefereeError::InvalidJob)?;
			words_of(&reduction.output_segment(value, segment, &Proven { reader: &reader, pieces: &pieces })?)
		},
		(kind, Piece::Segment { value, segment }) => {
			operator_segment(kind, case.step, value, segment, &reader)?
		},
		(_, Piece::Accumulator(_)) => return Err(RefereeError::InvalidJob),
	};
	Ok(index_segment_leaf(&words))
}

/// Checks the opening of the state before `step`; returns its state root.
fn verify_previous_state(commitments: &Commitments, step: u32, opening: &StateOpening) -> Result<Digest, RefereeError> {
	let position = step.checked_sub(commitments.first_step).filter(|&p| p < commitments.steps);
	let position = position.ok_or(RefereeError::StepOutOfRange { step })?;
	match opening {
		StateOpening::Anchor { state_root } if position == 0 => {
			if anchor_hash(state_root) == commitments.anchor {
				Ok(*state_root)
			} else {
				Err(RefereeError::InvalidStateProof)
			}
		},
		StateOpening::Step { previous, state_root, batch_root, proof } if position > 0 => {
			let hash = state_hash(previous, step - 1, state_root, batch_root);
			if proof.index == position - 1 && proof.leaf_count == commitments.steps && proof.verify(&commitments.trace_root, &trace_leaf(&hash)) {
				Ok(*state_root)
			} else {
				Err(RefereeError::InvalidStateProof)
			}
		},
		_ => Err(RefereeError::InvalidStateProof),
	}
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

/// Where element `element` of the batch's value `value` comes from: the
/// dataset word it copies (features, labels), or `None` for a sample index,
/// which is the index itself. `indices` are the step's sample indices.
fn batch_source(
	graph: &Graph,
	dataset: DatasetLayout,
	indices: &[u32],
	value: usize,
	element: usize,
) -> Result<Option<usize>, RefereeError> {
	let features = graph.input_len.max(1);
	let (row, feature) = if value == 0 { (element / features, element % features) } else { (element, 0) };
	let sample = indices.get(row).map(|&i| i as usize).ok_or(RefereeError::InvalidJob)?;
	Ok(match value {
		0 => Some(dataset.feature_word(sample, feature)),
		1 => Some(dataset.label_word(sample)),
		_ => None,
	})
}

/// The elements of segment `segment` of the batch's value `value` (features,
/// labels, sample indices).
fn batch_elements(graph: &Graph, value: usize, segment: usize) -> Result<core::ops::Range<usize>, RefereeError> {
	let features = graph.batch.checked_mul(graph.input_len).ok_or(RefereeError::InvalidJob)?;
	let len = [features, graph.batch, graph.batch].get(value).copied().ok_or(RefereeError::InvalidJob)?;
	let elements = segment_range(len, segment);
	if elements.is_empty() {
		return Err(RefereeError::InvalidJob);
	}
	Ok(elements)
}

/// Recomputes segment `segment` of the batch's value `value` of step `step`:
/// the sample indices drawn from the seed, as every trainer draws them, and
/// the features and labels read from the proven dataset words.
///
/// Drawing the indices walks the whole epoch permutation, so this piece costs
/// in proportion to the training set's size rather than the model's.
fn batch_segment(
	graph: &Graph,
	dataset: DatasetLayout,
	seed: u64,
	step: u32,
	value: usize,
	segment: usize,
	reader: &Inputs<'_>,
) -> Result<Vec<u32>, RefereeError> {
	let indices = crate::trace::batch_indices(dataset.samples, graph.batch, seed, step)?;
	batch_elements(graph, value, segment)?
		.map(|element| match batch_source(graph, dataset, &indices, value, element)? {
			Some(word) => reader.word(0, word),
			None => indices.get(element).copied().ok_or(RefereeError::InvalidJob),
		})
		.collect()
}

/// The dataset segments that segment `segment` of the batch's value `value`
/// reads, given the step's sample indices: what the prover opens for
/// [`batch_segment`].
fn batch_reads(graph: &Graph, dataset: DatasetLayout, indices: &[u32], value: usize, segment: usize) -> Result<Vec<usize>, RefereeError> {
	let mut segments = Vec::new();
	for element in batch_elements(graph, value, segment)? {
		segments.extend(batch_source(graph, dataset, indices, value, element)?.map(|word| word / SEGMENT));
	}
	segments.sort_unstable();
	segments.dedup();
	Ok(segments)
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
fn bias_channel(layout: BiasLayout, index: usize) -> usize {
	(index / layout.inner.max(1)) % layout.channels.max(1)
}

/// Canonical words of `values`.
fn words_of(values: &[f32]) -> Vec<u32> {
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
			rhs.push(match contraction.rhs_index(k, col) {
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
		Contraction::Matmul { shape, .. } => (index / shape.n.max(1), index % shape.n.max(1)),
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
		let last = ChunkId { tile_row: row / crate::contract::TILE, tile_col: col / crate::contract::TILE, chunk: grid.chunks - 1 };
		let piece = Graph::accumulator_index(&grid, last);
		let tile = pieces.get(&piece).ok_or(RefereeError::MissingPiece { piece: piece as u32 })?;
		let extent = contraction.extent(last)?;
		let at = (row - extent.rows.start) * extent.cols.len() + (col - extent.cols.start);
		out.push(*tile.get(at).ok_or(RefereeError::InvalidPieceProof { piece: piece as u32 })?);
	}
	Ok(out)
}

/// Recomputes segment `segment` of piece value `value` of a non-contraction operator.
fn operator_segment(
	kind: OpKind,
	step: u32,
	value: usize,
	segment: usize,
	reader: &Inputs<'_>,
) -> Result<Vec<u32>, RefereeError> {
	match kind {
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
			let scalars = hyper.scalars(step.saturating_add(1))?;
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
		// Judged by `recompute` before it comes here.
		OpKind::Batch
		| OpKind::Contract(_)
		| OpKind::BiasGrad(_)
		| OpKind::SoftmaxCrossEntropy(_)
		| OpKind::ClipGradNorm(_) => Err(RefereeError::InvalidJob),
	}
}

/// What judging one piece reads: `(input position, segment indices)` pairs,
/// and indices of earlier pieces of the same operator.
pub type Requirements = (Vec<(usize, Vec<usize>)>, Vec<usize>);

/// The input segments and earlier pieces that judging piece `piece` of
/// `operator` reads: `(input position, segments)` pairs and piece indices.
///
/// The prover uses it to build a [`RefereeCase`]; the referee itself reads
/// lazily and reports whatever is missing.
pub fn requirements(graph: &Graph, operator: usize, piece: usize) -> Result<Requirements, GraphError> {
	let node = graph.node(operator)?;
	let decoded = graph.piece(operator, piece)?;
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
					rhs.extend(contraction.rhs_index(k, col).map(|i| i / SEGMENT));
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
					let tile = ChunkId { tile_row: row / crate::contract::TILE, tile_col: col / crate::contract::TILE, chunk: grid.chunks - 1 };
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
		(OpKind::Commit, Piece::Segment { value, segment }) => inputs.push((value, vec![segment])),
		(OpKind::SoftmaxCrossEntropy(_) | OpKind::BiasGrad(_) | OpKind::ClipGradNorm(_), _) => {
			let reduction = graph.reduction(operator)?.ok_or(GraphError::PieceOutOfRange { piece, count: 0 })?;
			let reads = match decoded {
				Piece::Partial { lane, span } => reduction.partial_reads(lane, span)?,
				Piece::Segment { value, segment } => reduction.output_reads(value, segment)?,
				Piece::Accumulator(_) => Reads::default(),
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

/// What the prover holds about its whole run, to open a case.
pub struct RunOpening<'a> {
	/// The step-level tree (leaves `trace_leaf(h_t)`).
	pub trace: &'a MerkleTree,
	/// Global number of its first step.
	pub first_step: u32,
	/// The anchor.
	pub anchor: Digest,
	/// The training set, to open batch rows.
	pub dataset: &'a Dataset,
	/// Its tree ([`Dataset::tree`]), built once for every case.
	pub dataset_tree: &'a MerkleTree,
}

/// Builds the [`RefereeCase`] for piece `piece` of `operator` of a traced step,
/// with every opening the referee needs, and this trace's leaf as the claim.
pub fn open_case(
	graph: &Graph,
	step: &crate::trace::StepTrace,
	run: &RunOpening<'_>,
	operator: usize,
	piece: usize,
) -> Result<RefereeCase, RefereeError> {
	let invalid = |_| RefereeError::InvalidJob;
	let number = step.record.step;
	let position = number.checked_sub(run.first_step).ok_or(RefereeError::StepOutOfRange { step: number })?;
	let pieces_tree = step.pieces.get(operator).ok_or(RefereeError::OperatorOutOfRange {
		operator: operator as u32,
		count: step.pieces.len() as u32,
	})?;
	let previous_state = if position == 0 {
		StateOpening::Anchor { state_root: step.previous_state_root }
	} else {
		StateOpening::Step {
			previous: step.previous_previous_hash,
			state_root: step.previous_state_root,
			batch_root: step.previous_batch_root,
			proof: run.trace.proof(position as usize - 1).map_err(|_| RefereeError::InvalidStateProof)?,
		}
	};
	let node = graph.node(operator).map_err(invalid)?;
	let (needed_inputs, needed_pieces) = requirements(graph, operator, piece).map_err(|error| match error {
		GraphError::PieceOutOfRange { count, .. } => RefereeError::ChunkOutOfRange { chunk: piece as u32, count: count as u32 },
		_ => RefereeError::InvalidJob,
	})?;
	let mut operators = Vec::new();
	let mut inputs = Vec::new();
	let dataset = run.dataset.layout();
	if let (OpKind::Batch, Piece::Segment { value, segment }) = (node.kind, graph.piece(operator, piece).map_err(invalid)?) {
		// The batch reads the dataset rows of this step's samples.
		let sample_indices = step.values.get(graph.batch_values[2]).ok_or(RefereeError::InvalidJob)?;
		let indices: Vec<u32> = (0..graph.batch).filter_map(|row| sample_indices.word(row)).collect();
		let segments = batch_reads(graph, dataset, &indices, value, segment)?;
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
	for (position, segments) in needed_inputs {
		let id = *node.inputs.get(position).ok_or(RefereeError::NoSuchInput { input: position as u32 })?;
		let value = graph.value(id).ok_or(RefereeError::InvalidJob)?;
		let host = step.values.get(id).ok_or(RefereeError::InvalidJob)?;
		let (tree, values, value_position, skip) = match value.origin {
			Origin::State(index) => (&step.previous_state, graph.state.as_slice(), index, 0),
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
	// The running sums before the disputed piece, recomputed from this trace's inputs.
	let accumulators = match (node.kind, graph.reduction(operator).map_err(invalid)?) {
		(OpKind::Contract(contraction), _) => {
			let lhs = node.inputs.first().and_then(|&id| step.values.get(id)).ok_or(RefereeError::InvalidJob)?;
			let rhs = node.inputs.get(1).and_then(|&id| step.values.get(id)).ok_or(RefereeError::InvalidJob)?;
			crate::trace::accumulators(contraction, lhs.as_f32(), rhs.as_f32(), None)?
		},
		(_, Some(reduction)) if !needed_pieces.is_empty() => {
			crate::trace::reduction_partials(&reduction, &node.inputs, &step.values, None)?
		},
		_ => Vec::new(),
	};
	let mut piece_openings = Vec::new();
	for index in needed_pieces {
		let words = accumulators.get(index).map(|acc| words_of(acc)).ok_or(RefereeError::InvalidJob)?;
		piece_openings.push(PieceOpening {
			piece: index as u32,
			words,
			proof: pieces_tree.proof(index).map_err(|_| RefereeError::InvalidJob)?,
		});
	}
	Ok(RefereeCase {
		commitments: Commitments {
			trace_root: run.trace.root(),
			first_step: run.first_step,
			steps: run.trace.len() as u32,
			anchor: run.anchor,
			operator_root: step.operators.root(),
			piece_root: pieces_tree.root(),
			dataset_root: run.dataset_tree.root(),
			samples: u32::try_from(run.dataset.len()).map_err(|_| RefereeError::InvalidJob)?,
		},
		step: number,
		operator: operator as u32,
		chunk: piece as u32,
		previous_state,
		operators,
		inputs,
		operator_proof: step.operators.proof(operator).map_err(|_| RefereeError::InvalidJob)?,
		pieces: piece_openings,
		claimed_output: *pieces_tree.leaves().get(piece).ok_or(RefereeError::ChunkOutOfRange {
			chunk: piece as u32,
			count: pieces_tree.len() as u32,
		})?,
	})
}

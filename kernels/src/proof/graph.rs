//! The operator graph of one training step: an enumerable, fixed list of
//! operators whose outputs the learning proof commits to, and the pieces each
//! operator is cut into for disputes.
//!
//! # The graph
//!
//! [`Graph::build`] derives the list from the model and the hyper-parameters
//! alone, so the solver, every verifier and the on-chain referee enumerate the
//! same operators with the same ids. Values are single-assignment
//! ([`ValueId`]); a few operators update a buffer in place (bias add, clipping,
//! the optimizer), and their outputs are new values sharing the input's buffer
//! (nothing reads the overwritten value afterwards). In order:
//!
//! 0. `Batch`: the step's samples (features, labels, sample indices).
//! 1. Forward, layer by layer: `Contract` (convolution or matmul), `BiasAdd`,
//!    and `Activation` after every layer but the last.
//! 2. `SoftmaxCrossEntropy`: the loss and the logits' gradient.
//! 3. Backward, last layer first: the weight gradient (`Contract`), the bias
//!    gradient (`BiasGrad`), and except for the first layer the input gradient
//!    (`Contract`) followed by `ActivationGrad`.
//! 4. `ClipGradNorm` over all gradients in parameter order, if clipping is on.
//! 5. One optimizer update (`Sgd` or `AdamW`) per parameter, in order.
//! 6. `Commit`: the new state (parameters, then the first moments, then the
//!    second moments), which the step's state hash covers.
//!
//! A decoder-only transformer's graph ([`Graph::build_transformer`]) adds row gathers,
//! residual sums, normalisations, head layouts, batched matmuls, the causal softmax and
//! the embeddings' scatter-add, and follows a rate schedule ([`Graph::adamw_scalars`]).
//!
//! # Pieces
//!
//! An operator's third-level tree has one leaf per *piece*, in this order:
//!
//! - for a reduction (bias gradient, softmax cross-entropy, clipping), first
//!   its partials: running sums after each span of its rule-4 chunks, lane by
//!   lane ([`crate::proof::reduction`]). Recomputing one reads about a thousand
//!   input elements;
//! - for a contraction, first its accumulators: for every output tile
//!   (row-major over the tile grid) and every K-chunk `c` in order, the tile's
//!   running sum after chunk `c`, `acc_c = acc_{c−1} + partial_c` with
//!   `acc_{−1} = +0` (the fold of `contraction`), as a row-major tile. The last
//!   accumulator of a tile is its output. Recomputing one costs one 32×32×32
//!   chunk;
//! - then the segments ([`SEGMENT`] elements in storage order) of each output
//!   value in order;
//! - for `Commit`, the new state's chunks ([`crate::proof::state_tree`]: 256
//!   elements, each tensor starting a chunk of its own), so that its piece tree
//!   is the state tree and its root the state root. Recomputing one copies
//!   eight segments of the optimizer's outputs.
//!
//! A dispute's third round descends this tree to the first piece the parties
//! disagree on; the referee recomputes that piece alone ([`crate::referee`]).

use alloc::vec;
use alloc::vec::Vec;

use crate::ops::activation::Activation;
use crate::ops::bias::BiasLayout;
use crate::ops::contraction::{ChunkGrid, ChunkId, Contraction};
use crate::error::KernelError;
use crate::ops::loss::ClassifierShape;
use crate::ops::contraction::{MatmulLayout, MatmulShape};
use crate::proof::merkle::{segment_count, TreeKind};
use crate::job::model::{Layer, ModelConfig, Optimizer, TrainConfig};
use crate::ops::attention::CausalShape;
use crate::ops::heads::HeadsShape;
use crate::ops::norm::NormShape;
use crate::ops::optim::{AdamW, AdamWScalars, SgdMomentum};
use crate::ops::schedule::WarmupCosine;
use crate::proof::reduction::Reduction;

mod transformer;

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;

/// The element type of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
	/// `f32`s on the contract's grid.
	F32,
	/// `u32`s: labels and sample indices.
	U32,
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
	/// State tensor `i` before the step (parameters, then moments).
	State(usize),
	/// Output `output` of node `node`.
	Node {
		/// The producing node.
		node: usize,
		/// Which of its outputs.
		output: usize,
	},
}

/// A single-assignment value of the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
	/// Elements.
	pub len: usize,
	/// Element type.
	pub kind: ValueKind,
	/// The device buffer holding it (shared by in-place updates).
	pub buffer: usize,
	/// Its producer.
	pub origin: Origin,
}

/// What a node computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OpKind {
	/// Assemble the step's batch: outputs features, labels, sample indices.
	Batch,
	/// A matmul or convolution pass: inputs `lhs, rhs`.
	Contract(Contraction),
	/// In place: inputs `values, bias`.
	BiasAdd(BiasLayout),
	/// Input `x`, output `f(x)`.
	Activation(Activation),
	/// Inputs `x, dy`, output `dy·f′(x)`.
	ActivationGrad(Activation),
	/// Inputs `logits, labels`; outputs the loss (one element) and the logits' gradient.
	SoftmaxCrossEntropy(ClassifierShape),
	/// Input the output gradient, output the bias gradient.
	BiasGrad(BiasLayout),
	/// In place: inputs every gradient; outputs the clipped gradients, then the norm.
	ClipGradNorm(f32),
	/// In place: inputs `param, grad, velocity`; outputs `param, velocity`.
	Sgd(SgdMomentum),
	/// In place: inputs `param, grad, m, v`; outputs `param, m, v`.
	AdamW(AdamW),
	/// Inputs the new state tensors; no outputs: its pieces are their segments.
	Commit,
	/// Inputs `table, ids` (`U32`); output the looked-up rows, `row_len` words each.
	Gather {
		/// Words per row.
		row_len: usize,
	},
	/// In place: inputs `into, other`; output `into + other`, one `f32` addition per
	/// element (the residual stream, and a value's readers' gradients summed in graph order).
	Residual,
	/// Inputs `x, gain` and for LayerNorm `bias`; outputs `y = x̂ ⊗ gain (+ bias)` and the
	/// normalised rows `x̂`.
	Norm(NormShape),
	/// Inputs `x, gain, dy` and the forward's `x̂`; outputs `dx`, `dgain` and for LayerNorm
	/// `dbias`.
	NormGrad(NormShape),
	/// Input heads side by side `[sequences, T, heads·d]`; output blocks `[sequences·heads, T, d]`.
	SplitHeads(HeadsShape),
	/// Input blocks `[sequences·heads, T, d]`; output heads side by side.
	MergeHeads(HeadsShape),
	/// Input attention scores; output their causal softmax.
	CausalSoftmax(CausalShape),
	/// Inputs `probs, dprobs`; output the scores' gradient.
	CausalSoftmaxGrad(CausalShape),
	/// Inputs `dy, ids` (`U32`); output the table's gradient: each of its `table_rows` rows
	/// the chunked sum, in row order, of the rows of `dy` that looked it up.
	ScatterAddRows {
		/// Words per row.
		row_len: usize,
		/// Rows of the table.
		table_rows: usize,
	},
}

impl OpKind {
	/// A short name for reports and labels: `matmul`, `bias_grad`, `clip`, ….
	pub fn name(&self) -> &'static str {
		match self {
			Self::Batch => "batch",
			Self::Contract(Contraction::Matmul { .. }) => "matmul",
			Self::Contract(Contraction::Conv2d(_)) => "conv2d",
			Self::Contract(Contraction::Conv2dInputGrad(_)) => "conv2d_input_grad",
			Self::Contract(Contraction::Conv2dWeightGrad(_)) => "conv2d_weight_grad",
			Self::Contract(Contraction::BatchedMatmul { .. }) => "batched_matmul",
			Self::BiasAdd(_) => "bias_add",
			Self::Activation(_) => "activation",
			Self::ActivationGrad(_) => "activation_grad",
			Self::SoftmaxCrossEntropy(_) => "softmax_cross_entropy",
			Self::BiasGrad(_) => "bias_grad",
			Self::ClipGradNorm(_) => "clip_grad_norm",
			Self::Sgd(_) => "sgd",
			Self::AdamW(_) => "adamw",
			Self::Commit => "commit",
			Self::Gather { .. } => "gather",
			Self::Residual => "residual",
			Self::Norm(_) => "norm",
			Self::NormGrad(_) => "norm_grad",
			Self::SplitHeads(_) => "split_heads",
			Self::MergeHeads(_) => "merge_heads",
			Self::CausalSoftmax(_) => "causal_softmax",
			Self::CausalSoftmaxGrad(_) => "causal_softmax_grad",
			Self::ScatterAddRows { .. } => "scatter_add_rows",
		}
	}

	/// A stable one-byte code, hashed into the operator's leaf.
	pub fn code(&self) -> u8 {
		match self {
			Self::Batch => 0,
			Self::Contract(Contraction::Matmul { .. }) => 1,
			Self::Contract(Contraction::Conv2d(_)) => 2,
			Self::Contract(Contraction::Conv2dInputGrad(_)) => 3,
			Self::Contract(Contraction::Conv2dWeightGrad(_)) => 4,
			Self::Contract(Contraction::BatchedMatmul { .. }) => 20,
			Self::BiasAdd(_) => 5,
			Self::Activation(_) => 6,
			Self::ActivationGrad(_) => 7,
			Self::SoftmaxCrossEntropy(_) => 8,
			Self::BiasGrad(_) => 9,
			Self::ClipGradNorm(_) => 10,
			Self::Sgd(_) => 11,
			Self::AdamW(_) => 12,
			Self::Commit => 13,
			Self::Gather { .. } => 14,
			Self::Residual => 15,
			Self::Norm(_) => 16,
			Self::NormGrad(_) => 17,
			Self::SplitHeads(_) => 18,
			Self::MergeHeads(_) => 19,
			Self::CausalSoftmax(_) => 21,
			Self::CausalSoftmaxGrad(_) => 22,
			Self::ScatterAddRows { .. } => 23,
		}
	}
}

/// One operator of the step.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
	/// What it computes.
	pub kind: OpKind,
	/// The values it reads, in the order its kind documents.
	pub inputs: ValueIds,
	/// The values it produces.
	pub outputs: ValueIds,
}

/// Value ids held inline by [`ValueIds`]: every operator's inputs and outputs but
/// clipping's and `Commit`'s.
const INLINE_IDS: usize = 4;

/// A node's input or output value ids: up to four inline, more on the heap. The referee
/// rebuilds the step graph for every call it judges, in wasm, where an allocation is a
/// host call; with ids inline a node costs no allocation of its own.
#[derive(Clone, Debug)]
pub enum ValueIds {
	/// The first `len` of `ids`.
	Inline {
		/// How many ids are held.
		len: u8,
		/// The ids, then unused zeros.
		ids: [ValueId; INLINE_IDS],
	},
	/// More than [`INLINE_IDS`] ids.
	Heap(Vec<ValueId>),
}

impl ValueIds {
	/// The list `ids`, inline where it fits.
	pub fn new(ids: &[ValueId]) -> Self {
		let mut inline = [0; INLINE_IDS];
		match inline.get_mut(..ids.len()) {
			Some(prefix) => {
				prefix.copy_from_slice(ids);
				Self::Inline { len: ids.len() as u8, ids: inline }
			},
			None => Self::Heap(ids.to_vec()),
		}
	}

	/// Appends `id`, moving the list to the heap once it outgrows the inline room.
	fn push(&mut self, id: ValueId) {
		match self {
			Self::Inline { len, ids } if usize::from(*len) < INLINE_IDS => {
				if let Some(slot) = ids.get_mut(usize::from(*len)) {
					*slot = id;
				}
				*len += 1;
			},
			Self::Inline { ids, .. } => {
				let mut heap = ids.to_vec();
				heap.push(id);
				*self = Self::Heap(heap);
			},
			Self::Heap(ids) => ids.push(id),
		}
	}
}

impl Default for ValueIds {
	fn default() -> Self {
		Self::new(&[])
	}
}

impl core::ops::Deref for ValueIds {
	type Target = [ValueId];

	fn deref(&self) -> &[ValueId] {
		match self {
			Self::Inline { len, ids } => ids.get(..usize::from(*len)).unwrap_or_default(),
			Self::Heap(ids) => ids,
		}
	}
}

impl PartialEq for ValueIds {
	fn eq(&self, other: &Self) -> bool {
		**self == **other
	}
}

impl<'a> IntoIterator for &'a ValueIds {
	type Item = &'a ValueId;
	type IntoIter = core::slice::Iter<'a, ValueId>;

	fn into_iter(self) -> Self::IntoIter {
		self.iter()
	}
}

impl FromIterator<ValueId> for ValueIds {
	fn from_iter<I: IntoIterator<Item = ValueId>>(iter: I) -> Self {
		let mut ids = Self::default();
		for id in iter {
			ids.push(id);
		}
		ids
	}
}

/// One piece of an operator: the unit the third dispute round narrows to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
	/// A contraction's running sum of one tile after one K-chunk.
	Accumulator(ChunkId),
	/// A reduction's running sum of lane `lane` after span `span` ([`crate::proof::reduction`]).
	Partial {
		/// The lane (a channel tile, a gradient tensor, or clipping's totals).
		lane: usize,
		/// The span within the lane.
		span: usize,
	},
	/// Segment `segment` of the node's piece value number `value` (see [`Graph::piece_values`]).
	Segment {
		/// Position in [`Graph::piece_values`].
		value: usize,
		/// Segment index within that value.
		segment: usize,
	},
	/// State chunk `chunk` ([`crate::proof::state_tree`]) of the new state's tensor
	/// number `value`: the pieces of `Commit`, whose piece tree is the state tree.
	Chunk {
		/// Position in the state.
		value: usize,
		/// Chunk index within that tensor.
		chunk: usize,
	},
}

/// The operator graph of a training step.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
	/// Every value, by id.
	pub values: Vec<Value>,
	/// The operators, in execution order; the index is the operator id.
	pub nodes: Vec<Node>,
	/// Length and type of every buffer.
	pub buffers: Vec<(usize, ValueKind)>,
	/// The state before the step: parameters, then first moments, then second moments.
	pub state: Vec<ValueId>,
	/// The state after the step, in the same order.
	pub final_state: Vec<ValueId>,
	/// Number of parameter tensors.
	pub params: usize,
	/// The rate of every step, when it follows a schedule rather than the optimizer's
	/// constant rate ([`Graph::adamw_scalars`]).
	pub schedule: Option<WarmupCosine>,
	/// Samples (for a transformer, sequences) per step.
	pub batch: usize,
	/// Features per sample (for a transformer, positions per sequence).
	pub input_len: usize,
	/// The outputs of node 0: the batch's features, labels and sample indices, or a
	/// transformer's input tokens, target tokens and positions.
	pub batch_values: [ValueId; 3],
	/// What the batch draws: samples of a classification set, or a stream's token windows.
	pub batch_kind: BatchKind,
	/// The mean loss (one element).
	pub loss: ValueId,
}

/// What a step's batch draws from its job's training data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
	/// Samples of features and a label each ([`crate::job::data::Dataset`]).
	Samples,
	/// Windows of `input_len + 1` tokens of a token stream ([`crate::job::data::WindowLayout`]).
	Windows,
}

/// Builds a graph value by value.
struct Builder {
	values: Vec<Value>,
	nodes: Vec<Node>,
	buffers: Vec<(usize, ValueKind)>,
}

impl Builder {
	/// A value in a new buffer.
	fn fresh(&mut self, len: usize, kind: ValueKind, origin: Origin) -> ValueId {
		self.buffers.push((len, kind));
		self.values.push(Value { len, kind, buffer: self.buffers.len() - 1, origin });
		self.values.len() - 1
	}

	/// Adds a node whose outputs are new buffers of `lens` (`F32`) or, where
	/// `in_place` names an input position, that input's buffer.
	fn node(&mut self, kind: OpKind, inputs: &[ValueId], outputs: &[(usize, Option<usize>)]) -> ValueIds {
		let node = self.nodes.len();
		let ids: ValueIds = outputs.iter().enumerate().map(|(output, &(len, in_place))| self.output(inputs, node, output, len, in_place)).collect();
		self.nodes.push(Node { kind, inputs: ValueIds::new(inputs), outputs: ids.clone() });
		ids
	}

	/// [`Builder::node`] for a node with one output, which it returns.
	fn node_one(&mut self, kind: OpKind, inputs: &[ValueId], len: usize, in_place: Option<usize>) -> ValueId {
		let node = self.nodes.len();
		let id = self.output(inputs, node, 0, len, in_place);
		self.nodes.push(Node { kind, inputs: ValueIds::new(inputs), outputs: ValueIds::new(&[id]) });
		id
	}

	/// Output `output` of node `node`: a new buffer of `len` (`F32`) or, where `in_place`
	/// names an input position, that input's buffer.
	fn output(&mut self, inputs: &[ValueId], node: usize, output: usize, len: usize, in_place: Option<usize>) -> ValueId {
		let origin = Origin::Node { node, output };
		match in_place.and_then(|position| inputs.get(position)).and_then(|&id| self.values.get(id)).map(|value| value.buffer) {
			Some(buffer) => {
				self.values.push(Value { len, kind: ValueKind::F32, buffer, origin });
				self.values.len() - 1
			},
			None => self.fresh(len, ValueKind::F32, origin),
		}
	}

	/// Length of value `id`.
	fn len(&self, id: ValueId) -> usize {
		self.values.get(id).map_or(0, |value| value.len)
	}
}

/// First element of a node's outputs (every node built here has one).
fn first(ids: ValueIds) -> ValueId {
	ids.first().copied().unwrap_or_default()
}

impl Graph {
	/// The graph of one step of `model` trained with `train`.
	pub fn build(model: &ModelConfig, train: &TrainConfig) -> Result<Self, KernelError> {
		if let ModelConfig::Transformer(config) = model {
			let training = train.transformer_training()?;
			return Self::build_transformer(*config, training.batch, config.context as usize, Some(&training));
		}
		let layers = model.layers()?;
		let specs = model.params()?;
		let batch = train.batch()?;
		let optimizer = train.optimizer()?;
		let activation = model.activation();
		let input_len = model.input_len()?;
		let classes = model.classes() as usize;
		crate::error::element_count(&[batch, input_len])?;
		for layer in &layers {
			crate::error::element_count(&[batch, layer.outputs_per_sample().max(layer.inputs_per_sample())])?;
		}
		// Room for every value and node up front: the runtime's allocations are host calls.
		let capacity = 8 * layers.len() + 3 * specs.len() * (optimizer.moments() + 2) + 16;
		let mut b = Builder {
			values: Vec::with_capacity(capacity),
			nodes: Vec::with_capacity(capacity),
			buffers: Vec::with_capacity(capacity),
		};

		let mut state = Vec::new();
		for _ in 0..=optimizer.moments() {
			for spec in &specs {
				state.push(b.fresh(spec.len, ValueKind::F32, Origin::State(state.len())));
			}
		}
		let param = |index: usize| state.get(index).copied().unwrap_or_default();

		// Batch: features, labels, indices.
		let node = b.nodes.len();
		let features = b.fresh(batch * input_len, ValueKind::F32, Origin::Node { node, output: 0 });
		let labels = b.fresh(batch, ValueKind::U32, Origin::Node { node, output: 1 });
		let indices = b.fresh(batch, ValueKind::U32, Origin::Node { node, output: 2 });
		b.nodes.push(Node { kind: OpKind::Batch, inputs: ValueIds::default(), outputs: ValueIds::new(&[features, labels, indices]) });

		// Forward: remember each layer's input and biased pre-activation.
		let mut x = features;
		let mut layer_io = Vec::with_capacity(layers.len());
		let last = layers.len().saturating_sub(1);
		for (index, layer) in layers.iter().enumerate() {
			let (weight, bias) = (param(2 * index), param(2 * index + 1));
			let out_len = batch * layer.outputs_per_sample();
			let (contraction, layout) = contraction_of(layer, batch);
			let y = b.node_one(OpKind::Contract(contraction), &[x, weight], out_len, None);
			let z = b.node_one(OpKind::BiasAdd(layout), &[y, bias], out_len, Some(0));
			layer_io.push((x, z));
			if index < last {
				x = b.node_one(OpKind::Activation(activation), &[z], out_len, None);
			} else {
				x = z;
			}
		}
		let logits = x;
		let classifier = ClassifierShape { rows: batch, classes };
		let loss_outputs =
			b.node(OpKind::SoftmaxCrossEntropy(classifier), &[logits, labels], &[(1, None), (batch * classes, None)]);
		let loss = loss_outputs.first().copied().unwrap_or_default();
		let mut dz = loss_outputs.get(1).copied().unwrap_or_default();

		// Backward.
		let mut grads = vec![0; specs.len()];
		for (index, layer) in layers.iter().enumerate().rev() {
			let (input, _) = layer_io.get(index).copied().unwrap_or_default();
			let (weight_len, bias_len) = layer.param_lens();
			let (weight_grad_op, input_grad_op) = match layer {
				Layer::Conv(shape) => {
					let shape = crate::ops::contraction::Conv2dShape { batch, ..*shape };
					(Contraction::Conv2dWeightGrad(shape), Contraction::Conv2dInputGrad(shape))
				},
				Layer::Dense { inputs, outputs } => {
					let shape = MatmulShape { m: batch, k: *inputs, n: *outputs };
					(shape.rhs_grad_contraction(), shape.lhs_grad_contraction())
				},
			};
			let (_, layout) = contraction_of(layer, batch);
			let (weight_grad_inputs, input_grad_inputs) = match layer {
				Layer::Conv(_) => ([dz, input], [dz, param(2 * index)]),
				Layer::Dense { .. } => ([input, dz], [dz, param(2 * index)]),
			};
			let weight_grad = b.node_one(OpKind::Contract(weight_grad_op), &weight_grad_inputs, weight_len, None);
			let bias_grad = b.node_one(OpKind::BiasGrad(layout), &[dz], bias_len, None);
			if let Some(slot) = grads.get_mut(2 * index) {
				*slot = weight_grad;
			}
			if let Some(slot) = grads.get_mut(2 * index + 1) {
				*slot = bias_grad;
			}
			if index > 0 {
				let previous = layer_io.get(index - 1).map(|&(_, z)| z).unwrap_or_default();
				let len = b.len(previous);
				let input_grad = b.node_one(OpKind::Contract(input_grad_op), &input_grad_inputs, len, None);
				dz = b.node_one(OpKind::ActivationGrad(activation), &[previous, input_grad], len, None);
			}
		}

		if let Some(max_norm) = train.clip_norm() {
			let mut outputs: Vec<(usize, Option<usize>)> =
				grads.iter().enumerate().map(|(position, &g)| (b.len(g), Some(position))).collect();
			outputs.push((1, None));
			let clipped = b.node(OpKind::ClipGradNorm(max_norm), &grads, &outputs);
			grads = clipped.get(..grads.len()).map(<[_]>::to_vec).unwrap_or_default();
		}

		let moments = optimizer.moments();
		let mut final_state = vec![0; state.len()];
		for (index, spec) in specs.iter().enumerate() {
			let grad = grads.get(index).copied().unwrap_or_default();
			let slots: Vec<usize> = (0..=moments).map(|m| m * specs.len() + index).collect();
			let mut inputs = vec![param(index), grad];
			inputs.extend(slots.iter().skip(1).map(|&slot| param(slot)));
			let (kind, outputs): (OpKind, Vec<(usize, Option<usize>)>) = match optimizer {
				Optimizer::Sgd(hyper) => (OpKind::Sgd(hyper), vec![(spec.len, Some(0)), (spec.len, Some(2))]),
				Optimizer::AdamW(hyper) => {
					(OpKind::AdamW(hyper), vec![(spec.len, Some(0)), (spec.len, Some(2)), (spec.len, Some(3))])
				},
			};
			let produced = b.node(kind, &inputs, &outputs);
			for (&slot, &value) in slots.iter().zip(&produced) {
				if let Some(entry) = final_state.get_mut(slot) {
					*entry = value;
				}
			}
		}
		b.nodes.push(Node { kind: OpKind::Commit, inputs: ValueIds::new(&final_state), outputs: ValueIds::default() });

		Ok(Self {
			values: b.values,
			nodes: b.nodes,
			buffers: b.buffers,
			state,
			final_state,
			params: specs.len(),
			schedule: None,
			batch,
			input_len,
			batch_values: [features, labels, indices],
			batch_kind: BatchKind::Samples,
			loss,
		})
	}

	/// Where the words of a training set of `samples` samples (a stream's windows) lie.
	pub fn data_layout(&self, samples: usize) -> crate::job::data::DataLayout {
		use crate::job::data::{DataLayout, DatasetLayout, WindowLayout};
		match self.batch_kind {
			BatchKind::Samples => DataLayout::Samples(DatasetLayout { samples, feature_len: self.input_len }),
			BatchKind::Windows => DataLayout::Windows(WindowLayout { windows: samples, context: self.input_len }),
		}
	}

	/// AdamW's scalars for step `step` (counted from 0): at the schedule's rate of the
	/// step when the graph has one, else at `hyper`'s own.
	pub fn adamw_scalars(&self, hyper: AdamW, step: u32) -> Result<AdamWScalars, KernelError> {
		let learning_rate = self.schedule.map_or(hyper.learning_rate, |schedule| schedule.rate(step));
		AdamW { learning_rate, ..hyper }.scalars(step.checked_add(1).ok_or(KernelError::InvalidHyperparameter { name: "step" })?)
	}

	/// Node `id`, or `OperatorOutOfRange`.
	pub fn node(&self, id: usize) -> Result<&Node, GraphError> {
		self.nodes.get(id).ok_or(GraphError::OperatorOutOfRange { operator: id, count: self.nodes.len() })
	}

	/// Value `id` (ids come from the graph itself).
	pub fn value(&self, id: ValueId) -> Option<&Value> {
		self.values.get(id)
	}

	/// The values whose segments are node `id`'s segment pieces: its outputs,
	/// or for `Commit` the new state.
	pub fn piece_values(&self, id: usize) -> Result<&[ValueId], GraphError> {
		let node = self.node(id)?;
		Ok(if node.kind == OpKind::Commit { &node.inputs } else { &node.outputs })
	}

	/// The contraction and its chunk grid, for a contraction node.
	pub fn accumulator_grid(&self, id: usize) -> Result<Option<(Contraction, ChunkGrid)>, GraphError> {
		match self.node(id)?.kind {
			OpKind::Contract(contraction) => Ok(Some((contraction, contraction.grid()?))),
			_ => Ok(None),
		}
	}

	/// The reduction behind node `id`, for a bias gradient, a loss or clipping.
	pub fn reduction(&self, id: usize) -> Result<Option<Reduction>, GraphError> {
		let node = self.node(id)?;
		Ok(match node.kind {
			OpKind::BiasGrad(layout) => Some(Reduction::BiasGrad(layout)),
			OpKind::SoftmaxCrossEntropy(shape) => Some(Reduction::SoftmaxCrossEntropy(shape)),
			OpKind::NormGrad(shape) => Some(Reduction::NormGrad(shape)),
			OpKind::ScatterAddRows { row_len, table_rows } => Some(Reduction::ScatterAddRows {
				row_len,
				table_rows,
				rows: node.inputs.get(1).and_then(|&ids| self.value(ids)).map_or(0, |value| value.len),
			}),
			OpKind::ClipGradNorm(max_norm) => Some(Reduction::ClipGradNorm {
				max_norm,
				lens: node.inputs.iter().map(|&input| self.value(input).map_or(0, |value| value.len)).collect(),
			}),
			_ => None,
		})
	}

	/// Number of running-sum pieces of node `id`, which come before its
	/// segments: a contraction's accumulators or a reduction's partials (zero
	/// for any other operator).
	pub fn accumulator_count(&self, id: usize) -> Result<usize, GraphError> {
		if let Some(reduction) = self.reduction(id)? {
			return Ok(reduction.len());
		}
		Ok(self.accumulator_grid(id)?.map_or(0, |(_, grid)| grid.len()))
	}

	/// Number of pieces of node `id`: the leaves of its third-level tree.
	pub fn piece_count(&self, id: usize) -> Result<usize, GraphError> {
		if self.node(id)?.kind == OpKind::Commit {
			return Ok(self.state_chunks());
		}
		let segments: usize = self.segment_counts(self.piece_values(id)?).sum();
		Ok(self.accumulator_count(id)? + segments)
	}

	/// Which tree node `id`'s pieces form: the state tree for `Commit` (its
	/// root is the state root after the step), a segment tree for the others.
	pub fn piece_tree_kind(&self, id: usize) -> Result<TreeKind, GraphError> {
		Ok(if self.node(id)?.kind == OpKind::Commit { TreeKind::State } else { TreeKind::Segments })
	}

	/// Lengths of the state's tensors, in order.
	pub fn state_lens(&self) -> impl Iterator<Item = usize> + '_ {
		self.state.iter().map(|&id| self.value(id).map_or(0, |value| value.len))
	}

	/// Chunks in a state of this graph: the leaf count of its state tree.
	pub fn state_chunks(&self) -> usize {
		crate::proof::state_tree::state_chunk_count(self.state_lens())
	}

	/// Leaf index in the state tree of chunk `chunk` of state tensor `tensor`.
	pub fn state_chunk_index(&self, tensor: usize, chunk: usize) -> Option<usize> {
		let len = self.state_lens().nth(tensor)?;
		if chunk >= crate::proof::state_tree::chunk_count(len) {
			return None;
		}
		Some(crate::proof::state_tree::state_chunk_count(self.state_lens().take(tensor)) + chunk)
	}

	/// Segment counts of `values`, in order.
	fn segment_counts<'a>(&'a self, values: &'a [ValueId]) -> impl Iterator<Item = usize> + 'a {
		values.iter().map(|&id| segment_count(self.value(id).map_or(0, |value| value.len)))
	}

	/// Leaf index of segment `segment` of value number `value` in a tree whose
	/// leaves are the segments of `values`, after `skip` other leaves.
	pub fn segment_leaf_index(&self, values: &[ValueId], value: usize, segment: usize, skip: usize) -> Option<usize> {
		let count = self.segment_counts(values).nth(value)?;
		if segment >= count {
			return None;
		}
		Some(skip + self.segment_counts(values).take(value).sum::<usize>() + segment)
	}

	/// Decodes piece `index` of node `id`.
	pub fn piece(&self, id: usize, index: usize) -> Result<Piece, GraphError> {
		let count = self.piece_count(id)?;
		if index >= count {
			return Err(GraphError::PieceOutOfRange { piece: index, count });
		}
		if let Some((_, grid)) = self.accumulator_grid(id)? {
			if index < grid.len() {
				let per_tile_row = grid.tile_cols * grid.chunks;
				return Ok(Piece::Accumulator(ChunkId {
					tile_row: index / per_tile_row,
					tile_col: (index % per_tile_row) / grid.chunks,
					chunk: index % grid.chunks,
				}));
			}
		}
		if let Some(reduction) = self.reduction(id)? {
			if let Some((lane, span)) = reduction.locate(index) {
				return Ok(Piece::Partial { lane, span });
			}
		}
		if self.node(id)?.kind == OpKind::Commit {
			let (value, chunk) = crate::proof::state_tree::locate_chunk(self.state_lens(), index)
				.ok_or(GraphError::PieceOutOfRange { piece: index, count })?;
			return Ok(Piece::Chunk { value, chunk });
		}
		let mut rest = index - self.accumulator_count(id)?;
		for (value, segments) in self.segment_counts(self.piece_values(id)?).enumerate() {
			if rest < segments {
				return Ok(Piece::Segment { value, segment: rest });
			}
			rest -= segments;
		}
		Err(GraphError::PieceOutOfRange { piece: index, count })
	}

	/// The index of accumulator `chunk` of node `id`'s grid.
	pub fn accumulator_index(grid: &ChunkGrid, chunk: ChunkId) -> usize {
		(chunk.tile_row * grid.tile_cols + chunk.tile_col) * grid.chunks + chunk.chunk
	}
}

/// The forward contraction and bias layout of `layer` for a batch of `batch`.
fn contraction_of(layer: &Layer, batch: usize) -> (Contraction, BiasLayout) {
	match layer {
		Layer::Conv(shape) => {
			let shape = crate::ops::contraction::Conv2dShape { batch, ..*shape };
			let spatial = shape.out_height() * shape.out_width();
			(Contraction::Conv2d(shape), BiasLayout::channels_first(batch, shape.out_channels, spatial))
		},
		Layer::Dense { inputs, outputs } => (
			MatmulShape { m: batch, k: *inputs, n: *outputs }.contraction(MatmulLayout::default()),
			BiasLayout::dense(batch, *outputs),
		),
	}
}

/// Why a graph lookup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphError {
	/// No operator with this id in the step.
	OperatorOutOfRange {
		/// The id asked for.
		operator: usize,
		/// Operators in the step.
		count: usize,
	},
	/// No piece with this index in the operator.
	PieceOutOfRange {
		/// The index asked for.
		piece: usize,
		/// Pieces of the operator.
		count: usize,
	},
	/// A shape in the graph is invalid.
	Kernel(KernelError),
}

impl From<KernelError> for GraphError {
	fn from(error: KernelError) -> Self {
		Self::Kernel(error)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	/// Up to four ids stay inline; a fifth moves the list to the heap, and either way the
	/// list reads back in order and compares by its ids alone.
	#[test]
	fn value_ids_hold_four_inline_and_more_on_the_heap() {
		let four = ValueIds::new(&[7, 1, 9, 3]);
		assert!(matches!(four, ValueIds::Inline { len: 4, .. }));
		assert_eq!(*four, [7, 1, 9, 3]);
		let collected: ValueIds = [7, 1, 9, 3, 5].into_iter().collect();
		assert!(matches!(collected, ValueIds::Heap(_)));
		assert_eq!(*collected, [7, 1, 9, 3, 5]);
		assert_eq!(ValueIds::new(&[7, 1, 9, 3, 5]), collected);
		assert_ne!(four, collected);
		assert_eq!(ValueIds::default().len(), 0);
		assert_eq!((&four).into_iter().copied().sum::<usize>(), 20);
	}
}

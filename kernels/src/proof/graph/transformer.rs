//! The step graph of a decoder-only transformer ([`crate::job::transformer`]): the model's
//! forward pass, its backward pass, clipping and AdamW as the contract's operators, in the
//! order the module documents, so that every backend runs the same operators and a dispute
//! can name any of them.
//!
//! Node 0 (`Batch`) yields the input tokens, the target tokens and every row's position
//! (`U32`, `sequences × positions` each). The forward pass runs to the loss
//! (`SoftmaxCrossEntropy`, whose second output is the logits' gradient). A training graph
//! then runs the backward pass, last block first, writing each parameter's gradient once
//! (a tied token embedding sums the gather's gradient and the head's with a `Residual`),
//! then `ClipGradNorm` over the gradients in parameter order (to `f32::MAX`, which never
//! scales, when the run does not clip: its second output is still the norm), one `AdamW`
//! per parameter (decay on matrices only) at the schedule's rate, and `Commit`.

use alloc::vec;
use alloc::vec::Vec;

use super::{first, Builder, Graph, Node, OpKind, Origin, ValueId, ValueIds, ValueKind};
use crate::arith::math::rsqrt;
use crate::error::{element_count, KernelError};
use crate::job::model::transformer::{NormIndices, TransformerConfig, TransformerTraining, NORM_EPSILON};
use crate::ops::activation::Activation;
use crate::ops::attention::CausalShape;
use crate::ops::bias::BiasLayout;
use crate::ops::contraction::{Contraction, MatmulLayout, MatmulShape};
use crate::ops::heads::HeadsShape;
use crate::ops::loss::ClassifierShape;
use crate::ops::norm::NormShape;
use crate::ops::optim::AdamW;

const PLAIN: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: false };
const RHS_TRANSPOSED: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: true };
const LHS_TRANSPOSED: MatmulLayout = MatmulLayout { lhs_transposed: true, rhs_transposed: false };

/// The values a block's backward pass reads from its forward pass.
struct BlockTape {
	/// The block's input, normalised for attention.
	attention_norm: Normalised,
	query: ValueId,
	key: ValueId,
	value: ValueId,
	probs: ValueId,
	attended: ValueId,
	/// The residual stream between attention and the MLP, normalised for the MLP.
	mlp_norm: Normalised,
	up: ValueId,
	activated: ValueId,
}

/// A normalisation's values: its input, its output, and the normalised rows `x̂` that its
/// backward's parameter gradients read.
#[derive(Clone, Copy)]
struct Normalised {
	input: ValueId,
	output: ValueId,
	rows: ValueId,
}

/// Builds a transformer's graph: the graph builder with the model's shapes.
struct TransformerBuilder {
	b: Builder,
	config: TransformerConfig,
	/// The parameters' values before the step, in the module's order.
	params: Vec<ValueId>,
	/// Each parameter's gradient, once the backward pass has written it.
	grads: Vec<ValueId>,
	sequences: usize,
	positions: usize,
}

impl TransformerBuilder {
	fn rows(&self) -> usize {
		self.sequences * self.positions
	}

	fn param(&self, index: usize) -> ValueId {
		self.params.get(index).copied().unwrap_or_default()
	}

	fn set_grad(&mut self, index: usize, grad: ValueId) {
		if let Some(slot) = self.grads.get_mut(index) {
			*slot = grad;
		}
	}

	fn norm_shape(&self) -> NormShape {
		NormShape { norm: self.config.norm, rows: self.rows(), width: self.config.width(), epsilon: NORM_EPSILON }
	}

	fn heads_shape(&self) -> HeadsShape {
		HeadsShape {
			sequences: self.sequences,
			positions: self.positions,
			heads: self.config.heads as usize,
			head_width: self.config.head_width(),
		}
	}

	fn causal_shape(&self) -> CausalShape {
		CausalShape {
			blocks: self.sequences * self.config.heads as usize,
			positions: self.positions,
			scale: rsqrt(self.config.head_width() as f32),
		}
	}

	/// A node with one fresh `F32` output of `len`.
	fn op(&mut self, kind: OpKind, inputs: &[ValueId], len: usize) -> ValueId {
		self.b.node_one(kind, inputs, len, None)
	}

	/// `into + other`, in `into`'s buffer.
	fn residual(&mut self, into: ValueId, other: ValueId) -> ValueId {
		let len = self.b.len(into);
		self.b.node_one(OpKind::Residual, &[into, other], len, Some(0))
	}

	/// A normalisation of `x`: its output, and the normalised rows its backward reads.
	fn normalise(&mut self, norm: NormIndices, x: ValueId) -> Normalised {
		let inputs = [x, self.param(norm.gain), norm.bias.map_or(0, |bias| self.param(bias))];
		let inputs = if norm.bias.is_some() { &inputs[..] } else { &inputs[..2] };
		let len = self.b.len(x);
		let produced = self.b.node(OpKind::Norm(self.norm_shape()), inputs, &[(len, None), (len, None)]);
		Normalised { input: x, output: produced.first().copied().unwrap_or_default(), rows: produced.get(1).copied().unwrap_or_default() }
	}

	/// `x·W + b` (`b` at `weight + 1` when `bias`) for `x` `[rows, inputs]`.
	fn linear(&mut self, x: ValueId, weight: usize, inputs: usize, outputs: usize, bias: bool) -> ValueId {
		let rows = self.rows();
		let shape = MatmulShape { m: rows, k: inputs, n: outputs };
		let y = self.op(OpKind::Contract(shape.contraction(PLAIN)), &[x, self.param(weight)], rows * outputs);
		if !bias {
			return y;
		}
		let kind = OpKind::BiasAdd(BiasLayout::dense(rows, outputs));
		self.b.node_one(kind, &[y, self.param(weight + 1)], rows * outputs, Some(0))
	}

	/// A linear layer's backward pass: its weight's gradient, its bias's, then its
	/// input's, which it returns.
	fn linear_backward(&mut self, x: ValueId, weight: usize, out_grad: ValueId, inputs: usize, outputs: usize, bias: bool) -> ValueId {
		let rows = self.rows();
		let shape = MatmulShape { m: rows, k: inputs, n: outputs };
		let weight_grad = self.op(OpKind::Contract(shape.rhs_grad_contraction()), &[x, out_grad], inputs * outputs);
		self.set_grad(weight, weight_grad);
		if bias {
			let bias_grad = self.op(OpKind::BiasGrad(BiasLayout::dense(rows, outputs)), &[out_grad], outputs);
			self.set_grad(weight + 1, bias_grad);
		}
		self.op(OpKind::Contract(shape.lhs_grad_contraction()), &[out_grad, self.param(weight)], rows * inputs)
	}

	/// A normalisation's backward pass: its gain's and bias's gradients; returns its input's.
	fn normalise_backward(&mut self, norm: NormIndices, forward: Normalised, dy: ValueId) -> ValueId {
		let width = self.config.width();
		let outputs = [(self.b.len(forward.input), None), (width, None), (width, None)];
		let outputs = if norm.bias.is_some() { &outputs[..] } else { &outputs[..2] };
		let inputs = [forward.input, self.param(norm.gain), dy, forward.rows];
		let produced = self.b.node(OpKind::NormGrad(self.norm_shape()), &inputs, outputs);
		self.set_grad(norm.gain, produced.get(1).copied().unwrap_or_default());
		if let Some(bias) = norm.bias {
			self.set_grad(bias, produced.get(2).copied().unwrap_or_default());
		}
		first(produced)
	}

	fn split(&mut self, side_by_side: ValueId) -> ValueId {
		let len = self.b.len(side_by_side);
		self.op(OpKind::SplitHeads(self.heads_shape()), &[side_by_side], len)
	}

	fn merge(&mut self, blocked: ValueId) -> ValueId {
		let len = self.b.len(blocked);
		self.op(OpKind::MergeHeads(self.heads_shape()), &[blocked], len)
	}

	/// Per (sequence, head) block, `[m, k]·[k, n]` in `layout`.
	fn batched(&mut self, shape: MatmulShape, layout: MatmulLayout, lhs: ValueId, rhs: ValueId) -> ValueId {
		let blocks = self.causal_shape().blocks;
		self.op(OpKind::Contract(Contraction::BatchedMatmul { blocks, shape, layout }), &[lhs, rhs], blocks * shape.m * shape.n)
	}

	fn block_forward(&mut self, layer: usize, input: ValueId) -> (BlockTape, ValueId) {
		let (w, t, d, hidden) = (self.config.width(), self.positions, self.config.head_width(), self.config.hidden());
		let block = self.config.block(layer);
		let attention_norm = self.normalise(block.attention_norm, input);
		let attention_in = attention_norm.output;
		let projected = self.linear(attention_in, block.query, w, w, true);
		let query = self.split(projected);
		let projected = self.linear(attention_in, block.key, w, w, true);
		let key = self.split(projected);
		let projected = self.linear(attention_in, block.value, w, w, true);
		let value = self.split(projected);
		let scores = self.batched(MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, query, key);
		let probs = self.op(OpKind::CausalSoftmax(self.causal_shape()), &[scores], self.b.len(scores));
		let blocked = self.batched(MatmulShape { m: t, k: t, n: d }, PLAIN, probs, value);
		let attended = self.merge(blocked);
		let projected = self.linear(attended, block.output, w, w, true);
		let middle = self.residual(projected, input);
		let mlp_norm = self.normalise(block.mlp_norm, middle);
		let mlp_in = mlp_norm.output;
		let up = self.linear(mlp_in, block.up, w, hidden, true);
		let activated = self.op(OpKind::Activation(Activation::GeluTanh), &[up], self.b.len(up));
		let down = self.linear(activated, block.down, hidden, w, true);
		// `middle + down`, as the forward adds them: the sum is commutative bit for bit.
		let output = self.residual(down, middle);
		(BlockTape { attention_norm, query, key, value, probs, attended, mlp_norm, up, activated }, output)
	}

	/// Block `layer`'s backward pass from its output's gradient; returns its input's.
	fn block_backward(&mut self, layer: usize, tape: &BlockTape, out_grad: ValueId) -> ValueId {
		let (w, t, d, hidden) = (self.config.width(), self.positions, self.config.head_width(), self.config.hidden());
		let block = self.config.block(layer);
		let activated_grad = self.linear_backward(tape.activated, block.down, out_grad, hidden, w, true);
		let up_grad =
			self.op(OpKind::ActivationGrad(Activation::GeluTanh), &[tape.up, activated_grad], self.b.len(tape.up));
		let mlp_in_grad = self.linear_backward(tape.mlp_norm.output, block.up, up_grad, w, hidden, true);
		// `middle`'s readers in graph order: norm₂, then the residual.
		let norm_grad = self.normalise_backward(block.mlp_norm, tape.mlp_norm, mlp_in_grad);
		let middle_grad = self.residual(norm_grad, out_grad);

		let projected_grad = self.linear_backward(tape.attended, block.output, middle_grad, w, w, true);
		let attended_grad = self.split(projected_grad);
		let probs_grad = self.batched(MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, attended_grad, tape.value);
		let value_grad = self.batched(MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, tape.probs, attended_grad);
		let causal = self.causal_shape();
		let scores_grad = self.op(OpKind::CausalSoftmaxGrad(causal), &[tape.probs, probs_grad], self.b.len(tape.probs));
		let query_grad = self.batched(MatmulShape { m: t, k: t, n: d }, PLAIN, scores_grad, tape.key);
		let key_grad = self.batched(MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, scores_grad, tape.query);
		// `attention_in`'s readers in graph order: the query, key and value projections.
		let merged = self.merge(query_grad);
		let query_in_grad = self.linear_backward(tape.attention_norm.output, block.query, merged, w, w, true);
		let merged = self.merge(key_grad);
		let key_in_grad = self.linear_backward(tape.attention_norm.output, block.key, merged, w, w, true);
		let attention_in_grad = self.residual(query_in_grad, key_in_grad);
		let merged = self.merge(value_grad);
		let value_in_grad = self.linear_backward(tape.attention_norm.output, block.value, merged, w, w, true);
		let attention_in_grad = self.residual(attention_in_grad, value_in_grad);
		// `input`'s readers in graph order: norm₁, then the residual.
		let norm_grad = self.normalise_backward(block.attention_norm, tape.attention_norm, attention_in_grad);
		self.residual(norm_grad, middle_grad)
	}
}

impl Graph {
	/// The graph of a transformer over `sequences` sequences of `positions ≤ context`
	/// tokens: the forward pass to the loss and, when `training` is given, the backward
	/// pass, clipping, AdamW and `Commit` (the module's docs). A forward graph's state is
	/// the parameters alone and its final state is empty.
	pub fn build_transformer(
		config: TransformerConfig,
		sequences: usize,
		positions: usize,
		training: Option<&TransformerTraining>,
	) -> Result<Self, KernelError> {
		let config = config.validated()?;
		if positions == 0 || positions > config.context as usize {
			return Err(KernelError::InvalidHyperparameter { name: "context" });
		}
		if sequences == 0 {
			return Err(KernelError::EmptyDimension { dimension: "sequences" });
		}
		let (w, vocab) = (config.width(), config.vocab as usize);
		let rows = element_count(&[sequences, positions])?;
		element_count(&[rows, vocab.max(config.hidden())])?;
		element_count(&[sequences * config.heads as usize, positions, positions])?;
		if let Some(training) = training {
			training.schedule.validated()?;
			if training.batch != sequences {
				return Err(KernelError::InvalidHyperparameter { name: "batch" });
			}
		}
		let specs = config.tensors();
		let moments = if training.is_some() { 2 } else { 0 };
		let capacity = 96 * config.layers as usize + (moments + 4) * specs.len() + 32;
		let b = Builder {
			values: Vec::with_capacity(capacity),
			nodes: Vec::with_capacity(capacity),
			buffers: Vec::with_capacity(capacity),
		};
		let mut t = TransformerBuilder { b, config, params: Vec::new(), grads: vec![0; specs.len()], sequences, positions };
		let mut state = Vec::with_capacity((moments + 1) * specs.len());
		for _ in 0..=moments {
			for spec in &specs {
				state.push(t.b.fresh(spec.len, ValueKind::F32, Origin::State(state.len())));
			}
		}
		t.params = state.get(..specs.len()).map(<[_]>::to_vec).unwrap_or_default();

		// Batch: input tokens, target tokens, positions.
		let batch_values = [0, 1, 2].map(|output| t.b.fresh(rows, ValueKind::U32, Origin::Node { node: 0, output }));
		t.b.nodes.push(Node { kind: OpKind::Batch, inputs: ValueIds::default(), outputs: ValueIds::new(&batch_values) });
		let [tokens, targets, positions_value] = batch_values;

		// Forward.
		let embedded = t.op(OpKind::Gather { row_len: w }, &[t.param(0), tokens], rows * w);
		let placed = t.op(OpKind::Gather { row_len: w }, &[t.param(1), positions_value], rows * w);
		let mut stream = t.residual(embedded, placed);
		let mut tapes = Vec::with_capacity(config.layers as usize);
		for layer in 0..config.layers as usize {
			let (tape, output) = t.block_forward(layer, stream);
			tapes.push(tape);
			stream = output;
		}
		let final_norm = t.normalise(config.final_norm(), stream);
		let normalised = final_norm.output;
		let logits = match config.head() {
			Some(head) => t.linear(normalised, head, w, vocab, false),
			None => {
				let shape = MatmulShape { m: rows, k: w, n: vocab };
				t.op(OpKind::Contract(shape.contraction(RHS_TRANSPOSED)), &[normalised, t.param(0)], rows * vocab)
			},
		};
		let classifier = ClassifierShape { rows, classes: vocab };
		let loss_outputs =
			t.b.node(OpKind::SoftmaxCrossEntropy(classifier), &[logits, targets], &[(1, None), (rows * vocab, None)]);
		let loss = loss_outputs.first().copied().unwrap_or_default();
		let logits_grad = loss_outputs.get(1).copied().unwrap_or_default();

		let Some(training) = training else {
			return Ok(t.finish(state, Vec::new(), None, batch_values, loss));
		};

		// Backward.
		let (normalised_grad, head_grad) = match config.head() {
			Some(head) => (t.linear_backward(normalised, head, logits_grad, w, vocab, false), None),
			None => {
				let shape = MatmulShape { m: rows, k: vocab, n: w };
				let normalised_grad =
					t.op(OpKind::Contract(shape.contraction(PLAIN)), &[logits_grad, t.param(0)], rows * w);
				let shape = MatmulShape { m: vocab, k: rows, n: w };
				let head_grad =
					t.op(OpKind::Contract(shape.contraction(LHS_TRANSPOSED)), &[logits_grad, normalised], vocab * w);
				(normalised_grad, Some(head_grad))
			},
		};
		let mut stream_grad = t.normalise_backward(config.final_norm(), final_norm, normalised_grad);
		for (layer, tape) in tapes.iter().enumerate().rev() {
			stream_grad = t.block_backward(layer, tape, stream_grad);
		}
		let scatter = |table_rows| OpKind::ScatterAddRows { row_len: w, table_rows };
		let token_grad = t.op(scatter(vocab), &[stream_grad, tokens], vocab * w);
		let position_grad = t.op(scatter(config.context as usize), &[stream_grad, positions_value], config.context as usize * w);
		// A tied `E`'s readers in graph order: the gather, then the head.
		let token_grad = match head_grad {
			Some(head_grad) => t.residual(token_grad, head_grad),
			None => token_grad,
		};
		t.set_grad(0, token_grad);
		t.set_grad(1, position_grad);

		let mut outputs: Vec<(usize, Option<usize>)> =
			t.grads.iter().enumerate().map(|(position, &grad)| (t.b.len(grad), Some(position))).collect();
		outputs.push((1, None));
		let clipped = t.b.node(OpKind::ClipGradNorm(training.clip_norm.unwrap_or(f32::MAX)), &t.grads, &outputs);
		let grads = clipped.get(..specs.len()).map(<[_]>::to_vec).unwrap_or_default();

		let adamw = |weight_decay| AdamW {
			learning_rate: training.schedule.peak,
			beta1: training.beta1,
			beta2: training.beta2,
			epsilon: training.epsilon,
			weight_decay,
		};
		let mut final_state = vec![0; state.len()];
		for (index, spec) in specs.iter().enumerate() {
			let hyper = adamw(if spec.matrix { training.weight_decay } else { 0.0 });
			let slots = [index, specs.len() + index, 2 * specs.len() + index];
			let slot = |at: usize| slots.get(at).and_then(|&slot| state.get(slot)).copied().unwrap_or_default();
			let inputs = [t.param(index), grads.get(index).copied().unwrap_or_default(), slot(1), slot(2)];
			let outputs = [(spec.len, Some(0)), (spec.len, Some(2)), (spec.len, Some(3))];
			let produced = t.b.node(OpKind::AdamW(hyper), &inputs, &outputs);
			for (&slot, &value) in slots.iter().zip(&produced) {
				if let Some(entry) = final_state.get_mut(slot) {
					*entry = value;
				}
			}
		}
		t.b.nodes.push(Node { kind: OpKind::Commit, inputs: ValueIds::new(&final_state), outputs: ValueIds::default() });
		Ok(t.finish(state, final_state, Some(training), batch_values, loss))
	}
}

impl TransformerBuilder {
	fn finish(
		self,
		state: Vec<ValueId>,
		final_state: Vec<ValueId>,
		training: Option<&TransformerTraining>,
		batch_values: [ValueId; 3],
		loss: ValueId,
	) -> Graph {
		Graph {
			values: self.b.values,
			nodes: self.b.nodes,
			buffers: self.b.buffers,
			state,
			final_state,
			params: self.params.len(),
			schedule: training.map(|training| training.schedule),
			batch: self.sequences,
			input_len: self.positions,
			batch_values,
			batch_kind: super::BatchKind::Windows,
			loss,
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::norm::Norm;
	use crate::ops::schedule::WarmupCosine;
	use crate::proof::graph::Origin;

	fn config(norm: Norm, tied_embeddings: bool) -> TransformerConfig {
		TransformerConfig { vocab: 11, context: 9, layers: 3, heads: 2, width: 16, mlp_ratio: 3, norm, tied_embeddings }
	}

	fn training(batch: usize) -> TransformerTraining {
		TransformerTraining {
			batch,
			schedule: WarmupCosine { peak: 1e-3, floor: 1e-4, warmup_steps: 2, total_steps: 10 },
			beta1: 0.9,
			beta2: 0.95,
			epsilon: 1e-8,
			weight_decay: 0.1,
			clip_norm: Some(1.0),
		}
	}

	fn count(graph: &Graph, kind: impl Fn(&OpKind) -> bool) -> usize {
		graph.nodes.iter().filter(|node| kind(&node.kind)).count()
	}

	/// Every operator reads values that exist before it runs (the state, or an earlier
	/// operator's output), and an in-place output reuses its input's buffer.
	fn assert_well_formed(graph: &Graph) {
		for (id, node) in graph.nodes.iter().enumerate() {
			for &input in &node.inputs {
				match graph.values[input].origin {
					Origin::State(_) => {},
					Origin::Node { node: producer, .. } => assert!(producer < id, "operator {id} reads a later value"),
				}
			}
			for (output, &value) in node.outputs.iter().enumerate() {
				assert_eq!(graph.values[value].origin, Origin::Node { node: id, output });
			}
		}
	}

	/// A training graph gives every parameter one gradient of its length, clips them in
	/// parameter order, updates each parameter once in place at the schedule's rate with
	/// decay on matrices only, and commits the updated state.
	#[test]
	fn every_parameter_gets_one_gradient_and_one_update() {
		for (norm, tied) in [(Norm::Layer, true), (Norm::Layer, false), (Norm::Rms, true), (Norm::Rms, false)] {
			let config = config(norm, tied);
			let graph = Graph::build_transformer(config, 4, 9, Some(&training(4))).unwrap();
			assert_well_formed(&graph);
			let specs = config.tensors();
			let layers = config.layers as usize;
			assert_eq!(graph.state.len(), 3 * specs.len());
			assert_eq!(graph.params, specs.len());
			assert_eq!(graph.schedule, Some(training(4).schedule));
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::Norm(_))), 2 * layers + 1);
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::NormGrad(_))), 2 * layers + 1);
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::CausalSoftmax(_))), layers);
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::Contract(Contraction::BatchedMatmul { .. }))), 6 * layers);
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::ScatterAddRows { .. })), 2);
			assert_eq!(count(&graph, |kind| matches!(kind, OpKind::AdamW(_))), specs.len());

			let clip = graph.nodes.iter().find(|node| matches!(node.kind, OpKind::ClipGradNorm(_))).unwrap();
			assert_eq!(clip.inputs.len(), specs.len());
			for (index, (&grad, spec)) in clip.inputs.iter().zip(&specs).enumerate() {
				assert_eq!(graph.values[grad].len, spec.len, "gradient {index}");
				assert!(matches!(graph.values[grad].origin, Origin::Node { .. }), "gradient {index} is computed");
			}
			let mut distinct = clip.inputs.to_vec();
			distinct.sort_unstable();
			distinct.dedup();
			assert_eq!(distinct.len(), specs.len(), "one gradient per parameter");

			let updates: Vec<&Node> = graph.nodes.iter().filter(|node| matches!(node.kind, OpKind::AdamW(_))).collect();
			for (index, (update, spec)) in updates.iter().zip(&specs).enumerate() {
				let OpKind::AdamW(hyper) = update.kind else { unreachable!() };
				assert_eq!(hyper.weight_decay, if spec.matrix { 0.1 } else { 0.0 }, "tensor {index}");
				assert_eq!(update.inputs[0], graph.state[index]);
				assert_eq!(update.inputs[1], clip.outputs[index]);
				for (slot, &value) in [index, specs.len() + index, 2 * specs.len() + index].iter().zip(&update.outputs) {
					assert_eq!(graph.values[value].buffer, graph.values[graph.state[*slot]].buffer, "in place");
					assert_eq!(graph.final_state[*slot], value);
				}
			}
			let commit = graph.nodes.last().unwrap();
			assert_eq!((commit.kind, &commit.inputs[..]), (OpKind::Commit, &graph.final_state[..]));
		}
	}

	/// A forward graph holds the parameters alone and stops at the loss.
	#[test]
	fn a_forward_graph_ends_at_the_loss() {
		let config = config(Norm::Rms, false);
		let graph = Graph::build_transformer(config, 2, 5, None).unwrap();
		assert_well_formed(&graph);
		assert_eq!(graph.state.len(), config.tensors().len());
		assert!(graph.final_state.is_empty());
		assert_eq!(graph.schedule, None);
		let last = graph.nodes.last().unwrap();
		assert!(matches!(last.kind, OpKind::SoftmaxCrossEntropy(ClassifierShape { rows: 10, classes: 11 })));
		assert_eq!(last.outputs[0], graph.loss);
		assert_eq!(graph.batch_values.map(|id| graph.values[id].kind), [ValueKind::U32; 3]);
	}

	/// Shapes outside the model, an empty batch and a batch other than the training's are
	/// refused.
	#[test]
	fn a_batch_that_does_not_fit_is_refused() {
		let config = config(Norm::Layer, true);
		let context = Err(KernelError::InvalidHyperparameter { name: "context" });
		assert_eq!(Graph::build_transformer(config, 2, 0, None), context);
		assert_eq!(Graph::build_transformer(config, 2, 10, None), context);
		assert_eq!(Graph::build_transformer(config, 0, 9, None), Err(KernelError::EmptyDimension { dimension: "sequences" }));
		assert_eq!(
			Graph::build_transformer(config, 3, 9, Some(&training(4))),
			Err(KernelError::InvalidHyperparameter { name: "batch" })
		);
		let wide = TransformerConfig { width: 15, ..config };
		assert_eq!(Graph::build_transformer(wide, 2, 9, None), Err(KernelError::InvalidHyperparameter { name: "heads" }));
	}

	/// The referee bounds every operator of a transformer's step.
	#[test]
	fn the_referee_bounds_every_operator() {
		let graph = Graph::build_transformer(config(Norm::Layer, true), 2, 9, Some(&training(2))).unwrap();
		for operator in 0..graph.nodes.len() {
			let cost = crate::referee::piece_cost(&graph, operator, 1, 1).unwrap();
			assert!(cost.words > 0 && cost.hashes > 0, "operator {operator}");
		}
	}
}

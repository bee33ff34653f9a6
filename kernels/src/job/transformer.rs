//! A decoder-only transformer, a small GPT, trained on the reference kernels: its
//! configuration and the bounds it is held to, its parameters and their initialisation,
//! and one training step composed of the contract's operators.
//!
//! A step, an evaluation and a generated token each run the model's operator graph
//! ([`Graph::build_transformer`]), operator by operator through a backend
//! ([`GraphBuffers::run`]): the same graph a dispute names its operators in, the same
//! dispatch a job's trainer runs.
//!
//! # The model
//!
//! The input is `B` sequences of `T ≤ context` tokens, `R = B·T` rows in row-major order
//! (`r = s·T + t`); `w` is the width, `H` the heads, `d = w/H` a head's width, `m·w` the MLP's
//! hidden width. `E` is the token embedding `[vocab, w]`, `P` the position embedding
//! `[context, w]`.
//!
//! 1. `h = E[x] + P[t]`: two row gathers ([`crate::ops::gather`]) and an elementwise sum.
//! 2. Each block, pre-norm: `a = norm₁(h)`; `q = a·W_q + b_q`, `k = a·W_k + b_k`,
//!    `v = a·W_v + b_v` (`[R, w]`, each position's heads side by side), split into
//!    `[B·H, T, d]` blocks ([`crate::ops::heads`]); `Z = Q·Kᵀ` per block, `p` the causal
//!    softmax of `Z` at scale `rsqrt(d)` ([`crate::ops::attention`]), `O = p·V` per block,
//!    merged back to `[R, w]`; `h ← h + (O·W_o + b_o)`. Then `c = norm₂(h)`,
//!    `u = c·W_f + b_f` (`[R, m·w]`), `g = gelu(u)`, `h ← h + (g·W_p + b_p)`.
//! 3. `f = norm_f(h)`; the logits are `f·Eᵀ` when the embeddings are tied, else `f·W_head`
//!    (`[w, vocab]`, no bias).
//! 4. The loss is the mean softmax cross-entropy over all `R` rows, each row's target the
//!    next token ([`crate::ops::loss`]).
//!
//! Every operator is the contract's: matmuls and their per-block batched form round their
//! operands to 12 bits and fold 32-wide chunks; norms ([`crate::ops::norm`], `ε` =
//! [`NORM_EPSILON`]), softmaxes and reductions are chunked sums; the GELU is the tanh
//! approximation of [`crate::ops::activation`]; sums of two values are single `f32`
//! additions.
//!
//! # Backward
//!
//! The reverse of the forward, operator by operator. A value read by several operators sums
//! its gradients in graph order (the order its readers run in the forward pass), left to
//! right, one `f32` addition at a time: the residual stream's `h` takes its norm's gradient,
//! then the residual's; a block's normalised `a` takes `q`'s, then `k`'s, then `v`'s; a tied
//! `E` takes the gather's (a scatter-add in [`crate::ops::embedding`]'s pinned order), then
//! the head's.
//!
//! # Optimiser
//!
//! Global-norm clipping over the gradients in parameter order (when the run clips), then
//! AdamW at the rate its [`WarmupCosine`] gives the step, with weight decay on matrices only
//! (the embeddings, every projection and the head; never a gain or a bias), as GPT-2's
//! recipes do.
//!
//! # Parameters
//!
//! In order: `E`, `P`; then each block's norm₁ gain (and bias, for LayerNorm), `W_q`, `b_q`,
//! `W_k`, `b_k`, `W_v`, `b_v`, `W_o`, `b_o`, norm₂ gain (and bias), `W_f`, `b_f`, `W_p`, `b_p`;
//! then the final norm's gain (and bias); then `W_head` when the embeddings are not tied.
//! Matrices are `[inputs, outputs]`, row-major. Tensor `i` of a matrix kind is drawn from
//! N(0, 0.02) through Philox stream [`INIT_STREAM`]` + i` of the seed (the pinned Box–Muller
//! of [`crate::arith::rng`]); gains start at 1 and biases at 0.

use alloc::vec;
use alloc::vec::Vec;

use crate::arith::rng::RandomStream;
use crate::error::{check_len, element_count, KernelError};
pub use crate::job::model::transformer::{
	TensorSpec, TransformerConfig, TransformerTraining, INIT_DEVIATION, MAX_CONTEXT, MAX_HEAD_WIDTH, MAX_LAYERS,
	MAX_MLP_RATIO, MAX_VOCAB, MAX_WIDTH, NORM_EPSILON,
};
use crate::job::text::{batch_rows, sequence_count, windows_at};
use crate::job::trace::batch_indices;
use crate::exec::backend::Backend;
use crate::exec::cpu::CpuBackend;
use crate::exec::graph::GraphBuffers;
use crate::proof::graph::{Graph, Node, OpKind, ValueId};
use crate::ops::schedule::WarmupCosine;


/// Runs every operator of `graph`, a transformer's ([`Graph::build_transformer`]), as step
/// `step` on `backend`, from `state` (the graph's state tensors, in order) and the batch's
/// `rows` ([`batch_rows`]). Returns the buffers, which hold the state's tensors (updated
/// in place by a training graph) whether or not the run failed.
fn run_graph<B: Backend>(
	backend: &mut B,
	graph: &Graph,
	step: u32,
	state: Vec<B::Tensor>,
	rows: &[Vec<u32>; 3],
) -> Result<(GraphBuffers<B>, Result<(), B::Error>), B::Error> {
	let mut buffers = GraphBuffers::new(backend, graph, state)?;
	let result = (|| {
		for (&id, values) in graph.batch_values.iter().zip(rows) {
			let indices = backend.upload_indices(values)?;
			buffers.put_indices(graph, id, indices)?;
		}
		for id in 1..graph.nodes.len() {
			buffers.run(backend, graph, id, step)?;
		}
		Ok(())
	})();
	Ok((buffers, result))
}

/// A graph's first operator of kind `kind`.
fn node_of(graph: &Graph, kind: impl Fn(&OpKind) -> bool) -> Result<&Node, KernelError> {
	graph.nodes.iter().find(|node| kind(&node.kind)).ok_or(KernelError::MissingValue { id: graph.nodes.len() })
}

/// Value `position` of `values`.
fn value_at(values: &[ValueId], position: usize) -> Result<ValueId, KernelError> {
	values.get(position).copied().ok_or(KernelError::MissingValue { id: position })
}

/// The one-element tensor of value `id`'s first element.
fn scalar<B: Backend>(backend: &mut B, graph: &Graph, buffers: &GraphBuffers<B>, id: ValueId) -> Result<f32, B::Error> {
	Ok(backend.download(buffers.tensor(graph, id)?)?.first().copied().unwrap_or_default())
}

/// Runs the graph of `params` on `windows` (sequences of `positions + 1` tokens,
/// `positions ≤ context`) on the reference: the forward graph, or with `training` a whole
/// step from zero moments. Returns the graph and its buffers.
fn run_on_reference(
	config: TransformerConfig,
	params: &[Vec<f32>],
	windows: &[u32],
	positions: usize,
	training: Option<&TransformerTraining>,
) -> Result<(Graph, GraphBuffers<CpuBackend>), KernelError> {
	config.check_params(params.iter().map(Vec::len))?;
	if positions > config.context as usize {
		return Err(KernelError::InvalidHyperparameter { name: "context" });
	}
	let rows = batch_rows(windows, positions)?;
	let graph = Graph::build_transformer(config, windows.len() / (positions + 1), positions, training)?;
	let mut state = params.to_vec();
	if training.is_some() {
		state.extend(params.iter().chain(params).map(|tensor| vec![0.0f32; tensor.len()]));
	}
	let (buffers, result) = run_graph(&mut CpuBackend, &graph, 0, state, &rows)?;
	result?;
	Ok((graph, buffers))
}

/// The mean loss of `windows` (sequences of `positions + 1` tokens, `positions ≤ context`)
/// and every parameter's gradient: a training step's gradients before clipping, on the
/// reference.
pub fn loss_and_gradients(
	config: TransformerConfig,
	params: &[Vec<f32>],
	windows: &[u32],
	positions: usize,
) -> Result<(f32, Vec<Vec<f32>>), KernelError> {
	// A step that does not clip and does not move: its clipping node's inputs are the gradients.
	let schedule = WarmupCosine { peak: 0.0, floor: 0.0, warmup_steps: 0, total_steps: 1 };
	let batch = windows.len() / (positions + 1);
	let training = TransformerTraining { batch, schedule, beta1: 0.9, beta2: 0.95, epsilon: 1e-8, weight_decay: 0.0, clip_norm: None };
	let (graph, buffers) = run_on_reference(config, params, windows, positions, Some(&training))?;
	let loss = scalar(&mut CpuBackend, &graph, &buffers, graph.loss)?;
	let clip = node_of(&graph, |kind| matches!(kind, OpKind::ClipGradNorm(_)))?;
	let grads = clip.inputs.iter().map(|&id| buffers.tensor(&graph, id).cloned()).collect::<Result<_, _>>()?;
	Ok((loss, grads))
}

/// The mean loss of `windows`, forward only: what evaluation reports.
pub fn mean_loss(config: TransformerConfig, params: &[Vec<f32>], windows: &[u32], positions: usize) -> Result<f32, KernelError> {
	let (graph, buffers) = run_on_reference(config, params, windows, positions, None)?;
	scalar(&mut CpuBackend, &graph, &buffers, graph.loss)
}

/// The fraction of the positions of `windows` (sequences of `positions + 1` tokens,
/// `positions ≤ context`) whose most likely next token (the logits' first maximum) is the
/// target, forward only on the reference: the accuracy a learning proof reports.
pub fn next_token_accuracy(config: TransformerConfig, params: &[Vec<f32>], windows: &[u32], positions: usize) -> Result<f64, KernelError> {
	let (graph, buffers) = run_on_reference(config, params, windows, positions, None)?;
	let loss = node_of(&graph, |kind| matches!(kind, OpKind::SoftmaxCrossEntropy(_)))?;
	let logits = buffers.tensor(&graph, value_at(&loss.inputs, 0)?)?;
	let [_, targets, _] = batch_rows(windows, positions)?;
	let vocab = config.vocab as usize;
	let correct = logits
		.chunks_exact(vocab)
		.zip(&targets)
		.filter(|(row, &target)| {
			let best = row.iter().enumerate().fold(0, |best, (index, &value)| if value > row[best] { index } else { best });
			best == target as usize
		})
		.count();
	Ok(correct as f64 / targets.len().max(1) as f64)
}

/// A transformer's training state: parameters, AdamW's moments, and the steps taken.
/// `T` is where a tensor lives: host vectors (the reference's), or a backend's tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerState<T = Vec<f32>> {
	/// Parameters, in the module's order.
	pub params: Vec<T>,
	/// AdamW's first moments, one per parameter tensor.
	pub first_moments: Vec<T>,
	/// AdamW's second moments.
	pub second_moments: Vec<T>,
	/// Steps taken: the next step's schedule index.
	pub steps: u32,
}

/// What one step reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
	/// The batch's mean loss before the update.
	pub loss: f32,
	/// The global gradient norm before clipping.
	pub grad_norm: f32,
	/// The rate the step used.
	pub learning_rate: f32,
}

impl TransformerState {
	/// The state of a fresh run of seed `seed`: initial parameters, zero moments.
	pub fn new(config: TransformerConfig, seed: u64) -> Result<Self, KernelError> {
		let params = config.init(seed)?;
		let zeros: Vec<Vec<f32>> = params.iter().map(|tensor| vec![0.0f32; tensor.len()]).collect();
		Ok(Self { params, first_moments: zeros.clone(), second_moments: zeros, steps: 0 })
	}

	/// One training step on `windows` (sequences of `context + 1` tokens), on the reference.
	pub fn step(&mut self, config: TransformerConfig, training: &TransformerTraining, windows: &[u32]) -> Result<StepReport, KernelError> {
		self.step_on(&mut CpuBackend, config, training, windows)
	}

	/// This state on `backend`, uploaded.
	pub fn upload<B: Backend>(&self, backend: &mut B) -> Result<TransformerState<B::Tensor>, B::Error> {
		let mut upload = |tensors: &[Vec<f32>]| tensors.iter().map(|tensor| backend.upload(tensor)).collect::<Result<Vec<_>, _>>();
		Ok(TransformerState {
			params: upload(&self.params)?,
			first_moments: upload(&self.first_moments)?,
			second_moments: upload(&self.second_moments)?,
			steps: self.steps,
		})
	}
}

impl<T> TransformerState<T> {
	/// One training step on `windows` (sequences of `context + 1` tokens), every operator on
	/// `backend`, whose tensors this state's are: the same operators in the same order on
	/// every backend, so a bit-exact one reproduces the reference's state.
	///
	/// `windows` must hold `training.batch` windows. Without clipping, the norm is taken by
	/// clipping to `f32::MAX`, which never scales.
	pub fn step_on<B: Backend<Tensor = T>>(
		&mut self,
		backend: &mut B,
		config: TransformerConfig,
		training: &TransformerTraining,
		windows: &[u32],
	) -> Result<StepReport, B::Error> {
		let schedule = training.schedule.validated()?;
		let context = config.context as usize;
		// A step trains exactly its batch: `batch` windows of `context + 1` tokens.
		check_len("windows", windows.len(), element_count(&[training.batch, context + 1])?)?;
		let update = self.steps.checked_add(1).ok_or(KernelError::InvalidHyperparameter { name: "step" })?;
		let graph = Graph::build_transformer(config, training.batch, context, Some(training))?;
		let rows = batch_rows(windows, context)?;
		for tensors in [&self.params, &self.first_moments, &self.second_moments] {
			config.check_params(tensors.iter().map(|tensor| backend.tensor_len(tensor)))?;
		}
		let params = core::mem::take(&mut self.params);
		let state: Vec<T> = params.into_iter().chain(core::mem::take(&mut self.first_moments)).chain(core::mem::take(&mut self.second_moments)).collect();
		let (mut buffers, result) = run_graph(backend, &graph, self.steps, state, &rows)?;
		// The state's buffers hold the state, updated in place, even after a failure.
		let mut state = Vec::with_capacity(graph.state.len());
		for &id in &graph.state {
			state.push(buffers.take(&graph, id)?);
		}
		let count = config.tensors().len();
		self.second_moments = state.split_off(2 * count);
		self.first_moments = state.split_off(count);
		self.params = state;
		result?;
		self.steps = update;
		let learning_rate = schedule.rate(self.steps - 1);
		let norm = value_at(&node_of(&graph, |kind| matches!(kind, OpKind::ClipGradNorm(_)))?.outputs, count)?;
		Ok(StepReport { loss: scalar(backend, &graph, &buffers, graph.loss)?, grad_norm: scalar(backend, &graph, &buffers, norm)?, learning_rate })
	}

	/// This state downloaded from `backend` to host vectors.
	pub fn download<B: Backend<Tensor = T>>(&self, backend: &mut B) -> Result<TransformerState, B::Error> {
		let mut download = |tensors: &[T]| tensors.iter().map(|tensor| backend.download(tensor)).collect::<Result<Vec<_>, _>>();
		Ok(TransformerState {
			params: download(&self.params)?,
			first_moments: download(&self.first_moments)?,
			second_moments: download(&self.second_moments)?,
			steps: self.steps,
		})
	}
}

/// The windows of step `step`'s batch from a training stream: `batch` sequences of context
/// `context` (each `context + 1` tokens), drawn by index in the epoch order every job uses
/// ([`crate::job::trace::batch_indices`]).
pub fn batch_windows(stream: &[u32], context: usize, batch: usize, seed: u64, step: u32) -> Result<Vec<u32>, KernelError> {
	let count = sequence_count(stream.len(), context);
	windows_at(stream, context, &batch_indices(0..count, batch, seed, step)?)
}


/// Continues `prompt` by `count` tokens, each drawn from the model's distribution over the
/// last `context` tokens at temperature 1 with uniform draw `i` of Philox stream `stream` of
/// `seed` (the pinned inverse of the softmax's running sum), or the most likely token when
/// `greedy`.
pub fn generate(
	config: TransformerConfig,
	params: &[Vec<f32>],
	prompt: &[u32],
	count: usize,
	greedy: bool,
	seed: u64,
) -> Result<Vec<u32>, KernelError> {
	if prompt.is_empty() {
		return Err(KernelError::EmptyDimension { dimension: "prompt" });
	}
	config.check_params(params.iter().map(Vec::len))?;
	let draws = RandomStream::new(seed, 0);
	let vocab = config.vocab as usize;
	let mut tokens = prompt.to_vec();
	let mut probs = vec![0.0f32; vocab];
	for index in 0..count {
		let window = &tokens[tokens.len().saturating_sub(config.context as usize)..];
		// One sequence whose last target is a placeholder: only the logits are read.
		let mut sequence = window.to_vec();
		sequence.push(0);
		let (graph, buffers) = run_on_reference(config, params, &sequence, window.len(), None)?;
		let logits = buffers.tensor(&graph, value_at(&node_of(&graph, |kind| matches!(kind, OpKind::SoftmaxCrossEntropy(_)))?.inputs, 0)?)?;
		crate::ops::attention::softmax_row(&logits[logits.len() - vocab..], 1.0, &mut probs);
		let next = if greedy {
			// The first of the most likely tokens.
			(0..vocab).fold(0, |best, token| if probs[token] > probs[best] { token } else { best })
		} else {
			let draw = draws.uniform(index as u64);
			let mut running = 0.0f32;
			probs.iter().position(|&p| {
				running += p;
				draw < running
			})
			.unwrap_or(vocab - 1)
		};
		tokens.push(next as u32);
	}
	Ok(tokens.split_off(prompt.len()))
}

#[cfg(test)]
mod tests;

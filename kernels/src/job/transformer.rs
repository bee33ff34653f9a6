//! A decoder-only transformer, a small GPT, trained on the reference kernels: its
//! configuration and the bounds it is held to, its parameters and their initialisation,
//! and one training step composed of the contract's operators.
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

use crate::arith::math::rsqrt;
use crate::arith::rng::RandomStream;
use crate::error::{check_len, element_count, KernelError};
use crate::job::model::INIT_STREAM;
use crate::job::text::{sequence, sequence_count};
use crate::job::trace::batch_indices;
use crate::exec::backend::Backend;
use crate::exec::cpu::CpuBackend;
use crate::ops::activation::Activation;
use crate::ops::attention::CausalShape;
use crate::ops::bias::BiasLayout;
use crate::ops::contraction::{MatmulLayout, MatmulShape};
use crate::ops::heads::HeadsShape;
use crate::ops::loss::ClassifierShape;
use crate::ops::norm::{Norm, NormShape};
use crate::ops::optim::AdamW;
use crate::ops::schedule::WarmupCosine;

/// The largest vocabulary: GPT-2's 50,257 tokens fit, and a loss row is split into spans.
pub const MAX_VOCAB: u32 = 65_536;
/// The longest context.
pub const MAX_CONTEXT: u32 = 1024;
/// The most blocks.
pub const MAX_LAYERS: u32 = 48;
/// The widest residual stream (GPT-2 small is 768 wide).
pub const MAX_WIDTH: u32 = 2048;
/// The widest head.
pub const MAX_HEAD_WIDTH: u32 = 256;
/// The largest MLP expansion.
pub const MAX_MLP_RATIO: u32 = 8;
/// The `ε` of every normalisation: PyTorch's default for `LayerNorm`, as an `f32`.
pub const NORM_EPSILON: f32 = 1e-5;
/// The deviation of the matrices' initial N(0, σ) draws.
pub const INIT_DEVIATION: f32 = 0.02;

const PLAIN: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: false };
const RHS_TRANSPOSED: MatmulLayout = MatmulLayout { lhs_transposed: false, rhs_transposed: true };
const LHS_TRANSPOSED: MatmulLayout = MatmulLayout { lhs_transposed: true, rhs_transposed: false };

/// A decoder-only transformer: the chain's `ModelArch::Transformer`, field for field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransformerConfig {
	/// Tokens in the vocabulary: the classes the head predicts.
	pub vocab: u32,
	/// The most positions a sequence has: the position embedding's rows.
	pub context: u32,
	/// Blocks.
	pub layers: u32,
	/// Attention heads per block.
	pub heads: u32,
	/// Width of the residual stream; a multiple of `heads`.
	pub width: u32,
	/// The MLP's hidden width over `width`.
	pub mlp_ratio: u32,
	/// The normalisation of every block and of the final norm.
	pub norm: Norm,
	/// Whether the head is the token embedding, transposed.
	pub tied_embeddings: bool,
}

/// Where a block's tensors are in the parameter list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockIndices {
	attention_norm: NormIndices,
	query: usize,
	key: usize,
	value: usize,
	output: usize,
	mlp_norm: NormIndices,
	up: usize,
	down: usize,
}

/// A normalisation's gain, and its bias for LayerNorm. A linear layer's bias follows its
/// weight, at `weight + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NormIndices {
	gain: usize,
	bias: Option<usize>,
}

/// One parameter tensor: its place in the model and whether AdamW decays it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
	/// Elements.
	pub len: usize,
	/// Whether it is a matrix (decayed) rather than a gain or a bias.
	pub matrix: bool,
}

impl TransformerConfig {
	/// The configuration if every dimension is within the bounds above: a vocabulary of at
	/// least 2, every extent non-zero, a width that `heads` divides, and a head no wider
	/// than [`MAX_HEAD_WIDTH`].
	pub fn validated(self) -> Result<Self, KernelError> {
		let within = |name: &'static str, value: u32, low: u32, high: u32| {
			if (low..=high).contains(&value) {
				Ok(())
			} else {
				Err(KernelError::InvalidHyperparameter { name })
			}
		};
		within("vocab", self.vocab, 2, MAX_VOCAB)?;
		within("context", self.context, 1, MAX_CONTEXT)?;
		within("layers", self.layers, 1, MAX_LAYERS)?;
		within("width", self.width, 1, MAX_WIDTH)?;
		within("heads", self.heads, 1, self.width)?;
		within("mlp_ratio", self.mlp_ratio, 1, MAX_MLP_RATIO)?;
		if self.width % self.heads != 0 || self.width / self.heads > MAX_HEAD_WIDTH {
			return Err(KernelError::InvalidHyperparameter { name: "heads" });
		}
		Ok(self)
	}

	fn width(&self) -> usize {
		self.width as usize
	}

	fn hidden(&self) -> usize {
		(self.width * self.mlp_ratio) as usize
	}

	fn head_width(&self) -> usize {
		(self.width / self.heads) as usize
	}

	fn norm_tensors(&self) -> usize {
		match self.norm {
			Norm::Layer => 2,
			Norm::Rms => 1,
		}
	}

	fn tensors_per_block(&self) -> usize {
		2 * self.norm_tensors() + 12
	}

	fn norm_at(&self, first: usize) -> NormIndices {
		NormIndices { gain: first, bias: (self.norm == Norm::Layer).then_some(first + 1) }
	}

	fn block(&self, layer: usize) -> BlockIndices {
		let first = 2 + layer * self.tensors_per_block();
		let attention = first + self.norm_tensors();
		let mlp_norm = attention + 8;
		let up = mlp_norm + self.norm_tensors();
		BlockIndices {
			attention_norm: self.norm_at(first),
			query: attention,
			key: attention + 2,
			value: attention + 4,
			output: attention + 6,
			mlp_norm: self.norm_at(mlp_norm),
			up,
			down: up + 2,
		}
	}

	fn final_norm(&self) -> NormIndices {
		self.norm_at(2 + self.layers as usize * self.tensors_per_block())
	}

	/// The head's index, when it is a tensor of its own.
	fn head(&self) -> Option<usize> {
		(!self.tied_embeddings).then(|| 2 + self.layers as usize * self.tensors_per_block() + self.norm_tensors())
	}

	/// Every parameter tensor, in the module's order.
	pub fn tensors(&self) -> Vec<TensorSpec> {
		let (w, hidden) = (self.width(), self.hidden());
		let matrix = |len| TensorSpec { len, matrix: true };
		let vector = |len| TensorSpec { len, matrix: false };
		let norm = |out: &mut Vec<TensorSpec>| {
			out.push(vector(w));
			if self.norm == Norm::Layer {
				out.push(vector(w));
			}
		};
		let mut out = vec![matrix(self.vocab as usize * w), matrix(self.context as usize * w)];
		for _ in 0..self.layers {
			norm(&mut out);
			for _ in 0..4 {
				out.extend([matrix(w * w), vector(w)]);
			}
			norm(&mut out);
			out.extend([matrix(w * hidden), vector(hidden), matrix(hidden * w), vector(w)]);
		}
		norm(&mut out);
		if !self.tied_embeddings {
			out.push(matrix(w * self.vocab as usize));
		}
		out
	}

	/// Parameters in all.
	pub fn parameter_count(&self) -> usize {
		self.tensors().iter().map(|tensor| tensor.len).sum()
	}

	/// The initial parameters of seed `seed` (see the module docs).
	pub fn init(&self, seed: u64) -> Result<Vec<Vec<f32>>, KernelError> {
		self.validated()?;
		let mut params = Vec::new();
		for (index, tensor) in self.tensors().iter().enumerate() {
			let mut values = vec![0.0f32; tensor.len];
			if tensor.matrix {
				RandomStream::new(seed, INIT_STREAM + index as u64).fill_normal(0.0, INIT_DEVIATION, &mut values);
			}
			params.push(values);
		}
		for layer in 0..self.layers as usize {
			let block = self.block(layer);
			for norm in [block.attention_norm, block.mlp_norm] {
				params[norm.gain].fill(1.0);
			}
		}
		params[self.final_norm().gain].fill(1.0);
		Ok(params)
	}

	/// Checks the parameters' lengths, in order, against the configuration.
	fn check_params(&self, lens: impl ExactSizeIterator<Item = usize>) -> Result<(), KernelError> {
		let tensors = self.validated()?.tensors();
		check_len("params", lens.len(), tensors.len())?;
		for (len, spec) in lens.zip(&tensors) {
			check_len("param", len, spec.len)?;
		}
		Ok(())
	}
}

/// A batch as the model reads it: `sequences` rows of `positions` input tokens and as many
/// targets.
#[derive(Clone, Copy, Debug)]
struct Rows {
	sequences: usize,
	positions: usize,
}

impl Rows {
	fn count(&self) -> usize {
		self.sequences * self.positions
	}
}

/// What a block's backward pass reads from its forward pass.
struct BlockTape<T> {
	input: T,
	attention_in: T,
	query: T,
	key: T,
	value: T,
	probs: T,
	attended: T,
	middle: T,
	mlp_in: T,
	up: T,
	activated: T,
}

/// What the backward pass reads from the forward pass.
struct Tape<B: Backend> {
	tokens: B::Indices,
	positions: B::Indices,
	blocks: Vec<BlockTape<B::Tensor>>,
	last: B::Tensor,
	normalised: B::Tensor,
}

/// `x·W + b` for `x` `[rows, inputs]` and `W` `[inputs, outputs]`.
fn linear<B: Backend>(
	backend: &mut B,
	x: &B::Tensor,
	rows: usize,
	weight: &B::Tensor,
	bias: Option<&B::Tensor>,
	outputs: usize,
) -> Result<B::Tensor, B::Error> {
	let inputs = backend.tensor_len(x) / rows;
	let mut out = backend.zeros(element_count(&[rows, outputs])?)?;
	backend.matmul(MatmulShape { m: rows, k: inputs, n: outputs }, PLAIN, x, weight, &mut out)?;
	if let Some(bias) = bias {
		backend.bias_add(BiasLayout::dense(rows, outputs), &mut out, bias)?;
	}
	Ok(out)
}

/// The gradients of [`linear`]: writes `dW` and `db` (when there is a bias) and returns `dx`.
fn linear_backward<B: Backend>(
	backend: &mut B,
	x: &B::Tensor,
	rows: usize,
	weight: &B::Tensor,
	out_grad: &B::Tensor,
	weight_grad: &mut B::Tensor,
	bias_grad_out: Option<&mut B::Tensor>,
) -> Result<B::Tensor, B::Error> {
	let (inputs, outputs) = (backend.tensor_len(x) / rows, backend.tensor_len(out_grad) / rows);
	let shape = MatmulShape { m: rows, k: inputs, n: outputs };
	backend.contract(shape.rhs_grad_contraction(), x, out_grad, weight_grad)?;
	if let Some(bias_grad_out) = bias_grad_out {
		backend.bias_grad(BiasLayout::dense(rows, outputs), out_grad, bias_grad_out)?;
	}
	let mut x_grad = backend.zeros(element_count(&[rows, inputs])?)?;
	backend.contract(shape.lhs_grad_contraction(), out_grad, weight, &mut x_grad)?;
	Ok(x_grad)
}

/// Two distinct tensors of `tensors`, mutably (`first < second`).
fn pair_mut<T>(tensors: &mut [T], first: usize, second: usize) -> (&mut T, &mut T) {
	let (low, high) = tensors.split_at_mut(second);
	(&mut low[first], &mut high[0])
}

struct Model<'a, B: Backend> {
	config: TransformerConfig,
	params: &'a [B::Tensor],
	rows: Rows,
}

impl<B: Backend> Model<'_, B> {
	fn classifier(&self) -> ClassifierShape {
		ClassifierShape { rows: self.rows.count(), classes: self.config.vocab as usize }
	}

	fn norm_shape(&self) -> NormShape {
		NormShape { norm: self.config.norm, rows: self.rows.count(), width: self.config.width(), epsilon: NORM_EPSILON }
	}

	fn heads_shape(&self) -> HeadsShape {
		HeadsShape {
			sequences: self.rows.sequences,
			positions: self.rows.positions,
			heads: self.config.heads as usize,
			head_width: self.config.head_width(),
		}
	}

	fn causal_shape(&self) -> CausalShape {
		CausalShape {
			blocks: self.rows.sequences * self.config.heads as usize,
			positions: self.rows.positions,
			scale: rsqrt(self.config.head_width() as f32),
		}
	}

	fn normalise(&self, backend: &mut B, norm: NormIndices, x: &B::Tensor) -> Result<B::Tensor, B::Error> {
		let mut out = backend.zeros(backend.tensor_len(x))?;
		let bias = norm.bias.map(|bias| &self.params[bias]);
		backend.norm(self.norm_shape(), x, &self.params[norm.gain], bias, &mut out)?;
		Ok(out)
	}

	/// `x·W + b` for the linear layer whose weight is tensor `weight`.
	fn project(&self, backend: &mut B, x: &B::Tensor, weight: usize, outputs: usize) -> Result<B::Tensor, B::Error> {
		linear(backend, x, self.rows.count(), &self.params[weight], Some(&self.params[weight + 1]), outputs)
	}

	/// Heads side by side to blocks.
	fn split(&self, backend: &mut B, side_by_side: &B::Tensor) -> Result<B::Tensor, B::Error> {
		let mut blocked = backend.zeros(backend.tensor_len(side_by_side))?;
		backend.split_heads(self.heads_shape(), side_by_side, &mut blocked)?;
		Ok(blocked)
	}

	/// Blocks back to heads side by side.
	fn merge(&self, backend: &mut B, blocked: &B::Tensor) -> Result<B::Tensor, B::Error> {
		let mut side_by_side = backend.zeros(backend.tensor_len(blocked))?;
		backend.merge_heads(self.heads_shape(), blocked, &mut side_by_side)?;
		Ok(side_by_side)
	}

	/// `blocks` matmuls of `[m, k]·[k, n]` in `layout`.
	fn batched(&self, backend: &mut B, shape: MatmulShape, layout: MatmulLayout, lhs: &B::Tensor, rhs: &B::Tensor) -> Result<B::Tensor, B::Error> {
		let blocks = self.causal_shape().blocks;
		let mut out = backend.zeros(element_count(&[blocks, shape.m, shape.n])?)?;
		backend.batched_matmul(blocks, shape, layout, lhs, rhs, &mut out)?;
		Ok(out)
	}

	fn block_forward(&self, backend: &mut B, layer: usize, input: B::Tensor) -> Result<BlockTape<B::Tensor>, B::Error> {
		let (w, t, d) = (self.config.width(), self.rows.positions, self.config.head_width());
		let block = self.config.block(layer);
		let attention_in = self.normalise(backend, block.attention_norm, &input)?;
		let projected = self.project(backend, &attention_in, block.query, w)?;
		let query = self.split(backend, &projected)?;
		let projected = self.project(backend, &attention_in, block.key, w)?;
		let key = self.split(backend, &projected)?;
		let projected = self.project(backend, &attention_in, block.value, w)?;
		let value = self.split(backend, &projected)?;
		let scores = self.batched(backend, MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, &query, &key)?;
		let mut probs = backend.zeros(backend.tensor_len(&scores))?;
		backend.causal_softmax(self.causal_shape(), &scores, &mut probs)?;
		let blocked = self.batched(backend, MatmulShape { m: t, k: t, n: d }, PLAIN, &probs, &value)?;
		let attended = self.merge(backend, &blocked)?;
		let mut middle = self.project(backend, &attended, block.output, w)?;
		backend.add_assign(&mut middle, &input)?;
		let mlp_in = self.normalise(backend, block.mlp_norm, &middle)?;
		let up = self.project(backend, &mlp_in, block.up, self.config.hidden())?;
		let mut activated = backend.zeros(backend.tensor_len(&up))?;
		backend.activation(Activation::GeluTanh, &up, &mut activated)?;
		Ok(BlockTape { input, attention_in, query, key, value, probs, attended, middle, mlp_in, up, activated })
	}

	/// The residual stream after block `tape`.
	fn block_output(&self, backend: &mut B, layer: usize, tape: &BlockTape<B::Tensor>) -> Result<B::Tensor, B::Error> {
		let mut out = self.project(backend, &tape.activated, self.config.block(layer).down, self.config.width())?;
		// `middle + down`, as the forward adds them: the sum is commutative bit for bit.
		backend.add_assign(&mut out, &tape.middle)?;
		Ok(out)
	}

	/// The logits of `tokens` (`rows` of them), and what the backward pass needs.
	fn forward(&self, backend: &mut B, tokens: &[u32]) -> Result<(B::Tensor, Tape<B>), B::Error> {
		let (w, rows) = (self.config.width(), self.rows.count());
		check_len("tokens", tokens.len(), rows)?;
		let positions: Vec<u32> = (0..rows).map(|row| (row % self.rows.positions) as u32).collect();
		let (tokens, positions) = (backend.upload_indices(tokens)?, backend.upload_indices(&positions)?);
		let mut stream = backend.zeros(element_count(&[rows, w])?)?;
		backend.gather_rows(&self.params[0], w, &tokens, &mut stream)?;
		let mut placed = backend.zeros(element_count(&[rows, w])?)?;
		backend.gather_rows(&self.params[1], w, &positions, &mut placed)?;
		backend.add_assign(&mut stream, &placed)?;
		let mut blocks = Vec::with_capacity(self.config.layers as usize);
		for layer in 0..self.config.layers as usize {
			let tape = self.block_forward(backend, layer, stream)?;
			stream = self.block_output(backend, layer, &tape)?;
			blocks.push(tape);
		}
		let normalised = self.normalise(backend, self.config.final_norm(), &stream)?;
		let vocab = self.config.vocab as usize;
		let logits = match self.config.head() {
			Some(head) => linear(backend, &normalised, rows, &self.params[head], None, vocab)?,
			None => {
				let mut logits = backend.zeros(element_count(&[rows, vocab])?)?;
				backend.matmul(MatmulShape { m: rows, k: w, n: vocab }, RHS_TRANSPOSED, &normalised, &self.params[0], &mut logits)?;
				logits
			},
		};
		Ok((logits, Tape { tokens, positions, blocks, last: stream, normalised }))
	}

	/// A normalisation's backward pass into `grads`; returns its input's gradient.
	fn normalise_backward(
		&self,
		backend: &mut B,
		norm: NormIndices,
		x: &B::Tensor,
		dy: &B::Tensor,
		grads: &mut [B::Tensor],
	) -> Result<B::Tensor, B::Error> {
		let mut x_grad = backend.zeros(backend.tensor_len(x))?;
		let mut gain_grad = backend.zeros(self.config.width())?;
		let shape = self.norm_shape();
		let gain = &self.params[norm.gain];
		match norm.bias {
			Some(bias) => {
				let mut bias_grad_out = backend.zeros(self.config.width())?;
				backend.norm_backward(shape, x, gain, dy, &mut x_grad, &mut gain_grad, Some(&mut bias_grad_out))?;
				grads[bias] = bias_grad_out;
			},
			None => backend.norm_backward(shape, x, gain, dy, &mut x_grad, &mut gain_grad, None)?,
		}
		grads[norm.gain] = gain_grad;
		Ok(x_grad)
	}

	/// A linear layer's backward pass into `grads`; returns its input's gradient.
	fn project_backward(
		&self,
		backend: &mut B,
		x: &B::Tensor,
		weight: usize,
		out_grad: &B::Tensor,
		grads: &mut [B::Tensor],
	) -> Result<B::Tensor, B::Error> {
		let (weight_grad, bias_grad_out) = pair_mut(grads, weight, weight + 1);
		linear_backward(backend, x, self.rows.count(), &self.params[weight], out_grad, weight_grad, Some(bias_grad_out))
	}

	/// Block `layer`'s backward pass from the gradient of its output; returns its input's.
	fn block_backward(
		&self,
		backend: &mut B,
		layer: usize,
		tape: &BlockTape<B::Tensor>,
		out_grad: B::Tensor,
		grads: &mut [B::Tensor],
	) -> Result<B::Tensor, B::Error> {
		let (t, d) = (self.rows.positions, self.config.head_width());
		let block = self.config.block(layer);
		let activated_grad = self.project_backward(backend, &tape.activated, block.down, &out_grad, grads)?;
		let mut up_grad = backend.zeros(backend.tensor_len(&tape.up))?;
		backend.activation_grad(Activation::GeluTanh, &tape.up, &activated_grad, &mut up_grad)?;
		let mlp_in_grad = self.project_backward(backend, &tape.mlp_in, block.up, &up_grad, grads)?;
		// `middle`'s readers in graph order: norm₂, then the residual.
		let mut middle_grad = self.normalise_backward(backend, block.mlp_norm, &tape.middle, &mlp_in_grad, grads)?;
		backend.add_assign(&mut middle_grad, &out_grad)?;

		let projected_grad = self.project_backward(backend, &tape.attended, block.output, &middle_grad, grads)?;
		let attended_grad = self.split(backend, &projected_grad)?;
		let probs_grad = self.batched(backend, MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, &attended_grad, &tape.value)?;
		let value_grad = self.batched(backend, MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, &tape.probs, &attended_grad)?;
		let mut scores_grad = backend.zeros(backend.tensor_len(&tape.probs))?;
		backend.causal_softmax_grad(self.causal_shape(), &tape.probs, &probs_grad, &mut scores_grad)?;
		let query_grad = self.batched(backend, MatmulShape { m: t, k: t, n: d }, PLAIN, &scores_grad, &tape.key)?;
		let key_grad = self.batched(backend, MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, &scores_grad, &tape.query)?;
		// `attention_in`'s readers in graph order: the query, key and value projections.
		let merged = self.merge(backend, &query_grad)?;
		let mut attention_in_grad = self.project_backward(backend, &tape.attention_in, block.query, &merged, grads)?;
		let merged = self.merge(backend, &key_grad)?;
		let key_in_grad = self.project_backward(backend, &tape.attention_in, block.key, &merged, grads)?;
		backend.add_assign(&mut attention_in_grad, &key_in_grad)?;
		let merged = self.merge(backend, &value_grad)?;
		let value_in_grad = self.project_backward(backend, &tape.attention_in, block.value, &merged, grads)?;
		backend.add_assign(&mut attention_in_grad, &value_in_grad)?;
		// `input`'s readers in graph order: norm₁, then the residual.
		let mut input_grad = self.normalise_backward(backend, block.attention_norm, &tape.input, &attention_in_grad, grads)?;
		backend.add_assign(&mut input_grad, &middle_grad)?;
		Ok(input_grad)
	}

	/// Every parameter's gradient from the logits' gradient.
	fn backward(&self, backend: &mut B, tape: &Tape<B>, logits_grad: &B::Tensor) -> Result<Vec<B::Tensor>, B::Error> {
		let (w, rows, vocab) = (self.config.width(), self.rows.count(), self.config.vocab as usize);
		let mut grads = Vec::with_capacity(self.params.len());
		for tensor in self.params {
			grads.push(backend.zeros(backend.tensor_len(tensor))?);
		}
		let (normalised_grad, head_grad) = match self.config.head() {
			Some(head) => {
				let weight_grad = &mut grads[head];
				(linear_backward(backend, &tape.normalised, rows, &self.params[head], logits_grad, weight_grad, None)?, None)
			},
			None => {
				let mut normalised_grad = backend.zeros(element_count(&[rows, w])?)?;
				backend.matmul(MatmulShape { m: rows, k: vocab, n: w }, PLAIN, logits_grad, &self.params[0], &mut normalised_grad)?;
				let mut head_grad = backend.zeros(element_count(&[vocab, w])?)?;
				backend.matmul(MatmulShape { m: vocab, k: rows, n: w }, LHS_TRANSPOSED, logits_grad, &tape.normalised, &mut head_grad)?;
				(normalised_grad, Some(head_grad))
			},
		};
		let mut stream_grad = self.normalise_backward(backend, self.config.final_norm(), &tape.last, &normalised_grad, &mut grads)?;
		for (layer, block) in tape.blocks.iter().enumerate().rev() {
			stream_grad = self.block_backward(backend, layer, block, stream_grad, &mut grads)?;
		}
		backend.scatter_add_rows(&stream_grad, w, &tape.tokens, vocab, &mut grads[0])?;
		backend.scatter_add_rows(&stream_grad, w, &tape.positions, self.config.context as usize, &mut grads[1])?;
		if let Some(head_grad) = head_grad {
			// A tied `E`'s readers in graph order: the gather, then the head.
			backend.add_assign(&mut grads[0], &head_grad)?;
		}
		Ok(grads)
	}
}

/// Splits `sequences` windows of `positions + 1` tokens into inputs and targets.
fn inputs_and_targets(windows: &[u32], positions: usize) -> Result<(Vec<u32>, Vec<u32>, Rows), KernelError> {
	let window = positions + 1;
	if positions == 0 || windows.is_empty() || windows.len() % window != 0 {
		let expected = (windows.len() / window).max(1) * window;
		return Err(KernelError::LengthMismatch { operand: "sequences", expected, actual: windows.len() });
	}
	let rows = Rows { sequences: windows.len() / window, positions };
	let (mut inputs, mut targets) = (Vec::with_capacity(rows.count()), Vec::with_capacity(rows.count()));
	for tokens in windows.chunks_exact(window) {
		inputs.extend_from_slice(&tokens[..positions]);
		targets.extend_from_slice(&tokens[1..]);
	}
	Ok((inputs, targets, rows))
}

/// The one-element tensor `tensor`'s value.
fn scalar<B: Backend>(backend: &mut B, tensor: &B::Tensor) -> Result<f32, B::Error> {
	Ok(backend.download(tensor)?.first().copied().unwrap_or_default())
}

/// The mean loss of `windows` (sequences of `positions + 1` tokens, `positions ≤ context`)
/// and every parameter's gradient.
pub fn loss_and_gradients(
	config: TransformerConfig,
	params: &[Vec<f32>],
	windows: &[u32],
	positions: usize,
) -> Result<(f32, Vec<Vec<f32>>), KernelError> {
	let backend = &mut CpuBackend;
	let (loss, grads) = loss_and_gradients_on(backend, config, params, windows, positions)?;
	Ok((scalar(backend, &loss)?, grads))
}

/// [`loss_and_gradients`] on `backend`: the loss in a one-element tensor, and the gradients.
fn loss_and_gradients_on<B: Backend>(
	backend: &mut B,
	config: TransformerConfig,
	params: &[B::Tensor],
	windows: &[u32],
	positions: usize,
) -> Result<(B::Tensor, Vec<B::Tensor>), B::Error> {
	let (model, logits, tape, targets) = run_forward(backend, config, params, windows, positions)?;
	let mut loss = backend.zeros(1)?;
	let mut logits_grad = backend.zeros(backend.tensor_len(&logits))?;
	backend.softmax_cross_entropy(model.classifier(), &logits, &targets, &mut loss, &mut logits_grad)?;
	let grads = model.backward(backend, &tape, &logits_grad)?;
	Ok((loss, grads))
}

/// The mean loss of `windows`, forward only: what evaluation reports.
pub fn mean_loss(config: TransformerConfig, params: &[Vec<f32>], windows: &[u32], positions: usize) -> Result<f32, KernelError> {
	let backend = &mut CpuBackend;
	let (model, logits, _, targets) = run_forward(backend, config, params, windows, positions)?;
	let (mut loss, mut logits_grad) = (vec![0.0f32; 1], vec![0.0f32; logits.len()]);
	backend.softmax_cross_entropy(model.classifier(), &logits, &targets, &mut loss, &mut logits_grad)?;
	scalar(backend, &loss)
}

fn run_forward<'a, B: Backend>(
	backend: &mut B,
	config: TransformerConfig,
	params: &'a [B::Tensor],
	windows: &[u32],
	positions: usize,
) -> Result<(Model<'a, B>, B::Tensor, Tape<B>, B::Indices), B::Error> {
	config.check_params(params.iter().map(|tensor| backend.tensor_len(tensor)))?;
	if positions > config.context as usize {
		return Err(KernelError::InvalidHyperparameter { name: "context" }.into());
	}
	let (inputs, targets, rows) = inputs_and_targets(windows, positions)?;
	let model = Model { config, params, rows };
	let (logits, tape) = model.forward(backend, &inputs)?;
	let targets = backend.upload_indices(&targets)?;
	Ok((model, logits, tape, targets))
}

/// How a transformer is trained: AdamW's constants, the rate schedule, clipping, the batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerTraining {
	/// Sequences per step.
	pub batch: usize,
	/// The rate of every step.
	pub schedule: WarmupCosine,
	/// AdamW's β₁.
	pub beta1: f32,
	/// AdamW's β₂.
	pub beta2: f32,
	/// AdamW's ε.
	pub epsilon: f32,
	/// Decoupled weight decay, on matrices only.
	pub weight_decay: f32,
	/// The global gradient norm clipped to, if any.
	pub clip_norm: Option<f32>,
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
		// A step trains exactly its batch: `batch` windows of `context + 1` tokens.
		check_len("windows", windows.len(), element_count(&[training.batch, config.context as usize + 1])?)?;
		let (loss, mut grads) = loss_and_gradients_on(backend, config, &self.params, windows, config.context as usize)?;
		let mut norm = backend.zeros(1)?;
		let mut views: Vec<&mut T> = grads.iter_mut().collect();
		backend.clip_grad_norm(training.clip_norm.unwrap_or(f32::MAX), &mut views, &mut norm)?;
		let learning_rate = schedule.rate(self.steps);
		let update = self.steps.checked_add(1).ok_or(KernelError::InvalidHyperparameter { name: "step" })?;
		let adamw = |weight_decay| AdamW { learning_rate, beta1: training.beta1, beta2: training.beta2, epsilon: training.epsilon, weight_decay };
		let decayed = adamw(training.weight_decay).scalars(update)?;
		let undecayed = adamw(0.0).scalars(update)?;
		let tensors = (self.params.iter_mut()).zip(&grads).zip(self.first_moments.iter_mut()).zip(self.second_moments.iter_mut());
		for ((((param, grad), first), second), spec) in tensors.zip(config.tensors()) {
			backend.adamw(if spec.matrix { &decayed } else { &undecayed }, param, grad, first, second)?;
		}
		self.steps = update;
		Ok(StepReport { loss: scalar(backend, &loss)?, grad_norm: scalar(backend, &norm)?, learning_rate })
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
	let mut windows = Vec::with_capacity(batch * (context + 1));
	for index in batch_indices(0..count, batch, seed, step)? {
		let tokens = sequence(stream, context, index as usize).ok_or(KernelError::IndexOutOfRange { index, rows: count })?;
		windows.extend_from_slice(tokens);
	}
	Ok(windows)
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
		let model: Model<'_, CpuBackend> = Model { config, params, rows: Rows { sequences: 1, positions: window.len() } };
		let (logits, _) = model.forward(&mut CpuBackend, window)?;
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

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
use crate::ops::activation::{activation_backward, activation_forward, Activation};
use crate::ops::attention::{causal_softmax, causal_softmax_grad, CausalShape};
use crate::ops::bias::{bias_add, bias_grad, BiasLayout};
use crate::ops::contraction::{MatmulLayout, MatmulShape};
use crate::ops::embedding::scatter_add_rows;
use crate::ops::gather::gather_rows;
use crate::ops::heads::{batched_matmul, merge_heads, split_heads, HeadsShape};
use crate::ops::loss::{softmax_cross_entropy, ClassifierShape};
use crate::ops::matmul::{matmul, matmul_lhs_grad, matmul_rhs_grad};
use crate::ops::norm::{norm_backward, norm_forward, Norm, NormGrads, NormShape};
use crate::ops::optim::{adamw_step, clip_grad_norm, AdamW};
use crate::ops::residual::add_assign;
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

	/// Checks `params` against the configuration.
	fn check_params(&self, params: &[Vec<f32>]) -> Result<(), KernelError> {
		let tensors = self.validated()?.tensors();
		check_len("params", params.len(), tensors.len())?;
		for (tensor, spec) in params.iter().zip(&tensors) {
			check_len("param", tensor.len(), spec.len)?;
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
struct BlockTape {
	input: Vec<f32>,
	attention_in: Vec<f32>,
	query: Vec<f32>,
	key: Vec<f32>,
	value: Vec<f32>,
	probs: Vec<f32>,
	attended: Vec<f32>,
	middle: Vec<f32>,
	mlp_in: Vec<f32>,
	up: Vec<f32>,
	activated: Vec<f32>,
}

/// What the backward pass reads from the forward pass.
struct Tape {
	tokens: Vec<u32>,
	positions: Vec<u32>,
	blocks: Vec<BlockTape>,
	last: Vec<f32>,
	normalised: Vec<f32>,
}

/// `x·W + b` for `x` `[rows, inputs]` and `W` `[inputs, outputs]`.
fn linear(x: &[f32], rows: usize, weight: &[f32], bias: Option<&[f32]>, outputs: usize) -> Result<Vec<f32>, KernelError> {
	let inputs = x.len() / rows;
	let mut out = vec![0.0f32; element_count(&[rows, outputs])?];
	matmul(MatmulShape { m: rows, k: inputs, n: outputs }, PLAIN, x, weight, &mut out)?;
	if let Some(bias) = bias {
		bias_add(BiasLayout::dense(rows, outputs), &mut out, bias)?;
	}
	Ok(out)
}

/// The gradients of [`linear`]: writes `dW` and `db` (when there is a bias) and returns `dx`.
fn linear_backward(
	x: &[f32],
	rows: usize,
	weight: &[f32],
	out_grad: &[f32],
	weight_grad: &mut [f32],
	bias_grad_out: Option<&mut [f32]>,
) -> Result<Vec<f32>, KernelError> {
	let (inputs, outputs) = (x.len() / rows, out_grad.len() / rows);
	let shape = MatmulShape { m: rows, k: inputs, n: outputs };
	matmul_rhs_grad(shape, x, out_grad, weight_grad)?;
	if let Some(bias_grad_out) = bias_grad_out {
		bias_grad(BiasLayout::dense(rows, outputs), out_grad, bias_grad_out)?;
	}
	let mut x_grad = vec![0.0f32; x.len()];
	matmul_lhs_grad(shape, out_grad, weight, &mut x_grad)?;
	Ok(x_grad)
}

/// Two distinct tensors of `tensors`, mutably.
fn pair_mut(tensors: &mut [Vec<f32>], first: usize, second: usize) -> (&mut [f32], &mut [f32]) {
	let (low, high) = tensors.split_at_mut(second);
	(&mut low[first], &mut high[0])
}

struct Model<'a> {
	config: TransformerConfig,
	params: &'a [Vec<f32>],
	rows: Rows,
}

impl Model<'_> {
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

	fn bias_of(&self, norm: NormIndices) -> &[f32] {
		norm.bias.map_or(&[][..], |bias| &self.params[bias][..])
	}

	fn normalise(&self, norm: NormIndices, x: &[f32]) -> Result<Vec<f32>, KernelError> {
		let mut out = vec![0.0f32; x.len()];
		norm_forward(self.norm_shape(), x, &self.params[norm.gain], self.bias_of(norm), &mut out)?;
		Ok(out)
	}

	/// `x·W + b` for the linear layer whose weight is tensor `weight`.
	fn project(&self, x: &[f32], weight: usize, outputs: usize) -> Result<Vec<f32>, KernelError> {
		linear(x, self.rows.count(), &self.params[weight], Some(&self.params[weight + 1]), outputs)
	}

	/// Heads side by side to blocks.
	fn split(&self, side_by_side: &[f32]) -> Result<Vec<f32>, KernelError> {
		let mut blocked = vec![0.0f32; side_by_side.len()];
		split_heads(self.heads_shape(), side_by_side, &mut blocked)?;
		Ok(blocked)
	}

	/// Blocks back to heads side by side.
	fn merge(&self, blocked: &[f32]) -> Result<Vec<f32>, KernelError> {
		let mut side_by_side = vec![0.0f32; blocked.len()];
		merge_heads(self.heads_shape(), blocked, &mut side_by_side)?;
		Ok(side_by_side)
	}

	/// `blocks` matmuls of `[m, k]·[k, n]` in `layout`.
	fn batched(&self, shape: MatmulShape, layout: MatmulLayout, lhs: &[f32], rhs: &[f32]) -> Result<Vec<f32>, KernelError> {
		let blocks = self.causal_shape().blocks;
		let mut out = vec![0.0f32; element_count(&[blocks, shape.m, shape.n])?];
		batched_matmul(blocks, shape, layout, lhs, rhs, &mut out)?;
		Ok(out)
	}

	fn block_forward(&self, layer: usize, input: Vec<f32>) -> Result<BlockTape, KernelError> {
		let (w, t, d) = (self.config.width(), self.rows.positions, self.config.head_width());
		let block = self.config.block(layer);
		let attention_in = self.normalise(block.attention_norm, &input)?;
		let query = self.split(&self.project(&attention_in, block.query, w)?)?;
		let key = self.split(&self.project(&attention_in, block.key, w)?)?;
		let value = self.split(&self.project(&attention_in, block.value, w)?)?;
		let scores = self.batched(MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, &query, &key)?;
		let mut probs = vec![0.0f32; scores.len()];
		causal_softmax(self.causal_shape(), &scores, &mut probs)?;
		let attended = self.merge(&self.batched(MatmulShape { m: t, k: t, n: d }, PLAIN, &probs, &value)?)?;
		let mut middle = self.project(&attended, block.output, w)?;
		add_assign(&mut middle, &input)?;
		let mlp_in = self.normalise(block.mlp_norm, &middle)?;
		let up = self.project(&mlp_in, block.up, self.config.hidden())?;
		let mut activated = vec![0.0f32; up.len()];
		activation_forward(Activation::GeluTanh, &up, &mut activated)?;
		Ok(BlockTape { input, attention_in, query, key, value, probs, attended, middle, mlp_in, up, activated })
	}

	/// The residual stream after block `tape`.
	fn block_output(&self, layer: usize, tape: &BlockTape) -> Result<Vec<f32>, KernelError> {
		let mut out = self.project(&tape.activated, self.config.block(layer).down, self.config.width())?;
		// `middle + down`, as the forward adds them: the sum is commutative bit for bit.
		add_assign(&mut out, &tape.middle)?;
		Ok(out)
	}

	/// The logits of `tokens` (`rows` of them), and what the backward pass needs.
	fn forward(&self, tokens: &[u32]) -> Result<(Vec<f32>, Tape), KernelError> {
		let (w, rows) = (self.config.width(), self.rows.count());
		check_len("tokens", tokens.len(), rows)?;
		let positions: Vec<u32> = (0..rows).map(|row| (row % self.rows.positions) as u32).collect();
		let mut stream = vec![0.0f32; element_count(&[rows, w])?];
		gather_rows(&self.params[0], w, tokens, &mut stream)?;
		let mut placed = vec![0.0f32; stream.len()];
		gather_rows(&self.params[1], w, &positions, &mut placed)?;
		add_assign(&mut stream, &placed)?;
		let mut blocks = Vec::with_capacity(self.config.layers as usize);
		for layer in 0..self.config.layers as usize {
			let tape = self.block_forward(layer, stream)?;
			stream = self.block_output(layer, &tape)?;
			blocks.push(tape);
		}
		let normalised = self.normalise(self.config.final_norm(), &stream)?;
		let vocab = self.config.vocab as usize;
		let logits = match self.config.head() {
			Some(head) => linear(&normalised, rows, &self.params[head], None, vocab)?,
			None => {
				let mut logits = vec![0.0f32; element_count(&[rows, vocab])?];
				matmul(MatmulShape { m: rows, k: w, n: vocab }, RHS_TRANSPOSED, &normalised, &self.params[0], &mut logits)?;
				logits
			},
		};
		Ok((logits, Tape { tokens: tokens.to_vec(), positions, blocks, last: stream, normalised }))
	}

	/// A normalisation's backward pass into `grads`; returns its input's gradient.
	fn normalise_backward(&self, norm: NormIndices, x: &[f32], dy: &[f32], grads: &mut [Vec<f32>]) -> Result<Vec<f32>, KernelError> {
		let mut x_grad = vec![0.0f32; x.len()];
		let mut gain_grad = vec![0.0f32; self.config.width()];
		let mut bias_grad_out = vec![0.0f32; norm.bias.map_or(0, |_| self.config.width())];
		norm_backward(
			self.norm_shape(),
			x,
			&self.params[norm.gain],
			dy,
			NormGrads { x: &mut x_grad, gamma: &mut gain_grad, beta: &mut bias_grad_out },
		)?;
		grads[norm.gain] = gain_grad;
		if let Some(bias) = norm.bias {
			grads[bias] = bias_grad_out;
		}
		Ok(x_grad)
	}

	/// A linear layer's backward pass into `grads`; returns its input's gradient.
	fn project_backward(&self, x: &[f32], weight: usize, out_grad: &[f32], grads: &mut [Vec<f32>]) -> Result<Vec<f32>, KernelError> {
		let (weight_grad, bias_grad_out) = pair_mut(grads, weight, weight + 1);
		linear_backward(x, self.rows.count(), &self.params[weight], out_grad, weight_grad, Some(bias_grad_out))
	}

	/// Block `layer`'s backward pass from the gradient of its output; returns its input's.
	fn block_backward(&self, layer: usize, tape: &BlockTape, out_grad: Vec<f32>, grads: &mut [Vec<f32>]) -> Result<Vec<f32>, KernelError> {
		let (t, d) = (self.rows.positions, self.config.head_width());
		let block = self.config.block(layer);
		let activated_grad = self.project_backward(&tape.activated, block.down, &out_grad, grads)?;
		let mut up_grad = vec![0.0f32; tape.up.len()];
		activation_backward(Activation::GeluTanh, &tape.up, &activated_grad, &mut up_grad)?;
		let mlp_in_grad = self.project_backward(&tape.mlp_in, block.up, &up_grad, grads)?;
		// `middle`'s readers in graph order: norm₂, then the residual.
		let mut middle_grad = self.normalise_backward(block.mlp_norm, &tape.middle, &mlp_in_grad, grads)?;
		add_assign(&mut middle_grad, &out_grad)?;

		let attended_grad = self.split(&self.project_backward(&tape.attended, block.output, &middle_grad, grads)?)?;
		let probs_grad = self.batched(MatmulShape { m: t, k: d, n: t }, RHS_TRANSPOSED, &attended_grad, &tape.value)?;
		let value_grad = self.batched(MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, &tape.probs, &attended_grad)?;
		let mut scores_grad = vec![0.0f32; tape.probs.len()];
		causal_softmax_grad(self.causal_shape(), &tape.probs, &probs_grad, &mut scores_grad)?;
		let query_grad = self.batched(MatmulShape { m: t, k: t, n: d }, PLAIN, &scores_grad, &tape.key)?;
		let key_grad = self.batched(MatmulShape { m: t, k: t, n: d }, LHS_TRANSPOSED, &scores_grad, &tape.query)?;
		// `attention_in`'s readers in graph order: the query, key and value projections.
		let mut attention_in_grad = self.project_backward(&tape.attention_in, block.query, &self.merge(&query_grad)?, grads)?;
		add_assign(&mut attention_in_grad, &self.project_backward(&tape.attention_in, block.key, &self.merge(&key_grad)?, grads)?)?;
		add_assign(&mut attention_in_grad, &self.project_backward(&tape.attention_in, block.value, &self.merge(&value_grad)?, grads)?)?;
		// `input`'s readers in graph order: norm₁, then the residual.
		let mut input_grad = self.normalise_backward(block.attention_norm, &tape.input, &attention_in_grad, grads)?;
		add_assign(&mut input_grad, &middle_grad)?;
		Ok(input_grad)
	}

	/// Every parameter's gradient from the logits' gradient.
	fn backward(&self, tape: &Tape, logits_grad: &[f32]) -> Result<Vec<Vec<f32>>, KernelError> {
		let (w, rows, vocab) = (self.config.width(), self.rows.count(), self.config.vocab as usize);
		let mut grads: Vec<Vec<f32>> = self.params.iter().map(|tensor| vec![0.0f32; tensor.len()]).collect();
		let (normalised_grad, head_grad) = match self.config.head() {
			Some(head) => (linear_backward(&tape.normalised, rows, &self.params[head], logits_grad, &mut grads[head], None)?, None),
			None => {
				let mut normalised_grad = vec![0.0f32; tape.normalised.len()];
				matmul(MatmulShape { m: rows, k: vocab, n: w }, PLAIN, logits_grad, &self.params[0], &mut normalised_grad)?;
				let mut head_grad = vec![0.0f32; vocab * w];
				matmul(MatmulShape { m: vocab, k: rows, n: w }, LHS_TRANSPOSED, logits_grad, &tape.normalised, &mut head_grad)?;
				(normalised_grad, Some(head_grad))
			},
		};
		let mut stream_grad = self.normalise_backward(self.config.final_norm(), &tape.last, &normalised_grad, &mut grads)?;
		for (layer, block) in tape.blocks.iter().enumerate().rev() {
			stream_grad = self.block_backward(layer, block, stream_grad, &mut grads)?;
		}
		scatter_add_rows(&stream_grad, w, &tape.tokens, vocab, &mut grads[0])?;
		scatter_add_rows(&stream_grad, w, &tape.positions, self.config.context as usize, &mut grads[1])?;
		if let Some(head_grad) = head_grad {
			// A tied `E`'s readers in graph order: the gather, then the head.
			add_assign(&mut grads[0], &head_grad)?;
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

/// The mean loss of `windows` (sequences of `positions + 1` tokens, `positions ≤ context`)
/// and every parameter's gradient.
pub fn loss_and_gradients(
	config: TransformerConfig,
	params: &[Vec<f32>],
	windows: &[u32],
	positions: usize,
) -> Result<(f32, Vec<Vec<f32>>), KernelError> {
	let (model, logits, tape, targets) = run_forward(config, params, windows, positions)?;
	let mut logits_grad = vec![0.0f32; logits.len()];
	let loss = softmax_cross_entropy(model.classifier(), &logits, &targets, &mut logits_grad)?;
	Ok((loss, model.backward(&tape, &logits_grad)?))
}

/// The mean loss of `windows`, forward only: what evaluation reports.
pub fn mean_loss(config: TransformerConfig, params: &[Vec<f32>], windows: &[u32], positions: usize) -> Result<f32, KernelError> {
	let (model, logits, _, targets) = run_forward(config, params, windows, positions)?;
	let mut logits_grad = vec![0.0f32; logits.len()];
	softmax_cross_entropy(model.classifier(), &logits, &targets, &mut logits_grad)
}

fn run_forward<'a>(
	config: TransformerConfig,
	params: &'a [Vec<f32>],
	windows: &[u32],
	positions: usize,
) -> Result<(Model<'a>, Vec<f32>, Tape, Vec<u32>), KernelError> {
	config.check_params(params)?;
	if positions > config.context as usize {
		return Err(KernelError::InvalidHyperparameter { name: "context" });
	}
	let (inputs, targets, rows) = inputs_and_targets(windows, positions)?;
	let model = Model { config, params, rows };
	let (logits, tape) = model.forward(&inputs)?;
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
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerState {
	/// Parameters, in the module's order.
	pub params: Vec<Vec<f32>>,
	/// AdamW's first moments, one per parameter tensor.
	pub first_moments: Vec<Vec<f32>>,
	/// AdamW's second moments.
	pub second_moments: Vec<Vec<f32>>,
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

	/// One training step on `windows` (sequences of `context + 1` tokens).
	pub fn step(&mut self, config: TransformerConfig, training: &TransformerTraining, windows: &[u32]) -> Result<StepReport, KernelError> {
		let schedule = training.schedule.validated()?;
		let (loss, mut grads) = loss_and_gradients(config, &self.params, windows, config.context as usize)?;
		let mut views: Vec<&mut [f32]> = grads.iter_mut().map(|tensor| &mut tensor[..]).collect();
		let grad_norm = match training.clip_norm {
			Some(max_norm) => clip_grad_norm(&mut views, max_norm)?,
			None => crate::ops::optim::global_grad_norm(views.iter().map(|tensor| &**tensor)),
		};
		let learning_rate = schedule.rate(self.steps);
		let update = self.steps.checked_add(1).ok_or(KernelError::InvalidHyperparameter { name: "step" })?;
		let adamw = |weight_decay| AdamW { learning_rate, beta1: training.beta1, beta2: training.beta2, epsilon: training.epsilon, weight_decay };
		let decayed = adamw(training.weight_decay).scalars(update)?;
		let undecayed = adamw(0.0).scalars(update)?;
		for (index, spec) in config.tensors().iter().enumerate() {
			adamw_step(
				if spec.matrix { &decayed } else { &undecayed },
				&mut self.params[index],
				&grads[index],
				&mut self.first_moments[index],
				&mut self.second_moments[index],
			)?;
		}
		self.steps = update;
		Ok(StepReport { loss, grad_norm, learning_rate })
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
	config.check_params(params)?;
	let draws = RandomStream::new(seed, 0);
	let vocab = config.vocab as usize;
	let mut tokens = prompt.to_vec();
	let mut probs = vec![0.0f32; vocab];
	for index in 0..count {
		let window = &tokens[tokens.len().saturating_sub(config.context as usize)..];
		let model = Model { config, params, rows: Rows { sequences: 1, positions: window.len() } };
		let (logits, _) = model.forward(window)?;
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

//! A decoder-only transformer's configuration: the chain's `ModelArch::Transformer`, the
//! bounds every dimension is held to, the parameter tensors in order and their seeded
//! initialisation, and how a job trains it. The model and its step are
//! [`crate::job::transformer`]'s.

use alloc::vec;
use alloc::vec::Vec;

use super::INIT_STREAM;
use crate::arith::rng::RandomStream;
use crate::error::{check_len, KernelError};
use crate::ops::norm::Norm;
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
pub(crate) struct BlockIndices {
	pub(crate) attention_norm: NormIndices,
	pub(crate) query: usize,
	pub(crate) key: usize,
	pub(crate) value: usize,
	pub(crate) output: usize,
	pub(crate) mlp_norm: NormIndices,
	pub(crate) up: usize,
	pub(crate) down: usize,
}

/// A normalisation's gain, and its bias for LayerNorm. A linear layer's bias follows its
/// weight, at `weight + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NormIndices {
	pub(crate) gain: usize,
	pub(crate) bias: Option<usize>,
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

	pub(crate) fn width(&self) -> usize {
		self.width as usize
	}

	pub(crate) fn hidden(&self) -> usize {
		(self.width * self.mlp_ratio) as usize
	}

	pub(crate) fn head_width(&self) -> usize {
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

	pub(crate) fn block(&self, layer: usize) -> BlockIndices {
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

	pub(crate) fn final_norm(&self) -> NormIndices {
		self.norm_at(2 + self.layers as usize * self.tensors_per_block())
	}

	/// The head's index, when it is a tensor of its own.
	pub(crate) fn head(&self) -> Option<usize> {
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
	pub(crate) fn check_params(&self, lens: impl ExactSizeIterator<Item = usize>) -> Result<(), KernelError> {
		let tensors = self.validated()?.tensors();
		check_len("params", lens.len(), tensors.len())?;
		for (len, spec) in lens.zip(&tensors) {
			check_len("param", len, spec.len)?;
		}
		Ok(())
	}
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

//! Model and training configurations, seeded initialisation, and the model's content hash.
//!
//! [`ModelConfig`] mirrors the chain's `ModelArch` and [`TrainConfig`] its
//! `HyperParams` (`pallets/primitives`), field for field and with the same
//! names, so that the worker and the runtime map one onto the other without
//! judgement. Real numbers stay in the chain's fixed-point form (`FixedU64`'s
//! inner `u64`, the value times 10⁹) until [`fixed_to_f32`] converts them,
//! with integer arithmetic only, so every machine gets the same `f32`s. This
//! crate does not depend on the primitives crate, to keep SCALE out of the
//! kernels' core.
//!
//! # Parameters and initialisation
//!
//! Layers in order: each convolution (weight `[co, ci, k, k]`, bias `[co]`),
//! then each dense layer (weight `[inputs, outputs]`, row-major, so a batch
//! `x[B, inputs]` multiplies it plainly; bias `[outputs]`). The parameter
//! list alternates weight, bias, layer by layer. Parameter tensor `i` is
//! drawn from Philox stream [`INIT_STREAM`]` + i` of the job's seed, uniform in
//! `[−b, b)` with `b = rsqrt(fan_in)` (PyTorch's default for `Linear` and
//! `Conv2d`, biases included), in storage order.

use alloc::vec;
use alloc::vec::Vec;

use crate::ops::activation::Activation;
use crate::arith::canonicalize;
use crate::ops::contraction::Conv2dShape;
use crate::error::{check_nonzero, element_count, KernelError};
use crate::proof::hash::{digest_words, Digest};
use crate::arith::math::rsqrt;
use crate::ops::optim::{AdamW, SgdMomentum};
use crate::ops::schedule::WarmupCosine;
pub mod transformer;

use transformer::{TensorSpec, TransformerConfig, TransformerTraining};
use crate::arith::rng::RandomStream;

/// Philox stream of parameter tensor 0; tensor `i` uses `INIT_STREAM + i`.
pub const INIT_STREAM: u64 = 1 << 32;
/// Philox stream of epoch 0's batch order; epoch `e` uses `BATCH_STREAM + e`.
pub const BATCH_STREAM: u64 = 2 << 32;
/// Philox stream of a dataset's train/test split.
pub const SPLIT_STREAM: u64 = 3 << 32;
/// Philox streams of the synthetic data generator start here.
pub const SYNTHETIC_STREAM: u64 = 4 << 32;

/// `FixedU64`'s scale: a fixed-point `u64` holds the value times 10⁹.
pub const FIXED_ONE: u64 = 1_000_000_000;

/// The `f32` nearest to `fixed / 10⁹` (ties to even), computed with integers only.
///
/// The chain stores hyper-parameters as `FixedU64`. Converting through `f64`
/// would round twice (the division, then the narrowing); this rounds once, and
/// needs no floating-point unit at all, so the runtime and every worker agree.
/// Every non-zero result is a normal `f32` (10⁻⁹ ≤ value < 1.9·10¹⁰).
pub fn fixed_to_f32(fixed: u64) -> f32 {
	if fixed == 0 {
		return 0.0;
	}
	const SIGNIFICAND_LOW: u128 = 1 << 23;
	const SIGNIFICAND_HIGH: u128 = 1 << 24;
	let numerator = u128::from(fixed);
	let denominator = u128::from(FIXED_ONE);
	// value·2^shift in [2²³, 2²⁴): start from the bit lengths, then correct by one.
	let bit_length = |x: u128| 128 - x.leading_zeros() as i32;
	let mut shift: i32 = 24 - bit_length(numerator) + bit_length(denominator);
	let scaled = |shift: i32| -> (u128, u128, u128) {
		if shift >= 0 {
			let top = numerator << shift;
			(top / denominator, top % denominator, denominator)
		} else {
			let bottom = denominator << -shift;
			(numerator / bottom, numerator % bottom, bottom)
		}
	};
	let (mut quotient, mut remainder, mut divisor) = scaled(shift);
	while quotient >= SIGNIFICAND_HIGH {
		shift -= 1;
		(quotient, remainder, divisor) = scaled(shift);
	}
	while quotient < SIGNIFICAND_LOW {
		shift += 1;
		(quotient, remainder, divisor) = scaled(shift);
	}
	let twice = remainder * 2;
	if twice > divisor || (twice == divisor && quotient % 2 == 1) {
		quotient += 1;
		if quotient == SIGNIFICAND_HIGH {
			quotient = SIGNIFICAND_LOW;
			shift -= 1;
		}
	}
	// value = quotient·2^−shift = 1.mantissa · 2^(23 − shift).
	let exponent = (23 - shift + 127) as u32;
	f32::from_bits((exponent << 23) | (quotient - SIGNIFICAND_LOW) as u32)
}

/// A model architecture: the chain's `ModelArch`, field for field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelConfig {
	/// A multi-layer perceptron: `inputs → hidden… → classes`.
	Mlp {
		/// Input features per sample.
		inputs: u32,
		/// Widths of the hidden layers, in order.
		hidden: Vec<u32>,
		/// Output classes.
		classes: u32,
		/// Activation after each hidden layer (the chain's `Gelu` is [`Activation::GeluTanh`]).
		activation: Activation,
	},
	/// Valid, stride-1 convolutions, each followed by its bias and the
	/// activation, then dense layers; the last convolution's `[C, OH, OW]`
	/// output is flattened in that order into the first dense layer.
	Cnn {
		/// Input channels.
		channels: u32,
		/// Input height in pixels.
		height: u32,
		/// Input width in pixels.
		width: u32,
		/// Output channels of each convolution, in order.
		conv_channels: Vec<u32>,
		/// Square kernel size of every convolution.
		kernel_size: u32,
		/// Widths of the dense hidden layers after the convolutions.
		hidden: Vec<u32>,
		/// Output classes.
		classes: u32,
		/// Activation after each convolution and hidden layer.
		activation: Activation,
	},
	/// A decoder-only transformer trained on a token stream ([`crate::job::transformer`]),
	/// with AdamW at the rate [`TrainConfig::schedule`] derives.
	Transformer(TransformerConfig),
}

/// One layer of a model, with its per-sample geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
	/// A convolution; its `batch` is 1 here and set per step.
	Conv(Conv2dShape),
	/// A dense layer `inputs → outputs`.
	Dense {
		/// Input features.
		inputs: usize,
		/// Output features.
		outputs: usize,
	},
}

impl Layer {
	/// Input elements per sample.
	pub fn inputs_per_sample(&self) -> usize {
		match self {
			Self::Conv(shape) => shape.in_channels * shape.height * shape.width,
			Self::Dense { inputs, .. } => *inputs,
		}
	}

	/// Output elements per sample.
	pub fn outputs_per_sample(&self) -> usize {
		match self {
			Self::Conv(shape) => shape.out_channels * shape.out_height() * shape.out_width(),
			Self::Dense { outputs, .. } => *outputs,
		}
	}

	/// Elements of the weight and of the bias.
	pub fn param_lens(&self) -> (usize, usize) {
		match self {
			Self::Conv(shape) => (
				shape.out_channels * shape.in_channels * shape.kernel_height * shape.kernel_width,
				shape.out_channels,
			),
			Self::Dense { inputs, outputs } => (inputs * outputs, *outputs),
		}
	}

	/// Inputs that feed one output: the initialisation's fan-in.
	pub fn fan_in(&self) -> usize {
		match self {
			Self::Conv(shape) => shape.in_channels * shape.kernel_height * shape.kernel_width,
			Self::Dense { inputs, .. } => *inputs,
		}
	}
}

/// A parameter tensor: its length and fan-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
	/// Elements.
	pub len: usize,
	/// Fan-in of its layer: the initialisation bound is `rsqrt(fan_in)`.
	pub fan_in: usize,
	/// Index of its layer.
	pub layer: usize,
	/// Whether it is a bias (otherwise a weight).
	pub is_bias: bool,
}

/// Converts a `u32` extent from a configuration to `usize`, refusing zero.
fn extent(name: &'static str, value: u32) -> Result<usize, KernelError> {
	let value = usize::try_from(value).map_err(|_| KernelError::ShapeOverflow)?;
	check_nonzero(name, value)?;
	Ok(value)
}

impl ModelConfig {
	/// The layers, validated: every extent positive, every kernel fits, no overflow.
	pub fn layers(&self) -> Result<Vec<Layer>, KernelError> {
		let mut layers = Vec::new();
		let (first_dense_inputs, hidden, classes) = match self {
			Self::Mlp { inputs, hidden, classes, .. } => (extent("inputs", *inputs)?, hidden, classes),
			Self::Transformer(_) => return Err(KernelError::InvalidHyperparameter { name: "layers (a transformer is not a layer stack)" }),
			Self::Cnn { channels, height, width, conv_channels, kernel_size, hidden, classes, .. } => {
				let (mut c, mut h, mut w) =
					(extent("channels", *channels)?, extent("height", *height)?, extent("width", *width)?);
				let kernel = extent("kernel_size", *kernel_size)?;
				for &out in conv_channels {
					let shape = Conv2dShape {
						batch: 1,
						in_channels: c,
						out_channels: extent("conv_channels", out)?,
						height: h,
						width: w,
						kernel_height: kernel,
						kernel_width: kernel,
					};
					shape.output_len()?;
					if kernel > h || kernel > w {
						return Err(KernelError::KernelLargerThanInput);
					}
					layers.push(Layer::Conv(shape));
					(c, h, w) = (shape.out_channels, shape.out_height(), shape.out_width());
				}
				(element_count(&[c, h, w])?, hidden, classes)
			},
		};
		let mut inputs = first_dense_inputs;
		for &width in hidden.iter() {
			let outputs = extent("hidden", width)?;
			element_count(&[inputs, outputs])?;
			layers.push(Layer::Dense { inputs, outputs });
			inputs = outputs;
		}
		let outputs = extent("classes", *classes)?;
		element_count(&[inputs, outputs])?;
		layers.push(Layer::Dense { inputs, outputs });
		Ok(layers)
	}

	/// The hidden-layer activation.
	pub fn activation(&self) -> Activation {
		match self {
			Self::Mlp { activation, .. } | Self::Cnn { activation, .. } => *activation,
			Self::Transformer(_) => Activation::GeluTanh,
		}
	}

	/// Input features per sample (a transformer's context: positions per window).
	pub fn input_len(&self) -> Result<usize, KernelError> {
		if let Self::Transformer(config) = self {
			return Ok(config.validated()?.context as usize);
		}
		let layers = self.layers()?;
		Ok(layers.first().map_or(0, Layer::inputs_per_sample))
	}

	/// Output classes.
	pub fn classes(&self) -> u32 {
		match self {
			Self::Mlp { classes, .. } | Self::Cnn { classes, .. } => *classes,
			Self::Transformer(config) => config.vocab,
		}
	}

	/// The parameter tensors in order: weight, bias, layer by layer (a transformer's in
	/// [`TransformerConfig::tensors`]' order, each its own layer, gains and biases as biases).
	pub fn params(&self) -> Result<Vec<ParamSpec>, KernelError> {
		if let Self::Transformer(config) = self {
			let tensors = config.validated()?.tensors();
			let spec = |(layer, tensor): (usize, &TensorSpec)| ParamSpec { len: tensor.len, fan_in: 0, layer, is_bias: !tensor.matrix };
			return Ok(tensors.iter().enumerate().map(spec).collect());
		}
		let mut specs = Vec::new();
		for (index, layer) in self.layers()?.iter().enumerate() {
			let (weight, bias) = layer.param_lens();
			let fan_in = layer.fan_in();
			specs.push(ParamSpec { len: weight, fan_in, layer: index, is_bias: false });
			specs.push(ParamSpec { len: bias, fan_in, layer: index, is_bias: true });
		}
		Ok(specs)
	}

	/// Seeded initial parameters (see the module docs; a transformer's, its own).
	pub fn init_params(&self, seed: u64) -> Result<Vec<Vec<f32>>, KernelError> {
		if let Self::Transformer(config) = self {
			return config.init(seed);
		}
		let mut params = Vec::new();
		for (index, spec) in self.params()?.iter().enumerate() {
			let bound = rsqrt(spec.fan_in as f32);
			let mut values = vec![0.0f32; spec.len];
			RandomStream::new(seed, INIT_STREAM + index as u64).fill_uniform(-bound, bound, &mut values);
			canonicalize(&mut values);
			params.push(values);
		}
		Ok(params)
	}
}

impl ModelConfig {
	/// The model's predicted class for each of `samples` rows of `features`,
	/// computed with the reference operators (the same forward pass as training).
	pub fn predict(&self, params: &[Vec<f32>], features: &[f32], samples: usize) -> Result<Vec<u32>, KernelError> {
		let layers = self.layers()?;
		crate::error::check_len("params", params.len(), 2 * layers.len())?;
		let activation = self.activation();
		let mut x = features.to_vec();
		let last = layers.len().saturating_sub(1);
		for (index, layer) in layers.iter().enumerate() {
			let weight = params.get(2 * index).map(Vec::as_slice).unwrap_or_default();
			let bias = params.get(2 * index + 1).map(Vec::as_slice).unwrap_or_default();
			let out_len = element_count(&[samples, layer.outputs_per_sample()])?;
			let mut y = vec![0.0f32; out_len];
			let layout = match layer {
				Layer::Conv(shape) => {
					let shape = Conv2dShape { batch: samples, ..*shape };
					crate::ops::conv2d::conv2d(shape, &x, weight, &mut y)?;
					crate::ops::bias::BiasLayout::channels_first(samples, shape.out_channels, shape.out_height() * shape.out_width())
				},
				Layer::Dense { inputs, outputs } => {
					let shape = crate::ops::contraction::MatmulShape { m: samples, k: *inputs, n: *outputs };
					crate::ops::matmul::matmul(shape, crate::ops::contraction::MatmulLayout::default(), &x, weight, &mut y)?;
					crate::ops::bias::BiasLayout::dense(samples, *outputs)
				},
			};
			crate::ops::bias::bias_add(layout, &mut y, bias)?;
			if index < last {
				let mut activated = vec![0.0f32; y.len()];
				crate::ops::activation::activation_forward(activation, &y, &mut activated)?;
				y = activated;
			}
			x = y;
		}
		let shape = crate::ops::loss::ClassifierShape { rows: samples, classes: self.classes() as usize };
		let mut predictions = vec![0u32; samples];
		crate::ops::loss::argmax_rows(shape, &x, &mut predictions)?;
		Ok(predictions)
	}

	/// The fraction of `labels` that [`ModelConfig::predict`] gets right.
	pub fn accuracy(&self, params: &[Vec<f32>], features: &[f32], labels: &[u32]) -> Result<f64, KernelError> {
		let predictions = self.predict(params, features, labels.len())?;
		let correct = predictions.iter().zip(labels).filter(|(p, l)| p == l).count();
		Ok(correct as f64 / labels.len().max(1) as f64)
	}
}

/// Prefix of a model's content hash.
const MODEL_PREFIX: &[u8] = b"touchstone/model/v1";

/// The content hash of a list of tensors (a model's weights, or weights and
/// optimizer state): BLAKE2b-256 of `"touchstone/model/v1"`, the tensor count,
/// then each tensor's length and canonical bits, all as little-endian `u32`s.
///
/// Lengths are hashed so that the same values cut differently hash differently.
pub fn weights_digest(tensors: &[Vec<f32>]) -> Digest {
	let header = core::iter::once(tensors.len() as u32);
	let body = tensors.iter().flat_map(|tensor| {
		core::iter::once(tensor.len() as u32).chain(tensor.iter().map(|&v| crate::arith::canonical_bits(v)))
	});
	digest_words(MODEL_PREFIX, header.chain(body))
}

/// The optimizer and its settings: the chain's `Optimizer`, fixed-point fields as `u64`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerConfig {
	/// SGD with heavy-ball momentum (no dampening, no Nesterov, no weight decay).
	Sgd {
		/// Momentum factor, times 10⁹.
		momentum: u64,
	},
	/// AdamW (decoupled weight decay).
	AdamW {
		/// First-moment decay, times 10⁹.
		beta1: u64,
		/// Second-moment decay, times 10⁹.
		beta2: u64,
		/// Denominator epsilon, times 10⁹.
		epsilon: u64,
		/// Decoupled weight decay, times 10⁹.
		weight_decay: u64,
	},
}

/// The optimizer, converted to the kernels' `f32` hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
	/// SGD with momentum.
	Sgd(SgdMomentum),
	/// AdamW.
	AdamW(AdamW),
}

impl Optimizer {
	/// Optimizer-state tensors per parameter: 1 (velocity) or 2 (moments).
	pub fn moments(&self) -> usize {
		match self {
			Self::Sgd(_) => 1,
			Self::AdamW(_) => 2,
		}
	}
}

/// Training hyper-parameters: the chain's `HyperParams`, fixed-point fields as `u64`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainConfig {
	/// Total optimizer steps of the job.
	pub steps: u32,
	/// Samples per step.
	pub batch_size: u32,
	/// Learning rate, times 10⁹.
	pub learning_rate: u64,
	/// Optimizer and its settings.
	pub optimizer: OptimizerConfig,
	/// Global gradient-norm clip, times 10⁹; `None` disables clipping.
	pub grad_clip_norm: Option<u64>,
	/// Seed of the Philox streams for initialisation and batch order.
	pub seed: u64,
	/// A checkpoint is written every this many steps.
	pub checkpoint_interval: u32,
}

impl TrainConfig {
	/// Whether a checkpoint is taken once the run reaches global step `next_step`
	/// (after step `next_step − 1`), for a unit that ends at `unit_end`: at every
	/// global multiple of the interval, and at the unit's end. The trainer writes
	/// checkpoints by this rule and the chain accepts commitments by it, whatever
	/// step a unit starts at.
	pub fn is_checkpoint_step(&self, next_step: u32, unit_end: u32) -> bool {
		next_step == unit_end || (self.checkpoint_interval > 0 && next_step.is_multiple_of(self.checkpoint_interval))
	}

	/// The optimizer with its `f32` hyper-parameters, validated.
	pub fn optimizer(&self) -> Result<Optimizer, KernelError> {
		let learning_rate = fixed_to_f32(self.learning_rate);
		match self.optimizer {
			OptimizerConfig::Sgd { momentum } => {
				let hyper =
					SgdMomentum { learning_rate, momentum: fixed_to_f32(momentum), weight_decay: 0.0, nesterov: false };
				Ok(Optimizer::Sgd(hyper.validated()?))
			},
			OptimizerConfig::AdamW { beta1, beta2, epsilon, weight_decay } => {
				let hyper = AdamW {
					learning_rate,
					beta1: fixed_to_f32(beta1),
					beta2: fixed_to_f32(beta2),
					epsilon: fixed_to_f32(epsilon),
					weight_decay: fixed_to_f32(weight_decay),
				};
				hyper.scalars(1)?;
				Ok(Optimizer::AdamW(hyper))
			},
		}
	}

	/// The clipping norm as an `f32`, if clipping is on.
	pub fn clip_norm(&self) -> Option<f32> {
		self.grad_clip_norm.map(fixed_to_f32)
	}

	/// The learning rate of every step of a transformer job, derived from the job alone:
	/// a linear warm-up over the first `⌈steps/50⌉` steps to `learning_rate`, then a cosine
	/// decay to a tenth of it (`learning_rate / 10` in fixed point) at the last step.
	pub fn schedule(&self) -> WarmupCosine {
		WarmupCosine {
			peak: fixed_to_f32(self.learning_rate),
			floor: fixed_to_f32(self.learning_rate / 10),
			warmup_steps: self.steps.div_ceil(50),
			total_steps: self.steps,
		}
	}

	/// How a transformer job trains: AdamW's constants, [`TrainConfig::schedule`],
	/// clipping and the batch. Only AdamW trains a transformer.
	pub fn transformer_training(&self) -> Result<TransformerTraining, KernelError> {
		let Optimizer::AdamW(hyper) = self.optimizer()? else {
			return Err(KernelError::InvalidHyperparameter { name: "optimizer (a transformer trains with AdamW)" });
		};
		Ok(TransformerTraining {
			batch: self.batch()?,
			schedule: self.schedule().validated()?,
			beta1: hyper.beta1,
			beta2: hyper.beta2,
			epsilon: hyper.epsilon,
			weight_decay: hyper.weight_decay,
			clip_norm: self.clip_norm(),
		})
	}

	/// The batch size as `usize`, refusing zero.
	pub fn batch(&self) -> Result<usize, KernelError> {
		extent("batch_size", self.batch_size)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn fixed_point_converts_with_one_rounding() {
		assert_eq!(fixed_to_f32(0), 0.0);
		assert_eq!(fixed_to_f32(FIXED_ONE), 1.0);
		assert_eq!(fixed_to_f32(500_000_000), 0.5);
		assert_eq!(fixed_to_f32(10), 1e-8f32);
		assert_eq!(fixed_to_f32(1), 1e-9f32);
		assert_eq!(fixed_to_f32(900_000_000), 0.9f32);
		assert_eq!(fixed_to_f32(999_000_000), 0.999f32);
		assert_eq!(fixed_to_f32(u64::MAX), 18_446_744_073.709_553f64 as f32);
		// Against f64 on many values: the f64 quotient is within half an f64 ULP of
		// exact, so the two agree except on near-ties, which this range avoids.
		for fixed in (1..2_000_000u64).step_by(997).chain((1..64).map(|s| 3u64 << s)) {
			let expected = (fixed as f64 / 1e9) as f32;
			assert_eq!(fixed_to_f32(fixed), expected, "{fixed}");
		}
	}

	#[test]
	fn layers_and_params_follow_the_config() {
		let cnn = ModelConfig::Cnn {
			channels: 1,
			height: 8,
			width: 8,
			conv_channels: vec![4, 6],
			kernel_size: 3,
			hidden: vec![16],
			classes: 10,
			activation: Activation::Relu,
		};
		let layers = cnn.layers().unwrap();
		assert_eq!(layers.len(), 4);
		assert_eq!(layers[2], Layer::Dense { inputs: 6 * 4 * 4, outputs: 16 });
		let lens: Vec<usize> = cnn.params().unwrap().iter().map(|p| p.len).collect();
		assert_eq!(lens, [36, 4, 216, 6, 1536, 16, 160, 10]);
		let too_deep = ModelConfig::Cnn {
			channels: 1,
			height: 8,
			width: 8,
			conv_channels: vec![4, 4, 4, 4],
			kernel_size: 3,
			hidden: vec![],
			classes: 10,
			activation: Activation::Relu,
		};
		assert_eq!(too_deep.layers(), Err(KernelError::KernelLargerThanInput));
		let empty = ModelConfig::Mlp { inputs: 0, hidden: vec![], classes: 3, activation: Activation::Relu };
		assert!(empty.layers().is_err());
	}

	#[test]
	fn initialisation_is_seeded_and_bounded() {
		let mlp = ModelConfig::Mlp { inputs: 64, hidden: vec![32], classes: 10, activation: Activation::Tanh };
		let a = mlp.init_params(5).unwrap();
		assert_eq!(a, mlp.init_params(5).unwrap());
		assert_ne!(weights_digest(&a), weights_digest(&mlp.init_params(6).unwrap()));
		for value in &a[0] {
			assert!(value.abs() <= 0.125);
		}
		assert!(a[0].iter().any(|v| v.abs() > 0.1));
	}
}

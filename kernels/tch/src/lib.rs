//! Backend 3: libtorch through `tch`, the fast path. Not bit-reproducible.
//!
//! Every operator is the stock libtorch kernel PyTorch itself would run (MKL
//! or oneDNN matmuls and convolutions, vectorised `exp`, `tanh`, fused
//! reductions in whatever order the library picks), with PyTorch's semantics
//! for each step: `torch.optim.SGD` and `AdamW` update rules, `clip_grad_norm_`
//! with its `clamp(max = 1)` multiply, mean cross-entropy. None of the
//! contract's rules are followed, so [`Backend::is_bit_exact`] is `false`: jobs
//! trained here are verified in tolerance mode, by a [`Distance`] between
//! states against a threshold ([`touchstone_kernels::job::distance`], which needs only the
//! reference).
//!
//! How far it drifts from the reference after `k` steps is what
//! [`distance_to_reference`] reports: it re-executes a segment of a job from a
//! committed state on both backends and returns the [`Distance`] between the
//! resulting parameters. `tests/tch_backend.rs` bounds it for the digits job
//! (figures in `docs/performance.md`).
//!
//! Input validation mirrors the reference: the same checks, in the same
//! order, with the same [`KernelError`]s, before libtorch sees anything.
//! libtorch's own failures come back as [`TorchError::Torch`], never as panics.
//!
//! Building it needs libtorch 2.13.0: run `kernels/scripts/setup-torch.sh` once
//! and `source kernels/scripts/torch-env.sh` before cargo.

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use ::tch as torch;
use torch::{Device, Kind, Reduction, Tensor};

use touchstone_kernels::ops::activation::Activation;
use touchstone_kernels::ops::attention::CausalShape;
use touchstone_kernels::ops::norm::{Norm, NormShape};
use touchstone_kernels::ops::heads::HeadsShape;
use touchstone_kernels::exec::backend::Backend;
use touchstone_kernels::ops::bias::BiasLayout;
use touchstone_kernels::ops::contraction::Contraction;
use touchstone_kernels::job::data::Dataset;
use touchstone_kernels::job::distance;
/// Tolerance mode's distance, defined with the reference in [`touchstone_kernels::job::distance`];
/// re-exported here because this backend is what tolerance mode is for.
pub use touchstone_kernels::job::distance::Distance;
use touchstone_kernels::error::{check_len, check_nonzero, element_count, KernelError};
use touchstone_kernels::ops::loss::ClassifierShape;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::ops::optim::{self, AdamWScalars, SgdMomentum};
use touchstone_kernels::job::trace::Trainer;
use touchstone_kernels::proof::chain::ChainPoint;

/// The ε PyTorch's `clip_grad_norm_` adds to the norm.
const CLIP_EPSILON: f64 = 1e-6;

/// What can go wrong in the tch backend.
#[derive(Debug)]
pub enum TorchError {
	/// The operator's input is invalid, exactly as the reference would report it.
	Kernel(KernelError),
	/// libtorch refused an operation.
	Torch(torch::TchError),
}

impl From<KernelError> for TorchError {
	fn from(error: KernelError) -> Self {
		Self::Kernel(error)
	}
}

impl From<torch::TchError> for TorchError {
	fn from(error: torch::TchError) -> Self {
		Self::Torch(error)
	}
}

impl fmt::Display for TorchError {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			Self::Kernel(error) => write!(f, "{error}"),
			Self::Torch(error) => write!(f, "libtorch: {error}"),
		}
	}
}

impl std::error::Error for TorchError {}

/// A device index buffer: `i64` for libtorch, with the host copy validation reads.
#[derive(Debug)]
pub struct TorchIndices {
	tensor: Tensor,
	host: Vec<u32>,
}

/// The libtorch backend on one device (the CPU unless asked otherwise).
#[derive(Debug)]
pub struct TchBackend {
	device: Device,
	name: String,
}

impl Default for TchBackend {
	fn default() -> Self {
		Self::cpu()
	}
}

impl TchBackend {
	/// libtorch on the CPU, with libtorch's default intra-op threads.
	pub fn cpu() -> Self {
		Self::on(Device::Cpu)
	}

	/// libtorch on `device` (a CUDA device needs a CUDA-enabled libtorch link;
	/// the CPU link view of `setup-torch.sh` has none).
	pub fn on(device: Device) -> Self {
		let name = match device {
			Device::Cpu => format!("tch-cpu ({} threads)", torch::get_num_threads()),
			other => format!("tch-{other:?}"),
		};
		Self { device, name }
	}

	/// Copies `result`, flattened, into `out`.
	fn write(out: &mut Tensor, result: Result<Tensor, torch::TchError>) -> Result<(), TorchError> {
		let flat = result?.f_reshape([-1])?;
		out.f_copy_(&flat)?;
		Ok(())
	}
}

/// Drops the handle an in-place libtorch operation returns (it is `self` again).
fn in_place(result: Result<Tensor, torch::TchError>) -> Result<(), TorchError> {
	result.map(drop).map_err(TorchError::from)
}

/// `(sequences, positions, heads, head width)` of `shape` as libtorch dimensions.
fn heads_dims(shape: HeadsShape) -> (i64, i64, i64, i64) {
	(dim(shape.sequences), dim(shape.positions), dim(shape.heads), dim(shape.head_width))
}

/// `values` as 64-bit indices, libtorch's index type.
fn widen(values: &[u32]) -> Vec<i64> {
	values.iter().map(|&value| i64::from(value)).collect()
}

/// A `usize` extent as libtorch's `i64`.
fn dim(extent: usize) -> i64 {
	extent as i64
}

impl Backend for TchBackend {
	type Tensor = Tensor;
	type Indices = TorchIndices;
	type Error = TorchError;

	fn name(&self) -> &str {
		&self.name
	}

	fn is_bit_exact(&self) -> bool {
		false
	}

	fn upload(&mut self, values: &[f32]) -> Result<Tensor, TorchError> {
		element_count(&[values.len()])?;
		Ok(Tensor::f_from_slice(values)?.f_to(self.device)?)
	}

	fn upload_indices(&mut self, values: &[u32]) -> Result<TorchIndices, TorchError> {
		element_count(&[values.len()])?;
		let tensor = Tensor::f_from_slice(&widen(values))?.f_to(self.device)?;
		Ok(TorchIndices { tensor, host: values.to_vec() })
	}

	fn zeros(&mut self, len: usize) -> Result<Tensor, TorchError> {
		element_count(&[len])?;
		Ok(Tensor::f_zeros([dim(len)], (Kind::Float, self.device))?)
	}

	fn download(&mut self, tensor: &Tensor) -> Result<Vec<f32>, TorchError> {
		let host = tensor.f_to(Device::Cpu)?.f_contiguous()?;
		let len = host.numel();
		let mut values = vec![0.0f32; len];
		host.f_copy_data(&mut values, len)?;
		Ok(values)
	}

	fn tensor_len(&self, tensor: &Tensor) -> usize {
		tensor.numel()
	}

	fn contract(
		&mut self,
		contraction: Contraction,
		lhs: &Tensor,
		rhs: &Tensor,
		out: &mut Tensor,
	) -> Result<(), TorchError> {
		let dims = contraction.dims()?;
		check_len("lhs", lhs.numel(), contraction.lhs_len()?)?;
		check_len("rhs", rhs.numel(), contraction.rhs_len()?)?;
		check_len("out", out.numel(), contraction.output_len()?)?;
		let (rows, cols, depth) = (dim(dims.rows), dim(dims.cols), dim(dims.depth));
		match contraction {
			Contraction::Matmul { layout, .. } => {
				let a = if layout.lhs_transposed {
					lhs.f_view_([depth, rows])?.f_tr()?
				} else {
					lhs.f_view_([rows, depth])?
				};
				let b = if layout.rhs_transposed {
					rhs.f_view_([cols, depth])?.f_tr()?
				} else {
					rhs.f_view_([depth, cols])?
				};
				// Straight into the output's storage: no temporary.
				in_place(a.f_mm_out(&out.f_view_([rows, cols])?, &b))?;
			},
			Contraction::BatchedMatmul { blocks, shape, layout } => {
				let (b, m, k, n) = (dim(blocks), dim(shape.m), dim(shape.k), dim(shape.n));
				let a = if layout.lhs_transposed { lhs.f_view_([b, k, m])?.f_transpose(1, 2)? } else { lhs.f_view_([b, m, k])? };
				let w = if layout.rhs_transposed { rhs.f_view_([b, n, k])?.f_transpose(1, 2)? } else { rhs.f_view_([b, k, n])? };
				Self::write(out, a.f_bmm(&w))?;
			},
			Contraction::Conv2d(shape) => {
				let x = lhs.f_view_(conv_input_shape(&shape))?;
				let w = rhs.f_view_(conv_weight_shape(&shape))?;
				Self::write(out, x.f_conv2d(&w, None::<Tensor>, [1, 1], [0, 0], [1, 1], 1))?;
			},
			Contraction::Conv2dInputGrad(shape) => {
				// dx = conv_transpose2d(dy, w): the adjoint of the valid convolution.
				let dy = lhs.f_view_(conv_output_shape(&shape))?;
				let w = rhs.f_view_(conv_weight_shape(&shape))?;
				Self::write(out, dy.f_conv_transpose2d(&w, None::<Tensor>, [1, 1], [0, 0], [0, 0], 1, [1, 1]))?;
			},
			Contraction::Conv2dWeightGrad(shape) => {
				// dw[co, ci] = Σₙ dy[n, co] ⋆ x[n, ci]: a convolution with batch and
				// channels swapped, whose [Ci, Co, KH, KW] result is transposed back.
				let dy = lhs.f_view_(conv_output_shape(&shape))?.f_transpose(0, 1)?;
				let x = rhs.f_view_(conv_input_shape(&shape))?.f_transpose(0, 1)?;
				let dw = x.f_conv2d(&dy, None::<Tensor>, [1, 1], [0, 0], [1, 1], 1)?.f_transpose(0, 1)?;
				Self::write(out, dw.f_contiguous())?;
			},
		}
		Ok(())
	}

	fn bias_add(&mut self, layout: BiasLayout, values: &mut Tensor, bias: &Tensor) -> Result<(), TorchError> {
		check_len("values", values.numel(), layout.values_len()?)?;
		check_len("bias", bias.numel(), layout.channels)?;
		let mut view = values.f_view_([dim(layout.outer), dim(layout.channels), dim(layout.inner)])?;
		in_place(view.f_add_(&bias.f_view_([1, dim(layout.channels), 1])?))?;
		Ok(())
	}

	fn bias_grad(&mut self, layout: BiasLayout, out_grad: &Tensor, bias_grad: &mut Tensor) -> Result<(), TorchError> {
		check_len("out_grad", out_grad.numel(), layout.values_len()?)?;
		check_len("bias_grad", bias_grad.numel(), layout.channels)?;
		let view = out_grad.f_view_([dim(layout.outer), dim(layout.channels), dim(layout.inner)])?;
		Self::write(bias_grad, view.f_sum_dim_intlist([0i64, 2].as_slice(), false, Kind::Float))
	}

	fn activation(&mut self, kind: Activation, input: &Tensor, output: &mut Tensor) -> Result<(), TorchError> {
		check_len("output", output.numel(), input.numel())?;
		let result = match kind {
			Activation::Relu => input.f_relu(),
			Activation::Tanh => input.f_tanh(),
			Activation::GeluTanh => input.f_gelu("tanh"),
		};
		Self::write(output, result)
	}

	fn activation_grad(
		&mut self,
		kind: Activation,
		input: &Tensor,
		output_grad: &Tensor,
		input_grad: &mut Tensor,
	) -> Result<(), TorchError> {
		check_len("output_grad", output_grad.numel(), input.numel())?;
		check_len("input_grad", input_grad.numel(), input.numel())?;
		// The kernels autograd itself calls for these functions.
		let result = match kind {
			Activation::Relu => input.f_threshold_backward(output_grad, 0.0),
			Activation::Tanh => Tensor::f_tanh_backward(output_grad, &input.f_tanh()?),
			Activation::GeluTanh => input.f_gelu_backward(output_grad, "tanh"),
		};
		Self::write(input_grad, result)
	}

	fn softmax_cross_entropy(
		&mut self,
		shape: ClassifierShape,
		logits: &Tensor,
		labels: &TorchIndices,
		loss: &mut Tensor,
		logits_grad: &mut Tensor,
	) -> Result<(), TorchError> {
		// The reference's checks, in its order.
		check_len("loss", loss.numel(), 1)?;
		check_len("logits", logits.numel(), shape.logits_len()?)?;
		check_len("labels", labels.host.len(), shape.rows)?;
		for (row, &label) in labels.host.iter().enumerate() {
			if usize::try_from(label).map_or(true, |label| label >= shape.classes) {
				return Err(KernelError::LabelOutOfRange { row, label, classes: shape.classes }.into());
			}
		}
		check_len("logits_grad", logits_grad.numel(), logits.numel())?;
		let (rows, classes) = (dim(shape.rows), dim(shape.classes));
		let log_probabilities = logits.f_view_([rows, classes])?.f_log_softmax(-1, Kind::Float)?;
		Self::write(loss, log_probabilities.f_nll_loss(&labels.tensor, None::<Tensor>, Reduction::Mean, -100))?;
		// d(mean loss)/dz = (softmax − one-hot) / rows.
		let one_hot = labels.tensor.f_one_hot(classes)?.f_to_kind(Kind::Float)?;
		let grad = log_probabilities.f_exp()?.f_sub(&one_hot)?.f_div_scalar(rows as f64)?;
		Self::write(logits_grad, Ok(grad))
	}

	fn gather_rows(
		&mut self,
		source: &Tensor,
		row_len: usize,
		indices: &TorchIndices,
		destination: &mut Tensor,
	) -> Result<(), TorchError> {
		// The reference's checks, in its order.
		check_nonzero("row_len", row_len)?;
		check_len("destination", destination.numel(), element_count(&[indices.host.len(), row_len])?)?;
		let source_rows = source.numel() / row_len;
		check_len("source", source.numel(), element_count(&[source_rows, row_len])?)?;
		if let Some(&index) = indices.host.iter().find(|&&index| index as usize >= source_rows) {
			return Err(KernelError::IndexOutOfRange { index, rows: source_rows }.into());
		}
		let rows = source.f_view_([dim(source_rows), dim(row_len)])?;
		Self::write(destination, rows.f_index_select(0, &indices.tensor))
	}

	fn sgd_momentum(
		&mut self,
		hyper: &SgdMomentum,
		param: &mut Tensor,
		grad: &Tensor,
		velocity: &mut Tensor,
	) -> Result<(), TorchError> {
		let hyper = hyper.validated()?;
		check_len("grads", grad.numel(), param.numel())?;
		check_len("velocity", velocity.numel(), param.numel())?;
		// torch.optim.SGD (dampening 0): g = grad + wd·p; v = μ·v + g; p −= lr·(nesterov ? g + μ·v : v).
		let mut g = grad.f_add(&param.f_mul_scalar(f64::from(hyper.weight_decay))?)?;
		in_place(velocity.f_mul_scalar_(f64::from(hyper.momentum)))?;
		in_place(velocity.f_add_(&g))?;
		let update = if hyper.nesterov {
			in_place(g.f_add_(&velocity.f_mul_scalar(f64::from(hyper.momentum))?))?;
			g
		} else {
			velocity.shallow_clone()
		};
		in_place(param.f_sub_(&update.f_mul_scalar(f64::from(hyper.learning_rate))?))?;
		Ok(())
	}

	fn adamw(
		&mut self,
		scalars: &AdamWScalars,
		param: &mut Tensor,
		grad: &Tensor,
		first_moment: &mut Tensor,
		second_moment: &mut Tensor,
	) -> Result<(), TorchError> {
		check_len("grads", grad.numel(), param.numel())?;
		check_len("first_moment", first_moment.numel(), param.numel())?;
		check_len("second_moment", second_moment.numel(), param.numel())?;
		let s = scalars;
		// torch.optim.AdamW's single-tensor path: decay; m.lerp_(g, 1 − β₁);
		// v = β₂·v + (1 − β₂)·g²; p −= step·m / (√v · k₂ + ε).
		in_place(param.f_mul_scalar_(f64::from(s.decay)))?;
		in_place(first_moment.f_lerp_(grad, f64::from(s.one_minus_beta1)))?;
		in_place(second_moment.f_mul_scalar_(f64::from(s.beta2)))?;
		in_place(second_moment.f_add_(&grad.f_square()?.f_mul_scalar(f64::from(s.one_minus_beta2))?))?;
		let denominator = second_moment
			.f_sqrt()?
			.f_mul_scalar(f64::from(s.second_moment_scale))?
			.f_add_scalar(f64::from(s.epsilon))?;
		in_place(param.f_sub_(&first_moment.f_div(&denominator)?.f_mul_scalar(f64::from(s.step_size))?))?;
		Ok(())
	}

	fn clip_grad_norm(
		&mut self,
		max_norm: f32,
		grads: &mut [&mut Tensor],
		norm: &mut Tensor,
	) -> Result<(), TorchError> {
		check_len("norm", norm.numel(), 1)?;
		// The reference validates `max_norm` before touching a tensor; run it
		// on no tensors to get exactly its checks and errors.
		optim::clip_grad_norm(&mut [], max_norm)?;
		// clip_grad_norm_: the norm of the per-tensor norms; multiply by
		// clamp(max / (norm + 1e-6), max = 1), with no host synchronisation.
		let mut norms = Vec::with_capacity(grads.len());
		for grad in grads.iter() {
			norms.push(grad.f_norm()?);
		}
		let total = if norms.is_empty() {
			Tensor::f_zeros([], (Kind::Float, self.device))?
		} else {
			Tensor::f_stack(&norms, 0)?.f_norm()?
		};
		let coefficient =
			total.f_add_scalar(CLIP_EPSILON)?.f_reciprocal()?.f_mul_scalar(f64::from(max_norm))?.f_clamp_max(1.0)?;
		for grad in grads.iter_mut() {
			in_place(grad.f_mul_(&coefficient))?;
		}
		Self::write(norm, Ok(total))
	}

	fn norm(
		&mut self,
		shape: NormShape,
		x: &Tensor,
		gamma: &Tensor,
		beta: Option<&Tensor>,
		y: &mut Tensor,
		normalised: &mut Tensor,
	) -> Result<(), TorchError> {
		// The reference's checks, in its order.
		let len = shape.values_len()?;
		check_len("x", x.numel(), len)?;
		check_len("gamma", gamma.numel(), shape.width)?;
		check_len("beta", beta.map_or(0, Tensor::numel), shape.bias_len())?;
		check_len("y", y.numel(), len)?;
		check_len("normalised", normalised.numel(), len)?;
		let rows = x.f_view_([dim(shape.rows), dim(shape.width)])?;
		let (width, epsilon) = ([dim(shape.width)], f64::from(shape.epsilon));
		// `x̂` is the norm without its affine map; `y` is torch's own fused norm.
		let (result, rows_normalised) = match shape.norm {
			Norm::Layer => (
				rows.f_layer_norm(width.as_slice(), Some(gamma), beta, epsilon, false),
				rows.f_layer_norm(width.as_slice(), None::<&Tensor>, None::<&Tensor>, epsilon, false),
			),
			Norm::Rms => (rows.f_rms_norm(width.as_slice(), Some(gamma), epsilon), rows.f_rms_norm(width.as_slice(), None::<&Tensor>, epsilon)),
		};
		Self::write(y, result)?;
		Self::write(normalised, rows_normalised)
	}

	fn norm_backward(
		&mut self,
		shape: NormShape,
		x: &Tensor,
		gamma: &Tensor,
		dy: &Tensor,
		forward_normalised: &Tensor,
		x_grad: &mut Tensor,
		gamma_grad: &mut Tensor,
		beta_grad: Option<&mut Tensor>,
	) -> Result<(), TorchError> {
		// The reference's checks, in its order.
		let len = shape.values_len()?;
		check_len("x", x.numel(), len)?;
		check_len("gamma", gamma.numel(), shape.width)?;
		check_len("beta_grad", beta_grad.as_ref().map_or(0, |beta| beta.numel()), shape.bias_len())?;
		check_len("dy", dy.numel(), len)?;
		check_len("normalised", forward_normalised.numel(), len)?;
		check_len("x_grad", x_grad.numel(), len)?;
		check_len("gamma_grad", gamma_grad.numel(), shape.width)?;
		// The closed form autograd's layer-norm and RMS-norm backward compute; `dγ` sums
		// the forward's `x̂`, as the contract does.
		let (rows, width) = (dim(shape.rows), dim(shape.width));
		let x = x.f_view_([rows, width])?;
		let dy = dy.f_view_([rows, width])?;
		let mean_of = |t: &Tensor| t.f_mean_dim([-1i64].as_slice(), true, Kind::Float);
		let centred = match shape.norm {
			Norm::Layer => x.f_sub(&mean_of(&x)?)?,
			Norm::Rms => x.shallow_clone(),
		};
		let r = mean_of(&centred.f_mul(&centred)?)?.f_add_scalar(f64::from(shape.epsilon))?.f_rsqrt()?;
		let normalised = centred.f_mul(&r)?;
		let g = dy.f_mul(&gamma.f_view_([1, width])?)?;
		let b = mean_of(&g.f_mul(&normalised)?)?;
		let centred_g = match shape.norm {
			Norm::Layer => g.f_sub(&mean_of(&g)?)?,
			Norm::Rms => g,
		};
		Self::write(x_grad, r.f_mul(&centred_g.f_sub(&normalised.f_mul(&b)?)?))?;
		let forward_normalised = forward_normalised.f_view_([rows, width])?;
		Self::write(gamma_grad, dy.f_mul(&forward_normalised)?.f_sum_dim_intlist([0i64].as_slice(), false, Kind::Float))?;
		if let Some(beta_grad) = beta_grad {
			Self::write(beta_grad, dy.f_sum_dim_intlist([0i64].as_slice(), false, Kind::Float))?;
		}
		Ok(())
	}

	fn add_assign(&mut self, into: &mut Tensor, other: &Tensor) -> Result<(), TorchError> {
		check_len("other", other.numel(), into.numel())?;
		in_place(into.f_add_(other))
	}

	fn split_heads(&mut self, shape: HeadsShape, side_by_side: &Tensor, blocked: &mut Tensor) -> Result<(), TorchError> {
		let len = shape.values_len()?;
		check_len("side_by_side", side_by_side.numel(), len)?;
		check_len("blocked", blocked.numel(), len)?;
		let (s, t, h, d) = heads_dims(shape);
		let view = side_by_side.f_view_([s, t, h, d])?.f_permute([0i64, 2, 1, 3].as_slice())?;
		Self::write(blocked, view.f_contiguous())
	}

	fn merge_heads(&mut self, shape: HeadsShape, blocked: &Tensor, side_by_side: &mut Tensor) -> Result<(), TorchError> {
		let len = shape.values_len()?;
		check_len("blocked", blocked.numel(), len)?;
		check_len("side_by_side", side_by_side.numel(), len)?;
		let (s, t, h, d) = heads_dims(shape);
		let view = blocked.f_view_([s, h, t, d])?.f_permute([0i64, 2, 1, 3].as_slice())?;
		Self::write(side_by_side, view.f_contiguous())
	}

	fn scatter_add_rows(
		&mut self,
		dy: &Tensor,
		row_len: usize,
		ids: &TorchIndices,
		table_rows: usize,
		dtable: &mut Tensor,
	) -> Result<(), TorchError> {
		// The reference's checks, in its order.
		check_nonzero("row_len", row_len)?;
		check_nonzero("table_rows", table_rows)?;
		check_len("dy", dy.numel(), element_count(&[ids.host.len(), row_len])?)?;
		check_len("dtable", dtable.numel(), element_count(&[table_rows, row_len])?)?;
		if let Some(&index) = ids.host.iter().find(|&&index| index as usize >= table_rows) {
			return Err(KernelError::IndexOutOfRange { index, rows: table_rows }.into());
		}
		// The embedding backward autograd runs: an index_add into zeros.
		let zeros = Tensor::f_zeros([dim(table_rows), dim(row_len)].as_slice(), (Kind::Float, self.device))?;
		Self::write(dtable, zeros.f_index_add(0, &ids.tensor, &dy.f_view_([dim(ids.host.len()), dim(row_len)])?))
	}

	fn causal_softmax(&mut self, shape: CausalShape, scores: &Tensor, probs: &mut Tensor) -> Result<(), TorchError> {
		let len = shape.scores_len()?;
		check_len("scores", scores.numel(), len)?;
		check_len("probs", probs.numel(), len)?;
		let t = dim(shape.positions);
		// The keys after each query, masked to −∞ before the softmax (PyTorch's causal mask).
		let future = Tensor::f_ones([t, t].as_slice(), (Kind::Bool, self.device))?.f_triu(1)?;
		let scaled = scores.f_view_([dim(shape.blocks), t, t])?.f_mul_scalar(f64::from(shape.scale))?;
		Self::write(probs, scaled.f_masked_fill(&future, f64::NEG_INFINITY)?.f_softmax(-1, Kind::Float))
	}

	fn causal_softmax_grad(
		&mut self,
		shape: CausalShape,
		probs: &Tensor,
		probs_grad: &Tensor,
		scores_grad: &mut Tensor,
	) -> Result<(), TorchError> {
		let len = shape.scores_len()?;
		check_len("probs", probs.numel(), len)?;
		check_len("probs_grad", probs_grad.numel(), len)?;
		check_len("scores_grad", scores_grad.numel(), len)?;
		let t = dim(shape.positions);
		let p = probs.f_view_([dim(shape.blocks), t, t])?;
		let dp = probs_grad.f_view_([dim(shape.blocks), t, t])?;
		let total = p.f_mul(&dp)?.f_sum_dim_intlist([-1i64].as_slice(), true, Kind::Float)?;
		Self::write(scores_grad, p.f_mul(&dp.f_sub(&total)?)?.f_mul_scalar(f64::from(shape.scale)))
	}
}

/// `[N, Ci, H, W]`.
fn conv_input_shape(shape: &touchstone_kernels::ops::contraction::Conv2dShape) -> [i64; 4] {
	[dim(shape.batch), dim(shape.in_channels), dim(shape.height), dim(shape.width)]
}

/// `[Co, Ci, KH, KW]`.
fn conv_weight_shape(shape: &touchstone_kernels::ops::contraction::Conv2dShape) -> [i64; 4] {
	[dim(shape.out_channels), dim(shape.in_channels), dim(shape.kernel_height), dim(shape.kernel_width)]
}

/// `[N, Co, OH, OW]`.
fn conv_output_shape(shape: &touchstone_kernels::ops::contraction::Conv2dShape) -> [i64; 4] {
	[dim(shape.batch), dim(shape.out_channels), dim(shape.out_height()), dim(shape.out_width())]
}

/// Re-executes `steps` steps of a job on libtorch from `state` (parameters
/// then optimizer moments, as [`Trainer::state`] returns them) at global step
/// `first_step`, with the job's own batches, and returns the [`Distance`] of
/// the parameters it ends with from the reference's after the same segment
/// ([`distance::reference_distance`]). This is the figure tolerance mode
/// compares against a job's threshold for a segment of `steps` steps.
pub fn distance_to_reference(
	model: &ModelConfig,
	train: &TrainConfig,
	data: &Dataset,
	state: &[Vec<f32>],
	first_step: u32,
	steps: u32,
) -> Result<Distance, TorchError> {
	// Only the parameters are compared here, not the records.
	let point = ChainPoint::start(first_step);
	let mut torch = Trainer::resume(TchBackend::cpu(), model, train, data.clone(), state.to_vec(), point)?;
	for _ in 0..steps {
		torch.step()?;
	}
	Ok(distance::reference_distance(model, train, data, state, first_step, steps, &torch.params()?)?)
}

//! The backend trait a training loop is generic over.
//!
//! A backend owns device-resident buffers and runs the contract's operators on
//! them. The CPU reference ([`crate::exec::cpu::CpuBackend`]) is the specification;
//! a `wgpu` backend must produce the same bits for every operator, and a `tch`
//! backend (not bit-reproducible) reports [`Backend::is_bit_exact`] `false` so
//! that its jobs are verified in tolerance mode.
//!
//! The trait is shaped for a GPU: tensors stay on the device between calls,
//! operators write into buffers the caller allocated (so a training step
//! allocates nothing), scalar results such as the loss and the gradient norm
//! land in one-element device tensors instead of forcing a read-back, and
//! per-step host scalars (AdamW's bias corrections) are derived once by
//! [`AdamW::scalars`](crate::ops::optim::AdamW::scalars) and passed in. A backend may
//! queue work and run it lazily; [`Backend::download`] is the synchronisation
//! point.
//!
//! Shapes travel as the same structs the reference functions take, and every
//! method checks buffer lengths against them and fails with
//! [`KernelError`] rather than panicking.

use alloc::vec::Vec;

use crate::ops::activation::Activation;
use crate::ops::attention::CausalShape;
use crate::ops::heads::HeadsShape;
use crate::ops::norm::NormShape;
use crate::ops::bias::BiasLayout;
use crate::ops::contraction::Contraction;
use crate::ops::contraction::Conv2dShape;
use crate::error::KernelError;
use crate::ops::loss::ClassifierShape;
use crate::ops::contraction::{MatmulLayout, MatmulShape};
use crate::ops::optim::{AdamWScalars, SgdMomentum};
use crate::proof::hash::Digest;

/// A device that runs the determinism contract's operators on its own buffers.
pub trait Backend {
	/// A device-resident buffer of `f32`s.
	type Tensor;
	/// A device-resident buffer of `u32`s: labels and row indices.
	type Indices;
	/// What can go wrong: at least every [`KernelError`], plus device failures.
	type Error: From<KernelError> + core::fmt::Debug;

	/// A short name for logs and benchmark tables, such as `cpu-reference`.
	fn name(&self) -> &str;

	/// Whether every operator's output is bit-identical to the CPU reference.
	fn is_bit_exact(&self) -> bool;

	/// Copies `values` to a new device tensor, unchanged. External data must be
	/// brought onto the contract's grid first with
	/// [`canonicalize`](crate::arith::canonicalize).
	fn upload(&mut self, values: &[f32]) -> Result<Self::Tensor, Self::Error>;

	/// Copies `values` to a new device index buffer.
	fn upload_indices(&mut self, values: &[u32]) -> Result<Self::Indices, Self::Error>;

	/// A new device tensor of `len` zeros.
	fn zeros(&mut self, len: usize) -> Result<Self::Tensor, Self::Error>;

	/// Copies a device tensor back to the host, after all queued work on it.
	fn download(&mut self, tensor: &Self::Tensor) -> Result<Vec<f32>, Self::Error>;

	/// Checks `tensor` for NaN or an infinity (rule 7 makes a step that produces
	/// one anywhere invalid): `Some(finite)` when the answer is known at once,
	/// `None` when the check is queued on the device and
	/// [`Backend::take_non_finite`] reports it. The default downloads the tensor.
	fn check_finite(&mut self, tensor: &Self::Tensor) -> Result<Option<bool>, Self::Error> {
		Ok(Some(self.download(tensor)?.iter().all(|value| value.is_finite())))
	}

	/// Whether a check queued since the last call found a non-finite value;
	/// clears the queued result. The default queues nothing.
	fn take_non_finite(&mut self) -> Result<bool, Self::Error> {
		Ok(false)
	}

	/// The state root ([`crate::proof::state_tree::root`]) of `tensors`, in
	/// order, hashed where they live: `Some(root)` when the backend hashes on
	/// its own side, `None` when it does not, and the caller downloads the
	/// tensors and hashes them on the host. The default is `None`.
	fn state_root(&mut self, tensors: &[&Self::Tensor]) -> Result<Option<Digest>, Self::Error> {
		let _ = tensors;
		Ok(None)
	}

	/// Elements in `tensor`.
	fn tensor_len(&self, tensor: &Self::Tensor) -> usize;

	/// Runs a contraction (a matmul or a convolution pass): `out = lhs ⋆ rhs`.
	fn contract(
		&mut self,
		contraction: Contraction,
		lhs: &Self::Tensor,
		rhs: &Self::Tensor,
		out: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `values[o,c,i] += bias[c]`.
	fn bias_add(
		&mut self,
		layout: BiasLayout,
		values: &mut Self::Tensor,
		bias: &Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `bias_grad[c]` = chunked sum of `out_grad[o,c,i]` over `(o, i)`.
	fn bias_grad(
		&mut self,
		layout: BiasLayout,
		out_grad: &Self::Tensor,
		bias_grad: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `output = f(input)` element-wise.
	fn activation(
		&mut self,
		kind: Activation,
		input: &Self::Tensor,
		output: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `input_grad = output_grad · f′(input)` element-wise.
	fn activation_grad(
		&mut self,
		kind: Activation,
		input: &Self::Tensor,
		output_grad: &Self::Tensor,
		input_grad: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// Mean softmax cross-entropy into the one-element `loss`, and its gradient
	/// with respect to the logits into `logits_grad`.
	fn softmax_cross_entropy(
		&mut self,
		shape: ClassifierShape,
		logits: &Self::Tensor,
		labels: &Self::Indices,
		loss: &mut Self::Tensor,
		logits_grad: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `destination[r] = source[indices[r]]` for rows of `row_len` elements:
	/// assembles a batch from a device-resident dataset.
	fn gather_rows(
		&mut self,
		source: &Self::Tensor,
		row_len: usize,
		indices: &Self::Indices,
		destination: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// One SGD-with-momentum update of `param` and `velocity`.
	fn sgd_momentum(
		&mut self,
		hyper: &SgdMomentum,
		param: &mut Self::Tensor,
		grad: &Self::Tensor,
		velocity: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// One AdamW update of `param` and its two moments.
	fn adamw(
		&mut self,
		scalars: &AdamWScalars,
		param: &mut Self::Tensor,
		grad: &Self::Tensor,
		first_moment: &mut Self::Tensor,
		second_moment: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// Global-norm clipping of `grads` (in this order) to `max_norm`; the norm
	/// before clipping goes to the one-element `norm`.
	fn clip_grad_norm(
		&mut self,
		max_norm: f32,
		grads: &mut [&mut Self::Tensor],
		norm: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// LayerNorm or RMSNorm of every row of `x` ([`crate::ops::norm::norm_forward`]):
	/// `y = x̂ ⊗ γ (+ β)`, and the normalised rows `x̂` themselves. `beta` is the bias for
	/// LayerNorm and `None` for RMSNorm.
	#[allow(clippy::too_many_arguments)]
	fn norm(
		&mut self,
		shape: NormShape,
		x: &Self::Tensor,
		gamma: &Self::Tensor,
		beta: Option<&Self::Tensor>,
		y: &mut Self::Tensor,
		normalised: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// The normalisation's backward ([`crate::ops::norm::norm_backward`]) from the forward
	/// input `x`, the gain, the output gradient `dy` and the forward's `normalised` rows
	/// (which `dγ` sums): writes `dx`, `dγ` and, for LayerNorm, `dβ` (`None` for RMSNorm).
	#[allow(clippy::too_many_arguments)]
	fn norm_backward(
		&mut self,
		shape: NormShape,
		x: &Self::Tensor,
		gamma: &Self::Tensor,
		dy: &Self::Tensor,
		normalised: &Self::Tensor,
		x_grad: &mut Self::Tensor,
		gamma_grad: &mut Self::Tensor,
		beta_grad: Option<&mut Self::Tensor>,
	) -> Result<(), Self::Error>;

	/// The causal softmax of attention scores ([`crate::ops::attention::causal_softmax`]):
	/// each row's probabilities over the keys at or before it, masked entries `+0`.
	fn causal_softmax(&mut self, shape: CausalShape, scores: &Self::Tensor, probs: &mut Self::Tensor) -> Result<(), Self::Error>;

	/// The causal softmax's backward ([`crate::ops::attention::causal_softmax_grad`]) from
	/// the forward's `probs` and their gradient.
	fn causal_softmax_grad(
		&mut self,
		shape: CausalShape,
		probs: &Self::Tensor,
		probs_grad: &Self::Tensor,
		scores_grad: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `[sequences, T, heads · d]` to `[sequences · heads, T, d]` ([`crate::ops::heads::split_heads`]), a bit copy.
	fn split_heads(&mut self, shape: HeadsShape, side_by_side: &Self::Tensor, blocked: &mut Self::Tensor) -> Result<(), Self::Error>;

	/// `[sequences · heads, T, d]` back to `[sequences, T, heads · d]` ([`crate::ops::heads::merge_heads`]).
	fn merge_heads(&mut self, shape: HeadsShape, blocked: &Self::Tensor, side_by_side: &mut Self::Tensor) -> Result<(), Self::Error>;

	/// The gradient of a row lookup: `dtable[v]` = the chunked sum, in row order, of the
	/// rows of `dy` whose index is `v` ([`crate::ops::embedding::scatter_add_rows`]).
	fn scatter_add_rows(
		&mut self,
		dy: &Self::Tensor,
		row_len: usize,
		ids: &Self::Indices,
		table_rows: usize,
		dtable: &mut Self::Tensor,
	) -> Result<(), Self::Error>;

	/// `into += other`, one `f32` addition per element ([`crate::ops::residual::add_assign`]):
	/// the residual stream, and a value's readers' gradients summed in graph order.
	fn add_assign(&mut self, into: &mut Self::Tensor, other: &Self::Tensor) -> Result<(), Self::Error>;

	/// `out = op(lhs) · op(rhs)`: a [`Contraction::Matmul`].
	fn matmul(
		&mut self,
		shape: MatmulShape,
		layout: MatmulLayout,
		lhs: &Self::Tensor,
		rhs: &Self::Tensor,
		out: &mut Self::Tensor,
	) -> Result<(), Self::Error> {
		self.contract(shape.contraction(layout), lhs, rhs, out)
	}

	/// `blocks` matmuls of one shape and layout, block by block
	/// ([`crate::ops::heads::batched_matmul`]): a [`Contraction::BatchedMatmul`], attention's
	/// `QKᵀ`, `PV` and their gradients.
	fn batched_matmul(
		&mut self,
		blocks: usize,
		shape: MatmulShape,
		layout: MatmulLayout,
		lhs: &Self::Tensor,
		rhs: &Self::Tensor,
		out: &mut Self::Tensor,
	) -> Result<(), Self::Error> {
		self.contract(Contraction::BatchedMatmul { blocks, shape, layout }, lhs, rhs, out)
	}

	/// `output = conv2d(input, weight)`: a [`Contraction::Conv2d`].
	fn conv2d(
		&mut self,
		shape: Conv2dShape,
		input: &Self::Tensor,
		weight: &Self::Tensor,
		output: &mut Self::Tensor,
	) -> Result<(), Self::Error> {
		self.contract(Contraction::Conv2d(shape), input, weight, output)
	}
}

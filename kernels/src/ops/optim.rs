//! Optimizers and gradient clipping: SGD with momentum, AdamW, global-norm clipping.
//!
//! # Contract
//!
//! `⊗` is the contract multiplication (rounded product, flushed below 2⁻¹⁰³);
//! `sqrt`, `rsqrt`, `recip` and `powi` are [`crate::arith::math`]'s. Scalars that do
//! not depend on the element are derived once per step, on the host, by the
//! functions here ([`AdamW::scalars`]), and passed to every backend as `f32`s;
//! a port must not re-derive them in a shader. Per element, in this order:
//!
//! - **SGD with momentum** (PyTorch semantics, no dampening):
//!   `g = grad + wd ⊗ p`; `v ← μ ⊗ v + g`;
//!   `u = nesterov ? g + μ ⊗ v : v`; `p ← p − lr ⊗ u`.
//! - **AdamW** (decoupled weight decay, step `t ≥ 1`): host scalars
//!   `decay = 1 − lr ⊗ wd`, `c₁ = 1 − powi(β₁, t)`, `c₂ = 1 − powi(β₂, t)`,
//!   `step = lr ⊗ recip(c₁)`, `k₂ = rsqrt(c₂)`; then
//!   `p ← p ⊗ decay`; `m ← β₁ ⊗ m + (1 − β₁) ⊗ g`;
//!   `v ← β₂ ⊗ v + (1 − β₂) ⊗ (g ⊗ g)`;
//!   `p ← p − step ⊗ (m ⊗ recip(sqrt(v) ⊗ k₂ + ε))`.
//! - **Global-norm clipping**: each tensor's sum of squares `g ⊗ g` is a
//!   chunked sum (32-wide chunks, sequential from `+0`, folded from `+0`); the
//!   tensors' sums are folded sequentially from `+0` in the order given;
//!   `norm = sqrt(total)`; `c = max_norm ⊗ recip(norm + 10⁻⁶)`; when `c < 1`
//!   every gradient element becomes `g ⊗ c`, otherwise all are left unchanged
//!   (PyTorch's `clip_grad_norm_`, which multiplies by `min(c, 1)`).

use crate::arith::{chunked_sum, flush, mul, FLUSH_THRESHOLD};
use crate::error::{check_len, KernelError};
use crate::arith::math::{powi, recip, rsqrt, sqrt};

/// The ε that clipping adds to the norm before dividing by it (PyTorch's).
const CLIP_EPSILON: f32 = f32::from_bits(0x3586_37BD); // 1e-6

/// SGD with momentum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdMomentum {
	/// Learning rate.
	pub learning_rate: f32,
	/// Momentum factor μ.
	pub momentum: f32,
	/// L2 penalty added to the gradient.
	pub weight_decay: f32,
	/// Nesterov momentum.
	pub nesterov: bool,
}

/// AdamW's hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamW {
	/// Learning rate.
	pub learning_rate: f32,
	/// Decay of the first moment, β₁.
	pub beta1: f32,
	/// Decay of the second moment, β₂.
	pub beta2: f32,
	/// ε added to the denominator.
	pub epsilon: f32,
	/// Decoupled weight decay.
	pub weight_decay: f32,
}

/// The per-step scalars of an AdamW update, derived on the host by [`AdamW::scalars`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWScalars {
	/// `1 − lr ⊗ wd`: the weight-decay factor.
	pub decay: f32,
	/// β₁.
	pub beta1: f32,
	/// `1 − β₁`.
	pub one_minus_beta1: f32,
	/// β₂.
	pub beta2: f32,
	/// `1 − β₂`.
	pub one_minus_beta2: f32,
	/// `lr ⊗ recip(1 − β₁ᵗ)`.
	pub step_size: f32,
	/// `rsqrt(1 − β₂ᵗ)`.
	pub second_moment_scale: f32,
	/// ε.
	pub epsilon: f32,
}

/// `InvalidHyperparameter` unless `value` is finite and within `[low, high)`
/// (or `[low, high]` when `high_inclusive`).
fn check_range(name: &'static str, value: f32, low: f32, high: f32, high_inclusive: bool) -> Result<(), KernelError> {
	let below_high = if high_inclusive { value <= high } else { value < high };
	if value.is_finite() && value >= low && below_high {
		Ok(())
	} else {
		Err(KernelError::InvalidHyperparameter { name })
	}
}

impl SgdMomentum {
	/// Checks the hyper-parameters and brings them onto the contract's grid.
	pub fn validated(&self) -> Result<Self, KernelError> {
		check_range("learning_rate", self.learning_rate, 0.0, f32::MAX, true)?;
		check_range("momentum", self.momentum, 0.0, 1.0, false)?;
		check_range("weight_decay", self.weight_decay, 0.0, f32::MAX, true)?;
		Ok(Self {
			learning_rate: flush(self.learning_rate),
			momentum: flush(self.momentum),
			weight_decay: flush(self.weight_decay),
			nesterov: self.nesterov,
		})
	}
}

impl AdamW {
	/// The scalars of update number `step` (counted from 1), after checking
	/// the hyper-parameters.
	pub fn scalars(&self, step: u32) -> Result<AdamWScalars, KernelError> {
		if step == 0 {
			return Err(KernelError::InvalidHyperparameter { name: "step" });
		}
		check_range("learning_rate", self.learning_rate, 0.0, f32::MAX, true)?;
		check_range("beta1", self.beta1, 0.0, 1.0, false)?;
		check_range("beta2", self.beta2, 0.0, 1.0, false)?;
		check_range("weight_decay", self.weight_decay, 0.0, f32::MAX, true)?;
		// ε keeps every denominator at least ε, so flush must not erase it.
		check_range("epsilon", self.epsilon, FLUSH_THRESHOLD, 1.0, true)?;
		let learning_rate = flush(self.learning_rate);
		let beta1 = flush(self.beta1);
		let beta2 = flush(self.beta2);
		let first_correction = 1.0 - powi(beta1, step);
		let second_correction = 1.0 - powi(beta2, step);
		Ok(AdamWScalars {
			decay: 1.0 - mul(learning_rate, flush(self.weight_decay)),
			beta1,
			one_minus_beta1: 1.0 - beta1,
			beta2,
			one_minus_beta2: 1.0 - beta2,
			step_size: mul(learning_rate, recip(first_correction)),
			second_moment_scale: rsqrt(second_correction),
			epsilon: flush(self.epsilon),
		})
	}
}

widest_vectors! {
	/// One SGD-with-momentum update of `params` and `velocity` from `grads`.
	pub fn sgd_momentum_step(
		hyper: &SgdMomentum,
		params: &mut [f32],
		grads: &[f32],
		velocity: &mut [f32],
	) -> Result<(), KernelError> {
		let hyper = hyper.validated()?;
		check_len("grads", grads.len(), params.len())?;
		check_len("velocity", velocity.len(), params.len())?;
		for ((p, &grad), v) in params.iter_mut().zip(grads).zip(velocity.iter_mut()) {
			let g = grad + mul(hyper.weight_decay, *p);
			*v = mul(hyper.momentum, *v) + g;
			let update = if hyper.nesterov { g + mul(hyper.momentum, *v) } else { *v };
			*p -= mul(hyper.learning_rate, update);
		}
		Ok(())
	}
}

widest_vectors! {
	/// One AdamW update of `params` and both moments from `grads`.
	pub fn adamw_step(
		scalars: &AdamWScalars,
		params: &mut [f32],
		grads: &[f32],
		first_moment: &mut [f32],
		second_moment: &mut [f32],
	) -> Result<(), KernelError> {
		check_len("grads", grads.len(), params.len())?;
		check_len("first_moment", first_moment.len(), params.len())?;
		check_len("second_moment", second_moment.len(), params.len())?;
		let s = scalars;
		for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(first_moment.iter_mut()).zip(second_moment.iter_mut()) {
			*p = mul(*p, s.decay);
			*m = mul(s.beta1, *m) + mul(s.one_minus_beta1, g);
			*v = mul(s.beta2, *v) + mul(s.one_minus_beta2, mul(g, g));
			let denominator = mul(sqrt(*v), s.second_moment_scale) + s.epsilon;
			*p -= mul(s.step_size, mul(*m, recip(denominator)));
		}
		Ok(())
	}
}

/// The global L2 norm of several gradient tensors, in the contract's order.
pub fn global_grad_norm<'a>(grads: impl IntoIterator<Item = &'a [f32]>) -> f32 {
	let mut total = 0.0f32;
	for tensor in grads {
		total += chunked_sum(tensor.iter().map(|&g| mul(g, g)));
	}
	sqrt(total)
}

/// Scales every gradient by `max_norm / (norm + 10⁻⁶)` when that is below 1;
/// returns the norm before clipping.
pub fn clip_grad_norm(grads: &mut [&mut [f32]], max_norm: f32) -> Result<f32, KernelError> {
	check_range("max_norm", max_norm, FLUSH_THRESHOLD, f32::MAX, true)?;
	let norm = global_grad_norm(grads.iter().map(|tensor| &**tensor));
	if let Some(coefficient) = clip_coefficient(norm, max_norm) {
		for tensor in grads.iter_mut() {
			for g in tensor.iter_mut() {
				*g = mul(*g, coefficient);
			}
		}
	}
	Ok(norm)
}

/// The factor clipping multiplies every gradient element by, `max_norm ⊗
/// recip(norm + 10⁻⁶)`, or `None` when it is not below 1 (nothing changes).
pub fn clip_coefficient(norm: f32, max_norm: f32) -> Option<f32> {
	let coefficient = mul(max_norm, recip(norm + CLIP_EPSILON));
	(coefficient < 1.0).then_some(coefficient)
}

//! Element-wise activations: ReLU, tanh and GELU (tanh approximation), forward and backward.
//!
//! # Contract
//!
//! Each output element depends on its own input element only, through the
//! exact operation sequence below. `⊗` is the contract multiplication
//! ([`mul`]: rounded product, then flush below 2⁻¹⁰³); `+` and `−` are
//! correctly rounded; `tanh` is [`math::tanh`]; constants are the `f32`s with
//! the bit patterns given in the code.
//!
//! - ReLU: `y = x > 0 ? x : +0`; `dx = x > 0 ? dy : +0`.
//! - tanh: `y = tanh(x)`; `dx = dy ⊗ (1 − t ⊗ t)` with `t = tanh(x)`.
//! - GELU (PyTorch's `approximate="tanh"`): with `s = x ⊗ x`,
//!   `u = √(2/π) ⊗ (x + x ⊗ (0.044715 ⊗ s))`, `t = tanh(u)`:
//!   `y = (0.5 ⊗ x) ⊗ (1 + t)`;
//!   `dx = dy ⊗ ((0.5 ⊗ (1 + t)) + ((0.5 ⊗ x) ⊗ (1 − t ⊗ t)) ⊗ (√(2/π) ⊗ (1 + 0.134145 ⊗ s)))`.
//!
//! Backward passes take the forward input `x`, not the output, so that every
//! backend recomputes the same values instead of trusting a stored one.

use crate::arith::mul;
use crate::error::{check_len, KernelError};
use crate::arith::math;

/// √(2/π).
const SQRT_2_OVER_PI: f32 = f32::from_bits(0x3F4C_422A);
/// The cubic coefficient 0.044715 of the GELU approximation.
const GELU_CUBIC: f32 = f32::from_bits(0x3D37_2713);
/// 3 · 0.044715, the cubic term's derivative coefficient.
const GELU_CUBIC_SLOPE: f32 = f32::from_bits(0x3E09_5D4F);

/// An element-wise activation function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
	/// max(x, 0).
	Relu,
	/// Hyperbolic tangent.
	Tanh,
	/// GELU with the tanh approximation.
	GeluTanh,
}

/// ReLU of one element.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
	if x > 0.0 {
		x
	} else {
		0.0
	}
}

/// ReLU's backward for one element.
#[inline(always)]
pub fn relu_grad(x: f32, dy: f32) -> f32 {
	if x > 0.0 {
		dy
	} else {
		0.0
	}
}

/// tanh's backward for one element.
#[inline(always)]
pub fn tanh_grad(x: f32, dy: f32) -> f32 {
	let t = math::tanh(x);
	mul(dy, 1.0 - mul(t, t))
}

/// The GELU pieces both passes share: `(0.5 ⊗ x, x ⊗ x, tanh(u))`.
#[inline(always)]
fn gelu_parts(x: f32) -> (f32, f32, f32) {
	let square = mul(x, x);
	let inner = mul(SQRT_2_OVER_PI, x + mul(x, mul(GELU_CUBIC, square)));
	(mul(0.5, x), square, math::tanh(inner))
}

/// GELU (tanh approximation) of one element.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
	let (half_x, _, t) = gelu_parts(x);
	mul(half_x, 1.0 + t)
}

/// GELU's backward for one element.
#[inline(always)]
pub fn gelu_tanh_grad(x: f32, dy: f32) -> f32 {
	let (half_x, square, t) = gelu_parts(x);
	let inner_slope = mul(SQRT_2_OVER_PI, 1.0 + mul(GELU_CUBIC_SLOPE, square));
	let local = mul(0.5, 1.0 + t) + mul(mul(half_x, 1.0 - mul(t, t)), inner_slope);
	mul(dy, local)
}

impl Activation {
	/// The activation of one element.
	#[inline(always)]
	pub fn apply(self, x: f32) -> f32 {
		match self {
			Self::Relu => relu(x),
			Self::Tanh => math::tanh(x),
			Self::GeluTanh => gelu_tanh(x),
		}
	}

	/// The backward of one element: `dy · f′(x)`.
	#[inline(always)]
	pub fn grad(self, x: f32, dy: f32) -> f32 {
		match self {
			Self::Relu => relu_grad(x, dy),
			Self::Tanh => tanh_grad(x, dy),
			Self::GeluTanh => gelu_tanh_grad(x, dy),
		}
	}
}

widest_vectors! {
	/// `output[e] = f(input[e])`.
	pub fn activation_forward(kind: Activation, input: &[f32], output: &mut [f32]) -> Result<(), KernelError> {
		check_len("output", output.len(), input.len())?;
		// One loop per kind, each calling its function directly (always inlined; through a
		// generic `Fn` the call stays a call), so that each is a plain loop that vectorises.
		let pairs = output.iter_mut().zip(input);
		match kind {
			Activation::Relu => pairs.for_each(|(y, &x)| *y = relu(x)),
			Activation::Tanh => pairs.for_each(|(y, &x)| *y = math::tanh(x)),
			Activation::GeluTanh => pairs.for_each(|(y, &x)| *y = gelu_tanh(x)),
		}
		Ok(())
	}
}

widest_vectors! {
	/// `input_grad[e] = output_grad[e] · f′(input[e])`.
	pub fn activation_backward(
		kind: Activation,
		input: &[f32],
		output_grad: &[f32],
		input_grad: &mut [f32],
	) -> Result<(), KernelError> {
		check_len("output_grad", output_grad.len(), input.len())?;
		check_len("input_grad", input_grad.len(), input.len())?;
		let triples = input_grad.iter_mut().zip(input).zip(output_grad);
		match kind {
			Activation::Relu => triples.for_each(|((dx, &x), &dy)| *dx = relu_grad(x, dy)),
			Activation::Tanh => triples.for_each(|((dx, &x), &dy)| *dx = tanh_grad(x, dy)),
			Activation::GeluTanh => triples.for_each(|((dx, &x), &dy)| *dx = gelu_tanh_grad(x, dy)),
		}
		Ok(())
	}
}

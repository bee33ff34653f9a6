//! Two-dimensional convolution (cross-correlation), valid padding, stride 1, forward and backward.
//!
//! # Contract
//!
//! Layouts are row-major `x[N,Ci,H,W]`, `w[Co,Ci,KH,KW]`, `y[N,Co,OH,OW]` with
//! `OH = H − KH + 1`, `OW = W − KW + 1`. The bias is a separate operator
//! ([`crate::ops::bias`]). All three passes are [`Contraction`]s, so operands are
//! rounded to 12 significant bits and flushed below 2⁻⁵², products are exact,
//! and each output is summed in 32-wide chunks along its reduction index,
//! each chunk sequentially from `+0`, the chunk sums folded sequentially from
//! `+0`. The reduction index of each pass, flattened in this order, is:
//!
//! - forward `y[n,co,oy,ox]`: `(ci, ky, kx)` over `x[n,ci,oy+ky,ox+kx]·w[co,ci,ky,kx]`;
//! - input gradient `dx[n,ci,iy,ix]`: `(co, ky, kx)` over
//!   `dy[n,co,iy−ky,ix−kx]·w[co,ci,ky,kx]`, a term whose `dy` index falls
//!   outside `dy` being `+0` (a port may skip it: adding zero changes no
//!   non-zero sum, and chunk boundaries still count it);
//! - weight gradient `dw[co,ci,ky,kx]`: `(n, oy, ox)` over
//!   `dy[n,co,oy,ox]·x[n,ci,oy+ky,ox+kx]`.

use crate::ops::contraction::{Contraction, Conv2dShape};
use crate::error::KernelError;

/// `y = conv2d(x, w)`: valid padding, stride 1, no bias.
pub fn conv2d(shape: Conv2dShape, input: &[f32], weight: &[f32], output: &mut [f32]) -> Result<(), KernelError> {
	Contraction::Conv2d(shape).compute(input, weight, output)
}

/// `dx` from `dy` and `w`: the gradient of [`conv2d`] with respect to its input.
pub fn conv2d_input_grad(
	shape: Conv2dShape,
	output_grad: &[f32],
	weight: &[f32],
	input_grad: &mut [f32],
) -> Result<(), KernelError> {
	Contraction::Conv2dInputGrad(shape).compute(output_grad, weight, input_grad)
}

/// `dw` from `dy` and `x`: the gradient of [`conv2d`] with respect to its weight.
pub fn conv2d_weight_grad(
	shape: Conv2dShape,
	output_grad: &[f32],
	input: &[f32],
	weight_grad: &mut [f32],
) -> Result<(), KernelError> {
	Contraction::Conv2dWeightGrad(shape).compute(output_grad, input, weight_grad)
}

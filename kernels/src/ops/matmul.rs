//! Matrix multiplication, forward and backward.
//!
//! # Contract
//!
//! `C[m×n] = A[m×k] · B[k×n]` is a [`Contraction::Matmul`]: each operand is
//! rounded to 12 significant bits (ties to even) and flushed below 2⁻⁵², so
//! every product is exact; `C[i][j]` sums the products over k in 32-wide
//! chunks, each chunk sequentially in increasing k from `+0`, and folds the
//! chunk sums sequentially from `+0`, all in `f32`. No split-K, no atomics,
//! no output flush (the sums stay on the 2⁻¹²⁶ grid).
//!
//! The gradients are matmuls too, with the same rules:
//! `dA = dC · Bᵀ` reduces over n in increasing order and `dB = Aᵀ · dC`
//! reduces over m in increasing order, both chunked by 32.

use crate::ops::contraction::{MatmulLayout, MatmulShape};
use crate::error::KernelError;

/// `out = op(lhs) · op(rhs)`, with `op` transposing where `layout` says.
pub fn matmul(
	shape: MatmulShape,
	layout: MatmulLayout,
	lhs: &[f32],
	rhs: &[f32],
	out: &mut [f32],
) -> Result<(), KernelError> {
	shape.contraction(layout).compute(lhs, rhs, out)
}

/// `lhs_grad = out_grad · rhsᵀ`: the gradient of a plain-layout `lhs · rhs`
/// with respect to `lhs` (`m×k`), given `out_grad` (`m×n`) and `rhs` (`k×n`).
pub fn matmul_lhs_grad(
	shape: MatmulShape,
	out_grad: &[f32],
	rhs: &[f32],
	lhs_grad: &mut [f32],
) -> Result<(), KernelError> {
	shape.lhs_grad_contraction().compute(out_grad, rhs, lhs_grad)
}

/// `rhs_grad = lhsᵀ · out_grad`: the gradient of a plain-layout `lhs · rhs`
/// with respect to `rhs` (`k×n`), given `lhs` (`m×k`) and `out_grad` (`m×n`).
pub fn matmul_rhs_grad(
	shape: MatmulShape,
	lhs: &[f32],
	out_grad: &[f32],
	rhs_grad: &mut [f32],
) -> Result<(), KernelError> {
	shape.rhs_grad_contraction().compute(lhs, out_grad, rhs_grad)
}

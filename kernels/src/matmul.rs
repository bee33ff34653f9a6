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

use crate::contraction::Contraction;
use crate::error::KernelError;

/// Dimensions of `C[m×n] = A[m×k] · B[k×n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulShape {
	/// Rows of `A` and `C`.
	pub m: usize,
	/// Columns of `A`, rows of `B`: the reduction length.
	pub k: usize,
	/// Columns of `B` and `C`.
	pub n: usize,
}

/// How the operands of a matmul are stored (all row-major).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulLayout {
	/// `A` is stored as its `k×m` transpose.
	pub lhs_transposed: bool,
	/// `B` is stored as its `n×k` transpose.
	pub rhs_transposed: bool,
}

impl MatmulShape {
	/// The contraction computing `C = A · B` with operands stored as `layout` says.
	pub fn contraction(self, layout: MatmulLayout) -> Contraction {
		Contraction::Matmul { shape: self, layout }
	}

	/// The contraction computing `dA = dC · Bᵀ` for a plain-layout forward pass:
	/// its lhs is `dC` (m×n) and its rhs is `B` (k×n, read transposed).
	pub fn lhs_grad_contraction(self) -> Contraction {
		let shape = MatmulShape { m: self.m, k: self.n, n: self.k };
		shape.contraction(MatmulLayout { lhs_transposed: false, rhs_transposed: true })
	}

	/// The contraction computing `dB = Aᵀ · dC` for a plain-layout forward pass:
	/// its lhs is `A` (m×k, read transposed) and its rhs is `dC` (m×n).
	pub fn rhs_grad_contraction(self) -> Contraction {
		let shape = MatmulShape { m: self.k, k: self.m, n: self.n };
		shape.contraction(MatmulLayout { lhs_transposed: true, rhs_transposed: false })
	}
}

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

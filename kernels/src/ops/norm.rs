//! Layer normalisation and RMS normalisation over each row, forward and backward: the
//! normalisations of a transformer's pre-norm blocks.
//!
//! # Contract
//!
//! Values are `[rows, width]`, and every row is normalised alone. `⊗` is the contract
//! multiplication, `rsqrt` and `recip` are [`crate::arith::math`]'s, every `Σ` over a row
//! is a chunked sum in column order (rule 4), and `k = recip(width)` is computed once.
//! `ε` is a hyper-parameter on the contract's grid, at least 2⁻¹⁰³ and finite, so that
//! `rsqrt` always sees a positive normal number.
//!
//! Forward, per row `x`:
//! - LayerNorm: `μ = (Σ x_j) ⊗ k`; `d_j = x_j − μ`; `v = (Σ d_j ⊗ d_j) ⊗ k`;
//!   `r = rsqrt(v + ε)`; `x̂_j = d_j ⊗ r`; `y_j = x̂_j ⊗ γ_j + β_j`. Two passes: the
//!   variance sums the centred values, never `E[x²] − μ²`, which cancels.
//! - RMSNorm: `v = (Σ x_j ⊗ x_j) ⊗ k`; `r = rsqrt(v + ε)`; `x̂_j = x_j ⊗ r`;
//!   `y_j = x̂_j ⊗ γ_j`.
//!
//! The forward pass outputs `x̂` beside `y`: the parameters' gradients read it, so that a
//! referee's piece of them reads a 32 × 32 tile, never a whole row.
//!
//! Backward, per row, from the forward input `x` (`r` and `x̂` recomputed by the forward's
//! own sequence) and the output gradient `dy`:
//! - `g_j = dy_j ⊗ γ_j`; `b = (Σ g_j ⊗ x̂_j) ⊗ k`;
//! - LayerNorm: `a = (Σ g_j) ⊗ k`; `dx_j = r ⊗ ((g_j − a) − x̂_j ⊗ b)`;
//! - RMSNorm: `dx_j = r ⊗ (g_j − x̂_j ⊗ b)`.
//!
//! The parameters' gradients are column sums over the rows, in row order (rule 4):
//! `dγ_j = Σ_rows dy_j ⊗ x̂_j`, and LayerNorm's `dβ_j = Σ_rows dy_j`. The `x̂` that `dγ`
//! sums is the forward's output, read as an input of the backward.

use alloc::vec;
use alloc::vec::Vec;

use crate::arith::math::{recip, rsqrt};
use crate::arith::{chunked_sum, mul, FLUSH_THRESHOLD};
use crate::error::{check_len, check_nonzero, element_count, KernelError};

/// Which normalisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
	/// LayerNorm: centred and scaled, with a gain `γ` and a bias `β`.
	Layer,
	/// RMSNorm: scaled by the root mean square, with a gain `γ` only.
	Rms,
}

/// The shape and hyper-parameters of a normalisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormShape {
	/// Which normalisation.
	pub norm: Norm,
	/// Rows normalised (batch × positions).
	pub rows: usize,
	/// Elements in each row (the model's width).
	pub width: usize,
	/// The `ε` added to the variance.
	pub epsilon: f32,
}

impl NormShape {
	/// Elements of the values, after checking the shape and `ε`.
	pub fn values_len(&self) -> Result<usize, KernelError> {
		check_nonzero("rows", self.rows)?;
		check_nonzero("width", self.width)?;
		if !(self.epsilon.is_finite() && self.epsilon >= FLUSH_THRESHOLD) {
			return Err(KernelError::InvalidHyperparameter { name: "epsilon" });
		}
		element_count(&[self.rows, self.width])
	}

	/// Elements of the bias: the width for LayerNorm, none for RMSNorm.
	pub fn bias_len(&self) -> usize {
		match self.norm {
			Norm::Layer => self.width,
			Norm::Rms => 0,
		}
	}

	/// Checks every operand's length against the shape.
	fn validate(&self, x: &[f32], gamma: &[f32], bias_like: (&'static str, usize)) -> Result<usize, KernelError> {
		let len = self.values_len()?;
		check_len("x", x.len(), len)?;
		check_len("gamma", gamma.len(), self.width)?;
		check_len(bias_like.0, bias_like.1, self.bias_len())?;
		Ok(len)
	}
}

/// One row's `r` and `x̂` (into `normalised`), by the forward's sequence; `k` is
/// `recip(width)`. The referee recomputes a row through this same function.
pub fn normalise_row(norm: Norm, epsilon: f32, k: f32, x: &[f32], normalised: &mut [f32]) -> f32 {
	match norm {
		Norm::Layer => {
			let mean = mul(chunked_sum(x.iter().copied()), k);
			for (centred, &value) in normalised.iter_mut().zip(x) {
				*centred = value - mean;
			}
			let variance = mul(chunked_sum(normalised.iter().map(|&d| mul(d, d))), k);
			let r = rsqrt(variance + epsilon);
			for value in normalised.iter_mut() {
				*value = mul(*value, r);
			}
			r
		},
		Norm::Rms => {
			let mean_square = mul(chunked_sum(x.iter().map(|&value| mul(value, value))), k);
			let r = rsqrt(mean_square + epsilon);
			for (scaled, &value) in normalised.iter_mut().zip(x) {
				*scaled = mul(value, r);
			}
			r
		},
	}
}

/// Where the forward pass writes, `rows × width` each: the output `y` and the normalised
/// rows `x̂`, which the backward's `dγ` reads so that a piece of it never recomputes a
/// whole row.
pub struct NormOutputs<'a> {
	/// `y = x̂ ⊗ γ (+ β)`.
	pub y: &'a mut [f32],
	/// `x̂`.
	pub normalised: &'a mut [f32],
}

/// The forward pass: `y` and `x̂` from `x`, the gain `gamma` (`width`) and the bias `beta`
/// (`width` for LayerNorm, empty for RMSNorm).
pub fn norm_forward(shape: NormShape, x: &[f32], gamma: &[f32], beta: &[f32], outputs: NormOutputs<'_>) -> Result<(), KernelError> {
	let len = shape.validate(x, gamma, ("beta", beta.len()))?;
	let NormOutputs { y, normalised } = outputs;
	check_len("y", y.len(), len)?;
	check_len("normalised", normalised.len(), len)?;
	let k = recip(shape.width as f32);
	let rows = x.chunks_exact(shape.width).zip(normalised.chunks_exact_mut(shape.width));
	for ((x_row, normalised_row), y_row) in rows.zip(y.chunks_exact_mut(shape.width)) {
		normalise_row(shape.norm, shape.epsilon, k, x_row, normalised_row);
		for (column, (value, &normalised)) in y_row.iter_mut().zip(normalised_row.iter()).enumerate() {
			let scaled = mul(normalised, gamma[column]);
			*value = match shape.norm {
				Norm::Layer => scaled + beta[column],
				Norm::Rms => scaled,
			};
		}
	}
	Ok(())
}

/// Where the backward pass writes: the input's gradient (`rows × width`), the gain's
/// (`width`) and the bias's (`width` for LayerNorm, empty for RMSNorm). Each is
/// overwritten, not accumulated into: a tensor with two consumers sums its gradients in
/// graph order, outside the operator.
pub struct NormGrads<'a> {
	/// `dx`.
	pub x: &'a mut [f32],
	/// `dγ`.
	pub gamma: &'a mut [f32],
	/// `dβ`.
	pub beta: &'a mut [f32],
}

/// Scratch space of [`backward_row`], `width` each: it leaves the row's `x̂` in `normalised`.
pub struct RowScratch<'a> {
	/// Receives `x̂`.
	pub normalised: &'a mut [f32],
	/// Holds `g = dy ⊗ γ`.
	pub g: &'a mut [f32],
}

/// One row's `dx` (into `dx`) from its forward input `x`, the gain and its output gradient
/// `dy`, by the module's sequence. The referee recomputes a row through this same function.
pub fn backward_row(shape: NormShape, x: &[f32], gamma: &[f32], dy: &[f32], scratch: RowScratch<'_>, dx: &mut [f32]) {
	let RowScratch { normalised, g } = scratch;
	let k = recip(shape.width as f32);
	let r = normalise_row(shape.norm, shape.epsilon, k, x, normalised);
	for ((g, &dy), &gain) in g.iter_mut().zip(dy).zip(gamma) {
		*g = mul(dy, gain);
	}
	let b = mul(chunked_sum(g.iter().zip(normalised.iter()).map(|(&g, &xhat)| mul(g, xhat))), k);
	let a = match shape.norm {
		Norm::Layer => mul(chunked_sum(g.iter().copied()), k),
		Norm::Rms => 0.0,
	};
	for ((dx, &g), &xhat) in dx.iter_mut().zip(g.iter()).zip(normalised.iter()) {
		let centred = match shape.norm {
			Norm::Layer => g - a,
			Norm::Rms => g,
		};
		*dx = mul(r, centred - mul(xhat, b));
	}
}

/// The backward pass: the gradients of `x`, `γ` and `β` from the forward input `x`, the
/// gain `gamma`, the output gradient `dy` and the forward's `normalised` rows `x̂`, which
/// `dγ` sums (`dx` recomputes each row's `x̂` and `r` from `x`).
pub fn norm_backward(shape: NormShape, x: &[f32], gamma: &[f32], dy: &[f32], normalised: &[f32], grads: NormGrads<'_>) -> Result<(), KernelError> {
	let len = shape.validate(x, gamma, ("beta_grad", grads.beta.len()))?;
	check_len("dy", dy.len(), len)?;
	check_len("normalised", normalised.len(), len)?;
	check_len("x_grad", grads.x.len(), len)?;
	check_len("gamma_grad", grads.gamma.len(), shape.width)?;
	let width = shape.width;
	let (mut row, mut g) = (vec![0.0f32; width], vec![0.0f32; width]);
	for ((x_row, dy_row), dx_row) in x.chunks_exact(width).zip(dy.chunks_exact(width)).zip(grads.x.chunks_exact_mut(width)) {
		backward_row(shape, x_row, gamma, dy_row, RowScratch { normalised: &mut row, g: &mut g }, dx_row);
	}
	let products: Vec<f32> = normalised.iter().zip(dy).map(|(&normalised, &dy)| mul(dy, normalised)).collect();
	column_sums(width, &products, grads.gamma);
	if shape.norm == Norm::Layer {
		column_sums(width, dy, grads.beta);
	}
	Ok(())
}

/// `out[j]` = the chunked sum over rows, in row order, of column `j` of the row-major
/// `values` (`out.len()` columns).
fn column_sums(width: usize, values: &[f32], out: &mut [f32]) {
	for (column, total) in out.iter_mut().enumerate() {
		*total = chunked_sum(values.iter().skip(column).step_by(width).copied());
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use alloc::vec::Vec;

	/// A pseudo-random tensor of `len` values in [−2, 2).
	fn values(seed: u64, len: usize) -> Vec<f32> {
		let mut out = vec![0.0; len];
		crate::RandomStream::new(seed, 11).fill_uniform(-2.0, 2.0, &mut out);
		out
	}

	/// The forward pass in f64, for the gradient checks.
	fn forward64(norm: Norm, epsilon: f64, width: usize, x: &[f64], gamma: &[f64], beta: &[f64]) -> Vec<f64> {
		let mut y = Vec::with_capacity(x.len());
		for row in x.chunks_exact(width) {
			let n = width as f64;
			let (mean, variance) = match norm {
				Norm::Layer => {
					let mean = row.iter().sum::<f64>() / n;
					(mean, row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n)
				},
				Norm::Rms => (0.0, row.iter().map(|v| v * v).sum::<f64>() / n),
			};
			let r = 1.0 / (variance + epsilon).sqrt();
			for (j, v) in row.iter().enumerate() {
				y.push((v - mean) * r * gamma[j] + beta.get(j).copied().unwrap_or(0.0));
			}
		}
		y
	}

	/// Backward against central differences of the f64 forward, for a loss `Σ y ⊗ w`: rows
	/// wider than a chunk (so the sums fold), both normalisations.
	#[test]
	fn the_backward_pass_is_the_gradient_of_the_forward() {
		for norm in [Norm::Layer, Norm::Rms] {
			let shape = NormShape { norm, rows: 3, width: 40, epsilon: 1e-5 };
			let len = 120;
			let x = values(1, len);
			let gamma: Vec<f32> = values(2, 40).iter().map(|v| 1.0 + v / 4.0).collect();
			let beta = if norm == Norm::Layer { values(3, 40) } else { Vec::new() };
			let w = values(4, len);
			let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; len], vec![0.0; 40], vec![0.0; shape.bias_len()]);
			let (mut y, mut normalised) = (vec![0.0; len], vec![0.0; len]);
			norm_forward(shape, &x, &gamma, &beta, NormOutputs { y: &mut y, normalised: &mut normalised }).unwrap();
			norm_backward(shape, &x, &gamma, &w, &normalised, NormGrads { x: &mut dx, gamma: &mut dgamma, beta: &mut dbeta }).unwrap();

			let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
			let (x64, gamma64, beta64, w64) = (wide(&x), wide(&gamma), wide(&beta), wide(&w));
			let loss = |x: &[f64], gamma: &[f64], beta: &[f64]| -> f64 {
				forward64(norm, 1e-5, 40, x, gamma, beta).iter().zip(&w64).map(|(y, w)| y * w).sum()
			};
			let h = 1e-6;
			let numeric = |which: usize, index: usize| {
				let mut operands = [x64.clone(), gamma64.clone(), beta64.clone()];
				operands[which][index] += h;
				let up = loss(&operands[0], &operands[1], &operands[2]);
				operands[which][index] -= 2.0 * h;
				let down = loss(&operands[0], &operands[1], &operands[2]);
				(up - down) / (2.0 * h)
			};
			let close = |name: &str, analytic: &[f32], which: usize| {
				for (index, &value) in analytic.iter().enumerate() {
					let expected = numeric(which, index);
					let error = (f64::from(value) - expected).abs();
					assert!(error < 2e-3 * (1.0 + expected.abs()), "{norm:?} {name}[{index}]: {value} against {expected}");
				}
			};
			close("dx", &dx, 0);
			close("dgamma", &dgamma, 1);
			close("dbeta", &dbeta, 2);
		}
	}

	/// The forward pass is the contract's sequence, bit for bit, and near the exact
	/// normalisation; a constant row normalises to the bias.
	#[test]
	fn the_forward_pass_follows_the_contract_and_normalises() {
		let shape = NormShape { norm: Norm::Layer, rows: 2, width: 70, epsilon: 1e-5 };
		let mut x = values(5, 140);
		x[70..].fill(0.75);
		let gamma = values(6, 70);
		let beta = values(7, 70);
		let (mut y, mut normalised) = (vec![0.0; 140], vec![0.0; 140]);
		norm_forward(shape, &x, &gamma, &beta, NormOutputs { y: &mut y, normalised: &mut normalised }).unwrap();
		let k = recip(70.0);
		let row = &x[..70];
		let mut sum = 0.0f32;
		for chunk in row.chunks(32) {
			let mut part = 0.0f32;
			for &v in chunk {
				part += v;
			}
			sum += part;
		}
		let mean = mul(sum, k);
		let centred: Vec<f32> = row.iter().map(|&v| v - mean).collect();
		let variance = mul(chunked_sum(centred.iter().map(|&d| mul(d, d))), k);
		let r = rsqrt(variance + 1e-5);
		for j in 0..70 {
			assert_eq!(normalised[j].to_bits(), mul(centred[j], r).to_bits(), "x̂, column {j}");
			assert_eq!(y[j].to_bits(), (mul(mul(centred[j], r), gamma[j]) + beta[j]).to_bits(), "column {j}");
		}
		let wide = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
		let exact = forward64(Norm::Layer, 1e-5, 70, &wide(&x), &wide(&gamma), &wide(&beta));
		for (j, (&value, &expected)) in y.iter().zip(&exact).enumerate() {
			assert!((f64::from(value) - expected).abs() < 1e-4, "element {j}: {value} against {expected}");
		}
		// A constant row's centred values are zero but for the mean's rounding, which ε bounds.
		for (j, (&value, &bias)) in y[70..].iter().zip(&beta).enumerate() {
			assert!((value - bias).abs() < 1e-3, "column {j} of the constant row: {value} against its bias {bias}");
		}
	}

	/// Bad shapes and hyper-parameters are refused with their names.
	#[test]
	fn bad_shapes_are_refused() {
		let shape = NormShape { norm: Norm::Rms, rows: 2, width: 4, epsilon: 1e-6 };
		let (x, gamma) = (vec![1.0; 8], vec![1.0; 4]);
		let (mut y, mut normalised) = (vec![0.0; 8], vec![0.0; 8]);
		let mut forward = |shape: NormShape, x: &[f32], beta: &[f32], normalised_len: usize| {
			norm_forward(shape, x, &gamma, beta, NormOutputs { y: &mut y, normalised: &mut normalised[..normalised_len] })
		};
		assert!(forward(shape, &x, &[], 8).is_ok());
		assert_eq!(forward(shape, &x, &[0.0; 4], 8), Err(KernelError::LengthMismatch { operand: "beta", expected: 0, actual: 4 }));
		assert_eq!(forward(shape, &x[..7], &[], 8), Err(KernelError::LengthMismatch { operand: "x", expected: 8, actual: 7 }));
		assert_eq!(forward(shape, &x, &[], 7), Err(KernelError::LengthMismatch { operand: "normalised", expected: 8, actual: 7 }));
		for epsilon in [0.0, -1e-5, f32::NAN, f32::INFINITY, 1e-35] {
			let bad = NormShape { epsilon, ..shape };
			assert_eq!(forward(bad, &x, &[], 8), Err(KernelError::InvalidHyperparameter { name: "epsilon" }));
		}
		let empty = NormShape { width: 0, ..shape };
		assert_eq!(empty.values_len(), Err(KernelError::EmptyDimension { dimension: "width" }));
	}
}

//! Helpers shared by the integration tests: seeded data and straightforward f64 math.
#![allow(dead_code)]

use touchstone_kernels::arith::canonicalize;
use touchstone_kernels::{Conv2dShape, RandomStream};

/// `len` canonical values uniform in `[low, high)` from Philox stream `stream` of seed 7.
pub fn random_values(stream: u64, len: usize, low: f32, high: f32) -> Vec<f32> {
	let mut values = vec![0.0; len];
	RandomStream::new(7, stream).fill_uniform(low, high, &mut values);
	canonicalize(&mut values);
	values
}

/// `values` widened to f64.
pub fn widen(values: &[f32]) -> Vec<f64> {
	values.iter().map(|&v| f64::from(v)).collect()
}

/// Asserts `|actual − expected| ≤ tolerance[e]` element-wise, naming the first failure.
pub fn assert_within(what: &str, actual: &[f32], expected: &[f64], tolerance: &[f64]) {
	assert_eq!(actual.len(), expected.len(), "{what}: length");
	for (index, ((&a, &e), &t)) in actual.iter().zip(expected).zip(tolerance).enumerate() {
		let error = (f64::from(a) - e).abs();
		assert!(error <= t, "{what}[{index}]: got {a}, expected {e}, error {error} > tolerance {t}");
	}
}

/// Asserts a relative-plus-absolute closeness element-wise.
pub fn assert_close(what: &str, actual: &[f32], expected: &[f64], relative: f64, absolute: f64) {
	let tolerance: Vec<f64> = expected.iter().map(|e| e.abs() * relative + absolute).collect();
	assert_within(what, actual, expected, &tolerance);
}

/// Row-major `a[m×k] · b[k×n]` in f64, with the sum of |a|·|b| per output (the error scale).
pub fn matmul_f64(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
	let mut out = vec![0.0; m * n];
	let mut scale = vec![0.0; m * n];
	for i in 0..m {
		for j in 0..n {
			for p in 0..k {
				out[i * n + j] += a[i * k + p] * b[p * n + j];
				scale[i * n + j] += (a[i * k + p] * b[p * n + j]).abs();
			}
		}
	}
	(out, scale)
}

/// The `rows × cols` transpose of a row-major matrix.
pub fn transpose(values: &[f64], rows: usize, cols: usize) -> Vec<f64> {
	let mut out = vec![0.0; values.len()];
	for r in 0..rows {
		for c in 0..cols {
			out[c * rows + r] = values[r * cols + c];
		}
	}
	out
}

/// Tolerance of a contraction against exact math: 12-bit operands contribute
/// at most 2⁻¹¹ relative error per product, and f32 accumulation a little more.
pub fn contraction_tolerance(scale: &[f64]) -> Vec<f64> {
	scale.iter().map(|s| s * 2f64.powi(-10) + 1e-30).collect()
}

/// Valid stride-1 convolution in f64, with the per-output error scale.
pub fn conv2d_f64(shape: &Conv2dShape, x: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
	let (oh, ow) = (shape.out_height(), shape.out_width());
	let (kh, kw) = (shape.kernel_height, shape.kernel_width);
	let mut out = vec![0.0; shape.batch * shape.out_channels * oh * ow];
	let mut scale = out.clone();
	for n in 0..shape.batch {
		for co in 0..shape.out_channels {
			for oy in 0..oh {
				for ox in 0..ow {
					let at = ((n * shape.out_channels + co) * oh + oy) * ow + ox;
					for ci in 0..shape.in_channels {
						for ky in 0..kh {
							for kx in 0..kw {
								let xv =
									x[((n * shape.in_channels + ci) * shape.height + oy + ky) * shape.width + ox + kx];
								let wv = w[((co * shape.in_channels + ci) * kh + ky) * kw + kx];
								out[at] += xv * wv;
								scale[at] += (xv * wv).abs();
							}
						}
					}
				}
			}
		}
	}
	(out, scale)
}

/// Central finite differences of `f` at `x`, step `h`.
pub fn numeric_grad(f: impl Fn(&[f64]) -> f64, x: &[f64], h: f64) -> Vec<f64> {
	let mut probe = x.to_vec();
	(0..x.len())
		.map(|i| {
			probe[i] = x[i] + h;
			let up = f(&probe);
			probe[i] = x[i] - h;
			let down = f(&probe);
			probe[i] = x[i];
			(up - down) / (2.0 * h)
		})
		.collect()
}

/// Σ g ⊙ y: the scalar whose gradient with respect to y is g.
pub fn dot(g: &[f64], y: &[f64]) -> f64 {
	g.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// Mean softmax cross-entropy in f64.
pub fn cross_entropy_f64(logits: &[f64], labels: &[u32], classes: usize) -> f64 {
	let rows = labels.len();
	let mut total = 0.0;
	for (row, &label) in logits.chunks(classes).zip(labels) {
		let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
		let sum: f64 = row.iter().map(|z| (z - max).exp()).sum();
		total += sum.ln() - (row[label as usize] - max);
	}
	total / rows as f64
}

/// GELU, tanh approximation, in f64.
pub fn gelu_f64(x: f64) -> f64 {
	0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

//! Gradient checks: every backward operator of the reference against central
//! finite differences of the exact (f64) forward function it differentiates.
//!
//! Each check uses the scalar `L = Σ g ⊙ f(x)` for a random `g`, whose gradient
//! with respect to `x` is what the backward operator computes from `g`.

mod common;

use common::*;
use touchstone_kernels::*;

/// Step of the central differences; the f64 functions are smooth at this scale.
const STEP: f64 = 1e-5;

fn narrow(values: &[f64]) -> Vec<f32> {
	values.iter().map(|&v| v as f32).collect()
}

#[test]
fn matmul_gradients_match_finite_differences() {
	let (m, k, n) = (5, 37, 6);
	let shape = MatmulShape { m, k, n };
	let a = widen(&random_values(30, m * k, -1.0, 1.0));
	let b = widen(&random_values(31, k * n, -1.0, 1.0));
	let g = widen(&random_values(32, m * n, -1.0, 1.0));
	let numeric_da = numeric_grad(|a| dot(&g, &matmul_f64(a, &b, m, k, n).0), &a, STEP);
	let numeric_db = numeric_grad(|b| dot(&g, &matmul_f64(&a, b, m, k, n).0), &b, STEP);
	let mut da = vec![0.0; m * k];
	matmul_lhs_grad(shape, &narrow(&g), &narrow(&b), &mut da).unwrap();
	let mut db = vec![0.0; k * n];
	matmul_rhs_grad(shape, &narrow(&a), &narrow(&g), &mut db).unwrap();
	// 12-bit operands: about 2⁻¹¹ relative per product, over up to n or m terms.
	assert_close("dA", &da, &numeric_da, 2e-3, 2e-3);
	assert_close("dB", &db, &numeric_db, 2e-3, 2e-3);
}

#[test]
fn conv2d_gradients_match_finite_differences() {
	let shape = Conv2dShape {
		batch: 2,
		in_channels: 3,
		out_channels: 4,
		height: 6,
		width: 5,
		kernel_height: 3,
		kernel_width: 3,
	};
	let x = widen(&random_values(33, shape.input_len().unwrap(), -1.0, 1.0));
	let w = widen(&random_values(34, shape.weight_len().unwrap(), -1.0, 1.0));
	let g = widen(&random_values(35, shape.output_len().unwrap(), -1.0, 1.0));
	let numeric_dx = numeric_grad(|x| dot(&g, &conv2d_f64(&shape, x, &w).0), &x, STEP);
	let numeric_dw = numeric_grad(|w| dot(&g, &conv2d_f64(&shape, &x, w).0), &w, STEP);
	let mut dx = vec![0.0; x.len()];
	conv2d_input_grad(shape, &narrow(&g), &narrow(&w), &mut dx).unwrap();
	let mut dw = vec![0.0; w.len()];
	conv2d_weight_grad(shape, &narrow(&g), &narrow(&x), &mut dw).unwrap();
	assert_close("dx", &dx, &numeric_dx, 2e-3, 2e-3);
	assert_close("dw", &dw, &numeric_dw, 2e-3, 4e-3);
}

#[test]
fn bias_gradient_matches_finite_differences() {
	let layout = BiasLayout::channels_first(3, 4, 10);
	let x = widen(&random_values(36, 120, -1.0, 1.0));
	let bias = widen(&random_values(37, 4, -1.0, 1.0));
	let g = widen(&random_values(38, 120, -1.0, 1.0));
	let forward = |bias: &[f64]| {
		let y: Vec<f64> = x.iter().enumerate().map(|(i, v)| v + bias[(i / 10) % 4]).collect();
		dot(&g, &y)
	};
	let numeric = numeric_grad(forward, &bias, STEP);
	let mut grad = vec![0.0; 4];
	bias_grad(layout, &narrow(&g), &mut grad).unwrap();
	assert_close("dbias", &grad, &numeric, 1e-5, 1e-5);
}

/// A scalar function of f64, exact math to differentiate.
type ScalarFn = fn(f64) -> f64;

#[test]
fn activation_gradients_match_finite_differences() {
	// Keep ReLU's inputs away from its kink at zero.
	let x: Vec<f64> =
		widen(&random_values(39, 500, -4.0, 4.0)).into_iter().map(|v| if v.abs() < 1e-3 { 0.5 } else { v }).collect();
	let g = widen(&random_values(40, 500, -1.0, 1.0));
	let cases: [(Activation, ScalarFn); 3] =
		[(Activation::Relu, |x| x.max(0.0)), (Activation::Tanh, f64::tanh), (Activation::GeluTanh, gelu_f64)];
	for (kind, forward) in cases {
		// Element-wise: the gradient of Σ g·f(x) at x_i is g_i·f′(x_i).
		let numeric: Vec<f64> =
			x.iter().zip(&g).map(|(&xi, &gi)| gi * (forward(xi + STEP) - forward(xi - STEP)) / (2.0 * STEP)).collect();
		let mut dx = vec![0.0; x.len()];
		activation_backward(kind, &narrow(&x), &narrow(&g), &mut dx).unwrap();
		assert_close(&format!("{kind:?}"), &dx, &numeric, 1e-5, 1e-6);
	}
}

#[test]
fn softmax_cross_entropy_gradient_matches_finite_differences() {
	let (rows, classes) = (6, 40);
	let logits = widen(&random_values(41, rows * classes, -5.0, 5.0));
	let labels: Vec<u32> = (0..rows as u32).map(|r| (r * 13) % classes as u32).collect();
	let numeric = numeric_grad(|z| cross_entropy_f64(z, &labels, classes), &logits, STEP);
	let mut grad = vec![0.0; logits.len()];
	softmax_cross_entropy(ClassifierShape { rows, classes }, &narrow(&logits), &labels, &mut grad).unwrap();
	assert_close("dlogits", &grad, &numeric, 1e-4, 1e-7);
}

#[test]
fn two_layer_network_gradient_matches_finite_differences() {
	// x·W1 + b1 → GELU → ·W2 + b2 → softmax cross-entropy, end to end.
	let (batch, inputs, hidden, classes) = (4, 9, 7, 3);
	let x = random_values(42, batch * inputs, -1.0, 1.0);
	let w1 = widen(&random_values(43, inputs * hidden, -0.5, 0.5));
	let w2 = random_values(44, hidden * classes, -0.5, 0.5);
	let labels = [0u32, 2, 1, 2];
	let (x64, w2_64) = (widen(&x), widen(&w2));
	let loss_of_w1 = |w1: &[f64]| {
		let h = matmul_f64(&x64, w1, batch, inputs, hidden).0;
		let a: Vec<f64> = h.iter().map(|&v| gelu_f64(v)).collect();
		let logits = matmul_f64(&a, &w2_64, batch, hidden, classes).0;
		cross_entropy_f64(&logits, &labels, classes)
	};
	let numeric = numeric_grad(loss_of_w1, &w1, STEP);

	let w1_32 = narrow(&w1);
	let first = MatmulShape { m: batch, k: inputs, n: hidden };
	let second = MatmulShape { m: batch, k: hidden, n: classes };
	let mut h = vec![0.0; batch * hidden];
	matmul(first, MatmulLayout::default(), &x, &w1_32, &mut h).unwrap();
	let mut a = vec![0.0; h.len()];
	activation_forward(Activation::GeluTanh, &h, &mut a).unwrap();
	let mut logits = vec![0.0; batch * classes];
	matmul(second, MatmulLayout::default(), &a, &w2, &mut logits).unwrap();
	let mut dlogits = vec![0.0; logits.len()];
	softmax_cross_entropy(ClassifierShape { rows: batch, classes }, &logits, &labels, &mut dlogits).unwrap();
	let mut da = vec![0.0; a.len()];
	matmul_lhs_grad(second, &dlogits, &w2, &mut da).unwrap();
	let mut dh = vec![0.0; h.len()];
	activation_backward(Activation::GeluTanh, &h, &da, &mut dh).unwrap();
	let mut dw1 = vec![0.0; w1_32.len()];
	matmul_rhs_grad(first, &x, &dh, &mut dw1).unwrap();
	assert_close("dW1", &dw1, &numeric, 5e-3, 2e-4);
}

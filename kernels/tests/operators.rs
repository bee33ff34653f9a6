//! Every operator against straightforward f64 math: the reference computes the right thing.

mod common;

use common::*;
use touchstone_kernels::arith::{FLUSH_THRESHOLD, TILE};
use touchstone_kernels::*;

#[test]
fn matmul_matches_f64_in_every_layout() {
	let (m, k, n) = (37, 70, 45);
	let a = random_values(1, m * k, -2.0, 2.0);
	let b = random_values(2, k * n, -1.0, 3.0);
	let (expected, scale) = matmul_f64(&widen(&a), &widen(&b), m, k, n);
	let shape = MatmulShape { m, k, n };
	let a_t: Vec<f32> = transpose(&widen(&a), m, k).iter().map(|&v| v as f32).collect();
	let b_t: Vec<f32> = transpose(&widen(&b), k, n).iter().map(|&v| v as f32).collect();
	for (lhs_transposed, rhs_transposed) in [(false, false), (true, false), (false, true), (true, true)] {
		let lhs = if lhs_transposed { &a_t } else { &a };
		let rhs = if rhs_transposed { &b_t } else { &b };
		let mut out = vec![0.0; m * n];
		matmul(shape, MatmulLayout { lhs_transposed, rhs_transposed }, lhs, rhs, &mut out).unwrap();
		assert_within("matmul", &out, &expected, &contraction_tolerance(&scale));
	}
}

#[test]
fn matmul_gradients_match_f64() {
	let (m, k, n) = (19, 33, 40);
	let shape = MatmulShape { m, k, n };
	let a = random_values(3, m * k, -1.0, 1.0);
	let b = random_values(4, k * n, -1.0, 1.0);
	let g = random_values(5, m * n, -1.0, 1.0);
	let (expected_da, scale_da) = matmul_f64(&widen(&g), &transpose(&widen(&b), k, n), m, n, k);
	let mut da = vec![0.0; m * k];
	matmul_lhs_grad(shape, &g, &b, &mut da).unwrap();
	assert_within("dA", &da, &expected_da, &contraction_tolerance(&scale_da));
	let (expected_db, scale_db) = matmul_f64(&transpose(&widen(&a), m, k), &widen(&g), k, m, n);
	let mut db = vec![0.0; k * n];
	matmul_rhs_grad(shape, &a, &g, &mut db).unwrap();
	assert_within("dB", &db, &expected_db, &contraction_tolerance(&scale_db));
}

fn small_conv() -> Conv2dShape {
	Conv2dShape { batch: 3, in_channels: 4, out_channels: 5, height: 9, width: 7, kernel_height: 3, kernel_width: 2 }
}

#[test]
fn conv2d_matches_f64() {
	let shape = small_conv();
	let x = random_values(6, shape.input_len().unwrap(), -1.0, 1.0);
	let w = random_values(7, shape.weight_len().unwrap(), -0.5, 0.5);
	let (expected, scale) = conv2d_f64(&shape, &widen(&x), &widen(&w));
	let mut y = vec![0.0; shape.output_len().unwrap()];
	conv2d(shape, &x, &w, &mut y).unwrap();
	assert_within("conv2d", &y, &expected, &contraction_tolerance(&scale));
}

#[test]
fn conv2d_gradients_match_f64() {
	let shape = small_conv();
	let (oh, ow) = (shape.out_height(), shape.out_width());
	let (kh, kw) = (shape.kernel_height, shape.kernel_width);
	let x = widen(&random_values(8, shape.input_len().unwrap(), -1.0, 1.0));
	let w = widen(&random_values(9, shape.weight_len().unwrap(), -0.5, 0.5));
	let dy = widen(&random_values(10, shape.output_len().unwrap(), -1.0, 1.0));
	let mut dx_expected = vec![0.0; x.len()];
	let mut dx_scale = vec![0.0; x.len()];
	let mut dw_expected = vec![0.0; w.len()];
	let mut dw_scale = vec![0.0; w.len()];
	for n in 0..shape.batch {
		for co in 0..shape.out_channels {
			for oy in 0..oh {
				for ox in 0..ow {
					let g = dy[((n * shape.out_channels + co) * oh + oy) * ow + ox];
					for ci in 0..shape.in_channels {
						for ky in 0..kh {
							for kx in 0..kw {
								let xi =
									((n * shape.in_channels + ci) * shape.height + oy + ky) * shape.width + ox + kx;
								let wi = ((co * shape.in_channels + ci) * kh + ky) * kw + kx;
								dx_expected[xi] += g * w[wi];
								dx_scale[xi] += (g * w[wi]).abs();
								dw_expected[wi] += g * x[xi];
								dw_scale[wi] += (g * x[xi]).abs();
							}
						}
					}
				}
			}
		}
	}
	let narrow = |v: &[f64]| v.iter().map(|&e| e as f32).collect::<Vec<_>>();
	let mut dx = vec![0.0; x.len()];
	conv2d_input_grad(shape, &narrow(&dy), &narrow(&w), &mut dx).unwrap();
	assert_within("dx", &dx, &dx_expected, &contraction_tolerance(&dx_scale));
	let mut dw = vec![0.0; w.len()];
	conv2d_weight_grad(shape, &narrow(&dy), &narrow(&x), &mut dw).unwrap();
	assert_within("dw", &dw, &dw_expected, &contraction_tolerance(&dw_scale));
}

#[test]
fn bias_add_and_grad_match_f64() {
	let layout = BiasLayout::channels_first(3, 5, 11);
	let values = random_values(11, 3 * 5 * 11, -1.0, 1.0);
	let bias = random_values(12, 5, -1.0, 1.0);
	let mut added = values.clone();
	bias_add(layout, &mut added, &bias).unwrap();
	for (position, (&out, &x)) in added.iter().zip(&values).enumerate() {
		assert_eq!(out, x + bias[(position / 11) % 5], "bias_add is one rounded addition");
	}
	let mut grad = vec![0.0; 5];
	bias_grad(layout, &values, &mut grad).unwrap();
	let mut expected = vec![0.0f64; 5];
	for (position, &v) in values.iter().enumerate() {
		expected[(position / 11) % 5] += f64::from(v);
	}
	assert_close("bias_grad", &grad, &expected, 1e-5, 1e-5);
	// A dense layer is the inner = 1 case.
	let mut dense_grad = vec![0.0; 11];
	bias_grad(BiasLayout::dense(15, 11), &values, &mut dense_grad).unwrap();
	let mut dense_expected = vec![0.0f64; 11];
	for (position, &v) in values.iter().enumerate() {
		dense_expected[position % 11] += f64::from(v);
	}
	assert_close("dense bias_grad", &dense_grad, &dense_expected, 1e-5, 1e-5);
}

/// A scalar function of f64, exact math to compare against.
type ScalarFn = fn(f64) -> f64;

#[test]
fn activations_match_f64() {
	let x = random_values(13, 4096, -6.0, 6.0);
	let dy = random_values(14, 4096, -1.0, 1.0);
	let cases: [(Activation, ScalarFn, ScalarFn); 3] = [
		(Activation::Relu, |x| x.max(0.0), |x| if x > 0.0 { 1.0 } else { 0.0 }),
		(Activation::Tanh, f64::tanh, |x| 1.0 - x.tanh().powi(2)),
		(Activation::GeluTanh, gelu_f64, |x| {
			let c = (2.0 / std::f64::consts::PI).sqrt();
			let t = (c * (x + 0.044715 * x * x * x)).tanh();
			0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)
		}),
	];
	for (kind, forward, derivative) in cases {
		let mut y = vec![0.0; x.len()];
		activation_forward(kind, &x, &mut y).unwrap();
		let expected: Vec<f64> = x.iter().map(|&v| forward(f64::from(v))).collect();
		// GELU's 1 + t cancels for large negative x: an absolute error of |x|·ulp(1).
		assert_close(&format!("{kind:?}"), &y, &expected, 1e-6, 5e-7);
		let mut dx = vec![0.0; x.len()];
		activation_backward(kind, &x, &dy, &mut dx).unwrap();
		let expected: Vec<f64> = x.iter().zip(&dy).map(|(&v, &g)| f64::from(g) * derivative(f64::from(v))).collect();
		// 1 − t² and 1 + t cancel where t is near ±1 (and tanh rounds to ±1 past
		// |u| ≈ 9): the error there is absolute, a few ulps of 1 times |x|.
		assert_close(&format!("{kind:?} grad"), &dx, &expected, 1e-5, 1e-6);
	}
}

#[test]
fn softmax_cross_entropy_matches_f64() {
	let shape = ClassifierShape { rows: 50, classes: 37 };
	let logits = random_values(15, 50 * 37, -8.0, 8.0);
	let labels: Vec<u32> = (0..50).map(|row| (row * 7 % 37) as u32).collect();
	let mut grad = vec![0.0; logits.len()];
	let loss = softmax_cross_entropy(shape, &logits, &labels, &mut grad).unwrap();
	let logits64 = widen(&logits);
	let expected_loss = cross_entropy_f64(&logits64, &labels, 37);
	assert!((f64::from(loss) - expected_loss).abs() <= expected_loss * 1e-6, "loss {loss} vs {expected_loss}");
	let mut expected_grad = Vec::new();
	for (row, &label) in logits64.chunks(37).zip(&labels) {
		let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
		let sum: f64 = row.iter().map(|z| (z - max).exp()).sum();
		for (class, z) in row.iter().enumerate() {
			let target = if class == label as usize { 1.0 } else { 0.0 };
			expected_grad.push(((z - max).exp() / sum - target) / 50.0);
		}
	}
	assert_close("dlogits", &grad, &expected_grad, 1e-5, 1e-9);
	let mut predictions = vec![0; 50];
	argmax_rows(shape, &logits, &mut predictions).unwrap();
	for (row, &prediction) in logits.chunks(37).zip(&predictions) {
		let best = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
		assert_eq!(row[prediction as usize], best);
	}
}

#[test]
fn sgd_momentum_matches_f64() {
	for nesterov in [false, true] {
		let hyper = SgdMomentum { learning_rate: 0.05, momentum: 0.9, weight_decay: 1e-3, nesterov };
		let mut params = random_values(16, 300, -1.0, 1.0);
		let mut velocity = random_values(17, 300, -0.1, 0.1);
		let grads = random_values(18, 300, -1.0, 1.0);
		let (p0, v0) = (widen(&params), widen(&velocity));
		sgd_momentum_step(&hyper, &mut params, &grads, &mut velocity).unwrap();
		let (lr, mu, wd) = (f64::from(hyper.learning_rate), f64::from(hyper.momentum), f64::from(hyper.weight_decay));
		let mut expected_p = Vec::new();
		let mut expected_v = Vec::new();
		for ((p, v), g) in p0.iter().zip(&v0).zip(widen(&grads)) {
			let g = g + wd * p;
			let v = mu * v + g;
			let update = if nesterov { g + mu * v } else { v };
			expected_p.push(p - lr * update);
			expected_v.push(v);
		}
		assert_close("sgd params", &params, &expected_p, 1e-6, 1e-7);
		assert_close("sgd velocity", &velocity, &expected_v, 1e-6, 1e-7);
	}
}

#[test]
fn adamw_matches_f64_over_several_steps() {
	let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 };
	let mut params = random_values(19, 257, -1.0, 1.0);
	let mut m = vec![0.0; 257];
	let mut v = vec![0.0; 257];
	let mut p64 = widen(&params);
	let mut m64 = vec![0.0f64; 257];
	let mut v64 = vec![0.0f64; 257];
	let (lr, b1, b2, eps, wd) = (1e-3f64, 0.9f64, 0.999f64, 1e-8f64, 0.01f64);
	for step in 1..=20u32 {
		let grads = random_values(100 + u64::from(step), 257, -1.0, 1.0);
		let scalars = hyper.scalars(step).unwrap();
		adamw_step(&scalars, &mut params, &grads, &mut m, &mut v).unwrap();
		for (((p, m), v), g) in p64.iter_mut().zip(&mut m64).zip(&mut v64).zip(widen(&grads)) {
			*p *= 1.0 - lr * wd;
			*m = b1 * *m + (1.0 - b1) * g;
			*v = b2 * *v + (1.0 - b2) * g * g;
			let m_hat = *m / (1.0 - b1.powi(step as i32));
			let v_hat = *v / (1.0 - b2.powi(step as i32));
			*p -= lr * m_hat / (v_hat.sqrt() + eps);
		}
	}
	assert_close("adamw params", &params, &p64, 1e-5, 1e-6);
	assert_close("adamw m", &m, &m64, 1e-4, 1e-6);
	assert_close("adamw v", &v, &v64, 1e-4, 1e-8);
	assert_eq!(hyper.scalars(0), Err(KernelError::InvalidHyperparameter { name: "step" }));
}

#[test]
fn gradient_clipping_matches_f64() {
	let mut first = random_values(20, 100, -1.0, 1.0);
	let mut second = random_values(21, 1000, -1.0, 1.0);
	let expected_norm = widen(&first).iter().chain(widen(&second).iter()).map(|g| g * g).sum::<f64>().sqrt();
	let (first64, second64) = (widen(&first), widen(&second));
	let norm = clip_grad_norm(&mut [&mut first[..], &mut second[..]], 1.0).unwrap();
	assert!((f64::from(norm) - expected_norm).abs() <= expected_norm * 1e-6);
	let coefficient = 1.0 / (expected_norm + 1e-6);
	let scaled = |v: &[f64]| v.iter().map(|g| g * coefficient).collect::<Vec<_>>();
	assert_close("clipped first", &first, &scaled(&first64), 1e-6, 1e-9);
	assert_close("clipped second", &second, &scaled(&second64), 1e-6, 1e-9);
	let clipped_norm = global_grad_norm([&first[..], &second[..]]);
	assert!((clipped_norm - 1.0).abs() < 1e-5);
	// Below the limit nothing changes, bit for bit.
	let before = first.clone();
	clip_grad_norm(&mut [&mut first[..]], 100.0).unwrap();
	assert_eq!(before, first);
}

#[test]
fn gather_rows_copies_bits() {
	let source = random_values(22, 5 * 3, -1.0, 1.0);
	let mut destination = vec![0.0; 4 * 3];
	gather_rows(&source, 3, &[4, 0, 4, 2], &mut destination).unwrap();
	assert_eq!(&destination[0..3], &source[12..15]);
	assert_eq!(&destination[3..6], &source[0..3]);
	assert_eq!(&destination[9..12], &source[6..9]);
	assert_eq!(
		gather_rows(&source, 3, &[5], &mut destination[..3]),
		Err(KernelError::IndexOutOfRange { index: 5, rows: 5 })
	);
}

#[test]
fn bad_inputs_return_errors_instead_of_panicking() {
	let shape = MatmulShape { m: 2, k: 3, n: 4 };
	let mut out = vec![0.0; 8];
	assert_eq!(
		matmul(shape, MatmulLayout::default(), &[0.0; 5], &[0.0; 12], &mut out),
		Err(KernelError::LengthMismatch { operand: "lhs", expected: 6, actual: 5 })
	);
	assert_eq!(
		matmul(MatmulShape { m: 0, k: 3, n: 4 }, MatmulLayout::default(), &[], &[0.0; 12], &mut []),
		Err(KernelError::EmptyDimension { dimension: "m" })
	);
	let huge = MatmulShape { m: usize::MAX / 2, k: 3, n: 4 };
	assert_eq!(matmul(huge, MatmulLayout::default(), &[], &[], &mut []), Err(KernelError::ShapeOverflow));
	let conv = Conv2dShape { kernel_height: 10, ..small_conv() };
	assert_eq!(conv2d(conv, &[], &[], &mut []), Err(KernelError::KernelLargerThanInput));
	let classifier = ClassifierShape { rows: 2, classes: 3 };
	assert_eq!(
		softmax_cross_entropy(classifier, &[0.0; 6], &[0, 3], &mut [0.0; 6]),
		Err(KernelError::LabelOutOfRange { row: 1, label: 3, classes: 3 })
	);
	let adamw = AdamW { learning_rate: 1e-3, beta1: 1.0, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.0 };
	assert_eq!(adamw.scalars(1), Err(KernelError::InvalidHyperparameter { name: "beta1" }));
	assert_eq!(clip_grad_norm(&mut [], f32::NAN), Err(KernelError::InvalidHyperparameter { name: "max_norm" }));
	assert!(bias_grad(BiasLayout::dense(0, 3), &[], &mut [0.0; 3]).is_err());
	assert!(activation_forward(Activation::Relu, &[1.0], &mut []).is_err());
	// Tiles are a commitment layout; the constants are part of the public contract.
	assert_eq!(TILE, 32);
	assert_eq!(FLUSH_THRESHOLD, 2f32.powi(-103));
}

/// Inputs for the element-wise operators: random values across their ranges, then every
/// case the contract's functions select between (zeros of both signs, the flush threshold,
/// each branch point of `exp` and `tanh` and its neighbours, the saturations, infinities and
/// NaN), 1,031 in all, so that a vector loop's body and its scalar tail both see them.
fn element_wise_inputs() -> Vec<f32> {
	let mut inputs = random_values(40, 900, -12.0, 12.0);
	for edge in [0.0f32, -0.0, 0.5, 9.0, 80.0, 88.0, 44.0, 40.0, 4.5, 0.25, 1.0, 1e-30, FLUSH_THRESHOLD, 3.0e38] {
		for value in [edge, -edge] {
			inputs.extend([value, f32::from_bits(value.to_bits().wrapping_add(1)), f32::from_bits(value.to_bits().wrapping_sub(1))]);
		}
	}
	inputs.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN]);
	inputs.resize(1_031, 0.75);
	inputs
}

/// The element-wise operators run on the widest vector instructions the CPU has (AVX-512 or
/// AVX2 on x86-64) over a whole slice: they must give the bits the same function gives one
/// element at a time (a one-element slice never reaches a vector loop's body), the contract.
#[test]
fn element_wise_operators_give_the_same_bits_on_a_whole_slice_as_one_element_at_a_time() {
	// NaN's payload is outside the contract (a NaN anywhere ends a run as diverged): any
	// NaN is the same NaN here; every other value must match bit for bit.
	let key = |value: f32| if value.is_nan() { u32::MAX } else { value.to_bits() };
	let bits = |values: &[f32]| values.iter().map(|&v| key(v)).collect::<Vec<_>>();
	let x = element_wise_inputs();
	let dy = random_values(41, x.len(), -2.0, 2.0);
	for kind in [Activation::Relu, Activation::Tanh, Activation::GeluTanh] {
		let mut whole = vec![0.0; x.len()];
		activation_forward(kind, &x, &mut whole).unwrap();
		let mut whole_grad = vec![0.0; x.len()];
		activation_backward(kind, &x, &dy, &mut whole_grad).unwrap();
		for (e, &input) in x.iter().enumerate() {
			let mut one = [0.0];
			activation_forward(kind, &[input], &mut one).unwrap();
			assert_eq!(key(whole[e]), key(one[0]), "{kind:?} forward of {input:e} ({:#010x})", input.to_bits());
			assert_eq!(key(one[0]), key(kind.apply(input)), "{kind:?} forward of {input:e}");
			activation_backward(kind, &[input], &dy[e..=e], &mut one).unwrap();
			assert_eq!(key(whole_grad[e]), key(one[0]), "{kind:?} backward at {input:e}");
		}
	}
	// The optimisers over parameters, gradients and moments that include the same cases.
	let grads = element_wise_inputs();
	let moment = random_values(42, grads.len(), 0.0, 0.5);
	let params = random_values(43, grads.len(), -1.0, 1.0);
	let scalars = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 }.scalars(3).unwrap();
	let (mut p, mut m, mut v) = (params.clone(), moment.clone(), moment.clone());
	adamw_step(&scalars, &mut p, &grads, &mut m, &mut v).unwrap();
	let sgd = SgdMomentum { learning_rate: 0.05, momentum: 0.9, weight_decay: 1e-3, nesterov: true };
	let (mut q, mut velocity) = (params.clone(), moment.clone());
	sgd_momentum_step(&sgd, &mut q, &grads, &mut velocity).unwrap();
	let (mut p1, mut m1, mut v1, mut q1, mut velocity1) = (params.clone(), moment.clone(), moment.clone(), params.clone(), moment.clone());
	for e in 0..grads.len() {
		let one = e..=e;
		adamw_step(&scalars, &mut p1[one.clone()], &grads[one.clone()], &mut m1[one.clone()], &mut v1[one.clone()]).unwrap();
		sgd_momentum_step(&sgd, &mut q1[one.clone()], &grads[one.clone()], &mut velocity1[one]).unwrap();
	}
	assert_eq!((bits(&p), bits(&m), bits(&v)), (bits(&p1), bits(&m1), bits(&v1)), "AdamW");
	assert_eq!((bits(&q), bits(&velocity)), (bits(&q1), bits(&velocity1)), "SGD with momentum");
}

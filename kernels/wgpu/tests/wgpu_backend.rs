//! The wgpu backend against the CPU reference, bit for bit, compared by hash.
//!
//! Runs on whatever adapter `WgpuBackend::new` picks (here: Mesa's lavapipe).
//! There is no skipping: without an adapter every test fails and says which
//! package to install.
#[path = "../../tests/common/mod.rs"]
mod common;

use std::sync::{Mutex, MutexGuard, OnceLock};

use common::random_values;
use touchstone_kernels::proof::hash::digest_f32;
use touchstone_kernels_wgpu::conformance;
use touchstone_kernels_wgpu::{WgpuBackend, WgpuError};
use touchstone_kernels::*;
use touchstone_kernels::ops::heads::{split_heads, HeadsShape};

/// One backend for the whole file: opening it compiles every kernel and runs
/// the conformance self-test, which takes seconds on lavapipe.
fn backend() -> MutexGuard<'static, WgpuBackend> {
	static BACKEND: OnceLock<Result<Mutex<WgpuBackend>, String>> = OnceLock::new();
	match BACKEND.get_or_init(|| WgpuBackend::new().map(Mutex::new).map_err(|error| error.to_string())) {
		Ok(backend) => backend.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
		Err(message) => panic!(
			"the wgpu backend is required by these tests and could not be opened: {message}\n\
			 (on Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libvulkan1` provides lavapipe)"
		),
	}
}

/// Random shapes and values come from this Philox seed.
const SEED: u64 = 0x7767_7075;

/// Seeded draws of shapes and stream numbers: successive Philox words.
struct Draws {
	stream: RandomStream,
	next: u64,
}

impl Draws {
	fn new(stream: u64) -> Self {
		Self { stream: RandomStream::new(SEED, stream), next: 0 }
	}

	/// A uniform integer in `[low, high]` (multiply-shift of one word).
	fn int(&mut self, low: usize, high: usize) -> usize {
		let word = self.stream.word(self.next);
		self.next += 1;
		low + ((u64::from(word) * (high - low + 1) as u64) >> 32) as usize
	}

	/// A fresh stream number for tensor values.
	fn stream(&mut self) -> u64 {
		10_000 + self.int(0, 1 << 30) as u64
	}
}

/// Asserts that two outputs agree bit for bit, by digest.
fn assert_same(what: &str, actual: &[f32], expected: &[f32]) {
	if let Some(difference) = conformance::difference(what, actual, expected) {
		panic!("wgpu differs from the reference: {difference}");
	}
	assert_eq!(digest_f32(actual), digest_f32(expected));
}

#[test]
fn the_adapter_passed_the_conformance_self_test_and_reports_bit_exactness() {
	let mut gpu = backend();
	assert!(gpu.is_bit_exact());
	assert!(gpu.name().starts_with("wgpu"));
	// `new` already refused any nonconformant adapter; run the test again on
	// the open backend to see it pass in this test's own output.
	let failures = conformance::self_test(&mut gpu).unwrap();
	assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn the_cancellation_probe_tells_fused_from_unfused_multiply_adds() {
	// The probe is only worth running if an FMA-contracting device would fail
	// it: compute its triples fused on the CPU and check they differ.
	let a = random_values(900, 4096, -4.0, 4.0);
	let b = random_values(901, 4096, -4.0, 4.0);
	let c: Vec<f32> = a.iter().zip(&b).map(|(&x, &y)| -arith::mul(x, y)).collect();
	let unfused: Vec<f32> = a.iter().zip(&b).zip(&c).map(|((&x, &y), &z)| arith::mul(x, y) + z).collect();
	let fused: Vec<f32> = a.iter().zip(&b).zip(&c).map(|((&x, &y), &z)| x.mul_add(y, z)).collect();
	let report = conformance::difference("fused", &fused, &unfused).expect("fused results must differ");
	assert!(unfused.iter().all(|&v| v == 0.0));
	assert!(fused.iter().filter(|&&v| v != 0.0).count() > 4096 / 2, "{report}");
}

#[test]
fn matmul_in_every_layout_matches_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(1);
	for case in 0..40 {
		// Mostly not multiples of the 32-wide tile or chunk, some exactly, some tiny.
		let shape = MatmulShape { m: draws.int(1, 90), k: draws.int(1, 140), n: draws.int(1, 90) };
		let shape = if case == 0 { MatmulShape { m: 64, k: 96, n: 32 } } else { shape };
		let layout = MatmulLayout { lhs_transposed: draws.int(0, 1) == 1, rhs_transposed: draws.int(0, 1) == 1 };
		let a = random_values(draws.stream(), shape.m * shape.k, -3.0, 3.0);
		let b = random_values(draws.stream(), shape.k * shape.n, -3.0, 3.0);
		let mut expected = vec![0.0; shape.m * shape.n];
		matmul(shape, layout, &a, &b, &mut expected).unwrap();
		let (at, bt) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
		let mut out = gpu.zeros(shape.m * shape.n).unwrap();
		gpu.matmul(shape, layout, &at, &bt, &mut out).unwrap();
		assert_same(&format!("matmul {shape:?} {layout:?}"), &gpu.download(&out).unwrap(), &expected);

		let g = random_values(draws.stream(), shape.m * shape.n, -1.0, 1.0);
		let gt = gpu.upload(&g).unwrap();
		let mut expected = vec![0.0; shape.m * shape.k];
		matmul_lhs_grad(shape, &g, &b, &mut expected).unwrap();
		let mut da = gpu.zeros(shape.m * shape.k).unwrap();
		gpu.contract(shape.lhs_grad_contraction(), &gt, &bt, &mut da).unwrap();
		assert_same(&format!("matmul_lhs_grad {shape:?}"), &gpu.download(&da).unwrap(), &expected);
		let mut expected = vec![0.0; shape.k * shape.n];
		matmul_rhs_grad(shape, &a, &g, &mut expected).unwrap();
		let mut db = gpu.zeros(shape.k * shape.n).unwrap();
		gpu.contract(shape.rhs_grad_contraction(), &at, &gt, &mut db).unwrap();
		assert_same(&format!("matmul_rhs_grad {shape:?}"), &gpu.download(&db).unwrap(), &expected);
	}
}

#[test]
fn large_matmul_matches_the_reference() {
	// Deep enough for many K-chunks and wide enough for many tiles in both directions.
	let mut gpu = backend();
	let shape = MatmulShape { m: 300, k: 517, n: 129 };
	let a = random_values(40, shape.m * shape.k, -1.0, 1.0);
	let b = random_values(41, shape.k * shape.n, -1.0, 1.0);
	let mut expected = vec![0.0; shape.m * shape.n];
	matmul(shape, MatmulLayout::default(), &a, &b, &mut expected).unwrap();
	let (at, bt) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
	let mut out = gpu.zeros(expected.len()).unwrap();
	gpu.matmul(shape, MatmulLayout::default(), &at, &bt, &mut out).unwrap();
	assert_same("matmul 300x517x129", &gpu.download(&out).unwrap(), &expected);
}

#[test]
fn convolution_passes_match_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(2);
	for _ in 0..25 {
		let kernel_height = draws.int(1, 5);
		let kernel_width = draws.int(1, 5);
		let shape = Conv2dShape {
			batch: draws.int(1, 4),
			in_channels: draws.int(1, 6),
			out_channels: draws.int(1, 9),
			height: kernel_height + draws.int(0, 12),
			width: kernel_width + draws.int(0, 12),
			kernel_height,
			kernel_width,
		};
		let x = random_values(draws.stream(), shape.input_len().unwrap(), -1.0, 1.0);
		let w = random_values(draws.stream(), shape.weight_len().unwrap(), -1.0, 1.0);
		let dy = random_values(draws.stream(), shape.output_len().unwrap(), -1.0, 1.0);
		let (xt, wt, dyt) = (gpu.upload(&x).unwrap(), gpu.upload(&w).unwrap(), gpu.upload(&dy).unwrap());

		let mut expected = vec![0.0; dy.len()];
		conv2d(shape, &x, &w, &mut expected).unwrap();
		let mut y = gpu.zeros(dy.len()).unwrap();
		gpu.conv2d(shape, &xt, &wt, &mut y).unwrap();
		assert_same(&format!("conv2d {shape:?}"), &gpu.download(&y).unwrap(), &expected);

		let mut expected = vec![0.0; x.len()];
		conv2d_input_grad(shape, &dy, &w, &mut expected).unwrap();
		let mut dx = gpu.zeros(x.len()).unwrap();
		gpu.contract(Contraction::Conv2dInputGrad(shape), &dyt, &wt, &mut dx).unwrap();
		assert_same(&format!("conv2d_input_grad {shape:?}"), &gpu.download(&dx).unwrap(), &expected);

		let mut expected = vec![0.0; w.len()];
		conv2d_weight_grad(shape, &dy, &x, &mut expected).unwrap();
		let mut dw = gpu.zeros(w.len()).unwrap();
		gpu.contract(Contraction::Conv2dWeightGrad(shape), &dyt, &xt, &mut dw).unwrap();
		assert_same(&format!("conv2d_weight_grad {shape:?}"), &gpu.download(&dw).unwrap(), &expected);
	}
}

#[test]
fn bias_add_and_bias_grad_match_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(3);
	for _ in 0..30 {
		let layout = BiasLayout { outer: draws.int(1, 70), channels: draws.int(1, 40), inner: draws.int(1, 50) };
		let len = layout.values_len().unwrap();
		let values = random_values(draws.stream(), len, -2.0, 2.0);
		let bias = random_values(draws.stream(), layout.channels, -1.0, 1.0);
		let mut expected = values.clone();
		bias_add(layout, &mut expected, &bias).unwrap();
		let mut vt = gpu.upload(&values).unwrap();
		let bt = gpu.upload(&bias).unwrap();
		gpu.bias_add(layout, &mut vt, &bt).unwrap();
		assert_same(&format!("bias_add {layout:?}"), &gpu.download(&vt).unwrap(), &expected);

		let mut expected = vec![0.0; layout.channels];
		bias_grad(layout, &values, &mut expected).unwrap();
		let gt = gpu.upload(&values).unwrap();
		let mut db = gpu.zeros(layout.channels).unwrap();
		gpu.bias_grad(layout, &gt, &mut db).unwrap();
		assert_same(&format!("bias_grad {layout:?}"), &gpu.download(&db).unwrap(), &expected);
	}
}

#[test]
fn activations_match_the_reference_forward_and_backward() {
	let mut gpu = backend();
	let mut draws = Draws::new(4);
	for _ in 0..12 {
		let len = draws.int(1, 70_000);
		// Wide enough to cross every branch of tanh and GELU, including saturation.
		let x = random_values(draws.stream(), len, -12.0, 12.0);
		let dy = random_values(draws.stream(), len, -1.0, 1.0);
		let (xt, dyt) = (gpu.upload(&x).unwrap(), gpu.upload(&dy).unwrap());
		for kind in [Activation::Relu, Activation::Tanh, Activation::GeluTanh] {
			let mut expected = vec![0.0; len];
			activation_forward(kind, &x, &mut expected).unwrap();
			let mut y = gpu.zeros(len).unwrap();
			gpu.activation(kind, &xt, &mut y).unwrap();
			assert_same(&format!("{kind:?} forward, {len}"), &gpu.download(&y).unwrap(), &expected);
			let mut expected = vec![0.0; len];
			activation_backward(kind, &x, &dy, &mut expected).unwrap();
			let mut dx = gpu.zeros(len).unwrap();
			gpu.activation_grad(kind, &xt, &dyt, &mut dx).unwrap();
			assert_same(&format!("{kind:?} backward, {len}"), &gpu.download(&dx).unwrap(), &expected);
		}
	}
}

#[test]
fn softmax_cross_entropy_matches_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(5);
	for _ in 0..30 {
		let shape = ClassifierShape { rows: draws.int(1, 300), classes: draws.int(1, 100) };
		let spread = draws.int(1, 40) as f32;
		let logits = random_values(draws.stream(), shape.rows * shape.classes, -spread, spread);
		let labels: Vec<u32> = (0..shape.rows).map(|_| draws.int(0, shape.classes - 1) as u32).collect();
		let mut expected_grad = vec![0.0; logits.len()];
		let expected_loss = softmax_cross_entropy(shape, &logits, &labels, &mut expected_grad).unwrap();
		let (lt, yt) = (gpu.upload(&logits).unwrap(), gpu.upload_indices(&labels).unwrap());
		let (mut loss, mut grad) = (gpu.zeros(1).unwrap(), gpu.zeros(logits.len()).unwrap());
		gpu.softmax_cross_entropy(shape, &lt, &yt, &mut loss, &mut grad).unwrap();
		assert_same(&format!("softmax gradient {shape:?}"), &gpu.download(&grad).unwrap(), &expected_grad);
		assert_same(&format!("softmax loss {shape:?}"), &gpu.download(&loss).unwrap(), &[expected_loss]);
	}
}

/// LayerNorm and RMSNorm, forward and backward, at widths that end mid-chunk and at a
/// transformer's (128, 768), over row counts past a chunk: every output bit for bit.
#[test]
fn norms_match_the_reference_forward_and_backward() {
	let mut gpu = backend();
	let mut cpu = CpuBackend;
	let mut draws = Draws::new(11);
	let shapes = [(1, 1), (3, 33), (70, 128), (40, 768)].into_iter().chain((0..8).map(|_| (draws.int(1, 90), draws.int(1, 300))));
	for (index, (rows, width)) in shapes.collect::<Vec<_>>().into_iter().enumerate() {
		let norm = if index % 2 == 0 { Norm::Layer } else { Norm::Rms };
		let shape = NormShape { norm, rows, width, epsilon: 1e-5 };
		let len = rows * width;
		let x = random_values(draws.stream(), len, -3.0, 5.0);
		let gamma = random_values(draws.stream(), width, 0.5, 1.5);
		let beta = random_values(draws.stream(), shape.bias_len(), -0.5, 0.5);
		let dy = random_values(draws.stream(), len, -1.0, 1.0);
		let (mut expected, mut expected_normalised) = (vec![0.0; len], vec![0.0; len]);
		let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; len], vec![0.0; width], vec![0.0; shape.bias_len()]);
		let beta_host = (norm == Norm::Layer).then(|| beta.clone());
		cpu.norm(shape, &x, &gamma, beta_host.as_ref(), &mut expected, &mut expected_normalised).unwrap();
		cpu.norm_backward(shape, &x, &gamma, &dy, &expected_normalised, &mut dx, &mut dgamma, (norm == Norm::Layer).then_some(&mut dbeta)).unwrap();

		let (xt, gt, dyt) = (gpu.upload(&x).unwrap(), gpu.upload(&gamma).unwrap(), gpu.upload(&dy).unwrap());
		let bt = (norm == Norm::Layer).then(|| gpu.upload(&beta).unwrap());
		let (mut y, mut normalised) = (gpu.zeros(len).unwrap(), gpu.zeros(len).unwrap());
		gpu.norm(shape, &xt, &gt, bt.as_ref(), &mut y, &mut normalised).unwrap();
		assert_same(&format!("{shape:?} forward"), &gpu.download(&y).unwrap(), &expected);
		assert_same(&format!("{shape:?} x-hat"), &gpu.download(&normalised).unwrap(), &expected_normalised);
		let (mut dxt, mut dgt) = (gpu.zeros(len).unwrap(), gpu.zeros(width).unwrap());
		let mut dbt = (norm == Norm::Layer).then(|| gpu.zeros(width).unwrap());
		gpu.norm_backward(shape, &xt, &gt, &dyt, &normalised, &mut dxt, &mut dgt, dbt.as_mut()).unwrap();
		assert_same(&format!("{shape:?} dx"), &gpu.download(&dxt).unwrap(), &dx);
		assert_same(&format!("{shape:?} dgamma"), &gpu.download(&dgt).unwrap(), &dgamma);
		if let Some(dbt) = &dbt {
			assert_same(&format!("{shape:?} dbeta"), &gpu.download(dbt).unwrap(), &dbeta);
		}
	}
}

/// The causal softmax and its backward over blocks of 1 to 100 positions (a context of
/// 64 among them), with scores far past `exp`'s range: masked entries `+0`, every bit equal.
#[test]
fn causal_softmax_matches_the_reference_forward_and_backward() {
	let mut gpu = backend();
	let mut draws = Draws::new(12);
	let shapes = [(1, 1), (16, 64), (3, 33)].into_iter().chain((0..8).map(|_| (draws.int(1, 20), draws.int(1, 100))));
	for (blocks, positions) in shapes.collect::<Vec<_>>() {
		let shape = CausalShape { blocks, positions, scale: 0.125 };
		let len = blocks * positions * positions;
		let spread = draws.int(1, 400) as f32;
		let scores = random_values(draws.stream(), len, -spread, spread);
		let probs_grad = random_values(draws.stream(), len, -1.0, 1.0);
		let (mut probs, mut scores_grad) = (vec![0.0; len], vec![0.0; len]);
		causal_softmax(shape, &scores, &mut probs).unwrap();
		causal_softmax_grad(shape, &probs, &probs_grad, &mut scores_grad).unwrap();
		let (st, dpt) = (gpu.upload(&scores).unwrap(), gpu.upload(&probs_grad).unwrap());
		let mut pt = gpu.zeros(len).unwrap();
		gpu.causal_softmax(shape, &st, &mut pt).unwrap();
		assert_same(&format!("{shape:?} probs"), &gpu.download(&pt).unwrap(), &probs);
		let mut dst = gpu.zeros(len).unwrap();
		gpu.causal_softmax_grad(shape, &pt, &dpt, &mut dst).unwrap();
		assert_same(&format!("{shape:?} scores_grad"), &gpu.download(&dst).unwrap(), &scores_grad);
	}
}

/// Attention's layout and contractions: heads split and merged (bit copies), the batched
/// matmuls of `QKᵀ`, `PV` and their gradients in all four layouts over many blocks, and
/// the embedding's scatter-add with a token looked up more than a chunk's worth of times.
#[test]
fn heads_batched_matmuls_the_scatter_add_and_the_residual_sum_match_the_reference() {
	let mut gpu = backend();
	let mut cpu = CpuBackend;
	let mut draws = Draws::new(13);
	for _ in 0..6 {
		let shape = HeadsShape {
			sequences: draws.int(1, 5),
			positions: draws.int(1, 70),
			heads: draws.int(1, 6),
			head_width: draws.int(1, 40),
		};
		let len = shape.values_len().unwrap();
		let values = random_values(draws.stream(), len, -1.0, 1.0);
		let mut blocked = vec![0.0; len];
		split_heads(shape, &values, &mut blocked).unwrap();
		let vt = gpu.upload(&values).unwrap();
		let mut bt = gpu.zeros(len).unwrap();
		gpu.split_heads(shape, &vt, &mut bt).unwrap();
		assert_same(&format!("split {shape:?}"), &gpu.download(&bt).unwrap(), &blocked);
		let mut merged = gpu.zeros(len).unwrap();
		gpu.merge_heads(shape, &bt, &mut merged).unwrap();
		assert_same(&format!("merge {shape:?}"), &gpu.download(&merged).unwrap(), &values);
	}
	for (blocks, m, k, n) in [(48, 64, 32, 64), (7, 33, 70, 5), (1, 1, 1, 1), (3, 100, 64, 37)] {
		let shape = MatmulShape { m, k, n };
		let lhs = random_values(draws.stream(), blocks * m * k, -2.0, 2.0);
		let rhs = random_values(draws.stream(), blocks * k * n, -2.0, 2.0);
		let (lt, rt) = (gpu.upload(&lhs).unwrap(), gpu.upload(&rhs).unwrap());
		for (lhs_transposed, rhs_transposed) in [(false, false), (false, true), (true, false), (true, true)] {
			let layout = MatmulLayout { lhs_transposed, rhs_transposed };
			let mut expected = vec![0.0; blocks * m * n];
			cpu.batched_matmul(blocks, shape, layout, &lhs, &rhs, &mut expected).unwrap();
			let mut out = gpu.zeros(blocks * m * n).unwrap();
			gpu.batched_matmul(blocks, shape, layout, &lt, &rt, &mut out).unwrap();
			assert_same(&format!("{blocks} blocks of {shape:?} {layout:?}"), &gpu.download(&out).unwrap(), &expected);
		}
	}
	for (table_rows, row_len, lookups) in [(65, 128, 768), (5, 3, 43), (1000, 7, 10)] {
		let mut ids: Vec<u32> = (0..lookups).map(|_| draws.int(0, table_rows - 1) as u32).collect();
		// One token more than a chunk's worth of times, so its sum folds.
		ids.iter_mut().step_by(3).take(40).for_each(|id| *id = 1);
		let dy = random_values(draws.stream(), lookups * row_len, -1.0, 1.0);
		let mut expected = vec![0.0; table_rows * row_len];
		scatter_add_rows(&dy, row_len, &ids, table_rows, &mut expected).unwrap();
		let (dyt, it) = (gpu.upload(&dy).unwrap(), gpu.upload_indices(&ids).unwrap());
		let mut out = gpu.zeros(table_rows * row_len).unwrap();
		gpu.scatter_add_rows(&dyt, row_len, &it, table_rows, &mut out).unwrap();
		assert_same(&format!("scatter-add {table_rows}x{row_len} of {lookups}"), &gpu.download(&out).unwrap(), &expected);
	}
	// The residual sum, over a length that is no multiple of a workgroup.
	let (a, b) = (random_values(draws.stream(), 1000, -1.0, 1.0), random_values(draws.stream(), 1000, -1.0, 1.0));
	let mut expected = a.clone();
	touchstone_kernels::ops::residual::add_assign(&mut expected, &b).unwrap();
	let (mut at, bt) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
	gpu.add_assign(&mut at, &bt).unwrap();
	assert_same("add_assign", &gpu.download(&at).unwrap(), &expected);
	let (dy, ids) = (gpu.upload(&[0.0; 6]).unwrap(), gpu.upload_indices(&[0, 5]).unwrap());
	let mut out = gpu.zeros(15).unwrap();
	match gpu.scatter_add_rows(&dy, 3, &ids, 5, &mut out) {
		Err(WgpuError::Kernel(error)) => assert_eq!(error, KernelError::IndexOutOfRange { index: 5, rows: 5 }),
		other => panic!("expected an index error, got {other:?}"),
	}
}

#[test]
fn gather_rows_matches_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(6);
	for _ in 0..20 {
		let (rows, row_len) = (draws.int(1, 200), draws.int(1, 80));
		let source = random_values(draws.stream(), rows * row_len, -1.0, 1.0);
		let count = draws.int(0, 150);
		let indices: Vec<u32> = (0..count).map(|_| draws.int(0, rows - 1) as u32).collect();
		let mut expected = vec![0.0; count * row_len];
		gather_rows(&source, row_len, &indices, &mut expected).unwrap();
		let (st, it) = (gpu.upload(&source).unwrap(), gpu.upload_indices(&indices).unwrap());
		let mut out = gpu.zeros(count * row_len).unwrap();
		gpu.gather_rows(&st, row_len, &it, &mut out).unwrap();
		assert_same(&format!("gather {rows}x{row_len} by {count}"), &gpu.download(&out).unwrap(), &expected);
	}
}

#[test]
fn optimizers_match_the_reference_over_several_steps() {
	let mut gpu = backend();
	let mut draws = Draws::new(7);
	for case in 0..16 {
		let len = draws.int(1, 50_000);
		let params = random_values(draws.stream(), len, -1.0, 1.0);
		let grads: Vec<Vec<f32>> = (0..4).map(|_| random_values(draws.stream(), len, -0.5, 0.5)).collect();
		let sgd = SgdMomentum {
			learning_rate: 0.01 * draws.int(1, 20) as f32,
			momentum: 0.05 * draws.int(0, 19) as f32,
			weight_decay: 1e-4 * draws.int(0, 10) as f32,
			nesterov: case % 2 == 0,
		};
		let (mut expected, mut velocity) = (params.clone(), vec![0.0; len]);
		let (mut pt, mut vt) = (gpu.upload(&params).unwrap(), gpu.zeros(len).unwrap());
		for grad in &grads {
			sgd_momentum_step(&sgd, &mut expected, grad, &mut velocity).unwrap();
			let gt = gpu.upload(grad).unwrap();
			gpu.sgd_momentum(&sgd, &mut pt, &gt, &mut vt).unwrap();
		}
		assert_same(&format!("sgd params {sgd:?}"), &gpu.download(&pt).unwrap(), &expected);
		assert_same(&format!("sgd velocity {sgd:?}"), &gpu.download(&vt).unwrap(), &velocity);

		let adamw = AdamW {
			learning_rate: 1e-3 * draws.int(1, 10) as f32,
			beta1: 0.9,
			beta2: 0.99 + 0.001 * draws.int(0, 9) as f32,
			epsilon: 1e-8,
			weight_decay: 0.01 * draws.int(0, 5) as f32,
		};
		let mut expected = params.clone();
		let (mut first, mut second) = (vec![0.0; len], vec![0.0; len]);
		let mut pt = gpu.upload(&params).unwrap();
		let (mut mt, mut st) = (gpu.zeros(len).unwrap(), gpu.zeros(len).unwrap());
		for (step, grad) in grads.iter().enumerate() {
			let scalars = adamw.scalars(step as u32 + 1).unwrap();
			adamw_step(&scalars, &mut expected, grad, &mut first, &mut second).unwrap();
			let gt = gpu.upload(grad).unwrap();
			gpu.adamw(&scalars, &mut pt, &gt, &mut mt, &mut st).unwrap();
		}
		assert_same(&format!("adamw params {adamw:?}"), &gpu.download(&pt).unwrap(), &expected);
		assert_same("adamw first moment", &gpu.download(&mt).unwrap(), &first);
		assert_same("adamw second moment", &gpu.download(&st).unwrap(), &second);
	}
}

#[test]
fn gradient_clipping_matches_the_reference() {
	let mut gpu = backend();
	let mut draws = Draws::new(8);
	for _ in 0..20 {
		let tensors = draws.int(1, 6);
		let grads: Vec<Vec<f32>> =
			(0..tensors).map(|_| random_values(draws.stream(), draws.int(0, 5000), -1.0, 1.0)).collect();
		// Thresholds below and above the typical norm, so that both paths run.
		let max_norm = 0.5 * draws.int(1, 120) as f32;
		let mut expected = grads.clone();
		let mut slices: Vec<&mut [f32]> = expected.iter_mut().map(|g| g.as_mut_slice()).collect();
		let expected_norm = clip_grad_norm(&mut slices, max_norm).unwrap();
		let mut tensors_on_gpu: Vec<_> = grads.iter().map(|g| gpu.upload(g).unwrap()).collect();
		let mut norm = gpu.zeros(1).unwrap();
		let mut refs: Vec<_> = tensors_on_gpu.iter_mut().collect();
		gpu.clip_grad_norm(max_norm, &mut refs, &mut norm).unwrap();
		assert_same(&format!("clip norm, max {max_norm}"), &gpu.download(&norm).unwrap(), &[expected_norm]);
		for (index, (tensor, want)) in tensors_on_gpu.iter().zip(&expected).enumerate() {
			assert_same(&format!("clipped tensor {index}, max {max_norm}"), &gpu.download(tensor).unwrap(), want);
		}
	}
}

#[test]
fn bad_inputs_fail_with_the_references_errors() {
	let mut gpu = backend();
	let mut cpu = CpuBackend;
	let shape = MatmulShape { m: 3, k: 4, n: 5 };
	let (a, b) = (gpu.upload(&[0.0; 12]).unwrap(), gpu.upload(&[0.0; 19]).unwrap());
	let mut out = gpu.zeros(15).unwrap();
	let expected = cpu.matmul(shape, MatmulLayout::default(), &vec![0.0; 12], &vec![0.0; 19], &mut vec![0.0; 15]);
	match gpu.matmul(shape, MatmulLayout::default(), &a, &b, &mut out) {
		Err(WgpuError::Kernel(error)) => assert_eq!(Err(error), expected),
		other => panic!("expected a kernel error, got {other:?}"),
	}
	let classifier = ClassifierShape { rows: 2, classes: 3 };
	let logits = gpu.upload(&[0.0; 6]).unwrap();
	let labels = gpu.upload_indices(&[1, 3]).unwrap();
	let (mut loss, mut grad) = (gpu.zeros(1).unwrap(), gpu.zeros(6).unwrap());
	match gpu.softmax_cross_entropy(classifier, &logits, &labels, &mut loss, &mut grad) {
		Err(WgpuError::Kernel(error)) => {
			assert_eq!(error, KernelError::LabelOutOfRange { row: 1, label: 3, classes: 3 })
		},
		other => panic!("expected a label error, got {other:?}"),
	}
	let source = gpu.upload(&[0.0; 8]).unwrap();
	let indices = gpu.upload_indices(&[0, 4]).unwrap();
	let mut destination = gpu.zeros(4).unwrap();
	match gpu.gather_rows(&source, 2, &indices, &mut destination) {
		Err(WgpuError::Kernel(error)) => assert_eq!(error, KernelError::IndexOutOfRange { index: 4, rows: 4 }),
		other => panic!("expected an index error, got {other:?}"),
	}
	let mut grad = gpu.zeros(3).unwrap();
	let mut norm = gpu.zeros(1).unwrap();
	match gpu.clip_grad_norm(0.0, &mut [&mut grad], &mut norm) {
		Err(WgpuError::Kernel(error)) => {
			assert_eq!(error, KernelError::InvalidHyperparameter { name: "max_norm" })
		},
		other => panic!("expected a hyper-parameter error, got {other:?}"),
	}
	// A norm with no bias for LayerNorm, and a softmax whose scale is not on the grid.
	let shape = NormShape { norm: Norm::Layer, rows: 2, width: 4, epsilon: 1e-5 };
	let (x, gamma) = (gpu.upload(&[0.0; 8]).unwrap(), gpu.upload(&[1.0; 4]).unwrap());
	let (mut y, mut normalised) = (gpu.zeros(8).unwrap(), gpu.zeros(8).unwrap());
	let expected = cpu.norm(shape, &vec![0.0; 8], &vec![1.0; 4], None, &mut vec![0.0; 8], &mut vec![0.0; 8]);
	match gpu.norm(shape, &x, &gamma, None, &mut y, &mut normalised) {
		Err(WgpuError::Kernel(error)) => assert_eq!(Err(error), expected),
		other => panic!("expected a length error, got {other:?}"),
	}
	let causal = CausalShape { blocks: 1, positions: 2, scale: f32::INFINITY };
	let mut probs = gpu.zeros(4).unwrap();
	match gpu.causal_softmax(causal, &x, &mut probs) {
		Err(WgpuError::Kernel(error)) => assert_eq!(error, KernelError::InvalidHyperparameter { name: "scale" }),
		other => panic!("expected a hyper-parameter error, got {other:?}"),
	}
	// The backend still works after refusing bad input.
	let mut y = gpu.zeros(8).unwrap();
	gpu.activation(Activation::Relu, &source, &mut y).unwrap();
	assert_eq!(gpu.download(&y).unwrap(), vec![0.0; 8]);
}

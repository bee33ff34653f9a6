//! Training through the `Backend` trait: a loop generic over the backend, run
//! on the CPU reference. It learns, it is deterministic to the bit, and the
//! backend agrees with the reference functions it wraps.

mod common;

use common::random_values;
use touchstone_kernels::arith::canonicalize;
use touchstone_kernels::proof::hash::digest_f32;
use touchstone_kernels::*;

const FEATURES: usize = 8;
const HIDDEN: usize = 40;
const CLASSES: usize = 4;
const EXAMPLES: usize = 256;
const BATCH: usize = 32;

/// A synthetic dataset: four Gaussian-ish blobs (sums of uniforms) in 8 dimensions.
fn blobs() -> (Vec<f32>, Vec<u32>) {
	let centers = random_values(500, CLASSES * FEATURES, -2.0, 2.0);
	let noise = random_values(501, EXAMPLES * FEATURES, -0.8, 0.8);
	let labels: Vec<u32> = (0..EXAMPLES as u32).map(|i| i % CLASSES as u32).collect();
	let mut features = Vec::with_capacity(EXAMPLES * FEATURES);
	for (example, &label) in labels.iter().enumerate() {
		for feature in 0..FEATURES {
			features.push(centers[label as usize * FEATURES + feature] + noise[example * FEATURES + feature]);
		}
	}
	canonicalize(&mut features);
	(features, labels)
}

/// Which optimizer a run uses.
#[derive(Clone, Copy)]
enum Optimizer {
	Sgd(SgdMomentum),
	AdamW(AdamW),
}

/// Trains a FEATURES→HIDDEN→CLASSES ReLU network for `steps` steps on any
/// backend; returns the losses and the digest of the final parameters.
fn train<B: Backend>(backend: &mut B, optimizer: Optimizer, steps: u32) -> Result<(Vec<f32>, Digest), B::Error> {
	let (features, labels) = blobs();
	let dataset = backend.upload(&features)?;
	let first = MatmulShape { m: BATCH, k: FEATURES, n: HIDDEN };
	let second = MatmulShape { m: BATCH, k: HIDDEN, n: CLASSES };
	let init = |stream: u64, len: usize, fan_in: usize| {
		let bound = touchstone_kernels::arith::math::rsqrt(fan_in as f32);
		let mut values = vec![0.0; len];
		RandomStream::new(1234, stream).fill_uniform(-bound, bound, &mut values);
		values
	};
	let mut params = [
		backend.upload(&init(0, FEATURES * HIDDEN, FEATURES))?,
		backend.upload(&init(1, HIDDEN, FEATURES))?,
		backend.upload(&init(2, HIDDEN * CLASSES, HIDDEN))?,
		backend.upload(&init(3, CLASSES, HIDDEN))?,
	];
	let sizes = params.iter().map(|p| backend.tensor_len(p)).collect::<Vec<_>>();
	let mut first_state = Vec::new();
	let mut second_state = Vec::new();
	for &size in &sizes {
		first_state.push(backend.zeros(size)?);
		second_state.push(backend.zeros(size)?);
	}
	let mut grads = Vec::new();
	for &size in &sizes {
		grads.push(backend.zeros(size)?);
	}
	let mut batch = backend.zeros(BATCH * FEATURES)?;
	let mut hidden = backend.zeros(BATCH * HIDDEN)?;
	let mut activated = backend.zeros(BATCH * HIDDEN)?;
	let mut logits = backend.zeros(BATCH * CLASSES)?;
	let mut loss = backend.zeros(1)?;
	let mut norm = backend.zeros(1)?;
	let mut dlogits = backend.zeros(BATCH * CLASSES)?;
	let mut dactivated = backend.zeros(BATCH * HIDDEN)?;
	let mut dhidden = backend.zeros(BATCH * HIDDEN)?;
	let mut losses = Vec::new();
	let batches_per_epoch = (EXAMPLES / BATCH) as u32;
	let mut order = Vec::new();
	for step in 0..steps {
		let epoch = step / batches_per_epoch;
		if step % batches_per_epoch == 0 {
			order = RandomStream::new(99, 1000 + u64::from(epoch)).permutation(EXAMPLES as u32);
		}
		let start = (step % batches_per_epoch) as usize * BATCH;
		let indices: Vec<u32> = order[start..start + BATCH].to_vec();
		let batch_labels: Vec<u32> = indices.iter().map(|&i| labels[i as usize]).collect();
		let indices = backend.upload_indices(&indices)?;
		let batch_labels = backend.upload_indices(&batch_labels)?;
		backend.gather_rows(&dataset, FEATURES, &indices, &mut batch)?;

		// Forward.
		backend.matmul(first, MatmulLayout::default(), &batch, &params[0], &mut hidden)?;
		backend.bias_add(BiasLayout::dense(BATCH, HIDDEN), &mut hidden, &params[1])?;
		backend.activation(Activation::Relu, &hidden, &mut activated)?;
		backend.matmul(second, MatmulLayout::default(), &activated, &params[2], &mut logits)?;
		backend.bias_add(BiasLayout::dense(BATCH, CLASSES), &mut logits, &params[3])?;
		let classifier = ClassifierShape { rows: BATCH, classes: CLASSES };
		backend.softmax_cross_entropy(classifier, &logits, &batch_labels, &mut loss, &mut dlogits)?;

		// Backward.
		let [dw1, db1, dw2, db2] = &mut grads[..] else { unreachable!() };
		backend.contract(second.rhs_grad_contraction(), &activated, &dlogits, dw2)?;
		backend.bias_grad(BiasLayout::dense(BATCH, CLASSES), &dlogits, db2)?;
		backend.contract(second.lhs_grad_contraction(), &dlogits, &params[2], &mut dactivated)?;
		backend.activation_grad(Activation::Relu, &hidden, &dactivated, &mut dhidden)?;
		backend.contract(first.rhs_grad_contraction(), &batch, &dhidden, dw1)?;
		backend.bias_grad(BiasLayout::dense(BATCH, HIDDEN), &dhidden, db1)?;
		backend.clip_grad_norm(5.0, &mut [dw1, db1, dw2, db2], &mut norm)?;

		// Update.
		for (index, param) in params.iter_mut().enumerate() {
			match optimizer {
				Optimizer::Sgd(hyper) => backend.sgd_momentum(&hyper, param, &grads[index], &mut first_state[index])?,
				Optimizer::AdamW(hyper) => {
					let scalars = hyper.scalars(step + 1)?;
					let (m, v) = (&mut first_state[index], &mut second_state[index]);
					backend.adamw(&scalars, param, &grads[index], m, v)?;
				},
			}
		}
		losses.push(backend.download(&loss)?[0]);
	}
	let mut all = Vec::new();
	for param in &params {
		all.extend(backend.download(param)?);
	}
	Ok((losses, digest_f32(&all)))
}

const SGD: Optimizer =
	Optimizer::Sgd(SgdMomentum { learning_rate: 0.05, momentum: 0.9, weight_decay: 1e-4, nesterov: false });
const ADAMW: Optimizer =
	Optimizer::AdamW(AdamW { learning_rate: 5e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 });

#[test]
fn mlp_learns_through_the_backend_trait() {
	for optimizer in [SGD, ADAMW] {
		let (losses, _) = train(&mut CpuBackend, optimizer, 64).unwrap();
		let early: f32 = losses[..8].iter().sum::<f32>() / 8.0;
		let late: f32 = losses[56..].iter().sum::<f32>() / 8.0;
		assert!(late < early * 0.3, "loss went from {early} to {late}");
	}
}

#[test]
fn training_is_bit_for_bit_repeatable() {
	let (losses_a, digest_a) = train(&mut CpuBackend, ADAMW, 24).unwrap();
	let (losses_b, digest_b) = train(&mut CpuBackend, ADAMW, 24).unwrap();
	assert_eq!(digest_a, digest_b);
	assert_eq!(
		losses_a.iter().map(|l| l.to_bits()).collect::<Vec<_>>(),
		losses_b.iter().map(|l| l.to_bits()).collect::<Vec<_>>()
	);
	let (_, digest_sgd) = train(&mut CpuBackend, SGD, 24).unwrap();
	assert_ne!(digest_a, digest_sgd);
}

#[test]
fn cnn_step_through_the_backend_matches_the_reference_functions() {
	let mut backend = CpuBackend;
	let shape = Conv2dShape {
		batch: 2,
		in_channels: 1,
		out_channels: 3,
		height: 8,
		width: 8,
		kernel_height: 3,
		kernel_width: 3,
	};
	let spatial = shape.out_height() * shape.out_width();
	let x = random_values(600, shape.input_len().unwrap(), 0.0, 1.0);
	let w = random_values(601, shape.weight_len().unwrap(), -0.3, 0.3);
	let bias = random_values(602, 3, -0.1, 0.1);
	let dy = random_values(603, shape.output_len().unwrap(), -1.0, 1.0);
	let (xt, wt, bt, dyt) = (
		backend.upload(&x).unwrap(),
		backend.upload(&w).unwrap(),
		backend.upload(&bias).unwrap(),
		backend.upload(&dy).unwrap(),
	);
	let mut y = backend.zeros(shape.output_len().unwrap()).unwrap();
	backend.conv2d(shape, &xt, &wt, &mut y).unwrap();
	backend.bias_add(BiasLayout::channels_first(2, 3, spatial), &mut y, &bt).unwrap();
	let mut expected = vec![0.0; y.len()];
	conv2d(shape, &x, &w, &mut expected).unwrap();
	bias_add(BiasLayout::channels_first(2, 3, spatial), &mut expected, &bias).unwrap();
	assert_eq!(digest_f32(&backend.download(&y).unwrap()), digest_f32(&expected));

	let mut dw = backend.zeros(w.len()).unwrap();
	backend.contract(Contraction::Conv2dWeightGrad(shape), &dyt, &xt, &mut dw).unwrap();
	let mut expected_dw = vec![0.0; w.len()];
	conv2d_weight_grad(shape, &dy, &x, &mut expected_dw).unwrap();
	assert_eq!(digest_f32(&dw), digest_f32(&expected_dw));
	let mut dx = backend.zeros(x.len()).unwrap();
	backend.contract(Contraction::Conv2dInputGrad(shape), &dyt, &wt, &mut dx).unwrap();
	let mut expected_dx = vec![0.0; x.len()];
	conv2d_input_grad(shape, &dy, &w, &mut expected_dx).unwrap();
	assert_eq!(digest_f32(&dx), digest_f32(&expected_dx));
	let mut db = backend.zeros(3).unwrap();
	backend.bias_grad(BiasLayout::channels_first(2, 3, spatial), &dyt, &mut db).unwrap();
	assert!(db.iter().all(|v| v.is_finite()));
	assert!(backend.is_bit_exact());
	assert_eq!(backend.name(), "cpu-reference");
	let mut wrong = backend.zeros(1).unwrap();
	assert!(backend.conv2d(shape, &xt, &wt, &mut wrong).is_err());
}

//! Shared state across backends: whole training runs on wgpu produce the CPU
//! reference's state-hash chain, step for step, and the state root hashed on the
//! device is the reference's, bit for bit: on ragged tensors with negative zeros,
//! on a state as large as the wide MLP's, and at the boundaries of a run trained
//! on the device.
//!
//! Needs an adapter (lavapipe here) and `digits.csv.gz`; every test fails, never
//! skip, saying what to install or fetch when either is missing.
#[path = "../../tests/support/mod.rs"]
mod support;

use support::*;
use touchstone_kernels::exec::backend::Backend;
use touchstone_kernels::job::data::Dataset;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::job::trace::{StepRecord, Trainer};
use touchstone_kernels::proof::chain::TracePoint;
use touchstone_kernels::proof::state_tree;
use touchstone_kernels_wgpu::conformance::{random_values, state_root_tensors};
use touchstone_kernels_wgpu::WgpuBackend;
use touchstone_kernels::CpuBackend;

/// Opens the wgpu backend or fails the test with what to install.
fn wgpu_backend() -> WgpuBackend {
	WgpuBackend::new().unwrap_or_else(|error| {
		panic!(
			"the wgpu backend is required by this test and could not be opened: {error}\n\
			 (on Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libvulkan1` provides lavapipe)"
		)
	})
}

/// Runs `steps` steps of `model`/`train` on `data` through `backend`, hashing every
/// step as a segment's trace does; returns every record with the state root and
/// state hash after it (the root taken where the state lives).
fn run<B: Backend>(backend: B, model: &ModelConfig, train: &TrainConfig, data: Dataset) -> Vec<(StepRecord, TracePoint)> {
	let name = backend.name().to_string();
	let mut trainer = Trainer::new(backend, model, train, data).unwrap_or_else(|e| panic!("{name}: {e:?}"));
	trainer.start_trace().unwrap_or_else(|e| panic!("{name}: {e:?}"));
	(0..train.steps)
		.map(|_| {
			let record = trainer.step().unwrap_or_else(|e| panic!("{name}: {e:?}"));
			(record, trainer.trace_point().expect("the run hashes every step"))
		})
		.collect()
}

/// Asserts two runs agree at every step, naming the first step that differs.
fn assert_same_chain(reference: &[(StepRecord, TracePoint)], wgpu: &[(StepRecord, TracePoint)]) {
	assert_eq!(reference.len(), wgpu.len());
	for ((expected, expected_point), (actual, actual_point)) in reference.iter().zip(wgpu) {
		assert_eq!(
			(hex(&actual_point.last_state_root), actual.loss.to_bits(), hex(&actual.record)),
			(hex(&expected_point.last_state_root), expected.loss.to_bits(), hex(&expected.record)),
			"step {}: wgpu's state root, loss or record differs from the reference",
			expected.step
		);
		assert_eq!(hex(&actual_point.last_hash), hex(&expected_point.last_hash), "step {}: state hash", expected.step);
	}
}

#[test]
fn a_200_step_digits_mlp_run_has_the_same_state_hash_chain_on_the_reference_and_on_wgpu() {
	let (train_set, _) = digits_split();
	let (model, train) = (digits_model(), digits_train(200));
	let reference = run(CpuBackend, &model, &train, train_set.clone());
	let wgpu = run(wgpu_backend(), &model, &train, train_set);
	assert_eq!(wgpu.len(), 200);
	assert_same_chain(&reference, &wgpu);
	// The run learned: the chain being equal is not the chain of a stuck model.
	let early: f32 = reference[..10].iter().map(|(r, _)| r.loss).sum::<f32>() / 10.0;
	let late: f32 = reference[190..].iter().map(|(r, _)| r.loss).sum::<f32>() / 10.0;
	assert!(late < early * 0.3, "loss went from {early} to {late}");
}

#[test]
fn an_adamw_run_with_clipping_and_tanh_has_the_same_state_hash_chain_on_wgpu() {
	let (model, train) = (blob_model(), blob_train(60));
	let reference = run(CpuBackend, &model, &train, blobs(400));
	let wgpu = run(wgpu_backend(), &model, &train, blobs(400));
	assert_same_chain(&reference, &wgpu);
}

/// Rule 7 on the device: an infinity that tanh hides from the loss and the state is
/// found by the queued per-output checks, and the step is refused as on the reference;
/// the flag is cleared for the next run.
#[test]
fn a_hidden_infinity_stops_the_run_on_wgpu_as_on_the_reference() {
	use touchstone_kernels::KernelError;
	let (model, train) = (blob_model(), blob_train(2));
	let mut data = blobs(200);
	data.features.iter_mut().for_each(|feature| *feature = f32::MAX);
	let mut reference = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
	assert_eq!(reference.step().err(), Some(KernelError::NonFinite { step: 0 }));
	let mut trainer = Trainer::new(wgpu_backend(), &model, &train, data).unwrap();
	let error = trainer.step().err();
	assert!(
		matches!(error, Some(touchstone_kernels_wgpu::WgpuError::Kernel(KernelError::NonFinite { step: 0 }))),
		"{error:?}"
	);
	// A finite run on the same backend afterwards is not blamed for the earlier flag.
	let mut finite = Trainer::new(trainer.into_backend(), &model, &train, blobs(200)).unwrap();
	assert!(finite.step().is_ok());
}

/// The device's root of `host` (uploaded) and the reference's.
fn both_roots(backend: &mut WgpuBackend, host: &[Vec<f32>]) -> (String, String) {
	let tensors: Vec<_> = host.iter().map(|values| backend.upload(values).unwrap()).collect();
	let refs: Vec<_> = tensors.iter().collect();
	let device = backend.state_root(&refs).unwrap().expect("the wgpu backend hashes on the device");
	let views: Vec<&[f32]> = host.iter().map(Vec::as_slice).collect();
	(hex(&device), hex(&state_tree::root(&views).unwrap()))
}

#[test]
fn the_device_root_of_ragged_tensors_with_negative_zeros_is_the_references() {
	let mut backend = wgpu_backend();
	let host = state_root_tensors();
	assert!(host.iter().flatten().any(|value| value.to_bits() == 0x8000_0000), "the check covers -0");
	let (device, reference) = both_roots(&mut backend, &host);
	assert_eq!(device, reference);
	// Every tensor counts, and so does its place: swapping two changes the root.
	let swapped = [host[3].clone(), host[2].clone()];
	let (device, reference) = both_roots(&mut backend, &swapped);
	assert_eq!(device, reference);
	assert_ne!(device, both_roots(&mut backend, &host[2..4]).0);
}

#[test]
fn the_device_root_of_a_wide_mlp_sized_state_is_the_references() {
	// The wide MLP's parameters and SGD momenta, 784→1024→1024→10: 14.9 MB, 14,562 chunks,
	// so the merge runs over fourteen levels with odd widths among them.
	let lens = [784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10];
	let host: Vec<Vec<f32>> = lens
		.iter()
		.chain(&lens)
		.enumerate()
		.map(|(stream, &len)| random_values(40 + stream as u64, len, -0.5, 0.5))
		.collect();
	assert_eq!(state_tree::state_chunk_count(host.iter().map(Vec::len)), 14_562);
	let mut backend = wgpu_backend();
	let (device, reference) = both_roots(&mut backend, &host);
	assert_eq!(device, reference);
}

#[test]
fn a_state_trained_on_the_device_closes_the_references_boundaries_without_leaving_the_device() {
	let (model, train) = (blob_model(), blob_train(30));
	let mut reference = Trainer::new(CpuBackend, &model, &train, blobs(400)).unwrap();
	let mut device = Trainer::new(wgpu_backend(), &model, &train, blobs(400)).unwrap();
	for step in 0..30 {
		reference.step().unwrap();
		device.step().unwrap();
		if step % 10 == 9 {
			// The boundary: the state root hashed on the device, and the segment's loss records.
			let expected = reference.close_segment().unwrap();
			let actual = device.close_segment().unwrap();
			assert_eq!(
				(hex(&actual.state_root), hex(&actual.record), actual.next_step),
				(hex(&expected.state_root), hex(&expected.record), expected.next_step),
				"after step {step}"
			);
			// The host's hash of the downloaded state agrees too.
			let state = device.state().unwrap();
			let views: Vec<&[f32]> = state.iter().map(Vec::as_slice).collect();
			assert_eq!(hex(&state_tree::root(&views).unwrap()), hex(&expected.state_root));
		}
	}
}

#[test]
fn a_state_of_one_chunk_is_refused_on_the_device_as_on_the_host() {
	let mut backend = wgpu_backend();
	let tensor = backend.upload(&[1.0, 2.0]).unwrap();
	assert!(backend.state_root(&[&tensor]).is_err());
	assert!(state_tree::root(&[&[1.0, 2.0][..]]).is_err());
}

/// A character transformer trained on the Shakespeare corpus on wgpu has the reference's
/// state root after every step, with its loss and gradient norm bit for bit: LayerNorm
/// with tied embeddings and clipping, and RMSNorm with an untied head and no clipping,
/// context 64 (attention's causal blocks past two chunks), a warm-up and a cosine decay.
/// Needs `shakespeare.txt` (kernels/scripts/fetch-datasets.sh).
#[test]
fn a_transformer_trains_on_wgpu_with_the_references_state_roots() {
	use touchstone_kernels::job::text::load_shakespeare;
	use touchstone_kernels::job::transformer::{batch_windows, TransformerConfig, TransformerState, TransformerTraining};
	use touchstone_kernels::ops::norm::Norm;
	use touchstone_kernels::ops::schedule::WarmupCosine;
	let corpus = load_shakespeare().unwrap_or_else(|error| panic!("{error}"));
	let (training, _) = corpus.split();
	let vocab = corpus.vocab_len() as u32;
	let mut gpu = wgpu_backend();
	for (norm, tied_embeddings, clip_norm) in [(Norm::Layer, true, Some(1.0)), (Norm::Rms, false, None)] {
		let config = TransformerConfig { vocab, context: 64, layers: 2, heads: 4, width: 64, mlp_ratio: 4, norm, tied_embeddings };
		let run = TransformerTraining {
			batch: 4,
			schedule: WarmupCosine { peak: 0.01, floor: 0.001, warmup_steps: 2, total_steps: 6 },
			beta1: 0.9,
			beta2: 0.99,
			epsilon: 1e-8,
			weight_decay: 0.1,
			clip_norm,
		};
		let mut reference = TransformerState::new(config, 5).unwrap();
		let mut on_device = reference.upload(&mut gpu).unwrap();
		for step in 0..6 {
			let batch = batch_windows(&training, 64, run.batch, 5, step).unwrap();
			let expected = reference.step(config, &run, &batch).unwrap();
			let actual = on_device.step_on(&mut gpu, config, &run, &batch).unwrap();
			assert_eq!(
				(actual.loss.to_bits(), actual.grad_norm.to_bits(), actual.learning_rate.to_bits()),
				(expected.loss.to_bits(), expected.grad_norm.to_bits(), expected.learning_rate.to_bits()),
				"{norm:?} step {step}: {actual:?} against the reference's {expected:?}"
			);
			let state = on_device.download(&mut gpu).unwrap();
			let root = |state: &TransformerState| {
				let tensors: Vec<&[f32]> =
					[&state.params, &state.first_moments, &state.second_moments].into_iter().flatten().map(Vec::as_slice).collect();
				hex(&state_tree::root(&tensors).unwrap())
			};
			assert_eq!(root(&state), root(&reference), "{norm:?} step {step}: state root");
		}
	}
}

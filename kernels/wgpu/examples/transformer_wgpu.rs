//! Trains the character transformer on the Shakespeare corpus on wgpu and on the CPU
//! reference in lockstep, from the same initial weights on the same batches, and checks
//! that the two stay bit-identical: every step's loss, gradient norm and learning rate,
//! and the state root (parameters and both AdamW moments) every `--check-every` steps and
//! after the last. Prints both backends' time per step and the validation loss.
//!
//! ```text
//! cargo run --release -p touchstone-kernels-wgpu --example transformer_wgpu -- --steps 2000
//! ```
//!
//! Options: `--steps N` (2,000), `--batch B` (12), `--check-every K` (100), `--layers`,
//! `--heads`, `--width`, `--context` (the 4 × 4 × 128 model at context 64, 812,288
//! parameters), `--threads T` for the reference (1). The adapter is the first that passes
//! the conformance self-test (`TOUCHSTONE_WGPU_ADAPTER` narrows it by name): a GPU where
//! there is one, lavapipe otherwise. Exits with status 1 at the first difference. The last
//! line is a JSON summary. Needs the corpus (`kernels/scripts/fetch-datasets.sh`).

#[path = "../../examples/common/character.rs"]
mod character;

use std::time::Instant;

use character::{fail, median_ms, Options};
use touchstone_kernels::exec::parallel::set_threads;
use touchstone_kernels::job::text::load_shakespeare;
use touchstone_kernels::job::transformer::{batch_windows, mean_loss, TransformerState};
use touchstone_kernels::proof::state_tree;
use touchstone_kernels_wgpu::WgpuBackend;

/// The state root over parameters, first and second moments, as hex.
fn root(state: &TransformerState) -> String {
	let tensors: Vec<&[f32]> =
		[&state.params, &state.first_moments, &state.second_moments].into_iter().flatten().map(Vec::as_slice).collect();
	let root = state_tree::root(&tensors).unwrap_or_else(|error| fail(format!("state root: {error:?}"), 1));
	root.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn main() {
	let options = Options::parse(&["steps", "batch", "check-every", "layers", "heads", "width", "context", "threads"]);
	set_threads(options.number("threads", 1) as usize);
	let corpus = load_shakespeare().unwrap_or_else(|error| fail(error, 1));
	let (training, validation) = corpus.split();
	let config = character::model(&options, corpus.vocab_len() as u32);
	let steps = options.number("steps", 2_000);
	let check_every = options.number("check-every", 100).max(1);
	let context = config.context as usize;
	// The model and run of `kernels/examples/transformer.rs`, so the two compare.
	let run = character::training(&options, steps);
	let seed = 1;
	let mut gpu = WgpuBackend::new().unwrap_or_else(|error| fail(format!("no wgpu adapter passes the conformance self-test: {error:?}"), 1));
	let adapter = gpu.adapter_info().name.clone();
	eprintln!("adapter: {adapter}; {} parameters, {steps} steps of batch {}", config.parameter_count(), run.batch);
	let mut reference = TransformerState::new(config, seed).unwrap_or_else(|error| fail(format!("{error}"), 1));
	let mut on_device = reference.upload(&mut gpu).unwrap_or_else(|error| fail(format!("upload: {error:?}"), 1));
	let (mut device_seconds, mut reference_seconds, mut roots_checked) = (Vec::new(), Vec::new(), 0u32);
	for step in 0..steps {
		let batch = batch_windows(&training, context, run.batch, seed, step).unwrap_or_else(|error| fail(format!("{error}"), 1));
		let started = Instant::now();
		let expected = reference.step(config, &run, &batch).unwrap_or_else(|error| fail(format!("reference step {step}: {error}"), 1));
		reference_seconds.push(started.elapsed().as_secs_f64());
		let started = Instant::now();
		let actual = on_device.step_on(&mut gpu, config, &run, &batch).unwrap_or_else(|error| fail(format!("wgpu step {step}: {error:?}"), 1));
		// The step's loss is read back, so the device has finished it.
		device_seconds.push(started.elapsed().as_secs_f64());
		let bits = |report: &touchstone_kernels::job::transformer::StepReport| {
			(report.loss.to_bits(), report.grad_norm.to_bits(), report.learning_rate.to_bits())
		};
		if bits(&actual) != bits(&expected) {
			fail(format!("step {step}: wgpu {actual:?}, the reference {expected:?}"), 1);
		}
		if (step + 1) % check_every == 0 || step + 1 == steps {
			let downloaded = on_device.download(&mut gpu).unwrap_or_else(|error| fail(format!("download: {error:?}"), 1));
			let (device_root, reference_root) = (root(&downloaded), root(&reference));
			if device_root != reference_root {
				fail(format!("step {step}: state root {device_root} on wgpu, {reference_root} on the reference"), 1);
			}
			roots_checked += 1;
			eprintln!("step {}: loss {:.4}, state root {}… on both", step + 1, actual.loss, &device_root[..16]);
		}
	}
	let held_out = character::held_out(&validation, context);
	let validation_loss = mean_loss(config, &reference.params, &held_out, context).unwrap_or_else(|error| fail(format!("{error}"), 1));
	println!(
		"{{\"adapter\": {adapter:?}, \"parameters\": {}, \"steps\": {steps}, \"batch\": {}, \"bit_identical_steps\": {steps}, \
		 \"state_roots_compared\": {roots_checked}, \"final_state_root\": {:?}, \"validation_loss\": {validation_loss}, \
		 \"wgpu_ms_per_step\": {:.1}, \"reference_ms_per_step\": {:.1}, \"reference_threads\": {}}}",
		config.parameter_count(),
		run.batch,
		root(&reference),
		median_ms(&mut device_seconds),
		median_ms(&mut reference_seconds),
		touchstone_kernels::exec::parallel::threads(),
	);
}

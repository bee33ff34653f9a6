//! Times the character transformer's training step on libtorch against the CPU reference,
//! one thread each by default, from the same initial weights on the same batches: the
//! tolerance-mode backend's per-step time, with how far its run lands from the reference's.
//!
//! ```text
//! source kernels/scripts/torch-env.sh
//! cargo run --release -p touchstone-kernels-tch --example transformer_tch -- --steps 40
//! ```
//!
//! Options: `--steps N` (200, as `transformer`), `--batch B` (12), `--layers`, `--heads`, `--width`,
//! `--context` (the 4 × 4 × 128 model at context 64, 812,288 parameters), `--threads T`
//! for both backends (1). Prints the median step of each and, as the last line, a JSON
//! summary. Needs the corpus (`kernels/scripts/fetch-datasets.sh`).

#[path = "../../examples/common/character.rs"]
mod character;

use std::time::Instant;

use character::{fail, median_ms, Options};
use touchstone_kernels::exec::parallel::set_threads;
use touchstone_kernels::job::distance::Distance;
use touchstone_kernels::job::text::load_shakespeare;
use touchstone_kernels::job::transformer::{batch_windows, TransformerState};
use touchstone_kernels_tch::TchBackend;

fn main() {
	let options = Options::parse(&["steps", "batch", "layers", "heads", "width", "context", "threads"]);
	let threads = options.number("threads", 1);
	set_threads(threads as usize);
	tch::set_num_threads(threads as i32);
	let corpus = load_shakespeare().unwrap_or_else(|error| fail(error, 1));
	let (training, _) = corpus.split();
	let config = character::model(&options, corpus.vocab_len() as u32);
	let steps = options.number("steps", 200);
	let run = character::training(&options, steps);
	let seed = 1;
	let mut torch = TchBackend::cpu();
	let mut reference = TransformerState::new(config, seed).unwrap_or_else(|error| fail(format!("{error}"), 1));
	let mut on_torch = reference.upload(&mut torch).unwrap_or_else(|error| fail(format!("upload: {error:?}"), 1));
	let (mut torch_seconds, mut reference_seconds, mut worst_loss_gap) = (Vec::new(), Vec::new(), 0.0f32);
	for step in 0..steps {
		let batch = batch_windows(&training, config.context as usize, run.batch, seed, step).unwrap_or_else(|error| fail(format!("{error}"), 1));
		let started = Instant::now();
		let expected = reference.step(config, &run, &batch).unwrap_or_else(|error| fail(format!("reference step {step}: {error}"), 1));
		reference_seconds.push(started.elapsed().as_secs_f64());
		let started = Instant::now();
		// The step's loss is read back, so libtorch has finished it.
		let actual = on_torch.step_on(&mut torch, config, &run, &batch).unwrap_or_else(|error| fail(format!("libtorch step {step}: {error:?}"), 1));
		torch_seconds.push(started.elapsed().as_secs_f64());
		worst_loss_gap = worst_loss_gap.max((actual.loss - expected.loss).abs() / expected.loss);
	}
	let downloaded = on_torch.download(&mut torch).unwrap_or_else(|error| fail(format!("download: {error:?}"), 1));
	let distance = Distance::between(&downloaded.params, &reference.params).unwrap_or_else(|error| fail(format!("{error:?}"), 1));
	let (torch_ms, reference_ms) = (median_ms(&mut torch_seconds), median_ms(&mut reference_seconds));
	eprintln!("median step: libtorch {torch_ms:.1} ms, the reference {reference_ms:.1} ms ({threads} thread(s) each)");
	println!(
		"{{\"parameters\": {}, \"steps\": {steps}, \"batch\": {}, \"threads\": {threads}, \"libtorch_ms_per_step\": {torch_ms:.1}, \
		 \"reference_ms_per_step\": {reference_ms:.1}, \"largest_relative_loss_gap\": {worst_loss_gap:e}, \"l2\": {}, \"linf\": {}, \"cosine_distance\": {}}}",
		config.parameter_count(),
		run.batch,
		distance.l2,
		distance.linf,
		distance.cosine,
	);
}

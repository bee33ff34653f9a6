//! Trains the character transformer on the Shakespeare corpus on the CPU reference and
//! writes what `kernels/scripts/pytorch_transformer.py` needs to train the same model in
//! PyTorch from the same initial weights, on the same batches at the same rates:
//!
//! ```text
//! cargo run -p touchstone-kernels --example transformer -- --steps 200 --out /tmp/gpt
//! python3 kernels/scripts/pytorch_transformer.py /tmp/gpt
//! ```
//!
//! `scripts/bench-transformer.sh` runs both and prints the two losses and step times side by
//! side. Options: `--steps N` (200), `--batch B` (12), `--layers`, `--heads`, `--width`,
//! `--context` (the issue's 4 × 4 × 128 model at context 64), `--threads T` (1), `--out DIR`.
//!
//! Files in `DIR`: `config.json` (the model, the run, and the reference's figures),
//! `init.f32` (every parameter tensor in order, little-endian), `batches.u32` (every step's
//! windows of `context + 1` tokens), `validation.u32` (the held-out windows), `rates.f32`
//! (every step's learning rate), `losses.f32` (the reference's training loss per step).

#[path = "common/character.rs"]
mod character;

use std::io::Write;
use std::time::Instant;

use character::{fail, Options};
use touchstone_kernels::exec::parallel::set_threads;
use touchstone_kernels::job::text::load_shakespeare;
use touchstone_kernels::job::transformer::{batch_windows, generate, mean_loss, TransformerState};

fn write_words<T: Copy>(path: &std::path::Path, words: impl IntoIterator<Item = T>, bytes: fn(T) -> [u8; 4]) {
	let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
	for word in words {
		file.write_all(&bytes(word)).expect("write");
	}
}

fn main() {
	let options = Options::parse(&["steps", "batch", "layers", "heads", "width", "context", "threads", "out"]);
	let out = std::path::PathBuf::from(options.text("out").unwrap_or("transformer-run"));
	std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
	set_threads(options.number("threads", 1) as usize);

	let corpus = load_shakespeare().unwrap_or_else(|error| fail(error, 1));
	let (training, validation) = corpus.split();
	let config = character::model(&options, corpus.vocab_len() as u32);
	let steps = options.number("steps", 200);
	let context = config.context as usize;
	let run = character::training(&options, steps);
	let seed = 1;
	let held_out = character::held_out(&validation, context);
	let mut state = TransformerState::new(config, seed).expect("a valid model");
	write_words(&out.join("init.f32"), state.params.iter().flatten().copied(), f32::to_le_bytes);
	write_words(&out.join("validation.u32"), held_out.iter().copied(), u32::to_le_bytes);
	let initial_loss = mean_loss(config, &state.params, &held_out, context).expect("evaluation");

	let (mut batches, mut rates, mut losses, mut seconds) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
	for step in 0..steps {
		let batch = batch_windows(&training, context, run.batch, seed, step).expect("a batch");
		let started = Instant::now();
		let report = state.step(config, &run, &batch).expect("a step");
		seconds.push(started.elapsed().as_secs_f64());
		if step % 50 == 0 || step + 1 == steps {
			eprintln!("step {step}: loss {:.4}, rate {:.6}, {:.0} ms", report.loss, report.learning_rate, seconds[seconds.len() - 1] * 1e3);
		}
		batches.extend(batch);
		rates.push(report.learning_rate);
		losses.push(report.loss);
	}
	let final_loss = mean_loss(config, &state.params, &held_out, context).expect("evaluation");
	write_words(&out.join("batches.u32"), batches, u32::to_le_bytes);
	write_words(&out.join("rates.f32"), rates, f32::to_le_bytes);
	write_words(&out.join("losses.f32"), losses, f32::to_le_bytes);
	let median_ms = character::median_ms(&mut seconds);
	let sample = generate(config, &state.params, &corpus.encode(b"KING.").expect("in the vocabulary"), 200, false, 7).expect("a sample");
	let sample = String::from_utf8_lossy(&corpus.decode(&sample).expect("in the vocabulary")).into_owned();
	let summary = format!(
		concat!(
			"{{\"vocab\": {}, \"context\": {}, \"layers\": {}, \"heads\": {}, \"width\": {}, \"mlp_ratio\": {}, ",
			"\"parameters\": {}, \"steps\": {}, \"batch\": {}, \"beta1\": {}, \"beta2\": {}, \"epsilon\": {:e}, ",
			"\"weight_decay\": {}, \"clip_norm\": {}, \"norm_epsilon\": {:e}, \"threads\": {}, ",
			"\"initial_validation_loss\": {}, \"validation_loss\": {}, \"ms_per_step\": {:.1}, \"sample\": {:?}}}"
		),
		config.vocab,
		config.context,
		config.layers,
		config.heads,
		config.width,
		config.mlp_ratio,
		config.parameter_count(),
		steps,
		run.batch,
		run.beta1,
		run.beta2,
		run.epsilon,
		run.weight_decay,
		run.clip_norm.unwrap_or(0.0),
		touchstone_kernels::job::transformer::NORM_EPSILON,
		touchstone_kernels::exec::parallel::threads(),
		initial_loss,
		final_loss,
		median_ms,
		sample,
	);
	std::fs::write(out.join("config.json"), &summary).expect("config.json");
	println!("{summary}");
}

//! What the character-transformer examples share (`transformer` here, `transformer_wgpu` in
//! the wgpu crate): their command line, and the model and run they train, so that their
//! figures compare.
// Each example uses part of it.
#![allow(dead_code)]

use std::collections::HashMap;

use touchstone_kernels::job::text::{sequence, sequence_count};
use touchstone_kernels::job::transformer::{TransformerConfig, TransformerTraining};
use touchstone_kernels::ops::norm::Norm;
use touchstone_kernels::ops::schedule::WarmupCosine;

/// Held-out windows the validation loss is the mean over.
pub const VALIDATION_WINDOWS: usize = 64;

/// Stops with `message` and exit status `code`.
pub fn fail(message: impl std::fmt::Display, code: i32) -> ! {
	eprintln!("{message}");
	std::process::exit(code)
}

/// `--name value` options from the command line.
pub struct Options(HashMap<String, String>);

impl Options {
	/// Reads the command line: `--name value` pairs whose names are among `known`.
	pub fn parse(known: &[&str]) -> Self {
		let list = known.iter().map(|name| format!("--{name}")).collect::<Vec<_>>().join(", ");
		let mut options = HashMap::new();
		let mut arguments = std::env::args().skip(1);
		while let Some(flag) = arguments.next() {
			let name = flag.strip_prefix("--").filter(|name| known.contains(name));
			let Some(name) = name else { fail(format!("unexpected argument {flag:?}: options are {list}"), 2) };
			let value = arguments.next().unwrap_or_else(|| fail(format!("--{name} needs a value"), 2));
			options.insert(name.to_string(), value);
		}
		Self(options)
	}

	/// Option `name` as a whole number, `default` when absent.
	pub fn number(&self, name: &str, default: u32) -> u32 {
		self.0.get(name).map_or(default, |value| value.parse().unwrap_or_else(|_| fail(format!("--{name} takes a whole number, not {value:?}"), 2)))
	}

	/// Option `name` as given.
	pub fn text(&self, name: &str) -> Option<&str> {
		self.0.get(name).map(String::as_str)
	}
}

/// The model: `--layers`, `--heads`, `--width`, `--context` (4, 4, 128, 64: 812,288
/// parameters on the Shakespeare vocabulary), LayerNorm, an MLP of 4×, tied embeddings.
pub fn model(options: &Options, vocab: u32) -> TransformerConfig {
	TransformerConfig {
		vocab,
		context: options.number("context", 64),
		layers: options.number("layers", 4),
		heads: options.number("heads", 4),
		width: options.number("width", 128),
		mlp_ratio: 4,
		norm: Norm::Layer,
		tied_embeddings: true,
	}
	.validated()
	.unwrap_or_else(|error| fail(format!("the model is outside the bounds: {error}"), 2))
}

/// The run of `steps` steps: `--batch` (12) windows a step, AdamW (β 0.9, 0.99, decay 0.1
/// on matrices), clipping at 1, a peak rate of 10⁻³ after a warm-up over a twentieth of the
/// steps, then a cosine to 10⁻⁴.
pub fn training(options: &Options, steps: u32) -> TransformerTraining {
	TransformerTraining {
		batch: options.number("batch", 12) as usize,
		schedule: WarmupCosine { peak: 1e-3, floor: 1e-4, warmup_steps: (steps / 20).max(1), total_steps: steps.max(1) },
		beta1: 0.9,
		beta2: 0.99,
		epsilon: 1e-8,
		weight_decay: 0.1,
		clip_norm: Some(1.0),
	}
}

/// The first [`VALIDATION_WINDOWS`] windows of `context + 1` tokens of the held-out
/// `validation` stream, one after another: what both examples' validation loss is the mean over.
pub fn held_out(validation: &[u32], context: usize) -> Vec<u32> {
	(0..VALIDATION_WINDOWS.min(sequence_count(validation.len(), context)))
		.flat_map(|index| sequence(validation, context, index).unwrap_or_else(|| fail(format!("no validation window {index}"), 1)).to_vec())
		.collect()
}

/// The median of `seconds`, in milliseconds (0 for none); sorts them.
pub fn median_ms(seconds: &mut [f64]) -> f64 {
	seconds.sort_by(f64::total_cmp);
	seconds.get(seconds.len() / 2).map_or(0.0, |s| s * 1e3)
}

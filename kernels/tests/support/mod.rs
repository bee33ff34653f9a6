//! The reference jobs the learning-proof tests train, shared by several test files.
#![allow(dead_code)]

use touchstone_kernels::job::data::{load_digits, synthetic, Dataset};
use touchstone_kernels::job::model::{ModelConfig, OptimizerConfig, TrainConfig};
use touchstone_kernels::Activation;

/// Test samples held out of the digits (20 %).
pub const DIGITS_TEST_SAMPLES: usize = 360;

/// The digits MLP: 64 → 64 → 10, ReLU (kernels/scripts/pytorch_digits.py trains the same).
pub fn digits_model() -> ModelConfig {
	ModelConfig::Mlp { inputs: 64, hidden: vec![64], classes: 10, activation: Activation::Relu }
}

/// SGD, learning rate 0.1, momentum 0.9, batch 32, seed 42, no clipping.
pub fn digits_train(steps: u32) -> TrainConfig {
	TrainConfig {
		steps,
		batch_size: 32,
		learning_rate: 100_000_000,
		optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
		grad_clip_norm: None,
		seed: 42,
		checkpoint_interval: 50,
	}
}

/// The digits, split into (train, test) with the job's seed. Panics with the
/// fetch instructions when the file is missing: these tests never skip.
pub fn digits_split() -> (Dataset, Dataset) {
	let (data, _) = load_digits().unwrap_or_else(|error| panic!("{error}"));
	data.split(DIGITS_TEST_SAMPLES, digits_train(0).seed).expect("split")
}

/// A small synthetic set for fast proof tests: 8 features, 4 classes.
pub fn blobs(samples: usize) -> Dataset {
	synthetic(11, samples, 8, 4)
}

/// A small MLP over `blobs`, with a hidden layer wider than a tile so that
/// contractions have several tiles and K-chunks.
pub fn blob_model() -> ModelConfig {
	ModelConfig::Mlp { inputs: 8, hidden: vec![40], classes: 4, activation: Activation::Tanh }
}

/// AdamW with clipping, batch 40, for `blob_model`.
pub fn blob_train(steps: u32) -> TrainConfig {
	TrainConfig {
		steps,
		batch_size: 40,
		learning_rate: 5_000_000,
		optimizer: OptimizerConfig::AdamW {
			beta1: 900_000_000,
			beta2: 999_000_000,
			epsilon: 10,
			weight_decay: 10_000_000,
		},
		grad_clip_norm: Some(1_000_000_000),
		seed: 5,
		checkpoint_interval: 4,
	}
}

/// Lowercase hex.
pub fn hex(digest: &[u8; 32]) -> String {
	touchstone_kernels::job::data::hex(digest)
}

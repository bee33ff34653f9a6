//! Datasets as artifacts, and the built-in digits example.
//!
//! A dataset file is the kernels' canonical dataset encoding: the ASCII prefix
//! `touchstone/dataset/v1`, then as little-endian `u32`s the sample count, the features
//! per sample and the class count, every feature's canonical `f32` bits (sample by
//! sample) and every label. Its BLAKE2b-256 is therefore `Dataset::digest`, and the same
//! samples always give the same file.

use anyhow::{bail, ensure, Context, Result};
use touchstone_kernels::job::data::{load_digits, Dataset};

/// The file prefix.
const PREFIX: &[u8] = b"touchstone/dataset/v1";

/// The samples the digits example holds out for testing (of 1,797).
pub const DIGITS_TEST_SAMPLES: usize = 360;
/// The seed of the digits example (initialisation, batch order and its split).
pub const DIGITS_SEED: u64 = 42;

/// Encodes `data` as a dataset file.
pub fn to_bytes(data: &Dataset) -> Vec<u8> {
	let header = [data.len() as u32, data.feature_len as u32, data.classes];
	let mut bytes = Vec::with_capacity(PREFIX.len() + 4 * (3 + data.features.len() + data.labels.len()));
	bytes.extend_from_slice(PREFIX);
	for word in header.into_iter().chain(data.words()) {
		bytes.extend_from_slice(&word.to_le_bytes());
	}
	bytes
}

/// Decodes a dataset file, refusing anything malformed.
pub fn from_bytes(bytes: &[u8]) -> Result<Dataset> {
	let body = bytes.strip_prefix(PREFIX).context("not a Touchstone dataset file (wrong prefix)")?;
	ensure!(body.len() % 4 == 0 && body.len() >= 12, "dataset file truncated");
	let words: Vec<u32> = body.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
	let (samples, feature_len, classes) = (words[0] as usize, words[1] as usize, words[2]);
	let features_len = samples.checked_mul(feature_len).context("dataset header overflows")?;
	if words.len() != 3 + features_len + samples {
		bail!("dataset file holds {} words, its header promises {}", words.len() - 3, features_len + samples);
	}
	let features: Vec<f32> = words[3..3 + features_len].iter().map(|&bits| f32::from_bits(bits)).collect();
	ensure!(features.iter().all(|v| v.is_finite()), "dataset features must be finite");
	let labels = words[3 + features_len..].to_vec();
	ensure!(labels.iter().all(|&label| label < classes), "a dataset label is not below the class count {classes}");
	Ok(Dataset { features, labels, feature_len, classes })
}

/// The digits example's (training, test) split, from the digits file that
/// `kernels/scripts/fetch-datasets.sh` fetches.
pub fn digits_split() -> Result<(Dataset, Dataset)> {
	let (data, _) = load_digits().map_err(|error| anyhow::anyhow!("{error}"))?;
	Ok(data.split(DIGITS_TEST_SAMPLES, DIGITS_SEED).map_err(|error| anyhow::anyhow!("{error}"))?)
}

/// The kernels' seeded synthetic set described by `SAMPLES:FEATURES:CLASSES:SEED`.
pub fn synthetic_from(shape: &str) -> Result<Dataset> {
	let fields: Vec<u64> = shape
		.split(':')
		.map(|field| field.parse::<u64>())
		.collect::<Result<_, _>>()
		.ok()
		.filter(|fields: &Vec<u64>| fields.len() == 4)
		.context("a synthetic dataset is written synthetic:SAMPLES:FEATURES:CLASSES:SEED")?;
	let (samples, features, classes, seed) = (fields[0] as usize, fields[1] as usize, fields[2], fields[3]);
	ensure!(samples > 0 && features > 0 && classes >= 2 && classes <= 1024, "synthetic dataset shape out of range");
	ensure!(samples <= touchstone_kernels::job::data::MAX_SAMPLES, "at most 2²² samples");
	Ok(touchstone_kernels::job::data::synthetic(seed, samples, features, classes as u32))
}

#[cfg(test)]
mod tests {
	use super::*;
	use touchstone_kernels::job::data::synthetic;
	use touchstone_kernels::proof::hash::digest_bytes;

	#[test]
	fn a_dataset_file_round_trips_and_its_hash_is_the_dataset_digest() {
		let data = synthetic(3, 50, 6, 4);
		let bytes = to_bytes(&data);
		assert_eq!(digest_bytes(&bytes), data.digest());
		assert_eq!(from_bytes(&bytes).unwrap(), data);
		assert!(from_bytes(&bytes[..bytes.len() - 4]).is_err());
		assert!(from_bytes(b"something else").is_err());
	}
}

//! Datasets as artifacts, and the built-in digits example.
//!
//! A dataset file is the kernels' canonical dataset encoding: the ASCII prefix
//! `touchstone/dataset/v1`, then as little-endian `u32`s the sample count, the features
//! per sample and the class count, every feature's canonical `f32` bits (sample by
//! sample) and every label. Its content hash (BLAKE3) is therefore `Dataset::digest`, and the same
//! samples always give the same file.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, ensure, Context, Result};
use touchstone_kernels::job::data::{hex, load_digits, Dataset};
use touchstone_primitives::DatasetRef;

use crate::store::Store;

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

/// The length of the dataset file of `samples` samples of `features` features each.
pub fn file_len(samples: u64, features: u64) -> u64 {
	let words = 3u64.saturating_add(samples.saturating_mul(features.saturating_add(1)));
	(PREFIX.len() as u64).saturating_add(words.saturating_mul(4))
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

/// How many checked datasets a worker keeps in memory: those of the jobs it works on at
/// once. An older one is read and checked again when it is next asked for.
const KEPT_DATASETS: usize = 2;

/// Datasets read from the store and checked against the job that names them, kept in
/// memory (the few most recently used) so that a worker's passes (a dispute move every
/// block, every offer, every summons) do not read, hash and parse a dataset file and build
/// its Merkle tree again each time: at real sizes that is seconds of CPU a block.
#[derive(Clone, Default)]
pub struct CheckedDatasets(Arc<Mutex<VecDeque<(DatasetRef, Arc<Dataset>)>>>);

impl CheckedDatasets {
	/// The dataset `reference` names, from `store`: its file's bytes hash to the
	/// reference's content hash (the store checks that), it parses, and it holds the
	/// reference's sample count and Merkle root. Read and checked once while it is kept.
	pub fn get(&self, store: &Store, reference: &DatasetRef) -> Result<Arc<Dataset>> {
		if let Some(data) = self.kept(reference) {
			return Ok(data);
		}
		let hash = reference.content.hash.0;
		let bytes = store.get(&hash).with_context(|| format!("the job's dataset {} is not available to this worker", hex(&hash)))?;
		let data = from_bytes(&bytes)?;
		let root = data.root().map_err(|error| anyhow!("{error:?}"))?;
		if root != reference.root.0 || data.len() != reference.samples as usize {
			bail!("the dataset does not match the job's dataset root: refusing to train on it");
		}
		let data = Arc::new(data);
		let mut kept = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		kept.push_back((reference.clone(), data.clone()));
		while kept.len() > KEPT_DATASETS {
			kept.pop_front();
		}
		Ok(data)
	}

	/// The kept dataset checked against exactly `reference`, marked as the most recently
	/// used.
	fn kept(&self, reference: &DatasetRef) -> Option<Arc<Dataset>> {
		let mut kept = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		let position = kept.iter().position(|(checked, _)| checked == reference)?;
		let entry = kept.remove(position)?;
		let data = entry.1.clone();
		kept.push_back(entry);
		Some(data)
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use touchstone_kernels::job::data::synthetic;
	use touchstone_kernels::proof::content::content_hash;
	use touchstone_primitives::ContentRef;

	/// The reference a job would hold to `data`, stored in `store`.
	fn reference(store: &Store, data: &Dataset) -> DatasetRef {
		let hash = store.put(&to_bytes(data)).unwrap();
		DatasetRef {
			content: ContentRef { hash: hash.into(), location: Default::default() },
			samples: data.len() as u32,
			root: data.root().unwrap().into(),
		}
	}

	/// A dataset is read and checked once while kept: gone from the disk, it still serves;
	/// a reference that names the same file with another root is checked, and refused; the
	/// oldest of more than `KEPT_DATASETS` is read again, and so its loss is found.
	#[test]
	fn a_dataset_is_checked_once_while_kept_and_only_against_its_own_reference() {
		let dir = std::env::temp_dir().join(format!("touchstone-datasets-{}", std::process::id()));
		let store = Store::open(&dir).unwrap();
		let datasets = CheckedDatasets::default();
		let first = synthetic(1, 40, 5, 3);
		let kept = reference(&store, &first);
		assert_eq!(*datasets.get(&store, &kept).unwrap(), first);
		std::fs::remove_file(store.path(&kept.content.hash.0)).unwrap();
		assert_eq!(*datasets.get(&store, &kept).unwrap(), first, "kept: not read again");
		let mut wrong_root = kept.clone();
		wrong_root.root = [9; 32].into();
		store.put(&to_bytes(&first)).unwrap();
		let error = datasets.get(&store, &wrong_root).unwrap_err().to_string();
		assert!(error.contains("does not match the job's dataset root"), "{error}");
		for seed in 2..=1 + KEPT_DATASETS as u64 {
			let other = synthetic(seed, 40, 5, 3);
			assert_eq!(*datasets.get(&store, &reference(&store, &other)).unwrap(), other);
		}
		std::fs::remove_file(store.path(&kept.content.hash.0)).unwrap();
		let error = datasets.get(&store, &kept).unwrap_err().to_string();
		assert!(error.contains("not available to this worker"), "{error}");
		std::fs::remove_dir_all(&dir).unwrap();
	}

	#[test]
	fn a_dataset_file_round_trips_and_its_hash_is_the_dataset_digest() {
		let data = synthetic(3, 50, 6, 4);
		let bytes = to_bytes(&data);
		assert_eq!(bytes.len() as u64, file_len(50, 6));
		assert_eq!(content_hash(&bytes), data.digest());
		assert_eq!(from_bytes(&bytes).unwrap(), data);
		assert!(from_bytes(&bytes[..bytes.len() - 4]).is_err());
		assert!(from_bytes(b"something else").is_err());
	}
}

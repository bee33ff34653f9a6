//! Datasets as artifacts, and the built-in digits and Shakespeare examples.
//!
//! A dataset file is the kernels' canonical dataset encoding: the ASCII prefix
//! `touchstone/dataset/v1`, then as little-endian `u32`s the sample count, the features
//! per sample and the class count, every feature's canonical `f32` bits (sample by
//! sample) and every label. Its content hash (BLAKE3) is therefore `Dataset::digest`, and the same
//! samples always give the same file. A transformer's data is a token stream's canonical
//! file instead (`touchstone/tokens/v1`, `TokenStream::to_bytes`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, ensure, Context, Result};
use touchstone_kernels::job::data::{hex, load_digits, Dataset};
use touchstone_kernels::job::model::ModelConfig;
use touchstone_kernels::job::text::{load_shakespeare, TokenStream};
use touchstone_kernels::job::training_data::TrainingData;
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

/// Encodes training data as its file: a dataset file, or a token stream's.
pub fn training_bytes(data: &TrainingData) -> Vec<u8> {
	match data {
		TrainingData::Samples(data) => to_bytes(data),
		TrainingData::Tokens(stream) => stream.to_bytes(),
	}
}

/// The length of the data file of `samples` samples of `model`: a dataset file of that
/// many samples of the model's inputs, or for a transformer the token stream of that many
/// windows of its context.
pub fn file_len(model: &ModelConfig, samples: u64) -> Result<u64> {
	let inputs = model.input_len().map_err(|error| anyhow!("{error:?}"))? as u64;
	if let ModelConfig::Transformer(_) = model {
		return Ok(TokenStream::file_len(samples.saturating_mul(inputs).saturating_add(1)));
	}
	let words = 3u64.saturating_add(samples.saturating_mul(inputs.saturating_add(1)));
	Ok((PREFIX.len() as u64).saturating_add(words.saturating_mul(4)))
}

/// Decodes a data file, a dataset's or a token stream's, refusing anything malformed.
pub fn training_from_bytes(bytes: &[u8]) -> Result<TrainingData> {
	if bytes.starts_with(PREFIX) {
		return Ok(from_bytes(bytes)?.into());
	}
	let stream = TokenStream::from_bytes(bytes).map_err(|error| {
		anyhow!("neither a Touchstone dataset file nor a token stream file ({error:?})")
	})?;
	Ok(stream.into())
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

/// The Shakespeare example's training stream for windows of `context` tokens: the
/// corpus's training nine tenths, cut to the whole windows it holds, over its 84-token
/// vocabulary; from the corpus file that `kernels/scripts/fetch-datasets.sh` fetches.
pub fn shakespeare_stream(context: usize) -> Result<TokenStream> {
	let corpus = load_shakespeare().map_err(|error| anyhow!("{error}"))?;
	let (training, _) = corpus.split();
	Ok(TokenStream { tokens: training, vocab: corpus.vocab_len() as u32 }.cut_to_windows(context))
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
pub struct CheckedDatasets(Arc<Mutex<VecDeque<(Checked, Arc<TrainingData>)>>>);

/// What kept data was checked against: the job's reference, and the context its windows
/// were counted in (a transformer's; any other model's data ignores it).
type Checked = (DatasetRef, usize);

impl CheckedDatasets {
	/// The data `reference` names for a job of `model`, from `store`: its file's bytes
	/// hash to the reference's content hash (the store checks that), it parses, and it
	/// holds the reference's sample count (a stream's windows of the model's context) and
	/// Merkle root. Read and checked once while it is kept.
	pub fn get(&self, store: &Store, model: &ModelConfig, reference: &DatasetRef) -> Result<Arc<TrainingData>> {
		let context = model.input_len().map_err(|error| anyhow!("{error:?}"))?;
		let checked = (reference.clone(), context);
		if let Some(data) = self.kept(&checked) {
			return Ok(data);
		}
		let hash = reference.content.hash.0;
		let bytes = store.get(&hash).with_context(|| format!("the job's dataset {} is not available to this worker", hex(&hash)))?;
		let data = training_from_bytes(&bytes)?;
		let root = data.as_ref().tree().map_err(|error| anyhow!("{error:?}"))?.root();
		if root != reference.root.0 || data.as_ref().samples(context) != reference.samples as usize {
			bail!("the dataset does not match the job's dataset root: refusing to train on it");
		}
		let data = Arc::new(data);
		let mut kept = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		kept.push_back((checked, data.clone()));
		while kept.len() > KEPT_DATASETS {
			kept.pop_front();
		}
		Ok(data)
	}

	/// The kept data checked against exactly `checked`, marked as the most recently used.
	fn kept(&self, checked: &Checked) -> Option<Arc<TrainingData>> {
		let mut kept = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		let position = kept.iter().position(|(against, _)| against == checked)?;
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
		let model = ModelConfig::Mlp { inputs: 5, hidden: vec![], classes: 3, activation: touchstone_kernels::Activation::Relu };
		let first = synthetic(1, 40, 5, 3);
		let kept = reference(&store, &first);
		assert_eq!(*datasets.get(&store, &model, &kept).unwrap(), first.clone().into());
		std::fs::remove_file(store.path(&kept.content.hash.0)).unwrap();
		assert_eq!(*datasets.get(&store, &model, &kept).unwrap(), first.clone().into(), "kept: not read again");
		let mut wrong_root = kept.clone();
		wrong_root.root = [9; 32].into();
		store.put(&to_bytes(&first)).unwrap();
		let error = datasets.get(&store, &model, &wrong_root).unwrap_err().to_string();
		assert!(error.contains("does not match the job's dataset root"), "{error}");
		for seed in 2..=1 + KEPT_DATASETS as u64 {
			let other = synthetic(seed, 40, 5, 3);
			assert_eq!(*datasets.get(&store, &model, &reference(&store, &other)).unwrap(), other.into());
		}
		std::fs::remove_file(store.path(&kept.content.hash.0)).unwrap();
		let error = datasets.get(&store, &model, &kept).unwrap_err().to_string();
		assert!(error.contains("not available to this worker"), "{error}");
		std::fs::remove_dir_all(&dir).unwrap();
	}

	/// A transformer's data is a token stream's file, checked against the reference's
	/// root and its count of windows of the model's context: the same file counted in
	/// another context is refused.
	#[test]
	fn a_token_stream_is_checked_by_its_root_and_its_windows_of_the_models_context() {
		let dir = std::env::temp_dir().join(format!("touchstone-streams-{}", std::process::id()));
		let store = Store::open(&dir).unwrap();
		let stream = TokenStream { tokens: (0..161).map(|index| (index * 7 % 11) as u32).collect(), vocab: 11 };
		let data = TrainingData::from(stream.clone());
		let bytes = training_bytes(&data);
		assert_eq!(training_from_bytes(&bytes).unwrap(), data);
		assert!(training_from_bytes(b"touchstone/tokens/v1").is_err());
		let transformer = |context| {
			ModelConfig::Transformer(touchstone_kernels::job::transformer::TransformerConfig {
				vocab: 11,
				context,
				layers: 1,
				heads: 1,
				width: 8,
				mlp_ratio: 1,
				norm: touchstone_kernels::ops::norm::Norm::Rms,
				tied_embeddings: true,
			})
		};
		assert_eq!(file_len(&transformer(8), 20).unwrap(), bytes.len() as u64, "20 windows of 8 tokens and the last target");
		let reference = DatasetRef {
			content: ContentRef { hash: store.put(&bytes).unwrap().into(), location: Default::default() },
			samples: 20,
			root: stream.root().unwrap().into(),
		};
		let datasets = CheckedDatasets::default();
		assert_eq!(*datasets.get(&store, &transformer(8), &reference).unwrap(), data);
		let error = datasets.get(&store, &transformer(16), &reference).unwrap_err().to_string();
		assert!(error.contains("does not match the job's dataset root"), "{error}");
		std::fs::remove_dir_all(&dir).unwrap();
	}

	#[test]
	fn a_dataset_file_round_trips_and_its_hash_is_the_dataset_digest() {
		let data = synthetic(3, 50, 6, 4);
		let bytes = to_bytes(&data);
		let model = ModelConfig::Mlp { inputs: 6, hidden: vec![], classes: 4, activation: touchstone_kernels::Activation::Relu };
		assert_eq!(bytes.len() as u64, file_len(&model, 50).unwrap());
		assert_eq!(content_hash(&bytes), data.digest());
		assert_eq!(from_bytes(&bytes).unwrap(), data);
		assert!(from_bytes(&bytes[..bytes.len() - 4]).is_err());
		assert!(from_bytes(b"something else").is_err());
	}
}

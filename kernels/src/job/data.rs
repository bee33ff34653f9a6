//! Datasets: the real handwritten-digits set, a seeded synthetic generator, a
//! deterministic train/test split, and content hashes.
//!
//! # Digits
//!
//! The 1,797 8×8 handwritten digits (UCI optdigits' test part) that
//! scikit-learn ships as `sklearn/datasets/data/digits.csv.gz`.
//! `kernels/scripts/fetch-datasets.sh` takes that file out of the pinned
//! scikit-learn wheel from PyPI into
//! `${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}/digits.csv.gz`. Each line
//! holds 64 pixel values in `0..=16` and the label in `0..=9`. The loader checks
//! the file's BLAKE2b-256 against [`DIGITS_FILE_DIGEST`] before parsing, and
//! scales pixels by `1/16` (exact in `f32`: a power of two), so every machine
//! gets the same bits.
//!
//! # Content hashes
//!
//! The downloaded digits file is checked by its published BLAKE2b-256. A dataset as an
//! artifact is its canonical encoding (`touchstone/dataset/v1`, then little-endian
//! words), addressed by BLAKE3 of those bytes ([`Dataset::digest`], what a job's
//! `ContentRef` names), which does not depend on how the samples were first stored.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::arith::{canonical_bits, canonicalize, mul};
use crate::proof::hash::Digest;
use crate::proof::merkle::{index_segment_leaves, MerkleError, MerkleTree};
use crate::job::model::{SPLIT_STREAM, SYNTHETIC_STREAM};
use crate::arith::rng::RandomStream;

/// BLAKE2b-256 of `digits.csv.gz` as shipped in scikit-learn 1.5.2 (and earlier releases).
pub const DIGITS_FILE_DIGEST: &str = "57a469b180ddc1380145abad65de499dbd489b59c9b5f988138eeed835193c95";
/// The file name the fetch script writes and the loader reads.
pub const DIGITS_FILE_NAME: &str = "digits.csv.gz";
/// The largest training set a job may name. The referee draws a batch's
/// samples by random access, so its cost no longer depends on this; the bound
/// keeps sample indices, and the words of sets with narrow samples, well
/// inside `u32`, which the runtime's 32-bit arithmetic and the chain's
/// encoding use.
pub const MAX_SAMPLES: usize = 1 << 22;
/// Samples in the digits set.
pub const DIGITS_SAMPLES: usize = 1797;
/// Pixels per digit (8×8).
pub const DIGITS_FEATURES: usize = 64;
/// Digit classes.
pub const DIGITS_CLASSES: u32 = 10;
/// Largest pixel value in the digits set.
const DIGITS_MAX_PIXEL: u32 = 16;
/// `1/16`: pixels scale into `[0, 1]` exactly.
const DIGITS_PIXEL_SCALE: f32 = 0.0625;

/// Why a dataset could not be loaded.
#[derive(Debug, PartialEq, Eq)]
pub enum DataError {
	/// The file is not there; the message says how to fetch it.
	Missing {
		/// Where it was looked for.
		path: String,
	},
	/// The file could not be read or decompressed.
	Io {
		/// What went wrong.
		message: String,
	},
	/// The file's BLAKE2b-256 is not the pinned one.
	WrongDigest {
		/// The digest found, hex.
		actual: String,
		/// The digest pinned, hex.
		expected: &'static str,
	},
	/// A line does not parse.
	Malformed {
		/// 1-based line number.
		line: usize,
		/// What is wrong with it.
		reason: &'static str,
	},
	/// A split asks for more test samples than the dataset has.
	SplitTooLarge,
}

impl fmt::Display for DataError {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			Self::Missing { path } => write!(
				f,
				"dataset file {path} is missing: run kernels/scripts/fetch-datasets.sh (it writes to \
				 $TOUCHSTONE_DATA, default ~/.cache/touchstone/data)"
			),
			Self::Io { message } => write!(f, "dataset file unreadable: {message}"),
			Self::WrongDigest { actual, expected } => write!(
				f,
				"dataset file has BLAKE2b-256 {actual}, expected {expected}: delete it and rerun \
				 kernels/scripts/fetch-datasets.sh"
			),
			Self::Malformed { line, reason } => write!(f, "dataset line {line}: {reason}"),
			Self::SplitTooLarge => write!(f, "test split larger than the dataset"),
		}
	}
}

#[cfg(feature = "std")]
impl std::error::Error for DataError {}

/// A classification dataset held as canonical `f32` features and `u32` labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
	/// `samples × feature_len` features, row-major, on the contract's grid.
	pub features: Vec<f32>,
	/// One label per sample, each below `classes`.
	pub labels: Vec<u32>,
	/// Features per sample.
	pub feature_len: usize,
	/// Number of classes.
	pub classes: u32,
}

/// Prefix of [`Dataset::digest`].
const DATASET_PREFIX: &[u8] = b"touchstone/dataset/v1";

impl Dataset {
	/// Number of samples.
	pub fn len(&self) -> usize {
		self.labels.len()
	}

	/// Whether the dataset holds no samples.
	pub fn is_empty(&self) -> bool {
		self.labels.is_empty()
	}

	/// The content address of the dataset's file ([`crate::proof::content::content_hash`]):
	/// `"touchstone/dataset/v1"`, then samples, feature length and classes, the features'
	/// canonical bits and the labels, all as little-endian `u32`s.
	pub fn digest(&self) -> Digest {
		let header = [self.len() as u32, self.feature_len as u32, self.classes];
		let mut hasher = blake3::Hasher::new();
		hasher.update(DATASET_PREFIX);
		// Staged a few thousand words at a time: a dataset of millions hashes without a copy of itself.
		let mut staging = Vec::with_capacity(4 * 4096);
		for word in header.into_iter().chain(self.words()) {
			staging.extend_from_slice(&word.to_le_bytes());
			if staging.len() == staging.capacity() {
				hasher.update(&staging);
				staging.clear();
			}
		}
		hasher.update(&staging);
		*hasher.finalize().as_bytes()
	}

	/// The dataset's canonical words: every feature's canonical bits, sample
	/// by sample, then every label ([`DatasetLayout`]).
	pub fn words(&self) -> impl Iterator<Item = u32> + '_ {
		self.features.iter().map(|&v| canonical_bits(v)).chain(self.labels.iter().copied())
	}

	/// Word `index` of [`Dataset::words`].
	pub fn word(&self, index: usize) -> Option<u32> {
		match self.features.get(index) {
			Some(&value) => Some(canonical_bits(value)),
			None => self.labels.get(index.checked_sub(self.features.len())?).copied(),
		}
	}

	/// Where each sample's words lie in [`Dataset::words`].
	pub fn layout(&self) -> DatasetLayout {
		DatasetLayout { samples: self.len(), feature_len: self.feature_len }
	}

	/// The Merkle tree over [`SEGMENT`](crate::proof::merkle::SEGMENT)-word segments of [`Dataset::words`]:
	/// its root is what a job commits its training set by, and the referee
	/// proves a batch's rows against it.
	pub fn tree(&self) -> Result<MerkleTree, MerkleError> {
		let words: Vec<u32> = self.words().collect();
		MerkleTree::new(index_segment_leaves(&words))
	}

	/// The root of [`Dataset::tree`].
	pub fn root(&self) -> Result<Digest, MerkleError> {
		Ok(self.tree()?.root())
	}

	/// The samples at `indices`, in that order.
	pub fn select(&self, indices: &[u32]) -> Dataset {
		let mut features = Vec::with_capacity(indices.len() * self.feature_len);
		let mut labels = Vec::with_capacity(indices.len());
		for &index in indices {
			let start = index as usize * self.feature_len;
			if let (Some(row), Some(&label)) =
				(self.features.get(start..start + self.feature_len), self.labels.get(index as usize))
			{
				features.extend_from_slice(row);
				labels.push(label);
			}
		}
		Dataset { features, labels, feature_len: self.feature_len, classes: self.classes }
	}

	/// A deterministic split into `(train, test)`: the permutation of Philox
	/// stream [`SPLIT_STREAM`] of `seed` puts its first `test_samples` entries
	/// in the test set and the rest in the training set, each in permutation order.
	pub fn split(&self, test_samples: usize, seed: u64) -> Result<(Dataset, Dataset), DataError> {
		if test_samples > self.len() {
			return Err(DataError::SplitTooLarge);
		}
		let order = RandomStream::new(seed, SPLIT_STREAM).permutation(self.len() as u32);
		let (test, train) = order.split_at(test_samples);
		Ok((self.select(train), self.select(test)))
	}
}

/// Where a sample's words lie in a dataset's canonical words ([`Dataset::words`]):
/// all features first, row-major, then all labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatasetLayout {
	/// Samples in the dataset.
	pub samples: usize,
	/// Features per sample.
	pub feature_len: usize,
}

impl DatasetLayout {
	/// Words in all: `samples × (feature_len + 1)`, or `None` past `u32::MAX`
	/// (on every target alike, so that wasm and native builds agree).
	pub fn words(&self) -> Option<usize> {
		crate::error::element_count(&[self.samples, self.feature_len.checked_add(1)?]).ok()
	}

	/// The word of feature `feature` of sample `sample`.
	pub fn feature_word(&self, sample: usize, feature: usize) -> usize {
		sample * self.feature_len + feature
	}

	/// The word of sample `sample`'s label.
	pub fn label_word(&self, sample: usize) -> usize {
		self.samples * self.feature_len + sample
	}
}

/// Where the words of a transformer's training windows lie in its token stream: window
/// `i` is tokens `[i·context, i·context + context]` ([`crate::job::text::sequence`]), and
/// the stream a job commits holds exactly the tokens its windows cover,
/// `windows·context + 1` ([`TokenStream::cut_to_windows`](crate::job::text::TokenStream::cut_to_windows)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
	/// Training windows in the stream.
	pub windows: usize,
	/// Positions per window: the model's input tokens, each followed by its target.
	pub context: usize,
}

impl WindowLayout {
	/// Tokens in the committed stream, `windows·context + 1`, or `None` past `u32::MAX`.
	pub fn words(&self) -> Option<usize> {
		let tokens = self.windows.checked_mul(self.context)?.checked_add(1)?;
		u32::try_from(tokens).ok().map(|_| tokens)
	}

	/// The word of the token at `position` of window `window` (`position ≤ context`: the
	/// last is the final target).
	pub fn token_word(&self, window: usize, position: usize) -> usize {
		window * self.context + position
	}
}

/// Where a job's training data lies in the words its root commits: samples of features
/// and labels, or a transformer's token windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLayout {
	/// A classification set ([`Dataset::words`]).
	Samples(DatasetLayout),
	/// A token stream cut to whole windows.
	Windows(WindowLayout),
}

impl DataLayout {
	/// Words in all, or `None` past `u32::MAX`.
	pub fn words(&self) -> Option<usize> {
		match self {
			Self::Samples(layout) => layout.words(),
			Self::Windows(layout) => layout.words(),
		}
	}

	/// The words that are `f32`s (a classification set's features); the rest are integers.
	pub fn f32_words(&self) -> core::ops::Range<usize> {
		match self {
			Self::Samples(layout) => 0..layout.samples.saturating_mul(layout.feature_len),
			Self::Windows(_) => 0..0,
		}
	}
}

/// Parses the digits CSV text: 64 integer pixels in `0..=16` and a label in
/// `0..=9` per line; pixels are scaled by `1/16`.
pub fn parse_digits_csv(text: &str) -> Result<Dataset, DataError> {
	let mut features = Vec::with_capacity(DIGITS_SAMPLES * DIGITS_FEATURES);
	let mut labels = Vec::with_capacity(DIGITS_SAMPLES);
	for (index, line) in text.lines().enumerate() {
		let line_number = index + 1;
		if line.trim().is_empty() {
			continue;
		}
		let mut fields = 0usize;
		for field in line.split(',') {
			// scikit-learn's file writes integers, possibly as `5.0`.
			let field = field.trim();
			let integer = field.strip_suffix(".0").unwrap_or(field);
			let value: u32 =
				integer.parse().map_err(|_| DataError::Malformed { line: line_number, reason: "not an integer" })?;
			if fields < DIGITS_FEATURES {
				if value > DIGITS_MAX_PIXEL {
					return Err(DataError::Malformed { line: line_number, reason: "pixel above 16" });
				}
				features.push(mul(value as f32, DIGITS_PIXEL_SCALE));
			} else if fields == DIGITS_FEATURES {
				if value >= DIGITS_CLASSES {
					return Err(DataError::Malformed { line: line_number, reason: "label above 9" });
				}
				labels.push(value);
			} else {
				return Err(DataError::Malformed { line: line_number, reason: "more than 65 fields" });
			}
			fields += 1;
		}
		if fields != DIGITS_FEATURES + 1 {
			return Err(DataError::Malformed { line: line_number, reason: "fewer than 65 fields" });
		}
	}
	canonicalize(&mut features);
	Ok(Dataset { features, labels, feature_len: DIGITS_FEATURES, classes: DIGITS_CLASSES })
}

/// Lowercase hex of a digest.
pub fn hex(digest: &Digest) -> String {
	use core::fmt::Write;
	let mut out = String::with_capacity(64);
	for byte in digest {
		let _ = write!(out, "{byte:02x}");
	}
	out
}

/// The directory datasets are fetched into: `$TOUCHSTONE_DATA`, else
/// `$HOME/.cache/touchstone/data`.
#[cfg(feature = "std")]
pub fn data_dir() -> std::path::PathBuf {
	if let Some(dir) = std::env::var_os("TOUCHSTONE_DATA") {
		return dir.into();
	}
	let home = std::env::var_os("HOME").unwrap_or_default();
	std::path::Path::new(&home).join(".cache/touchstone/data")
}

/// Loads the digits from `path`: checks the file's BLAKE2b-256 against
/// [`DIGITS_FILE_DIGEST`], decompresses and parses it. Returns the dataset and
/// the file's digest (its content address).
#[cfg(feature = "std")]
pub fn load_digits_file(path: &std::path::Path) -> Result<(Dataset, Digest), DataError> {
	use std::io::Read;
	let bytes = match std::fs::read(path) {
		Ok(bytes) => bytes,
		Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
			return Err(DataError::Missing { path: path.display().to_string() })
		},
		Err(error) => return Err(DataError::Io { message: error.to_string() }),
	};
	let file_digest = crate::proof::hash::digest_bytes(&bytes);
	if hex(&file_digest) != DIGITS_FILE_DIGEST {
		return Err(DataError::WrongDigest { actual: hex(&file_digest), expected: DIGITS_FILE_DIGEST });
	}
	let mut text = String::new();
	flate2::read::GzDecoder::new(bytes.as_slice())
		.read_to_string(&mut text)
		.map_err(|error| DataError::Io { message: error.to_string() })?;
	let dataset = parse_digits_csv(&text)?;
	if dataset.len() != DIGITS_SAMPLES {
		return Err(DataError::Malformed { line: dataset.len(), reason: "not 1797 samples" });
	}
	Ok((dataset, file_digest))
}

/// Loads the digits from [`data_dir`].
#[cfg(feature = "std")]
pub fn load_digits() -> Result<(Dataset, Digest), DataError> {
	load_digits_file(&data_dir().join(DIGITS_FILE_NAME))
}

/// A seeded synthetic classification set for scale tests: `classes` centres
/// uniform in `[−2, 2)^features`, each sample its class's centre plus noise
/// (the sum of two uniforms in `[−0.5, 0.5)`), labels cycling `0, 1, …`.
///
/// Philox streams `SYNTHETIC_STREAM` (centres), `+1` and `+2` (noise) of `seed`.
pub fn synthetic(seed: u64, samples: usize, features: usize, classes: u32) -> Dataset {
	let classes_len = (classes as usize).max(1);
	let mut centres = vec![0.0f32; classes_len * features];
	RandomStream::new(seed, SYNTHETIC_STREAM).fill_uniform(-2.0, 2.0, &mut centres);
	let mut noise_a = vec![0.0f32; samples * features];
	let mut noise_b = vec![0.0f32; samples * features];
	RandomStream::new(seed, SYNTHETIC_STREAM + 1).fill_uniform(-0.5, 0.5, &mut noise_a);
	RandomStream::new(seed, SYNTHETIC_STREAM + 2).fill_uniform(-0.5, 0.5, &mut noise_b);
	let labels: Vec<u32> = (0..samples).map(|i| (i % classes_len) as u32).collect();
	let mut data = Vec::with_capacity(samples * features);
	for (sample, &label) in labels.iter().enumerate() {
		for feature in 0..features {
			let at = sample * features + feature;
			let centre = centres.get(label as usize * features + feature).copied().unwrap_or_default();
			let noise = noise_a.get(at).copied().unwrap_or_default() + noise_b.get(at).copied().unwrap_or_default();
			data.push(centre + noise);
		}
	}
	canonicalize(&mut data);
	Dataset { features: data, labels, feature_len: features, classes: classes_len as u32 }
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn parses_and_rejects_digits_lines() {
		let mut line: String = (0..64).map(|i| alloc::format!("{},", i % 17)).collect();
		line.push('7');
		let data = parse_digits_csv(&alloc::format!("{line}\n{line}\n")).unwrap();
		assert_eq!(data.len(), 2);
		assert_eq!(data.labels, [7, 7]);
		assert_eq!(data.features[16], 1.0);
		assert_eq!(data.features[1], 0.0625);
		let bad = line.replace(",7", ",12");
		assert_eq!(parse_digits_csv(&bad), Err(DataError::Malformed { line: 1, reason: "label above 9" }));
		assert!(parse_digits_csv("1,2,3").is_err());
	}

	#[test]
	fn split_is_a_deterministic_partition() {
		let data = synthetic(3, 50, 4, 3);
		let (train, test) = data.split(10, 9).unwrap();
		assert_eq!((train.len(), test.len()), (40, 10));
		assert_eq!(data.split(10, 9).unwrap().0, train);
		assert_ne!(data.split(10, 8).unwrap().0, train);
		let mut all: Vec<Vec<u32>> = train
			.features
			.chunks(4)
			.chain(test.features.chunks(4))
			.map(|row| row.iter().map(|v| v.to_bits()).collect())
			.collect();
		let mut original: Vec<Vec<u32>> =
			data.features.chunks(4).map(|row| row.iter().map(|v| v.to_bits()).collect()).collect();
		all.sort();
		original.sort();
		assert_eq!(all, original);
		assert_eq!(data.split(51, 9), Err(DataError::SplitTooLarge));
		assert_ne!(train.digest(), test.digest());
	}
}

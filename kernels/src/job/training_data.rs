//! A job's training data as a trainer and a prover hold it: a classification set
//! ([`Dataset`]) or a token stream ([`TokenStream`]), owned or borrowed, with the words its
//! root commits and the samples (windows) a batch draws from.

use alloc::sync::Arc;

use crate::job::data::Dataset;
use crate::job::text::{sequence_count, TokenStream};
use crate::proof::merkle::{MerkleError, MerkleTree};

/// A job's training data as a trainer holds it: a classification set or a token stream.
/// Shared, not copied, when cloned: a worker hands the same data to every unit's trainer,
/// its cache and its prover (a corpus of a hundred million tokens is 400 MB).
#[derive(Clone, Debug, PartialEq)]
pub enum TrainingData {
	/// Samples of features and a label each.
	Samples(Arc<Dataset>),
	/// A token stream, cut to a transformer's whole windows.
	Tokens(Arc<TokenStream>),
}

impl From<Dataset> for TrainingData {
	fn from(data: Dataset) -> Self {
		Self::Samples(Arc::new(data))
	}
}

impl From<TokenStream> for TrainingData {
	fn from(stream: TokenStream) -> Self {
		Self::Tokens(Arc::new(stream))
	}
}

impl TrainingData {
	/// This data, borrowed.
	pub fn as_ref(&self) -> DataRef<'_> {
		match self {
			Self::Samples(data) => DataRef::Samples(data),
			Self::Tokens(stream) => DataRef::Tokens(stream),
		}
	}
}

/// A job's training data, borrowed: what the prover opens a batch's rows from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DataRef<'a> {
	/// A classification set.
	Samples(&'a Dataset),
	/// A token stream.
	Tokens(&'a TokenStream),
}

impl<'a> From<&'a Dataset> for DataRef<'a> {
	fn from(data: &'a Dataset) -> Self {
		Self::Samples(data)
	}
}

impl<'a> From<&'a TrainingData> for DataRef<'a> {
	fn from(data: &'a TrainingData) -> Self {
		data.as_ref()
	}
}

impl DataRef<'_> {
	/// Word `index` of the data's committed words.
	pub fn word(&self, index: usize) -> Option<u32> {
		match self {
			Self::Samples(data) => data.word(index),
			Self::Tokens(stream) => stream.tokens.get(index).copied(),
		}
	}

	/// How many words the data's root commits: a set's features and labels, or a
	/// stream's tokens.
	pub fn word_count(&self) -> usize {
		match self {
			Self::Samples(data) => data.features.len() + data.labels.len(),
			Self::Tokens(stream) => stream.tokens.len(),
		}
	}

	/// The tree the job's data root is the root of.
	pub fn tree(&self) -> Result<MerkleTree, MerkleError> {
		match self {
			Self::Samples(data) => data.tree(),
			Self::Tokens(stream) => stream.tree(),
		}
	}

	/// The samples a batch draws from: a set's samples, or a stream's windows of `context`.
	pub fn samples(&self, context: usize) -> usize {
		match self {
			Self::Samples(data) => data.len(),
			Self::Tokens(stream) => sequence_count(stream.tokens.len(), context),
		}
	}
}

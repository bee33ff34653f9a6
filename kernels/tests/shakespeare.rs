//! The Shakespeare corpus the transformer jobs train on: the loader's hash check, the byte
//! vocabulary, the fixed validation tenth and the training sequences, on the real file.
//!
//! These tests need `shakespeare.txt`: they fail, never skip, telling to run
//! kernels/scripts/fetch-datasets.sh when it is missing.

use touchstone_kernels::job::data::DataError;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::text::{
	load_corpus_file, load_shakespeare, sequence, sequence_count, Corpus, TokenStream, SHAKESPEARE_BYTES,
	SHAKESPEARE_FILE_DIGEST, SHAKESPEARE_VOCAB,
};

/// Training tokens: the corpus less its 61 held-out blocks of 8,192 tokens.
const TRAINING_TOKENS: usize = 4_557_486;
/// Validation tokens: 61 blocks of 8,192.
const VALIDATION_TOKENS: usize = 499_712;
/// The content hash of the training stream's canonical file: what a job names it by.
const TRAINING_STREAM_DIGEST: &str = "1621ee2ae0c16ad1fccde3e9353c8e92ecb3793dc1a8253bcdfbcb3b3802e51c";
/// The Merkle root over the training stream's 32-token segments: what a batch's sequences
/// are proven against.
const TRAINING_STREAM_ROOT: &str = "4afe09febf79210eb34cbc9e458658afa4dc6084d73fdba3c701151022571140";

fn shakespeare() -> Corpus {
	load_shakespeare().unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn the_corpus_is_84_byte_tokens_of_42_plays() {
	let corpus = shakespeare();
	assert_eq!(corpus.tokens.len(), SHAKESPEARE_BYTES);
	assert_eq!(corpus.vocab_len(), SHAKESPEARE_VOCAB);
	assert!(corpus.tokens.iter().all(|&token| (token as usize) < SHAKESPEARE_VOCAB));
	// Newline, space and printable ASCII only.
	assert_eq!(corpus.vocab[..2], *b"\n ");
	assert!(corpus.vocab[2..].iter().all(|byte| byte.is_ascii_graphic()));
	// The plays in file-name order: All's Well That Ends Well first.
	assert_eq!(corpus.decode(&corpus.tokens[..25]).unwrap(), b"ALL'S WELL THAT ENDS WELL");
	assert_eq!(corpus.encode(b"To be, or not to be").map(|tokens| corpus.decode(&tokens)), Some(Some(b"To be, or not to be".to_vec())));
}

#[test]
fn a_tenth_is_held_out_and_the_rest_makes_the_training_stream_and_its_sequences() {
	let corpus = shakespeare();
	let (training, validation) = corpus.split();
	assert_eq!((training.len(), validation.len()), (TRAINING_TOKENS, VALIDATION_TOKENS));
	// At context 64 (the 1 M-parameter model): 71,210 sequences, each 65 tokens,
	// the last target of one the first input of the next.
	assert_eq!(sequence_count(training.len(), 64), 71_210);
	let (first, second) = (sequence(&training, 64, 0).unwrap(), sequence(&training, 64, 1).unwrap());
	assert_eq!((first.len(), first[64]), (65, second[0]));
	assert!(sequence(&training, 64, 71_209).is_some() && sequence(&training, 64, 71_210).is_none());
	let stream = TokenStream { tokens: training, vocab: SHAKESPEARE_VOCAB as u32 };
	assert_eq!((hex(&stream.digest()), hex(&stream.root().unwrap())), (TRAINING_STREAM_DIGEST.into(), TRAINING_STREAM_ROOT.into()));
}

#[test]
fn a_changed_file_is_refused_with_what_to_do() {
	let path = std::env::temp_dir().join(format!("touchstone-shakespeare-{}.txt", std::process::id()));
	std::fs::write(&path, b"not the corpus").unwrap();
	let refused = load_corpus_file(&path, SHAKESPEARE_FILE_DIGEST);
	std::fs::remove_file(&path).unwrap();
	let error = refused.unwrap_err();
	assert!(matches!(error, DataError::WrongDigest { expected: SHAKESPEARE_FILE_DIGEST, .. }));
	assert!(error.to_string().contains("fetch-datasets.sh"), "{error}");
	let missing = load_corpus_file(&path, SHAKESPEARE_FILE_DIGEST).unwrap_err();
	assert!(matches!(missing, DataError::Missing { .. }) && missing.to_string().contains("fetch-datasets.sh"), "{missing}");
}

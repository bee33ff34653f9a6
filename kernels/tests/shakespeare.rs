//! The Shakespeare corpus the transformer jobs train on: the loader's hash check, the byte
//! vocabulary, the fixed validation tenth and the training sequences, on the real file; and
//! a small character transformer trained on it.
//!
//! These tests need `shakespeare.txt`: they fail, never skip, telling to run
//! kernels/scripts/fetch-datasets.sh when it is missing.

use touchstone_kernels::job::data::DataError;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::transformer::{
	batch_windows, generate, mean_loss, next_token_accuracy, TransformerConfig, TransformerState, TransformerTraining,
};
use touchstone_kernels::ops::norm::Norm;
use touchstone_kernels::ops::schedule::WarmupCosine;
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
const TRAINING_STREAM_ROOT: &str = "615a4ca162abc0c2733b644b4fd04f7054a53c22af647bb92b28ea9f8d8bdb9a";

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

/// A small character transformer (2 blocks of width 32, context 32, 29,184 parameters)
/// trained for 600 steps of 8 sequences on the training stream learns the corpus: the
/// validation loss falls from the uniform guess's ln 84 = 4.43 to well under the entropy
/// of the corpus's characters (what predicting each by its frequency alone scores), so the
/// model uses its context. Run with `--nocapture` for the losses and a sample.
#[test]
fn a_small_transformer_learns_the_corpus() {
	let corpus = shakespeare();
	let (training, validation) = corpus.split();
	let config = TransformerConfig {
		vocab: SHAKESPEARE_VOCAB as u32,
		context: 32,
		layers: 2,
		heads: 2,
		width: 32,
		mlp_ratio: 4,
		norm: Norm::Layer,
		tied_embeddings: true,
	};
	let steps = 600;
	let run = TransformerTraining {
		batch: 8,
		schedule: WarmupCosine { peak: 0.01, floor: 0.001, warmup_steps: 20, total_steps: steps },
		beta1: 0.9,
		beta2: 0.99,
		epsilon: 1e-8,
		weight_decay: 0.1,
		clip_norm: Some(1.0),
	};
	// The first 32 validation sequences, the same at every evaluation.
	let held_out: Vec<u32> = (0..32).flat_map(|index| sequence(&validation, 32, index).unwrap().to_vec()).collect();
	let mut state = TransformerState::new(config, 1).unwrap();
	let before = mean_loss(config, &state.params, &held_out, 32).unwrap();
	for step in 0..steps {
		let batch = batch_windows(&training, 32, run.batch, 1, step).unwrap();
		let report = state.step(config, &run, &batch).unwrap();
		if step % 50 == 0 {
			println!("step {step}: training loss {:.3}, rate {:.5}, gradient norm {:.3}", report.loss, report.learning_rate, report.grad_norm);
		}
	}
	let after = mean_loss(config, &state.params, &held_out, 32).unwrap();
	let prompt = corpus.encode(b"KING.").unwrap();
	let sample = generate(config, &state.params, &prompt, 120, false, 7).unwrap();
	println!("validation loss {before:.3} then {after:.3}; sample:\n{}", String::from_utf8_lossy(&corpus.decode(&sample).unwrap()));
	assert!((before - 84f32.ln()).abs() < 0.05, "an untrained model guesses uniformly: {before}");
	let mut counts = [0usize; SHAKESPEARE_VOCAB];
	training.iter().for_each(|&token| counts[token as usize] += 1);
	let total = training.len() as f64;
	let unigram: f64 = counts.iter().filter(|&&n| n > 0).map(|&n| -(n as f64 / total) * (n as f64 / total).ln()).sum();
	println!("the characters' entropy: {unigram:.3} nats");
	assert!(f64::from(after) < unigram - 0.6, "validation loss after {steps} steps: {after}, the characters' entropy {unigram}");
	// Next-token accuracy: better than always guessing the commonest character (a space).
	let accuracy = next_token_accuracy(config, &state.params, &held_out, 32).unwrap();
	let commonest = *counts.iter().max().unwrap() as f64 / total;
	println!("next-token accuracy {accuracy:.3}; the commonest character's share {commonest:.3}");
	assert!(accuracy > commonest + 0.1, "next-token accuracy {accuracy}, the commonest character's share {commonest}");
}

//! The referee's piece of a round's aggregate ([`crate::ops::aggregate`]): one 256-word
//! chunk of the next global state, recomputed from the same chunk of every shard's proven
//! end state, of the round's global state and of the outer momentum, each opened against
//! the root the chain holds.
//!
//! The global state and the outer momentum are two trees of the same layout (the
//! momentum has one tensor per global tensor), so chunk `j` of one pairs with chunk `j`
//! of the other. The chain builds the [`AggregateDispute`] from its records (the proven
//! shards' roots and samples, the round's global roots, the claimant's roots, the chunk
//! the dispute narrowed to); a party supplies the [`AggregateOpenings`]. Like the step
//! referee it never panics: the chain runs it on inputs an adversary chose.

use alloc::vec::Vec;

use crate::arith::canonical_bits;
use crate::error::KernelError;
use crate::ops::aggregate::{aggregate_chunk, Outer};
use crate::proof::hash::Digest;
use crate::proof::merkle::MultiProof;
use crate::proof::state_tree::{chunk_count, chunk_range, locate_chunk, tree, verify_chunks, CHUNK_WORDS};

/// The most shards a round's aggregate may average: a piece reads one chunk of each, so
/// the referee's work is bounded by this many 1 KiB openings.
pub const MAX_AGGREGATE_SHARDS: usize = 64;

/// What the chain knows of a disputed aggregate chunk, from its own records.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateDispute {
	/// The round's outer step.
	pub outer: Outer,
	/// The shards' pinned weights ([`crate::ops::aggregate::weights`]), in shard order.
	pub weights: Vec<f32>,
	/// The proven end state root of each shard, in shard order.
	pub shard_roots: Vec<Digest>,
	/// The root of the global state the round started from.
	pub global_root: Digest,
	/// The root of the outer momentum the round started from (Nesterov only; `None` for
	/// the first round's, which is zeros).
	pub momentum_root: Option<Digest>,
	/// The claimant's root of the next global state.
	pub claimed_root: Digest,
	/// The claimant's root of the next outer momentum (Nesterov only).
	pub claimed_momentum_root: Option<Digest>,
	/// Chunks in each tree (they share one layout).
	pub chunk_count: u32,
	/// The chunk the dispute narrowed to.
	pub chunk: u32,
}

codec_types! {
	/// One chunk of one tree: its words (canonical bits, the zero padding implied) and its
	/// proof.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct ChunkOpening {
		/// The chunk's words.
		pub words: Vec<u32>,
		/// Its proof in the tree.
		pub proof: MultiProof,
	}

	/// What a party supplies for an aggregate chunk.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct AggregateOpenings {
		/// The chunk in each shard's end state, in shard order.
		pub shards: Vec<ChunkOpening>,
		/// The chunk in the round's global state.
		pub global: ChunkOpening,
		/// The chunk in the round's outer momentum (Nesterov from the second round on: the
		/// first round's momentum is zeros, and opens as none).
		pub momentum: Option<ChunkOpening>,
		/// The chunk in the claimed next global state.
		pub claimed: ChunkOpening,
		/// The chunk in the claimed next outer momentum (Nesterov only).
		pub claimed_momentum: Option<ChunkOpening>,
	}
}

/// Which opening of an [`AggregateOpenings`] a refusal is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
	/// A shard's end state, by position.
	Shard(u32),
	/// The round's global state.
	Global,
	/// The round's outer momentum.
	Momentum,
	/// The claimed next global state.
	Claimed,
	/// The claimed next outer momentum.
	ClaimedMomentum,
}

/// Why an aggregate chunk is judged wrong, or its openings refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateError {
	/// The claimed chunk is not what the shards, the global state and the momentum give.
	WrongAggregate {
		/// The first word that differs.
		word: u32,
	},
	/// The dispute's chunk is past the trees' chunks.
	ChunkOutOfRange,
	/// The shards are none, more than [`MAX_AGGREGATE_SHARDS`], or not as many as their
	/// weights, roots or openings.
	ShardCount,
	/// The momentum's roots or openings are missing for a Nesterov step, or given for
	/// plain averaging.
	Momentum,
	/// An opening does not lead to its root, is longer than a chunk, or is not as long as
	/// the others.
	InvalidOpening(Opened),
	/// The recomputation refused its input (a non-finite word, a bad hyper-parameter).
	Kernel(KernelError),
}

/// Judges one chunk of a claimed aggregate: `Ok(())` when the claimed chunk (and the
/// claimed momentum's) is what the contract computes from the opened inputs;
/// [`AggregateError::WrongAggregate`] when it is not; any other error refuses the openings
/// (or the dispute) without judging the claim.
pub fn judge_aggregate_chunk(dispute: &AggregateDispute, openings: &AggregateOpenings) -> Result<(), AggregateError> {
	if dispute.chunk >= dispute.chunk_count {
		return Err(AggregateError::ChunkOutOfRange);
	}
	let shards = dispute.shard_roots.len();
	if shards == 0 || shards > MAX_AGGREGATE_SHARDS || dispute.weights.len() != shards || openings.shards.len() != shards {
		return Err(AggregateError::ShardCount);
	}
	let nesterov = matches!(dispute.outer, Outer::Nesterov { .. });
	// The momentum the round starts from (`None`: zeros) and the claimed next one.
	let momentum = match (nesterov, dispute.momentum_root, dispute.claimed_momentum_root, &openings.momentum, &openings.claimed_momentum) {
		(true, Some(root), Some(claimed_root), Some(opening), Some(claimed)) => Some((Some((root, opening)), (claimed_root, claimed))),
		(true, None, Some(claimed_root), None, Some(claimed)) => Some((None, (claimed_root, claimed))),
		(false, None, None, None, None) => None,
		_ => return Err(AggregateError::Momentum),
	};
	let len = openings.claimed.words.len();
	let check = |which: Opened, root: &Digest, opening: &ChunkOpening| -> Result<Vec<f32>, AggregateError> {
		let fits = opening.words.len() == len && len <= CHUNK_WORDS;
		if !fits || !verify_chunks(root, dispute.chunk_count as usize, &[(dispute.chunk, opening.words.as_slice())], &opening.proof) {
			return Err(AggregateError::InvalidOpening(which));
		}
		Ok(opening.words.iter().map(|&word| f32::from_bits(word)).collect())
	};
	let claimed = check(Opened::Claimed, &dispute.claimed_root, &openings.claimed)?;
	let global = check(Opened::Global, &dispute.global_root, &openings.global)?;
	let mut shard_words = Vec::with_capacity(shards);
	for (position, (root, opening)) in dispute.shard_roots.iter().zip(&openings.shards).enumerate() {
		shard_words.push(check(Opened::Shard(position as u32), root, opening)?);
	}
	let (momentum_words, claimed_momentum) = match momentum {
		Some((start, (claimed_root, claimed))) => {
			let start = match start {
				Some((root, opening)) => check(Opened::Momentum, &root, opening)?,
				None => alloc::vec![0.0; len],
			};
			(start, Some(check(Opened::ClaimedMomentum, &claimed_root, claimed)?))
		},
		None => (Vec::new(), None),
	};
	let views: Vec<&[f32]> = shard_words.iter().map(Vec::as_slice).collect();
	let (next, next_momentum) =
		aggregate_chunk(&dispute.outer, &dispute.weights, &views, &global, &momentum_words).map_err(AggregateError::Kernel)?;
	let expected = next.iter().chain(claimed_momentum.is_some().then_some(&next_momentum).into_iter().flatten());
	let given = claimed.iter().chain(claimed_momentum.iter().flatten());
	match expected.zip(given).position(|(want, got)| canonical_bits(*want) != canonical_bits(*got)) {
		None => Ok(()),
		Some(word) => Err(AggregateError::WrongAggregate { word: word as u32 }),
	}
}

/// Chunk `chunk` of `state` opened in its state tree, as a party supplies it to the
/// referee; `None` past the state's chunks (or for a state too small to have a tree).
pub fn open_chunk(state: &[Vec<f32>], chunk: usize) -> Option<ChunkOpening> {
	let lens = state.iter().map(Vec::len);
	let (tensor, within) = locate_chunk(lens, chunk)?;
	let values = state.get(tensor)?;
	let words = values.get(chunk_range(values.len(), within))?.iter().map(|&value| canonical_bits(value)).collect();
	let views: Vec<&[f32]> = state.iter().map(Vec::as_slice).collect();
	let proof = tree(&views).ok()?.multiproof(&[chunk]).ok()?;
	Some(ChunkOpening { words, proof })
}

/// The first chunk at which a claimed aggregate (`claimed`, and `claimed_momentum` for a
/// Nesterov step) differs from the `expected` one, by canonical bits; `None` when they
/// agree everywhere or their layouts differ (a claim of another layout has no chunk the
/// referee could judge).
pub fn first_wrong_chunk<'a>(expected: (&'a [Vec<f32>], &'a [Vec<f32>]), claimed: (&'a [Vec<f32>], &'a [Vec<f32>])) -> Option<usize> {
	let same_layout = |a: &[Vec<f32>], b: &[Vec<f32>]| a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.len() == b.len());
	if !same_layout(expected.0, claimed.0) || !same_layout(expected.1, claimed.1) {
		return None;
	}
	let differs = |a: &[f32], b: &[f32]| a.iter().zip(b).any(|(a, b)| canonical_bits(*a) != canonical_bits(*b));
	let mut first = 0usize;
	for (tensor, values) in expected.0.iter().enumerate() {
		for within in 0..chunk_count(values.len()) {
			let range = chunk_range(values.len(), within);
			let in_momentum = |state: &'a [Vec<f32>]| -> &'a [f32] { state.get(tensor).map_or(&[][..], |values| &values[range.clone()]) };
			if differs(&values[range.clone()], &claimed.0[tensor][range.clone()]) ||
				differs(in_momentum(expected.1), in_momentum(claimed.1))
			{
				return Some(first + within);
			}
		}
		first += chunk_count(values.len());
	}
	None
}

/// The openings of chunk `chunk` of a round's aggregate: of each shard's end state, the
/// round's global state, its outer momentum (`None`: the first round's zeros, or plain
/// averaging), and the claimed next state and momentum. `None` past the states' chunks.
pub fn aggregate_openings(
	shards: &[Vec<Vec<f32>>],
	global: &[Vec<f32>],
	momentum: Option<&[Vec<f32>]>,
	claimed: &[Vec<f32>],
	claimed_momentum: Option<&[Vec<f32>]>,
	chunk: usize,
) -> Option<AggregateOpenings> {
	Some(AggregateOpenings {
		shards: shards.iter().map(|shard| open_chunk(shard, chunk)).collect::<Option<Vec<_>>>()?,
		global: open_chunk(global, chunk)?,
		momentum: match momentum {
			Some(state) => Some(open_chunk(state, chunk)?),
			None => None,
		},
		claimed: open_chunk(claimed, chunk)?,
		claimed_momentum: match claimed_momentum {
			Some(state) => Some(open_chunk(state, chunk)?),
			None => None,
		},
	})
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::ops::aggregate::{average, outer_step, weights, Weighting};
	use crate::proof::state_tree::root;

	/// A state of two tensors, the second ending in a partial chunk.
	const LENS: [usize; 2] = [2 * CHUNK_WORDS, CHUNK_WORDS + 40];

	fn state(seed: u64) -> Vec<Vec<f32>> {
		LENS.iter()
			.enumerate()
			.map(|(tensor, &len)| {
				let mut values = vec![0.0; len];
				crate::RandomStream::new(seed, tensor as u64).fill_uniform(-1.0, 1.0, &mut values);
				values
			})
			.collect()
	}

	fn views(state: &[Vec<f32>]) -> Vec<&[f32]> {
		state.iter().map(Vec::as_slice).collect()
	}

	/// A round of three shards with Nesterov's outer step, honestly aggregated: its
	/// dispute at `chunk` and the openings of the next state `next` (and momentum).
	struct Round {
		shards: Vec<Vec<Vec<f32>>>,
		global: Vec<Vec<f32>>,
		momentum: Vec<Vec<f32>>,
		next: Vec<Vec<f32>>,
		next_momentum: Vec<Vec<f32>>,
		weights: Vec<f32>,
		outer: Outer,
	}

	impl Round {
		fn honest() -> Self {
			let outer = Outer::Nesterov { learning_rate: 0.7, momentum: 0.9 };
			let shards: Vec<_> = (1..=3).map(state).collect();
			let (global, momentum) = (state(10), state(11));
			let weights = weights(Weighting::BySamples, &[500, 300, 200]).unwrap();
			let (mut next, mut next_momentum) = (global.clone(), momentum.clone());
			for tensor in 0..LENS.len() {
				let mut mean = vec![0.0; LENS[tensor]];
				let inputs: Vec<&[f32]> = shards.iter().map(|shard| shard[tensor].as_slice()).collect();
				average(&weights, &inputs, &mut mean).unwrap();
				outer_step(&outer, &mut next[tensor], &mean, &mut next_momentum[tensor]).unwrap();
			}
			Self { shards, global, momentum, next, next_momentum, weights, outer }
		}

		fn dispute(&self, chunk: u32) -> AggregateDispute {
			let root_of = |state: &[Vec<f32>]| root(&views(state)).unwrap();
			AggregateDispute {
				outer: self.outer,
				weights: self.weights.clone(),
				shard_roots: self.shards.iter().map(|shard| root_of(shard)).collect(),
				global_root: root_of(&self.global),
				momentum_root: Some(root_of(&self.momentum)),
				claimed_root: root_of(&self.next),
				claimed_momentum_root: Some(root_of(&self.next_momentum)),
				chunk_count: crate::proof::state_tree::state_chunk_count(LENS) as u32,
				chunk,
			}
		}

		fn openings(&self, chunk: usize) -> AggregateOpenings {
			aggregate_openings(&self.shards, &self.global, Some(&self.momentum), &self.next, Some(&self.next_momentum), chunk).unwrap()
		}
	}

	/// Every chunk of an honest aggregate is upheld, the partial last one included.
	#[test]
	fn an_honest_aggregate_is_upheld_at_every_chunk() {
		let round = Round::honest();
		for chunk in 0..4 {
			assert_eq!(judge_aggregate_chunk(&round.dispute(chunk), &round.openings(chunk as usize)), Ok(()), "chunk {chunk}");
		}
	}

	/// One wrong bit in the next global state, or in the next momentum, is found at its
	/// word; a lie elsewhere does not reach a chunk that does not hold it.
	#[test]
	fn a_wrong_aggregate_is_found_at_its_word() {
		let mut lied = Round::honest();
		lied.next[1][CHUNK_WORDS + 7] = f32::from_bits(lied.next[1][CHUNK_WORDS + 7].to_bits() ^ 1);
		// Tensor 1's second chunk is the state's fourth.
		assert_eq!(judge_aggregate_chunk(&lied.dispute(3), &lied.openings(3)), Err(AggregateError::WrongAggregate { word: 7 }));
		assert_eq!(judge_aggregate_chunk(&lied.dispute(0), &lied.openings(0)), Ok(()));
		let mut lied = Round::honest();
		lied.next_momentum[0][5] += 1.0;
		assert_eq!(
			judge_aggregate_chunk(&lied.dispute(0), &lied.openings(0)),
			Err(AggregateError::WrongAggregate { word: CHUNK_WORDS as u32 + 5 }),
			"the momentum's words follow the state's"
		);
	}

	/// A challenger finds the chunk to dispute: the first whose next state or next
	/// momentum differs, nothing for an honest claim or one of another layout; the
	/// openings of that chunk convict the claim.
	#[test]
	fn the_first_wrong_chunk_is_the_one_to_dispute() {
		let honest = Round::honest();
		let expected = (honest.next.as_slice(), honest.next_momentum.as_slice());
		assert_eq!(first_wrong_chunk(expected, expected), None);
		let mut lied = Round::honest();
		lied.next_momentum[1][CHUNK_WORDS + 3] += 1.0;
		lied.next[1][CHUNK_WORDS + 9] += 1.0;
		let chunk = first_wrong_chunk(expected, (&lied.next, &lied.next_momentum)).unwrap();
		assert_eq!(chunk, 3, "tensor 1's second chunk is the state's fourth");
		assert_eq!(
			judge_aggregate_chunk(&lied.dispute(chunk as u32), &lied.openings(chunk)),
			Err(AggregateError::WrongAggregate { word: 9 })
		);
		let mut only_momentum = Round::honest();
		only_momentum.next_momentum[0][CHUNK_WORDS] = -1.0;
		assert_eq!(first_wrong_chunk(expected, (&only_momentum.next, &only_momentum.next_momentum)), Some(1));
		let shorter: Vec<Vec<f32>> = honest.next.iter().map(|tensor| tensor[1..].to_vec()).collect();
		assert_eq!(first_wrong_chunk(expected, (&shorter, &honest.next_momentum)), None);
		assert_eq!(open_chunk(&honest.next, 4), None, "past the state's four chunks");
	}

	/// The first round's momentum is zeros: with no root and no opening, its aggregate is
	/// judged from zeros, and an opening given for it is refused.
	#[test]
	fn the_first_rounds_momentum_is_zeros() {
		let mut round = Round::honest();
		round.momentum = round.momentum.iter().map(|tensor| vec![0.0; tensor.len()]).collect();
		round = Round { next: round.global.clone(), next_momentum: round.momentum.clone(), ..round };
		let outer = round.outer;
		for tensor in 0..LENS.len() {
			let mut mean = vec![0.0; LENS[tensor]];
			let inputs: Vec<&[f32]> = round.shards.iter().map(|shard| shard[tensor].as_slice()).collect();
			average(&round.weights, &inputs, &mut mean).unwrap();
			outer_step(&outer, &mut round.next[tensor], &mean, &mut round.next_momentum[tensor]).unwrap();
		}
		let mut dispute = round.dispute(3);
		dispute.momentum_root = None;
		let mut openings = round.openings(3);
		let opened = openings.momentum.take();
		assert_eq!(judge_aggregate_chunk(&dispute, &openings), Ok(()));
		openings.claimed_momentum.as_mut().unwrap().words[1] ^= 1;
		assert_eq!(judge_aggregate_chunk(&dispute, &openings), Err(AggregateError::InvalidOpening(Opened::ClaimedMomentum)));
		openings.claimed_momentum = round.openings(3).claimed_momentum;
		openings.momentum = opened;
		assert_eq!(judge_aggregate_chunk(&dispute, &openings), Err(AggregateError::Momentum));
	}

	/// Openings that do not lead to the chain's roots, or that do not fit the dispute,
	/// are refused without a verdict on the claim.
	#[test]
	fn openings_that_do_not_fit_the_dispute_are_refused() {
		let round = Round::honest();
		let (dispute, openings) = (round.dispute(1), round.openings(1));
		let mut forged = openings.clone();
		forged.shards[2].words[0] ^= 1;
		assert_eq!(judge_aggregate_chunk(&dispute, &forged), Err(AggregateError::InvalidOpening(Opened::Shard(2))));
		let mut moved = openings.clone();
		moved.global = open_chunk(&round.global, 2).unwrap();
		assert_eq!(judge_aggregate_chunk(&dispute, &moved), Err(AggregateError::InvalidOpening(Opened::Global)));
		let mut short = openings.clone();
		short.shards.pop();
		assert_eq!(judge_aggregate_chunk(&dispute, &short), Err(AggregateError::ShardCount));
		let mut no_momentum = openings.clone();
		no_momentum.momentum = None;
		assert_eq!(judge_aggregate_chunk(&dispute, &no_momentum), Err(AggregateError::Momentum));
		let mut past = dispute.clone();
		past.chunk = past.chunk_count;
		assert_eq!(judge_aggregate_chunk(&past, &openings), Err(AggregateError::ChunkOutOfRange));
		let mut averaged = dispute.clone();
		averaged.outer = Outer::Average;
		assert_eq!(judge_aggregate_chunk(&averaged, &openings), Err(AggregateError::Momentum));
	}

	/// A poisoned shard (its tree hashed a NaN) is refused by the recomputation, never
	/// judged by a NaN's bits.
	#[test]
	fn a_non_finite_word_is_refused() {
		let mut round = Round::honest();
		round.shards[0][0][3] = f32::NAN;
		assert_eq!(
			judge_aggregate_chunk(&round.dispute(0), &round.openings(0)),
			Err(AggregateError::Kernel(KernelError::NonFiniteInput { operand: "shards" }))
		);
	}
}

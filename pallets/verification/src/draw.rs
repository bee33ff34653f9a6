//! The draw glue: the beacon of recent blocks' randomness and the seeds taken from it,
//! the queues of proofs waiting for their draw, the draw itself (verifiers from the
//! staking pallet's tree), and the hook's weight.

use crate::pallet::*;
use crate::types::*;
use crate::weights::WeightInfo;
use alloc::vec::Vec;
use codec::Encode;
use polkadot_sdk::{
	frame_support,
	frame_support::{
		pallet_prelude::*,
		traits::Randomness,
	},
	frame_system::pallet_prelude::*,
	sp_io::hashing::blake2_256,
	sp_runtime::traits::{Saturating, Zero},
};
use touchstone_primitives::{
	traits::VerifierDraw, JobId, UnitIndex, VerificationMode,
};

impl<T: Config> Pallet<T> {
	/// The most verifiers one draw picks: an escalation committee's.
	pub(crate) fn largest_draw() -> u32 {
		T::EscalationCommittee::get().max(T::VerifiersPerUnit::get())
	}

	/// Adds the randomness the source gives to the [`Beacon`], with its block's author, if
	/// it is newer than the newest there, and keeps the last [`MAX_RANDOMNESS_BLOCKS`];
	/// then notes this block's author for the next. Randomness known since genesis (a
	/// stalled source, or the first block's) is never added: no commitment precedes it.
	pub(crate) fn note_randomness(now: BlockNumberFor<T>) {
		let (random, known_since) = T::Randomness::random(b"touchstone/beacon");
		// The source gives the randomness of the block before this one, whose author the
		// hook noted there.
		let author = LastAuthor::<T>::get().filter(|(block, _)| *block == known_since).map(|(_, author)| author);
		match T::BlockAuthor::get() {
			Some(author) => LastAuthor::<T>::put((now, author)),
			None => LastAuthor::<T>::kill(),
		}
		if known_since.is_zero() {
			return;
		}
		Beacon::<T>::mutate(|beacon| {
			if beacon.last().is_some_and(|newest| newest.known_since >= known_since) {
				return;
			}
			while beacon.len() >= MAX_RANDOMNESS_BLOCKS as usize {
				beacon.remove(0);
			}
			// Room was just made.
			let _ = beacon.try_push(BeaconEntry { known_since, value: random.0, author });
		});
	}

	/// The seed for `subject` from the `beacon`: `blake2_256` of the subject and the
	/// randomness of every entry known after block `committed_at`, once there are at
	/// least `RandomnessBlocks` of them, made by at least `RandomnessAuthors` distinct
	/// authors (or every author there is, if fewer). Past [`MAX_RANDOMNESS_BLOCKS`] such
	/// entries, whoever made them. `None` until then.
	pub(crate) fn seed_after(
		beacon: &[BeaconEntry<BlockNumberFor<T>>],
		committed_at: BlockNumberFor<T>,
		subject: &[u8],
	) -> Option<[u8; 32]> {
		let after: Vec<&BeaconEntry<BlockNumberFor<T>>> =
			beacon.iter().filter(|entry| entry.known_since > committed_at).collect();
		if after.len() < T::RandomnessBlocks::get() as usize {
			return None;
		}
		let mut authors: Vec<[u8; 32]> = after.iter().filter_map(|entry| entry.author).collect();
		authors.sort_unstable();
		authors.dedup();
		let required = T::RandomnessAuthors::get().min(T::AuthorCount::get()) as usize;
		if authors.len() < required && after.len() < MAX_RANDOMNESS_BLOCKS as usize {
			return None;
		}
		let values: Vec<[u8; 32]> = after.iter().map(|entry| entry.value).collect();
		Some(blake2_256(&(subject, values).encode()))
	}

	/// Appends `key` to the queue `Q` unless it is queued already: an entry stands for
	/// its unit, whose current state the hook reads when it reaches it.
	pub(crate) fn enqueue<Q>(key: (JobId, UnitIndex)) -> DispatchResult
	where
		Q: frame_support::storage::StorageValue<
			BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>,
			Query = BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>,
		>,
	{
		Q::try_mutate(|queue| {
			if queue.contains(&key) {
				return Ok(());
			}
			queue.try_push(key).map_err(|_| Error::<T>::DrawQueueFull.into())
		})
	}

	/// Walks a queue of units in commitment order, up to `limit` handled: stale and
	/// handled entries leave it, and the first entry that must wait stops the walk,
	/// since every later one waits too.
	pub(crate) fn walk_queue<S: Get<u32>>(
		queue: &BoundedVec<(JobId, UnitIndex), S>,
		limit: u32,
		mut handle: impl FnMut((JobId, UnitIndex)) -> Queued,
	) -> Walk<S> {
		let (mut handled, mut stale, mut taken) = (0u32, 0u32, 0usize);
		for key in queue.iter().copied() {
			if handled >= limit {
				break;
			}
			match handle(key) {
				Queued::Stale => stale = stale.saturating_add(1),
				Queued::Wait => break,
				Queued::Handled => handled = handled.saturating_add(1),
			}
			taken = taken.saturating_add(1);
		}
		let rest = (taken > 0).then(|| BoundedVec::truncate_from(queue.iter().skip(taken).copied().collect()));
		Walk { handled, stale, rest }
	}

	/// The weight of the block hook that concluded `concluded` rounds (so many of them
	/// escalations), drew `drawn` (so many of them escalation committees) and recorded
	/// `recorded` secrets' randomness, walking past the stale entries both counts name (a
	/// read each). Each count is at most `MaxDrawsPerBlock` (`MaxSecretsPerBlock` for the
	/// secrets), the escalations at most `MaxEscalationsPerBlock`, and the stale entries
	/// at most a queue's bound.
	pub fn hook_weight(concluded: HookCount, drawn: HookCount, recorded: HookCount) -> Weight {
		// A draw's benchmark picks a round from a pool of online verifiers; the staking
		// pallet's bound on its picks covers draws that skip offline ones.
		let draw = |count: u32| T::WeightInfo::draw_round().saturating_add(T::Draw::draw_weight(count));
		// A committee's draw also takes the round's verifiers out: two reads each.
		let committee = draw(Self::largest_draw())
			.saturating_add(T::DbWeight::get().reads(2u64.saturating_mul(u64::from(T::VerifiersPerUnit::get()))));
		let plain = |count: HookCount| u64::from(count.all.saturating_sub(count.escalations));
		// `on_initialize_idle` is measured before secrets were queued: one more read; and
		// before the beacon: its read and write, the randomness source's read, the last
		// author's read and write, the block author's two (the digest and the authorities)
		// and the author count's.
		T::WeightInfo::on_initialize_idle()
			.saturating_add(T::DbWeight::get().reads_writes(7, 2))
			.saturating_add(Self::conclusion_weight().saturating_mul(plain(concluded)))
			.saturating_add(Self::escalation_conclusion_weight().saturating_mul(u64::from(concluded.escalations)))
			.saturating_add(draw(T::VerifiersPerUnit::get()).saturating_mul(plain(drawn)))
			.saturating_add(committee.saturating_mul(u64::from(drawn.escalations)))
			.saturating_add(T::WeightInfo::record_randomness().saturating_mul(u64::from(recorded.all)))
			.saturating_add(T::DbWeight::get().reads(u64::from(drawn.stale.saturating_add(recorded.stale))))
	}

	/// Draws the verifiers of queued proofs whose randomness is known, and drops those
	/// past `DrawTimeout`, up to `MaxDrawsPerBlock` in all and `MaxEscalationsPerBlock`
	/// escalation committees; returns how many, and how many were escalations.
	pub(crate) fn draw_due(now: BlockNumberFor<T>) -> HookCount {
		let queue = PendingDraws::<T>::get();
		let beacon = Beacon::<T>::get();
		let mut escalations = 0u32;
		let drawn = Self::walk_queue(&queue, T::MaxDrawsPerBlock::get(), |(job, unit)| {
			let Some(round) = Rounds::<T>::get((job, unit)) else { return Queued::Stale };
			if round.drawn.is_some() {
				// A duplicate entry of a unit proven again: already drawn.
				return Queued::Stale;
			}
			let escalation = matches!(round.kind, RoundKind::Escalation { .. });
			if escalation {
				// Its conclusion may overturn a proof and roll a job back: few a block.
				if escalations >= T::MaxEscalationsPerBlock::get() {
					return Queued::Wait;
				}
				escalations = escalations.saturating_add(1);
			}
			// Nothing the solver chose goes into the seed (not its trace root, which it
			// could grind), and randomness known at or before the commitment's block
			// could have been known to the solver: wait until every block is newer.
			let subject = (b"touchstone/verification", job, unit, round.committed_at, escalation).encode();
			if let Some(seed) = Self::seed_after(&beacon, round.committed_at, &subject) {
				Self::draw(job, unit, round, seed, now);
			} else if now <= Self::draw_deadline(&round) {
				return Queued::Wait;
			} else {
				// Counted as a draw, so expiries share the per-block bound and its weight.
				Self::deposit_event(Event::DrawExpired { job, unit });
				// The solver still owes its secret: a round without verifiers takes it.
				if matches!(round.kind, RoundKind::Escalation { .. }) {
					Self::escalation_undecided(job, unit, round);
				} else if matches!(round.secret, SolverSecret::Awaited { .. }) {
					Self::open_periods(job, unit, round, [0; 32], Vec::new(), now, Zero::zero());
				} else {
					Self::remove_round((job, unit));
				}
			}
			Queued::Handled
		});
		if let Some(rest) = drawn.rest {
			PendingDraws::<T>::put(rest);
		}
		HookCount { all: drawn.handled, escalations, stale: drawn.stale }
	}

	/// Draws a round's verifiers (an escalation's committee) from `seed` and opens its
	/// commit period.
	pub(crate) fn draw(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, seed: [u8; 32], now: BlockNumberFor<T>) {
		let Some(proven) = Self::proof_of_round(job, unit, &round) else { return };
		let escalation = matches!(round.kind, RoundKind::Escalation { .. });
		if !escalation {
			round.kind = match proven.verification {
				VerificationMode::Exact => RoundKind::Exact,
				VerificationMode::Tolerance { .. } => {
					Self::freeze_thresholds(job, unit);
					RoundKind::Tolerance { profiling: !RoundThresholds::<T>::contains_key((job, unit)) }
				},
			};
		}
		let count = if escalation { T::EscalationCommittee::get() } else { T::VerifiersPerUnit::get() };
		// Each verifier re-executes its samples (a member, every flagged segment): the commit
		// period gives it the time they take, and one segment more. A verifier keeps each
		// segment it has checked across a restart, so a crash in the middle of the work costs
		// it at most the segment it was on: an honest verifier that dies once still commits.
		let samples = match &round.kind {
			RoundKind::Escalation { flagged, .. } => flagged.len() as u32,
			RoundKind::Exact | RoundKind::Tolerance { .. } => T::SamplesPerVerifier::get(),
		};
		let segments = samples.saturating_add(1);
		let work = BlockNumberFor::<T>::from(segments.saturating_mul(proven.segment_blocks));
		// A committee judges the round's verifiers too: none of them sits in it.
		let mut exclude = alloc::vec![proven.solver, proven.owner];
		if let RoundKind::Escalation { verifiers, .. } = &round.kind {
			exclude.extend(verifiers.iter().map(|attestation| attestation.verifier.clone()));
		}
		let verifiers = T::Draw::draw_verifiers(&seed, count, &exclude);
		if escalation && (verifiers.len() as u32) < T::MinEscalationCommittee::get() {
			Self::deposit_event(Event::CommitteeTooSmall { job, unit, drawn: verifiers.len() as u32 });
			return Self::escalation_undecided(job, unit, round);
		}
		if verifiers.is_empty() {
			Self::deposit_event(Event::NoVerifiers { job, unit });
			// The solver still owes its secret: a forced proof must be replaced even
			// when nobody could check it.
			if matches!(round.secret, SolverSecret::Awaited { .. }) {
				Self::open_periods(job, unit, round, seed, Vec::new(), now, Zero::zero());
			} else {
				Self::remove_round((job, unit));
			}
			return;
		}
		Self::open_periods(job, unit, round, seed, verifiers, now, work);
	}

	/// The last block a round may be drawn in.
	pub(crate) fn draw_deadline(round: &RoundOf<T>) -> BlockNumberFor<T> {
		round.committed_at.saturating_add(T::DrawTimeout::get())
	}
}

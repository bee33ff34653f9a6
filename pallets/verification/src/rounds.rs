//! Rounds: commitments and samples, verdicts, the conclusion of a round (missed reveals
//! slashed, a forced round's catchers paid, a tolerance round settled), and a round's
//! periods and removal.

use crate::pallet::*;
use crate::types::*;
use crate::weights::WeightInfo;
use alloc::vec::Vec;
use codec::Encode;
use polkadot_sdk::{
	frame_support::{
		defensive,
		pallet_prelude::*,
		storage::with_storage_layer,
	},
	frame_system::pallet_prelude::*,
	sp_core::H256,
	sp_io::hashing::blake2_256,
	sp_runtime::traits::{One, Saturating, Zero},
};
use touchstone_primitives::{
	traits::{OpenDispute, Slash, UnitProofs}, JobId, Role, Segments,
	SlashReason, UnitIndex,
};

impl<T: Config> Pallet<T> {
	/// What a verifier commits: `blake2_256(SCALE(verdict, salt, verifier))`. Binding the
	/// account stops a verifier from committing another's commitment unseen.
	pub fn commitment(verdict: &Verdict, salt: &[u8; 32], verifier: &T::AccountId) -> H256 {
		H256(blake2_256(&(verdict, salt, verifier).encode()))
	}

	/// The checkpoint segments `verifier` re-executes in a unit cut into `segments`
	/// segments ([`Segments`]: the stretches between the solver's checkpoints, on the
	/// job's global grid of checkpoint steps): `SamplesPerVerifier`
	/// distinct indices from `0`, or all of them if there are fewer, drawn from the
	/// round's seed and the verifier's account.
	pub fn sampled_segments(seed: &[u8; 32], verifier: &T::AccountId, segments: u32) -> Vec<u32> {
		let wanted = T::SamplesPerVerifier::get().min(segments);
		let mut chosen: Vec<u32> = Vec::new();
		let mut counter = 0u32;
		// A pick already chosen moves on to the next index not chosen, so every pick
		// adds one and the loop ends after `wanted` picks.
		while (chosen.len() as u32) < wanted {
			let pick = blake2_256(&(b"touchstone/segments", seed, verifier, counter).encode());
			let mut word = [0u8; 4];
			word.copy_from_slice(&pick[..4]);
			let mut index = u32::from_le_bytes(word) % segments;
			while chosen.contains(&index) {
				index = index.saturating_add(1) % segments;
			}
			chosen.push(index);
			counter = counter.saturating_add(1);
		}
		chosen
	}

	/// The segments `verifier` re-executes in the unit's current round, or `None` if it
	/// was not drawn for it. Backs the `VerificationApi::samples` runtime API.
	pub fn samples(job: JobId, unit: UnitIndex, verifier: &T::AccountId) -> Option<Vec<u32>> {
		Self::round_samples(job, unit, &Rounds::<T>::get((job, unit))?, verifier)
	}

	/// The segments `verifier` re-executes in `round`: its own sample, or every flagged
	/// segment in an escalation. `None` if it is not drawn in the round.
	pub(crate) fn round_samples(job: JobId, unit: UnitIndex, round: &RoundOf<T>, verifier: &T::AccountId) -> Option<Vec<u32>> {
		let drawn = round.drawn.as_ref()?;
		if !round.attestations.iter().any(|a| a.verifier == *verifier) {
			return None;
		}
		if let RoundKind::Escalation { flagged, .. } = &round.kind {
			return Some(flagged.to_vec());
		}
		let proven = T::Units::proven_unit(job, unit)?;
		Some(Self::sampled_segments(&drawn.seed, verifier, Self::segments(&proven).count()))
	}

	/// Checks that a revealed verdict is of the round's kind, and that a distance names a
	/// segment the verifier re-executed.
	pub(crate) fn check_verdict(
		job: JobId,
		unit: UnitIndex,
		round: &RoundOf<T>,
		verifier: &T::AccountId,
		verdict: &Verdict,
	) -> DispatchResult {
		let (segment, profiled) = match (&round.kind, verdict) {
			(RoundKind::Exact, Verdict::Match | Verdict::Mismatch { .. }) => return Ok(()),
			(RoundKind::Tolerance { profiling }, Verdict::Measured { segment, profile, .. }) => {
				(segment, profile.is_some() == *profiling)
			},
			(RoundKind::Escalation { .. }, Verdict::Measured { segment, profile, .. }) => (segment, profile.is_none()),
			_ => return Err(Error::<T>::WrongVerdict.into()),
		};
		ensure!(profiled, Error::<T>::WrongVerdict);
		ensure!(
			Self::round_samples(job, unit, round, verifier).is_some_and(|samples| samples.contains(segment)),
			Error::<T>::SegmentNotSampled
		);
		Ok(())
	}

	/// The checkpoint segments of the proven unit.
	pub(crate) fn segments(proven: &ProvenUnitOf<T>) -> Segments {
		proven.trace.segments()
	}

	/// Concludes every round whose reveal period ends at `now`; returns how many, and
	/// how many of them were escalations.
	pub(crate) fn conclude_due(now: BlockNumberFor<T>) -> HookCount {
		let due = Closing::<T>::take(now);
		let mut escalations = 0u32;
		for key in due.iter() {
			if Rounds::<T>::get(key).is_some_and(|round| matches!(round.kind, RoundKind::Escalation { .. })) {
				escalations = escalations.saturating_add(1);
			}
			Self::conclude(*key, now);
		}
		HookCount { all: due.len() as u32, escalations, stale: 0 }
	}

	/// Ends a round's reveal period: voids it if its proof no longer stands, else
	/// slashes every drawn verifier that did not reveal, and the solver if it owed its
	/// secret and did not reveal it. A forced round pays its catchers and hands the unit
	/// its honest proof.
	pub(crate) fn conclude((job, unit): (JobId, UnitIndex), now: BlockNumberFor<T>) {
		let Some(mut round) = Rounds::<T>::get((job, unit)) else { return };
		// The unit may have been proven again since: its new round closes later.
		if round.drawn.as_ref().is_none_or(|drawn| drawn.reveal_ends != now) {
			return;
		}
		let Some(proven) = Self::proof_of_round(job, unit, &round) else { return };
		if matches!(round.kind, RoundKind::Escalation { .. }) {
			return Self::conclude_escalation(job, unit, round, &proven);
		}
		let missed = Self::slash_unrevealed(job, unit, &mut round.attestations);
		let bound = match round.kind {
			RoundKind::Tolerance { profiling } => Self::settle_thresholds(job, unit, profiling, &round.attestations),
			_ => None,
		};
		let (mut matched, mut mismatched) = (0u32, 0u32);
		let mut flagged: Vec<u32> = Vec::new();
		for attestation in round.attestations.iter() {
			let AttestationState::Revealed(verdict) = &attestation.state else { continue };
			if Self::endorses(verdict, bound.as_ref()) {
				matched = matched.saturating_add(1);
				continue;
			}
			mismatched = mismatched.saturating_add(1);
			if let Verdict::Measured { segment, .. } = verdict {
				if !flagged.contains(segment) {
					flagged.push(*segment);
				}
			}
		}
		round.concluded = true;
		Self::deposit_event(Event::RoundConcluded { job, unit, matched, mismatched, missed });
		if !flagged.is_empty() {
			return Self::escalate(job, unit, round, flagged, now);
		}
		match core::mem::replace(&mut round.secret, SolverSecret::NotRequired) {
			SolverSecret::Awaited { .. } => {
				let slashed = Self::slash_missed(&proven.solver, Role::Solver, SlashReason::MissedSecretReveal);
				Self::deposit_event(Event::SecretRevealMissed { job, unit, solver: proven.solver.clone(), slashed });
				round.secret = SolverSecret::Missed;
			},
			SolverSecret::Forced { step, honest, rate } => {
				// Disputes opened since the reveal judge the forced trace too; they go
				// only with the forced proof. The stored round is still `Forced`, which
				// tells `on_proof_submitted` that the honest proof owes no secret; the
				// replacement's own round takes its place.
				let replaced = with_storage_layer(|| {
					T::Disputes::dismiss_all(job, unit)?;
					T::Units::replace_proof(job, unit, honest)
				});
				if replaced.is_ok() {
					// Paid only once the honest proof stands: a forced proof that stayed
					// would be a lie the jackpot had paid for.
					Self::pay_catchers(job, unit, &round, &proven, step, rate);
					return;
				}
				// Only a full draw queue refuses it, which room for every open unit rules
				// out: the forced proof then stands as if revealed unforced, open to
				// challenge like any other, and nobody is paid for catching it.
				round.secret = SolverSecret::Revealed;
			},
			other => round.secret = other,
		}
		Rounds::<T>::insert((job, unit), round);
	}

	/// The unit's standing proof, if it is the one the round judges. Otherwise its proof
	/// was overturned or replaced since: the round is voided, with nobody slashed or paid,
	/// and `None`.
	pub(crate) fn proof_of_round(job: JobId, unit: UnitIndex, round: &RoundOf<T>) -> Option<ProvenUnitOf<T>> {
		match T::Units::proven_unit(job, unit) {
			Some(proven) if proven.trace.root == round.trace_root => Some(proven),
			_ => {
				Self::remove_round((job, unit));
				Self::deposit_event(Event::RoundVoided { job, unit });
				None
			},
		}
	}

	/// Marks every drawn verifier that did not reveal as `Missed` and slashes it
	/// `MissedRevealSlash`; returns how many missed.
	pub(crate) fn slash_unrevealed<S: Get<u32>>(
		job: JobId,
		unit: UnitIndex,
		attestations: &mut BoundedVec<Attestation<T::AccountId>, S>,
	) -> u32 {
		let mut missed = 0u32;
		for attestation in attestations.iter_mut() {
			match attestation.state {
				AttestationState::Revealed(_) => continue,
				AttestationState::Missed => {},
				AttestationState::Drawn | AttestationState::Committed(_) => {
					attestation.state = AttestationState::Missed;
					let verifier = attestation.verifier.clone();
					let slashed = Self::slash_missed(&verifier, Role::Verifier, SlashReason::MissedReveal);
					Self::deposit_event(Event::RevealMissed { job, unit, verifier, slashed });
				},
			}
			missed = missed.saturating_add(1);
		}
		missed
	}

	/// Slashes `MissedRevealSlash` from `who`'s bond for `role`, for a reveal it owed and
	/// did not make; returns what was taken. A party that left the registry and withdrew
	/// has nothing left to take: the slash takes what there is.
	pub(crate) fn slash_missed(who: &T::AccountId, role: Role, reason: SlashReason) -> BalanceOf<T> {
		T::Slash::slash(who, role, T::MissedRevealSlash::get(), reason, None).unwrap_or_else(|_| Zero::zero())
	}

	/// The weight of concluding one round at its worst: every verifier slashed, and a
	/// forced round's catchers paid, its disputes dismissed and its proof replaced.
	pub(crate) fn conclusion_weight() -> Weight {
		let verifiers = T::VerifiersPerUnit::get();
		T::WeightInfo::conclude_round(verifiers)
			.saturating_add(Self::payment_weight().saturating_mul(u64::from(verifiers).saturating_add(1)))
			.saturating_add(T::Disputes::dismiss_all_weight())
			.saturating_add(Self::replacement_weight())
			// A tolerance round reads the job's thresholds, sets them, and may queue an
			// escalation and hold the unit.
			.saturating_add(T::DbWeight::get().reads_writes(3, 3))
	}

	/// Opens a round's commit and reveal periods for `verifiers`, drawn from `seed`; the
	/// commit period is `CommitPeriod` and the `work` blocks the verifiers' re-execution
	/// takes.
	pub(crate) fn open_periods(
		job: JobId,
		unit: UnitIndex,
		mut round: RoundOf<T>,
		seed: [u8; 32],
		verifiers: Vec<T::AccountId>,
		now: BlockNumberFor<T>,
		work: BlockNumberFor<T>,
	) {
		let commit_ends = now.saturating_add(T::CommitPeriod::get()).saturating_add(work);
		let mut reveal_ends = commit_ends.saturating_add(T::RevealPeriod::get());
		// All of a block's draws close in the same block, and there are at most
		// `MaxDrawsPerBlock` of them, so the first block has room. Were it full, the
		// round closes in the next block with room rather than never.
		for _ in 0..T::MaxPendingDraws::get() {
			if Closing::<T>::try_mutate(reveal_ends, |closing| closing.try_push((job, unit))).is_ok() {
				break;
			}
			defensive!("a block's closing list is full");
			reveal_ends = reveal_ends.saturating_add(One::one());
		}
		round.attestations = BoundedVec::truncate_from(
			verifiers
				.iter()
				.map(|verifier| Attestation { verifier: verifier.clone(), state: AttestationState::Drawn })
				.collect(),
		);
		round.drawn = Some(DrawnRound { seed, commit_ends, reveal_ends });
		for verifier in &verifiers {
			VerifierRounds::<T>::insert(verifier, (job, unit), ());
		}
		Rounds::<T>::insert((job, unit), round);
		Self::deposit_event(Event::VerifiersDrawn { job, unit, verifiers, seed, commit_ends, reveal_ends });
	}

	/// One payment to an account outside the benchmarked calls: a transfer from a hold,
	/// as a solver's pay from escrow (the hold and both accounts: 3 reads, 3 writes,
	/// about 40 µs). It bounds a share of a slash paid to a dispute's winner too.
	pub(crate) fn payment_weight() -> Weight {
		Weight::from_parts(40_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(3, 3))
	}

	/// Every verifier drawn in a round: its attestations, and an escalation's tolerance
	/// round's verifiers, whom the committee judges.
	pub(crate) fn drawn_in(round: &RoundOf<T>) -> impl Iterator<Item = &Attestation<T::AccountId>> {
		let judged = match &round.kind {
			RoundKind::Escalation { verifiers, .. } => &verifiers[..],
			RoundKind::Exact | RoundKind::Tolerance { .. } => &[],
		};
		round.attestations.iter().chain(judged.iter())
	}

	/// Removes a unit's round, and takes it off each of its verifiers' `VerifierRounds`.
	pub(crate) fn remove_round(key: (JobId, UnitIndex)) -> Option<RoundOf<T>> {
		RoundThresholds::<T>::remove(key);
		let round = Rounds::<T>::take(key)?;
		for attestation in Self::drawn_in(&round) {
			VerifierRounds::<T>::remove(&attestation.verifier, key);
		}
		Some(round)
	}

	/// The units whose rounds `verifier` is drawn in, until each round is gone: those it
	/// owes a commitment or reveal, and those whose units are not final yet. Reads only
	/// `verifier`'s own keys of `VerifierRounds`. Backs the `VerificationApi::rounds_of`
	/// runtime API.
	pub fn rounds_of(verifier: &T::AccountId) -> Vec<(JobId, UnitIndex)> {
		VerifierRounds::<T>::iter_key_prefix(verifier).collect()
	}
}

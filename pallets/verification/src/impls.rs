//! What the other pallets see of this one: the work a verifier holds, the proof lifecycle
//! the tasks pallet drives, and the judgment of attestations the disputes pallet calls.

use crate::pallet::*;
use crate::types::*;
use crate::weights::WeightInfo;
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_system,
	frame_support::pallet_prelude::*,
	sp_runtime::{
		traits::{UniqueSaturatedInto, Zero},
		Perbill,
	},
};
use touchstone_primitives::{
	traits::{AttestationJudge, Slash, UnitProofs}, JobId, Role,
	SlashReason, UnitIndex,
};

impl<T: Config> touchstone_primitives::traits::ActiveWork<T::AccountId, BalanceOf<T>> for Pallet<T> {
	fn active_work(who: &T::AccountId, role: Role) -> u32 {
		match role {
			// The registry only asks whether there is any, which one key read answers.
			Role::Verifier => u32::from(VerifierRounds::<T>::iter_key_prefix(who).next().is_some()),
			Role::Solver | Role::Challenger => 0,
		}
	}

	fn required_collateral(_who: &T::AccountId) -> BalanceOf<T> {
		Zero::zero()
	}
}

impl<T: Config> touchstone_primitives::traits::ProofLifecycle<T::AccountId> for Pallet<T> {
	fn on_proof_submitted(
		job: JobId,
		unit: UnitIndex,
		solver: &T::AccountId,
		proof: &touchstone_primitives::LearningProof,
	) -> DispatchResult {
		let replacing = Rounds::<T>::get((job, unit)).is_some_and(|round| matches!(round.secret, SolverSecret::Forced { .. }));
		// Forced errors are exact mode's: a distance has no error a solver could place
		// for verifiers to find and the chain to recognise.
		let secret = if replacing || T::ForcedErrorRate::get().is_zero() || T::Units::tolerance_job(job).is_some() {
			// A secret committed while the rate was not zero is moot once the proof is in.
			Secrets::<T>::remove((job, unit));
			SolverSecret::NotRequired
		} else {
			let commitment = Secrets::<T>::get((job, unit))
				.filter(|commitment| commitment.solver == *solver)
				.ok_or(Error::<T>::SecretNotCommitted)?;
			let random = commitment.random.ok_or(Error::<T>::SecretRandomnessPending)?;
			Secrets::<T>::remove((job, unit));
			SolverSecret::Awaited { hash: commitment.hash, random, rate: commitment.rate }
		};
		Self::enqueue::<PendingDraws<T>>((job, unit))?;
		// A proof committed again (after an overturn, or an honest one replacing a forced
		// one) replaces the old round; a round still listed to close is concluded as
		// voided then, or is already gone.
		Self::remove_round((job, unit));
		Rounds::<T>::insert(
			(job, unit),
			Round {
				trace_root: proof.trace_root.0,
				committed_at: frame_system::Pallet::<T>::block_number(),
				drawn: None,
				kind: RoundKind::Exact,
				attestations: BoundedVec::new(),
				concluded: false,
				secret,
			},
		);
		// A tolerance round is judged by the thresholds in force now.
		Self::freeze_thresholds(job, unit);
		Ok(())
	}

	fn can_finalize(job: JobId, unit: UnitIndex) -> bool {
		// One rule, the draw hook's: a round is over when it concluded or the hook dropped
		// it. An undrawn round past its deadline may still be drawn (randomness came, but
		// the hook had more to draw), so it holds the unit until the hook decides.
		Rounds::<T>::get((job, unit)).is_none_or(|round| round.concluded)
	}

	fn on_finalized(job: JobId, unit: UnitIndex) -> Vec<T::AccountId> {
		// Read before the round and its frozen thresholds go.
		let bound = Self::bound(job, unit);
		let Some(round) = Self::remove_round((job, unit)) else { return Vec::new() };
		// An expired round's queue entry finds no round and is skipped.
		let bound = if matches!(round.kind, RoundKind::Exact) { None } else { bound };
		let mut earned: Vec<T::AccountId> = Vec::new();
		for attestation in Self::drawn_in(&round) {
			let AttestationState::Revealed(verdict) = &attestation.state else { continue };
			if Self::endorses(verdict, bound.as_ref()) && !earned.contains(&attestation.verifier) {
				earned.push(attestation.verifier.clone());
			}
		}
		earned
	}

	fn on_proof_dropped(job: JobId, unit: UnitIndex) {
		// Its queue entry, or its place in `Closing`, finds no round and is skipped.
		if Self::remove_round((job, unit)).is_some() {
			Self::deposit_event(Event::RoundVoided { job, unit });
		}
		// A secret committed for work that will not be proven: the unit's next solver
		// commits its own. Its place in `PendingSecrets` finds nothing and is skipped.
		Secrets::<T>::remove((job, unit));
	}

	fn on_proof_dropped_weight() -> Weight {
		// The round, each of its verifiers' counts, and the secret.
		let verifiers = u64::from(T::VerifiersPerUnit::get());
		T::DbWeight::get().reads_writes(verifiers.saturating_add(1), verifiers.saturating_add(2))
	}

	fn on_abandoned(job: JobId, unit: UnitIndex) {
		// A solver that learned whether the unit was forced and then let it go could
		// abandon every unforced unit for a sybil to retry, until one came up forced:
		// that costs it the unit's collateral, more than one payout it could steer
		// (what the unit pays into the jackpot over the rate) is worth in expectation.
		if let Some(commitment) = Secrets::<T>::get((job, unit)).filter(|commitment| commitment.random.is_some()) {
			let collateral = T::Units::unit_collateral(job).unwrap_or_else(Zero::zero);
			let slashed = T::Slash::slash(
				&commitment.solver,
				Role::Solver,
				collateral,
				SlashReason::AbandonedAfterDesignation,
				None,
			)
			.unwrap_or_else(|_| Zero::zero());
			Self::deposit_event(Event::DesignatedUnitAbandoned { job, unit, solver: commitment.solver, slashed });
		}
		Self::on_proof_dropped(job, unit);
	}

	fn commit_secret(job: JobId, unit: UnitIndex, solver: &T::AccountId, hash: [u8; 32]) -> DispatchResult {
		Self::do_commit_secret(solver.clone(), job, unit, hash.into())
	}

	fn commit_secret_weight() -> Weight {
		T::WeightInfo::commit_secret()
	}

	fn on_abandoned_weight() -> Weight {
		// The forfeit is benchmarked; a round of the unit's (one proven before, then
		// dropped) would be dropped too.
		T::WeightInfo::on_abandoned().saturating_add(Self::on_proof_dropped_weight())
	}

	fn on_finalized_weight() -> Weight {
		// An escalated round's committee shares the pay with the round's own verifiers.
		let verifiers = T::VerifiersPerUnit::get().saturating_add(T::EscalationCommittee::get());
		// The tasks pallet pays each verifier from escrow; a tolerance job's thresholds are
		// read.
		T::WeightInfo::on_finalized(verifiers)
			.saturating_add(Self::payment_weight().saturating_mul(u64::from(verifiers)))
			.saturating_add(T::DbWeight::get().reads(1))
	}
}

impl<T: Config> AttestationJudge<T::AccountId> for Pallet<T> {
	fn proof_overturned(
		job: JobId,
		unit: UnitIndex,
		step: Option<u32>,
		(winners, share): (&[T::AccountId], Perbill),
	) -> u32 {
		// A defender silent before the step level ended showed no step wrong: its
		// attesters answer summonses instead (`match_attesters`).
		let Some(step) = step else { return 0 };
		let Some(proven) = T::Units::proven_unit(job, unit) else { return 0 };
		let Some(segment) = Self::segments(&proven).of_step(step) else { return 0 };
		let mut slashed_count = 0u32;
		for (verifier, samples) in Self::match_attesters(job, unit) {
			// A verifier re-executes its samples from the solver's checkpoints, so a lie
			// shows only in the segment that holds it: one that did not sample it
			// attested nothing false.
			if samples.contains(&segment) {
				Self::slash_false_attestation(job, unit, &verifier, step, (winners, share));
				slashed_count = slashed_count.saturating_add(1);
			}
		}
		slashed_count
	}

	fn holds_rulings(job: JobId, unit: UnitIndex) -> bool {
		Rounds::<T>::get((job, unit)).is_some_and(|round| match round.secret {
			SolverSecret::Awaited { .. } => !round.concluded,
			SolverSecret::Forced { .. } => true,
			SolverSecret::NotRequired | SolverSecret::Revealed | SolverSecret::Missed => false,
		})
	}

	fn match_attesters(job: JobId, unit: UnitIndex) -> Vec<(T::AccountId, Vec<u32>)> {
		let Some(round) = Rounds::<T>::get((job, unit)) else { return Vec::new() };
		let Some(drawn) = round.drawn.as_ref() else { return Vec::new() };
		let Some(proven) = T::Units::proven_unit(job, unit) else { return Vec::new() };
		// A round of an earlier proof of the unit judged another trace.
		if proven.trace.root != round.trace_root || !matches!(round.kind, RoundKind::Exact) {
			return Vec::new();
		}
		let segments = Self::segments(&proven).count();
		round
			.attestations
			.iter()
			.filter(|attestation| attestation.state == AttestationState::Revealed(Verdict::Match))
			.map(|attestation| {
				(attestation.verifier.clone(), Self::sampled_segments(&drawn.seed, &attestation.verifier, segments))
			})
			.collect()
	}

	fn false_attestation(
		job: JobId,
		unit: UnitIndex,
		verifier: &T::AccountId,
		step: u32,
		reward: (&[T::AccountId], Perbill),
	) -> u128 {
		Self::slash_false_attestation(job, unit, verifier, step, reward).unique_saturated_into()
	}

	fn false_attestation_weight() -> Weight {
		// One slash paying one winner, as `conclude_round(1)` slashes one verifier.
		T::WeightInfo::conclude_round(1).saturating_add(Self::payment_weight())
	}

	fn proof_overturned_weight(winners: u32) -> Weight {
		let verifiers = T::VerifiersPerUnit::get();
		// `conclude_round(v)` is benchmarked slashing `v` verifiers of a stored round:
		// the same reads and slashes. Each false attestation's slash also pays each
		// winner its part, and the unit's proof is read (its job and unit).
		let payments = u64::from(verifiers).saturating_mul(u64::from(winners.max(1)));
		T::WeightInfo::conclude_round(verifiers)
			.saturating_add(Self::payment_weight().saturating_mul(payments))
			.saturating_add(T::DbWeight::get().reads(2))
	}
}

impl<T: Config> Pallet<T> {
	/// Slashes `verifier` `FalseAttestationSlash` from its verifier bond for attesting a
	/// transition of the unit's proof that a dispute showed wrong at global step `step`,
	/// `share` of it to `winners` in equal parts (less the verifier itself: the staking
	/// pallet refuses to reward an account from its own slash). Returns what was slashed.
	pub(crate) fn slash_false_attestation(
		job: JobId,
		unit: UnitIndex,
		verifier: &T::AccountId,
		step: u32,
		(winners, share): (&[T::AccountId], Perbill),
	) -> BalanceOf<T> {
		let others: Vec<T::AccountId> = winners.iter().filter(|winner| *winner != verifier).cloned().collect();
		let reward = (!others.is_empty()).then_some((&others[..], share));
		let slashed =
			T::Slash::slash(verifier, Role::Verifier, T::FalseAttestationSlash::get(), SlashReason::FalseAttestation, reward)
				.unwrap_or_else(|_| Zero::zero());
		Self::deposit_event(Event::FalseAttestation { job, unit, verifier: verifier.clone(), step, slashed });
		slashed
	}
}

//! Tolerance mode and escalation: thresholds frozen, profiled and applied, escalation
//! committees drawn and concluded, and the losers of an escalation slashed.

use crate::pallet::*;
use crate::types::*;
use crate::weights::WeightInfo;
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_support::pallet_prelude::*,
	frame_system::pallet_prelude::*,
	sp_runtime::traits::Zero,
};
use touchstone_primitives::{
	traits::{Slash, UnitProofs}, Distance, JobId, Role,
	SlashReason, UnitIndex,
};

impl<T: Config> Pallet<T> {
	/// Whether a revealed verdict endorses the proof: `Match`, or a distance within
	/// `bound` (the job's thresholds).
	pub(crate) fn endorses(verdict: &Verdict, bound: Option<&Distance>) -> bool {
		match verdict {
			Verdict::Match => true,
			Verdict::Mismatch { .. } => false,
			Verdict::Measured { distance, .. } => bound.is_some_and(|bound| distance.within(bound)),
		}
	}

	/// The thresholds a tolerance-mode job's distances are judged by now: the profiled
	/// ones, or the submitter's ceilings until they are profiled.
	pub(crate) fn bound(job: JobId, unit: UnitIndex) -> Option<Distance> {
		let info = T::Units::tolerance_job(job)?;
		Some(Self::thresholds_of((job, unit), &info).unwrap_or(info.ceiling))
	}

	/// The thresholds the unit's round is judged by: those frozen for it, else the job's
	/// current ones; `None` while the job is unprofiled.
	pub(crate) fn thresholds_of(key: (JobId, UnitIndex), info: &touchstone_primitives::traits::ToleranceJob<T::AccountId>) -> Option<Distance> {
		RoundThresholds::<T>::get(key).or(info.profile.thresholds)
	}

	/// Freezes the job's current thresholds for the unit's round, unless frozen already
	/// or the job has none (the round then profiles them).
	pub(crate) fn freeze_thresholds(job: JobId, unit: UnitIndex) {
		if RoundThresholds::<T>::contains_key((job, unit)) {
			return;
		}
		if let Some(thresholds) = T::Units::tolerance_job(job).and_then(|info| info.profile.thresholds) {
			RoundThresholds::<T>::insert((job, unit), thresholds);
		}
	}

	/// The thresholds a concluding tolerance round judges by. A profiling round of a job
	/// still without thresholds sets them: the componentwise median of the revealed
	/// profiles times `ToleranceMargin`, at least `ThresholdFloor` of the job's ceilings
	/// and at most the ceilings. With fewer than `MinProfiles` profiles revealed the job
	/// stays unprofiled (the next round profiles) and this round is judged by the
	/// ceilings.
	pub(crate) fn settle_thresholds(
		job: JobId,
		unit: UnitIndex,
		profiling: bool,
		attestations: &BoundedVec<Attestation<T::AccountId>, T::EscalationCommittee>,
	) -> Option<Distance> {
		let info = T::Units::tolerance_job(job)?;
		if let Some(thresholds) = Self::thresholds_of((job, unit), &info) {
			return Some(thresholds);
		}
		let profiles: Vec<Distance> = attestations
			.iter()
			.filter_map(|a| match &a.state {
				AttestationState::Revealed(Verdict::Measured { profile: Some(profile), .. }) => Some(*profile),
				_ => None,
			})
			.collect();
		let enough = profiling && profiles.len() as u32 >= T::MinProfiles::get();
		let Some(median) = Distance::median(&profiles).filter(|_| enough) else { return Some(info.ceiling) };
		let floor = info.ceiling.share(T::ThresholdFloor::get());
		let thresholds = median.scaled(T::ToleranceMargin::get()).max(&floor).min(&info.ceiling);
		if T::Units::set_thresholds(job, Some(thresholds)).is_ok() {
			Self::deposit_event(Event::ThresholdsProfiled { job, thresholds, profiles: profiles.len() as u32 });
		}
		Some(thresholds)
	}

	/// Turns a concluded tolerance round whose verifiers measured `flagged` segments
	/// beyond the thresholds into an escalation: the unit is held (`Challenged`), and a
	/// committee is drawn from randomness known only after this block. With the draw
	/// queue full the round stays concluded, undecided.
	pub(crate) fn escalate(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, flagged: Vec<u32>, now: BlockNumberFor<T>) {
		let Some(drawn) = round.drawn.clone() else { return };
		if Self::enqueue::<PendingDraws<T>>((job, unit)).is_err() || T::Units::open_challenge(job, unit).is_err()
		{
			return Self::escalation_undecided(job, unit, round);
		}
		// The tolerance round's verifiers stay in `VerifierRounds`: the committee's
		// decision judges them.
		let verifiers = BoundedVec::truncate_from(core::mem::take(&mut round.attestations).into_inner());
		round.kind =
			RoundKind::Escalation { flagged: BoundedVec::truncate_from(flagged.clone()), verifiers, seed: drawn.seed };
		round.drawn = None;
		round.committed_at = now;
		round.concluded = false;
		Rounds::<T>::insert((job, unit), round);
		Self::deposit_event(Event::EscalationOpened { job, unit, segments: flagged });
	}

	/// An escalation without a committee (none could be queued, or drawn in time): the
	/// unit is released if it was held, its proof standing, and nobody is slashed for a
	/// distance.
	pub(crate) fn escalation_undecided(job: JobId, unit: UnitIndex, mut round: RoundOf<T>) {
		let _ = T::Units::close_challenge(job, unit);
		round.concluded = true;
		Rounds::<T>::insert((job, unit), round);
		Self::deposit_event(Event::EscalationDecided {
			job,
			unit,
			outcome: EscalationOutcome::Undecided,
			beyond: 0,
			within: 0,
			missed: 0,
		});
	}

	/// Ends an escalation's reveal period. The majority of the members that revealed
	/// decides; the losers (members on the minority side, and the tolerance round's
	/// verifiers whose distances the decision contradicts) are slashed
	/// `FalseAttestationSlash`, `WinnerShare` of each to a winner in turn. An overturned
	/// proof's solver is slashed `InvalidProofSlash` and the unit rejected; otherwise the
	/// unit is released, its proof standing.
	pub(crate) fn conclude_escalation(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, proven: &ProvenUnitOf<T>) {
		let missed = Self::slash_unrevealed(job, unit, &mut round.attestations);
		let bound = Self::bound(job, unit);
		let RoundKind::Escalation { flagged, verifiers, seed } = round.kind.clone() else { return };
		let (mut beyond, mut within) = (Vec::new(), Vec::new());
		for attestation in round.attestations.iter() {
			let AttestationState::Revealed(verdict) = &attestation.state else { continue };
			let side = if Self::endorses(verdict, bound.as_ref()) { &mut within } else { &mut beyond };
			side.push(attestation.verifier.clone());
		}
		let outcome = match beyond.len().cmp(&within.len()) {
			core::cmp::Ordering::Greater => EscalationOutcome::Overturned,
			core::cmp::Ordering::Less => EscalationOutcome::Upheld,
			core::cmp::Ordering::Equal => EscalationOutcome::Undecided,
		};
		Self::deposit_event(Event::EscalationDecided {
			job,
			unit,
			outcome,
			beyond: beyond.len() as u32,
			within: within.len() as u32,
			missed,
		});
		// The tolerance round's verifiers that revealed: those that flagged the proof, and
		// those that endorsed it having re-executed a flagged segment (one that did not
		// sample one attested nothing the committee judged).
		let segments = Self::segments(proven).count();
		let (mut accusers, mut endorsers) = (Vec::new(), Vec::new());
		for attestation in verifiers.iter() {
			let AttestationState::Revealed(verdict) = &attestation.state else { continue };
			if !Self::endorses(verdict, bound.as_ref()) {
				accusers.push(attestation.verifier.clone());
			} else if Self::sampled_segments(&seed, &attestation.verifier, segments)
				.iter()
				.any(|segment| flagged.contains(segment))
			{
				endorsers.push(attestation.verifier.clone());
			}
		}
		match outcome {
			EscalationOutcome::Overturned => {
				accusers.extend(beyond);
				endorsers.extend(within);
				Self::slash_losers(job, unit, &endorsers, &accusers);
				let reward = accusers.first().map(|winner| (core::slice::from_ref(winner), T::WinnerShare::get()));
				let slashed =
					T::Slash::slash(
						&proven.solver,
						Role::Solver,
						T::InvalidProofSlash::get().max(proven.collateral),
						SlashReason::InvalidProof,
						reward,
					)
						.unwrap_or_else(|_| Zero::zero());
				Self::deposit_event(Event::ToleranceProofRejected { job, unit, solver: proven.solver.clone(), slashed });
				// Drops the round with the proof (`on_proof_dropped`).
				if T::Units::reject_proof(job, unit).is_ok() {
					return;
				}
				// Not reachable while the unit is held `Challenged`; were it, the unit must
				// not stay held with its round concluded.
				let _ = T::Units::close_challenge(job, unit);
			},
			EscalationOutcome::Upheld => {
				accusers.extend(beyond);
				Self::slash_losers(job, unit, &accusers, &within);
				let _ = T::Units::close_challenge(job, unit);
			},
			EscalationOutcome::Undecided => {
				let _ = T::Units::close_challenge(job, unit);
			},
		}
		round.concluded = true;
		Rounds::<T>::insert((job, unit), round);
	}

	/// Slashes each of `losers` `FalseAttestationSlash` from its verifier bond,
	/// `WinnerShare` of it to one of `winners` in turn (to the jackpot alone if there is
	/// none, or if the winner is the loser itself).
	pub(crate) fn slash_losers(job: JobId, unit: UnitIndex, losers: &[T::AccountId], winners: &[T::AccountId]) {
		for (turn, verifier) in losers.iter().enumerate() {
			let winner = winners.get(turn.checked_rem(winners.len()).unwrap_or(0)).filter(|winner| *winner != verifier);
			let reward = winner.map(|winner| (core::slice::from_ref(winner), T::WinnerShare::get()));
			let slashed = T::Slash::slash(
				verifier,
				Role::Verifier,
				T::FalseAttestationSlash::get(),
				SlashReason::FalseAttestation,
				reward,
			)
			.unwrap_or_else(|_| Zero::zero());
			Self::deposit_event(Event::WrongDistance { job, unit, verifier: verifier.clone(), slashed });
		}
	}

	/// The weight of concluding one escalation at its worst: the committee and the round
	/// it judges slashed (the solver too), each paying a winner, the thresholds read and
	/// the unit overturned with every later step range of the largest job.
	pub(crate) fn escalation_conclusion_weight() -> Weight {
		let judged = T::VerifiersPerUnit::get().saturating_add(T::EscalationCommittee::get());
		T::WeightInfo::conclude_round(judged)
			.saturating_add(Self::payment_weight().saturating_mul(u64::from(judged).saturating_add(1)))
			.saturating_add(T::Units::overturn_weight(T::Units::max_units_per_job().saturating_sub(1)))
			.saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}
}

//! Forced errors: the randomness that designates a unit, and the payout to the
//! verifiers that caught a forced error.

use crate::pallet::*;
use crate::types::*;
use alloc::vec::Vec;
use codec::Encode;
use polkadot_sdk::{
	frame_support::{
		pallet_prelude::*,
		traits::{
			fungible::{Inspect, Mutate},
			tokens::{Fortitude, Preservation},
		},
	},
	frame_system::{self, pallet_prelude::*},
	sp_core::H256,
	sp_runtime::{
		traits::{Saturating, Zero},
		Perbill,
	},
};
use touchstone_primitives::{
	traits::UnitProofs, JobId, UnitIndex,
};

impl<T: Config> Pallet<T> {
	/// Records `who`'s forced-error secret commitment `hash` for a unit it accepted and
	/// has not proven: what `commit_secret` does, and what a proof that takes the next
	/// step range does for that range ([`touchstone_primitives::traits::ProofLifecycle::commit_secret`]).
	pub(crate) fn do_commit_secret(who: T::AccountId, job: JobId, unit: UnitIndex, hash: H256) -> DispatchResult {
		let (solver, deadline) = T::Units::assignment(job, unit).ok_or(Error::<T>::NotUnitSolver)?;
		ensure!(solver == who, Error::<T>::NotUnitSolver);
		let committed_at = frame_system::Pallet::<T>::block_number();
		// Abandoning a unit after its designation forfeits its collateral: an honest
		// solver must always have the time to prove after it.
		ensure!(
			deadline >= committed_at.saturating_add(SECRET_DEADLINE_MARGIN.into()),
			Error::<T>::DeadlineTooClose
		);
		// One secret per solver and unit: a second, once the randomness is known, would
		// let the solver choose whether it is forced.
		ensure!(
			Secrets::<T>::get((job, unit)).is_none_or(|commitment| commitment.solver != who),
			Error::<T>::SecretAlreadyCommitted
		);
		Self::enqueue::<PendingSecrets<T>>((job, unit))?;
		let rate = T::ForcedErrorRate::get();
		Secrets::<T>::insert((job, unit), SecretCommitment { solver: who.clone(), hash, committed_at, rate, random: None });
		Self::deposit_event(Event::SecretCommitted { job, unit, solver: who });
		Ok(())
	}

	/// Pays the verifiers of a forced round that caught its error from the jackpot: those
	/// that revealed `Mismatch` and re-executed the segment holding the forced `step`.
	/// Together they get what the unit pays into the jackpot divided by the forced-error
	/// rate, so the jackpot's expected outflow is its inflow whatever the price, but at
	/// most `MaxForcedErrorPayout` of the jackpot; they share it equally.
	pub(crate) fn pay_catchers(
		job: JobId,
		unit: UnitIndex,
		round: &RoundOf<T>,
		proven: &ProvenUnitOf<T>,
		step: u32,
		rate: Perbill,
	) {
		let segments = Self::segments(proven);
		let (Some(drawn), Some(segment)) = (round.drawn.as_ref(), segments.of_step(step)) else { return };
		let caught: Vec<T::AccountId> = round
			.attestations
			.iter()
			.filter(|a| matches!(a.state, AttestationState::Revealed(Verdict::Mismatch { .. })))
			.filter(|a| Self::sampled_segments(&drawn.seed, &a.verifier, segments.count()).contains(&segment))
			.map(|a| a.verifier.clone())
			.collect();
		let jackpot = T::Jackpot::get();
		let available = T::Currency::reducible_balance(&jackpot, Preservation::Preserve, Fortitude::Polite);
		let fair = rate.saturating_reciprocal_mul(proven.jackpot_pay);
		let total = fair.min(T::MaxForcedErrorPayout::get().mul_floor(available));
		let each = if caught.is_empty() { Zero::zero() } else { total / (caught.len() as u32).into() };
		let mut paid = Vec::new();
		for verifier in caught {
			// A catcher that cannot receive (say, below the existential deposit) is skipped.
			if !each.is_zero() && T::Currency::transfer(&jackpot, &verifier, each, Preservation::Preserve).is_err() {
				continue;
			}
			paid.push(verifier);
		}
		Self::deposit_event(Event::ForcedErrorPaid { job, unit, step, caught: paid, each });
	}

	/// Records the randomness of queued secret commitments once it is newer than them,
	/// up to `MaxSecretsPerBlock`; returns how many. A solver's proof waits for it.
	pub(crate) fn record_due(_now: BlockNumberFor<T>) -> HookCount {
		let queue = PendingSecrets::<T>::get();
		let beacon = Beacon::<T>::get();
		let recorded = Self::walk_queue(&queue, T::MaxSecretsPerBlock::get(), |(job, unit)| {
			let Some(mut commitment) = Secrets::<T>::get((job, unit)) else { return Queued::Stale };
			if commitment.random.is_some() {
				return Queued::Stale;
			}
			// Randomness the solver could know when it committed would let it pick its
			// secret: wait until every block of the seed is newer.
			let subject = (b"touchstone/forced-error", job, unit, commitment.committed_at).encode();
			let Some(random) = Self::seed_after(&beacon, commitment.committed_at, &subject) else {
				return Queued::Wait;
			};
			commitment.random = Some(random);
			Secrets::<T>::insert((job, unit), commitment);
			Self::deposit_event(Event::SecretRandomness { job, unit });
			Queued::Handled
		});
		if let Some(rest) = recorded.rest {
			PendingSecrets::<T>::put(rest);
		}
		HookCount { all: recorded.handled, escalations: 0, stale: recorded.stale }
	}

	/// Replacing a forced proof: the tasks pallet reads and writes the job and unit, and
	/// this pallet queues the new round, as for a proof committed (about 30 µs).
	pub(crate) fn replacement_weight() -> Weight {
		Weight::from_parts(30_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(4, 4))
	}
}

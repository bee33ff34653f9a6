//! What the tasks pallet offers others: the staking pallet's view of active work, the
//! disputes pallet's view of proven units, and the queries behind the runtime API.

use crate::{pallet::*, BalanceOf, JobOf, ProvenAggregateOf, ProvenUnitOf};
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_support::traits::Get,
	frame_system::pallet_prelude::BlockNumberFor,
	sp_runtime::{DispatchError, DispatchResult},
};
use touchstone_primitives::{
	traits::{ActiveWork, ProofLifecycle, UnitProofs},
	JobId, JobState, JobStatus, Role, SolverUnit, UnitIndex,
};

impl<T: Config> ActiveWork<T::AccountId, BalanceOf<T>> for Pallet<T> {
	fn active_work(who: &T::AccountId, role: Role) -> u32 {
		match role {
			Role::Solver => SolverUnits::<T>::decode_len(who).unwrap_or(0) as u32,
			Role::Verifier | Role::Challenger => 0,
		}
	}

	fn required_collateral(who: &T::AccountId) -> BalanceOf<T> {
		Self::collateral(SolverExposure::<T>::get(who))
	}
}

impl<T: Config> Pallet<T> {
	/// The units `solver` holds that are not final, then pool units it may claim; at most
	/// `max` in all. Backs the `TasksApi::units_for_solver` runtime API.
	pub fn units_for_solver(
		solver: &T::AccountId,
		max: u32,
	) -> Vec<SolverUnit<T::AccountId, BlockNumberFor<T>>> {
		let max = max as usize;
		let mut found: Vec<_> = SolverUnits::<T>::get(solver)
			.into_iter()
			.filter_map(|(job, unit)| {
				Units::<T>::get(job, unit)
					.map(|work_unit| SolverUnit { job, unit, work_unit, claimable: false })
			})
			.take(max)
			.collect();
		let mut eligibility: Vec<(JobId, bool)> = Vec::new();
		for (job, unit) in Pool::<T>::get() {
			if found.len() >= max {
				break;
			}
			let eligible = match eligibility.iter().find(|(id, _)| *id == job) {
				Some((_, eligible)) => *eligible,
				None => {
					let eligible = Jobs::<T>::get(job)
						.is_some_and(|j: JobOf<T>| j.status == JobStatus::Active && Self::is_eligible(solver, &j));
					eligibility.push((job, eligible));
					eligible
				},
			};
			if !eligible {
				continue;
			}
			if let Some(work_unit) = Units::<T>::get(job, unit) {
				if work_unit.state.is_claimable() {
					found.push(SolverUnit { job, unit, work_unit, claimable: true });
				}
			}
		}
		found
	}

	/// A job and all its units. Backs the `TasksApi::job_state` runtime API.
	pub fn job_state(job: JobId) -> Option<JobState<T::AccountId, BalanceOf<T>, BlockNumberFor<T>>> {
		let info = Jobs::<T>::get(job)?;
		let units = (0..info.units).filter_map(|index| Units::<T>::get(job, index)).collect();
		Some(JobState { job: info, units })
	}
}

impl<T: Config> UnitProofs<T::AccountId, BlockNumberFor<T>, BalanceOf<T>> for Pallet<T> {
	fn proven_unit(job: JobId, unit: UnitIndex) -> Option<ProvenUnitOf<T>> {
		Self::proven_unit(job, unit)
	}

	fn proven_aggregate(job: JobId, unit: UnitIndex) -> Option<ProvenAggregateOf<T>> {
		Self::proven_aggregate(job, unit)
	}

	fn assignment(job: JobId, unit: UnitIndex) -> Option<(T::AccountId, BlockNumberFor<T>)> {
		Units::<T>::get(job, unit)
			.filter(|unit| unit.state == touchstone_primitives::UnitState::Assigned && unit.accepted)
			.and_then(|unit| unit.solver.zip(unit.deadline))
	}

	fn solves_in(job: JobId, who: &T::AccountId) -> bool {
		Units::<T>::iter_prefix_values(job).any(|unit| unit.solver.as_ref() == Some(who))
	}

	fn replacement(
		job: JobId,
		unit: UnitIndex,
		trace_root: [u8; 32],
		final_state: &touchstone_primitives::referee::BoundaryOpening,
	) -> Result<touchstone_primitives::LearningProof, DispatchError> {
		Self::replacement(job, unit, trace_root, final_state)
	}

	fn unit_collateral(job: JobId) -> Option<BalanceOf<T>> {
		Jobs::<T>::get(job).map(|job| Self::collateral(job.spec.price_per_unit))
	}

	fn replace_proof(job: JobId, unit: UnitIndex, proof: touchstone_primitives::LearningProof) -> DispatchResult {
		Self::replace_proof(job, unit, proof)
	}

	fn open_challenge(job: JobId, unit: UnitIndex) -> DispatchResult {
		Self::set_challenged(job, unit, true)
	}

	fn close_challenge(job: JobId, unit: UnitIndex) -> DispatchResult {
		Self::set_challenged(job, unit, false)
	}

	fn reject_proof(job: JobId, unit: UnitIndex) -> Result<Vec<UnitIndex>, DispatchError> {
		Self::overturn(job, unit)
	}

	fn tolerance_job(job: JobId) -> Option<touchstone_primitives::traits::ToleranceJob<T::AccountId>> {
		let info = Jobs::<T>::get(job)?;
		let ceiling = info.spec.verification.ceiling()?;
		Some(touchstone_primitives::traits::ToleranceJob { owner: info.owner, ceiling, profile: info.tolerance })
	}

	fn set_thresholds(job: JobId, thresholds: Option<touchstone_primitives::Distance>) -> DispatchResult {
		Jobs::<T>::try_mutate(job, |info| -> DispatchResult {
			let info = info.as_mut().ok_or(Error::<T>::JobNotFound)?;
			if thresholds.is_none() {
				info.tolerance.challenges = info.tolerance.challenges.saturating_add(1);
			}
			info.tolerance.thresholds = thresholds;
			Ok(())
		})
	}

	fn max_units_per_job() -> u32 {
		T::MaxUnitsPerJob::get()
	}

	fn overturn_weight(rolled_back: u32) -> polkadot_sdk::frame_support::weights::Weight {
		// The sweep's benchmarked time-out of a unit whose later ranges fail with it does the
		// same work per later range as a roll-back: a read and a write of the unit, the
		// solver's list and exposure, and an event.
		// Each unit's proof is dropped, and the proof lifecycle told of it. A round's shard
		// out of attempts also gives up its round's unstarted shards: at most a round's worth.
		let units = rolled_back.saturating_add(1);
		<T::WeightInfo as crate::WeightInfo>::time_out(units)
			.saturating_add(T::ProofLifecycle::on_proof_dropped_weight().saturating_mul(u64::from(units)))
			.saturating_add(Pallet::<T>::given_up_shards_weight(touchstone_primitives::MAX_ROUND_SHARDS))
	}
}

//! The runtime APIs workers and clients use to find work, read jobs and verify proofs.

use crate::{Job, JobId, UnitIndex, WorkUnit};
use alloc::vec::Vec;
use codec::{Codec, Decode, Encode};
use scale_info::TypeInfo;

/// A unit a solver can work on, as the runtime API reports it.
#[derive(Encode, Decode, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct SolverUnit<AccountId, BlockNumber> {
	/// The job.
	pub job: JobId,
	/// The unit's index in the job.
	pub unit: UnitIndex,
	/// The unit itself.
	pub work_unit: WorkUnit<AccountId, BlockNumber>,
	/// `true` for a pool unit the solver may claim; `false` for one assigned to it.
	pub claimable: bool,
}

/// A job with all of its units, as the runtime API reports it.
#[derive(Encode, Decode, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct JobState<AccountId, Balance, BlockNumber> {
	/// The job.
	pub job: Job<AccountId, Balance, BlockNumber>,
	/// Its units, by index.
	pub units: Vec<WorkUnit<AccountId, BlockNumber>>,
}

polkadot_sdk::sp_api::decl_runtime_apis! {
	/// What workers ask the chain: which units to work on, and where a job stands.
	pub trait TasksApi<AccountId, Balance, BlockNumber>
	where
		AccountId: Codec,
		Balance: Codec,
		BlockNumber: Codec,
	{
		/// Units assigned to `solver` that still need work from it, followed by pool units
		/// it is eligible to claim; at most `max` in all.
		fn units_for_solver(solver: AccountId, max: u32) -> Vec<SolverUnit<AccountId, BlockNumber>>;

		/// A job and its units, or `None` if no such job exists.
		fn job_state(job: JobId) -> Option<JobState<AccountId, Balance, BlockNumber>>;
	}

	/// What verifiers ask the chain.
	pub trait VerificationApi<AccountId>
	where
		AccountId: Codec,
	{
		/// The checkpoint segments `verifier` must re-execute for the unit's proof, from
		/// 0 (segment `i` starts after the unit's first step plus `i` checkpoint
		/// intervals), or `None` if it was not drawn for the unit's current round.
		fn samples(job: JobId, unit: UnitIndex, verifier: AccountId) -> Option<Vec<u32>>;
	}
}

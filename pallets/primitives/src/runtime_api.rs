//! The runtime APIs workers and clients use to find work, read jobs, verify proofs and
//! follow disputes.

use crate::referee::Level;
use crate::{ContentHash, Job, JobId, UnitIndex, VerificationMode, WorkUnit};
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

/// A proof open to challenge, as the runtime API reports it: the unit's standing proof,
/// undisputed, inside its challenge window.
#[derive(Encode, Decode, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct OpenProof<AccountId, BlockNumber> {
	/// The job.
	pub job: JobId,
	/// The unit.
	pub unit: UnitIndex,
	/// The solver that proved it.
	pub solver: AccountId,
	/// The proof's trace root, which a challenger disputes with its own.
	pub trace_root: ContentHash,
	/// How the job's proofs are verified: only exact-mode proofs can be disputed.
	pub verification: VerificationMode,
	/// The first block the unit can be finalized in, when the window closes.
	pub window_ends: BlockNumber,
	/// For a round's aggregate, the next global state root it commits: an aggregate is
	/// challenged at one chunk of the average (`disputes.challenge_aggregate`), not by
	/// re-executing segments, and its `trace_root` is the next outer momentum's root (zero
	/// for plain averaging). `None` for a trained unit.
	pub aggregate: Option<ContentHash>,
}

/// A job with all of its units, as the runtime API reports it.
#[derive(Encode, Decode, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct JobState<AccountId, Balance, BlockNumber> {
	/// The job.
	pub job: Job<AccountId, Balance, BlockNumber>,
	/// Its units, by index.
	pub units: Vec<WorkUnit<AccountId, BlockNumber>>,
}

/// The stage a dispute is in.
#[derive(Encode, Decode, TypeInfo, Clone, Copy, PartialEq, Eq, Debug)]
pub enum DisputeStage {
	/// A round of bisection at this level: both sides reveal their node's children.
	Bisect(Level),
	/// Both sides bind their step-level trace of the disputed segment to their boundaries.
	BindSegment,
	/// Both sides bind their operator root of the disputed step to their trace.
	BindStep,
	/// Both sides bind their piece root of the disputed operator to their operator root.
	BindOperator,
	/// The defender opens the disputed piece to the referee.
	Judge,
	/// The defender posts the demanded chunk of the state before global step `step`.
	Availability {
		/// The state's step.
		step: u32,
		/// The chunk.
		chunk: u32,
	},
}

/// Where an open dispute stands, as the runtime API reports it: the positions found so far,
/// the stage, and whose answer the chain is waiting for.
#[derive(Encode, Decode, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct DisputeStatus<AccountId, BlockNumber> {
	/// The job.
	pub job: JobId,
	/// The disputed unit.
	pub unit: UnitIndex,
	/// The solver whose proof is disputed.
	pub defender: AccountId,
	/// The challenger.
	pub challenger: AccountId,
	/// The stage it is in.
	pub stage: DisputeStage,
	/// The disputed segment of the unit's checkpoint grid, once the segment level ended.
	pub segment: Option<u32>,
	/// The disputed global step, once the step level ended.
	pub step: Option<u32>,
	/// The disputed operator, once the operator level ended.
	pub operator: Option<u32>,
	/// The disputed piece, once the piece level ended.
	pub piece: Option<u32>,
	/// Bisection rounds played so far, over all levels.
	pub rounds: u32,
	/// The last block the stage's answers are accepted in; after it, anyone may end the
	/// dispute against a side that still owes one.
	pub deadline: BlockNumber,
	/// Whether the defender still owes an answer in this stage.
	pub awaiting_defender: bool,
	/// Whether the challenger still owes an answer in this stage.
	pub awaiting_challenger: bool,
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

		/// The proofs open to challenge that were submitted at block `from` or later (or
		/// whose window opened again then), in block order. Reads one key prefix per block
		/// of the challenge window at most, so a light client asks for a few keys, not
		/// every unit.
		fn proofs_since(from: BlockNumber) -> Vec<OpenProof<AccountId, BlockNumber>>;
	}

	/// What verifiers ask the chain.
	pub trait VerificationApi<AccountId>
	where
		AccountId: Codec,
	{
		/// The checkpoint segments `verifier` must re-execute for the unit's proof, as
		/// indices from 0 into the unit's [`Segments`](crate::Segments) (segment 0 starts
		/// at the unit's first step, each later one at a checkpoint), or `None` if it was
		/// not drawn for the unit's current round.
		fn samples(job: JobId, unit: UnitIndex, verifier: AccountId) -> Option<Vec<u32>>;

		/// The units whose verification rounds `verifier` is drawn in, until each round is
		/// gone (its unit final or its proof void). Reads only the verifier's own keys, so a
		/// light client asks the network for a few keys, not every round.
		fn rounds_of(verifier: AccountId) -> Vec<(JobId, UnitIndex)>;

		/// The chance, in force now, that a unit's proof must carry a forced error: with a
		/// solver's secret and the randomness recorded after it, it decides whether the
		/// unit is forced ([`forced_error`](crate::forced_error)). Zero when forced errors
		/// are off, and solvers owe no secret.
		fn forced_error_rate() -> polkadot_sdk::sp_runtime::Perbill;
	}

	/// What challengers, defenders and their clients ask the chain about disputes.
	pub trait DisputesApi<AccountId, BlockNumber>
	where
		AccountId: Codec,
		BlockNumber: Codec,
	{
		/// Where dispute `id` stands, or `None` if no dispute with that id is open.
		fn dispute(id: u64) -> Option<DisputeStatus<AccountId, BlockNumber>>;

		/// The ids of the disputes open over unit `unit` of `job`.
		fn unit_disputes(job: JobId, unit: UnitIndex) -> Vec<u64>;

		/// The ids of the open disputes `account` is a side of, as challenger or defender
		/// (summonses included). Reads only the account's own keys.
		fn disputes_of(account: AccountId) -> Vec<u64>;
	}
}

//! # Touchstone tasks
//!
//! Training jobs and their work units. A submitter posts a [`JobSpec`]; its full budget is
//! held in escrow and the job is cut into work units (step ranges or data shards). Each
//! unit runs its own state machine:
//!
//! `Waiting → Pending → Assigned → Proven → (Verifying | Challenged) → Finalized | Failed`,
//! with `Reassigned` when its solver makes no progress by the deadline, and `Cancelled`
//! when the submitter cancels before the unit started.
//!
//! Every block, a bounded sweep handles what fell due: offers that lapsed go back to the
//! pool, units whose solver made no progress are reassigned (or fail once out of
//! attempts), units nobody took within the job's `pool_timeout` expire and are refunded,
//! and jobs finished `Retention` blocks ago are removed with their units, returning the
//! submitter's storage deposit. Then a bounded number of pool units are offered to the
//! best-scoring eligible solver whose minimum price the unit meets and whose bond covers
//! the collateral of its units. Solvers may also claim pool units themselves, or decline
//! an offer at no cost. A solver accepts its unit, commits checkpoints as it trains, and
//! commits a learning proof; once the challenge window has passed (and the verification
//! pallets, through [`ProofLifecycle`], do not object) anyone may finalize the unit, which
//! pays the solver from escrow. When every unit is final the job's result is aggregated,
//! recorded and announced, and the unused budget is refunded.
//!
//! The pallet sees compute nodes only through [`ComputeNodes`], and the staking pallet
//! sees this pallet only through [`ActiveWork`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub use pallet::*;
pub use weights::WeightInfo;

mod functions;
mod impls;
pub mod weights;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

use polkadot_sdk::{frame_support, frame_system};

/// The balance type of the pallet's currency.
pub type BalanceOf<T> = <<T as Config>::Currency as frame_support::traits::fungible::Inspect<
	<T as frame_system::Config>::AccountId,
>>::Balance;

/// A unit's key: its job and its index in the job.
pub type UnitKey = (touchstone_primitives::JobId, touchstone_primitives::UnitIndex);

/// A job as stored.
pub type JobOf<T> = touchstone_primitives::Job<
	<T as frame_system::Config>::AccountId,
	BalanceOf<T>,
	frame_system::pallet_prelude::BlockNumberFor<T>,
>;

/// A work unit as stored.
pub type WorkUnitOf<T> = touchstone_primitives::WorkUnit<
	<T as frame_system::Config>::AccountId,
	frame_system::pallet_prelude::BlockNumberFor<T>,
>;

/// A unit with a standing proof, as the disputes pallet sees it.
pub type ProvenUnitOf<T> = touchstone_primitives::traits::ProvenUnit<
	<T as frame_system::Config>::AccountId,
	frame_system::pallet_prelude::BlockNumberFor<T>,
	BalanceOf<T>,
>;
/// A round's aggregate as a challenge of it sees it, in this runtime's types.
pub type ProvenAggregateOf<T> = touchstone_primitives::traits::ProvenAggregate<
	<T as frame_system::Config>::AccountId,
	frame_system::pallet_prelude::BlockNumberFor<T>,
	BalanceOf<T>,
>;

/// What falls due at a block: the sweep in `on_initialize` handles each entry once.
#[derive(
	codec::Encode, codec::Decode, codec::DecodeWithMemTracking, codec::MaxEncodedLen, scale_info::TypeInfo,
	Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug,
)]
pub enum Due {
	/// A unit's deadline: an offer to accept, progress to make, or a wait in the pool.
	Unit(UnitKey),
	/// A finished job's retention ends: its records are removed.
	Removal(touchstone_primitives::JobId),
}

/// Sets up what the benchmarks need from other pallets.
#[cfg(feature = "runtime-benchmarks")]
pub trait BenchmarkHelper<AccountId> {
	/// Registers `who` as an online, bonded solver with `profile`, funding it as needed.
	fn register_solver(who: &AccountId, profile: touchstone_primitives::HardwareProfile);
	/// Registers `who` as a solver whose hardware meets no job the benchmarks submit.
	fn register_unfit_solver(who: &AccountId);
	/// Readies what the runtime's proof lifecycle asks of `solver` before it proves `unit`
	/// (a forced-error secret committed and its randomness recorded, say).
	fn ready_proof(_job: touchstone_primitives::JobId, _unit: touchstone_primitives::UnitIndex, _solver: &AccountId) {}
	/// Readies what the runtime's proof lifecycle asks before a proven `unit` is finalized,
	/// past its challenge window (its verification round concluded, say).
	fn ready_finalize(_job: touchstone_primitives::JobId, _unit: touchstone_primitives::UnitIndex) {}
}

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use frame_support::{
		pallet_prelude::*,
		traits::fungible::{Inspect, Mutate, MutateHold},
	};
	use polkadot_sdk::sp_runtime::Perbill;
	use frame_system::pallet_prelude::*;
	use touchstone_primitives::{
		traits::{ComputeNodes, ProofLifecycle},
		Checkpoint, ContentHash, JobId, JobResult, JobSpec, LearningProof, UnitIndex, MAX_ROUND_SHARDS,
	};

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(2);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	#[pallet::config(with_default)]
	pub trait Config: polkadot_sdk::frame_system::Config {
		/// The currency budgets are escrowed and paid in.
		#[pallet::no_default]
		type Currency: Inspect<Self::AccountId>
			+ Mutate<Self::AccountId>
			+ MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>;

		/// The overarching hold reason.
		#[pallet::no_default]
		type RuntimeHoldReason: From<HoldReason>;

		/// The compute-node registry: eligibility, profiles, prices, bonds, scores and
		/// reputation.
		#[pallet::no_default]
		type Nodes: ComputeNodes<Self::AccountId, BalanceOf<Self>>;

		/// The verification and disputes pallets' view of proofs.
		#[pallet::no_default]
		type ProofLifecycle: ProofLifecycle<Self::AccountId>;

		/// Most work units one job may be cut into.
		#[pallet::constant]
		type MaxUnitsPerJob: Get<u32>;

		/// Most units that may be open (not final) across all jobs. Bounds the pool.
		#[pallet::constant]
		type MaxOpenUnits: Get<u32>;

		/// Most units one solver may hold at once.
		#[pallet::constant]
		type MaxUnitsPerSolver: Get<u32>;

		/// Most pool units the scheduler considers per block.
		#[pallet::constant]
		type MaxAssignmentsPerBlock: Get<u32>;

		/// Most entries (deadlines and removals) the sweep handles per block.
		#[pallet::constant]
		type MaxTimeoutsPerBlock: Get<u32>;

		/// The least a unit may pay. With the deposit, it prices the pool's bounded room.
		#[pallet::constant]
		#[pallet::no_default]
		type MinPricePerUnit: Get<BalanceOf<Self>>;

		/// The storage deposit of a job, held from its owner until its records are removed.
		#[pallet::constant]
		#[pallet::no_default]
		type JobDepositBase: Get<BalanceOf<Self>>;

		/// The storage deposit per unit of a job, on top of the base.
		#[pallet::constant]
		#[pallet::no_default]
		type JobDepositPerUnit: Get<BalanceOf<Self>>;

		/// The fee a unit pays to enter a half-full pool. A unit entering a pool with `o`
		/// of its `MaxOpenUnits` slots open pays `CongestionFee × o / (MaxOpenUnits − o)`:
		/// nothing in an empty pool, this at half, and ever more toward the last slot. It
		/// goes to the jackpot and is never refunded, so filling the pool to shut others
		/// out costs what no refund returns (`docs/protocol.md`, "Attacks considered", 8).
		#[pallet::constant]
		#[pallet::no_default]
		type CongestionFee: Get<BalanceOf<Self>>;

		/// The longest `pool_timeout` a job may ask for.
		#[pallet::constant]
		type MaxPoolWait: Get<u32>;

		/// A unit's collateral, in percent of its price: what its solver's bond must cover
		/// while it holds the unit (beside the staking pallet's minimum bond), and the least
		/// its solver is slashed when the unit's proof is shown wrong. Above 100 so that a
		/// lie costs more than it pays; the runtime sets it so that lying loses in
		/// expectation against the draw's chance of sampling the lie at
		/// `MaxSegmentsPerUnit` segments (`docs/protocol.md`, "Attacks considered", 7).
		#[pallet::constant]
		type CollateralPercent: Get<u32>;

		/// The most checkpoint segments a unit may have. The draw's chance of sampling a
		/// segment falls as units have more of them, so this bounds how far below one it
		/// can fall, and with it the collateral a lie must risk.
		#[pallet::constant]
		type MaxSegmentsPerUnit: Get<u32>;

		/// Multiply-adds of training a verifier or a disputing party is expected to
		/// re-execute per block on the CPU reference, the backend every exact-mode job is
		/// judged by. A unit's `segment_blocks` (what verification rounds and dispute phases
		/// add to their floors) is a checkpoint segment's steps, each
		/// `touchstone_primitives::step_multiply_adds` of the job's model, at this rate. Set
		/// it below what a modest machine does, so that honest parties are never late.
		#[pallet::constant]
		type ReferenceWorkPerBlock: Get<u64>;

		/// The most blocks one checkpoint segment of a job may take to re-execute at
		/// `ReferenceWorkPerBlock`; longer segments are refused (`SegmentTooLong`). It bounds
		/// how long a round or a dispute can last, which the unbonding period must outlast.
		#[pallet::constant]
		type MaxSegmentBlocks: Get<u32>;

		/// The share of each unit's price that settlement sends to the jackpot instead of
		/// the solver. It funds the forced-error rewards, and it makes reputation, which
		/// counts the value of completed units, cost something to farm with self-dealt jobs.
		#[pallet::constant]
		type JackpotShare: Get<Perbill>;

		/// The share of each unit's price paid to the verifiers that attested its proof,
		/// split equally. With no attesting verifier it goes to the solver.
		#[pallet::constant]
		type VerifierShare: Get<Perbill>;

		/// The jackpot's account.
		#[pallet::no_default]
		type Jackpot: Get<Self::AccountId>;

		/// Blocks a finished job's records stay in storage before they are removed.
		#[pallet::constant]
		#[pallet::no_default]
		type Retention: Get<BlockNumberFor<Self>>;

		/// Blocks an assigned solver has to accept its unit.
		#[pallet::constant]
		#[pallet::no_default]
		type AcceptanceTimeout: Get<BlockNumberFor<Self>>;

		/// The shortest `unit_timeout` a job may ask for, beyond one checkpoint segment's
		/// training at `ReferenceWorkPerBlock` (a deadline moves on with each checkpoint).
		#[pallet::constant]
		type MinUnitTimeout: Get<u32>;

		/// Blocks after a proof during which it can be challenged.
		#[pallet::constant]
		#[pallet::no_default]
		type ChallengeWindow: Get<BlockNumberFor<Self>>;

		/// How many times a proof's challenge window opens again in full after every
		/// dispute over it failed. Reopening keeps sybils that fill the dispute slots with
		/// hopeless challenges from running the window out on honest challengers; the bound
		/// keeps lost challenges from delaying an honest unit's pay for ever: at most
		/// `(MaxWindowReopenings + 1)` windows and the disputes opened inside them.
		#[pallet::constant]
		type MaxWindowReopenings: Get<u32>;

		/// Solvers that may take a unit (accept or claim it) before it fails for good.
		#[pallet::constant]
		type MaxAttempts: Get<u32>;

		/// Weights of this pallet's calls and hooks, from its benchmarks.
		type WeightInfo: WeightInfo;

		/// Sets up other pallets for the benchmarks.
		#[pallet::no_default]
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: BenchmarkHelper<Self::AccountId>;
	}

	/// Defaults for the `Config` items that have them, for test runtimes to
	/// `derive_impl` from.
	pub mod config_preludes {
		use super::*;
		use frame_support::derive_impl;

		frame_support::parameter_types! {
			/// A tenth of each unit's price funds the jackpot.
			pub const TenthToJackpot: Perbill = Perbill::from_percent(10);
			/// A tenth of each unit's price pays its verifiers.
			pub const TenthToVerifiers: Perbill = Perbill::from_percent(10);
		}

		/// Small bounds for test runtimes.
		pub struct TestDefaultConfig;

		#[derive_impl(frame_system::config_preludes::TestDefaultConfig, no_aggregated_types)]
		impl frame_system::DefaultConfig for TestDefaultConfig {}

		#[frame_support::register_default_impl(TestDefaultConfig)]
		impl DefaultConfig for TestDefaultConfig {
			type MaxUnitsPerJob = ConstU32<8>;
			type MaxOpenUnits = ConstU32<10>;
			type MaxUnitsPerSolver = ConstU32<2>;
			type MaxAssignmentsPerBlock = ConstU32<4>;
			type MaxTimeoutsPerBlock = ConstU32<8>;
			type MaxPoolWait = ConstU32<50>;
			type CollateralPercent = ConstU32<300>;
			type MaxSegmentsPerUnit = ConstU32<1024>;
			type ReferenceWorkPerBlock = frame_support::traits::ConstU64<1_000_000>;
			type MaxSegmentBlocks = ConstU32<1_000>;
			type JackpotShare = TenthToJackpot;
			type VerifierShare = TenthToVerifiers;
			type MinUnitTimeout = ConstU32<2>;
			type MaxAttempts = ConstU32<2>;
			type MaxWindowReopenings = ConstU32<3>;
			type WeightInfo = ();
		}
	}

	/// Why this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A job's budget, held from submission until it is paid out or refunded.
		JobEscrow,
		/// A job's storage deposit, held until its records are removed.
		JobDeposit,
	}

	/// The id the next job gets.
	#[pallet::storage]
	pub type NextJobId<T> = StorageValue<_, JobId, ValueQuery>;

	/// Jobs by id.
	#[pallet::storage]
	pub type Jobs<T: Config> = StorageMap<_, Twox64Concat, JobId, JobOf<T>>;

	/// Work units by job and index.
	#[pallet::storage]
	pub type Units<T: Config> =
		StorageDoubleMap<_, Twox64Concat, JobId, Twox64Concat, UnitIndex, WorkUnitOf<T>>;

	/// How many times the challenge window of a unit's proof opened again, with that
	/// proof's trace root (a count for an earlier proof of the unit does not apply). Goes
	/// with the job's records.
	#[pallet::storage]
	pub type WindowReopenings<T: Config> =
		StorageDoubleMap<_, Twox64Concat, JobId, Twox64Concat, UnitIndex, (ContentHash, u32)>;

	/// The pool: units ready for assignment or a claim, oldest first.
	#[pallet::storage]
	pub type Pool<T: Config> = StorageValue<_, BoundedVec<UnitKey, T::MaxOpenUnits>, ValueQuery>;

	/// Units that are not final, across all jobs. A job is admitted only if its units fit
	/// under `MaxOpenUnits`, so the pool can never overflow.
	#[pallet::storage]
	pub type OpenUnits<T> = StorageValue<_, u32, ValueQuery>;

	/// The value (price) of the units each solver holds; its bond must cover
	/// `CollateralPercent` of it.
	#[pallet::storage]
	pub type SolverExposure<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, BalanceOf<T>, ValueQuery>;

	/// The units each solver holds (assigned or proven, not yet final).
	#[pallet::storage]
	pub type SolverUnits<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		T::AccountId,
		BoundedVec<UnitKey, T::MaxUnitsPerSolver>,
		ValueQuery,
	>;

	/// What falls due, by block: unit deadlines (the last block an offer may be accepted,
	/// progress made, or a unit wait in the pool) and job removals. Never behind the cursor.
	#[pallet::storage]
	pub type Deadlines<T: Config> =
		StorageDoubleMap<_, Twox64Concat, BlockNumberFor<T>, Twox64Concat, Due, ()>;

	/// The units with a proof that can still be disputed (`Proven` or `Challenged`), by the
	/// block the proof was submitted at (or its challenge window opened again at): a
	/// challenger, on a light client too, finds the proofs open to it by reading a few
	/// blocks' keys ([`Pallet::proofs_since`]), never every unit.
	#[pallet::storage]
	pub type ProvenAt<T: Config> =
		StorageDoubleMap<_, Twox64Concat, BlockNumberFor<T>, Twox64Concat, UnitKey, ()>;

	/// The earliest deadline block the sweep has not finished.
	#[pallet::storage]
	pub type DeadlineCursor<T: Config> = StorageValue<_, BlockNumberFor<T>, ValueQuery>;

	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A job was submitted and its budget escrowed.
		JobSubmitted {
			/// The new job.
			job: JobId,
			/// Who submitted it.
			owner: T::AccountId,
			/// Number of work units it was cut into.
			units: u32,
			/// The budget now held in escrow.
			escrow: BalanceOf<T>,
			/// The congestion fee it paid to the jackpot (not refunded).
			congestion_fee: BalanceOf<T>,
		},
		/// A unit was offered to a solver, who must accept it: by the scheduler, or, for a
		/// step range, to the solver that proved the range before it.
		UnitAssigned {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// The last block the solver may accept in.
			deadline: BlockNumberFor<T>,
		},
		/// A solver claimed a unit from the pool.
		UnitClaimed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// The last block of progress before the unit times out.
			deadline: BlockNumberFor<T>,
		},
		/// A solver declined the unit it was offered; it went back to the pool.
		UnitDeclined {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
		},
		/// A solver let the offer of a unit lapse; it went back to the pool. Costs the
		/// solver nothing, and does not count as an attempt.
		OfferLapsed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
		},
		/// Nobody took a unit within the job's `pool_timeout`; it failed and was refunded.
		UnitExpired {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A solver accepted its assigned unit.
		UnitAccepted {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// The last block of progress before the unit times out.
			deadline: BlockNumberFor<T>,
		},
		/// A solver committed a checkpoint.
		CheckpointCommitted {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The checkpoint.
			checkpoint: Checkpoint,
		},
		/// A solver committed the learning proof of a unit; its challenge window opens.
		ProofSubmitted {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// The commitment.
			proof: LearningProof,
			/// The first block the unit can be finalized in.
			window_ends: BlockNumberFor<T>,
		},
		/// A unit became ready once the step range before it was proven.
		UnitReady {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A unit survived its windows and its solver was paid.
		UnitFinalized {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver paid.
			solver: T::AccountId,
			/// What the solver was paid: the price less the jackpot's and verifiers' shares.
			paid: BalanceOf<T>,
			/// The jackpot's share of the price.
			to_jackpot: BalanceOf<T>,
			/// What the verifiers that attested the proof were paid, in all.
			to_verifiers: BalanceOf<T>,
		},
		/// A solver made no progress by its deadline; the unit went back to the pool and
		/// resumes from its last checkpoint.
		UnitTimedOut {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver that timed out.
			solver: T::AccountId,
			/// Where the next solver resumes.
			resume_from: Option<Checkpoint>,
		},
		/// A unit failed for good and its price was refunded.
		UnitFailed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// What was refunded to the submitter.
			refunded: BalanceOf<T>,
		},
		/// The submitter cancelled a job; units not yet started were refunded.
		JobCancelled {
			/// The job.
			job: JobId,
			/// Units cancelled.
			units_cancelled: u32,
			/// What was refunded to the submitter.
			refunded: BalanceOf<T>,
		},
		/// Every unit of a job is final; its result is recorded. A cancelled job stays
		/// `Cancelled`, with the result of the units that ran.
		JobCompleted {
			/// The job.
			job: JobId,
			/// The aggregated result.
			result: JobResult,
			/// Unused budget refunded to the submitter.
			refunded: BalanceOf<T>,
			/// The block from which the job's records are removed.
			removable_at: BlockNumberFor<T>,
		},
		/// A dispute overturned a unit's proof: the unit goes back to the pool from its
		/// start (or fails once out of attempts), and the later step ranges that started
		/// from its model wait again.
		ProofRejected {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver whose proof was overturned.
			solver: T::AccountId,
			/// Later step ranges rolled back to `Waiting`.
			rolled_back: u32,
		},
		/// A finished job's retention ended: its records and units were removed and its
		/// storage deposit returned. Its events remain for clients.
		JobRemoved {
			/// The job.
			job: JobId,
			/// The deposit returned to the submitter.
			deposit: BalanceOf<T>,
		},
	}

	#[pallet::error]
	pub enum Error<T> {
		/// The job asks for zero training steps.
		ZeroSteps,
		/// The job asks for a batch size of zero.
		ZeroBatchSize,
		/// The checkpoint interval is zero.
		ZeroCheckpointInterval,
		/// The model configuration has a zero dimension, too few classes, convolutions that
		/// shrink the input to nothing, a transformer outside the kernels' bounds, or a shape
		/// the kernels cannot build a training step from (a tensor of more than 2³² − 1
		/// elements, invalid optimizer settings).
		InvalidModel,
		/// A transformer job names an optimizer other than AdamW, the only one a transformer
		/// trains with.
		TransformerNeedsAdamW,
		/// The model has more classes than the referee's bound (1,024).
		TooManyClasses,
		/// The dataset has no samples.
		EmptyDataset,
		/// The dataset has more samples than `MAX_DATASET_SAMPLES` (4,194,304), or more
		/// words (samples × features) than the chain and the referee address in 32 bits.
		DatasetTooLarge,
		/// Judging one piece of a disputed step of this job would cost the referee more
		/// than the chain's bound (`MAX_PIECE_COST`).
		DisputeTooCostly,
		/// A batch is larger than the data a unit trains on.
		BatchLargerThanData,
		/// Zero steps per unit, zero shards, or more shards than samples.
		InvalidDecomposition,
		/// The job would have more units than `MaxUnitsPerJob`.
		TooManyUnits,
		/// The chain has `MaxOpenUnits` open units already; try again later.
		TooManyOpenUnits,
		/// The price per unit is below the runtime's `MinPricePerUnit`.
		PriceBelowMinimum,
		/// The budget does not cover the price of every unit.
		BudgetBelowCost,
		/// Price times units overflows the balance type.
		CostOverflow,
		/// The unit timeout is shorter than `MinUnitTimeout` plus one checkpoint segment's
		/// training at `ReferenceWorkPerBlock`: an honest solver could not reach its next
		/// checkpoint in time.
		UnitTimeoutTooShort,
		/// The pool timeout is shorter than `MinUnitTimeout` or longer than `MaxPoolWait`.
		PoolTimeoutOutOfRange,
		/// No bonded solver's hardware meets the requirements at the job's price.
		UnsatisfiableRequirements,
		/// The submitter cannot cover the budget and the storage deposit.
		InsufficientBalance,
		/// No job has this id.
		JobNotFound,
		/// The job has no unit with this index.
		UnitNotFound,
		/// Only the job's submitter may do this.
		NotJobOwner,
		/// The job is cancelled or completed.
		JobNotActive,
		/// The unit is not in the pool.
		UnitNotClaimable,
		/// The caller is not a bonded, online solver whose hardware meets the job's needs
		/// and whose minimum price the job meets.
		NotEligible,
		/// The caller's solver bond does not cover the collateral of its units with this one.
		InsufficientCollateral,
		/// The solver holds `MaxUnitsPerSolver` units already.
		SolverAtCapacity,
		/// The unit is not assigned to the caller.
		NotAssignedSolver,
		/// The unit was accepted already.
		AlreadyAccepted,
		/// The unit's deadline has passed; the sweep will return it to the pool.
		DeadlinePassed,
		/// The solver has not accepted the unit yet.
		NotAccepted,
		/// The checkpoint's step lies outside the unit's steps.
		CheckpointOutOfRange,
		/// The checkpoint's step is not after the last committed one.
		CheckpointNotAdvancing,
		/// The checkpoint's step is neither a multiple of the job's checkpoint interval nor
		/// the unit's last step.
		CheckpointMisaligned,
		/// The proof covers a different number of steps than the unit.
		StepCountMismatch,
		/// The unit has no proof awaiting finalization.
		UnitNotProven,
		/// The unit's challenge window is still open.
		ChallengeWindowOpen,
		/// Verification or a dispute holds the unit back.
		FinalizationBlocked,
		/// The proof's start state root is not the unit's: the job's initial state root, or
		/// the previous step range's proven final state root.
		WrongStartState,
		/// The final-state opening does not prove the proof's final state root against its
		/// trace root.
		InvalidFinalState,
		/// The step range before this one is not finalized yet.
		PredecessorNotFinal,
		/// The unit has no standing proof (`Proven` or `Challenged`), or is not in the state
		/// the dispute step needs.
		NotDisputable,
		/// The trace offered to replace a proof that carried a forced error is the standing
		/// proof's own: the forced proof carried no error.
		NotAReplacement,
		/// A unit of the job would have more checkpoint segments than `MaxSegmentsPerUnit`:
		/// raise `checkpoint_interval`, or make the units shorter.
		TooManySegments,
		/// A checkpoint segment of the job would take more than `MaxSegmentBlocks` to
		/// re-execute at `ReferenceWorkPerBlock`: lower `checkpoint_interval` or the batch.
		SegmentTooLong,
		/// The proof came with a forced-error secret for the next step range, and no step
		/// range waits for this unit's final model: the unit is a job's last range, or its
		/// job is not cut into step ranges. Send the proof without `next_secret`.
		NoNextRange,
		/// A rounds job's `rounds × local_steps` is not its `steps`.
		RoundsDoNotCoverSteps,
		/// A rounds job's outer step is not one the kernels take: the Nesterov learning
		/// rate must be positive and the momentum below one.
		InvalidOuterOptimizer,
		/// The unit is not a round's aggregate: send its learning proof with `submit_proof`.
		NotAnAggregate,
		/// The unit is a round's aggregate, which trains no steps: send it with
		/// `submit_aggregate`.
		NotATrainingUnit,
		/// The aggregate came with an outer momentum root and the job averages plainly, or
		/// without one and the job's outer step is Nesterov's.
		MomentumMismatch,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(now: BlockNumberFor<T>) -> Weight {
			let swept = Self::sweep_deadlines(now);
			let (considered, scanned) = Self::schedule(now);
			swept.saturating_add(T::WeightInfo::schedule(considered, scanned))
		}

		fn integrity_test() {
			assert!(T::MaxUnitsPerJob::get() > 0, "MaxUnitsPerJob must be positive");
			assert!(
				T::MaxOpenUnits::get() >= T::MaxUnitsPerJob::get(),
				"a job with MaxUnitsPerJob units must fit under MaxOpenUnits"
			);
			assert!(T::MaxAttempts::get() > 0, "MaxAttempts must be positive");
			assert!(T::MaxTimeoutsPerBlock::get() > 1, "the timeout sweep must outpace the chain");
			assert!(T::MinUnitTimeout::get() > 0, "MinUnitTimeout must be positive");
			assert!(T::MaxPoolWait::get() >= T::MinUnitTimeout::get(), "MaxPoolWait must admit MinUnitTimeout");
			assert!(!T::MinPricePerUnit::get().is_zero(), "MinPricePerUnit must be positive");
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Submit a training job. The full budget is held in escrow, a storage deposit is
		/// held until the job's records are removed, and the job is cut into work units.
		/// The spec must pass the kernels' own validation, so the referee can judge any
		/// dispute over it. An invalid spec is rejected with a named error and changes
		/// nothing.
		///
		/// Emits `JobSubmitted`.
		#[pallet::call_index(0)]
		#[pallet::weight(Pallet::<T>::submit_job_weight(T::MaxUnitsPerJob::get(), T::Nodes::max_nodes())
			.saturating_add(Pallet::<T>::model_validation_weight(&spec.model)))]
		pub fn submit_job(
			origin: OriginFor<T>,
			spec: JobSpec<BalanceOf<T>>,
		) -> DispatchResultWithPostInfo {
			let owner = ensure_signed(origin)?;
			let validation = Self::model_validation_weight(&spec.model);
			let units = Self::do_submit_job(owner, spec)?;
			Ok(Some(Self::submit_job_weight(units, T::Nodes::node_count()).saturating_add(validation)).into())
		}

		/// Cancel a job. Units not yet started (waiting, in the pool, or assigned but not
		/// accepted) are cancelled and their price refunded; started units run on.
		///
		/// Emits `JobCancelled`, and `JobCompleted` if no unit remains open.
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::cancel_job(T::MaxUnitsPerJob::get()))]
		pub fn cancel_job(origin: OriginFor<T>, job: JobId) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let units = Self::do_cancel_job(who, job)?;
			Ok(Some(T::WeightInfo::cancel_job(units)).into())
		}

		/// Claim a unit from the open pool. The caller must be a bonded, online solver whose
		/// hardware meets the job's requirements. A claim is also an acceptance.
		///
		/// Emits `UnitClaimed`.
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::claim_unit())]
		pub fn claim_unit(origin: OriginFor<T>, job: JobId, unit: UnitIndex) -> DispatchResult {
			let solver = ensure_signed(origin)?;
			Self::do_claim_unit(solver, job, unit)
		}

		/// Accept a unit the scheduler offered the caller. Its deadline must not have passed.
		///
		/// Emits `UnitAccepted`.
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::accept_unit())]
		pub fn accept_unit(origin: OriginFor<T>, job: JobId, unit: UnitIndex) -> DispatchResult {
			let solver = ensure_signed(origin)?;
			Self::do_accept_unit(solver, job, unit)
		}

		/// Commit the hash of a checkpoint taken after `checkpoint.step`. Progress extends
		/// the unit's deadline, and a unit reassigned later resumes from here.
		///
		/// Emits `CheckpointCommitted`.
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::commit_checkpoint())]
		pub fn commit_checkpoint(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			checkpoint: Checkpoint,
		) -> DispatchResult {
			let solver = ensure_signed(origin)?;
			Self::do_commit_checkpoint(solver, job, unit, checkpoint)
		}

		/// Commit the learning proof of a unit: its segment root (the Merkle root over one
		/// boundary leaf per segment of the job's checkpoint grid), the state roots it starts
		/// and ends at, and its metrics. `final_state` opens the last boundary, which proves
		/// the final state root; the start state root must be the unit's. The challenge
		/// window opens.
		///
		/// The next step range is offered to the caller at once, if it may take it
		/// (eligible, with room and collateral for it). A solver that has trained that range
		/// already (from this proof's final state) passes its forced-error secret's
		/// commitment for it as `next_secret`: the offer is then taken in the same call, and
		/// the secret committed as `verification.commitSecret` would, so the range's
		/// randomness starts with this block rather than two blocks later. If the caller may
		/// not take the range, the proof stands, the secret is not recorded, and the range
		/// goes to the pool. A unit that no step range follows refuses `next_secret`
		/// (`NoNextRange`). An offer accepted here is the caller's like any: letting it time
		/// out after its randomness costs its collateral. A `next_secret` that took nothing
		/// is refunded: the call then weighs what a proof without one does.
		///
		/// Emits `ProofSubmitted`, and `UnitReady` for the next step range, with
		/// `UnitAssigned` when that range is offered to the caller, and then
		/// `UnitAccepted` and the verification pallet's `SecretCommitted` if it took it.
		#[pallet::call_index(5)]
		#[pallet::weight(Pallet::<T>::submit_proof_weight(next_secret.is_some(), MAX_ROUND_SHARDS))]
		pub fn submit_proof(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			proof: LearningProof,
			final_state: touchstone_primitives::referee::BoundaryOpening,
			next_secret: Option<polkadot_sdk::sp_core::H256>,
		) -> DispatchResultWithPostInfo {
			let solver = ensure_signed(origin)?;
			let (took_next, round_read) =
				Self::do_submit_proof(solver, job, unit, proof, final_state, next_secret.map(|hash| hash.0))?;
			// A secret for a range the caller could not take was dropped: the taking and the
			// commitment it did not do are refunded, as are the round's reads not made.
			Ok(Some(Self::submit_proof_weight(took_next, round_read)).into())
		}

		/// Finalize a proven unit whose challenge window has passed, paying its solver from
		/// escrow. Anyone may call it.
		///
		/// Emits `UnitFinalized`, and `JobCompleted` when it was the job's last open unit.
		#[pallet::call_index(6)]
		#[pallet::weight(
			T::WeightInfo::finalize_unit(T::MaxUnitsPerJob::get()).saturating_add(T::ProofLifecycle::on_finalized_weight())
		)]
		pub fn finalize_unit(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
		) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			let aggregated = Self::do_finalize_unit(job, unit)?;
			Ok(Some(T::WeightInfo::finalize_unit(aggregated).saturating_add(T::ProofLifecycle::on_finalized_weight())).into())
		}

		/// Commit the aggregate of a round of a rounds job, as the solver that holds the
		/// round's aggregate unit: `state_root` is the root of the next global state (the
		/// weighted average of the round's proven shard end states after the outer step,
		/// `touchstone_kernels::ops::aggregate`), `momentum_root` that of the next outer
		/// momentum, given exactly when the job's outer step is Nesterov's. Its challenge
		/// window opens, and the next round's shards become ready to start from it.
		///
		/// Emits `ProofSubmitted` (an aggregate's proof has no steps, and its `trace_root`
		/// is the momentum root, or zeros) and `UnitReady` for each of the next round's
		/// shards.
		#[pallet::call_index(8)]
		#[pallet::weight(T::WeightInfo::submit_aggregate(MAX_ROUND_SHARDS))]
		pub fn submit_aggregate(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			state_root: polkadot_sdk::sp_core::H256,
			momentum_root: Option<polkadot_sdk::sp_core::H256>,
		) -> DispatchResultWithPostInfo {
			let solver = ensure_signed(origin)?;
			let readied = Self::do_submit_aggregate(solver, job, unit, state_root, momentum_root)?;
			Ok(Some(T::WeightInfo::submit_aggregate(readied)).into())
		}

		/// Decline a unit the scheduler offered the caller. The unit goes back to the pool
		/// and is offered to others first; declining costs nothing and is not an attempt.
		///
		/// Emits `UnitDeclined`.
		#[pallet::call_index(7)]
		#[pallet::weight(T::WeightInfo::decline_unit())]
		pub fn decline_unit(origin: OriginFor<T>, job: JobId, unit: UnitIndex) -> DispatchResult {
			let solver = ensure_signed(origin)?;
			Self::do_decline_unit(solver, job, unit)
		}
	}
}

/// Storage migrations of the tasks pallet.
pub mod migrations {
	use super::*;
	use codec::{Decode, Encode};
	use frame_support::{
		traits::{Get, GetStorageVersion, OnRuntimeUpgrade, StorageVersion},
		weights::Weight,
	};
	use touchstone_primitives::{
		previous::LearningProofV0, Checkpoint, ContentHash, Job, JobResult, JobSpec, JobStatus, ToleranceProfile,
		TrainingMetrics, UnitScope, UnitState, WorkUnit,
	};

	/// A work unit as version 0 stored it.
	#[derive(Encode, Decode)]
	struct WorkUnitV0<AccountId, BlockNumber> {
		scope: UnitScope,
		state: UnitState,
		solver: Option<AccountId>,
		accepted: bool,
		deadline: Option<BlockNumber>,
		pool_deadline: Option<BlockNumber>,
		passed_by: Option<AccountId>,
		start_model_hash: Option<ContentHash>,
		start_state_root: Option<ContentHash>,
		last_checkpoint: Option<Checkpoint>,
		proof: Option<LearningProofV0>,
		proven_at: Option<BlockNumber>,
		attempts: u32,
	}

	/// A job's result as version 0 stored it.
	#[derive(Encode, Decode)]
	struct JobResultV0 {
		model_hash: ContentHash,
		state_root: ContentHash,
		metrics: TrainingMetrics,
		units_finalized: u32,
		units_failed: u32,
	}

	/// A job as version 0 stored it.
	#[derive(Encode, Decode)]
	struct JobV0<AccountId, Balance, BlockNumber> {
		owner: AccountId,
		spec: JobSpec<Balance>,
		status: JobStatus,
		units: u32,
		units_final: u32,
		escrow: Balance,
		deposit: Balance,
		submitted_at: BlockNumber,
		result: Option<JobResultV0>,
		removable_at: Option<BlockNumber>,
		tolerance: ToleranceProfile,
	}

	/// Version 0 to 1: the final model is named by its proven final state root, so a
	/// proof's `final_model_hash`, a unit's `start_model_hash` and a result's `model_hash`
	/// (hashes the solver named and nothing proved) are dropped. Rewrites every unit and
	/// job; at most `MaxOpenUnits` units are open, and finished jobs are removed after
	/// their retention, so the count is bounded by what the chain holds.
	pub struct DropUnprovenModelHashes<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for DropUnprovenModelHashes<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 1 {
				return T::DbWeight::get().reads(1);
			}
			let mut count = 0u64;
			Units::<T>::translate::<WorkUnitV0<T::AccountId, frame_system::pallet_prelude::BlockNumberFor<T>>, _>(
				|_, _, old| {
					count = count.saturating_add(1);
					Some(WorkUnit {
						scope: old.scope,
						state: old.state,
						solver: old.solver,
						accepted: old.accepted,
						deadline: old.deadline,
						pool_deadline: old.pool_deadline,
						passed_by: old.passed_by,
						start_state_root: old.start_state_root,
						last_checkpoint: old.last_checkpoint,
						proof: old.proof.map(Into::into),
						proven_at: old.proven_at,
						attempts: old.attempts,
					})
				},
			);
			Jobs::<T>::translate::<JobV0<T::AccountId, BalanceOf<T>, frame_system::pallet_prelude::BlockNumberFor<T>>, _>(
				|_, old| {
					count = count.saturating_add(1);
					Some(Job {
						owner: old.owner,
						spec: old.spec,
						status: old.status,
						units: old.units,
						units_final: old.units_final,
						escrow: old.escrow,
						deposit: old.deposit,
						submitted_at: old.submitted_at,
						result: old.result.map(|result| JobResult {
							state_root: result.state_root,
							metrics: result.metrics,
							units_finalized: result.units_finalized,
							units_failed: result.units_failed,
						}),
						removable_at: old.removable_at,
						tolerance: old.tolerance,
					})
				},
			);
			StorageVersion::new(1).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(count.saturating_add(1), count.saturating_add(1))
		}
	}

	/// Version 1 to 2: every unit with a proof that can still be disputed (`Proven` or
	/// `Challenged`) is indexed by the block it was proven at (`ProvenAt`), so challengers
	/// find open proofs by block. Reads every stored unit once: the units of jobs not yet
	/// removed, at most `MaxUnitsPerJob` each.
	pub struct IndexProvenUnits<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for IndexProvenUnits<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 2 {
				return T::DbWeight::get().reads(1);
			}
			let (mut reads, mut writes) = (1u64, 1u64);
			for (job, index, unit) in Units::<T>::iter() {
				reads = reads.saturating_add(1);
				if let (UnitState::Proven | UnitState::Challenged, Some(proven_at)) = (unit.state, unit.proven_at) {
					ProvenAt::<T>::insert(proven_at, (job, index), ());
					writes = writes.saturating_add(1);
				}
			}
			StorageVersion::new(2).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(reads, writes)
		}
	}

	#[cfg(test)]
	#[allow(clippy::unwrap_used)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use frame_support::storage::unhashed;

		/// Every unit and job written in version 0's layout (a model hash after each
		/// proof's final state root, a start model hash before each unit's start state
		/// root, a model hash before the result's state root) reads back as it was, less
		/// those hashes, after the migration; run again, it changes nothing.
		#[test]
		fn version_0_units_and_jobs_lose_only_their_unproven_model_hashes() {
			ExtBuilder::default().solver(2, gpu_profile()).build_and_execute(|| {
				let (units, jobs) = crate::tests::finished_and_proven_for_migration();
				for (job, index, unit) in &units {
					let old = WorkUnitV0 {
						scope: unit.scope,
						state: unit.state,
						solver: unit.solver,
						accepted: unit.accepted,
						deadline: unit.deadline,
						pool_deadline: unit.pool_deadline,
						passed_by: unit.passed_by,
						start_model_hash: Some([7; 32].into()),
						start_state_root: unit.start_state_root,
						last_checkpoint: unit.last_checkpoint,
						proof: unit.proof.map(|proof| LearningProofV0 {
							trace_root: proof.trace_root,
							steps: proof.steps,
							start_state_root: proof.start_state_root,
							final_state_root: proof.final_state_root,
							final_model_hash: [8; 32].into(),
							metrics: proof.metrics,
						}),
						proven_at: unit.proven_at,
						attempts: unit.attempts,
					};
					unhashed::put_raw(&Units::<Test>::hashed_key_for(job, index), &old.encode());
				}
				for (id, job) in &jobs {
					let old = JobV0 {
						owner: job.owner,
						spec: job.spec.clone(),
						status: job.status,
						units: job.units,
						units_final: job.units_final,
						escrow: job.escrow,
						deposit: job.deposit,
						submitted_at: job.submitted_at,
						result: job.result.map(|result| JobResultV0 {
							model_hash: [9; 32].into(),
							state_root: result.state_root,
							metrics: result.metrics,
							units_finalized: result.units_finalized,
							units_failed: result.units_failed,
						}),
						removable_at: job.removable_at,
						tolerance: job.tolerance,
					};
					unhashed::put_raw(&Jobs::<Test>::hashed_key_for(id), &old.encode());
				}
				StorageVersion::new(0).put::<Pallet<Test>>();
				DropUnprovenModelHashes::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
				// Version 1 to 2 indexes the proven units again (the test's end checks the
				// index against the units).
				let proven = ProvenAt::<Test>::iter_keys().count();
				assert!(proven > 0);
				let _ = ProvenAt::<Test>::clear(u32::MAX, None);
				IndexProvenUnits::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
				assert_eq!(ProvenAt::<Test>::iter_keys().count(), proven);
				for _ in 0..2 {
					for (job, index, unit) in &units {
						assert_eq!(Units::<Test>::get(job, index).as_ref(), Some(unit));
					}
					for (id, job) in &jobs {
						assert_eq!(Jobs::<Test>::get(id).as_ref(), Some(job));
					}
					DropUnprovenModelHashes::<Test>::on_runtime_upgrade();
				}
			});
		}
	}
}

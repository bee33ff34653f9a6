//! The traits that couple Touchstone's pallets. Pallets never read each other's storage;
//! the runtime wires one pallet's implementation into another's `Config`.

use crate::referee::{BoundaryOpening, DataCommitment, UnitCommitment};
use crate::{
	Aggregation, ContentHash, Distance, HardwareProfile, HardwareRequirements, HyperParams, JobId, LearningProof, ModelArch,
	OuterOptimizer, Role, SlashReason, ToleranceProfile, UnitIndex, VerificationMode,
};
use alloc::vec::Vec;
use polkadot_sdk::sp_runtime::{DispatchError, DispatchResult, Perbill};

/// A solver the scheduler may assign work to.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SolverCandidate<AccountId, Balance> {
	/// The solver's account.
	pub account: AccountId,
	/// Its declared hardware.
	pub profile: HardwareProfile,
	/// The least it takes per unit: it is offered only units that pay at least this.
	pub min_price: Balance,
	/// Its solver bond.
	pub bond: Balance,
	/// Its scheduling score: higher is preferred. Combines stake, reputation and liveness.
	pub score: u64,
}

/// The registry of compute nodes, as other pallets see it.
pub trait ComputeNodes<AccountId, Balance> {
	/// Whether `who` is registered for `role` with at least the minimum bond.
	fn is_bonded_for(who: &AccountId, role: Role) -> bool;
	/// Whether `who` is registered at all.
	fn is_registered(who: &AccountId) -> bool;
	/// Whether `who` sent a heartbeat recently enough to count as online.
	fn is_online(who: &AccountId) -> bool;
	/// The hardware profile `who` declared.
	fn profile(who: &AccountId) -> Option<HardwareProfile>;
	/// What `who` holds as its bond for `role`.
	fn bond(who: &AccountId, role: Role) -> Balance;
	/// The least `who` takes per unit as a solver; `None` if it is not a node.
	fn min_price(who: &AccountId) -> Option<Balance>;
	/// Whether any online solver bonded at least at the minimum has hardware that meets
	/// `requirements` and takes units at `price`. Scans every registered node.
	fn any_solver_meets(requirements: &HardwareRequirements, price: Balance) -> bool;
	/// Online, bonded solvers, best score first; at most `limit` of them. Equal scores are
	/// ordered by a rotation that changes every block. Scans every registered node.
	fn solver_candidates(limit: u32) -> Vec<SolverCandidate<AccountId, Balance>>;
	/// Registered nodes: the size of a scan of the registry, for weights.
	fn node_count() -> u32;
	/// The most nodes the registry admits: the worst-case size of a scan.
	fn max_nodes() -> u32;
	/// Records a unit worth `value` completed by `who`.
	fn note_completed(who: &AccountId, value: Balance);
	/// Records a technical failure (a timeout) on a unit worth `value` by `who`: costs
	/// reputation, not bond.
	fn note_failed(who: &AccountId, value: Balance);
}

/// Slashing of bonds, for proven dishonesty.
pub trait Slash<AccountId, Balance> {
	/// Slashes up to `amount` of the bond `who` holds for `role` (and then of its
	/// unbonding funds), for `reason`. `reward` sends a share of what was slashed to the
	/// accounts it names, such as the challengers that convicted a lie, in equal parts
	/// (rounded down); the rest goes to the runtime's slash destination. Returns the amount
	/// actually slashed. A reward naming `who` itself is refused, and nothing is slashed.
	fn slash(
		who: &AccountId,
		role: Role,
		amount: Balance,
		reason: SlashReason,
		reward: Option<(&[AccountId], Perbill)>,
	) -> Result<Balance, DispatchError>;
}

/// The work a node has in hand, by role. A node with work in a role cannot drop that
/// role's bond or leave the registry; one holding units cannot change its hardware or take
/// its solver bond below the collateral its units need. Implemented by the tasks pallet
/// (units held as a solver) and the verification pallet (rounds drawn in as a verifier,
/// until their units are final); a pair adds both.
pub trait ActiveWork<AccountId, Balance> {
	/// How much work `who` has in hand as `role` that is not final yet: zero when it has
	/// none. Callers only ask whether it has any, so an implementation may answer 1 where
	/// counting would read more than one key.
	fn active_work(who: &AccountId, role: Role) -> u32;
	/// The solver bond `who` must keep for the units it holds.
	fn required_collateral(who: &AccountId) -> Balance;
}

impl<AccountId, Balance: polkadot_sdk::sp_runtime::Saturating, A, B> ActiveWork<AccountId, Balance> for (A, B)
where
	A: ActiveWork<AccountId, Balance>,
	B: ActiveWork<AccountId, Balance>,
{
	fn active_work(who: &AccountId, role: Role) -> u32 {
		A::active_work(who, role).saturating_add(B::active_work(who, role))
	}
	fn required_collateral(who: &AccountId) -> Balance {
		A::required_collateral(who).saturating_add(B::required_collateral(who))
	}
}

/// Hooks the verification and disputes pallets implement to follow proofs and hold back
/// their finalization. `()` lets every challenge window simply elapse; a pair runs both.
pub trait ProofLifecycle<AccountId> {
	/// A learning proof was committed for a unit. An error refuses the proof.
	fn on_proof_submitted(
		job: JobId,
		unit: UnitIndex,
		solver: &AccountId,
		proof: &LearningProof,
	) -> DispatchResult;
	/// Whether the unit may be finalized now that its challenge window has elapsed.
	fn can_finalize(job: JobId, unit: UnitIndex) -> bool;
	/// The unit is being finalized: returns the accounts that earned a share of its price
	/// for checking it (the verifiers that attested it), and forgets the unit.
	fn on_finalized(job: JobId, unit: UnitIndex) -> Vec<AccountId>;
	/// The weight of [`ProofLifecycle::on_finalized`] and of paying what it returns, at its
	/// worst: added to the finalizing call's.
	fn on_finalized_weight() -> polkadot_sdk::sp_runtime::Weight {
		polkadot_sdk::sp_runtime::Weight::zero()
	}
	/// The unit's proof, or the work toward one, is void: overturned, rolled back with the
	/// step range it started from, or its solver ran out of time before proving it.
	/// Whatever was kept about it can go.
	fn on_proof_dropped(_job: JobId, _unit: UnitIndex) {}
	/// The weight of [`ProofLifecycle::on_proof_dropped`] for one unit.
	fn on_proof_dropped_weight() -> polkadot_sdk::sp_runtime::Weight {
		polkadot_sdk::sp_runtime::Weight::zero()
	}
	/// The unit's solver accepted it and ran out of time before proving it: its work is
	/// dropped ([`ProofLifecycle::on_proof_dropped`]), and whatever the solver had bound
	/// itself to toward the proof may cost it.
	fn on_abandoned(job: JobId, unit: UnitIndex) {
		Self::on_proof_dropped(job, unit);
	}
	/// The weight of [`ProofLifecycle::on_abandoned`] for one unit.
	fn on_abandoned_weight() -> polkadot_sdk::sp_runtime::Weight {
		Self::on_proof_dropped_weight()
	}
	/// `solver`, which has just taken the unit (the next step range, with the proof of
	/// the range before it), commits toward its proof: `hash` is its forced-error secret's
	/// commitment, bound like one sent on its own. An error refuses the whole call.
	fn commit_secret(_job: JobId, _unit: UnitIndex, _solver: &AccountId, _hash: [u8; 32]) -> DispatchResult {
		Ok(())
	}
	/// The weight of [`ProofLifecycle::commit_secret`].
	fn commit_secret_weight() -> polkadot_sdk::sp_runtime::Weight {
		polkadot_sdk::sp_runtime::Weight::zero()
	}
}

impl<AccountId> ProofLifecycle<AccountId> for () {
	fn on_proof_submitted(_: JobId, _: UnitIndex, _: &AccountId, _: &LearningProof) -> DispatchResult {
		Ok(())
	}
	fn can_finalize(_: JobId, _: UnitIndex) -> bool {
		true
	}
	fn on_finalized(_: JobId, _: UnitIndex) -> Vec<AccountId> {
		Vec::new()
	}
}

impl<AccountId, A: ProofLifecycle<AccountId>, B: ProofLifecycle<AccountId>> ProofLifecycle<AccountId> for (A, B) {
	fn on_proof_submitted(job: JobId, unit: UnitIndex, solver: &AccountId, proof: &LearningProof) -> DispatchResult {
		A::on_proof_submitted(job, unit, solver, proof)?;
		B::on_proof_submitted(job, unit, solver, proof)
	}
	fn can_finalize(job: JobId, unit: UnitIndex) -> bool {
		A::can_finalize(job, unit) && B::can_finalize(job, unit)
	}
	fn on_finalized(job: JobId, unit: UnitIndex) -> Vec<AccountId> {
		let mut earned = A::on_finalized(job, unit);
		earned.extend(B::on_finalized(job, unit));
		earned
	}
	fn on_finalized_weight() -> polkadot_sdk::sp_runtime::Weight {
		A::on_finalized_weight().saturating_add(B::on_finalized_weight())
	}
	fn on_proof_dropped(job: JobId, unit: UnitIndex) {
		A::on_proof_dropped(job, unit);
		B::on_proof_dropped(job, unit);
	}
	fn on_proof_dropped_weight() -> polkadot_sdk::sp_runtime::Weight {
		A::on_proof_dropped_weight().saturating_add(B::on_proof_dropped_weight())
	}
	fn on_abandoned(job: JobId, unit: UnitIndex) {
		A::on_abandoned(job, unit);
		B::on_abandoned(job, unit);
	}
	fn on_abandoned_weight() -> polkadot_sdk::sp_runtime::Weight {
		A::on_abandoned_weight().saturating_add(B::on_abandoned_weight())
	}
	fn commit_secret(job: JobId, unit: UnitIndex, solver: &AccountId, hash: [u8; 32]) -> DispatchResult {
		A::commit_secret(job, unit, solver, hash)?;
		B::commit_secret(job, unit, solver, hash)
	}
	fn commit_secret_weight() -> polkadot_sdk::sp_runtime::Weight {
		A::commit_secret_weight().saturating_add(B::commit_secret_weight())
	}
}

/// Draws of bonded, online verifiers, weighted by stake. Implemented by the staking
/// pallet over a sum tree of verifier bonds, so a draw reads O(log n) storage items per
/// pick and never scans or sorts the registry.
pub trait VerifierDraw<AccountId> {
	/// Up to `count` distinct verifiers, each pick made with probability proportional to
	/// its verifier bond, from `seed`: online, bonded at least at the minimum, and none in
	/// `exclude`. Deterministic given the seed and the registry. Makes at most
	/// [`VerifierDraw::max_attempts`] picks, so it may return fewer when few qualify.
	fn draw_verifiers(seed: &[u8; 32], count: u32, exclude: &[AccountId]) -> Vec<AccountId>;
	/// The most picks a draw of `count` verifiers makes: the bound of its weight.
	fn max_attempts(count: u32) -> u32 {
		count.saturating_mul(4).saturating_add(4)
	}
	/// The weight of a draw of `count` verifiers at its worst.
	fn draw_weight(count: u32) -> polkadot_sdk::sp_runtime::Weight;
}

/// Opening disputes on a verifier's behalf: a verifier that reveals a mismatch disputes
/// the proof as a challenger would. Implemented by the disputes pallet.
pub trait OpenDispute<AccountId> {
	/// Opens a dispute of `challenger`, a drawn verifier of the unit, with its own trace
	/// root, under the rules of a challenge (the challenge bond is held), except that the
	/// challenger is bonded as a verifier and the unit's challenge window may have closed.
	fn open_for_verifier(challenger: AccountId, job: JobId, unit: UnitIndex, trace_root: [u8; 32]) -> DispatchResult;
	/// How many disputes over one unit only its drawn verifiers may open: challengers
	/// cannot fill them. At least the verifiers drawn per unit.
	fn verifier_slots() -> u32;
	/// The weight of opening one.
	fn open_weight() -> polkadot_sdk::sp_runtime::Weight;
	/// Dismisses every dispute over the unit, returning the challengers' bonds, and moves
	/// the unit back to `Proven`: its proof carried a forced error, so nobody lied.
	/// Returns how many it dismissed.
	fn dismiss_all(job: JobId, unit: UnitIndex) -> Result<u32, DispatchError>;
	/// The weight of [`OpenDispute::dismiss_all`] at its worst.
	fn dismiss_all_weight() -> polkadot_sdk::sp_runtime::Weight;
}

/// How disputes judge the attestations of a proof they overturn. Implemented by the
/// verification pallet; `()` judges nothing.
pub trait AttestationJudge<AccountId> {
	/// A dispute overturned the unit's standing proof. `step` is the disputed global step
	/// when the step level ended (a ruling by the referee, or a timeout after it); `None`
	/// when the defender fell silent earlier, which shows no step wrong. Every verifier
	/// that attested `Match` and re-executed the segment holding `step` attested falsely:
	/// it is slashed from its verifier bond, `reward`'s share to the winners in equal parts
	/// (less any winner that is the verifier itself). Called before the proof is dropped.
	/// Returns how many verifiers were slashed.
	fn proof_overturned(
		job: JobId,
		unit: UnitIndex,
		step: Option<u32>,
		reward: (&[AccountId], Perbill),
	) -> u32;
	/// The weight of [`AttestationJudge::proof_overturned`] at its worst, with `winners`
	/// winners sharing each slash.
	fn proof_overturned_weight(winners: u32) -> polkadot_sdk::sp_runtime::Weight;
	/// Whether a dispute may not yet rule against the unit's solver: its proof may carry
	/// a forced error, which is known only once the solver reveals its secret, or it does
	/// carry one and is about to be replaced by the honest proof. Bounded in time by the
	/// verification round's reveal period.
	fn holds_rulings(_job: JobId, _unit: UnitIndex) -> bool {
		false
	}
	/// The verifiers that attested `Match` to the unit's standing proof in its round, each
	/// with the segments it re-executed (in draw order). Empty when no round over this proof
	/// was drawn. Read before a conviction that found no step drops the proof, so that each
	/// attestation can still be judged by a summons (`pallet-touchstone-disputes`).
	fn match_attesters(_job: JobId, _unit: UnitIndex) -> Vec<(AccountId, Vec<u32>)> {
		Vec::new()
	}
	/// A summons showed that `verifier` attested a transition of an overturned proof of the
	/// unit that no honest step reaches (found at global step `step`): it is slashed the
	/// false-attestation slash from its verifier bond, `reward`'s share to the winners in
	/// equal parts. Returns what was slashed, in the smallest unit.
	fn false_attestation(
		_job: JobId,
		_unit: UnitIndex,
		_verifier: &AccountId,
		_step: u32,
		_reward: (&[AccountId], Perbill),
	) -> u128 {
		0
	}
	/// The weight of [`AttestationJudge::false_attestation`] at its worst.
	fn false_attestation_weight() -> polkadot_sdk::sp_runtime::Weight {
		polkadot_sdk::sp_runtime::Weight::zero()
	}
}

impl<AccountId> AttestationJudge<AccountId> for () {
	fn proof_overturned(_: JobId, _: UnitIndex, _: Option<u32>, _: (&[AccountId], Perbill)) -> u32 {
		0
	}
	fn proof_overturned_weight(_: u32) -> polkadot_sdk::sp_runtime::Weight {
		polkadot_sdk::sp_runtime::Weight::zero()
	}
}

/// A unit with a committed learning proof, as a dispute over it sees it: everything the
/// game and the referee judge against, from the tasks pallet's records.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ProvenUnit<AccountId, BlockNumber, Balance> {
	/// The solver that committed the proof: the defender of any dispute.
	pub solver: AccountId,
	/// What the unit pays into the jackpot when it is finalized: a forced error's payout is
	/// reckoned from it, so the jackpot's expected outflow never exceeds its inflow.
	pub jackpot_pay: Balance,
	/// The unit's collateral, which its solver's bond covers: the least its solver is
	/// slashed if the proof is shown wrong.
	pub collateral: Balance,
	/// The job's submitter, who may not verify work it pays for.
	pub owner: AccountId,
	/// The job's model.
	pub model: ModelArch,
	/// The job's hyper-parameters.
	pub hyper: HyperParams,
	/// How the job's proofs are checked.
	pub verification: VerificationMode,
	/// The solver's learning proof as the game takes it: its segment root, the unit's
	/// first step, step count and checkpoint grid, and the chain-fixed start state root.
	pub trace: UnitCommitment,
	/// The job's training set and the unit's shard.
	pub data: DataCommitment,
	/// The block the challenge window ends in: challenges are accepted before it, and
	/// the unit may be finalized from it.
	pub window_ends: BlockNumber,
	/// Whether a dispute holds the unit (`Challenged`).
	pub challenged: bool,
	/// Whole blocks one of the unit's checkpoint segments takes to re-execute at the
	/// chain's reference rate: what verification rounds and dispute phases add to their
	/// floors, so that honest parties have the time the work takes.
	pub segment_blocks: u32,
}

/// A round's aggregate whose commitment stands (`Proven`), as a challenge of it sees it:
/// everything the referee recomputes a chunk of it from, from the tasks pallet's records.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ProvenAggregate<AccountId, BlockNumber, Balance> {
	/// The solver that committed the aggregate.
	pub solver: AccountId,
	/// The unit's collateral: the least its solver is slashed if the aggregate is wrong.
	pub collateral: Balance,
	/// The job's model and hyper-parameters, which fix the state's layout.
	pub model: ModelArch,
	/// See [`ProvenAggregate::model`].
	pub hyper: HyperParams,
	/// The job's outer step.
	pub outer: OuterOptimizer,
	/// How the shards are weighed.
	pub aggregation: Aggregation,
	/// Each shard's proven end state root and its samples, in shard order.
	pub shards: Vec<(ContentHash, u32)>,
	/// The round's global state root: every shard's start.
	pub global_root: ContentHash,
	/// The outer momentum the round starts from: the previous aggregate's; `None` for
	/// the first round's (zeros) and for plain averaging.
	pub momentum_root: Option<ContentHash>,
	/// The committed next global state root.
	pub claimed_root: ContentHash,
	/// The committed next outer momentum root (Nesterov only).
	pub claimed_momentum_root: Option<ContentHash>,
	/// The block the challenge window ends in: challenges are accepted before it.
	pub window_ends: BlockNumber,
}

/// A tolerance-mode job, as the verification pallet sees it: who may challenge its
/// thresholds, and what bounds them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ToleranceJob<AccountId> {
	/// The job's submitter.
	pub owner: AccountId,
	/// The submitter's ceilings: profiled thresholds never exceed them.
	pub ceiling: Distance,
	/// The thresholds profiled so far.
	pub profile: ToleranceProfile,
}

/// How the disputes pallet reads and moves units with committed proofs. Implemented by
/// the tasks pallet; the disputes pallet never reads its storage.
pub trait UnitProofs<AccountId, BlockNumber, Balance> {
	/// The unit, while its proof stands (`Proven` or `Challenged`).
	fn proven_unit(job: JobId, unit: UnitIndex) -> Option<ProvenUnit<AccountId, BlockNumber, Balance>>;
	/// The unit, while it is a round's aggregate whose commitment stands undisputed
	/// (`Proven`).
	fn proven_aggregate(job: JobId, unit: UnitIndex) -> Option<ProvenAggregate<AccountId, BlockNumber, Balance>>;
	/// The solver that accepted the unit and has not committed its proof yet (`Assigned`),
	/// and the block its proof is due by.
	fn assignment(job: JobId, unit: UnitIndex) -> Option<(AccountId, BlockNumber)>;
	/// Whether `who` is the solver of one of the job's units (accepted, proving, proven or
	/// challenged): a party to the job's rounds. Reads every unit of the job.
	fn solves_in(job: JobId, who: &AccountId) -> bool;
	/// The proof that replaces the unit's standing one: the same steps, start, final state
	/// and final model, over the other segment root `trace_root`, whose last boundary
	/// `final_state` must open. An error if the root is the standing one or the opening fails.
	fn replacement(
		job: JobId,
		unit: UnitIndex,
		trace_root: [u8; 32],
		final_state: &BoundaryOpening,
	) -> Result<LearningProof, DispatchError>;
	/// The collateral each of the job's units carries: what its solver's bond answers for.
	fn unit_collateral(job: JobId) -> Option<Balance>;
	/// Replaces the unit's standing proof with `proof`, checked by
	/// [`UnitProofs::replacement`]: the first carried a forced error. The unit is
	/// `Proven` again with a full challenge window, and the proof lifecycle is told of the
	/// new proof. The step ranges that started from the unit's model stand: it is the same.
	fn replace_proof(job: JobId, unit: UnitIndex, proof: LearningProof) -> DispatchResult;
	/// A dispute opened: the unit moves to `Challenged` (if it is not already) and cannot
	/// be finalized until every dispute over it ends.
	fn open_challenge(job: JobId, unit: UnitIndex) -> DispatchResult;
	/// The last dispute over the unit ended with the proof upheld: back to `Proven`, with
	/// its challenge window open again in full (so hopeless challenges that fill the
	/// unit's dispute slots cannot run the window out).
	fn close_challenge(job: JobId, unit: UnitIndex) -> DispatchResult;
	/// The proof was overturned. The solver is released (the disputes pallet slashes it),
	/// the unit goes back to the pool from its start, or fails once out of attempts, and
	/// every later step range that started from its model rolls back to `Waiting`.
	/// Returns those rolled-back units: disputes over them are moot.
	fn reject_proof(job: JobId, unit: UnitIndex) -> Result<Vec<UnitIndex>, DispatchError>;
	/// The job, if it exists and is verified in tolerance mode.
	fn tolerance_job(job: JobId) -> Option<ToleranceJob<AccountId>>;
	/// Stores the profiled thresholds of a tolerance-mode job, or clears them (`None`) for
	/// a new profiling after a challenge, which counts the challenge.
	fn set_thresholds(job: JobId, thresholds: Option<Distance>) -> DispatchResult;
	/// The most units a job has: the most step ranges one overturn can roll back is one less.
	fn max_units_per_job() -> u32;
	/// The weight of overturning a unit and rolling back `rolled_back` later ranges.
	fn overturn_weight(rolled_back: u32) -> polkadot_sdk::sp_runtime::Weight;
}

/// What benchmarks of the pallets that judge proofs need from the rest of the runtime: a
/// funded, registered node, and a unit proven through the tasks pallet. Implemented by the
/// runtime (and the test runtimes) over the real staking and tasks pallets.
pub trait ProofSetup<AccountId, Balance> {
	/// Funds `who` and registers it for `role` with that role's minimum bond.
	fn register(who: &AccountId, role: Role);
	/// Funds `owner` and submits `spec` as it; `solver` takes unit 0 and holds it, its
	/// proof not committed. Returns the job.
	fn take(owner: &AccountId, spec: crate::JobSpec<Balance>, solver: &AccountId) -> Option<JobId>;
	/// Funds `owner` and submits `spec` as it; `solver` takes unit 0 and commits `proof`,
	/// whose last boundary `final_state` opens. Returns the job.
	fn prove(
		owner: &AccountId,
		spec: crate::JobSpec<Balance>,
		solver: &AccountId,
		proof: LearningProof,
		final_state: BoundaryOpening,
	) -> Option<JobId>;
}

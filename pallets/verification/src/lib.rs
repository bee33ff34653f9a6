//! # Touchstone verification
//!
//! Every committed learning proof is checked by verifiers the chain draws for it:
//!
//! 1. **Queued.** When a proof is committed ([`ProofLifecycle::on_proof_submitted`]), the
//!    unit joins the draw queue. Nothing is drawn inside the solver's extrinsic.
//! 2. **Drawn.** In a later block's `on_initialize`, once the runtime's randomness source
//!    reports randomness determined *after* the commitment's block, `VerifiersPerUnit`
//!    verifiers are drawn from the online, bonded verifiers, weighted by stake, excluding
//!    the solver and the submitter ([`VerifierDraw`]). The solver could not know the seed
//!    when it committed, so it cannot choose its verifiers or the segments they sample.
//! 3. **Commit.** For `CommitPeriod` blocks plus the reference time of its samples and
//!    one segment more (a restart's), each drawn verifier re-executes its
//!    `SamplesPerVerifier` sampled segments ([`Pallet::sampled_segments`]) from the
//!    solver's checkpoints and commits `blake2_256((verdict, salt, verifier))`.
//! 4. **Reveal.** For `RevealPeriod` blocks after that it reveals the verdict and salt.
//!    Verifiers cannot copy each other: commitments are hidden until every one is in, and
//!    bind the verifier's account. A `Mismatch` opens a dispute at once, with the
//!    verifier as challenger and its own trace root ([`OpenDispute`]).
//! 5. **Concluded.** At the end of the reveal period every verifier that did not reveal is
//!    slashed `MissedRevealSlash`, and the unit may be finalized (after its challenge
//!    window, and once no dispute holds it). The verifiers that attested `Match` share the
//!    tasks pallet's `VerifierShare` of the unit's price.
//! 6. **Judged.** When a dispute overturns the proof ([`AttestationJudge`]), every
//!    verifier that revealed `Match` and sampled the segment holding the disputed step is
//!    slashed `FalseAttestationSlash`, a share to the dispute's winner: its samples start
//!    from the solver's checkpoints, so the lie was in front of it.
//!
//! 7. **Forced errors.** While `ForcedErrorRate` is not zero, a solver that has trained a
//!    unit commits, before its proof, a hash binding a fresh secret to two trace roots: its
//!    honest proof's and that of a proof wrong at the step the secret fixes
//!    ([`Pallet::commit_secret`], [`touchstone_primitives::forced_commitment`],
//!    [`touchstone_primitives::forced_step`]). A later block's hook records randomness,
//!    and with the secret it decides which of the two the solver must commit
//!    ([`touchstone_primitives::forced_error`]). Only the solver knows; letting the unit
//!    time out after the randomness costs it the unit's collateral. In the reveal period
//!    ([`Pallet::reveal_secret`]) the solver reveals the secret and the other root: the
//!    chain checks the binding and that the right proof was committed. On a forced unit
//!    the disputes over the forced proof are dismissed, the verifiers that caught the error
//!    are paid from the jackpot (what the unit pays into it divided by the rate) when the
//!    round concludes, and the honest proof replaces the forced one, in a round of its own.
//!    Every solver reveals; a missing reveal is slashed `MissedRevealSlash`.
//!
//! 8. **Tolerance mode.** A job trained on a backend that is not bit-exact is judged by
//!    distance ([`Verdict::Measured`]): each verifier reveals how far the solver's
//!    checkpoints lie from its reference re-execution of its segments. The job's first
//!    round also profiles it (each verifier runs its segments on the fast backend too, and
//!    reports how far that lands from the reference): the median of the profiles times
//!    `ToleranceMargin`,
//!    capped by the submitter's ceilings, becomes the job's thresholds, stored with the job
//!    ([`Pallet::challenge_thresholds`] has them profiled again). A distance beyond them
//!    opens an escalation ([`RoundKind::Escalation`]): `EscalationCommittee` verifiers drawn
//!    afresh, none of the round's own and at least `MinEscalationCommittee` of them,
//!    measure the flagged segments, and their majority overturns the proof (the
//!    solver slashed `InvalidProofSlash`, the unit rejected) or upholds it (the verifiers
//!    that flagged it slashed). Forced errors are exact mode's only.
//!
//! A round whose proof no longer stands (overturned by a dispute) is otherwise voided:
//! nobody else is slashed or paid for it. With no verifier online and bonded, a proof
//! relies on its challenge window alone.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub use pallet::*;
pub use weights::WeightInfo;

mod draw;
mod forced;
mod impls;
#[cfg(any(feature = "try-runtime", feature = "std"))]
mod invariants;
mod rounds;
mod tolerance;
mod types;
pub mod weights;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;

#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use types::*;

use polkadot_sdk::{frame_support, frame_system};

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use alloc::vec::Vec;
	use frame_support::{
		pallet_prelude::*,
		storage::with_storage_layer,
		traits::{
			fungible::Mutate,
			Randomness,
		},
	};
	use frame_system::pallet_prelude::*;
	use polkadot_sdk::{
		sp_core::H256,
		sp_runtime::{
			traits::Zero,
			Perbill,
		},
	};
	use touchstone_primitives::{
		traits::{ComputeNodes, OpenDispute, Slash, UnitProofs, VerifierDraw},
		forced_commitment, forced_error, forced_step, referee::BoundaryOpening, Distance, JobId, Role, UnitIndex,
	};

	/// The blocks' randomness the [`Beacon`] keeps, and the most blocks after a commitment
	/// a seed waits for: past them, it is taken whoever made them (one author makes so
	/// many blocks in a row only while the others are down).
	pub const MAX_RANDOMNESS_BLOCKS: u32 = 16;

	/// Blocks a unit's deadline must leave when its solver commits a forced-error secret:
	/// the randomness may take [`MAX_RANDOMNESS_BLOCKS`] and one more to be recorded, and
	/// the proof needs a block or two after it. With this much left, a solver always has
	/// time to prove once it learns whether its unit is forced, so forfeiting the unit's
	/// collateral when it does not is never an honest solver's loss.
	pub const SECRET_DEADLINE_MARGIN: u32 = MAX_RANDOMNESS_BLOCKS + 4;

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(3);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	#[pallet::config]
	pub trait Config: polkadot_sdk::frame_system::Config {
		/// The currency bonds are counted in; forced-error payouts move it from the jackpot.
		type Currency: Mutate<Self::AccountId>;

		/// Units with committed proofs: who solved and submitted them, and whether their
		/// proofs still stand.
		type Units: UnitProofs<Self::AccountId, BlockNumberFor<Self>, BalanceOf<Self>>;

		/// The stake-weighted draw of online verifiers.
		type Draw: VerifierDraw<Self::AccountId>;

		/// Slashing of verifiers that miss their reveal.
		type Slash: Slash<Self::AccountId, BalanceOf<Self>>;

		/// Opens the dispute a verifier's mismatch starts, and dismisses the disputes over a
		/// proof that carried a forced error.
		type Disputes: OpenDispute<Self::AccountId>;

		/// The jackpot: forced-error payouts come from it.
		type Jackpot: Get<Self::AccountId>;

		/// A block's randomness, with the block from which it is known (BABE's VRF output
		/// of the parent block's author on a runtime). The hook keeps the last
		/// [`MAX_RANDOMNESS_BLOCKS`] of them, with their authors ([`Beacon`]).
		type Randomness: Randomness<H256, BlockNumberFor<Self>>;

		/// The current block's author (its block-authoring key on a runtime), or `None`
		/// where the block names none. A block's randomness is known in advance to its
		/// author alone, so the beacon notes who made each.
		type BlockAuthor: Get<Option<[u8; 32]>>;

		/// How many authors make blocks now (the epoch's authorities); zero where blocks
		/// name no author, and seeds then need only `RandomnessBlocks`.
		type AuthorCount: Get<u32>;

		/// How many blocks' randomness, each known only after a commitment (a proof, or a
		/// solver's forced-error secret), decide it together at least: a draw's verifiers
		/// and a unit's designation. At most [`MAX_RANDOMNESS_BLOCKS`].
		#[pallet::constant]
		type RandomnessBlocks: Get<u32>;

		/// How many distinct authors the blocks deciding a seed must have (or every author
		/// there is, if fewer): a seed waits for more blocks while fewer made them. With
		/// two, no single author knows a seed when the commitment is made, however many
		/// blocks in a row it makes.
		#[pallet::constant]
		type RandomnessAuthors: Get<u32>;

		/// Verifiers drawn for each proof.
		#[pallet::constant]
		type VerifiersPerUnit: Get<u32>;

		/// Checkpoint segments each verifier re-executes.
		#[pallet::constant]
		type SamplesPerVerifier: Get<u32>;

		/// Blocks after the draw in which verifiers commit their attestations, at the least:
		/// a round adds the blocks its verifiers' re-execution takes, each verifier's
		/// `SamplesPerVerifier` segments (an escalation member's, every flagged segment) and
		/// one more, for a restart in the middle of the work, at the unit's `segment_blocks`
		/// each.
		#[pallet::constant]
		type CommitPeriod: Get<BlockNumberFor<Self>>;

		/// Blocks after the commit period in which verifiers reveal them.
		#[pallet::constant]
		type RevealPeriod: Get<BlockNumberFor<Self>>;

		/// What a drawn verifier that does not reveal in time is slashed, from its verifier
		/// bond.
		#[pallet::constant]
		type MissedRevealSlash: Get<BalanceOf<Self>>;

		/// What a verifier that attested `Match` over the step a dispute proved wrong is
		/// slashed, from its verifier bond.
		#[pallet::constant]
		type FalseAttestationSlash: Get<BalanceOf<Self>>;

		/// The chance that a unit's proof must carry a forced error. Zero turns forced
		/// errors off: solvers then owe no secret.
		#[pallet::constant]
		type ForcedErrorRate: Get<Perbill>;

		/// The most of the jackpot one forced error pays out, to all its catchers together.
		#[pallet::constant]
		type MaxForcedErrorPayout: Get<Perbill>;

		/// Most proofs waiting for their draw, and most secrets waiting for their
		/// randomness. Each queue holds a unit once, so with room for every open unit (the
		/// tasks pallet's `MaxOpenUnits`, a runtime test checks it) neither can be filled to
		/// shut anyone out; a push that finds a queue full anyway is refused.
		#[pallet::constant]
		type MaxPendingDraws: Get<u32>;

		/// Most secrets whose randomness is recorded in one block. Recording is cheap, and
		/// the secret queue must drain faster than the solvers' assignments can refill it:
		/// at least `MaxOpenUnits / MinUnitTimeout` (a runtime test checks it), so that a
		/// burst of sybil secrets delays an honest one by a block at most.
		#[pallet::constant]
		type MaxSecretsPerBlock: Get<u32>;

		/// Most draws made in one block; the rest wait for the next.
		#[pallet::constant]
		type MaxDrawsPerBlock: Get<u32>;

		/// Blocks after its proof within which a round must be drawn. A round the
		/// randomness source never served in time is dropped (`DrawExpired`), so a stalled
		/// source delays no unit's pay for longer than this.
		#[pallet::constant]
		type DrawTimeout: Get<BlockNumberFor<Self>>;

		/// Members of an escalation committee: a tolerance-mode proof that a verifier
		/// measured beyond its job's thresholds is judged by the majority of this many
		/// verifiers, drawn afresh without the judged round's own verifiers. At least
		/// `VerifiersPerUnit`, and odd.
		#[pallet::constant]
		type EscalationCommittee: Get<u32>;

		/// The fewest members an escalation committee may have. Fewer verifiers eligible
		/// (online, bonded, and neither the solver, the submitter nor one of the round's
		/// verifiers) leave the escalation undecided (`CommitteeTooSmall`): no verifier
		/// judges a round it sat in, and no one or two members decide alone.
		#[pallet::constant]
		type MinEscalationCommittee: Get<u32>;

		/// A tolerance-mode job's thresholds are its verifiers' median profile times this
		/// factor, capped by the submitter's ceilings.
		#[pallet::constant]
		type ToleranceMargin: Get<u32>;

		/// The fewest profiles a round must reveal to set a job's thresholds; with fewer,
		/// the round is judged by the ceilings and the next round profiles. One profile
		/// alone, a liar's perhaps, never sets them.
		#[pallet::constant]
		type MinProfiles: Get<u32>;

		/// The least a profiled threshold may be, as a share of the job's ceiling: profiles
		/// reported near zero cannot make every honest distance look beyond the thresholds.
		#[pallet::constant]
		type ThresholdFloor: Get<Perbill>;

		/// Most escalation committees drawn in one block (they count among
		/// `MaxDrawsPerBlock`), so at most this many escalations conclude in a block: each
		/// may overturn a proof and roll back a whole job's later ranges.
		#[pallet::constant]
		type MaxEscalationsPerBlock: Get<u32>;

		/// Most times one job's thresholds may be challenged and profiled again.
		#[pallet::constant]
		type MaxThresholdChallenges: Get<u32>;

		/// What a solver whose tolerance-mode proof an escalation committee overturned is
		/// slashed, from its solver bond.
		#[pallet::constant]
		type InvalidProofSlash: Get<BalanceOf<Self>>;

		/// The share of a slash paid to a winner of an escalation; the rest goes to the
		/// runtime's slash destination.
		#[pallet::constant]
		type WinnerShare: Get<Perbill>;

		/// The registry: bonded solvers may challenge a job's thresholds.
		type Nodes: ComputeNodes<Self::AccountId, BalanceOf<Self>>;

		/// Weights of this pallet's calls and hooks.
		type WeightInfo: WeightInfo;

		/// Registers nodes and proves units in other pallets, for the benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: touchstone_primitives::traits::ProofSetup<Self::AccountId, BalanceOf<Self>>;
	}

	/// Proofs waiting for randomness to draw their verifiers, oldest first.
	#[pallet::storage]
	pub type PendingDraws<T: Config> = StorageValue<_, BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>, ValueQuery>;

	/// The verification round of each unit whose proof is queued, drawn or concluded and
	/// not yet finalized.
	#[pallet::storage]
	pub type Rounds<T: Config> = StorageMap<_, Twox64Concat, (JobId, UnitIndex), RoundOf<T>>;

	/// The thresholds a tolerance-mode round is judged by, frozen when its proof was
	/// committed (or, for a job profiled since, when it was drawn): a challenge to the
	/// job's thresholds moves only rounds that come after it, so no party to an open round
	/// or escalation can change its yardstick. Absent for a round that profiles them.
	#[pallet::storage]
	pub type RoundThresholds<T: Config> = StorageMap<_, Twox64Concat, (JobId, UnitIndex), Distance>;

	/// The rounds each verifier is drawn in, by verifier, from the draw until the round is
	/// gone (its unit final, or its proof void). A verifier cannot drop its bond while it
	/// has any: a `Match` can still be proven false until the unit is final. Keyed by
	/// verifier first, so a verifier (on a light client too) finds its rounds by reading
	/// its own keys ([`Pallet::rounds_of`]), never the whole `Rounds` map.
	#[pallet::storage]
	pub type VerifierRounds<T: Config> =
		StorageDoubleMap<_, Blake2_128Concat, T::AccountId, Twox64Concat, (JobId, UnitIndex), ()>;

	/// Solvers' forced-error secret commitments, by unit, from when the solver takes the
	/// unit until its proof is committed or its solver loses the unit.
	#[pallet::storage]
	pub type Secrets<T: Config> = StorageMap<_, Twox64Concat, (JobId, UnitIndex), SecretCommitmentOf<T>>;

	/// Secret commitments waiting for randomness newer than themselves, oldest first.
	#[pallet::storage]
	pub type PendingSecrets<T: Config> =
		StorageValue<_, BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>, ValueQuery>;

	/// The randomness of the last [`MAX_RANDOMNESS_BLOCKS`] blocks, oldest first, each with
	/// the block from which it is known and its author: a seed mixes every entry newer
	/// than the commitment it decides, once there are enough of them by enough authors.
	#[pallet::storage]
	pub type Beacon<T: Config> =
		StorageValue<_, BoundedVec<BeaconEntry<BlockNumberFor<T>>, ConstU32<MAX_RANDOMNESS_BLOCKS>>, ValueQuery>;

	/// The current block and its author, noted by the hook: the next block's randomness
	/// source gives this block's randomness, and the beacon names its author from here.
	#[pallet::storage]
	pub type LastAuthor<T: Config> = StorageValue<_, (BlockNumberFor<T>, [u8; 32])>;

	/// The rounds whose reveal period ends at each block: `on_initialize` concludes them.
	#[pallet::storage]
	pub type Closing<T: Config> =
		StorageMap<_, Twox64Concat, BlockNumberFor<T>, BoundedVec<(JobId, UnitIndex), T::MaxDrawsPerBlock>, ValueQuery>;

	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// Verifiers were drawn for a unit's proof.
		VerifiersDrawn {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifiers, in draw order.
			verifiers: Vec<T::AccountId>,
			/// The round's seed: with a verifier's account it fixes the segments that
			/// verifier samples ([`Pallet::sampled_segments`]).
			seed: [u8; 32],
			/// The first block commitments are no longer accepted in.
			commit_ends: BlockNumberFor<T>,
			/// The first block reveals are no longer accepted in.
			reveal_ends: BlockNumberFor<T>,
		},
		/// No randomness newer than the proof came within `DrawTimeout` blocks: the round
		/// is dropped and the proof relies on its challenge window alone.
		DrawExpired {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// No verifier could be drawn (none online and bonded): the proof relies on its
		/// challenge window alone.
		NoVerifiers {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A verifier committed its attestation.
		Committed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
		},
		/// A verifier revealed its attestation.
		Revealed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
			/// What it found.
			verdict: Verdict,
		},
		/// A drawn verifier did not reveal in time and was slashed.
		RevealMissed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// A verifier attested `Match` over the step a dispute then proved wrong: it was
		/// slashed, a share to the dispute's winner.
		FalseAttestation {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
			/// The disputed global step, in a segment the verifier re-executed.
			step: u32,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// A round's reveal period ended.
		RoundConcluded {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// Verifiers that attested a match.
			matched: u32,
			/// Verifiers that attested a mismatch (each opened a dispute).
			mismatched: u32,
			/// Verifiers that did not reveal.
			missed: u32,
		},
		/// A solver committed its forced-error secret for a unit it holds.
		SecretCommitted {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
		},
		/// The randomness that, with the solver's secret, decides whether the unit is
		/// forced was recorded ([`Secrets`]). The solver may commit its proof now.
		SecretRandomness {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A solver revealed its secret: the unit was not forced.
		SecretRevealed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A solver revealed its secret and the honest trace: the committed proof carries a
		/// forced error at `step`, which the secret fixed. The disputes over it were
		/// dismissed; the round's catchers are paid when it concludes, and the honest proof
		/// replaces the forced one.
		ForcedErrorRevealed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The step the solver made wrong.
			step: u32,
			/// The disputes dismissed, their bonds returned.
			dismissed: u32,
		},
		/// A solver let a unit time out after the randomness that told it whether the unit
		/// was forced had been recorded: it forfeited the unit's collateral to the jackpot.
		DesignatedUnitAbandoned {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// A solver did not reveal its secret in time and was slashed.
		SecretRevealMissed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// A forced round concluded: the verifiers that attested `Mismatch` over the forced
		/// step were paid from the jackpot, and the honest proof replaced the forced one.
		ForcedErrorPaid {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The forced step.
			step: u32,
			/// The verifiers that caught it.
			caught: Vec<T::AccountId>,
			/// What each of them was paid.
			each: BalanceOf<T>,
		},
		/// A round ended without effect: its proof was overturned or replaced first.
		RoundVoided {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
		},
		/// A profiling round concluded: the job's thresholds are set.
		ThresholdsProfiled {
			/// The job.
			job: JobId,
			/// The thresholds: the median profile times `ToleranceMargin`, capped by the
			/// job's ceilings (the ceilings themselves when no profile was revealed).
			thresholds: Distance,
			/// How many profiles were revealed.
			profiles: u32,
		},
		/// A job's thresholds were challenged: the next round drawn for one of its units
		/// profiles them again.
		ThresholdsChallenged {
			/// The job.
			job: JobId,
			/// Who challenged them.
			by: T::AccountId,
			/// The thresholds cleared.
			previous: Distance,
		},
		/// Too few verifiers were eligible for an escalation's committee (fewer than
		/// `MinEscalationCommittee` besides the solver, the submitter and the round's own
		/// verifiers): the escalation is undecided, and the proof stands.
		CommitteeTooSmall {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// How many could be drawn.
			drawn: u32,
		},
		/// A tolerance round's verifiers measured segments beyond the thresholds: the unit
		/// is held (`Challenged`) and an escalation committee will be drawn.
		EscalationOpened {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The flagged segments, which every member re-executes.
			segments: Vec<u32>,
		},
		/// An escalation committee decided.
		EscalationDecided {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The decision.
			outcome: EscalationOutcome,
			/// Members that measured a flagged segment beyond the thresholds.
			beyond: u32,
			/// Members that measured every flagged segment within them.
			within: u32,
			/// Members that did not reveal (each slashed `MissedRevealSlash`).
			missed: u32,
		},
		/// A verifier's distance lost an escalation (it flagged a proof the committee
		/// upheld, or measured a proof the committee overturned within the thresholds): it
		/// was slashed, a share to a winner.
		WrongDistance {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// An escalation committee overturned a tolerance-mode proof: its solver was
		/// slashed, and the unit went back to the pool (or failed).
		ToleranceProofRejected {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver.
			solver: T::AccountId,
			/// What it was slashed.
			slashed: BalanceOf<T>,
		},
		/// A drawn verifier revealed `Mismatch` but its dispute could not be opened (it
		/// cannot pay the challenge bond, or it already disputes the unit): the reveal
		/// stands and counts, and the verifier is not slashed for a missed reveal.
		MismatchNotDisputed {
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The verifier.
			verifier: T::AccountId,
			/// Why the dispute was not opened.
			error: DispatchError,
		},
	}

	#[pallet::error]
	pub enum Error<T> {
		/// The unit has no drawn verification round.
		NoRound,
		/// The caller was not drawn to verify this unit.
		NotDrawn,
		/// The commit period has ended.
		CommitPeriodOver,
		/// The caller already committed for this unit.
		AlreadyCommitted,
		/// The reveal period has not started: commitments are still accepted.
		RevealNotOpen,
		/// The reveal period has ended.
		RevealPeriodOver,
		/// The caller did not commit, or already revealed.
		NothingToReveal,
		/// The verdict and salt do not hash to the caller's commitment.
		CommitmentMismatch,
		/// Too many proofs wait for their draw, or secrets for their randomness; try again
		/// in a few blocks.
		DrawQueueFull,
		/// Only the solver that accepted the unit, before it commits its proof, may do this.
		NotUnitSolver,
		/// The solver already committed a secret for this unit.
		SecretAlreadyCommitted,
		/// Forced errors are on and the solver committed no secret for the unit: commit one
		/// with `commit_secret`, then the proof a block later.
		SecretNotCommitted,
		/// The randomness after the solver's secret commitment is not recorded yet: commit
		/// the proof in a block or two.
		SecretRandomnessPending,
		/// The secret, the committed proof's trace root and the other root do not hash to
		/// the solver's commitment, in the order the designation requires (the honest root
		/// first): a wrong secret or root, or the wrong proof committed.
		SecretMismatch,
		/// The unit is not forced: reveal the secret without an honest final-state opening.
		NotForced,
		/// The unit is forced: reveal the secret with the honest proof's final-state opening.
		HonestProofMissing,
		/// The verdict is not of the round's kind: `Match` or `Mismatch` in exact mode,
		/// `Measured` (with a profile exactly in a profiling round) in tolerance mode.
		WrongVerdict,
		/// A `Measured` verdict names a segment the verifier was not given.
		SegmentNotSampled,
		/// The job does not exist or is not verified in tolerance mode.
		NotToleranceJob,
		/// The job's thresholds are not profiled yet: nothing to challenge.
		NotProfiled,
		/// Only the job's submitter or a bonded solver may challenge its thresholds.
		NotEntitled,
		/// The job's thresholds were challenged `MaxThresholdChallenges` times already.
		ThresholdChallengeLimit,
		/// The caller solves one of the job's units: a party to its rounds may not move
		/// the thresholds they are judged by.
		SolvesInJob,
		/// The unit's deadline is too close to commit a forced-error secret: it must leave
		/// `SECRET_DEADLINE_MARGIN` blocks for the randomness and the proof. Let the unit go
		/// instead (it costs reputation, not collateral).
		DeadlineTooClose,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(now: BlockNumberFor<T>) -> Weight {
			Self::note_randomness(now);
			let concluded = Self::conclude_due(now);
			let drawn = Self::draw_due(now);
			let recorded = Self::record_due(now);
			Self::hook_weight(concluded, drawn, recorded)
		}

		fn integrity_test() {
			assert!(T::VerifiersPerUnit::get() > 0, "VerifiersPerUnit must be positive");
			assert!(
				T::Disputes::verifier_slots() >= T::VerifiersPerUnit::get(),
				"the disputes pallet must keep a dispute slot for every drawn verifier"
			);
			assert!(T::SamplesPerVerifier::get() > 0, "SamplesPerVerifier must be positive");
			assert!(!T::CommitPeriod::get().is_zero(), "CommitPeriod must be positive");
			assert!(!T::RevealPeriod::get().is_zero(), "RevealPeriod must be positive");
			assert!(!T::MissedRevealSlash::get().is_zero(), "MissedRevealSlash must be positive");
			// A false attestation costs more than staying silent, or silence would pay.
			assert!(
				T::FalseAttestationSlash::get() > T::MissedRevealSlash::get(),
				"FalseAttestationSlash must exceed MissedRevealSlash"
			);
			assert!(T::MaxDrawsPerBlock::get() > 0, "MaxDrawsPerBlock must be positive");
			assert!(
				T::MaxPendingDraws::get() >= T::MaxDrawsPerBlock::get(),
				"the draw queue must hold at least a block's draws"
			);
			// Truebit's bounds: forced errors are rare, and one payout leaves the jackpot for
			// the next two.
			assert!(
				T::ForcedErrorRate::get() <= Perbill::from_percent(10),
				"ForcedErrorRate must be at most 10 %"
			);
			assert!(
				!T::MaxForcedErrorPayout::get().is_zero()
					&& T::MaxForcedErrorPayout::get() <= Perbill::from_rational(1u32, 3u32),
				"MaxForcedErrorPayout must be positive and at most a third"
			);
			// The randomness of the block after the proof is first usable two blocks on.
			assert!(
				(1..=MAX_RANDOMNESS_BLOCKS).contains(&T::RandomnessBlocks::get()),
				"RandomnessBlocks must be between one and MAX_RANDOMNESS_BLOCKS"
			);
			assert!(T::RandomnessAuthors::get() >= 1, "RandomnessAuthors must be positive");
			// A seed may wait for `MAX_RANDOMNESS_BLOCKS` blocks after its commitment, and is
			// used in the block after the last.
			assert!(
				T::DrawTimeout::get() > (MAX_RANDOMNESS_BLOCKS + 1).into(),
				"DrawTimeout must leave room for the slowest seed"
			);
			// A committee outvotes the round it judges, and never ties when all reveal.
			assert!(
				T::EscalationCommittee::get() >= T::VerifiersPerUnit::get() && T::EscalationCommittee::get() % 2 == 1,
				"EscalationCommittee must be odd and at least VerifiersPerUnit"
			);
			assert!(
				(1..=T::EscalationCommittee::get()).contains(&T::MinEscalationCommittee::get()),
				"MinEscalationCommittee must be positive and at most EscalationCommittee"
			);
			// Thresholds below the profiled distance would fail honest solvers.
			assert!(T::ToleranceMargin::get() >= 1, "ToleranceMargin must be at least 1");
			assert!(
				T::MaxEscalationsPerBlock::get() > 0 && T::MaxEscalationsPerBlock::get() <= T::MaxDrawsPerBlock::get(),
				"MaxEscalationsPerBlock must be positive and at most MaxDrawsPerBlock"
			);
			assert!(
				T::InvalidProofSlash::get() > T::FalseAttestationSlash::get(),
				"InvalidProofSlash must exceed FalseAttestationSlash"
			);
			assert!(
				!T::WinnerShare::get().is_zero() && T::WinnerShare::get() < Perbill::one(),
				"WinnerShare must leave a share to each side"
			);
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Commit the caller's attestation of a unit it was drawn to verify:
		/// `blake2_256(SCALE(verdict, salt, caller))`, with a random 32-byte `salt` kept
		/// for the reveal. Accepted until the commit period ends.
		///
		/// Emits `Committed`.
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::commit())]
		pub fn commit(origin: OriginFor<T>, job: JobId, unit: UnitIndex, commitment: H256) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			Rounds::<T>::try_mutate((job, unit), |round| -> DispatchResult {
				let round = round.as_mut().ok_or(Error::<T>::NoRound)?;
				let drawn = round.drawn.as_ref().ok_or(Error::<T>::NoRound)?;
				ensure!(now < drawn.commit_ends, Error::<T>::CommitPeriodOver);
				let attestation =
					round.attestations.iter_mut().find(|a| a.verifier == who).ok_or(Error::<T>::NotDrawn)?;
				ensure!(attestation.state == AttestationState::Drawn, Error::<T>::AlreadyCommitted);
				attestation.state = AttestationState::Committed(commitment);
				Ok(())
			})?;
			Self::deposit_event(Event::Committed { job, unit, verifier: who });
			Ok(())
		}

		/// Reveal the caller's attestation: the verdict and salt it committed. Accepted from
		/// the end of the commit period until the end of the reveal period. A `Mismatch`
		/// opens a dispute over the proof with the caller as challenger and the trace root
		/// it names, which holds the disputes pallet's challenge bond from the caller.
		///
		/// Emits `Revealed`, and the disputes pallet's `DisputeOpened` for a mismatch.
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::reveal().saturating_add(T::Disputes::open_weight()))]
		pub fn reveal(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			verdict: Verdict,
			salt: [u8; 32],
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			let mut round = Rounds::<T>::get((job, unit)).ok_or(Error::<T>::NoRound)?;
			let drawn = round.drawn.as_ref().ok_or(Error::<T>::NoRound)?;
			ensure!(now >= drawn.commit_ends, Error::<T>::RevealNotOpen);
			ensure!(now < drawn.reveal_ends, Error::<T>::RevealPeriodOver);
			let attestation = round.attestations.iter_mut().find(|a| a.verifier == who).ok_or(Error::<T>::NotDrawn)?;
			let AttestationState::Committed(commitment) = attestation.state else {
				return Err(Error::<T>::NothingToReveal.into());
			};
			ensure!(Self::commitment(&verdict, &salt, &who) == commitment, Error::<T>::CommitmentMismatch);
			attestation.state = AttestationState::Revealed(verdict.clone());
			Self::check_verdict(job, unit, &round, &who, &verdict)?;
			let forced = matches!(round.secret, SolverSecret::Forced { .. });
			Rounds::<T>::insert((job, unit), round);
			let opened = match &verdict {
				// Distances are judged together when the round concludes.
				Verdict::Measured { .. } => {
					Self::deposit_event(Event::Revealed { job, unit, verifier: who, verdict });
					// The unit's proof was read for the verifier's samples.
					return Ok(Some(T::WeightInfo::reveal().saturating_add(T::DbWeight::get().reads(2))).into());
				},
				Verdict::Match => false,
				// The solver already showed the error is forced: nobody lied, nothing to dispute.
				Verdict::Mismatch { .. } if forced => false,
				// The reveal lands whatever happens to the dispute: a verifier that revealed
				// is never slashed for a missed reveal. A slot is kept for every drawn
				// verifier, so only the verifier's own failings (a bond it cannot pay, a
				// dispute of its own already open) keep it from opening.
				Verdict::Mismatch { trace_root } => match with_storage_layer(|| {
					// A failed opening changes nothing: its layer is rolled back.
					T::Disputes::open_for_verifier(who.clone(), job, unit, *trace_root)
				}) {
					Ok(()) => true,
					Err(error) => {
						Self::deposit_event(Event::MismatchNotDisputed { job, unit, verifier: who.clone(), error });
						false
					},
				},
			};
			Self::deposit_event(Event::Revealed { job, unit, verifier: who, verdict });
			let weight = T::WeightInfo::reveal();
			Ok(Some(if opened { weight.saturating_add(T::Disputes::open_weight()) } else { weight }).into())
		}

		/// Commit the caller's forced-error secret for a unit it accepted and has trained, not
		/// yet proven: `hash` is [`touchstone_primitives::forced_commitment`] of a fresh random
		/// 32-byte secret, kept for the reveal, of the trace root of its honest proof, and of
		/// the trace root of the same proof wrong at [`touchstone_primitives::forced_step`]
		/// (equal to the honest root when the unit has no such step). In a later block the
		/// chain records randomness; with the secret it decides which of the two proofs the
		/// solver must commit ([`touchstone_primitives::forced_error`]), which only the solver
		/// can tell until it reveals. Letting the unit time out after that costs the unit's
		/// collateral. While `ForcedErrorRate` is not zero, a proof is accepted only after
		/// this commitment and that randomness.
		///
		/// Emits `SecretCommitted`, and `SecretRandomness` in a later block.
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::commit_secret())]
		pub fn commit_secret(origin: OriginFor<T>, job: JobId, unit: UnitIndex, hash: H256) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_commit_secret(who, job, unit, hash)
		}

		/// Reveal the caller's forced-error secret for the unit it proved, in the round's
		/// reveal period: once every verifier's verdict is committed, so none can learn from
		/// it. `alternative` is the trace root committed beside the proof's own; the chain
		/// checks the commitment with the committed proof's root in the place the
		/// designation requires. If the unit was forced, `honest_final_state` opens the
		/// honest proof's last boundary (its final state) against `alternative`; that proof replaces the
		/// committed one when the round concludes, and every dispute over the forced proof
		/// is dismissed with its bond returned. A solver that does not reveal in time is
		/// slashed `MissedRevealSlash`.
		///
		/// Emits `SecretRevealed`, or `ForcedErrorRevealed` (and the disputes pallet's
		/// `DisputeDismissed`).
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::reveal_secret().saturating_add(T::Disputes::dismiss_all_weight()))]
		pub fn reveal_secret(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			secret: [u8; 32],
			alternative: H256,
			honest_final_state: Option<BoundaryOpening>,
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			let mut round = Rounds::<T>::get((job, unit)).ok_or(Error::<T>::NoRound)?;
			let drawn = round.drawn.as_ref().ok_or(Error::<T>::NoRound)?;
			ensure!(now >= drawn.commit_ends, Error::<T>::RevealNotOpen);
			ensure!(now < drawn.reveal_ends, Error::<T>::RevealPeriodOver);
			let proven = T::Units::proven_unit(job, unit).ok_or(Error::<T>::NoRound)?;
			ensure!(proven.solver == who && proven.trace.root == round.trace_root, Error::<T>::NotUnitSolver);
			let SolverSecret::Awaited { hash, random, rate } = round.secret else {
				return Err(Error::<T>::NothingToReveal.into());
			};
			// The step is the secret's, fixed before any sample was drawn: the solver cannot
			// move the error to where a colluding verifier looked.
			let forced_step = forced_error(&secret, &random, job, unit, rate)
				.then(|| forced_step(&secret, &Self::segments(&proven)))
				.flatten();
			let standing = round.trace_root;
			let (honest_root, forced_root) =
				if forced_step.is_some() { (alternative.0, standing) } else { (standing, alternative.0) };
			ensure!(forced_commitment(&secret, &honest_root, &forced_root) == hash.0, Error::<T>::SecretMismatch);
			let Some(step) = forced_step else {
				ensure!(honest_final_state.is_none(), Error::<T>::NotForced);
				round.secret = SolverSecret::Revealed;
				Rounds::<T>::insert((job, unit), round);
				Self::deposit_event(Event::SecretRevealed { job, unit });
				return Ok(Some(T::WeightInfo::reveal_secret()).into());
			};
			let final_state = honest_final_state.ok_or(Error::<T>::HonestProofMissing)?;
			let honest = T::Units::replacement(job, unit, honest_root, &final_state)?;
			round.secret = SolverSecret::Forced { step, honest, rate };
			Rounds::<T>::insert((job, unit), round);
			let dismissed = T::Disputes::dismiss_all(job, unit)?;
			Self::deposit_event(Event::ForcedErrorRevealed { job, unit, step, dismissed });
			Ok(().into())
		}

		/// Challenge a tolerance-mode job's profiled thresholds, as its submitter (they are
		/// too loose to catch a wrong proof) or as a bonded solver that solves none of the
		/// job's units (too tight for an honest one). They are cleared: rounds whose proofs
		/// come later are judged by the submitter's ceilings until the next round drawn for
		/// one of the job's units profiles them again. Rounds and escalations already open
		/// keep the thresholds frozen for them ([`RoundThresholds`]). At most
		/// `MaxThresholdChallenges` per job.
		///
		/// Emits `ThresholdsChallenged`.
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::challenge_thresholds().saturating_add(
			T::DbWeight::get().reads(u64::from(T::Units::max_units_per_job()))
		))]
		pub fn challenge_thresholds(origin: OriginFor<T>, job: JobId) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let info = T::Units::tolerance_job(job).ok_or(Error::<T>::NotToleranceJob)?;
			ensure!(who == info.owner || T::Nodes::is_bonded_for(&who, Role::Solver), Error::<T>::NotEntitled);
			ensure!(!T::Units::solves_in(job, &who), Error::<T>::SolvesInJob);
			let previous = info.profile.thresholds.ok_or(Error::<T>::NotProfiled)?;
			ensure!(info.profile.challenges < T::MaxThresholdChallenges::get(), Error::<T>::ThresholdChallengeLimit);
			T::Units::set_thresholds(job, None)?;
			Self::deposit_event(Event::ThresholdsChallenged { job, by: who, previous });
			Ok(())
		}
	}
}

/// Storage migrations of the verification pallet.
pub mod migrations {
	use super::*;
	use codec::{Decode, Encode};
	use polkadot_sdk::{
		frame_support::{
			pallet_prelude::BoundedVec,
			traits::{Get, GetStorageVersion, OnRuntimeUpgrade, StorageVersion},
			weights::Weight,
		},
		frame_system::pallet_prelude::BlockNumberFor,
		sp_core::H256,
		sp_runtime::Perbill,
	};
	use touchstone_primitives::previous::LearningProofV0;

	/// A round's secret as version 0 stored it: a forced round kept its honest proof in
	/// the old layout.
	#[derive(Encode, Decode)]
	enum SolverSecretV0 {
		NotRequired,
		Awaited { hash: H256, random: [u8; 32], rate: Perbill },
		Revealed,
		Forced { step: u32, honest: LearningProofV0, rate: Perbill },
		Missed,
	}

	/// A round as version 0 stored it; only its last field, the secret, changed.
	#[derive(Encode, Decode)]
	struct RoundV0<AccountId: Clone + PartialEq + Eq + core::fmt::Debug, BlockNumber, MaxVerifiers: Get<u32>, MaxCommittee: Get<u32>> {
		trace_root: [u8; 32],
		committed_at: BlockNumber,
		drawn: Option<DrawnRound<BlockNumber>>,
		kind: RoundKind<AccountId, MaxVerifiers>,
		attestations: BoundedVec<Attestation<AccountId>, MaxCommittee>,
		concluded: bool,
		secret: SolverSecretV0,
	}

	/// Version 0 to 1: a forced round's honest proof loses its `final_model_hash` (the
	/// final model is named by its proven final state root). Rewrites every round; a round
	/// exists only for a unit with a proof not yet finalized, so at most `MaxOpenUnits`.
	pub struct DropUnprovenModelHashes<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for DropUnprovenModelHashes<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 1 {
				return T::DbWeight::get().reads(1);
			}
			let mut count = 0u64;
			Rounds::<T>::translate::<RoundV0<T::AccountId, BlockNumberFor<T>, T::VerifiersPerUnit, T::EscalationCommittee>, _>(
				|_, old| {
					count = count.saturating_add(1);
					let secret = match old.secret {
						SolverSecretV0::NotRequired => SolverSecret::NotRequired,
						SolverSecretV0::Awaited { hash, random, rate } => SolverSecret::Awaited { hash, random, rate },
						SolverSecretV0::Revealed => SolverSecret::Revealed,
						SolverSecretV0::Forced { step, honest, rate } => SolverSecret::Forced { step, honest: honest.into(), rate },
						SolverSecretV0::Missed => SolverSecret::Missed,
					};
					Some(Round {
						trace_root: old.trace_root,
						committed_at: old.committed_at,
						drawn: old.drawn,
						kind: old.kind,
						attestations: old.attestations,
						concluded: old.concluded,
						secret,
					})
				},
			);
			StorageVersion::new(1).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(count.saturating_add(1), count.saturating_add(1))
		}
	}

	/// Version 1 to 2: the beacon's entries name their blocks' authors. The old entries are
	/// dropped, not rewritten: their authors are unknown, and the beacon refills from the
	/// next block (seeds waiting for it wait a few blocks more).
	pub struct ResetBeacon<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for ResetBeacon<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 2 {
				return T::DbWeight::get().reads(1);
			}
			Beacon::<T>::kill();
			LastAuthor::<T>::kill();
			StorageVersion::new(2).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(1, 3)
		}
	}

	/// The count of rounds each verifier was drawn in, as version 2 stored it.
	#[polkadot_sdk::frame_support::storage_alias]
	type DrawnRounds<T: Config> = StorageMap<
		Pallet<T>,
		polkadot_sdk::frame_support::Blake2_128Concat,
		<T as polkadot_sdk::frame_system::Config>::AccountId,
		u32,
	>;

	/// Version 2 to 3: each verifier's count of rounds (`DrawnRounds`) becomes an index of
	/// them (`VerifierRounds`), which a verifier reads by its own keys. Built from the
	/// rounds themselves; a round exists only for a unit with a proof not yet finalized,
	/// so at most `MaxOpenUnits` rounds and one count per registered verifier.
	pub struct IndexVerifierRounds<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for IndexVerifierRounds<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 3 {
				return T::DbWeight::get().reads(1);
			}
			let (mut reads, mut writes) = (1u64, 1u64);
			for (key, round) in Rounds::<T>::iter() {
				reads = reads.saturating_add(1);
				for attestation in Pallet::<T>::drawn_in(&round) {
					VerifierRounds::<T>::insert(&attestation.verifier, key, ());
					writes = writes.saturating_add(1);
				}
			}
			let cleared = DrawnRounds::<T>::clear(u32::MAX, None);
			writes = writes.saturating_add(u64::from(cleared.unique));
			StorageVersion::new(3).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(reads, writes)
		}
	}

	#[cfg(test)]
	#[allow(clippy::unwrap_used)]
	mod tests {
		use super::*;
		use crate::mock::*;
		use polkadot_sdk::{frame_support::storage::unhashed, sp_runtime::FixedU64};
		use touchstone_primitives::{LearningProof, TrainingMetrics};

		/// A version 2 chain's counts of drawn rounds become the index of each verifier's
		/// rounds, built from the rounds; the counts are gone.
		#[test]
		fn version_2_counts_become_each_verifiers_index_of_rounds() {
			new_test_ext(&[]).execute_with(|| {
				let round = |verifiers: &[u64]| Round {
					trace_root: [5; 32],
					committed_at: 1,
					drawn: Some(DrawnRound { seed: [6; 32], commit_ends: 3, reveal_ends: 4 }),
					kind: RoundKind::Exact,
					attestations: BoundedVec::truncate_from(
						verifiers
							.iter()
							.map(|verifier| Attestation { verifier: *verifier, state: AttestationState::Drawn })
							.collect(),
					),
					concluded: false,
					secret: SolverSecret::NotRequired,
				};
				Rounds::<Test>::insert((0, 0), round(&[7, 8]));
				Rounds::<Test>::insert((0, 1), round(&[8]));
				DrawnRounds::<Test>::insert(7, 1);
				DrawnRounds::<Test>::insert(8, 2);
				StorageVersion::new(2).put::<Pallet<Test>>();
				IndexVerifierRounds::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 3);
				assert_eq!(Pallet::<Test>::rounds_of(&7), alloc::vec![(0, 0)]);
				let mut rounds = Pallet::<Test>::rounds_of(&8);
				rounds.sort();
				assert_eq!(rounds, alloc::vec![(0, 0), (0, 1)]);
				assert_eq!(DrawnRounds::<Test>::iter().count(), 0);
				// Run again, it changes nothing.
				IndexVerifierRounds::<Test>::on_runtime_upgrade();
				assert_eq!(VerifierRounds::<Test>::iter().count(), 3);
			});
		}

		/// A beacon stored in version 1's layout, without authors, is dropped, and the
		/// hook refills it from the next block.
		#[test]
		fn version_1_beacons_are_dropped_and_refill() {
			new_test_ext(&[]).execute_with(|| {
				let old: alloc::vec::Vec<(u64, [u8; 32])> = alloc::vec![(1, [1; 32]), (2, [2; 32])];
				unhashed::put_raw(&Beacon::<Test>::hashed_key(), &old.encode());
				StorageVersion::new(1).put::<Pallet<Test>>();
				ResetBeacon::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
				assert!(Beacon::<Test>::get().is_empty());
				run_to_block(System::block_number() + 2);
				assert_eq!(Beacon::<Test>::get().len(), 2);
			});
		}

		/// A round stored in version 0's layout, its forced secret's honest proof with a
		/// model hash, reads back as it was, less that hash; every other secret is kept.
		#[test]
		fn version_0_rounds_lose_only_the_honest_proofs_model_hash() {
			new_test_ext(&[]).execute_with(|| {
				let honest = LearningProof {
					trace_root: [1; 32].into(),
					steps: 8,
					start_state_root: [2; 32].into(),
					final_state_root: [3; 32].into(),
					metrics: TrainingMetrics { loss: FixedU64::from_rational(1, 2), accuracy: Perbill::from_percent(50) },
				};
				let secrets = [
					(SolverSecretV0::Revealed, SolverSecret::Revealed),
					(
						SolverSecretV0::Forced {
							step: 4,
							honest: LearningProofV0 {
								trace_root: honest.trace_root,
								steps: honest.steps,
								start_state_root: honest.start_state_root,
								final_state_root: honest.final_state_root,
								final_model_hash: [9; 32].into(),
								metrics: honest.metrics,
							},
							rate: Perbill::from_percent(1),
						},
						SolverSecret::Forced { step: 4, honest, rate: Perbill::from_percent(1) },
					),
				];
				let mut expected = alloc::vec::Vec::new();
				for (unit, (old_secret, new_secret)) in secrets.into_iter().enumerate() {
					let key = (0u64, unit as u32);
					let old: RoundV0<u64, u64, <Test as Config>::VerifiersPerUnit, <Test as Config>::EscalationCommittee> =
						RoundV0 {
							trace_root: [5; 32],
							committed_at: 1,
							drawn: Some(DrawnRound { seed: [6; 32], commit_ends: 3, reveal_ends: 4 }),
							kind: RoundKind::Exact,
							attestations: Default::default(),
							concluded: false,
							secret: old_secret,
						};
					unhashed::put_raw(&Rounds::<Test>::hashed_key_for(key), &old.encode());
					let new = Round {
						trace_root: [5; 32],
						committed_at: 1,
						drawn: Some(DrawnRound { seed: [6; 32], commit_ends: 3, reveal_ends: 4 }),
						kind: RoundKind::Exact,
						attestations: Default::default(),
						concluded: false,
						secret: new_secret,
					};
					expected.push((key, new));
				}
				StorageVersion::new(0).put::<Pallet<Test>>();
				DropUnprovenModelHashes::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
				ResetBeacon::<Test>::on_runtime_upgrade();
				assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
				for (key, round) in expected {
					assert_eq!(Rounds::<Test>::get(key), Some(round));
				}
			});
		}
	}
}

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
//! 3. **Commit.** For `CommitPeriod` blocks each drawn verifier re-executes its
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
//!    afresh measure the flagged segments, and their majority overturns the proof (the
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
	use codec::Encode;
	use frame_support::{
		defensive,
		pallet_prelude::*,
		storage::with_storage_layer,
		traits::{
			fungible::{Inspect, Mutate},
			tokens::{Fortitude, Preservation},
			Randomness,
		},
	};
	use frame_system::pallet_prelude::*;
	use polkadot_sdk::{
		sp_core::H256,
		sp_io::hashing::blake2_256,
		sp_runtime::{
			traits::{One, Saturating, Zero},
			Perbill,
		},
	};
	use touchstone_primitives::{
		traits::{AttestationJudge, ComputeNodes, OpenDispute, Slash, UnitProofs, VerifierDraw},
		forced_commitment, forced_error, forced_step, referee::StateOpening, Distance, JobId, Role, Segments,
		SlashReason, UnitIndex, VerificationMode,
	};

	/// The most blocks' randomness a seed may mix ([`Config::RandomnessBlocks`]).
	pub const MAX_RANDOMNESS_BLOCKS: u32 = 8;

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(0);

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
		/// `RandomnessBlocks` of them ([`Beacon`]).
		type Randomness: Randomness<H256, BlockNumberFor<Self>>;

		/// How many blocks' randomness, each known only after a commitment (a proof, or a
		/// solver's forced-error secret), decide it together: a draw's verifiers and a
		/// unit's designation. Each block's randomness is known in advance to its author
		/// alone, so only an author of every one of these blocks could know the seed when
		/// the commitment was made. At most [`MAX_RANDOMNESS_BLOCKS`].
		#[pallet::constant]
		type RandomnessBlocks: Get<u32>;

		/// Verifiers drawn for each proof.
		#[pallet::constant]
		type VerifiersPerUnit: Get<u32>;

		/// Checkpoint segments each verifier re-executes.
		#[pallet::constant]
		type SamplesPerVerifier: Get<u32>;

		/// Blocks after the draw in which verifiers commit their attestations.
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
		/// verifiers, drawn afresh. At least `VerifiersPerUnit`, and odd.
		#[pallet::constant]
		type EscalationCommittee: Get<u32>;

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

	/// How many rounds each verifier is drawn in, from the draw until the round is gone
	/// (its unit final, or its proof void). A verifier cannot drop its bond while it has
	/// any: a `Match` can still be proven false until the unit is final.
	#[pallet::storage]
	pub type DrawnRounds<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, u32, OptionQuery>;

	/// Solvers' forced-error secret commitments, by unit, from when the solver takes the
	/// unit until its proof is committed or its solver loses the unit.
	#[pallet::storage]
	pub type Secrets<T: Config> = StorageMap<_, Twox64Concat, (JobId, UnitIndex), SecretCommitmentOf<T>>;

	/// Secret commitments waiting for randomness newer than themselves, oldest first.
	#[pallet::storage]
	pub type PendingSecrets<T: Config> =
		StorageValue<_, BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>, ValueQuery>;

	/// The randomness of the last `RandomnessBlocks` blocks, oldest first, each with the
	/// block from which it is known: seeds are drawn from all of them together, once every
	/// one is newer than the commitment they decide.
	#[pallet::storage]
	pub type Beacon<T: Config> =
		StorageValue<_, BoundedVec<(BlockNumberFor<T>, [u8; 32]), ConstU32<MAX_RANDOMNESS_BLOCKS>>, ValueQuery>;

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
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn on_initialize(now: BlockNumberFor<T>) -> Weight {
			Self::note_randomness();
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
			assert!(
				T::DrawTimeout::get() > T::RandomnessBlocks::get().into(),
				"DrawTimeout must leave room for a draw"
			);
			// A committee outvotes the round it judges, and never ties when all reveal.
			assert!(
				T::EscalationCommittee::get() >= T::VerifiersPerUnit::get() && T::EscalationCommittee::get() % 2 == 1,
				"EscalationCommittee must be odd and at least VerifiersPerUnit"
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
			ensure!(T::Units::assigned_solver(job, unit).as_ref() == Some(&who), Error::<T>::NotUnitSolver);
			// One secret per solver and unit: a second, once the randomness is known, would
			// let the solver choose whether it is forced.
			ensure!(
				Secrets::<T>::get((job, unit)).is_none_or(|commitment| commitment.solver != who),
				Error::<T>::SecretAlreadyCommitted
			);
			Self::enqueue::<PendingSecrets<T>>((job, unit))?;
			let committed_at = frame_system::Pallet::<T>::block_number();
			let rate = T::ForcedErrorRate::get();
			Secrets::<T>::insert((job, unit), SecretCommitment { solver: who.clone(), hash, committed_at, rate, random: None });
			Self::deposit_event(Event::SecretCommitted { job, unit, solver: who });
			Ok(())
		}

		/// Reveal the caller's forced-error secret for the unit it proved, in the round's
		/// reveal period: once every verifier's verdict is committed, so none can learn from
		/// it. `alternative` is the trace root committed beside the proof's own; the chain
		/// checks the commitment with the committed proof's root in the place the
		/// designation requires. If the unit was forced, `honest_final_state` opens the
		/// honest proof's final state against `alternative`; that proof replaces the
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
			honest_final_state: Option<StateOpening>,
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let now = frame_system::Pallet::<T>::block_number();
			let mut round = Rounds::<T>::get((job, unit)).ok_or(Error::<T>::NoRound)?;
			let drawn = round.drawn.as_ref().ok_or(Error::<T>::NoRound)?;
			ensure!(now >= drawn.commit_ends, Error::<T>::RevealNotOpen);
			ensure!(now < drawn.reveal_ends, Error::<T>::RevealPeriodOver);
			let proven = T::Units::proven_unit(job, unit).ok_or(Error::<T>::NoRound)?;
			ensure!(proven.solver == who && proven.trace.trace_root == round.trace_root, Error::<T>::NotUnitSolver);
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
		fn round_samples(job: JobId, unit: UnitIndex, round: &RoundOf<T>, verifier: &T::AccountId) -> Option<Vec<u32>> {
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
		fn check_verdict(
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

		/// Whether a revealed verdict endorses the proof: `Match`, or a distance within
		/// `bound` (the job's thresholds).
		fn endorses(verdict: &Verdict, bound: Option<&Distance>) -> bool {
			match verdict {
				Verdict::Match => true,
				Verdict::Mismatch { .. } => false,
				Verdict::Measured { distance, .. } => bound.is_some_and(|bound| distance.within(bound)),
			}
		}

		/// The thresholds a tolerance-mode job's distances are judged by now: the profiled
		/// ones, or the submitter's ceilings until they are profiled.
		fn bound(job: JobId, unit: UnitIndex) -> Option<Distance> {
			let info = T::Units::tolerance_job(job)?;
			Some(Self::thresholds_of((job, unit), &info).unwrap_or(info.ceiling))
		}

		/// The thresholds the unit's round is judged by: those frozen for it, else the job's
		/// current ones; `None` while the job is unprofiled.
		fn thresholds_of(key: (JobId, UnitIndex), info: &touchstone_primitives::traits::ToleranceJob<T::AccountId>) -> Option<Distance> {
			RoundThresholds::<T>::get(key).or(info.profile.thresholds)
		}

		/// Freezes the job's current thresholds for the unit's round, unless frozen already
		/// or the job has none (the round then profiles them).
		fn freeze_thresholds(job: JobId, unit: UnitIndex) {
			if RoundThresholds::<T>::contains_key((job, unit)) {
				return;
			}
			if let Some(thresholds) = T::Units::tolerance_job(job).and_then(|info| info.profile.thresholds) {
				RoundThresholds::<T>::insert((job, unit), thresholds);
			}
		}

		/// The most verifiers one draw picks: an escalation committee's.
		fn largest_draw() -> u32 {
			T::EscalationCommittee::get().max(T::VerifiersPerUnit::get())
		}

		/// The checkpoint segments of the proven unit.
		fn segments(proven: &ProvenUnitOf<T>) -> Segments {
			Segments::new(proven.trace.first_step, proven.trace.steps, proven.hyper.checkpoint_interval)
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
			let proven = match T::Units::proven_unit(job, unit) {
				Some(proven) if proven.trace.trace_root == round.trace_root => proven,
				_ => {
					Self::remove_round((job, unit));
					Self::deposit_event(Event::RoundVoided { job, unit });
					return;
				},
			};
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

		/// Marks every drawn verifier that did not reveal as `Missed` and slashes it
		/// `MissedRevealSlash`; returns how many missed.
		fn slash_unrevealed<S: Get<u32>>(
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

		/// The thresholds a concluding tolerance round judges by. A profiling round of a job
		/// still without thresholds sets them: the componentwise median of the revealed
		/// profiles times `ToleranceMargin`, at least `ThresholdFloor` of the job's ceilings
		/// and at most the ceilings. With fewer than `MinProfiles` profiles revealed the job
		/// stays unprofiled (the next round profiles) and this round is judged by the
		/// ceilings.
		fn settle_thresholds(
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
		fn escalate(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, flagged: Vec<u32>, now: BlockNumberFor<T>) {
			let Some(drawn) = round.drawn.clone() else { return };
			if Self::enqueue::<PendingDraws<T>>((job, unit)).is_err() || T::Units::open_challenge(job, unit).is_err()
			{
				return Self::escalation_undecided(job, unit, round);
			}
			// The tolerance round's verifiers stay counted in `DrawnRounds`: the committee's
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
		fn escalation_undecided(job: JobId, unit: UnitIndex, mut round: RoundOf<T>) {
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
		fn conclude_escalation(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, proven: &ProvenUnitOf<T>) {
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
		fn slash_losers(job: JobId, unit: UnitIndex, losers: &[T::AccountId], winners: &[T::AccountId]) {
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

		/// Slashes `MissedRevealSlash` from `who`'s bond for `role`, for a reveal it owed and
		/// did not make; returns what was taken. A party that left the registry and withdrew
		/// has nothing left to take: the slash takes what there is.
		fn slash_missed(who: &T::AccountId, role: Role, reason: SlashReason) -> BalanceOf<T> {
			T::Slash::slash(who, role, T::MissedRevealSlash::get(), reason, None).unwrap_or_else(|_| Zero::zero())
		}

		/// Pays the verifiers of a forced round that caught its error from the jackpot: those
		/// that revealed `Mismatch` and re-executed the segment holding the forced `step`.
		/// Together they get what the unit pays into the jackpot divided by the forced-error
		/// rate, so the jackpot's expected outflow is its inflow whatever the price, but at
		/// most `MaxForcedErrorPayout` of the jackpot; they share it equally.
		fn pay_catchers(
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

		/// Adds this block's randomness to the [`Beacon`], if it is newer than the newest
		/// there, and keeps the last `RandomnessBlocks`. Randomness known since genesis (a
		/// stalled source, or the first block's) is never added: no commitment precedes it.
		pub(crate) fn note_randomness() {
			let (random, known_since) = T::Randomness::random(b"touchstone/beacon");
			if known_since.is_zero() {
				return;
			}
			Beacon::<T>::mutate(|beacon| {
				if beacon.last().is_some_and(|(newest, _)| *newest >= known_since) {
					return;
				}
				let keep = T::RandomnessBlocks::get().min(MAX_RANDOMNESS_BLOCKS) as usize;
				let mut blocks = beacon.to_vec();
				blocks.push((known_since, random.0));
				let excess = blocks.len().saturating_sub(keep);
				*beacon = BoundedVec::truncate_from(blocks.split_off(excess));
			});
		}

		/// The seed for `subject` from the `beacon`, once it holds `RandomnessBlocks` blocks'
		/// randomness all known after block `committed_at`: `blake2_256` of the subject and
		/// every one of them. `None` until then.
		pub(crate) fn seed_after(
			beacon: &[(BlockNumberFor<T>, [u8; 32])],
			committed_at: BlockNumberFor<T>,
			subject: &[u8],
		) -> Option<[u8; 32]> {
			let full = beacon.len() >= T::RandomnessBlocks::get() as usize;
			let after = beacon.first().is_some_and(|(oldest, _)| *oldest > committed_at);
			let values: Vec<[u8; 32]> = beacon.iter().map(|(_, value)| *value).collect();
			(full && after).then(|| blake2_256(&(subject, values).encode()))
		}

		/// Appends `key` to the queue `Q` unless it is queued already: an entry stands for
		/// its unit, whose current state the hook reads when it reaches it.
		pub(crate) fn enqueue<Q>(key: (JobId, UnitIndex)) -> DispatchResult
		where
			Q: frame_support::storage::StorageValue<
				BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>,
				Query = BoundedVec<(JobId, UnitIndex), T::MaxPendingDraws>,
			>,
		{
			Q::try_mutate(|queue| {
				if queue.contains(&key) {
					return Ok(());
				}
				queue.try_push(key).map_err(|_| Error::<T>::DrawQueueFull.into())
			})
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

		/// Walks a queue of units in commitment order, up to `limit` handled: stale and
		/// handled entries leave it, and the first entry that must wait stops the walk,
		/// since every later one waits too.
		fn walk_queue<S: Get<u32>>(
			queue: &BoundedVec<(JobId, UnitIndex), S>,
			limit: u32,
			mut handle: impl FnMut((JobId, UnitIndex)) -> Queued,
		) -> Walk<S> {
			let (mut handled, mut stale, mut taken) = (0u32, 0u32, 0usize);
			for key in queue.iter().copied() {
				if handled >= limit {
					break;
				}
				match handle(key) {
					Queued::Stale => stale = stale.saturating_add(1),
					Queued::Wait => break,
					Queued::Handled => handled = handled.saturating_add(1),
				}
				taken = taken.saturating_add(1);
			}
			let rest = (taken > 0).then(|| BoundedVec::truncate_from(queue.iter().skip(taken).copied().collect()));
			Walk { handled, stale, rest }
		}

		/// The weight of the block hook that concluded `concluded` rounds (so many of them
		/// escalations), drew `drawn` (so many of them escalation committees) and recorded
		/// `recorded` secrets' randomness, walking past the stale entries both counts name (a
		/// read each). Each count is at most `MaxDrawsPerBlock` (`MaxSecretsPerBlock` for the
		/// secrets), the escalations at most `MaxEscalationsPerBlock`, and the stale entries
		/// at most a queue's bound.
		pub fn hook_weight(concluded: HookCount, drawn: HookCount, recorded: HookCount) -> Weight {
			// A draw's benchmark picks a round from a pool of online verifiers; the staking
			// pallet's bound on its picks covers draws that skip offline ones.
			let draw = |count: u32| T::WeightInfo::draw_round().saturating_add(T::Draw::draw_weight(count));
			let plain = |count: HookCount| u64::from(count.all.saturating_sub(count.escalations));
			// `on_initialize_idle` is measured before secrets were queued: one more read; and
			// before the beacon: its read and write, and the randomness source's read.
			T::WeightInfo::on_initialize_idle()
				.saturating_add(T::DbWeight::get().reads_writes(3, 1))
				.saturating_add(Self::conclusion_weight().saturating_mul(plain(concluded)))
				.saturating_add(Self::escalation_conclusion_weight().saturating_mul(u64::from(concluded.escalations)))
				.saturating_add(draw(T::VerifiersPerUnit::get()).saturating_mul(plain(drawn)))
				.saturating_add(draw(Self::largest_draw()).saturating_mul(u64::from(drawn.escalations)))
				.saturating_add(T::WeightInfo::record_randomness().saturating_mul(u64::from(recorded.all)))
				.saturating_add(T::DbWeight::get().reads(u64::from(drawn.stale.saturating_add(recorded.stale))))
		}

		/// The weight of concluding one round at its worst: every verifier slashed, and a
		/// forced round's catchers paid, its disputes dismissed and its proof replaced.
		fn conclusion_weight() -> Weight {
			let verifiers = T::VerifiersPerUnit::get();
			T::WeightInfo::conclude_round(verifiers)
				.saturating_add(Self::payment_weight().saturating_mul(u64::from(verifiers).saturating_add(1)))
				.saturating_add(T::Disputes::dismiss_all_weight())
				.saturating_add(Self::replacement_weight())
				// A tolerance round reads the job's thresholds, sets them, and may queue an
				// escalation and hold the unit.
				.saturating_add(T::DbWeight::get().reads_writes(3, 3))
		}

		/// The weight of concluding one escalation at its worst: the committee and the round
		/// it judges slashed (the solver too), each paying a winner, the thresholds read and
		/// the unit overturned with every later step range of the largest job.
		fn escalation_conclusion_weight() -> Weight {
			let judged = T::VerifiersPerUnit::get().saturating_add(T::EscalationCommittee::get());
			T::WeightInfo::conclude_round(judged)
				.saturating_add(Self::payment_weight().saturating_mul(u64::from(judged).saturating_add(1)))
				.saturating_add(T::Units::overturn_weight(T::Units::max_units_per_job().saturating_sub(1)))
				.saturating_add(T::DbWeight::get().reads_writes(1, 1))
		}

		/// Replacing a forced proof: the tasks pallet reads and writes the job and unit, and
		/// this pallet queues the new round, as for a proof committed (about 30 µs).
		fn replacement_weight() -> Weight {
			Weight::from_parts(30_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(4, 4))
		}

		/// Draws the verifiers of queued proofs whose randomness is known, and drops those
		/// past `DrawTimeout`, up to `MaxDrawsPerBlock` in all and `MaxEscalationsPerBlock`
		/// escalation committees; returns how many, and how many were escalations.
		pub(crate) fn draw_due(now: BlockNumberFor<T>) -> HookCount {
			let queue = PendingDraws::<T>::get();
			let beacon = Beacon::<T>::get();
			let mut escalations = 0u32;
			let drawn = Self::walk_queue(&queue, T::MaxDrawsPerBlock::get(), |(job, unit)| {
				let Some(round) = Rounds::<T>::get((job, unit)) else { return Queued::Stale };
				if round.drawn.is_some() {
					// A duplicate entry of a unit proven again: already drawn.
					return Queued::Stale;
				}
				let escalation = matches!(round.kind, RoundKind::Escalation { .. });
				if escalation {
					// Its conclusion may overturn a proof and roll a job back: few a block.
					if escalations >= T::MaxEscalationsPerBlock::get() {
						return Queued::Wait;
					}
					escalations = escalations.saturating_add(1);
				}
				// Nothing the solver chose goes into the seed (not its trace root, which it
				// could grind), and randomness known at or before the commitment's block
				// could have been known to the solver: wait until every block is newer.
				let subject = (b"touchstone/verification", job, unit, round.committed_at, escalation).encode();
				if let Some(seed) = Self::seed_after(&beacon, round.committed_at, &subject) {
					Self::draw(job, unit, round, seed, now);
				} else if now <= Self::draw_deadline(&round) {
					return Queued::Wait;
				} else {
					// Counted as a draw, so expiries share the per-block bound and its weight.
					Self::deposit_event(Event::DrawExpired { job, unit });
					// The solver still owes its secret: a round without verifiers takes it.
					if matches!(round.kind, RoundKind::Escalation { .. }) {
						Self::escalation_undecided(job, unit, round);
					} else if matches!(round.secret, SolverSecret::Awaited { .. }) {
						Self::open_periods(job, unit, round, [0; 32], Vec::new(), now);
					} else {
						Self::remove_round((job, unit));
					}
				}
				Queued::Handled
			});
			if let Some(rest) = drawn.rest {
				PendingDraws::<T>::put(rest);
			}
			HookCount { all: drawn.handled, escalations, stale: drawn.stale }
		}

		/// Draws a round's verifiers (an escalation's committee) from `seed` and opens its
		/// commit period.
		pub(crate) fn draw(job: JobId, unit: UnitIndex, mut round: RoundOf<T>, seed: [u8; 32], now: BlockNumberFor<T>) {
			let proven = match T::Units::proven_unit(job, unit) {
				Some(proven) if proven.trace.trace_root == round.trace_root => proven,
				_ => {
					Self::remove_round((job, unit));
					Self::deposit_event(Event::RoundVoided { job, unit });
					return;
				},
			};
			let escalation = matches!(round.kind, RoundKind::Escalation { .. });
			if !escalation {
				round.kind = match proven.verification {
					VerificationMode::Exact => RoundKind::Exact,
					VerificationMode::Tolerance { .. } => {
						Self::freeze_thresholds(job, unit);
						RoundKind::Tolerance { profiling: !RoundThresholds::<T>::contains_key((job, unit)) }
					},
				};
			}
			let count = if escalation { T::EscalationCommittee::get() } else { T::VerifiersPerUnit::get() };
			let verifiers = T::Draw::draw_verifiers(&seed, count, &[proven.solver, proven.owner]);
			if verifiers.is_empty() {
				Self::deposit_event(Event::NoVerifiers { job, unit });
				if escalation {
					return Self::escalation_undecided(job, unit, round);
				}
				// The solver still owes its secret: a forced proof must be replaced even
				// when nobody could check it.
				if matches!(round.secret, SolverSecret::Awaited { .. }) {
					Self::open_periods(job, unit, round, seed, Vec::new(), now);
				} else {
					Self::remove_round((job, unit));
				}
				return;
			}
			Self::open_periods(job, unit, round, seed, verifiers, now);
		}

		/// Opens a round's commit and reveal periods for `verifiers`, drawn from `seed`.
		fn open_periods(
			job: JobId,
			unit: UnitIndex,
			mut round: RoundOf<T>,
			seed: [u8; 32],
			verifiers: Vec<T::AccountId>,
			now: BlockNumberFor<T>,
		) {
			let commit_ends = now.saturating_add(T::CommitPeriod::get());
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
				DrawnRounds::<T>::mutate(verifier, |count| *count = Some(count.unwrap_or(0).saturating_add(1)));
			}
			Rounds::<T>::insert((job, unit), round);
			Self::deposit_event(Event::VerifiersDrawn { job, unit, verifiers, seed, commit_ends, reveal_ends });
		}

		/// One payment to an account outside the benchmarked calls: a transfer from a hold,
		/// as a solver's pay from escrow (the hold and both accounts: 3 reads, 3 writes,
		/// about 40 µs). It bounds a share of a slash paid to a dispute's winner too.
		fn payment_weight() -> Weight {
			Weight::from_parts(40_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(3, 3))
		}

		/// Every verifier drawn in a round: its attestations, and an escalation's tolerance
		/// round's verifiers, whom the committee judges.
		fn drawn_in(round: &RoundOf<T>) -> impl Iterator<Item = &Attestation<T::AccountId>> {
			let judged = match &round.kind {
				RoundKind::Escalation { verifiers, .. } => &verifiers[..],
				RoundKind::Exact | RoundKind::Tolerance { .. } => &[],
			};
			round.attestations.iter().chain(judged.iter())
		}

		/// Removes a unit's round, and counts it off each of its verifiers' `DrawnRounds`.
		fn remove_round(key: (JobId, UnitIndex)) -> Option<RoundOf<T>> {
			RoundThresholds::<T>::remove(key);
			let round = Rounds::<T>::take(key)?;
			for attestation in Self::drawn_in(&round) {
				DrawnRounds::<T>::mutate_exists(&attestation.verifier, |count| {
					*count = count.and_then(|count| count.checked_sub(1)).filter(|count| *count > 0);
				});
			}
			Some(round)
		}

		/// The last block a round may be drawn in.
		fn draw_deadline(round: &RoundOf<T>) -> BlockNumberFor<T> {
			round.committed_at.saturating_add(T::DrawTimeout::get())
		}

		/// Checks the pallet's invariants:
		/// - every undrawn round is queued (a queued unit whose proof was dropped has no
		///   round, and its entry is skipped);
		/// - a drawn round has at most `VerifiersPerUnit` distinct verifiers, at least one
		///   unless it stays only to take its solver's secret, and closes after it opened;
		/// - a round still open is listed to close at its reveal end; a concluded one has
		///   no attestation left unrevealed and owes no secret;
		/// - every secret commitment waiting for randomness is queued;
		/// - every frozen threshold belongs to a round;
		/// - the beacon holds at most `RandomnessBlocks` blocks' randomness, oldest first.
		#[cfg(any(feature = "try-runtime", feature = "std"))]
		pub fn do_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			let beacon = Beacon::<T>::get();
			ensure!(beacon.len() <= T::RandomnessBlocks::get() as usize, "the beacon holds too many blocks");
			ensure!(beacon.windows(2).all(|pair| pair[0].0 < pair[1].0), "the beacon is out of order");
			for (key, round) in Rounds::<T>::iter() {
				let escalation = matches!(round.kind, RoundKind::Escalation { .. });
				let Some(drawn) = round.drawn.as_ref() else {
					// An escalation no committee could be drawn for is decided undrawn.
					if round.concluded {
						ensure!(escalation, "a round concluded before its draw");
						continue;
					}
					ensure!(PendingDraws::<T>::get().contains(&key), "an undrawn round not queued");
					continue;
				};
				let count = round.attestations.len() as u32;
				// A round drawn empty stays only to take its solver's secret.
				let owes_secret = matches!(round.secret, SolverSecret::Awaited { .. } | SolverSecret::Forced { .. });
				ensure!(count >= 1 || owes_secret || round.concluded, "drawn round of a wrong size");
				let size = if escalation { T::EscalationCommittee::get() } else { T::VerifiersPerUnit::get() };
				ensure!(count <= size, "drawn round of a wrong size");
				for (i, attestation) in round.attestations.iter().enumerate() {
					ensure!(
						!round.attestations.iter().skip(i.saturating_add(1)).any(|a| a.verifier == attestation.verifier),
						"a verifier drawn twice"
					);
				}
				ensure!(drawn.commit_ends < drawn.reveal_ends, "a round closes before its reveals open");
				if round.concluded {
					ensure!(
						round.attestations.iter().all(|a| matches!(
							a.state,
							AttestationState::Revealed(_) | AttestationState::Missed
						)),
						"a concluded round with an attestation pending"
					);
					ensure!(
						!matches!(round.secret, SolverSecret::Awaited { .. } | SolverSecret::Forced { .. }),
						"a concluded round owes a secret"
					);
				} else {
					ensure!(Closing::<T>::get(drawn.reveal_ends).contains(&key), "an open round not set to close");
				}
			}
			// Every verifier's count of rounds is the rounds it is drawn in.
			let mut drawn_in = alloc::collections::BTreeMap::<T::AccountId, u32>::new();
			for (_, round) in Rounds::<T>::iter() {
				for attestation in Self::drawn_in(&round) {
					let count = drawn_in.entry(attestation.verifier.clone()).or_default();
					*count = count.saturating_add(1);
				}
			}
			ensure!(
				DrawnRounds::<T>::iter().collect::<alloc::collections::BTreeMap<_, _>>() == drawn_in,
				"a verifier's count of drawn rounds is not the rounds it is drawn in"
			);
			let queued = PendingSecrets::<T>::get();
			for (key, commitment) in Secrets::<T>::iter() {
				ensure!(commitment.random.is_some() || queued.contains(&key), "a secret waiting for randomness not queued");
				// A proof takes its secret; work dropped before one drops it.
				ensure!(
					T::Units::assigned_solver(key.0, key.1).as_ref() == Some(&commitment.solver),
					"a secret of a unit its solver no longer works on"
				);
			}
			for (key, _) in RoundThresholds::<T>::iter() {
				ensure!(Rounds::<T>::contains_key(key), "frozen thresholds of no round");
			}
			Ok(())
		}
	}

	impl<T: Config> touchstone_primitives::traits::ActiveWork<T::AccountId, BalanceOf<T>> for Pallet<T> {
		fn active_work(who: &T::AccountId, role: Role) -> u32 {
			match role {
				Role::Verifier => DrawnRounds::<T>::get(who).unwrap_or(0),
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
			let secret = if replacing || T::ForcedErrorRate::get().is_zero() {
				SolverSecret::NotRequired
			} else if T::Units::tolerance_job(job).is_some() {
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

		fn on_abandoned_weight() -> Weight {
			// The secret and the job read, the solver's bond, node and the jackpot written.
			Self::on_proof_dropped_weight().saturating_add(T::DbWeight::get().reads_writes(4, 3))
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
			// A defender silent before the step level ended showed no step wrong.
			let Some(step) = step else { return 0 };
			let Some(round) = Rounds::<T>::get((job, unit)) else { return 0 };
			let Some(drawn) = round.drawn.as_ref() else { return 0 };
			let Some(proven) = T::Units::proven_unit(job, unit) else { return 0 };
			// A round of an earlier proof of the unit judged another trace.
			if proven.trace.trace_root != round.trace_root {
				return 0;
			}
			let segments = Self::segments(&proven);
			let Some(segment) = segments.of_step(step) else { return 0 };
			let segments = segments.count();
			let mut slashed_count = 0u32;
			for attestation in round.attestations.iter() {
				if attestation.state != AttestationState::Revealed(Verdict::Match) {
					continue;
				}
				// A verifier re-executes its samples from the solver's checkpoints, so a lie
				// shows only in the segment that holds it: one that did not sample it
				// attested nothing false.
				if !Self::sampled_segments(&drawn.seed, &attestation.verifier, segments).contains(&segment) {
					continue;
				}
				// The staking pallet refuses a reward to the slashed account itself: a
				// verifier that overturned the proof it attested shares none of its slash.
				let others: Vec<T::AccountId> =
					winners.iter().filter(|winner| **winner != attestation.verifier).cloned().collect();
				let reward = (!others.is_empty()).then_some((&others[..], share));
				let slashed = T::Slash::slash(
					&attestation.verifier,
					Role::Verifier,
					T::FalseAttestationSlash::get(),
					SlashReason::FalseAttestation,
					reward,
				)
				.unwrap_or_else(|_| Zero::zero());
				slashed_count = slashed_count.saturating_add(1);
				Self::deposit_event(Event::FalseAttestation {
					job,
					unit,
					verifier: attestation.verifier.clone(),
					step,
					slashed,
				});
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
}

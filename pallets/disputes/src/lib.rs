//! # Touchstone disputes
//!
//! A bonded challenger disputes a unit's learning proof within its challenge window by
//! posting a challenge bond and its own segment root over the unit's boundaries, from the
//! same chain-fixed start state. The solver (the defender) and the challenger then play
//! four bisection games, one call per side per round, each before a deadline:
//!
//! 1. over the unit's segment-level trees, to the first segment whose boundary they
//!    disagree on;
//! 2. each side binds its step-level trace of that segment, re-executed from the boundary
//!    before it, to its own boundary at the segment's end
//!    ([`bind_segment`](touchstone_primitives::referee::bind_segment)), and they bisect the
//!    traces to the first step whose state hash they disagree on;
//! 3. each side binds its operator root of that step to its trace
//!    ([`bind_step`](touchstone_primitives::referee::bind_step)), and they bisect the
//!    operator-level trees to the first operator they disagree on;
//! 4. each side binds its piece root of that operator
//!    ([`bind_operator`](touchstone_primitives::referee::bind_operator)), and they bisect
//!    the piece trees to the first piece they disagree on.
//!
//! Every tree's shape comes from the job (the unit's segments on the job's checkpoint grid,
//! the segment's step count, the step graph's operator count, the operator's piece count), so a side whose tree has another shape cannot
//! answer a round and loses by timeout, as does any side that falls silent. Finally the
//! runtime runs the kernels' referee on the defender's claimed piece, with the
//! commitments and position from the chain's records and the game, and the defender's
//! openings. A claim upheld means the challenger was wrong (their pieces differ and
//! everything before agrees); a claim refused means the proof is wrong. So does a
//! recomputation that is not finite: every input the referee reads is the defender's own
//! committed value, so an honest defender's piece recomputes to exactly its claim, and a
//! valid trace holds no NaN or infinity (rule 7). Which opponent the defender faces, or
//! which of its disputes ends first, cannot change that ruling: no party reaches a
//! no-fault outcome by choosing its opponent (`docs/protocol.md`, "Attacks considered").
//!
//! The loser pays: a defender that loses is slashed `SolverSlash` of its solver bond, or
//! the unit's collateral where that is more (a multiple of its price), and
//! its unit is redone; a challenger that loses forfeits its bond, `WinnerShare` of it to
//! the defender and the rest to the jackpot. Several challengers may dispute one proof.
//! A conviction pays `ConvictionShare` of the slash, in equal parts, to the challenger of
//! every dispute open over the unit when it falls, whichever of them ended first, and the
//! rest goes to the slash destination (the jackpot); the other disputes are then moot and
//! their bonds returned. Since the defender paces each of its disputes, the order they end
//! in is its choice; splitting the reward makes that choice worth nothing, and keeping
//! the share small leaves a liar that reports itself through a sybil most of its slash
//! lost. A unit cannot be finalized while any dispute over it is open. When a proof is
//! overturned, the verifiers that attested it over the disputed step are slashed too
//! ([`AttestationJudge`]), their slashes shared the same way.
//!
//! A conviction that found no step (the defender fell silent early) shows no attestation
//! false, so the pallet keeps the overturned proof ([`Overturned`]) for a summons window, and
//! any bonded node may *summon* a verifier that attested it over a segment it re-executed
//! (`summon`): a dispute with the verifier as defender, judged against the kept proof, that
//! starts with both sides binding their traces of that segment from the proof's own boundary
//! before it. A verifier whose `Match` was true holds an honest trace to the proof's boundary
//! after it and wins the summoner's bond; one whose `Match` was false cannot, and is slashed.
//!
//! The pallet sees units only through [`UnitProofs`], bonds through [`ComputeNodes`] and
//! [`Slash`], and tells the tasks pallet whether a unit may be finalized through
//! [`ProofLifecycle`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub use pallet::*;
pub use types::*;
pub use weights::WeightInfo;

mod types;
pub mod weights;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(any(test, feature = "runtime-benchmarks"))]
pub mod benchmark_case;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

use polkadot_sdk::{frame_support, frame_system};

/// The balance type of the pallet's currency.
pub type BalanceOf<T> = <<T as Config>::Currency as frame_support::traits::fungible::Inspect<
	<T as frame_system::Config>::AccountId,
>>::Balance;

/// A dispute as stored.
pub type DisputeOf<T> =
	DisputeInfo<<T as frame_system::Config>::AccountId, BalanceOf<T>, frame_system::pallet_prelude::BlockNumberFor<T>>;

/// A proven unit as the tasks pallet describes it.
pub type ProvenUnitOf<T> = touchstone_primitives::traits::ProvenUnit<
	<T as frame_system::Config>::AccountId,
	frame_system::pallet_prelude::BlockNumberFor<T>,
	BalanceOf<T>,
>;

/// A proof overturned without a step found, as stored for the summonses of its attesters.
pub type OverturnedOf<T> = OverturnedProof<
	<T as frame_system::Config>::AccountId,
	frame_system::pallet_prelude::BlockNumberFor<T>,
	<T as Config>::MaxAttesters,
	<T as Config>::MaxSamplesPerAttester,
>;

/// Sets up what the benchmarks need from other pallets.
#[cfg(feature = "runtime-benchmarks")]
pub use touchstone_primitives::traits::ProofSetup as BenchmarkHelper;

#[frame_support::pallet]
pub mod pallet {
	use super::*;
	use alloc::vec::Vec;
	use codec::Encode;
	use frame_support::{
		pallet_prelude::*,
		traits::{
			fungible::{Inspect, Mutate, MutateHold},
			tokens::{Fortitude, Precision, Restriction},
		},
	};
	use frame_system::pallet_prelude::*;
	use polkadot_sdk::sp_runtime::{
		traits::{Saturating, UniqueSaturatedFrom, Zero},
		Perbill,
	};
	use touchstone_primitives::{
		referee::{
			bind_operator, bind_segment, bind_step, boundary_before, graph_rebuild_picoseconds, judge, job_graph, level_kind,
			level_leaves, open_state_chunk, MAX_GRAPH_REBUILD_PICOSECONDS,
			segment_start, segment_trace_commitment, state_chunks, BoundaryOpening, Digest, Dispute, Foul, Game, Level,
			MerkleProof, Openings, Position, RefereeError, Reveal, SegmentBinding, StateChunk, StepBinding, TraceCommitment,
			TreeKind, UnitCommitment, AggregateError, AggregateOpenings,
		},
		traits::{AttestationJudge, ComputeNodes, Slash, UnitProofs},
		JobId, Role, SlashReason, UnitIndex, VerificationMode,
	};

	/// The in-code storage version.
	const STORAGE_VERSION: StorageVersion = StorageVersion::new(2);

	#[pallet::pallet]
	#[pallet::storage_version(STORAGE_VERSION)]
	pub struct Pallet<T>(_);

	#[pallet::config]
	pub trait Config: polkadot_sdk::frame_system::Config {
		/// The currency challenge bonds are held in.
		type Currency: Inspect<Self::AccountId>
			+ Mutate<Self::AccountId>
			+ MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>;

		/// The overarching hold reason.
		type RuntimeHoldReason: From<HoldReason>;

		/// Units with committed proofs: what a dispute judges and what it moves.
		type Units: UnitProofs<Self::AccountId, BlockNumberFor<Self>, BalanceOf<Self>>;

		/// The compute-node registry: who is bonded as a challenger.
		type Nodes: ComputeNodes<Self::AccountId, BalanceOf<Self>>;

		/// Slashing of a losing solver's bond.
		type Slash: Slash<Self::AccountId, BalanceOf<Self>>;

		/// Judges the attestations of a proof a dispute overturns: the verifiers that
		/// attested `Match` over the disputed step are slashed, `ConvictionShare` to the
		/// challengers.
		type Attestations: AttestationJudge<Self::AccountId>;

		/// Where the part of a forfeited challenge bond that does not go to the winner goes.
		type Jackpot: Get<Self::AccountId>;

		/// The bond a challenger posts with each challenge.
		#[pallet::constant]
		type ChallengeBond: Get<BalanceOf<Self>>;

		/// The bond a request for a chunk of a committed state holds (`request_chunk`). Posted
		/// in time, the chunk wins the bond for the solver (its `WinnerShare`, the rest to the
		/// jackpot): the price of making a solver post data it serves anyway. Kept small, so
		/// that a verifier that cannot fetch a checkpoint can afford to ask.
		#[pallet::constant]
		type AvailabilityBond: Get<BalanceOf<Self>>;

		/// The least a solver whose proof is overturned is slashed, from its solver bond (and
		/// then its unbonding funds): the unit's collateral where that is more.
		#[pallet::constant]
		type SolverSlash: Get<BalanceOf<Self>>;

		/// The defender's share of a challenge bond it wins; the rest goes to the jackpot.
		#[pallet::constant]
		type WinnerShare: Get<Perbill>;

		/// The share of a convicted solver's slash (and of the slashes of the verifiers that
		/// attested its lie) paid to the challengers of every dispute open over the unit, in
		/// equal parts; the rest goes to the slash destination. It is all that a liar
		/// reporting itself through a sybil can win back, so keep it small; it must still
		/// pay a challenger for re-executing a unit.
		#[pallet::constant]
		type ConvictionShare: Get<Perbill>;

		/// Blocks each side has to answer a phase of a dispute, at the least: every phase
		/// adds the unit's `segment_blocks`, the time to re-execute one checkpoint segment
		/// (an answer below the step level re-executes the disputed step from the
		/// checkpoint before it; a posted chunk may need the same).
		#[pallet::constant]
		type ResponseWindow: Get<BlockNumberFor<Self>>;

		/// Most disputes open over one unit at a time.
		#[pallet::constant]
		type MaxDisputesPerUnit: Get<u32>;

		/// Of `MaxDisputesPerUnit`, the slots only the unit's drawn verifiers may take, so
		/// that challengers filling the rest cannot keep a verifier's mismatch from its
		/// dispute. At least the verification pallet's verifiers per unit.
		#[pallet::constant]
		type VerifierSlotsPerUnit: Get<u32>;

		/// The largest encoded openings `resolve` accepts, in bytes.
		#[pallet::constant]
		type MaxOpeningsLen: Get<u32>;

		/// Blocks after a conviction that found no step during which the proof's attesters
		/// may be summoned, beyond the unit's `segment_blocks` (the time to re-execute the
		/// segment a summons names).
		#[pallet::constant]
		type SummonsWindow: Get<BlockNumberFor<Self>>;

		/// Most summonses open at once over one attester's segment of one overturned proof.
		/// Filling them all with summonses that lose must cost more than the slash it delays
		/// (`MaxSummonsPerSegment × (1 − WinnerShare) × ChallengeBond` above the verification
		/// pallet's false-attestation slash; `tests/parameters.rs`).
		#[pallet::constant]
		type MaxSummonsPerSegment: Get<u32>;

		/// Most attesters an overturned proof keeps: the verifiers drawn per unit.
		#[pallet::constant]
		type MaxAttesters: Get<u32>;

		/// Most segments each attester re-executed: the verification pallet's samples per
		/// verifier.
		#[pallet::constant]
		type MaxSamplesPerAttester: Get<u32>;

		/// Weights of this pallet's calls, from its benchmarks.
		type WeightInfo: WeightInfo;

		/// Sets up other pallets for the benchmarks.
		#[cfg(feature = "runtime-benchmarks")]
		type BenchmarkHelper: crate::BenchmarkHelper<Self::AccountId, BalanceOf<Self>>;
	}

	/// Why this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A challenger's bond, held while its dispute is open.
		ChallengeBond,
	}

	/// The id the next dispute gets.
	#[pallet::storage]
	pub type NextDisputeId<T> = StorageValue<_, DisputeId, ValueQuery>;

	/// Open disputes by id.
	#[pallet::storage]
	pub type Disputes<T: Config> = StorageMap<_, Twox64Concat, DisputeId, DisputeOf<T>>;

	/// The open disputes over each unit. Summonses are not listed: they judge an overturned
	/// proof, not the unit's standing one.
	#[pallet::storage]
	pub type UnitDisputes<T: Config> =
		StorageMap<_, Twox64Concat, UnitKey, BoundedVec<DisputeId, T::MaxDisputesPerUnit>, ValueQuery>;

	/// The open disputes each account is a side of (challenger or defender, summonses
	/// included), by account: a party, on a light client too, finds its disputes by reading
	/// its own keys, never the whole `Disputes` map.
	#[pallet::storage]
	pub type PartyDisputes<T: Config> =
		StorageDoubleMap<_, Blake2_128Concat, T::AccountId, Twox64Concat, DisputeId, ()>;

	/// Proofs overturned without a step found, whose attesters may be summoned, by the id of
	/// the dispute that convicted them.
	#[pallet::storage]
	pub type Overturned<T: Config> = StorageMap<_, Twox64Concat, DisputeId, OverturnedOf<T>>;

	/// The open summonses over each (overturned proof, attester, segment).
	#[pallet::storage]
	pub type Summonses<T: Config> = StorageMap<
		_,
		Blake2_128Concat,
		(DisputeId, T::AccountId, u32),
		BoundedVec<DisputeId, T::MaxSummonsPerSegment>,
		ValueQuery,
	>;

	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A challenger disputed a unit's learning proof.
		DisputeOpened {
			/// The new dispute.
			dispute: DisputeId,
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver defending its proof.
			defender: T::AccountId,
			/// The challenger.
			challenger: T::AccountId,
			/// The challenger's segment root.
			trace_root: Digest,
			/// The last block the first round may be answered in.
			deadline: BlockNumberFor<T>,
		},
		/// A node demanded a chunk of a state a unit's proof commits (`request_chunk`); the
		/// solver must post it before `deadline`.
		ChunkRequested {
			/// The new dispute.
			dispute: DisputeId,
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The solver that must post the chunk.
			defender: T::AccountId,
			/// The node that asked.
			challenger: T::AccountId,
			/// The state demanded: the one before this global step.
			step: u32,
			/// The chunk demanded.
			chunk: u32,
			/// The last block the chunk may be posted in.
			deadline: BlockNumberFor<T>,
		},
		/// A side answered the current phase.
		Answered {
			/// The dispute.
			dispute: DisputeId,
			/// Who answered.
			party: Party,
		},
		/// Both sides answered: the dispute moved on to `phase`.
		Advanced {
			/// The dispute.
			dispute: DisputeId,
			/// Where it stands now.
			phase: Phase,
			/// Bisection rounds played so far.
			rounds: u32,
			/// The last block the new phase may be answered in.
			deadline: BlockNumberFor<T>,
		},
		/// A dispute ended.
		DisputeResolved {
			/// The dispute.
			dispute: DisputeId,
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The outcome.
			ruling: Ruling,
			/// Why.
			grounds: Grounds,
			/// What the loser forfeited (the solver's slash or the challenger's bond).
			forfeited: BalanceOf<T>,
			/// What of it went to the winners: the defender, or the challengers of every
			/// dispute open over the unit, together.
			to_winners: BalanceOf<T>,
		},
		/// A dispute became moot (another dispute over the unit, or over the step range it
		/// started from, overturned or ended the proof) and its bond was returned.
		DisputeDismissed {
			/// The dispute.
			dispute: DisputeId,
			/// The bond returned.
			returned: BalanceOf<T>,
		},
		/// Dispute `overturned` convicted a proof without finding a step: the verifiers that
		/// attested it may be summoned over the segments they re-executed until `until`.
		AttestersSummonable {
			/// The convicting dispute, which names the overturned proof.
			overturned: DisputeId,
			/// The job.
			job: JobId,
			/// The unit.
			unit: UnitIndex,
			/// The overturned proof's segment root.
			trace_root: Digest,
			/// The last block a summons may be opened in.
			until: BlockNumberFor<T>,
		},
		/// A node summoned a verifier to show that one segment it attested of an overturned
		/// proof is an honest run: a dispute, starting at that segment's binding, with the
		/// verifier as its defender.
		Summoned {
			/// The new dispute.
			dispute: DisputeId,
			/// The conviction whose proof it judges.
			overturned: DisputeId,
			/// The verifier summoned: the defender.
			attester: T::AccountId,
			/// The summoner: the challenger.
			summoner: T::AccountId,
			/// The segment.
			segment: u32,
			/// The last block the bindings may be posted in.
			deadline: BlockNumberFor<T>,
		},
		/// An overturned proof's summons window closed with no summons open: it is forgotten.
		OverturnedForgotten {
			/// The convicting dispute.
			overturned: DisputeId,
		},
		/// The referee found a chunk of a round's aggregate wrong: its solver was slashed,
		/// and the aggregate went back to the pool with the rounds built on it rolled back.
		AggregateOverturned {
			/// The job.
			job: JobId,
			/// The aggregate unit.
			unit: UnitIndex,
			/// The solver that committed the wrong aggregate.
			solver: T::AccountId,
			/// Who showed it wrong.
			challenger: T::AccountId,
			/// The chunk the referee recomputed.
			chunk: u32,
			/// What the solver was slashed.
			slashed: BalanceOf<T>,
			/// The challenger's share of it.
			to_challenger: BalanceOf<T>,
		},
	}

	#[pallet::error]
	pub enum Error<T> {
		/// The unit has no standing proof, or it does not exist.
		NotDisputable,
		/// The unit's challenge window has closed.
		WindowClosed,
		/// Only a node bonded as a challenger may challenge.
		NotBondedChallenger,
		/// A solver cannot challenge its own proof.
		OwnProof,
		/// The challenger's segment root equals the proof's: there is nothing to dispute.
		NoDisagreement,
		/// The challenger already disputes this unit.
		AlreadyChallenged,
		/// The unit has as many open disputes as it may: for a challenger, as many as it
		/// may have outside the slots kept for the unit's drawn verifiers.
		TooManyDisputes,
		/// Tolerance-mode proofs are decided by re-execution committees, not by the
		/// bit-exact referee; this chain does not run them yet.
		ToleranceNotSupported,
		/// The challenger cannot pay the challenge bond.
		InsufficientBalance,
		/// No open dispute has this id.
		DisputeNotFound,
		/// The caller is neither side of the dispute.
		NotAParty,
		/// The dispute is not in the phase this call answers.
		WrongPhase,
		/// The proof may carry a forced error its solver has not revealed yet, or carries
		/// one and is about to be replaced: nothing may rule against the solver until the
		/// verification round's reveal period ends. Try again then.
		RulingHeld,
		/// The caller already answered this phase.
		AlreadyAnswered,
		/// The phase's deadline has passed.
		DeadlinePassed,
		/// The deadline has not passed yet.
		DeadlineNotReached,
		/// The reveal does not hash to the caller's current node.
		RevealInconsistent,
		/// The reveal's shape (a right child or none) is not the job's tree's at this node.
		RevealMisshapen,
		/// The segment trace does not start at the agreed boundary before the disputed
		/// segment, or its last step does not commit the caller's boundary at its end.
		InvalidSegmentBinding,
		/// The operator root does not bind to the caller's trace at the disputed step.
		InvalidStepBinding,
		/// The piece root does not bind to the caller's operator root at the disputed operator.
		InvalidOperatorBinding,
		/// The openings do not prove the claim's inputs against the chain's commitments.
		InvalidOpenings,
		/// The encoded openings exceed `MaxOpeningsLen`.
		OpeningsTooLarge,
		/// The unit is not a round's aggregate whose commitment stands undisputed (`Proven`),
		/// or its challenge window has closed.
		NotAChallengeableAggregate,
		/// The referee recomputed the chunk from the openings and it is what the aggregate
		/// committed: the aggregate stands, and nothing changed.
		AggregateUpheld,
		/// The aggregate openings do not fit the chain's records of the round (the shards'
		/// end states, the round's global state and momentum, the committed aggregate), or
		/// the chunk is past the state's chunks.
		InvalidAggregateOpenings,
		/// The job's shape cannot be built: no dispute over it can be judged.
		InvalidJob,
		/// The step is not where the unit's solver holds a state: a checkpoint (the start
		/// of a checkpoint segment after the unit's first) or the unit's end.
		NotACheckpoint,
		/// The state has no chunk with this index: see `state_chunks` of the job's model.
		NoSuchChunk,
		/// Only the solver whose proof is disputed may post the chunk.
		NotTheDefender,
		/// The chunk does not open against the state the proof commits at the step.
		InvalidChunk,
		/// No overturned proof awaits summonses under this id.
		NotSummonable,
		/// The verifier did not attest `Match` to the overturned proof over this segment.
		NotAttested,
		/// A verifier cannot summon itself.
		OwnAttestation,
		/// The overturned proof's summons window is still open, or a summons over it is.
		SummonsOpen,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		fn integrity_test() {
			assert!(!T::ChallengeBond::get().is_zero(), "ChallengeBond must be positive");
			assert!(!T::SolverSlash::get().is_zero(), "SolverSlash must be positive");
			assert!(!T::ResponseWindow::get().is_zero(), "ResponseWindow must be positive");
			assert!(
				T::MaxDisputesPerUnit::get() > T::VerifierSlotsPerUnit::get(),
				"MaxDisputesPerUnit must leave challengers a slot beside the verifiers'"
			);
			assert!(T::WinnerShare::get() <= Perbill::one(), "WinnerShare is a share");
			assert!(T::MaxSummonsPerSegment::get() > 0, "MaxSummonsPerSegment must leave a summoner a slot");
			assert!(
				!T::ConvictionShare::get().is_zero() && T::ConvictionShare::get() <= Perbill::from_percent(50),
				"ConvictionShare must pay challengers and leave a self-reporting liar at least half its slash lost"
			);
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(_n: BlockNumberFor<T>) -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Dispute the learning proof of unit `unit` of `job`, within its challenge window,
		/// with `trace_root`: the caller's own segment root (the Merkle root over the unit's
		/// boundaries), from the unit's start state. Holds `ChallengeBond` from the caller, who
		/// must be bonded as a challenger. The unit cannot be finalized until the dispute
		/// ends.
		///
		/// Emits `DisputeOpened`.
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::challenge())]
		pub fn challenge(origin: OriginFor<T>, job: JobId, unit: UnitIndex, trace_root: Digest) -> DispatchResult {
			let challenger = ensure_signed(origin)?;
			Self::do_challenge(challenger, job, unit, trace_root, Role::Challenger)
		}

		/// Answer a round of bisection: the children of the caller's current node in the
		/// tree of the current level. The round is played once both sides answered.
		///
		/// Like every answer in a game, it is an operational call: blocks keep room for it,
		/// and it goes before normal transactions, so filling blocks cannot make a side
		/// miss its deadline.
		///
		/// Emits `Answered`, and `Advanced` once the round is played.
		#[pallet::call_index(1)]
		#[pallet::weight((T::WeightInfo::reveal(), DispatchClass::Operational))]
		pub fn reveal(origin: OriginFor<T>, dispute: DisputeId, reveal: Reveal) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_reveal(who, dispute, reveal)
		}

		/// Name the caller's step-level trace of the disputed segment, `trace_root`, with
		/// `binding`: the opening of the boundary before the segment (where the trace
		/// starts, the state both sides agree on), the caller's boundary at its end, and the
		/// trace's last step, which must commit that boundary. Once both sides bound theirs,
		/// the step level starts. The response window includes the time one segment takes
		/// to re-execute.
		///
		/// Emits `Answered`, and `Advanced` once both answered.
		#[pallet::call_index(8)]
		#[pallet::weight((
			// A summons whose sides bind the same trace ends here, moving a bond: bounded by
			// the slash a summons can end in.
			T::WeightInfo::bind_segment().saturating_add(T::Attestations::false_attestation_weight()),
			DispatchClass::Operational
		))]
		pub fn bind_segment(
			origin: OriginFor<T>,
			dispute: DisputeId,
			trace_root: Digest,
			binding: SegmentBinding,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_bind_segment(who, dispute, trace_root, binding)
		}

		/// Name the caller's operator root of the disputed step, with `binding`: the proofs
		/// that tie it to the caller's trace of the segment (its previous state and record,
		/// the state and loss operators' leaves). Once both sides bound theirs, the operator
		/// level starts.
		///
		/// Emits `Answered`, and `Advanced` once both answered.
		#[pallet::call_index(2)]
		#[pallet::weight((T::WeightInfo::bind_step().saturating_add(Pallet::<T>::max_graph_weight()), DispatchClass::Operational))]
		pub fn bind_step(
			origin: OriginFor<T>,
			dispute: DisputeId,
			operator_root: Digest,
			binding: StepBinding,
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let graph = Self::do_bind_step(who, dispute, operator_root, binding)?;
			Ok(Some(T::WeightInfo::bind_step().saturating_add(graph)).into())
		}

		/// Name the caller's piece root of the disputed operator, with `proof`: the
		/// operator's leaf under the caller's operator root. Once both sides bound theirs,
		/// the piece level starts.
		///
		/// Emits `Answered`, and `Advanced` once both answered.
		#[pallet::call_index(3)]
		#[pallet::weight((T::WeightInfo::bind_operator().saturating_add(Pallet::<T>::max_graph_weight()), DispatchClass::Operational))]
		pub fn bind_operator(
			origin: OriginFor<T>,
			dispute: DisputeId,
			piece_root: Digest,
			proof: MerkleProof,
		) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let graph = Self::do_bind_operator(who, dispute, piece_root, proof)?;
			Ok(Some(T::WeightInfo::bind_operator().saturating_add(graph)).into())
		}

		/// Have the runtime's referee judge the defender's claimed piece, from `openings`:
		/// the preimages and proofs of everything the piece reads, and of the claim, under
		/// the defender's commitments. Anyone may submit them. Openings that do not prove
		/// out are refused and change nothing. An operational call, as the other answers are;
		/// its length is charged like the compute it stands for (the runtime's
		/// `LengthToFee`), so crowding it out costs what filling blocks costs.
		///
		/// Emits `DisputeResolved`.
		#[pallet::call_index(4)]
		#[pallet::weight((
			Pallet::<T>::resolve_weight(T::MaxOpeningsLen::get())
				.saturating_add(Pallet::<T>::worst_ruling_weight())
				.saturating_add(Pallet::<T>::max_graph_weight()),
			DispatchClass::Operational
		))]
		pub fn resolve(origin: OriginFor<T>, dispute: DisputeId, openings: Openings) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			let bytes = u32::try_from(openings.encoded_size()).unwrap_or(u32::MAX);
			let aftermath = Self::do_resolve(dispute, openings)?;
			Ok(Some(Self::resolve_weight(bytes).saturating_add(aftermath)).into())
		}

		/// End a dispute whose phase deadline has passed, against the side that did not
		/// answer: the defender, in the referee's phase; the challenger, if neither answered
		/// (it brought the case). Anyone may call it; it is free when it succeeds.
		///
		/// Emits `DisputeResolved`.
		#[pallet::call_index(5)]
		#[pallet::weight(T::WeightInfo::time_out().saturating_add(Pallet::<T>::worst_ruling_weight()))]
		pub fn time_out(origin: OriginFor<T>, dispute: DisputeId) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			let aftermath = Self::do_time_out(dispute)?;
			Ok(frame_support::dispatch::PostDispatchInfo {
				actual_weight: Some(T::WeightInfo::time_out().saturating_add(aftermath)),
				pays_fee: Pays::No,
			})
		}

		/// Demand chunk `chunk` of a state unit `unit` of `job` commits, within its challenge
		/// window: the state before global step `step`, which must be one its solver keeps, a
		/// checkpoint (the start of a checkpoint segment after the unit's first) or the
		/// unit's end (its final model). A chunk is four chunks of the state's tree, 4 KiB of
		/// weights (`CHUNKS_PER_REQUEST`); a state has `state_chunks` of them. Holds
		/// `AvailabilityBond` from the caller, who must be bonded as a challenger or a
		/// verifier, and takes one of the unit's challenger slots. The solver must post the
		/// chunk with its proofs (`provide_chunk`) within `ResponseWindow`, or its proof is
		/// overturned as a lie: slashed like any other, the requester paid like any other
		/// challenger. A solver that serves nothing cannot keep its proof beyond check.
		///
		/// Emits `ChunkRequested`.
		#[pallet::call_index(6)]
		#[pallet::weight(T::WeightInfo::request_chunk().saturating_add(Pallet::<T>::max_graph_weight()))]
		pub fn request_chunk(origin: OriginFor<T>, job: JobId, unit: UnitIndex, step: u32, chunk: u32) -> DispatchResultWithPostInfo {
			let requester = ensure_signed(origin)?;
			let graph = Self::do_request_chunk(requester, job, unit, step, chunk)?;
			Ok(Some(T::WeightInfo::request_chunk().saturating_add(graph)).into())
		}

		/// Post the chunk an open request demands of the caller's proof, with the opening
		/// of the state at the requested step against the proof's trace and the chunk's
		/// inclusion in that state's tree. The chunk is then on chain, for anyone to read
		/// from the extrinsic; the request ends, and its bond goes to the caller (its
		/// `WinnerShare`) and the jackpot. An operational call, as every answer in a dispute.
		///
		/// Emits `DisputeResolved` with grounds `Provided`.
		#[pallet::call_index(7)]
		#[pallet::weight((T::WeightInfo::provide_chunk().saturating_add(Pallet::<T>::max_graph_weight()), DispatchClass::Operational))]
		pub fn provide_chunk(origin: OriginFor<T>, dispute: DisputeId, chunk: StateChunk) -> DispatchResultWithPostInfo {
			let who = ensure_signed(origin)?;
			let graph = Self::do_provide_chunk(who, dispute, chunk)?;
			Ok(Some(T::WeightInfo::provide_chunk().saturating_add(graph)).into())
		}

		/// Summon `attester`, a verifier that attested `Match` to the proof dispute
		/// `overturned` convicted without finding a step, to show that `segment`, one it
		/// re-executed, is an honest run of the proof's boundaries: a dispute with the
		/// attester as its defender, judged against the overturned proof, that starts with
		/// both sides binding their step-level traces of the segment. `trace_root` is the
		/// caller's segment root over the unit (its own boundaries, which agree with the
		/// proof's before `segment` and not at it); `start` opens the proof's boundary before
		/// the segment (`None` for the unit's first), where both traces must start. Holds
		/// `ChallengeBond` from the caller, bonded as a challenger or a verifier, before the
		/// proof's summons window closes. The attester that loses is slashed for a false
		/// attestation, `ConvictionShare` to the caller; a caller that loses forfeits its bond
		/// as a challenger does.
		///
		/// Emits `Summoned`.
		#[pallet::call_index(9)]
		#[pallet::weight(T::WeightInfo::summon())]
		pub fn summon(
			origin: OriginFor<T>,
			overturned: DisputeId,
			attester: T::AccountId,
			segment: u32,
			trace_root: Digest,
			start: Option<BoundaryOpening>,
		) -> DispatchResult {
			let summoner = ensure_signed(origin)?;
			Self::do_summon(summoner, overturned, attester, segment, trace_root, start)
		}

		/// Show that a round's committed aggregate is wrong: `openings` open chunk `chunk` of
		/// every shard's proven end state, of the round's global state and momentum and of
		/// the committed next state (and momentum), and the referee recomputes the chunk
		/// from them (`touchstone_kernels::referee::aggregate`). The caller must be bonded as
		/// a challenger, within the aggregate's challenge window. A wrong chunk convicts at
		/// once: every output word depends on the same word of the inputs only, so one chunk
		/// is the whole dispute, and no bisection is played. The aggregator is slashed as a
		/// solver whose proof the referee overturned, `ConvictionShare` to the caller; the
		/// aggregate goes back to the pool, and the rounds built on it roll back. An upheld
		/// chunk, or openings that do not fit, are refused with a named error and change
		/// nothing (the caller pays the call's fee).
		///
		/// Emits `AggregateOverturned`, and the tasks pallet's `ProofRejected`.
		#[pallet::call_index(11)]
		#[pallet::weight(Pallet::<T>::resolve_weight(T::MaxOpeningsLen::get()).saturating_add(Pallet::<T>::worst_ruling_weight()))]
		pub fn challenge_aggregate(
			origin: OriginFor<T>,
			job: JobId,
			unit: UnitIndex,
			chunk: u32,
			openings: AggregateOpenings,
		) -> DispatchResultWithPostInfo {
			let challenger = ensure_signed(origin)?;
			let bytes = u32::try_from(openings.encoded_size()).unwrap_or(u32::MAX);
			ensure!(bytes <= T::MaxOpeningsLen::get(), Error::<T>::OpeningsTooLarge);
			let aftermath = Self::do_challenge_aggregate(challenger, job, unit, chunk, &openings)?;
			Ok(Some(Self::resolve_weight(bytes).saturating_add(aftermath)).into())
		}

		/// Forget the proof dispute `overturned` convicted, once its summons window closed
		/// and no summons over it is open. Anyone may call it; it is free when it succeeds.
		///
		/// Emits `OverturnedForgotten`.
		#[pallet::call_index(10)]
		#[pallet::weight(T::WeightInfo::forget_overturned())]
		pub fn forget_overturned(origin: OriginFor<T>, overturned: DisputeId) -> DispatchResultWithPostInfo {
			ensure_signed(origin)?;
			let proof = Overturned::<T>::get(overturned).ok_or(Error::<T>::NotSummonable)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now > proof.summons_until && proof.open_summonses == 0, Error::<T>::SummonsOpen);
			Overturned::<T>::remove(overturned);
			Self::deposit_event(Event::OverturnedForgotten { overturned });
			Ok(Pays::No.into())
		}
	}

	/// Encoded bytes of the openings the `resolve` benchmark judges (a K-chunk of a
	/// digits-sized step; `benchmark_case.rs`). A test checks it against the recording.
	pub const RESOLVE_BENCHMARK_BYTES: u32 = 18_977;

	/// Encoded bytes of the openings the `resolve_largest_piece` benchmark judges (a loss
	/// partial at `MAX_CLASSES` classes, the largest piece a real step opens;
	/// `benchmark_case.rs`). A test checks it against the recording.
	pub const LARGEST_PIECE_BENCHMARK_BYTES: u32 = 142_284;

	/// The storage reads and writes of the `resolve` benchmarks (`weights.rs`), which do
	/// not grow with the openings. A test checks them against the weights.
	pub const RESOLVE_BENCHMARK_READS_WRITES: (u64, u64) = (15, 19);

	impl<T: Config> Pallet<T> {
		/// What rebuilding `model`'s step graph costs beyond the benchmarked weights, whose
		/// jobs are MLPs of a dozen operators: a transformer's hundreds of operators, at the
		/// wasm's measured cost each. Zero for an MLP or a CNN.
		pub fn graph_weight(model: &touchstone_primitives::ModelArch) -> Weight {
			Weight::from_parts(graph_rebuild_picoseconds(model), 0)
		}

		/// [`Pallet::graph_weight`] of the largest step graph any accepted job has: charged
		/// before the call knows its job, and refunded to the job's own.
		pub fn max_graph_weight() -> Weight {
			Weight::from_parts(MAX_GRAPH_REBUILD_PICOSECONDS, 0)
		}

		/// The weight of judging openings of `bytes` encoded bytes. Each of the two
		/// `resolve` benchmarks is scaled to `bytes`: the benchmarked resolution, plus its
		/// execution time once more for every further multiple of its openings needed. The
		/// referee's work (words recomputed, hashes checked) grows with what is opened, so
		/// this bounds it; the storage the call touches does not. The two benchmarks sit at
		/// both ends of the referee's work per byte (the arithmetic-dense K-chunk, the
		/// largest piece), and the larger of the two charges is taken. The call is charged
		/// at `MaxOpeningsLen` and refunded to the openings' real size.
		pub fn resolve_weight(bytes: u32) -> Weight {
			let scaled = |benchmarked: Weight, benchmark_bytes: u32| {
				let multiples = bytes.div_ceil(benchmark_bytes.max(1)).max(1);
				let (reads, writes) = RESOLVE_BENCHMARK_READS_WRITES;
				let storage = T::DbWeight::get().reads_writes(reads, writes).ref_time();
				let execution = Weight::from_parts(benchmarked.ref_time().saturating_sub(storage), 0);
				benchmarked.saturating_add(execution.saturating_mul(u64::from(multiples.saturating_sub(1))))
			};
			scaled(T::WeightInfo::resolve(), RESOLVE_BENCHMARK_BYTES)
				.max(scaled(T::WeightInfo::resolve_largest_piece(), LARGEST_PIECE_BENCHMARK_BYTES))
		}

		/// How many disputes challengers may open over one unit, beside the drawn verifiers'.
		pub fn challenger_slots() -> u32 {
			T::MaxDisputesPerUnit::get().saturating_sub(T::VerifierSlotsPerUnit::get())
		}

		/// Judges a challenge of a round's aggregate at `chunk` and, if the referee finds the
		/// chunk wrong, convicts its solver. Returns the weight of the conviction's aftermath.
		pub(crate) fn do_challenge_aggregate(
			challenger: T::AccountId,
			job: JobId,
			unit: UnitIndex,
			chunk: u32,
			openings: &AggregateOpenings,
		) -> Result<Weight, DispatchError> {
			ensure!(T::Nodes::is_bonded_for(&challenger, Role::Challenger), Error::<T>::NotBondedChallenger);
			let claim = T::Units::proven_aggregate(job, unit).ok_or(Error::<T>::NotAChallengeableAggregate)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now < claim.window_ends, Error::<T>::NotAChallengeableAggregate);
			match touchstone_primitives::referee::judge_aggregate(&claim, chunk, openings) {
				Ok(()) => return Err(Error::<T>::AggregateUpheld.into()),
				Err(AggregateError::WrongAggregate { .. }) => {},
				Err(_) => return Err(Error::<T>::InvalidAggregateOpenings.into()),
			}
			T::Units::open_challenge(job, unit)?;
			let share = T::ConvictionShare::get();
			let winners = [challenger.clone()];
			let slashed = T::Slash::slash(
				&claim.solver,
				Role::Solver,
				T::SolverSlash::get().max(claim.collateral),
				SlashReason::InvalidProof,
				Some((&winners[..], share)),
			)?;
			let moot = T::Units::reject_proof(job, unit)?;
			let dismissed = Self::dismiss_moot(job, unit, &moot)?;
			Self::deposit_event(Event::AggregateOverturned {
				job,
				unit,
				solver: claim.solver,
				challenger,
				chunk,
				slashed,
				to_challenger: share.mul_floor(slashed),
			});
			Ok(Self::ruling_weight(moot.len() as u32, dismissed).saturating_add(Self::reward_weight(1)))
		}

		pub(crate) fn do_challenge(
			challenger: T::AccountId,
			job: JobId,
			unit: UnitIndex,
			trace_root: Digest,
			role: Role,
		) -> DispatchResult {
			let bonded = T::Nodes::is_bonded_for(&challenger, role);
			let disputable = |proven: &ProvenUnitOf<T>| {
				ensure!(bonded, Error::<T>::NotBondedChallenger);
				ensure!(matches!(proven.verification, VerificationMode::Exact), Error::<T>::ToleranceNotSupported);
				ensure!(trace_root != proven.trace.root, Error::<T>::NoDisagreement);
				Ok(())
			};
			let (id, proven) = Self::open(&challenger, job, unit, role, T::ChallengeBond::get(), disputable)?;
			let mut info = Self::new_dispute(job, unit, &proven, challenger.clone(), T::ChallengeBond::get(), trace_root);
			let nodes = Pair { defender: proven.trace.root, challenger: trace_root };
			let segments = proven.trace.segments().count();
			Self::enter_level(&mut info, &proven, Level::Segments, TreeKind::Segments, segments, nodes)?;
			Self::deposit_event(Event::DisputeOpened {
				dispute: id,
				job,
				unit,
				defender: proven.solver,
				challenger,
				trace_root,
				deadline: info.deadline,
			});
			Self::record_new(id, info);
			Ok(())
		}

		pub(crate) fn do_request_chunk(
			requester: T::AccountId,
			job: JobId,
			unit: UnitIndex,
			step: u32,
			chunk: u32,
		) -> Result<Weight, DispatchError> {
			let bonded = T::Nodes::is_bonded_for(&requester, Role::Challenger) ||
				T::Nodes::is_bonded_for(&requester, Role::Verifier);
			let available = |proven: &ProvenUnitOf<T>| {
				ensure!(bonded, Error::<T>::NotBondedChallenger);
				// The states a unit commits: its boundaries (its checkpoints and its end).
				ensure!(boundary_before(&proven.trace, step).is_some(), Error::<T>::NotACheckpoint);
				let graph = job_graph(&proven.model, &proven.hyper).ok_or(Error::<T>::InvalidJob)?;
				ensure!((chunk as usize) < state_chunks(&graph), Error::<T>::NoSuchChunk);
				Ok(())
			};
			let bond = T::AvailabilityBond::get();
			let (id, proven) = Self::open(&requester, job, unit, Role::Challenger, bond, available)?;
			// The request disputes no trace: it names the defender's own root.
			let mut info = Self::new_dispute(job, unit, &proven, requester.clone(), bond, proven.trace.root);
			info.phase = Phase::Availability { step, chunk };
			Self::deposit_event(Event::ChunkRequested {
				dispute: id,
				job,
				unit,
				defender: proven.solver,
				challenger: requester,
				step,
				chunk,
				deadline: info.deadline,
			});
			Self::record_new(id, info);
			Ok(Self::graph_weight(&proven.model))
		}

		pub(crate) fn do_provide_chunk(who: T::AccountId, id: DisputeId, chunk: StateChunk) -> Result<Weight, DispatchError> {
			let (info, party, proven) = Self::answering(&who, id)?;
			ensure!(party == Party::Defender, Error::<T>::NotTheDefender);
			let Phase::Availability { step, chunk: index } = info.phase else {
				return Err(Error::<T>::WrongPhase.into());
			};
			let graph = job_graph(&proven.model, &proven.hyper).ok_or(Error::<T>::InvalidJob)?;
			open_state_chunk(&graph, &proven.trace, step, index, &chunk).map_err(|_| Error::<T>::InvalidChunk)?;
			Self::conclude(id, info, &proven, Ruling::DefenderWins, Grounds::Provided)?;
			Ok(Self::graph_weight(&proven.model))
		}

		pub(crate) fn do_summon(
			summoner: T::AccountId,
			overturned: DisputeId,
			attester: T::AccountId,
			segment: u32,
			trace_root: Digest,
			start: Option<BoundaryOpening>,
		) -> DispatchResult {
			let mut snapshot = Overturned::<T>::get(overturned).ok_or(Error::<T>::NotSummonable)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now <= snapshot.summons_until, Error::<T>::WindowClosed);
			ensure!(
				T::Nodes::is_bonded_for(&summoner, Role::Challenger) || T::Nodes::is_bonded_for(&summoner, Role::Verifier),
				Error::<T>::NotBondedChallenger
			);
			ensure!(summoner != attester, Error::<T>::OwnAttestation);
			ensure!(
				snapshot.attesters.iter().any(|(verifier, samples)| *verifier == attester && samples.contains(&segment)),
				Error::<T>::NotAttested
			);
			ensure!(trace_root != snapshot.trace.root, Error::<T>::NoDisagreement);
			// The start is pinned to the proof's own boundary, which the attester re-executed
			// from: the summoner's tree cannot move it.
			let start = segment_start(&snapshot.trace, segment, start.as_ref()).map_err(|_| Error::<T>::InvalidSegmentBinding)?;
			let slot = (overturned, attester.clone(), segment);
			let open = Summonses::<T>::get(&slot);
			ensure!(
				!open.iter().any(|id| Disputes::<T>::get(id).is_some_and(|d| d.challenger == summoner)),
				Error::<T>::AlreadyChallenged
			);
			ensure!((open.len() as u32) < T::MaxSummonsPerSegment::get(), Error::<T>::TooManyDisputes);
			T::Currency::hold(&HoldReason::ChallengeBond.into(), &summoner, T::ChallengeBond::get())
				.map_err(|_| Error::<T>::InsufficientBalance)?;
			let id = NextDisputeId::<T>::get();
			Summonses::<T>::try_mutate(&slot, |open| open.try_push(id)).map_err(|_| Error::<T>::TooManyDisputes)?;
			NextDisputeId::<T>::put(id.saturating_add(1));
			let proven = Self::snapshot_unit(&snapshot, attester.clone());
			let mut info =
				Self::new_dispute(snapshot.job, snapshot.unit, &proven, summoner.clone(), T::ChallengeBond::get(), trace_root);
			info.summons = Some(overturned);
			info.segment = Some(segment);
			info.segment_start = Some(start);
			info.phase = Phase::BindSegment { roots: Pair::default() };
			snapshot.open_summonses = snapshot.open_summonses.saturating_add(1);
			Overturned::<T>::insert(overturned, snapshot);
			Self::deposit_event(Event::Summoned {
				dispute: id,
				overturned,
				attester,
				summoner,
				segment,
				deadline: info.deadline,
			});
			Self::record_new(id, info);
			Ok(())
		}

		/// The overturned proof in `snapshot` as a dispute judges it, with `attester` as the
		/// defender: it holds no collateral and no window, and is `Challenged` while summoned.
		fn snapshot_unit(snapshot: &OverturnedOf<T>, attester: T::AccountId) -> ProvenUnitOf<T> {
			ProvenUnitOf::<T> {
				solver: attester.clone(),
				jackpot_pay: Zero::zero(),
				collateral: Zero::zero(),
				owner: attester,
				model: snapshot.model.clone(),
				hyper: snapshot.hyper.clone(),
				verification: VerificationMode::Exact,
				trace: snapshot.trace,
				data: snapshot.data.clone(),
				window_ends: snapshot.summons_until,
				challenged: true,
				segment_blocks: snapshot.segment_blocks,
			}
		}

		/// The proof dispute `info` judges: the unit's standing one, or for a summons the
		/// overturned one it names.
		fn proof_of(info: &DisputeOf<T>) -> Result<ProvenUnitOf<T>, DispatchError> {
			match info.summons {
				Some(overturned) => Overturned::<T>::get(overturned)
					.map(|snapshot| Self::snapshot_unit(&snapshot, info.defender.clone()))
					.ok_or(Error::<T>::NotSummonable.into()),
				None => T::Units::proven_unit(info.job, info.unit).ok_or(Error::<T>::NotDisputable.into()),
			}
		}

		/// Keeps the proof `proven` that dispute `id` convicted without finding a step, with
		/// the verifiers that attested it, for their summonses. Returns the weight it took.
		fn keep_for_summonses(id: DisputeId, info: &DisputeOf<T>, proven: &ProvenUnitOf<T>) -> Weight {
			let attesters: Vec<_> = T::Attestations::match_attesters(info.job, info.unit)
				.into_iter()
				.take(T::MaxAttesters::get() as usize)
				.map(|(verifier, samples)| {
					let samples = samples.into_iter().take(T::MaxSamplesPerAttester::get() as usize).collect::<Vec<_>>();
					(verifier, BoundedVec::truncate_from(samples))
				})
				.collect();
			if attesters.is_empty() {
				return T::DbWeight::get().reads(2);
			}
			let until = frame_system::Pallet::<T>::block_number()
				.saturating_add(T::SummonsWindow::get())
				.saturating_add(proven.segment_blocks.into());
			Overturned::<T>::insert(
				id,
				OverturnedProof {
					job: info.job,
					unit: info.unit,
					model: proven.model.clone(),
					hyper: proven.hyper.clone(),
					data: proven.data.clone(),
					trace: proven.trace,
					segment_blocks: proven.segment_blocks,
					attesters: BoundedVec::truncate_from(attesters),
					summons_until: until,
					open_summonses: 0,
				},
			);
			Self::deposit_event(Event::AttestersSummonable {
				overturned: id,
				job: info.job,
				unit: info.unit,
				trace_root: proven.trace.root,
				until,
			});
			T::DbWeight::get().reads_writes(2, 1)
		}

		/// Opens a dispute of `challenger` over unit `unit` of `job`, acting in `role`,
		/// holding `bond`: checks what every dispute needs (a standing proof, inside its
		/// window unless a drawn verifier reports, not the challenger's own, a free slot, and
		/// no other dispute of the challenger's over the unit) and then `check`, before
		/// anything changes. Returns the new dispute's id and the unit.
		fn open(
			challenger: &T::AccountId,
			job: JobId,
			unit: UnitIndex,
			role: Role,
			bond: BalanceOf<T>,
			check: impl FnOnce(&ProvenUnitOf<T>) -> DispatchResult,
		) -> Result<(DisputeId, ProvenUnitOf<T>), DispatchError> {
			let proven = T::Units::proven_unit(job, unit).ok_or(Error::<T>::NotDisputable)?;
			let now = frame_system::Pallet::<T>::block_number();
			// The block the window ends in is the first the unit may be finalized in. A
			// drawn verifier reports within its own round, which holds finalization back.
			ensure!(role == Role::Verifier || now < proven.window_ends, Error::<T>::WindowClosed);
			ensure!(*challenger != proven.solver, Error::<T>::OwnProof);
			check(&proven)?;
			let key = (job, unit);
			let open = UnitDisputes::<T>::get(key);
			// Challengers never take the verifiers' slots: at most `VerifiersPerUnit` drawn
			// verifiers can mismatch one proof, and each finds a slot free.
			ensure!(role == Role::Verifier || (open.len() as u32) < Self::challenger_slots(), Error::<T>::TooManyDisputes);
			ensure!(
				!open.iter().any(|id| Disputes::<T>::get(id).is_some_and(|d| d.challenger == *challenger)),
				Error::<T>::AlreadyChallenged
			);
			T::Currency::hold(&HoldReason::ChallengeBond.into(), challenger, bond)
				.map_err(|_| Error::<T>::InsufficientBalance)?;
			let id = NextDisputeId::<T>::get();
			UnitDisputes::<T>::try_mutate(key, |open| open.try_push(id)).map_err(|_| Error::<T>::TooManyDisputes)?;
			NextDisputeId::<T>::put(id.saturating_add(1));
			T::Units::open_challenge(job, unit)?;
			Ok((id, proven))
		}

		/// A dispute of `challenger` over `proven`, holding `bond`, with `trace_root` its
		/// root, waiting in the referee's phase for its first move until one response
		/// window from now.
		fn new_dispute(
			job: JobId,
			unit: UnitIndex,
			proven: &ProvenUnitOf<T>,
			challenger: T::AccountId,
			bond: BalanceOf<T>,
			trace_root: Digest,
		) -> DisputeOf<T> {
			DisputeInfo {
				job,
				unit,
				defender: proven.solver.clone(),
				challenger,
				bond,
				challenger_trace_root: trace_root,
				segment: None,
				segment_start: None,
				segment_traces: None,
				step: None,
				operator_roots: None,
				operator: None,
				piece_roots: None,
				piece: None,
				phase: Phase::Judge,
				deadline: frame_system::Pallet::<T>::block_number().saturating_add(Self::response_window(proven)),
				rounds: 0,
				summons: None,
			}
		}

		pub(crate) fn do_reveal(who: T::AccountId, id: DisputeId, reveal: Reveal) -> DispatchResult {
			let (mut info, party, proven) = Self::answering(&who, id)?;
			let Phase::Bisect { level, mut game, nodes, mut reveals } = info.phase.clone() else {
				return Err(Error::<T>::WrongPhase.into());
			};
			ensure!(reveals.get(party).is_none(), Error::<T>::AlreadyAnswered);
			game.check(nodes.get(party), &reveal).map_err(|foul| match foul {
				Foul::Inconsistent => Error::<T>::RevealInconsistent,
				Foul::Misshapen => Error::<T>::RevealMisshapen,
			})?;
			*reveals.get_mut(party) = Some(reveal);
			Self::deposit_event(Event::Answered { dispute: id, party });
			let Some(both) = reveals.both() else {
				info.phase = Phase::Bisect { level, game, nodes, reveals };
				Disputes::<T>::insert(id, info);
				return Ok(());
			};
			// Both reveals were checked against their nodes, whose shapes are the job's, and
			// the nodes differ, so the round always plays.
			let (defender, challenger) = game
				.play(&nodes.defender, &nodes.challenger, both.defender, both.challenger)
				.map_err(|_| Error::<T>::RevealInconsistent)?;
			info.rounds = info.rounds.saturating_add(1);
			info.phase = Phase::Bisect { level, game, nodes: Pair { defender, challenger }, reveals: Pair::default() };
			Self::settle_level(&mut info, &proven)?;
			Self::advanced(id, &info);
			Disputes::<T>::insert(id, info);
			Ok(())
		}

		pub(crate) fn do_bind_segment(
			who: T::AccountId,
			id: DisputeId,
			trace_root: Digest,
			binding: SegmentBinding,
		) -> DispatchResult {
			let (mut info, party, proven) = Self::answering(&who, id)?;
			let Phase::BindSegment { mut roots } = info.phase.clone() else {
				return Err(Error::<T>::WrongPhase.into());
			};
			ensure!(roots.get(party).is_none(), Error::<T>::AlreadyAnswered);
			let segment = info.segment.ok_or(Error::<T>::WrongPhase)?;
			let unit = Self::unit_of(&info, &proven, party);
			let trace =
				bind_segment(&unit, segment, &trace_root, &binding).map_err(|_| Error::<T>::InvalidSegmentBinding)?;
			// Both sides' trees share every boundary before the segment, so both open the
			// same start; a second, different one would need a hash collision.
			ensure!(
				info.segment_start.is_none_or(|start| start == trace.start_state_root),
				Error::<T>::InvalidSegmentBinding
			);
			info.segment_start = Some(trace.start_state_root);
			*roots.get_mut(party) = Some(trace_root);
			Self::deposit_event(Event::Answered { dispute: id, party });
			match roots.both() {
				// Only a summons can get here: in a dispute over a standing proof the segment
				// is the first whose boundaries differ, so the traces' last leaves differ.
				Some(both) if both.defender == both.challenger => {
					Self::conclude(id, info, &proven, Ruling::DefenderWins, Grounds::NoDisagreement)?;
					return Ok(());
				},
				Some(both) => {
					let nodes = Pair { defender: *both.defender, challenger: *both.challenger };
					info.segment_traces = Some(nodes);
					Self::enter_level(&mut info, &proven, Level::Steps, TreeKind::Segments, trace.steps, nodes)?;
					Self::advanced(id, &info);
				},
				None => info.phase = Phase::BindSegment { roots },
			}
			Disputes::<T>::insert(id, info);
			Ok(())
		}

		pub(crate) fn do_bind_step(
			who: T::AccountId,
			id: DisputeId,
			operator_root: Digest,
			binding: StepBinding,
		) -> Result<Weight, DispatchError> {
			let (mut info, party, proven) = Self::answering(&who, id)?;
			let Phase::BindStep { mut roots } = info.phase.clone() else {
				return Err(Error::<T>::WrongPhase.into());
			};
			ensure!(roots.get(party).is_none(), Error::<T>::AlreadyAnswered);
			let step = info.step.ok_or(Error::<T>::WrongPhase)?;
			let graph = job_graph(&proven.model, &proven.hyper).ok_or(Error::<T>::InvalidJob)?;
			let trace = Self::segment_trace_of(&info, &proven, party)?;
			bind_step(&graph, &trace, step, &operator_root, &binding).map_err(|_| Error::<T>::InvalidStepBinding)?;
			*roots.get_mut(party) = Some(operator_root);
			Self::deposit_event(Event::Answered { dispute: id, party });
			match roots.both() {
				Some(both) => {
					let nodes = Pair { defender: *both.defender, challenger: *both.challenger };
					info.operator_roots = Some(nodes);
					let leaves =
						level_leaves(&graph, &proven.trace, Some(&trace), Level::Operators).map_err(|_| Error::<T>::InvalidJob)?;
					Self::enter_level(&mut info, &proven, Level::Operators, TreeKind::Segments, leaves, nodes)?;
					Self::advanced(id, &info);
				},
				None => info.phase = Phase::BindStep { roots },
			}
			Disputes::<T>::insert(id, info);
			Ok(Self::graph_weight(&proven.model))
		}

		pub(crate) fn do_bind_operator(
			who: T::AccountId,
			id: DisputeId,
			piece_root: Digest,
			proof: MerkleProof,
		) -> Result<Weight, DispatchError> {
			let (mut info, party, proven) = Self::answering(&who, id)?;
			let Phase::BindOperator { mut roots } = info.phase.clone() else {
				return Err(Error::<T>::WrongPhase.into());
			};
			ensure!(roots.get(party).is_none(), Error::<T>::AlreadyAnswered);
			let (operator, operator_roots) =
				info.operator.zip(info.operator_roots).ok_or(Error::<T>::WrongPhase)?;
			let graph = job_graph(&proven.model, &proven.hyper).ok_or(Error::<T>::InvalidJob)?;
			bind_operator(&graph, operator, operator_roots.get(party), &piece_root, &proof)
				.map_err(|_| Error::<T>::InvalidOperatorBinding)?;
			*roots.get_mut(party) = Some(piece_root);
			Self::deposit_event(Event::Answered { dispute: id, party });
			match roots.both() {
				Some(both) => {
					let nodes = Pair { defender: *both.defender, challenger: *both.challenger };
					info.piece_roots = Some(nodes);
					let level = Level::Pieces { operator };
					let leaves = level_leaves(&graph, &proven.trace, None, level).map_err(|_| Error::<T>::InvalidJob)?;
					let kind = level_kind(&graph, level).map_err(|_| Error::<T>::InvalidJob)?;
					Self::enter_level(&mut info, &proven, level, kind, leaves, nodes)?;
					Self::advanced(id, &info);
				},
				None => info.phase = Phase::BindOperator { roots },
			}
			Disputes::<T>::insert(id, info);
			Ok(Self::graph_weight(&proven.model))
		}

		pub(crate) fn do_resolve(id: DisputeId, openings: Openings) -> Result<Weight, DispatchError> {
			let info = Disputes::<T>::get(id).ok_or(Error::<T>::DisputeNotFound)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now <= info.deadline, Error::<T>::DeadlinePassed);
			ensure!(info.phase == Phase::Judge, Error::<T>::WrongPhase);
			ensure!(openings.encoded_size() <= T::MaxOpeningsLen::get() as usize, Error::<T>::OpeningsTooLarge);
			let proven = Self::proof_of(&info)?;
			let (step, operator, piece) = (info.step, info.operator, info.piece);
			let (Some(step), Some(operator), Some(piece)) = (step, operator, piece) else {
				return Err(Error::<T>::WrongPhase.into());
			};
			let (operator_roots, piece_roots) =
				info.operator_roots.zip(info.piece_roots).ok_or(Error::<T>::WrongPhase)?;
			// Everything the referee judges against comes from the chain: the defender's
			// proof, the job's data, the position and roots the game fixed.
			let case = Dispute {
				trace: Self::segment_trace_of(&info, &proven, Party::Defender)?,
				data: proven.data.clone(),
				position: Position { step, operator, piece },
				operator_root: operator_roots.defender,
				piece_root: piece_roots.defender,
			};
			let ruling = match judge(&proven.model, &proven.hyper, &case, &openings) {
				Ok(_) => Ruling::DefenderWins,
				// The defender's own committed inputs lead to a non-finite value: whatever it
				// claimed, its trace is not a valid run from the agreed prefix.
				Err(RefereeError::WrongClaimedOutput { .. } | RefereeError::NonFiniteOutput) => Ruling::ChallengerWins,
				Err(_) => return Err(Error::<T>::InvalidOpenings.into()),
			};
			let graph = Self::graph_weight(&proven.model);
			Ok(Self::conclude(id, info, &proven, ruling, Grounds::Referee)?.saturating_add(graph))
		}

		/// Where dispute `id` stands, or `None` if it is not open. Backs
		/// `DisputesApi::dispute`.
		pub fn status(id: DisputeId) -> Option<touchstone_primitives::DisputeStatus<T::AccountId, BlockNumberFor<T>>> {
			use touchstone_primitives::DisputeStage;
			let info = Disputes::<T>::get(id)?;
			let (stage, awaiting_defender, awaiting_challenger) = match &info.phase {
				Phase::Bisect { level, reveals, .. } => {
					(DisputeStage::Bisect(*level), reveals.defender.is_none(), reveals.challenger.is_none())
				},
				Phase::BindSegment { roots } => {
					(DisputeStage::BindSegment, roots.defender.is_none(), roots.challenger.is_none())
				},
				Phase::BindStep { roots } => (DisputeStage::BindStep, roots.defender.is_none(), roots.challenger.is_none()),
				Phase::BindOperator { roots } => {
					(DisputeStage::BindOperator, roots.defender.is_none(), roots.challenger.is_none())
				},
				Phase::Judge => (DisputeStage::Judge, true, false),
				Phase::Availability { step, chunk } => (DisputeStage::Availability { step: *step, chunk: *chunk }, true, false),
			};
			Some(touchstone_primitives::DisputeStatus {
				job: info.job,
				unit: info.unit,
				defender: info.defender,
				challenger: info.challenger,
				stage,
				segment: info.segment,
				step: info.step,
				operator: info.operator,
				piece: info.piece,
				rounds: info.rounds,
				deadline: info.deadline,
				awaiting_defender,
				awaiting_challenger,
			})
		}

		/// The ids of the disputes open over a unit. Backs `DisputesApi::unit_disputes`.
		pub fn unit_disputes(job: JobId, unit: UnitIndex) -> Vec<DisputeId> {
			UnitDisputes::<T>::get((job, unit)).into_inner()
		}

		/// The open disputes `account` is a side of, read from its own keys of
		/// `PartyDisputes`. Backs the `DisputesApi::disputes_of` runtime API.
		pub fn disputes_of(account: &T::AccountId) -> Vec<DisputeId> {
			PartyDisputes::<T>::iter_key_prefix(account).collect()
		}

		pub(crate) fn do_time_out(id: DisputeId) -> Result<Weight, DispatchError> {
			let info = Disputes::<T>::get(id).ok_or(Error::<T>::DisputeNotFound)?;
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now > info.deadline, Error::<T>::DeadlineNotReached);
			let silent = match &info.phase {
				Phase::Bisect { reveals, .. } => reveals.missing(),
				Phase::BindSegment { roots } | Phase::BindStep { roots } | Phase::BindOperator { roots } => roots.missing(),
				Phase::Judge | Phase::Availability { .. } => Some(Party::Defender),
			};
			// Neither side answered: the challenger brought the case and abandoned it.
			let ruling = match silent.unwrap_or(Party::Challenger) {
				Party::Defender => Ruling::ChallengerWins,
				Party::Challenger => Ruling::DefenderWins,
			};
			let proven = Self::proof_of(&info)?;
			Self::conclude(id, info, &proven, ruling, Grounds::Timeout)
		}

		/// The dispute `id`, the side `who` is on, and its unit, if `who` may still answer.
		fn answering(who: &T::AccountId, id: DisputeId) -> Result<(DisputeOf<T>, Party, ProvenUnitOf<T>), DispatchError> {
			let info = Disputes::<T>::get(id).ok_or(Error::<T>::DisputeNotFound)?;
			let party = if *who == info.defender {
				Party::Defender
			} else if *who == info.challenger {
				Party::Challenger
			} else {
				return Err(Error::<T>::NotAParty.into());
			};
			let now = frame_system::Pallet::<T>::block_number();
			ensure!(now <= info.deadline, Error::<T>::DeadlinePassed);
			let proven = Self::proof_of(&info)?;
			Ok((info, party, proven))
		}

		/// `party`'s learning proof at the segment level: the defender's is the chain's
		/// record; the challenger's is the same with its own segment root.
		fn unit_of(info: &DisputeOf<T>, proven: &ProvenUnitOf<T>, party: Party) -> UnitCommitment {
			match party {
				Party::Defender => proven.trace,
				Party::Challenger => UnitCommitment { root: info.challenger_trace_root, ..proven.trace },
			}
		}

		/// `party`'s step-level trace of the disputed segment, as it bound it: what the
		/// step level and the referee judge it against.
		fn segment_trace_of(
			info: &DisputeOf<T>,
			proven: &ProvenUnitOf<T>,
			party: Party,
		) -> Result<TraceCommitment, DispatchError> {
			let (segment, start, roots) = match (info.segment, info.segment_start, info.segment_traces) {
				(Some(segment), Some(start), Some(roots)) => (segment, start, roots),
				_ => return Err(Error::<T>::WrongPhase.into()),
			};
			segment_trace_commitment(&proven.trace, segment, *roots.get(party), start).ok_or(Error::<T>::InvalidJob.into())
		}

		/// Starts bisecting `level`'s trees of `kind` with `leaves` leaves (the shape and
		/// node function the job gives them: `level_leaves`, `level_kind`) from the sides'
		/// roots `nodes`; a tree of a single leaf needs no round.
		fn enter_level(
			info: &mut DisputeOf<T>,
			proven: &ProvenUnitOf<T>,
			level: Level,
			kind: TreeKind,
			leaves: u32,
			nodes: Pair<Digest>,
		) -> DispatchResult {
			let game = Game::new_in(kind, leaves).map_err(|_| Error::<T>::InvalidJob)?;
			info.phase = Phase::Bisect { level, game, nodes, reveals: Pair::default() };
			Self::settle_level(info, proven)
		}

		/// The blocks a side has to answer a phase of a dispute over `proven`:
		/// `ResponseWindow`, and the blocks one of its checkpoint segments takes to
		/// re-execute (`segment_blocks`).
		pub fn response_window(proven: &ProvenUnitOf<T>) -> BlockNumberFor<T> {
			T::ResponseWindow::get().saturating_add(proven.segment_blocks.into())
		}

		/// If the current level's game stands on a leaf, records it and moves to the next
		/// phase; the new phase's deadline starts now either way.
		fn settle_level(info: &mut DisputeOf<T>, proven: &ProvenUnitOf<T>) -> DispatchResult {
			info.deadline = frame_system::Pallet::<T>::block_number().saturating_add(Self::response_window(proven));
			let Phase::Bisect { level, game, .. } = &info.phase else { return Ok(()) };
			let Some(leaf) = game.leaf() else { return Ok(()) };
			match *level {
				Level::Segments => {
					info.segment = Some(leaf);
					info.phase = Phase::BindSegment { roots: Pair::default() };
				},
				Level::Steps => {
					let segment = info.segment.ok_or(Error::<T>::WrongPhase)?;
					let range = proven.trace.segments().range(segment).ok_or(Error::<T>::InvalidJob)?;
					info.step = Some(range.start.saturating_add(leaf));
					info.phase = Phase::BindStep { roots: Pair::default() };
				},
				Level::Operators => {
					info.operator = Some(leaf);
					info.phase = Phase::BindOperator { roots: Pair::default() };
				},
				Level::Pieces { .. } => {
					info.piece = Some(leaf);
					info.phase = Phase::Judge;
				},
			}
			Ok(())
		}

		fn advanced(id: DisputeId, info: &DisputeOf<T>) {
			Self::deposit_event(Event::Advanced {
				dispute: id,
				phase: info.phase.clone(),
				rounds: info.rounds,
				deadline: info.deadline,
			});
		}

		/// Ends dispute `id` with `ruling`: the loser pays, the unit moves on, and disputes
		/// the ruling makes moot are dismissed. Returns the weight of what the ruling did
		/// beyond the benchmarked call: the step ranges rolled back and the disputes dismissed.
		fn conclude(
			id: DisputeId,
			info: DisputeOf<T>,
			proven: &ProvenUnitOf<T>,
			ruling: Ruling,
			grounds: Grounds,
		) -> Result<Weight, DispatchError> {
			if let Some(overturned) = info.summons {
				return Self::conclude_summons(id, info, overturned, proven, ruling, grounds);
			}
			// A forced error is no lie: the solver is not slashed for it.
			if ruling == Ruling::ChallengerWins {
				ensure!(!T::Attestations::holds_rulings(info.job, info.unit), Error::<T>::RulingHeld);
			}
			Self::forget(id, &info);
			let mut aftermath = Weight::zero();
			let (forfeited, to_winners) = match ruling {
				Ruling::ChallengerWins => {
					Self::release_bond(&info)?;
					let winners = Self::convicting_challengers(&info);
					let share = T::ConvictionShare::get();
					// A lie on a valuable unit costs at least the unit's collateral.
					let slashed = T::Slash::slash(
						&info.defender,
						Role::Solver,
						T::SolverSlash::get().max(proven.collateral),
						SlashReason::InvalidProof,
						Some((&winners[..], share)),
					)?;
					// Judged while the proof still stands: its round names the attesters. With
					// no step found, nothing shows which of them attested falsely: the proof
					// is kept for their summonses.
					T::Attestations::proof_overturned(info.job, info.unit, info.step, (&winners[..], share));
					if info.step.is_none() {
						aftermath = Self::keep_for_summonses(id, &info, proven);
					}
					let moot = T::Units::reject_proof(info.job, info.unit)?;
					let dismissed = Self::dismiss_moot(info.job, info.unit, &moot)?;
					let winners = winners.len() as u32;
					aftermath = aftermath
						.saturating_add(Self::ruling_weight(moot.len() as u32, dismissed))
						.saturating_add(Self::reward_weight(winners))
						.saturating_add(T::Attestations::proof_overturned_weight(winners));
					let each = share.mul_floor(slashed).checked_div(&BalanceOf::<T>::from(winners)).unwrap_or_default();
					(slashed, each.saturating_mul(BalanceOf::<T>::from(winners)))
				},
				Ruling::DefenderWins => {
					let to_defender = Self::forfeit_bond(&info)?;
					if UnitDisputes::<T>::get((info.job, info.unit)).is_empty() && proven.challenged {
						T::Units::close_challenge(info.job, info.unit)?;
					}
					(info.bond, to_defender)
				},
			};
			Self::deposit_event(Event::DisputeResolved {
				dispute: id,
				job: info.job,
				unit: info.unit,
				ruling,
				grounds,
				forfeited,
				to_winners,
			});
			Ok(aftermath)
		}

		/// Ends summons `id` of the proof `overturned` convicted with `ruling`: an attester that
		/// loses is slashed for a false attestation, `ConvictionShare` to the summoner, and its
		/// other summonses over the proof are dismissed (one false attestation, one slash); a
		/// summoner that loses forfeits its bond as a challenger does. Nothing else moves: the
		/// proof was overturned already. Returns the weight of the slash and the dismissals.
		fn conclude_summons(
			id: DisputeId,
			info: DisputeOf<T>,
			overturned: DisputeId,
			proven: &ProvenUnitOf<T>,
			ruling: Ruling,
			grounds: Grounds,
		) -> Result<Weight, DispatchError> {
			Self::forget(id, &info);
			Overturned::<T>::mutate(overturned, |snapshot| {
				if let Some(snapshot) = snapshot {
					snapshot.open_summonses = snapshot.open_summonses.saturating_sub(1);
				}
			});
			let mut dismissed = 0u32;
			let (forfeited, to_winners) = match ruling {
				Ruling::ChallengerWins => {
					Self::release_bond(&info)?;
					dismissed = Self::dismiss_summonses(overturned, &info.defender)?;
					// The step the summons found, or the segment's first if the attester fell
					// silent before binding its trace.
					let segment_start = info.segment.and_then(|segment| proven.trace.segments().range(segment)).map(|r| r.start);
					let step = info.step.or(segment_start).unwrap_or(proven.trace.first_step);
					let share = T::ConvictionShare::get();
					let summoner = [info.challenger.clone()];
					let slashed = BalanceOf::<T>::unique_saturated_from(T::Attestations::false_attestation(
						info.job,
						info.unit,
						&info.defender,
						step,
						(&summoner[..], share),
					));
					(slashed, share.mul_floor(slashed))
				},
				Ruling::DefenderWins => (info.bond, Self::forfeit_bond(&info)?),
			};
			Self::deposit_event(Event::DisputeResolved {
				dispute: id,
				job: info.job,
				unit: info.unit,
				ruling,
				grounds,
				forfeited,
				to_winners,
			});
			Ok(T::Attestations::false_attestation_weight().saturating_add(Self::ruling_weight(0, dismissed)))
		}

		/// Dismisses every open summons of `attester` over the proof `overturned` convicted,
		/// returning the summoners' bonds, and takes the attester off the proof's list: its
		/// false attestation has been judged. Returns how many it dismissed.
		fn dismiss_summonses(overturned: DisputeId, attester: &T::AccountId) -> Result<u32, DispatchError> {
			let Some(mut snapshot) = Overturned::<T>::get(overturned) else { return Ok(0) };
			let Some(position) = snapshot.attesters.iter().position(|(who, _)| who == attester) else { return Ok(0) };
			let (_, samples) = snapshot.attesters.remove(position);
			let mut dismissed = 0u32;
			for segment in samples {
				for id in Summonses::<T>::take((overturned, attester.clone(), segment)) {
					if let Some(info) = Self::take_record(id) {
						let returned = Self::release_bond(&info)?;
						Self::deposit_event(Event::DisputeDismissed { dispute: id, returned });
						snapshot.open_summonses = snapshot.open_summonses.saturating_sub(1);
						dismissed = dismissed.saturating_add(1);
					}
				}
			}
			Overturned::<T>::insert(overturned, snapshot);
			Ok(dismissed)
		}

		/// Forfeits the challenger's bond of the dispute `info` the defender won:
		/// `WinnerShare` to the defender, the rest to the jackpot. Returns the defender's part.
		fn forfeit_bond(info: &DisputeOf<T>) -> Result<BalanceOf<T>, DispatchError> {
			let to_defender = T::WinnerShare::get().mul_floor(info.bond);
			let to_jackpot = info.bond.saturating_sub(to_defender);
			for (to, amount) in [(&info.defender, to_defender), (&T::Jackpot::get(), to_jackpot)] {
				if amount.is_zero() {
					continue;
				}
				T::Currency::transfer_on_hold(
					&HoldReason::ChallengeBond.into(),
					&info.challenger,
					to,
					amount,
					Precision::Exact,
					Restriction::Free,
					// The bond is forfeit: a freeze on the challenger cannot keep it.
					Fortitude::Force,
				)?;
			}
			Ok(to_defender)
		}

		/// Dismisses every other dispute over `unit` and every dispute over the `moot`
		/// units of `job`, returning their bonds: the proofs they dispute are gone. Returns
		/// how many it dismissed.
		pub(crate) fn dismiss_moot(job: JobId, unit: UnitIndex, moot: &[UnitIndex]) -> Result<u32, DispatchError> {
			let mut dismissed = 0u32;
			for index in core::iter::once(unit).chain(moot.iter().copied()) {
				let ids: Vec<DisputeId> = UnitDisputes::<T>::take((job, index)).into_inner();
				for id in ids {
					if let Some(info) = Self::take_record(id) {
						let returned = Self::release_bond(&info)?;
						Self::deposit_event(Event::DisputeDismissed { dispute: id, returned });
						dismissed = dismissed.saturating_add(1);
					}
				}
			}
			Ok(dismissed)
		}

		/// The challengers that convict a proof with dispute `info` (already forgotten):
		/// its own and those of every other dispute open over the unit, whoever opened
		/// first. A challenger holds at most one dispute over a unit, so none is named twice.
		fn convicting_challengers(info: &DisputeOf<T>) -> Vec<T::AccountId> {
			let others = UnitDisputes::<T>::get((info.job, info.unit)).into_iter().filter_map(Disputes::<T>::get);
			core::iter::once(info.challenger.clone()).chain(others.map(|other| other.challenger)).collect()
		}

		/// The weight of paying a conviction's reward to `winners` challengers beyond the
		/// one the benchmarked ruling pays: a read of each open dispute and a deposit into
		/// each account.
		fn reward_weight(winners: u32) -> Weight {
			T::DbWeight::get().reads_writes(2, 1).saturating_mul(u64::from(winners.saturating_sub(1)))
		}

		/// The weight of a ruling's aftermath: `rolled_back` later step ranges rolled back
		/// (the tasks pallet's benchmarked figure) and `dismissed` disputes dismissed, each
		/// bounded by the benchmarked `challenge`, which holds a bond and writes a dispute
		/// where a dismissal releases one and removes it.
		fn ruling_weight(rolled_back: u32, dismissed: u32) -> Weight {
			T::Units::overturn_weight(rolled_back)
				.saturating_add(T::WeightInfo::challenge().saturating_mul(u64::from(dismissed)))
		}

		/// The most a ruling's aftermath can weigh: every later range of the largest job
		/// rolled back, every unit's dispute slots full, and the proof's attesters judged.
		pub fn worst_ruling_weight() -> Weight {
			let units = T::Units::max_units_per_job();
			let winners = T::MaxDisputesPerUnit::get();
			// A failed dispute's `close_challenge` also counts the window's reopenings.
			Self::ruling_weight(units.saturating_sub(1), units.saturating_mul(winners))
				.saturating_add(T::DbWeight::get().reads_writes(1, 1))
				// A conviction without a step keeps the proof for its attesters' summonses.
				.saturating_add(T::DbWeight::get().reads_writes(2, 1))
				.saturating_add(Self::reward_weight(winners))
				.saturating_add(T::Attestations::proof_overturned_weight(winners))
		}

		/// Stores a newly opened dispute, and lists it under both of its sides.
		fn record_new(id: DisputeId, info: DisputeOf<T>) {
			PartyDisputes::<T>::insert(&info.defender, id, ());
			PartyDisputes::<T>::insert(&info.challenger, id, ());
			Disputes::<T>::insert(id, info);
		}

		/// Removes dispute `id` and its sides' listings, returning it.
		fn take_record(id: DisputeId) -> Option<DisputeOf<T>> {
			let info = Disputes::<T>::take(id)?;
			PartyDisputes::<T>::remove(&info.defender, id);
			PartyDisputes::<T>::remove(&info.challenger, id);
			Some(info)
		}

		/// Removes dispute `id` from storage.
		fn forget(id: DisputeId, info: &DisputeOf<T>) {
			Self::take_record(id);
			if let (Some(overturned), Some(segment)) = (info.summons, info.segment) {
				Summonses::<T>::mutate_exists((overturned, info.defender.clone(), segment), |open| {
					if let Some(list) = open {
						list.retain(|open_id| *open_id != id);
						if list.is_empty() {
							*open = None;
						}
					}
				});
				return;
			}
			UnitDisputes::<T>::mutate_exists((info.job, info.unit), |open| {
				if let Some(list) = open {
					list.retain(|open_id| *open_id != id);
					if list.is_empty() {
						*open = None;
					}
				}
			});
		}

		/// Returns the challenger's bond.
		fn release_bond(info: &DisputeOf<T>) -> Result<BalanceOf<T>, DispatchError> {
			T::Currency::release(&HoldReason::ChallengeBond.into(), &info.challenger, info.bond, Precision::BestEffort)
		}

		/// Checks the pallet's invariants:
		/// - every open dispute is listed under its unit, once, and every listed id is open;
		/// - every open dispute is indexed under both of its sides, and nothing else is;
		/// - the unit of every open dispute has a standing proof and is `Challenged`, and the
		///   defender is its solver;
		/// - every summons names a kept overturned proof that its defender attested over its
		///   segment, is listed under that slot once and not under the unit, and each kept
		///   proof counts its open summonses;
		/// - the challenge bonds held from each account are the bonds of its open disputes.
		#[cfg(any(feature = "try-runtime", feature = "std"))]
		pub fn do_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			use alloc::collections::btree_map::BTreeMap;
			use frame_support::traits::fungible::InspectHold;
			let mut bonds: BTreeMap<T::AccountId, BalanceOf<T>> = BTreeMap::new();
			let mut summonses: BTreeMap<DisputeId, u32> = BTreeMap::new();
			for (id, info) in Disputes::<T>::iter() {
				let listed = UnitDisputes::<T>::get((info.job, info.unit));
				let proven = match info.summons {
					Some(overturned) => {
						ensure!(!listed.contains(&id), "summons listed as a dispute over the unit");
						let snapshot = Overturned::<T>::get(overturned).ok_or("summons of a proof not kept")?;
						let segment = info.segment.ok_or("summons without its segment")?;
						ensure!(
							snapshot.attesters.iter().any(|(who, samples)| *who == info.defender && samples.contains(&segment)),
							"summoned verifier did not attest the segment"
						);
						let slot = Summonses::<T>::get((overturned, info.defender.clone(), segment));
						ensure!(slot.iter().filter(|listed| **listed == id).count() == 1, "summons not listed once");
						let count = summonses.entry(overturned).or_default();
						*count = count.saturating_add(1);
						Self::snapshot_unit(&snapshot, info.defender.clone())
					},
					None => {
						ensure!(listed.iter().filter(|listed| **listed == id).count() == 1, "open dispute not listed once");
						T::Units::proven_unit(info.job, info.unit).ok_or("dispute over a unit without a proof")?
					},
				};
				ensure!(proven.challenged, "disputed unit not Challenged");
				ensure!(proven.solver == info.defender, "defender is not the unit's solver");
				// The levels are found in order: a step only inside the bound segment traces.
				let grid = proven.trace.segments();
				if let Some(segment) = info.segment {
					ensure!(segment < grid.count(), "disputed segment outside the unit");
				}
				ensure!(
					info.segment_traces.is_none() || (info.segment.is_some() && info.segment_start.is_some()),
					"segment traces without their segment"
				);
				if let Some(step) = info.step {
					let range = info.segment.and_then(|segment| grid.range(segment)).ok_or("a step without its segment")?;
					ensure!(info.segment_traces.is_some() && range.contains(&step), "disputed step outside the bound segment");
				}
				let entry = bonds.entry(info.challenger.clone()).or_default();
				*entry = entry.saturating_add(info.bond);
			}
			let sides: alloc::collections::BTreeSet<(T::AccountId, DisputeId)> = Disputes::<T>::iter()
				.flat_map(|(id, info)| [(info.defender, id), (info.challenger, id)])
				.collect();
			ensure!(
				PartyDisputes::<T>::iter_keys().collect::<alloc::collections::BTreeSet<_>>() == sides,
				"an account's index of disputes is not the open disputes it is a side of"
			);
			for (_, ids) in UnitDisputes::<T>::iter() {
				ensure!(!ids.is_empty(), "empty dispute list stored");
				for id in ids {
					ensure!(Disputes::<T>::contains_key(id), "listed dispute not open");
				}
			}
			for ((overturned, _, _), ids) in Summonses::<T>::iter() {
				ensure!(!ids.is_empty(), "empty summons list stored");
				for id in ids {
					ensure!(
						Disputes::<T>::get(id).is_some_and(|info| info.summons == Some(overturned)),
						"listed summons not open"
					);
				}
			}
			for (overturned, snapshot) in Overturned::<T>::iter() {
				ensure!(
					snapshot.open_summonses == summonses.get(&overturned).copied().unwrap_or(0),
					"kept proof miscounts its open summonses"
				);
			}
			for (who, bond) in bonds {
				ensure!(
					T::Currency::balance_on_hold(&HoldReason::ChallengeBond.into(), &who) == bond,
					"challenge bonds held differ from the open disputes'"
				);
			}
			Ok(())
		}
	}
}

/// Storage migrations of this pallet, each from the version before.
pub mod migrations {
	use super::*;
	use codec::{Decode, Encode};
	use frame_support::{
		traits::{Get, GetStorageVersion, OnRuntimeUpgrade, StorageVersion},
		weights::Weight,
	};
	use touchstone_primitives::referee::Digest;

	/// A dispute as version 0 stored it: every one over a standing proof.
	#[derive(Encode, Decode)]
	pub(crate) struct DisputeInfoV0<AccountId, Balance, BlockNumber> {
		pub(crate) job: touchstone_primitives::JobId,
		pub(crate) unit: touchstone_primitives::UnitIndex,
		pub(crate) defender: AccountId,
		pub(crate) challenger: AccountId,
		pub(crate) bond: Balance,
		pub(crate) challenger_trace_root: Digest,
		pub(crate) segment: Option<u32>,
		pub(crate) segment_start: Option<Digest>,
		pub(crate) segment_traces: Option<Pair<Digest>>,
		pub(crate) step: Option<u32>,
		pub(crate) operator_roots: Option<Pair<Digest>>,
		pub(crate) operator: Option<u32>,
		pub(crate) piece_roots: Option<Pair<Digest>>,
		pub(crate) piece: Option<u32>,
		pub(crate) phase: Phase,
		pub(crate) deadline: BlockNumber,
		pub(crate) rounds: u32,
	}

	/// Version 0 to 1: a dispute may be a summons of an overturned proof's attester
	/// (`DisputeInfo::summons`); every dispute open at the upgrade is over a standing proof,
	/// and goes on where it stood. At most `MaxDisputesPerUnit` disputes per open unit.
	pub struct AddSummons<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for AddSummons<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 1 {
				return T::DbWeight::get().reads(1);
			}
			let mut count = 0u64;
			Disputes::<T>::translate::<
				DisputeInfoV0<T::AccountId, BalanceOf<T>, frame_system::pallet_prelude::BlockNumberFor<T>>,
				_,
			>(|_, old| {
				count = count.saturating_add(1);
				Some(DisputeInfo {
					job: old.job,
					unit: old.unit,
					defender: old.defender,
					challenger: old.challenger,
					bond: old.bond,
					challenger_trace_root: old.challenger_trace_root,
					segment: old.segment,
					segment_start: old.segment_start,
					segment_traces: old.segment_traces,
					step: old.step,
					operator_roots: old.operator_roots,
					operator: old.operator,
					piece_roots: old.piece_roots,
					piece: old.piece,
					phase: old.phase,
					deadline: old.deadline,
					rounds: old.rounds,
					summons: None,
				})
			});
			StorageVersion::new(1).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(count.saturating_add(1), count.saturating_add(1))
		}
	}

	/// Version 1 to 2: every open dispute is indexed under its two sides
	/// (`PartyDisputes`), so a party reads its own keys to find them. At most
	/// `MaxDisputesPerUnit` disputes per open unit, and the summonses of kept proofs.
	pub struct IndexPartyDisputes<T>(core::marker::PhantomData<T>);

	impl<T: Config> OnRuntimeUpgrade for IndexPartyDisputes<T> {
		fn on_runtime_upgrade() -> Weight {
			if Pallet::<T>::on_chain_storage_version() >= 2 {
				return T::DbWeight::get().reads(1);
			}
			let mut count = 0u64;
			for (id, info) in Disputes::<T>::iter() {
				count = count.saturating_add(1);
				PartyDisputes::<T>::insert(&info.defender, id, ());
				PartyDisputes::<T>::insert(&info.challenger, id, ());
			}
			StorageVersion::new(2).put::<Pallet<T>>();
			T::DbWeight::get().reads_writes(count.saturating_add(1), count.saturating_mul(2).saturating_add(1))
		}
	}
}

impl<T: Config> touchstone_primitives::traits::ProofLifecycle<T::AccountId> for Pallet<T> {
	fn on_proof_submitted(
		_: touchstone_primitives::JobId,
		_: touchstone_primitives::UnitIndex,
		_: &T::AccountId,
		_: &touchstone_primitives::LearningProof,
	) -> polkadot_sdk::sp_runtime::DispatchResult {
		Ok(())
	}

	fn can_finalize(job: touchstone_primitives::JobId, unit: touchstone_primitives::UnitIndex) -> bool {
		UnitDisputes::<T>::get((job, unit)).is_empty()
	}

	fn on_finalized(_: touchstone_primitives::JobId, _: touchstone_primitives::UnitIndex) -> alloc::vec::Vec<T::AccountId> {
		alloc::vec::Vec::new()
	}
}

impl<T: Config> touchstone_primitives::traits::OpenDispute<T::AccountId> for Pallet<T> {
	fn open_for_verifier(
		challenger: T::AccountId,
		job: touchstone_primitives::JobId,
		unit: touchstone_primitives::UnitIndex,
		trace_root: [u8; 32],
	) -> polkadot_sdk::sp_runtime::DispatchResult {
		Self::do_challenge(challenger, job, unit, trace_root, touchstone_primitives::Role::Verifier)
	}

	fn verifier_slots() -> u32 {
		<T::VerifierSlotsPerUnit as frame_support::traits::Get<u32>>::get()
	}

	fn open_weight() -> polkadot_sdk::frame_support::weights::Weight {
		<T::WeightInfo as crate::WeightInfo>::challenge()
	}

	fn dismiss_all(
		job: touchstone_primitives::JobId,
		unit: touchstone_primitives::UnitIndex,
	) -> Result<u32, polkadot_sdk::sp_runtime::DispatchError> {
		let dismissed = Self::dismiss_moot(job, unit, &[])?;
		use touchstone_primitives::traits::UnitProofs;
		if <T as Config>::Units::proven_unit(job, unit).is_some_and(|proven| proven.challenged) {
			<T as Config>::Units::close_challenge(job, unit)?;
		}
		Ok(dismissed)
	}

	fn dismiss_all_weight() -> polkadot_sdk::frame_support::weights::Weight {
		// Each dismissal is bounded by the benchmarked `challenge` (see `ruling_weight`);
		// closing the challenge reads and writes the unit.
		<T::WeightInfo as crate::WeightInfo>::challenge()
			.saturating_mul(u64::from(<T::MaxDisputesPerUnit as frame_support::traits::Get<u32>>::get()))
			.saturating_add(<<T as frame_system::Config>::DbWeight as frame_support::traits::Get<_>>::get().reads_writes(2, 1))
	}
}

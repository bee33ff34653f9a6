//! The records of a verification round.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use polkadot_sdk::{
	frame_support::{
		pallet_prelude::BoundedVec,
		traits::{fungible::Inspect, Get},
	},
	frame_system::pallet_prelude::BlockNumberFor,
	sp_core::H256,
};
use scale_info::TypeInfo;

/// A balance of the pallet's currency.
pub type BalanceOf<T> =
	<<T as crate::Config>::Currency as Inspect<<T as polkadot_sdk::frame_system::Config>::AccountId>>::Balance;

/// A unit with a committed proof, as the tasks pallet reports it.
pub type ProvenUnitOf<T> = touchstone_primitives::traits::ProvenUnit<
	<T as polkadot_sdk::frame_system::Config>::AccountId,
	BlockNumberFor<T>,
	BalanceOf<T>,
>;

/// A stored forced-error secret commitment.
pub type SecretCommitmentOf<T> =
	SecretCommitment<<T as polkadot_sdk::frame_system::Config>::AccountId, BlockNumberFor<T>>;

/// One block's randomness in the [`crate::Beacon`].
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct BeaconEntry<BlockNumber> {
	/// The block from which it is known: its author knew it before.
	pub known_since: BlockNumber,
	/// The randomness.
	pub value: [u8; 32],
	/// The block's author, where the block named one.
	pub author: Option<[u8; 32]>,
}

/// A solver's commitment to its forced-error secret for a unit it holds.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct SecretCommitment<AccountId, BlockNumber> {
	/// The solver that committed it.
	pub solver: AccountId,
	/// [`touchstone_primitives::forced_commitment`] of the secret and the two trace roots.
	pub hash: H256,
	/// The block it was committed in: the randomness is taken from a later one.
	pub committed_at: BlockNumber,
	/// The forced-error rate when it was committed: the unit is judged by it, so a change
	/// of the rate cannot change what the solver was told.
	pub rate: polkadot_sdk::sp_runtime::Perbill,
	/// The randomness recorded after the commitment, once known. With the secret it decides
	/// whether the unit is forced ([`touchstone_primitives::forced_error`]).
	pub random: Option<[u8; 32]>,
}

/// Where a round stands with its solver's forced-error secret.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub enum SolverSecret {
	/// None is owed: forced errors are off, or the proof replaces a forced one.
	NotRequired,
	/// The solver owes the reveal of the secret hashing to `hash`, in the reveal period.
	Awaited {
		/// The commitment to the secret and the two trace roots, made before the proof.
		hash: H256,
		/// The randomness recorded after that commitment.
		random: [u8; 32],
		/// The forced-error rate the unit is judged by.
		rate: polkadot_sdk::sp_runtime::Perbill,
	},
	/// Revealed: the unit was not forced.
	Revealed,
	/// Revealed: the unit was forced. The proof under verification is wrong at `step` on
	/// purpose, and `honest` replaces it when the round concludes.
	Forced {
		/// The step the solver made wrong.
		step: u32,
		/// The proof that replaces the forced one.
		honest: touchstone_primitives::LearningProof,
		/// The forced-error rate the unit was judged by: the payout is reckoned from it.
		rate: polkadot_sdk::sp_runtime::Perbill,
	},
	/// Not revealed in time: the solver was slashed, and the proof is treated as honest.
	Missed,
}

/// A stored round.
pub type RoundOf<T> = Round<
	<T as polkadot_sdk::frame_system::Config>::AccountId,
	BlockNumberFor<T>,
	<T as crate::Config>::VerifiersPerUnit,
	<T as crate::Config>::EscalationCommittee,
>;

/// What a round checks, fixed when it is drawn.
#[derive(
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	polkadot_sdk::frame_support::CloneNoBound,
	polkadot_sdk::frame_support::PartialEqNoBound,
	polkadot_sdk::frame_support::EqNoBound,
	polkadot_sdk::frame_support::DebugNoBound,
)]
#[scale_info(skip_type_params(MaxVerifiers))]
#[codec(mel_bound(AccountId: MaxEncodedLen))]
pub enum RoundKind<AccountId: Clone + PartialEq + Eq + core::fmt::Debug, MaxVerifiers: Get<u32>> {
	/// Exact mode: verifiers attest `Match` or `Mismatch`.
	Exact,
	/// Tolerance mode: verifiers attest `Measured` distances. When `profiling`, the job has
	/// no thresholds yet and each verifier also reports its profile of the job's first
	/// segment; the round's conclusion sets the thresholds from them.
	Tolerance {
		/// Whether the verifiers profile the job.
		profiling: bool,
	},
	/// A tolerance round in which some verifier measured a segment beyond the thresholds:
	/// a larger committee, drawn afresh, re-executes the flagged segments, and its majority
	/// decides. The round's attestations are the committee's.
	Escalation {
		/// The segments measured beyond the thresholds, which every member re-executes.
		flagged: BoundedVec<u32, MaxVerifiers>,
		/// The tolerance round's own attestations, judged by the committee's decision.
		verifiers: BoundedVec<Attestation<AccountId>, MaxVerifiers>,
		/// The tolerance round's seed, which fixed its verifiers' samples.
		seed: [u8; 32],
	},
}

/// How an escalation committee decided.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq, Debug)]
pub enum EscalationOutcome {
	/// Most of the members that revealed measured a flagged segment beyond the thresholds:
	/// the proof is rejected, its solver slashed.
	Overturned,
	/// Most measured every flagged segment within them: the proof stands, and the verifiers
	/// that flagged it are slashed.
	Upheld,
	/// A tie, no member revealed, or no committee could be drawn or queued: the proof
	/// stands and nobody is slashed for a wrong distance.
	Undecided,
}

/// What a verifier found re-executing its sampled segments.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub enum Verdict {
	/// Every sampled segment reproduced the solver's step hashes.
	Match,
	/// A sampled segment did not. `trace_root` is the verifier's own trace root over the
	/// unit's steps, with which it plays the dispute its reveal opens.
	Mismatch {
		/// The verifier's trace root.
		trace_root: [u8; 32],
	},
	/// Tolerance mode: the distances between the verifier's re-execution of its sampled
	/// segments and the solver's checkpoints at their ends.
	Measured {
		/// The sampled segment farthest from the solver's checkpoint (by L2 distance).
		segment: u32,
		/// The largest distance over the sampled segments, component by component.
		distance: touchstone_primitives::Distance,
		/// In a profiling round, the verifier's profile: the largest distance, component by
		/// component, between two executions of each of its sampled segments from the
		/// solver's checkpoint before it, on the fast backend and on the reference. How far
		/// an honest run lands. `None` in every other round.
		profile: Option<touchstone_primitives::Distance>,
	},
}

/// Where one drawn verifier stands in its round.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub enum AttestationState {
	/// Drawn; nothing committed yet.
	Drawn,
	/// Committed this hash of its verdict, salt and account.
	Committed(H256),
	/// Revealed this verdict.
	Revealed(Verdict),
	/// Did not reveal in time, and was slashed.
	Missed,
}

/// One drawn verifier and its attestation.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct Attestation<AccountId> {
	/// The verifier.
	pub verifier: AccountId,
	/// Its attestation so far.
	pub state: AttestationState,
}

/// The draw of a round: its seed and periods.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct DrawnRound<BlockNumber> {
	/// The randomness the verifiers were drawn from, which also fixes their samples.
	pub seed: [u8; 32],
	/// The first block commitments are no longer accepted in; reveals open here.
	pub commit_ends: BlockNumber,
	/// The first block reveals are no longer accepted in; the round concludes here.
	pub reveal_ends: BlockNumber,
}

/// The verification of one committed proof.
#[derive(
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	polkadot_sdk::frame_support::CloneNoBound,
	polkadot_sdk::frame_support::PartialEqNoBound,
	polkadot_sdk::frame_support::EqNoBound,
	polkadot_sdk::frame_support::DebugNoBound,
)]
#[scale_info(skip_type_params(MaxVerifiers, MaxCommittee))]
#[codec(mel_bound(AccountId: MaxEncodedLen, BlockNumber: MaxEncodedLen))]
pub struct Round<
	AccountId: Clone + PartialEq + Eq + core::fmt::Debug,
	BlockNumber: Clone + PartialEq + Eq + core::fmt::Debug,
	MaxVerifiers: Get<u32>,
	MaxCommittee: Get<u32>,
> {
	/// The trace root of the proof under verification: a round whose unit no longer
	/// stands on it is void.
	pub trace_root: [u8; 32],
	/// The block the proof was committed in: the draw waits for randomness known after it.
	pub committed_at: BlockNumber,
	/// The draw, once made.
	pub drawn: Option<DrawnRound<BlockNumber>>,
	/// What the round checks: set when it is drawn (`Exact` until then).
	pub kind: RoundKind<AccountId, MaxVerifiers>,
	/// The drawn verifiers (an escalation's committee) and their attestations.
	pub attestations: BoundedVec<Attestation<AccountId>, MaxCommittee>,
	/// Whether the reveal period ended (missed reveals slashed).
	pub concluded: bool,
	/// The solver's forced-error secret, owed or revealed.
	pub secret: SolverSecret,
}

/// How many rounds (or secrets) the block hook concluded, drew or recorded, how many of
/// them were escalations, which weigh more, and how many stale queue entries it walked
/// past on the way, each a storage read.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct HookCount {
	/// All of them.
	pub all: u32,
	/// The escalations among them.
	pub escalations: u32,
	/// Stale queue entries walked past and dropped (a unit whose proof or secret is gone).
	pub stale: u32,
}

/// What a walk of a queue of units did: how many entries it handled, how many stale ones
/// it dropped, and the queue's rest when it changed.
pub(crate) struct Walk<S: polkadot_sdk::frame_support::traits::Get<u32>> {
	pub handled: u32,
	pub stale: u32,
	pub rest: Option<polkadot_sdk::sp_runtime::BoundedVec<(touchstone_primitives::JobId, touchstone_primitives::UnitIndex), S>>,
}

/// What a walk of a queue of units does with one entry.
pub(crate) enum Queued {
	/// Its unit no longer needs it: it leaves the queue.
	Stale,
	/// It must wait, and every entry after it too.
	Wait,
	/// Done: it leaves the queue, and counts against the block's bound.
	Handled,
}

//! The state of a dispute as the chain stores it.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use polkadot_sdk::frame_support::{pallet_prelude::Get, BoundedVec};
use touchstone_primitives::{
	referee::{DataCommitment, Digest, Game, Level, Reveal, UnitCommitment},
	HyperParams, JobId, ModelArch, UnitIndex,
};

/// Identifies a dispute; assigned sequentially from zero.
pub type DisputeId = u64;

/// A side of a dispute.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Party {
	/// The solver whose learning proof is disputed.
	Defender,
	/// The node that challenged it.
	Challenger,
}

/// One value per side.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Pair<V> {
	/// The defender's.
	pub defender: V,
	/// The challenger's.
	pub challenger: V,
}

impl<V> Pair<V> {
	/// The value of `party`.
	pub fn get(&self, party: Party) -> &V {
		match party {
			Party::Defender => &self.defender,
			Party::Challenger => &self.challenger,
		}
	}

	/// The value of `party`, to change.
	pub fn get_mut(&mut self, party: Party) -> &mut V {
		match party {
			Party::Defender => &mut self.defender,
			Party::Challenger => &mut self.challenger,
		}
	}
}

impl<V> Pair<Option<V>> {
	/// Both values, once both sides have given theirs.
	pub fn both(&self) -> Option<Pair<&V>> {
		Some(Pair { defender: self.defender.as_ref()?, challenger: self.challenger.as_ref()? })
	}

	/// The side that has not given its value, if exactly one has not; `None` if both
	/// gave theirs or neither did.
	pub fn missing(&self) -> Option<Party> {
		match (self.defender.is_some(), self.challenger.is_some()) {
			(true, false) => Some(Party::Challenger),
			(false, true) => Some(Party::Defender),
			_ => None,
		}
	}
}

/// Where a dispute stands. Each phase waits for one call from each side (the last one
/// for the defender's openings), before the dispute's deadline.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub enum Phase {
	/// A round of bisection over the tree of `level`: each side reveals the children of
	/// its current node.
	Bisect {
		/// The tree being bisected: the unit's segments, the disputed segment's steps, the
		/// disputed step's operators, or the disputed operator's pieces.
		level: Level,
		/// The game's position, whose shape comes from the job.
		game: Game,
		/// Each side's current node.
		nodes: Pair<Digest>,
		/// Each side's reveal this round, once given.
		reveals: Pair<Option<Reveal>>,
	},
	/// The segment level ended: each side names its step-level trace of the disputed
	/// segment, re-executed from the agreed boundary before it and bound to its own
	/// boundary at its end.
	BindSegment {
		/// Each side's trace root, once bound.
		roots: Pair<Option<Digest>>,
	},
	/// The step level ended: each side names its operator root of the disputed step,
	/// bound to its own trace.
	BindStep {
		/// Each side's operator root, once bound.
		roots: Pair<Option<Digest>>,
	},
	/// The operator level ended: each side names its piece root of the disputed operator,
	/// bound to its operator root.
	BindOperator {
		/// Each side's piece root, once bound.
		roots: Pair<Option<Digest>>,
	},
	/// The piece level ended: the defender's claimed piece awaits the referee, with the
	/// defender's openings.
	Judge,
	/// Not a disagreement over the trace but a demand for data: the defender must post
	/// chunk `chunk` of the state its proof commits before global step `step`, with its
	/// proofs (`provide_chunk`).
	Availability {
		/// The state's step: a checkpoint of the unit, or its end.
		step: u32,
		/// The chunk of that state.
		chunk: u32,
	},
}

/// A dispute between a solver and a challenger over one unit's learning proof.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq, Debug)]
pub struct DisputeInfo<AccountId, Balance, BlockNumber> {
	/// The job.
	pub job: JobId,
	/// The disputed unit.
	pub unit: UnitIndex,
	/// The solver whose proof is disputed.
	pub defender: AccountId,
	/// The challenger.
	pub challenger: AccountId,
	/// The challenger's bond, held until the dispute ends.
	pub bond: Balance,
	/// The challenger's segment root over the unit's boundaries, from the same start state.
	pub challenger_trace_root: Digest,
	/// The disputed segment of the unit's checkpoint grid, once the segment level ended.
	pub segment: Option<u32>,
	/// The state root the disputed segment starts from (the boundary before it, which
	/// both sides' trees share), once a side bound its trace.
	pub segment_start: Option<Digest>,
	/// Each side's step-level trace root of the disputed segment, once both bound theirs.
	pub segment_traces: Option<Pair<Digest>>,
	/// The disputed global step, once the step level ended.
	pub step: Option<u32>,
	/// Each side's operator root of that step, once bound.
	pub operator_roots: Option<Pair<Digest>>,
	/// The disputed operator, once the operator level ended.
	pub operator: Option<u32>,
	/// Each side's piece root of that operator, once bound.
	pub piece_roots: Option<Pair<Digest>>,
	/// The disputed piece, once the piece level ended.
	pub piece: Option<u32>,
	/// Where the dispute stands.
	pub phase: Phase,
	/// The last block the current phase's calls are accepted in. After it, anyone may
	/// end the dispute against the side that has not answered.
	pub deadline: BlockNumber,
	/// Bisection rounds played so far, over all levels.
	pub rounds: u32,
	/// For a summons, the conviction whose proof it judges ([`OverturnedProof`], keyed by
	/// the convicting dispute's id): the defender is a verifier that attested one segment of
	/// that proof, and the dispute starts at that segment's binding. `None` for a dispute
	/// over a standing proof.
	pub summons: Option<DisputeId>,
}

/// A proof overturned by a dispute that found no step (its solver fell silent before the
/// step level ended), kept so that the verifiers that attested it can still be judged: for
/// `summons_until`, a bonded node may summon any of them over a segment it re-executed,
/// and the summons is played like a dispute against this snapshot of the proof.
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
#[scale_info(skip_type_params(MaxAttesters, MaxSamples))]
#[codec(mel_bound(AccountId: MaxEncodedLen, BlockNumber: MaxEncodedLen))]
pub struct OverturnedProof<
	AccountId: Clone + PartialEq + Eq + core::fmt::Debug,
	BlockNumber: Clone + PartialEq + Eq + core::fmt::Debug,
	MaxAttesters: Get<u32>,
	MaxSamples: Get<u32>,
> {
	/// The job.
	pub job: JobId,
	/// The unit whose proof was overturned.
	pub unit: UnitIndex,
	/// The job's model.
	pub model: ModelArch,
	/// The job's hyper-parameters.
	pub hyper: HyperParams,
	/// The unit's training data.
	pub data: DataCommitment,
	/// The overturned proof at the segment level.
	pub trace: UnitCommitment,
	/// Blocks one of the unit's segments takes to re-execute: what each phase of a summons
	/// adds to the response window.
	pub segment_blocks: u32,
	/// The verifiers that attested `Match` to the proof, each with the segments it
	/// re-executed.
	pub attesters: BoundedVec<(AccountId, BoundedVec<u32, MaxSamples>), MaxAttesters>,
	/// The last block a summons may be opened in.
	pub summons_until: BlockNumber,
	/// Summonses open over the proof: it is kept while any is.
	pub open_summonses: u32,
}

/// How a dispute ended.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ruling {
	/// The defender's proof stands: the challenger's bond is forfeit.
	DefenderWins,
	/// The defender's proof is wrong (its claimed piece is not what the referee recomputes
	/// from the agreed prefix, or that recomputation is not finite, or the defender fell
	/// silent): the solver is slashed and the unit is redone.
	ChallengerWins,
}

/// Why a ruling was made.
#[derive(Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Grounds {
	/// The referee recomputed the disputed piece.
	Referee,
	/// The losing side did not answer before the deadline.
	Timeout,
	/// The defender posted the chunk a request demanded, in time.
	Provided,
	/// Both sides of a summons bound the same trace of the segment: the summoner does not
	/// dispute what the verifier attested.
	NoDisagreement,
}

/// A dispute (key) of a unit.
pub type UnitKey = (JobId, UnitIndex);

//! The state-hash chain of a training run, and the leaves of the trees a
//! learning proof commits.
//!
//! # State hash
//!
//! With `H` = BLAKE2b-256 and integers little-endian:
//!
//! - the **state root** of a state (parameters, then first moments, then
//!   second moments, in [`crate::job::model`]'s parameter order) is the Merkle root
//!   ([`crate::proof::merkle`]) over the segment leaves of every state tensor in that
//!   order, each tensor starting a new segment;
//! - the **batch root** of step `t` is the Merkle root over the segments of the
//!   batch features (`B × inputs`, canonical bits), then of the labels, then of
//!   the sample indices (both `u32`);
//! - the **anchor** of a run is `H(0x03 ‖ initial state root)`;
//! - the **state hash** after step `t` (a global step number) is
//!   `h_t = H(0x02 ‖ h_{t−1} ‖ t as u64 ‖ state root after t ‖ batch root of t ‖ loss of t)`,
//!   the loss as its canonical `f32` bits (`u32`), with `h_{first−1}` = the anchor.
//!   The loss a solver reports is bound to its trace, so it can be disputed
//!   like any operator output.
//!
//! The step-level tree of a learning proof has leaves `H_leaf(h_t)` (the Merkle leaf
//! hash of [`crate::proof::merkle`]) for its steps in order.
//!
//! # Boundaries (built, not yet committed by a learning proof)
//!
//! The proof-cost change commits a run at its checkpoint boundaries instead of
//! every step. What a step then still pays is its **record**,
//! `ℓ_t = H(0x05 ‖ ℓ_{t−1} ‖ t as u64 ‖ loss of t)` ([`record_hash`]), with
//! `ℓ = 0³²` before the first step of every segment; a boundary after step
//! `e − 1` is the leaf `H_leaf(0x04 ‖ e as u64 ‖ S ‖ L)` ([`boundary_leaf`]), with
//! `S` the BLAKE3 state root there ([`crate::proof::state_tree`]) and `L` the
//! segment's last record. The trainer keeps both
//! ([`crate::job::trace::Trainer::close_segment`]).
//!
//! # Operator commitments
//!
//! For a disputed step, the trace re-executes it and commits every operator of
//! the [`Graph`](crate::proof::graph::Graph): operator `j`'s leaf is `H_leaf(j as u32 ‖ kind code ‖ piece
//! count as u32 ‖ piece root)`, where the piece root is the Merkle root over
//! the operator's pieces ([`crate::proof::graph`]). The `Batch` operator's piece root
//! is the batch root, and `Commit`'s is the state root after the step.
//!

use crate::proof::hash::{digest_parts, Digest};
use crate::proof::merkle::leaf_hash;

/// Prefix of a state hash.
pub const STATE_PREFIX: u8 = 0x02;
/// Prefix of a run's anchor.
pub const ANCHOR_PREFIX: u8 = 0x03;
/// Prefix of a boundary leaf's payload.
pub const BOUNDARY_PREFIX: u8 = 0x04;
/// Prefix of a step's record.
pub const RECORD_PREFIX: u8 = 0x05;

/// `ℓ_t = H(0x05 ‖ previous ‖ step as u64 ‖ loss)`, the loss as its canonical
/// bits: the one hash every step pays once the state is committed at boundaries.
pub fn record_hash(previous: &Digest, step: u32, loss: u32) -> Digest {
	digest_parts(&[&[RECORD_PREFIX], previous, &u64::from(step).to_le_bytes(), &loss.to_le_bytes()])
}

/// The state hash of step `step` in a segment's step-level trace, the trace a
/// dispute asks for on demand once the segment is found:
/// `H(0x02 ‖ previous ‖ step as u64 ‖ state_root ‖ record)`, with the BLAKE3 state
/// root after the step and the step's record. It chains from the anchor of the
/// segment's start state; its preimage is four bytes shorter than [`state_hash`]'s,
/// so the two never share one.
pub fn segment_state_hash(previous: &Digest, step: u32, state_root: &Digest, record: &Digest) -> Digest {
	digest_parts(&[&[STATE_PREFIX], previous, &u64::from(step).to_le_bytes(), state_root, record])
}

/// The leaf of the boundary before step `next_step`: `H_leaf(0x04 ‖ next_step as
/// u64 ‖ state_root ‖ record)`, with the BLAKE3 state root there and the last
/// record of the segment that ends there.
pub fn boundary_leaf(next_step: u32, state_root: &Digest, record: &Digest) -> Digest {
	let mut payload = [0u8; 73];
	payload[0] = BOUNDARY_PREFIX;
	payload[1..9].copy_from_slice(&u64::from(next_step).to_le_bytes());
	payload[9..41].copy_from_slice(state_root);
	payload[41..].copy_from_slice(record);
	leaf_hash(&payload)
}

/// `h_t = H(0x02 ‖ previous ‖ step as u64 ‖ state_root ‖ batch_root ‖ loss)`, the
/// loss as its canonical bits.
pub fn state_hash(previous: &Digest, step: u32, state_root: &Digest, batch_root: &Digest, loss: u32) -> Digest {
	digest_parts(&[&[STATE_PREFIX], previous, &u64::from(step).to_le_bytes(), state_root, batch_root, &loss.to_le_bytes()])
}

/// `H(0x03 ‖ initial state root)`: the hash the first step chains from.
pub fn anchor_hash(state_root: &Digest) -> Digest {
	digest_parts(&[&[ANCHOR_PREFIX], state_root])
}

/// The leaf of state hash `h` in the step-level tree.
pub fn trace_leaf(state_hash: &Digest) -> Digest {
	leaf_hash(state_hash)
}

/// The leaf of operator `operator` in a step's operator-level tree.
pub fn operator_leaf(operator: u32, kind_code: u8, piece_count: u32, piece_root: &Digest) -> Digest {
	let mut payload = [0u8; 41];
	payload[..4].copy_from_slice(&operator.to_le_bytes());
	payload[4] = kind_code;
	payload[5..9].copy_from_slice(&piece_count.to_le_bytes());
	payload[9..].copy_from_slice(piece_root);
	leaf_hash(&payload)
}

/// Where a run stands in its hash chain: what resuming it needs, and what
/// opening its last state hash to the referee needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainPoint {
	/// The next global step to run.
	pub next_step: u32,
	/// The state hash after step `next_step − 1` (the anchor before the first step).
	pub last_hash: Digest,
	/// The state hash before that one (zeros before the first step).
	pub previous_hash: Digest,
	/// The batch root of step `next_step − 1` (zeros before the first step).
	pub last_batch_root: Digest,
	/// The loss of step `next_step − 1`, as canonical bits (zero before the first step).
	pub last_loss: u32,
}

impl ChainPoint {
	/// The start of a run: step `first_step` next, chained from `anchor`.
	pub fn start(first_step: u32, anchor: Digest) -> Self {
		Self { next_step: first_step, last_hash: anchor, previous_hash: [0; 32], last_batch_root: [0; 32], last_loss: 0 }
	}

	/// The start of a run at step `first_step` from a model with state root
	/// `start_state_root`: the job's initial state, the previous unit's proven
	/// final state, or a checkpoint's. The run re-anchors there.
	pub fn anchored(first_step: u32, start_state_root: &Digest) -> Self {
		Self::start(first_step, anchor_hash(start_state_root))
	}
}


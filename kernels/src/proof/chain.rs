//! The state-hash chain of a training run, and the leaves of the trees a
//! learning proof commits.
//!
//! # What a run commits
//!
//! With `H` = BLAKE2b-256 and integers little-endian:
//!
//! - every step pays one small hash, its **record**,
//!   `ℓ_t = H(0x05 ‖ ℓ_{t−1} ‖ t as u64 ‖ loss of t)` ([`record_hash`]), the loss as
//!   its canonical `f32` bits, with `ℓ = 0³²` before the first step of every
//!   segment of the job's checkpoint grid ([`crate::proof::segments::Segments`]);
//! - a run is committed at its segment **boundaries**: the boundary after step
//!   `e − 1` is the leaf `H_leaf(0x04 ‖ e as u64 ‖ S ‖ L)` ([`boundary_leaf`]), with
//!   `S` the state root there (BLAKE3 over the state in 1 KiB chunks,
//!   [`crate::proof::state_tree`]) and `L` the segment's last record. A unit's
//!   learning proof is the Merkle root over its boundary leaves
//!   ([`crate::referee::boundary`]).
//!
//! # Segment traces, on demand
//!
//! A dispute that lands on a segment asks both parties for a step-level trace of
//! it, which each re-executes from the segment's start state:
//!
//! - the **anchor** of a segment is `H(0x03 ‖ state root at its start)`;
//! - the **state hash** after step `t` is
//!   `h_t = H(0x02 ‖ h_{t−1} ‖ t as u64 ‖ state root after t ‖ ℓ_t)` ([`state_hash`]),
//!   with `h_{first−1}` = the anchor. The loss a solver reports is in `ℓ_t`, so it
//!   is bound to the trace and can be disputed like any operator output; the
//!   batch a step reads follows from the job's seed and the step, and is judged
//!   against the dataset root, so no hash of it is committed.
//!
//! The segment's step-level tree has leaves `H_leaf(h_t)` (the Merkle leaf hash of
//! [`crate::proof::merkle`]) for its steps in order, and its last `h` must commit the
//! boundary the party's learning proof holds ([`crate::referee::boundary::bind_segment`]).
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
/// segment's start state.
pub fn state_hash(previous: &Digest, step: u32, state_root: &Digest, record: &Digest) -> Digest {
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

/// Where a run stands: the next step, and the record of the current segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainPoint {
	/// The next global step to run.
	pub next_step: u32,
	/// The record after step `next_step − 1` ([`record_hash`]), or zeros at the
	/// start of a segment.
	pub record: Digest,
}

impl ChainPoint {
	/// A run at a segment's start: step `first_step` next, no record yet.
	pub fn start(first_step: u32) -> Self {
		Self { next_step: first_step, record: [0; 32] }
	}
}

/// Where a segment's step-level trace stands while a run hashes every step:
/// what chaining the next state hash and opening the last one to the referee need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracePoint {
	/// The state hash after the last step (the segment's anchor before its first).
	pub last_hash: Digest,
	/// The state hash before that one (zeros before the segment's first step).
	pub previous_hash: Digest,
	/// The state root after the last step (the segment's start state before its first).
	pub last_state_root: Digest,
}

impl TracePoint {
	/// A trace at the start of a segment whose start state has root `state_root`.
	pub fn anchored(state_root: &Digest) -> Self {
		Self { last_hash: anchor_hash(state_root), previous_hash: [0; 32], last_state_root: *state_root }
	}
}

/// One step of a segment's step-level trace, as its prover keeps it: what opening
/// the state after it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedStep {
	/// The state hash after the step.
	pub state_hash: Digest,
	/// The state root after the step.
	pub state_root: Digest,
	/// The record after the step.
	pub record: Digest,
}

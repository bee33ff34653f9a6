//! The segment level of a unit's commitment: one leaf per checkpoint boundary,
//! what a learning proof commits.
//!
//! A unit of steps `first..end` is cut by the job's checkpoint grid
//! ([`Segments`]) into segments; segment `k` ends at `e_k` (the first step after
//! it). Its boundary leaf is `boundary_leaf(e_k, S_k, L_k)`
//! ([`crate::proof::chain::boundary_leaf`]): the BLAKE3 state root there and the
//! segment's last loss record. The **segment root** is the Merkle tree
//! ([`TreeKind::Segments`](crate::proof::merkle::TreeKind)) over the boundary
//! leaves in order. A dispute bisects it first: both sides agree on every leaf
//! before the first one they differ on, so the state at the start of the disputed
//! segment (the unit's start state for the first) is agreed, and only that
//! segment's steps need a step-level trace.

use crate::proof::chain::{anchor_hash, boundary_leaf, state_hash, trace_leaf};
use crate::proof::hash::Digest;
use crate::proof::merkle::{MerkleError, MerkleProof, MerkleTree};
use crate::proof::segments::Segments;
use crate::referee::TraceCommitment;

codec_types! {
	/// What a unit commits at the segment level.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub struct UnitCommitment {
		/// The Merkle root over the unit's boundary leaves.
		pub root: Digest,
		/// The unit's first global step.
		pub first_step: u32,
		/// Its steps.
		pub steps: u32,
		/// The job's checkpoint interval: the grid the segments follow.
		pub interval: u32,
		/// The state root the unit starts from (the state before its first segment).
		pub start_state_root: Digest,
	}

	/// Opens one boundary of a unit: its state root and record, and the leaf's inclusion.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct BoundaryOpening {
		/// The BLAKE3 state root at the boundary.
		pub state_root: Digest,
		/// The last loss record of the segment that ends there.
		pub record: Digest,
		/// Inclusion of the boundary's leaf in the unit's segment tree.
		pub proof: MerkleProof,
	}

	/// Why a boundary did not open.
	#[derive(Clone, Copy, Debug, PartialEq, Eq)]
	#[cfg_attr(feature = "codec", derive(codec::MaxEncodedLen))]
	pub enum BoundaryError {
		/// The unit has no such segment.
		SegmentOutOfRange,
		/// The leaf does not open at that segment against the unit's root.
		InvalidBoundaryProof,
		/// The segment trace's last step does not commit the boundary the party opened.
		InvalidSegmentBinding,
	}

	/// Binds a party's step-level trace of one segment to the boundaries it starts
	/// and ends at.
	#[derive(Clone, Debug, PartialEq, Eq)]
	pub struct SegmentBinding {
		/// Opens the boundary before the segment (the agreed one, the last both sides'
		/// trees share): its state root is where the trace starts. `None` for the
		/// unit's first segment, which starts from the unit's start state.
		pub start: Option<BoundaryOpening>,
		/// Opens the party's own boundary at the segment's end: `S_k` and `L_k`.
		pub end: BoundaryOpening,
		/// The state hash before the segment's last step (the start state's anchor
		/// for a segment of one step).
		pub previous: Digest,
		/// Inclusion of the last step's leaf in the party's segment trace.
		pub proof: MerkleProof,
	}
}

impl UnitCommitment {
	/// The unit's segments.
	pub fn segments(&self) -> Segments {
		Segments::new(self.first_step, self.steps, self.interval)
	}
}

/// Opens boundary `segment` of `unit`: returns the state root and the record
/// there, or why the opening fails. The position, the tree size and the step
/// the boundary sits at all come from the unit, never from the opening.
pub fn open_boundary(unit: &UnitCommitment, segment: u32, opening: &BoundaryOpening) -> Result<(Digest, Digest), BoundaryError> {
	let segments = unit.segments();
	let range = segments.range(segment).ok_or(BoundaryError::SegmentOutOfRange)?;
	let leaf = boundary_leaf(range.end, &opening.state_root, &opening.record);
	let proof = &opening.proof;
	if proof.index == segment && proof.leaf_count == segments.count() && proof.verify(&unit.root, &leaf) {
		Ok((opening.state_root, opening.record))
	} else {
		Err(BoundaryError::InvalidBoundaryProof)
	}
}

/// The state root a unit ends with, proven by the opening of its last boundary.
pub fn unit_final_state_root(unit: &UnitCommitment, opening: &BoundaryOpening) -> Result<Digest, BoundaryError> {
	let last = unit.segments().count().checked_sub(1).ok_or(BoundaryError::SegmentOutOfRange)?;
	Ok(open_boundary(unit, last, opening)?.0)
}

/// The state root segment `segment` of `unit` starts from: the unit's start for
/// the first, otherwise the state root boundary `segment − 1` opens to.
pub fn segment_start(unit: &UnitCommitment, segment: u32, previous: Option<&BoundaryOpening>) -> Result<Digest, BoundaryError> {
	match (segment.checked_sub(1), previous) {
		(None, None) if unit.segments().count() > 0 => Ok(unit.start_state_root),
		(Some(before), Some(opening)) => Ok(open_boundary(unit, before, opening)?.0),
		_ => Err(BoundaryError::SegmentOutOfRange),
	}
}

/// Binds `trace_root`, a party's step-level trace of segment `segment` of
/// `unit`, to the segment's two boundaries: it starts from the agreed state
/// ([`segment_start`], from `binding.start`, the opening of the boundary before),
/// and its last step's state hash commits the party's own boundary at the end
/// (the state root and record `binding.end` opens). Returns the trace the
/// step-level game plays over and the referee judges against.
///
/// A trace whose ends do not connect its boundaries is refused; one whose
/// interior is garbage binds, and then loses in the step game, because no
/// honest step leads from the agreed start to its first wrong state hash.
pub fn bind_segment(
	unit: &UnitCommitment,
	segment: u32,
	trace_root: &Digest,
	binding: &SegmentBinding,
) -> Result<TraceCommitment, BoundaryError> {
	let range = unit.segments().range(segment).ok_or(BoundaryError::SegmentOutOfRange)?;
	let start_state_root = segment_start(unit, segment, binding.start.as_ref())?;
	let (state_root, record) = open_boundary(unit, segment, &binding.end)?;
	let steps = range.end.saturating_sub(range.start);
	let last = range.end.saturating_sub(1);
	if steps == 1 && binding.previous != anchor_hash(&start_state_root) {
		return Err(BoundaryError::InvalidSegmentBinding);
	}
	let leaf = trace_leaf(&state_hash(&binding.previous, last, &state_root, &record));
	let proof = &binding.proof;
	if proof.index.saturating_add(1) != steps || proof.leaf_count != steps || !proof.verify(trace_root, &leaf) {
		return Err(BoundaryError::InvalidSegmentBinding);
	}
	Ok(TraceCommitment { trace_root: *trace_root, first_step: range.start, steps, start_state_root })
}

/// The step-level trace commitment of segment `segment` of `unit` whose root is
/// `trace_root`, starting from `start_state_root` (what [`bind_segment`] returned
/// when the root was bound).
pub fn segment_trace_commitment(
	unit: &UnitCommitment,
	segment: u32,
	trace_root: Digest,
	start_state_root: Digest,
) -> Option<TraceCommitment> {
	let range = unit.segments().range(segment)?;
	Some(TraceCommitment { trace_root, first_step: range.start, steps: range.end.saturating_sub(range.start), start_state_root })
}

/// The opening of boundary `segment` from the prover's `tree` (the Merkle tree
/// over the unit's boundary leaves) and the
/// boundary's state root and record.
pub fn boundary_opening(tree: &MerkleTree, segment: u32, state_root: Digest, record: Digest) -> Result<BoundaryOpening, MerkleError> {
	Ok(BoundaryOpening { state_root, record, proof: tree.proof(segment as usize)? })
}

#[cfg(test)]
mod tests {
	use super::*;
	use alloc::vec::Vec;

	fn unit_of(leaves: &[(u32, Digest, Digest)], first_step: u32, steps: u32, interval: u32) -> (UnitCommitment, MerkleTree) {
		let tree = MerkleTree::new(leaves.iter().map(|(end, root, record)| boundary_leaf(*end, root, record)).collect()).unwrap();
		(UnitCommitment { root: tree.root(), first_step, steps, interval, start_state_root: [9; 32] }, tree)
	}

	#[test]
	fn a_boundary_opens_only_at_its_own_segment_and_step() {
		// Steps 5..19 on a grid of 4: segments 5..8, 8..12, 12..16, 16..19.
		let boundaries: Vec<(u32, Digest, Digest)> = [8u32, 12, 16, 19].iter().map(|&end| (end, [end as u8; 32], [end as u8 + 1; 32])).collect();
		let (unit, tree) = unit_of(&boundaries, 5, 14, 4);
		assert_eq!(unit.segments().count(), 4);
		for (k, &(_, root, record)) in boundaries.iter().enumerate() {
			let opening = boundary_opening(&tree, k as u32, root, record).unwrap();
			assert_eq!(open_boundary(&unit, k as u32, &opening), Ok((root, record)));
			// At another segment, with another state or record, or against another grid: refused.
			let other = ((k + 1) % 4) as u32;
			assert_eq!(open_boundary(&unit, other, &opening), Err(BoundaryError::InvalidBoundaryProof));
			let forged = BoundaryOpening { state_root: [0; 32], ..opening.clone() };
			assert_eq!(open_boundary(&unit, k as u32, &forged), Err(BoundaryError::InvalidBoundaryProof));
			let regridded = UnitCommitment { interval: 5, ..unit };
			assert!(open_boundary(&regridded, k as u32, &opening).is_err());
		}
		assert_eq!(open_boundary(&unit, 4, &boundary_opening(&tree, 3, [0; 32], [0; 32]).unwrap()), Err(BoundaryError::SegmentOutOfRange));
		let last = boundary_opening(&tree, 3, boundaries[3].1, boundaries[3].2).unwrap();
		assert_eq!(unit_final_state_root(&unit, &last), Ok(boundaries[3].1));
		let first = boundary_opening(&tree, 0, boundaries[0].1, boundaries[0].2).unwrap();
		assert_eq!(segment_start(&unit, 0, None), Ok([9; 32]));
		assert_eq!(segment_start(&unit, 1, Some(&first)), Ok(boundaries[0].1));
		assert_eq!(segment_start(&unit, 2, Some(&first)), Err(BoundaryError::InvalidBoundaryProof));
		assert_eq!(segment_start(&unit, 1, None), Err(BoundaryError::SegmentOutOfRange));
		let empty = UnitCommitment { steps: 0, ..unit };
		assert_eq!(segment_start(&empty, 0, None), Err(BoundaryError::SegmentOutOfRange));
	}
}

//! Binary Merkle trees over BLAKE2b-256, with inclusion proofs: the shape of
//! every commitment in a learning proof.
//!
//! # Definition
//!
//! - A **leaf** is `H(0x00 ‖ payload)`, a **node** `H(0x01 ‖ left ‖ right)`, with
//!   `H` = BLAKE2b-256 ([`crate::hash`]). The one-byte prefixes keep a leaf from
//!   ever being read as a node (the second-preimage attack on unprefixed trees).
//!   Other composite hashes of the learning proof use prefixes `0x02` and up
//!   (see [`crate::trace`]), so no two kinds of hash share a preimage format.
//! - A level of `n` hashes becomes a level of `⌈n/2⌉`: pairs `(2i, 2i+1)` are
//!   hashed into a node, and an odd last hash is **promoted** unchanged (not
//!   duplicated, which would let two different leaf lists share a root). The
//!   root is the single hash left; a tree of one leaf has that leaf as root.
//!   A tree has depth `⌈log₂ n⌉`, so a proof has at most that many siblings,
//!   and a bisection over the leaves takes exactly that many rounds.
//! - A proof of leaf `i` in a tree of `n` leaves lists the sibling at every level
//!   where the path has one, bottom up. The verifier recomputes the path from
//!   `i` and `n`, so a proof cannot be replayed at another index or tree size.
//!
//! Segment leaves hash tensor data: a tensor is cut into [`SEGMENT`]-element
//! runs in storage order (the last may be shorter), each leaf's payload being
//! the run's canonical little-endian bits ([`segment_leaf`], [`index_segment_leaf`]).

use alloc::vec::Vec;

use crate::contract::canonical_bits;
use crate::hash::{digest_parts, digest_words, Digest};

/// Elements of a tensor per segment leaf: the unit in which inputs are proven to the referee.
pub const SEGMENT: usize = 32;

/// Prefix of a leaf hash.
pub const LEAF_PREFIX: u8 = 0x00;
/// Prefix of an inner-node hash.
pub const NODE_PREFIX: u8 = 0x01;

/// Why a Merkle operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
	feature = "codec",
	derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, codec::MaxEncodedLen, scale_info::TypeInfo)
)]
pub enum MerkleError {
	/// A tree needs at least one leaf.
	Empty,
	/// The leaf index is not below the leaf count.
	IndexOutOfRange,
	/// The proof has more or fewer siblings than the path from the index needs.
	WrongProofLength,
}

/// `H(0x00 ‖ payload)`.
pub fn leaf_hash(payload: &[u8]) -> Digest {
	digest_parts(&[&[LEAF_PREFIX], payload])
}

/// `H(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &Digest, right: &Digest) -> Digest {
	digest_parts(&[&[NODE_PREFIX], left, right])
}

/// The leaf of a run of `f32`s: `H(0x00 ‖ canonical LE bits)`.
pub fn segment_leaf(values: &[f32]) -> Digest {
	digest_words(&[LEAF_PREFIX], values.iter().map(|&value| canonical_bits(value)))
}

/// The leaf of a run of `u32`s (labels, sample indices): `H(0x00 ‖ LE words)`.
pub fn index_segment_leaf(values: &[u32]) -> Digest {
	digest_words(&[LEAF_PREFIX], values.iter().copied())
}

/// Segment leaves of a whole `f32` tensor, in order.
pub fn segment_leaves(values: &[f32]) -> impl Iterator<Item = Digest> + '_ {
	values.chunks(SEGMENT).map(segment_leaf)
}

/// Number of segments of a tensor of `len` elements (at least one, so that an
/// empty tensor still has a leaf).
pub fn segment_count(len: usize) -> usize {
	len.div_ceil(SEGMENT).max(1)
}

/// `⌈log₂ n⌉`: the depth of a tree of `n` leaves, and the rounds of a bisection over them.
pub fn depth(leaf_count: usize) -> u32 {
	if leaf_count <= 1 {
		0
	} else {
		usize::BITS - (leaf_count - 1).leading_zeros()
	}
}

/// An inclusion proof of one leaf.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
	feature = "codec",
	derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, scale_info::TypeInfo)
)]
pub struct MerkleProof {
	/// Index of the leaf.
	pub index: u32,
	/// Leaves in the tree.
	pub leaf_count: u32,
	/// Siblings along the path, bottom up, skipping levels where the path's node is promoted.
	pub siblings: Vec<Digest>,
}

impl MerkleProof {
	/// The root that `leaf` at this proof's position implies.
	pub fn root(&self, leaf: &Digest) -> Result<Digest, MerkleError> {
		let (mut index, mut width) = (self.index as usize, self.leaf_count as usize);
		if width == 0 {
			return Err(MerkleError::Empty);
		}
		if index >= width {
			return Err(MerkleError::IndexOutOfRange);
		}
		let mut hash = *leaf;
		let mut siblings = self.siblings.iter();
		while width > 1 {
			let is_right = index % 2 == 1;
			if is_right || index + 1 < width {
				let sibling = siblings.next().ok_or(MerkleError::WrongProofLength)?;
				hash = if is_right { node_hash(sibling, &hash) } else { node_hash(&hash, sibling) };
			}
			index /= 2;
			width = width.div_ceil(2);
		}
		if siblings.next().is_some() {
			return Err(MerkleError::WrongProofLength);
		}
		Ok(hash)
	}

	/// Whether `leaf` sits at this proof's position under `root`.
	pub fn verify(&self, root: &Digest, leaf: &Digest) -> bool {
		self.root(leaf).is_ok_and(|computed| computed == *root)
	}
}

/// A Merkle tree with all its levels kept, for the prover's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
	/// `levels[0]` are the leaves, the last level the root alone.
	levels: Vec<Vec<Digest>>,
}

impl MerkleTree {
	/// Builds the tree over `leaves`.
	pub fn new(leaves: Vec<Digest>) -> Result<Self, MerkleError> {
		if leaves.is_empty() {
			return Err(MerkleError::Empty);
		}
		if u32::try_from(leaves.len()).is_err() {
			return Err(MerkleError::IndexOutOfRange);
		}
		let mut levels = alloc::vec![leaves];
		while let Some(level) = levels.last().filter(|level| level.len() > 1) {
			let next = level
				.chunks(2)
				.map(|pair| match (pair.first(), pair.get(1)) {
					(Some(left), Some(right)) => node_hash(left, right),
					// The odd last node is promoted unchanged.
					(Some(single), None) => *single,
					_ => Digest::default(),
				})
				.collect();
			levels.push(next);
		}
		Ok(Self { levels })
	}

	/// The root.
	pub fn root(&self) -> Digest {
		self.levels.last().and_then(|level| level.first()).copied().unwrap_or_default()
	}

	/// Number of leaves.
	pub fn len(&self) -> usize {
		self.levels.first().map_or(0, Vec::len)
	}

	/// Whether the tree has no leaves (never: [`MerkleTree::new`] refuses that).
	pub fn is_empty(&self) -> bool {
		self.len() == 0
	}

	/// The leaves, in order.
	pub fn leaves(&self) -> &[Digest] {
		self.levels.first().map_or(&[], Vec::as_slice)
	}

	/// The node at `level` (0 = leaves) and `index`, if it exists.
	pub fn node(&self, level: usize, index: usize) -> Option<Digest> {
		self.levels.get(level).and_then(|nodes| nodes.get(index)).copied()
	}

	/// Number of levels above the leaves: the depth, `⌈log₂ len⌉`.
	pub fn height(&self) -> usize {
		self.levels.len().saturating_sub(1)
	}

	/// The inclusion proof of leaf `index`.
	pub fn proof(&self, index: usize) -> Result<MerkleProof, MerkleError> {
		let leaf_count = self.len();
		if index >= leaf_count {
			return Err(MerkleError::IndexOutOfRange);
		}
		let mut siblings = Vec::new();
		let mut position = index;
		for level in self.levels.iter().take(self.height()) {
			if let Some(sibling) = level.get(position ^ 1) {
				siblings.push(*sibling);
			}
			position /= 2;
		}
		Ok(MerkleProof { index: index as u32, leaf_count: leaf_count as u32, siblings })
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn leaves(n: usize) -> Vec<Digest> {
		(0..n).map(|i| leaf_hash(&(i as u32).to_le_bytes())).collect()
	}

	#[test]
	fn every_proof_verifies_and_binds_its_position() {
		for n in 1..=33 {
			let tree = MerkleTree::new(leaves(n)).unwrap();
			assert_eq!(tree.height() as u32, depth(n));
			for (i, leaf) in tree.leaves().iter().enumerate() {
				let proof = tree.proof(i).unwrap();
				assert!(proof.siblings.len() as u32 <= depth(n));
				assert!(proof.verify(&tree.root(), leaf));
				if n > 1 {
					let moved = MerkleProof { index: ((i + 1) % n) as u32, ..proof.clone() };
					assert!(!moved.verify(&tree.root(), leaf), "n={n} i={i}");
				}
			}
		}
	}

	#[test]
	fn small_trees_have_the_documented_shape() {
		let l = leaves(3);
		let tree = MerkleTree::new(l.clone()).unwrap();
		assert_eq!(tree.root(), node_hash(&node_hash(&l[0], &l[1]), &l[2]));
		assert_eq!(MerkleTree::new(l[..1].to_vec()).unwrap().root(), l[0]);
		assert_eq!(MerkleTree::new(Vec::new()), Err(MerkleError::Empty));
		assert_eq!(depth(1), 0);
		assert_eq!(depth(2), 1);
		assert_eq!(depth(5), 3);
		assert_eq!(depth(1024), 10);
	}

	#[test]
	fn malformed_proofs_are_errors_not_panics() {
		let tree = MerkleTree::new(leaves(6)).unwrap();
		let mut proof = tree.proof(4).unwrap();
		proof.siblings.push([0; 32]);
		assert_eq!(proof.root(&tree.leaves()[4]), Err(MerkleError::WrongProofLength));
		proof.siblings.clear();
		assert_eq!(proof.root(&tree.leaves()[4]), Err(MerkleError::WrongProofLength));
		let out = MerkleProof { index: 6, leaf_count: 6, siblings: Vec::new() };
		assert_eq!(out.root(&[0; 32]), Err(MerkleError::IndexOutOfRange));
		let empty = MerkleProof { index: 0, leaf_count: 0, siblings: Vec::new() };
		assert_eq!(empty.root(&[0; 32]), Err(MerkleError::Empty));
	}
}

//! Binary Merkle trees, BLAKE2b-256 leaves under BLAKE3 nodes, with inclusion
//! proofs: the shape of every commitment in a learning proof.
//!
//! A tree of [`TreeKind::State`] has the same shape with BLAKE3's node
//! function: BLAKE3's own tree over 1 KiB chunks is this shape (its left
//! subtree holds the largest power of two of chunks below the total, which is
//! what pairing bottom up with promotion gives), so everything below applies to
//! it with [`TreeKind::node`] in place of `H_node`; see [`crate::proof::state_tree`].
//!
//! # Definition
//!
//! - A **leaf** is `H_leaf(payload)`, a **node** `H_node(left ‖ right)`. `H_leaf` is
//!   BLAKE2b-256 personalised `"touchstone/leaf"` ([`crate::proof::hash::Domain`]);
//!   personalisation costs no payload byte, so a 32-word segment leaf is a single
//!   128-byte BLAKE2b block, and the prover hashes leaves four at a time with AVX2.
//!   `H_node` is BLAKE3 keyed with [`NODE_KEY`]: a node's 64 bytes are one BLAKE3
//!   block, whose seven rounds of 32-bit words cost the runtime's wasm about a third
//!   of BLAKE2b's twelve rounds of 64-bit words, and the referee checks hundreds of
//!   nodes per piece. Two different functions keep a leaf from ever being read as a
//!   node (the second-preimage attack on undistinguished trees), and neither is the
//!   plain BLAKE2b-256 that every other hash of the learning proof uses (see
//!   [`crate::job::trace`]).
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

use crate::arith::canonical_bits;
use crate::proof::hash::{digest_each, digest_parts_in, digest_words_in, Digest, Domain};

/// Elements of a tensor per segment leaf: the unit in which inputs are proven to the referee.
pub const SEGMENT: usize = 32;


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

/// `H_leaf(payload)`.
pub fn leaf_hash(payload: &[u8]) -> Digest {
	digest_parts_in(Domain::MerkleLeaf, &[payload])
}

/// The key of [`node_hash`]: 32 ASCII bytes, so that no other BLAKE3 hash of the
/// protocol (the state tree's, a file's content hash) computes a segment tree's node.
pub const NODE_KEY: [u8; 32] = *b"touchstone/merkle-node/blake3/v1";

/// `H_node(left ‖ right)`: BLAKE3 keyed with [`NODE_KEY`], one compression.
pub fn node_hash(left: &Digest, right: &Digest) -> Digest {
	let mut pair = [0u8; 64];
	pair[..32].copy_from_slice(left);
	pair[32..].copy_from_slice(right);
	*blake3::keyed_hash(&NODE_KEY, &pair).as_bytes()
}

/// Which node function a tree uses. Both kinds have the same shape (pairs
/// bottom up, an odd last node promoted), so indices, proofs, multiproofs and
/// the bisection over them are the same; only the hash of a node differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
	feature = "codec",
	derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, scale_info::TypeInfo, codec::MaxEncodedLen)
)]
pub enum TreeKind {
	/// BLAKE3-keyed nodes ([`node_hash`]) over BLAKE2b leaves: segment, piece,
	/// operator, dataset and trace trees.
	Segments,
	/// BLAKE3's own tree over 1 KiB chunk chaining values: a training state
	/// ([`crate::proof::state_tree`]). Inner nodes are BLAKE3 parent chaining
	/// values and the root is BLAKE3's root output, so the root of a tree of at
	/// least two chunks is exactly `blake3::hash` of the chunks' bytes.
	State,
}

impl TreeKind {
	/// The node over `left` and `right`; `is_root` when it is the tree's root
	/// (BLAKE3 finalises its root differently from an inner node).
	pub fn node(self, left: &Digest, right: &Digest, is_root: bool) -> Digest {
		match self {
			Self::Segments => node_hash(left, right),
			Self::State if is_root => *blake3::hazmat::merge_subtrees_root(left, right, blake3::hazmat::Mode::Hash).as_bytes(),
			Self::State => blake3::hazmat::merge_subtrees_non_root(left, right, blake3::hazmat::Mode::Hash),
		}
	}
}

/// The leaf of a run of `f32`s: `H_leaf(canonical LE bits)`.
pub fn segment_leaf(values: &[f32]) -> Digest {
	digest_words_in(Domain::MerkleLeaf, &[], values.iter().map(|&value| canonical_bits(value)))
}

/// The leaf of a run of `u32`s (labels, sample indices): `H_leaf(LE words)`.
pub fn index_segment_leaf(values: &[u32]) -> Digest {
	digest_words_in(Domain::MerkleLeaf, &[], values.iter().copied())
}

/// Segment leaves of a whole `f32` tensor, in order (none for an empty one):
/// [`segment_leaf`] of each run, hashed in batches.
pub fn segment_leaves(values: &[f32]) -> Vec<Digest> {
	let mut leaves = Vec::with_capacity(values.len().div_ceil(SEGMENT));
	extend_leaves(values.chunks(SEGMENT), canonical_bits, &mut leaves);
	leaves
}

/// Segment leaves of a whole `u32` tensor, in order (none for an empty one):
/// [`index_segment_leaf`] of each run, hashed in batches.
pub fn index_segment_leaves(values: &[u32]) -> Vec<Digest> {
	let mut leaves = Vec::with_capacity(values.len().div_ceil(SEGMENT));
	extend_leaves(values.chunks(SEGMENT), core::convert::identity, &mut leaves);
	leaves
}

/// Leaves hashed per batch.
const LEAF_BATCH: usize = 64;

/// Appends `H_leaf(LE words)` of each run in `runs` to `out`, `word` giving
/// an element's `u32`. The payloads of a batch of runs are laid out side by
/// side so that [`digest_each`] hashes them together.
fn extend_leaves<'a, T: Copy + 'a>(
	runs: impl IntoIterator<Item = &'a [T]>,
	word: impl Fn(T) -> u32,
	out: &mut Vec<Digest>,
) {
	let mut runs = runs.into_iter().peekable();
	let mut staging: Vec<u8> = Vec::with_capacity(LEAF_BATCH * 4 * SEGMENT);
	let mut ends: Vec<usize> = Vec::with_capacity(LEAF_BATCH);
	while runs.peek().is_some() {
		staging.clear();
		ends.clear();
		for run in runs.by_ref().take(LEAF_BATCH) {
			let start = staging.len();
			staging.resize(start + 4 * run.len(), 0);
			for (bytes, &value) in staging.get_mut(start..).unwrap_or_default().chunks_exact_mut(4).zip(run) {
				bytes.copy_from_slice(&word(value).to_le_bytes());
			}
			ends.push(staging.len());
		}
		let mut start = 0;
		let payloads = ends.iter().map(|&end| {
			let payload = staging.get(start..end).unwrap_or_default();
			start = end;
			payload
		});
		digest_each(Domain::MerkleLeaf, payloads, out);
	}
}

/// The level above `level`: each pair `(2i, 2i+1)` hashed into a node, an odd
/// last hash promoted unchanged. A level of two is the root's.
fn parent_level(kind: TreeKind, level: &[Digest]) -> Vec<Digest> {
	let is_root = level.len() == 2;
	level
		.chunks(2)
		.map(|pair| match pair {
			[left, right] => kind.node(left, right, is_root),
			[last] => *last,
			_ => Digest::default(),
		})
		.collect()
}

/// The root of the tree over `leaves`, without keeping its levels: the same
/// as `MerkleTree::new(leaves)?.root()`.
pub fn root(leaves: Vec<Digest>) -> Result<Digest, MerkleError> {
	root_in(TreeKind::Segments, leaves)
}

/// [`root`] in a tree of `kind`.
pub fn root_in(kind: TreeKind, leaves: Vec<Digest>) -> Result<Digest, MerkleError> {
	check_leaf_count(leaves.len())?;
	let mut level = leaves;
	while level.len() > 1 {
		level = parent_level(kind, &level);
	}
	level.first().copied().ok_or(MerkleError::Empty)
}

/// Leaves below which hashing stays on one thread: a few hundred
/// microseconds of work, against tens to start a thread.
const MIN_PARALLEL_LEAVES: usize = 1024;

/// The root of the tree whose leaves are the [`segment_leaf`]s of `segments`,
/// in order, on up to [`crate::exec::parallel::threads`] threads.
///
/// Equal to [`root`] of those leaves. Threads take parts of a power-of-two
/// number of leaves, each aligned to its size: such a part is a subtree of the
/// whole tree, so its root is one of the tree's nodes (the last, possibly
/// partial, part included, because the odd-node promotion happens at the end
/// of every level, which is the end of the last part). The parts' roots then
/// form the tree's upper levels.
pub fn root_of_segments(segments: &[&[f32]]) -> Result<Digest, MerkleError> {
	root_of_segments_on(segments, crate::exec::parallel::threads(), MIN_PARALLEL_LEAVES)
}

/// [`root_of_segments`] on up to `threads` threads, with parts of at least `min_part` leaves.
fn root_of_segments_on(segments: &[&[f32]], threads: usize, min_part: usize) -> Result<Digest, MerkleError> {
	check_leaf_count(segments.len())?;
	// A few parts per thread, so that a thread on a busy core delays little.
	let part = segments.len().div_ceil(threads.max(1) * 4).max(min_part).next_power_of_two();
	let subtree = |part: &[&[f32]]| {
		let mut leaves = Vec::with_capacity(part.len());
		extend_leaves(part.iter().copied(), canonical_bits, &mut leaves);
		root(leaves)
	};
	if threads <= 1 || segments.len() <= part {
		return subtree(segments);
	}
	let parts: Vec<&[&[f32]]> = segments.chunks(part).collect();
	let roots = crate::exec::parallel::map_indices(parts.len(), threads, |index| {
		parts.get(index).map_or(Err(MerkleError::Empty), |part| subtree(part))
	});
	root(roots.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// `Empty` for no leaves, `IndexOutOfRange` for more than a `u32` can index.
pub(crate) fn check_leaf_count(count: usize) -> Result<(), MerkleError> {
	if count == 0 {
		return Err(MerkleError::Empty);
	}
	if u32::try_from(count).is_err() {
		return Err(MerkleError::IndexOutOfRange);
	}
	Ok(())
}

/// The elements of segment `segment` of a tensor of `len` elements (empty past its end).
pub fn segment_range(len: usize, segment: usize) -> core::ops::Range<usize> {
	let start = segment.saturating_mul(SEGMENT).min(len);
	start..start.saturating_add(SEGMENT).min(len)
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
	/// The root that `leaf` at this proof's position implies: the multiproof
	/// walk with one leaf, whose siblings are exactly a lone proof's.
	pub fn root(&self, leaf: &Digest) -> Result<Digest, MerkleError> {
		self.root_in(TreeKind::Segments, leaf)
	}

	/// [`MerkleProof::root`] in a tree of `kind`.
	pub fn root_in(&self, kind: TreeKind, leaf: &Digest) -> Result<Digest, MerkleError> {
		check_openings(&[self.index], self.leaf_count, 1)?;
		let mut siblings = self.siblings.iter();
		let root =
			multiproof_walk(kind, alloc::vec![(self.index as usize, *leaf)], self.leaf_count as usize, &mut siblings)?;
		if siblings.next().is_some() {
			return Err(MerkleError::WrongProofLength);
		}
		Ok(root)
	}

	/// Whether `leaf` sits at this proof's position under `root`.
	pub fn verify(&self, root: &Digest, leaf: &Digest) -> bool {
		self.verify_in(TreeKind::Segments, root, leaf)
	}

	/// [`MerkleProof::verify`] in a tree of `kind`.
	pub fn verify_in(&self, kind: TreeKind, root: &Digest, leaf: &Digest) -> bool {
		self.root_in(kind, leaf).is_ok_and(|computed| computed == *root)
	}
}

/// Inclusion of several leaves of one tree at once, with each node that the
/// leaves do not determine given once.
///
/// A referee case opens dozens of segments of the same tree, and their paths
/// share most of their upper nodes. Lone proofs would repeat those nodes and
/// make the verifier hash them again; a multiproof lists only the nodes that
/// no opened leaf determines, and the verifier computes each node of the union
/// of the paths exactly once, with no lookups.
///
/// The verifier walks the levels bottom up. At each level it holds the
/// computed nodes in index order; a node at an even index pairs with the next
/// computed node if that is its right sibling, and otherwise takes the next
/// hash of [`MultiProof::hashes`]; a node at an odd index takes its left
/// sibling from `hashes` (a computed left sibling would have paired with it
/// already); a last node without a sibling is promoted. The prover emits
/// `hashes` in exactly that order ([`MerkleTree::multiproof`]). Like a lone
/// proof, it binds the positions, which drive the walk. It does not always bind
/// the tree size (leaf 0 of 3 leaves and of 4 has the same path), so
/// [`MultiProof::verify`] takes the size the verifier expects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
	feature = "codec",
	derive(codec::Encode, codec::Decode, codec::DecodeWithMemTracking, scale_info::TypeInfo)
)]
pub struct MultiProof {
	/// Leaves in the tree.
	pub leaf_count: u32,
	/// The opened leaves' indices, strictly increasing.
	pub indices: Vec<u32>,
	/// The sibling nodes the walk needs and cannot compute, in the order it takes them.
	pub hashes: Vec<Digest>,
}

/// Where the multiproof walk takes a sibling from.
trait SiblingSource {
	/// The sibling at `index` of `level`.
	fn sibling(&mut self, level: usize, index: usize) -> Option<Digest>;
}

/// The verifier's side: the proof's hashes, in order.
impl<'a, I: Iterator<Item = &'a Digest>> SiblingSource for I {
	fn sibling(&mut self, _level: usize, _index: usize) -> Option<Digest> {
		self.next().copied()
	}
}

/// Walks the multiproof levels from `nodes` (index order, strictly increasing,
/// below `width`) to the root of a tree of `kind`, taking siblings from `siblings`.
fn multiproof_walk(
	kind: TreeKind,
	mut nodes: Vec<(usize, Digest)>,
	mut width: usize,
	siblings: &mut impl SiblingSource,
) -> Result<Digest, MerkleError> {
	let mut level = 0;
	// Two buffers, swapped each level: every allocation is a host call in the runtime.
	let mut parents = Vec::with_capacity(nodes.len());
	while width > 1 {
		parents.clear();
		// The level of two nodes is the root's.
		let is_root = width == 2;
		let mut position = 0;
		while let Some(&(index, hash)) = nodes.get(position) {
			position += 1;
			let parent = if index % 2 == 1 {
				let left = siblings.sibling(level, index - 1).ok_or(MerkleError::WrongProofLength)?;
				kind.node(&left, &hash, is_root)
			} else if index + 1 < width {
				let right = match nodes.get(position) {
					Some(&(next, right)) if next == index + 1 => {
						position += 1;
						right
					},
					_ => siblings.sibling(level, index + 1).ok_or(MerkleError::WrongProofLength)?,
				};
				kind.node(&hash, &right, is_root)
			} else {
				hash
			};
			parents.push((index / 2, parent));
		}
		core::mem::swap(&mut nodes, &mut parents);
		width = width.div_ceil(2);
		level += 1;
	}
	nodes.first().map(|&(_, root)| root).ok_or(MerkleError::Empty)
}

/// Checks a multiproof's shape: a non-empty tree, one leaf per index,
/// indices strictly increasing and in range.
fn check_openings(indices: &[u32], leaf_count: u32, leaves: usize) -> Result<(), MerkleError> {
	if leaf_count == 0 || indices.is_empty() {
		return Err(MerkleError::Empty);
	}
	if indices.len() != leaves {
		return Err(MerkleError::WrongProofLength);
	}
	let increasing = indices.windows(2).all(|pair| matches!(pair, [a, b] if a < b));
	if !increasing || indices.last().is_some_and(|&last| last >= leaf_count) {
		return Err(MerkleError::IndexOutOfRange);
	}
	Ok(())
}

impl MultiProof {
	/// The root that `leaves` (one per index, in order) imply.
	pub fn root(&self, leaves: &[Digest]) -> Result<Digest, MerkleError> {
		self.root_in(TreeKind::Segments, leaves)
	}

	/// [`MultiProof::root`] in a tree of `kind`.
	pub fn root_in(&self, kind: TreeKind, leaves: &[Digest]) -> Result<Digest, MerkleError> {
		check_openings(&self.indices, self.leaf_count, leaves.len())?;
		let nodes = self.indices.iter().map(|&index| index as usize).zip(leaves.iter().copied()).collect();
		let mut hashes = self.hashes.iter();
		let root = multiproof_walk(kind, nodes, self.leaf_count as usize, &mut hashes)?;
		if hashes.next().is_some() {
			return Err(MerkleError::WrongProofLength);
		}
		Ok(root)
	}

	/// Whether `leaves` sit at this proof's indices under `root`, in a tree of
	/// `leaf_count` leaves (which the proof alone does not always bind).
	pub fn verify(&self, root: &Digest, leaf_count: usize, leaves: &[Digest]) -> bool {
		self.verify_in(TreeKind::Segments, root, leaf_count, leaves)
	}

	/// [`MultiProof::verify`] in a tree of `kind`.
	pub fn verify_in(&self, kind: TreeKind, root: &Digest, leaf_count: usize, leaves: &[Digest]) -> bool {
		self.leaf_count as usize == leaf_count && self.root_in(kind, leaves).is_ok_and(|computed| computed == *root)
	}
}

/// A Merkle tree with all its levels kept, for the prover's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
	/// The node function.
	kind: TreeKind,
	/// `levels[0]` are the leaves, the last level the root alone.
	levels: Vec<Vec<Digest>>,
}

impl MerkleTree {
	/// Builds the tree over `leaves`.
	pub fn new(leaves: Vec<Digest>) -> Result<Self, MerkleError> {
		Self::new_in(TreeKind::Segments, leaves)
	}

	/// Builds the tree of `kind` over `leaves`.
	pub fn new_in(kind: TreeKind, leaves: Vec<Digest>) -> Result<Self, MerkleError> {
		check_leaf_count(leaves.len())?;
		let mut levels = alloc::vec![leaves];
		while let Some(level) = levels.last().filter(|level| level.len() > 1) {
			let next = parent_level(kind, level);
			levels.push(next);
		}
		Ok(Self { kind, levels })
	}

	/// The node function.
	pub fn kind(&self) -> TreeKind {
		self.kind
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

	/// The inclusion proof of leaf `index`: a multiproof of that leaf alone.
	pub fn proof(&self, index: usize) -> Result<MerkleProof, MerkleError> {
		let MultiProof { leaf_count, hashes, .. } = self.multiproof(&[index])?;
		Ok(MerkleProof { index: index as u32, leaf_count, siblings: hashes })
	}

	/// The multiproof of the leaves at `indices` (strictly increasing).
	pub fn multiproof(&self, indices: &[usize]) -> Result<MultiProof, MerkleError> {
		/// The prover's side: records each sibling the walk asks for.
		struct Recording<'a> {
			tree: &'a MerkleTree,
			hashes: Vec<Digest>,
		}
		impl SiblingSource for Recording<'_> {
			fn sibling(&mut self, level: usize, index: usize) -> Option<Digest> {
				let node = self.tree.node(level, index)?;
				self.hashes.push(node);
				Some(node)
			}
		}
		let leaf_count = u32::try_from(self.len()).map_err(|_| MerkleError::IndexOutOfRange)?;
		let indices: Vec<u32> = indices.iter().map(|&i| u32::try_from(i).map_err(|_| MerkleError::IndexOutOfRange)).collect::<Result<_, _>>()?;
		check_openings(&indices, leaf_count, indices.len())?;
		let nodes = indices
			.iter()
			.map(|&index| Ok((index as usize, self.node(0, index as usize).ok_or(MerkleError::IndexOutOfRange)?)))
			.collect::<Result<Vec<_>, MerkleError>>()?;
		let mut recording = Recording { tree: self, hashes: Vec::new() };
		multiproof_walk(self.kind, nodes, self.len(), &mut recording)?;
		Ok(MultiProof { leaf_count, indices, hashes: recording.hashes })
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
	fn a_node_is_blake3_keyed_over_both_children_and_never_a_leaf() {
		let (left, right) = ([1u8; 32], [2u8; 32]);
		let mut keyed = blake3::Hasher::new_keyed(&NODE_KEY);
		keyed.update(&left);
		keyed.update(&right);
		assert_eq!(node_hash(&left, &right), *keyed.finalize().as_bytes());
		assert_eq!(NODE_KEY.as_slice(), b"touchstone/merkle-node/blake3/v1");
		// Order matters, and the same 64 bytes as a leaf payload give another digest.
		assert_ne!(node_hash(&left, &right), node_hash(&right, &left));
		let mut payload = left.to_vec();
		payload.extend_from_slice(&right);
		assert_ne!(node_hash(&left, &right), leaf_hash(&payload));
		assert_ne!(node_hash(&left, &right), TreeKind::State.node(&left, &right, false));
	}

	#[test]
	fn batched_and_parallel_roots_equal_the_tree_root() {
		let values: Vec<f32> = (0..40_000).map(|i| (i as f32 * 0.37).sin()).collect();
		for len in [1, 31, 32, 33, 64 * 32 + 5, 40_000] {
			let tensor = &values[..len];
			let one_by_one: Vec<Digest> = tensor.chunks(SEGMENT).map(segment_leaf).collect();
			assert_eq!(segment_leaves(tensor), one_by_one);
			let expected = MerkleTree::new(one_by_one.clone()).unwrap().root();
			assert_eq!(root(one_by_one).unwrap(), expected);
			let segments: Vec<&[f32]> = tensor.chunks(SEGMENT).collect();
			for (threads, min_part) in [(1, 1), (2, 1), (3, 4), (4, 16)] {
				assert_eq!(root_of_segments_on(&segments, threads, min_part).unwrap(), expected, "{len} {threads}");
			}
		}
		let words: Vec<u32> = (0..100).collect();
		let one_by_one: Vec<Digest> = words.chunks(SEGMENT).map(index_segment_leaf).collect();
		assert_eq!(index_segment_leaves(&words), one_by_one);
		assert_eq!(root(Vec::new()), Err(MerkleError::Empty));
		assert_eq!(root_of_segments(&[]), Err(MerkleError::Empty));
	}

	/// Index sets of a tree of `n` leaves: each leaf alone, neighbours, strides, all.
	fn index_sets(n: usize) -> Vec<Vec<usize>> {
		let mut sets: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
		sets.push((0..n).collect());
		for stride in [2, 3, 5] {
			sets.push((0..n).step_by(stride).collect());
			sets.push((1..n).step_by(stride).collect());
		}
		sets.extend((0..n.saturating_sub(1)).map(|i| vec![i, i + 1]));
		sets.retain(|set| !set.is_empty());
		sets
	}

	#[test]
	fn a_multiproof_verifies_its_leaves_and_nothing_else() {
		for n in 1..=33usize {
			let tree = MerkleTree::new(leaves(n)).unwrap();
			let root = tree.root();
			for set in index_sets(n) {
				let proof = tree.multiproof(&set).unwrap();
				let opened: Vec<Digest> = set.iter().map(|&i| tree.leaves()[i]).collect();
				assert!(proof.verify(&root, n, &opened), "n={n} {set:?}");
				// No node is given that the leaves determine: never more than lone proofs hold.
				let lone: usize = set.iter().map(|&i| tree.proof(i).unwrap().siblings.len()).sum();
				assert!(proof.hashes.len() <= lone);
				for h in 0..proof.hashes.len() {
					let mut spoilt = proof.clone();
					spoilt.hashes[h][h % 32] ^= 1;
					assert!(!spoilt.verify(&root, n, &opened), "n={n} {set:?} hash {h}");
				}
				for l in 0..opened.len() {
					let mut wrong = opened.clone();
					wrong[l][0] ^= 1;
					assert!(!proof.verify(&root, n, &wrong));
				}
				let mut longer = proof.clone();
				longer.hashes.push(root);
				assert_eq!(longer.root(&opened), Err(MerkleError::WrongProofLength));
				if !proof.hashes.is_empty() {
					let mut shorter = proof.clone();
					shorter.hashes.pop();
					assert!(!shorter.verify(&root, n, &opened));
				}
				// Other positions do not verify, nor does the proof as one into another
				// tree size (its walk alone may accept one, where promotion makes two
				// sizes share the paths: `verify` takes the expected size).
				for resized in [n + 1, n - 1] {
					let _ = MultiProof { leaf_count: resized as u32, ..proof.clone() }.root(&opened);
					assert!(!proof.verify(&root, resized, &opened));
				}
				if n > 1 && set.len() < n {
					let shifted: Vec<u32> = proof.indices.iter().map(|&i| (i + 1) % n as u32).collect();
					if shifted.windows(2).all(|w| w[0] < w[1]) {
						assert!(!MultiProof { indices: shifted, ..proof.clone() }.verify(&root, n, &opened), "n={n} {set:?} shifted");
					}
				}
			}
		}
	}

	#[test]
	fn malformed_multiproofs_are_errors_not_panics() {
		let tree = MerkleTree::new(leaves(6)).unwrap();
		let proof = tree.multiproof(&[1, 4]).unwrap();
		let opened = [tree.leaves()[1], tree.leaves()[4]];
		assert_eq!(proof.root(&opened[..1]), Err(MerkleError::WrongProofLength));
		assert_eq!(MultiProof { indices: vec![4, 1], ..proof.clone() }.root(&opened), Err(MerkleError::IndexOutOfRange));
		assert_eq!(MultiProof { indices: vec![1, 1], ..proof.clone() }.root(&opened), Err(MerkleError::IndexOutOfRange));
		assert_eq!(MultiProof { indices: vec![1, 6], ..proof.clone() }.root(&opened), Err(MerkleError::IndexOutOfRange));
		assert_eq!(MultiProof { leaf_count: 0, ..proof.clone() }.root(&opened), Err(MerkleError::Empty));
		assert_eq!(MultiProof { indices: Vec::new(), ..proof.clone() }.root(&[]), Err(MerkleError::Empty));
		assert_eq!(tree.multiproof(&[3, 2]), Err(MerkleError::IndexOutOfRange));
		assert_eq!(tree.multiproof(&[6]), Err(MerkleError::IndexOutOfRange));
		assert_eq!(tree.multiproof(&[]), Err(MerkleError::Empty));
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

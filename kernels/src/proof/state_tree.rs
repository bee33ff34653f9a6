//! The state tree: a training state hashed as BLAKE3 over whole 1 KiB chunks.
//!
//! # Definition
//!
//! - A state is its tensors in the graph's state order. Tensor `i` of `len_i`
//!   elements takes `max(1, ⌈len_i / 256⌉)` **chunks** of [`CHUNK_WORDS`] words:
//!   its canonical little-endian bits ([`canonical_bits`]: `-0` as `+0`),
//!   zero-padded up to the end of its last chunk. An empty tensor is one chunk
//!   of zeros. So every chunk is a full 1,024-byte BLAKE3 chunk and holds words
//!   of one tensor only.
//! - The **state root** is `blake3::hash` of the chunks' bytes in order. A
//!   state has at least two chunks (a model has a weight and a bias); a
//!   one-chunk state is refused, because BLAKE3's root of one chunk is that
//!   chunk's own root output, which no inclusion proof could open.
//! - The tree behind the root is BLAKE3's: leaf `j` is the chaining value of
//!   chunk `j` (chunk counter `j`), inner nodes are parent chaining values, the
//!   top one finalised as the root. Its shape is the shape of every other tree
//!   of the protocol ([`crate::proof::merkle`], [`TreeKind::State`]), so an
//!   opening of chunk `j` is a [`crate::proof::merkle::MerkleProof`] or
//!   [`crate::proof::merkle::MultiProof`] checked in [`TreeKind::State`].
//!
//! # Why BLAKE3 over chunks
//!
//! A state is hashed once per checkpoint boundary, and it is the largest thing
//! the protocol hashes (14.9 MB for the wide MLP). BLAKE3 hashes many chunks
//! side by side in SIMD lanes, and its 32-bit arithmetic runs in a compute
//! shader, so a device computes the root where the state lives and sends back
//! 32 bytes. A chunk of 256 words, against the 32-word segments of the other
//! trees, makes the tree eight times shallower and cheaper to build; the
//! referee reads a few whole chunks per dispute, which is the price.

use alloc::vec::Vec;

use crate::arith::canonical_bits;
use crate::proof::hash::Digest;
use crate::proof::merkle::{check_leaf_count, MerkleError, MerkleTree, TreeKind};

/// Words (`f32` or `u32`) in a chunk: BLAKE3's 1,024-byte chunk.
pub const CHUNK_WORDS: usize = 256;

/// Bytes in a chunk.
pub const CHUNK_BYTES: usize = 4 * CHUNK_WORDS;

/// Chunks of a tensor of `len` elements: at least one, so that an empty tensor
/// still has a leaf.
pub fn chunk_count(len: usize) -> usize {
	len.div_ceil(CHUNK_WORDS).max(1)
}

/// Chunks of a state whose tensors have `lens` elements.
pub fn state_chunk_count(lens: impl IntoIterator<Item = usize>) -> usize {
	lens.into_iter().map(chunk_count).fold(0, usize::saturating_add)
}

/// The elements of chunk `chunk` of a tensor of `len` elements (empty past its end).
pub fn chunk_range(len: usize, chunk: usize) -> core::ops::Range<usize> {
	let start = chunk.saturating_mul(CHUNK_WORDS).min(len);
	start..start.saturating_add(CHUNK_WORDS).min(len)
}

/// The index of each tensor's first chunk in the state, and the total after the last.
fn chunk_starts(tensors: &[&[f32]]) -> Vec<usize> {
	let mut starts = Vec::with_capacity(tensors.len() + 1);
	let mut next = 0usize;
	for tensor in tensors {
		starts.push(next);
		next = next.saturating_add(chunk_count(tensor.len()));
	}
	starts.push(next);
	starts
}

/// The leaf of chunk `index` of a state: the BLAKE3 chaining value of the
/// chunk whose words are `values` (canonical bits, zero-padded to a whole
/// chunk; elements past [`CHUNK_WORDS`] are not read).
pub fn chunk_leaf(values: &[f32], index: u64) -> Digest {
	let mut words = [0u32; CHUNK_WORDS];
	for (word, &value) in words.iter_mut().zip(values) {
		*word = canonical_bits(value);
	}
	chunk_leaf_words(&words, index)
}

/// The leaf of chunk `index` whose words are `words` as they are (zero-padded
/// to a whole chunk; words past [`CHUNK_WORDS`] are not read): what the
/// referee hashes an opened chunk with, so that an opening must hold the
/// canonical bits the prover's tree hashed.
pub fn chunk_leaf_words(words: &[u32], index: u64) -> Digest {
	use blake3::hazmat::HasherExt;
	let mut bytes = [0u8; CHUNK_BYTES];
	for (bytes, &word) in bytes.chunks_exact_mut(4).zip(words) {
		bytes.copy_from_slice(&word.to_le_bytes());
	}
	let mut hasher = blake3::Hasher::new();
	// A chunk's counter is its index: offsets are whole chunks, so this never panics.
	hasher.set_input_offset(index.saturating_mul(CHUNK_BYTES as u64));
	hasher.update(&bytes);
	hasher.finalize_non_root()
}

/// Words scanned and hashed per `update` call: BLAKE3 holds back the last
/// chunk of every update (it might be the root), so an update of `n` chunks
/// runs `n − 1` of them side by side; 256 chunks keep that loss small, and
/// the window (256 KiB) stays in cache between the scan and the hash.
const WINDOW_WORDS: usize = 256 * CHUNK_WORDS;

/// Words canonicalised per copy, for a window that holds a negative zero.
const STAGING_WORDS: usize = 16 * CHUNK_WORDS;

/// A chunk of zeros: the padding after a tensor's last word.
const ZERO_CHUNK: [u8; CHUNK_BYTES] = [0; CHUNK_BYTES];

/// Feeds `values`' canonical little-endian bits to `hasher`, a window at a
/// time. A window without a negative zero (nearly all of them) is hashed as
/// it lies in memory on a little-endian machine; the others are copied with
/// `-0` turned into `+0` first.
fn feed_words(hasher: &mut blake3::Hasher, values: &[f32], staging: &mut [u8; 4 * STAGING_WORDS]) {
	for window in values.chunks(WINDOW_WORDS) {
		// A fold without an early exit, so that the scan runs on vectors.
		#[cfg(target_endian = "little")]
		if !window.iter().fold(false, |found, value| found | (value.to_bits() == NEGATIVE_ZERO)) {
			hasher.update(bytemuck::cast_slice(window));
			continue;
		}
		for piece in window.chunks(STAGING_WORDS) {
			let bytes = staging.get_mut(..4 * piece.len()).unwrap_or_default();
			for (word, &value) in bytes.chunks_exact_mut(4).zip(piece) {
				word.copy_from_slice(&canonical_bits(value).to_le_bytes());
			}
			hasher.update(bytes);
		}
	}
}

/// The bits of `-0.0`.
const NEGATIVE_ZERO: u32 = 0x8000_0000;

/// Feeds chunks `range` of the state `tensors` (with `starts` from
/// [`chunk_starts`]) to `hasher`: each tensor's canonical bits, zero-padded
/// to its last chunk's end.
fn feed_chunks(hasher: &mut blake3::Hasher, tensors: &[&[f32]], starts: &[usize], range: core::ops::Range<usize>) {
	let mut staging = [0u8; 4 * STAGING_WORDS];
	for (tensor, bounds) in tensors.iter().zip(starts.windows(2)) {
		let [first, end] = [bounds.first().copied().unwrap_or(0), bounds.get(1).copied().unwrap_or(0)];
		let (from, to) = (range.start.max(first), range.end.min(end));
		if from >= to {
			continue;
		}
		let offset = (from - first) * CHUNK_WORDS;
		let words = (to - from) * CHUNK_WORDS;
		let values = tensor.get(offset.min(tensor.len())..tensor.len().min(offset + words)).unwrap_or_default();
		feed_words(hasher, values, &mut staging);
		// Only a tensor's last chunk is padded, by less than a chunk (a whole one when empty).
		let padding = 4 * (words - values.len());
		hasher.update(ZERO_CHUNK.get(..padding).unwrap_or(&ZERO_CHUNK));
	}
}

/// Chunks below which the root is hashed on one thread: about a hundred
/// microseconds of work, against tens to start a thread.
const MIN_PARALLEL_CHUNKS: usize = 256;

/// The state root of `tensors` (see the module docs), on up to
/// [`crate::exec::parallel::threads`] threads.
pub fn root(tensors: &[&[f32]]) -> Result<Digest, MerkleError> {
	root_on(tensors, crate::exec::parallel::threads(), MIN_PARALLEL_CHUNKS)
}

/// [`root`] on up to `threads` threads, with parts of at least `min_part` chunks.
///
/// A thread hashes a part of a power-of-two number of chunks aligned to its
/// size: such a part is a subtree of BLAKE3's tree (the last, possibly
/// shorter, part too, since it ends the tree), so its chaining value is one of
/// the tree's nodes, and the parts' values form the tree's upper levels.
fn root_on(tensors: &[&[f32]], threads: usize, min_part: usize) -> Result<Digest, MerkleError> {
	let starts = chunk_starts(tensors);
	let chunks = starts.last().copied().unwrap_or(0);
	check_leaf_count(chunks)?;
	if chunks < 2 {
		return Err(MerkleError::Empty);
	}
	let part = chunks.div_ceil(threads.max(1) * 4).max(min_part).next_power_of_two();
	if threads <= 1 || chunks <= part {
		let mut hasher = blake3::Hasher::new();
		feed_chunks(&mut hasher, tensors, &starts, 0..chunks);
		return Ok(*hasher.finalize().as_bytes());
	}
	let parts = chunks.div_ceil(part);
	let values = crate::exec::parallel::map_indices(parts, threads, |index| {
		use blake3::hazmat::HasherExt;
		let first = index * part;
		let mut hasher = blake3::Hasher::new();
		hasher.set_input_offset((first * CHUNK_BYTES) as u64);
		feed_chunks(&mut hasher, tensors, &starts, first..chunks.min(first + part));
		hasher.finalize_non_root()
	});
	crate::proof::merkle::root_in(TreeKind::State, values)
}

/// The leaves of the state tree of `tensors`: one chaining value per chunk, in order.
pub fn leaves(tensors: &[&[f32]]) -> Vec<Digest> {
	let mut leaves = Vec::with_capacity(state_chunk_count(tensors.iter().map(|tensor| tensor.len())));
	let mut index = 0u64;
	for tensor in tensors {
		for chunk in 0..chunk_count(tensor.len()) {
			leaves.push(chunk_leaf(tensor.get(chunk_range(tensor.len(), chunk)).unwrap_or_default(), index));
			index += 1;
		}
	}
	leaves
}

/// The whole state tree of `tensors`, for the prover's openings. Its root is [`root`]'s.
pub fn tree(tensors: &[&[f32]]) -> Result<MerkleTree, MerkleError> {
	let leaves = leaves(tensors);
	if leaves.len() < 2 {
		return Err(MerkleError::Empty);
	}
	MerkleTree::new_in(TreeKind::State, leaves)
}

/// Checks chunks of a state against its root: `chunks` are `(chunk index, the
/// chunk's words)` in increasing index order (at most [`CHUNK_WORDS`] words each,
/// the rest of the chunk zeros), `proof` their multiproof in a state of
/// `chunk_count` chunks; `true` when they open. The words are hashed as they are
/// ([`chunk_leaf_words`]), so an opening must hold the canonical bits the tree
/// hashed, and each chunk's leaf binds its index (the chunk counter), so words
/// cannot be moved. What the referee's availability check runs.
pub fn verify_chunks(
	root: &Digest,
	chunk_count: usize,
	chunks: &[(u32, &[u32])],
	proof: &crate::proof::merkle::MultiProof,
) -> bool {
	let well_formed = chunks.iter().all(|(_, words)| words.len() <= CHUNK_WORDS)
		&& proof.indices.len() == chunks.len()
		&& proof.indices.iter().zip(chunks).all(|(&index, &(chunk, _))| index == chunk);
	let leaves: Vec<Digest> = chunks.iter().map(|&(index, words)| chunk_leaf_words(words, u64::from(index))).collect();
	well_formed && proof.verify_in(TreeKind::State, root, chunk_count, &leaves)
}

/// Where chunk `chunk` of a state with tensors of `lens` elements lies: its
/// tensor and its chunk within that tensor, or `None` past the state's end.
pub fn locate_chunk(lens: impl IntoIterator<Item = usize>, chunk: usize) -> Option<(usize, usize)> {
	let mut first = 0usize;
	for (tensor, len) in lens.into_iter().enumerate() {
		let count = chunk_count(len);
		if chunk < first.saturating_add(count) {
			return Some((tensor, chunk - first));
		}
		first = first.saturating_add(count);
	}
	None
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::proof::merkle::{depth, MerkleProof};

	/// The state's chunks as BLAKE3 reads them: canonical bits, each tensor zero-padded.
	fn padded(tensors: &[&[f32]]) -> Vec<u8> {
		let mut bytes = Vec::new();
		for tensor in tensors {
			let start = bytes.len();
			for &value in *tensor {
				bytes.extend(canonical_bits(value).to_le_bytes());
			}
			bytes.resize(start + chunk_count(tensor.len()) * CHUNK_BYTES, 0);
		}
		bytes
	}

	fn values(len: usize, salt: f32) -> Vec<f32> {
		(0..len).map(|i| ((i as f32 + salt) * 0.37).sin()).collect()
	}

	/// States whose tensors end before, on and after chunk boundaries, an empty one included.
	fn states() -> Vec<Vec<Vec<f32>>> {
		let mut states = Vec::new();
		for lens in [
			vec![1, 1],
			vec![255, 1],
			vec![256, 256],
			vec![257, 10],
			vec![4097, 3],
			vec![0, 300, 0],
			vec![1000, 1000, 1000, 1000, 5],
			vec![256 * 37 + 11, 256 * 3, 99],
		] {
			states.push(lens.iter().enumerate().map(|(i, &len)| values(len, i as f32)).collect());
		}
		states
	}

	fn views(state: &[Vec<f32>]) -> Vec<&[f32]> {
		state.iter().map(Vec::as_slice).collect()
	}

	#[test]
	fn the_root_is_blake3_of_the_padded_chunks_on_any_number_of_threads() {
		for state in states() {
			let tensors = views(&state);
			let bytes = padded(&tensors);
			let chunks = state_chunk_count(tensors.iter().map(|t| t.len()));
			assert_eq!(bytes.len(), chunks * CHUNK_BYTES);
			let expected = *blake3::hash(&bytes).as_bytes();
			assert_eq!(root(&tensors).unwrap(), expected);
			for (threads, min_part) in [(1, 1), (2, 1), (3, 2), (4, 8), (7, 1)] {
				assert_eq!(root_on(&tensors, threads, min_part).unwrap(), expected, "{threads} {min_part}");
			}
			assert_eq!(tree(&tensors).unwrap().root(), expected);
		}
	}

	#[test]
	fn windows_with_and_without_negative_zeros_hash_alike() {
		// Over one window of words: the first window has a -0, the second none, the third one.
		let mut big = values(WINDOW_WORDS * 2 + 5_000, 3.0);
		big[17] = -0.0;
		big[2 * WINDOW_WORDS + 4_999] = -0.0;
		let state = [big, values(3, 1.0)];
		let tensors = views(&state);
		let expected = *blake3::hash(&padded(&tensors)).as_bytes();
		for threads in [1, 2, 5] {
			assert_eq!(root_on(&tensors, threads, 1).unwrap(), expected, "{threads}");
		}
	}

	#[test]
	fn negative_zero_hashes_as_positive_zero_and_every_word_counts() {
		let mut state = vec![values(300, 0.0), values(40, 1.0)];
		let honest = root(&views(&state)).unwrap();
		state[0][17] = -0.0;
		let with_negative = root(&views(&state)).unwrap();
		state[0][17] = 0.0;
		assert_eq!(root(&views(&state)).unwrap(), with_negative);
		assert_ne!(with_negative, honest);
		// Moving a word across a tensor boundary changes the root: padding is part of the layout.
		let split = [values(256, 0.0), values(1, 9.0)];
		let moved = [values(257, 0.0), Vec::new()];
		assert_ne!(root(&views(&split)).unwrap(), root(&views(&moved)).unwrap());
	}

	#[test]
	fn a_state_of_one_chunk_or_none_is_refused() {
		assert_eq!(root(&[&[1.0][..]]), Err(MerkleError::Empty));
		assert_eq!(root(&[]), Err(MerkleError::Empty));
		assert_eq!(tree(&[&[][..]]).unwrap_err(), MerkleError::Empty);
	}

	#[test]
	fn chunk_openings_verify_in_the_state_kind_and_nowhere_else() {
		for state in states() {
			let tensors = views(&state);
			let tree = tree(&tensors).unwrap();
			let root = tree.root();
			let lens: Vec<usize> = tensors.iter().map(|t| t.len()).collect();
			let n = tree.len();
			assert_eq!(tree.height() as u32, depth(n));
			for chunk in 0..n {
				let (tensor, local) = locate_chunk(lens.iter().copied(), chunk).unwrap();
				let words = &tensors[tensor][chunk_range(lens[tensor], local)];
				let leaf = chunk_leaf(words, chunk as u64);
				assert_eq!(leaf, tree.leaves()[chunk]);
				let proof = tree.proof(chunk).unwrap();
				assert!(proof.verify_in(TreeKind::State, &root, &leaf));
				assert!(!proof.verify(&root, &leaf), "a segment tree's walk must not reach a state tree's root");
				// The counter binds the position: the same words at another index are another leaf.
				if n > 1 {
					let moved = MerkleProof { index: ((chunk + 1) % n) as u32, ..proof.clone() };
					assert!(!moved.verify_in(TreeKind::State, &root, &leaf));
					assert_ne!(chunk_leaf(words, ((chunk + 1) % n) as u64), leaf);
				}
			}
			assert_eq!(locate_chunk(lens.iter().copied(), n), None);
			let all: Vec<usize> = (0..n).step_by(3).collect();
			let proof = tree.multiproof(&all).unwrap();
			let opened: Vec<Digest> = all.iter().map(|&i| tree.leaves()[i]).collect();
			assert!(proof.verify_in(TreeKind::State, &root, n, &opened));
			let mut spoilt = opened.clone();
			spoilt[0][0] ^= 1;
			assert!(!proof.verify_in(TreeKind::State, &root, n, &spoilt));
		}
	}

	#[test]
	fn opened_chunks_verify_against_the_root_and_refuse_every_change() {
		let state = [values(256 * 9 + 17, 0.0), values(300, 1.0)];
		let tensors = views(&state);
		let lens: Vec<usize> = tensors.iter().map(|t| t.len()).collect();
		let tree = tree(&tensors).unwrap();
		let (root, n) = (tree.root(), tree.len());
		let words = |chunk: usize| {
			let (tensor, local) = locate_chunk(lens.iter().copied(), chunk).unwrap();
			tensors[tensor][chunk_range(lens[tensor], local)].iter().map(|&v| canonical_bits(v)).collect::<Vec<u32>>()
		};
		let opened = [0usize, 3, 9, 11];
		let proof = tree.multiproof(&opened).unwrap();
		let contents: Vec<Vec<u32>> = opened.iter().map(|&c| words(c)).collect();
		let chunks: Vec<(u32, &[u32])> = opened.iter().zip(&contents).map(|(&c, w)| (c as u32, w.as_slice())).collect();
		assert!(verify_chunks(&root, n, &chunks, &proof));
		// A changed word, a chunk given at another index, another tree size, a longer chunk: refused.
		let mut changed = contents.clone();
		changed[1][7] ^= 1 << 22;
		let with_change: Vec<(u32, &[u32])> = opened.iter().zip(&changed).map(|(&c, w)| (c as u32, w.as_slice())).collect();
		assert!(!verify_chunks(&root, n, &with_change, &proof));
		let mut moved = chunks.clone();
		moved[1].0 = 4;
		assert!(!verify_chunks(&root, n, &moved, &proof));
		assert!(!verify_chunks(&root, n + 1, &chunks, &proof));
		let long = vec![0u32; CHUNK_WORDS + 1];
		let mut too_long = chunks.clone();
		too_long[0].1 = &long;
		assert!(!verify_chunks(&root, n, &too_long, &proof));
		// The last chunk of a tensor opens from its words alone: the padding is implied.
		assert_eq!(words(9).len(), 17);
	}

	#[test]
	fn blake3s_left_subtree_is_the_promoted_trees_left_subtree() {
		// The promoted tree's root splits n leaves at the largest power of two below n,
		// which is BLAKE3's rule; checked here for every size up to 3,000 chunks.
		for n in 2u64..=3000 {
			let left_chunks = blake3::hazmat::left_subtree_len(n * CHUNK_BYTES as u64) / CHUNK_BYTES as u64;
			let promoted_left = 1u64 << (depth(n as usize) - 1);
			assert_eq!(left_chunks, promoted_left, "n={n}");
		}
	}
}

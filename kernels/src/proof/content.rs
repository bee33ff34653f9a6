//! Content addresses of artifacts (datasets, initial weights, checkpoints, models):
//! BLAKE3 of the bytes, so that a transfer verifies every group of bytes as it arrives.
//!
//! BLAKE3 is itself a Merkle tree over 1 KiB chunks whose left subtree holds the largest
//! power of two of chunks below the total. A **group** of [`GROUP`] bytes (1,024 chunks,
//! a power of two) starting at a multiple of [`GROUP`] is therefore always one subtree of
//! that tree, and the tree above an artifact's groups has the same shape over the groups
//! as over chunks ([`TreeKind::State`]). An artifact's **outline** is the chaining value
//! of each of its groups: 32 bytes a MiB. An outline whose tree gives the content hash
//! proves every value in it, and each group that arrives is checked against its value
//! alone: a wrong byte is caught within the group that holds it, and blamed on the peer
//! that sent that group.
//!
//! An artifact of one group (at most 1 MiB) has no tree above its groups: its single
//! group is checked against the content hash itself.

use alloc::vec::Vec;

use blake3::hazmat::HasherExt;

use crate::proof::hash::Digest;
use crate::proof::merkle::{root_in, TreeKind};

/// Bytes per verified group of an artifact: 1 MiB, the unit of transfer.
pub const GROUP: usize = 1 << 20;

/// An artifact's content address: BLAKE3 of its bytes.
pub fn content_hash(bytes: &[u8]) -> Digest {
	*blake3::hash(bytes).as_bytes()
}

/// How many groups an artifact of `len` bytes holds (one for an empty artifact).
pub fn group_count(len: u64) -> u64 {
	len.div_ceil(GROUP as u64).max(1)
}

/// How many bytes group `index` of an artifact of `len` bytes holds.
pub fn group_len(len: u64, index: u64) -> u64 {
	len.saturating_sub(index.saturating_mul(GROUP as u64)).min(GROUP as u64)
}

/// The chaining value of group `index`, whose bytes are `bytes`, in an artifact of more
/// than one group.
pub fn group_value(index: u64, bytes: &[u8]) -> Digest {
	let mut hasher = blake3::Hasher::new();
	hasher.set_input_offset(index.saturating_mul(GROUP as u64));
	hasher.update(bytes);
	hasher.finalize_non_root()
}

/// The outline of `bytes`: the chaining value of each group ([`group_value`]); empty for
/// an artifact of one group, which has none.
pub fn outline(bytes: &[u8]) -> Vec<Digest> {
	if bytes.len() <= GROUP {
		return Vec::new();
	}
	bytes.chunks(GROUP).enumerate().map(|(index, group)| group_value(index as u64, group)).collect()
}

/// The content hash an outline of at least two groups proves, `None` for a shorter one.
pub fn outline_root(values: &[Digest]) -> Option<Digest> {
	if values.len() < 2 {
		return None;
	}
	root_in(TreeKind::State, values.to_vec()).ok()
}

/// Whether group `index` of an artifact of `len` bytes, named `hash`, with outline
/// `values` (already proven by [`outline_root`]), is `bytes`.
pub fn group_matches(hash: &Digest, len: u64, values: &[Digest], index: u64, bytes: &[u8]) -> bool {
	if bytes.len() as u64 != group_len(len, index) {
		return false;
	}
	if group_count(len) == 1 {
		return index == 0 && content_hash(bytes) == *hash;
	}
	usize::try_from(index).ok().and_then(|index| values.get(index)).is_some_and(|value| group_value(index, bytes) == *value)
}

#[cfg(test)]
mod tests {
	use super::*;

	fn bytes(len: usize) -> Vec<u8> {
		(0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
	}

	/// The outline's tree gives BLAKE3's own hash at every shape: one group short of a
	/// power of two, exactly one, one more, and a last group of one byte.
	#[test]
	fn an_outline_proves_the_blake3_hash_of_the_whole() {
		for len in [GROUP + 1, 2 * GROUP, 3 * GROUP - 7, 4 * GROUP, 4 * GROUP + 1, 5 * GROUP + 1024, 7 * GROUP + 3] {
			let data = bytes(len);
			let values = outline(&data);
			assert_eq!(values.len() as u64, group_count(len as u64));
			assert_eq!(outline_root(&values), Some(content_hash(&data)), "{len} bytes");
			let hash = content_hash(&data);
			for (index, group) in data.chunks(GROUP).enumerate() {
				assert!(group_matches(&hash, len as u64, &values, index as u64, group));
			}
			let mut wrong = data[..GROUP].to_vec();
			wrong[GROUP / 2] ^= 1;
			assert!(!group_matches(&hash, len as u64, &values, 0, &wrong));
			// The last group, cut short, does not pass for itself.
			let last = data.chunks(GROUP).last().unwrap();
			let index = values.len() as u64 - 1;
			assert!(!group_matches(&hash, len as u64, &values, index, &last[..last.len() - 1]));
		}
	}

	#[test]
	fn an_artifact_of_one_group_is_checked_against_its_hash() {
		for len in [0, 1, 1024, GROUP] {
			let data = bytes(len);
			assert!(outline(&data).is_empty());
			assert_eq!(group_count(len as u64), 1);
			assert!(group_matches(&content_hash(&data), len as u64, &[], 0, &data));
			assert!(!group_matches(&content_hash(&data), len as u64, &[], 0, b"other"));
		}
	}
}

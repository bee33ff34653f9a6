//! BLAKE2b-256 digests of tensors: the hash the chain uses, over canonical bits.
//!
//! A tensor's digest covers its values only, as little-endian `u32`s with `-0`
//! encoded as `+0` ([`canonical_bits`]), in storage order. Shapes are fixed by
//! the operator graph that the commitment belongs to, so they are not hashed
//! here; callers that need them bind them in the enclosing structure.

use alloc::vec::Vec;

use crate::arith::canonical_bits;

/// A BLAKE2b-256 digest.
pub type Digest = [u8; 32];

/// Bytes of `f32`s hashed per `update` call, so that hashing never allocates.
const STAGING_BYTES: usize = 1024;

/// What a hash is for. BLAKE2b's personalisation parameter keeps Merkle leaves
/// apart from everything else (Merkle nodes are BLAKE3, [`crate::proof::merkle::node_hash`]),
/// so no payload byte is spent on domain separation: a 32-word segment (128 bytes)
/// is exactly one BLAKE2b block, where a one-byte prefix would make it two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
	/// No personalisation: plain BLAKE2b-256, the chain's `blake2_256`. Files,
	/// flat tensor digests, and composite hashes that carry a prefix byte of
	/// their own (`0x02` state hashes, `0x03` anchors).
	Plain,
	/// Merkle leaves: personalisation `"touchstone/leaf"` (zero-padded to 16 bytes).
	MerkleLeaf,
}

impl Domain {
	/// BLAKE2b-256's parameters for this domain.
	fn params(self) -> blake2b_simd::Params {
		let mut params = blake2b_simd::Params::new();
		params.hash_length(32);
		match self {
			Self::Plain => {},
			Self::MerkleLeaf => {
				params.personal(b"touchstone/leaf");
			},
		}
		params
	}
}

/// BLAKE2b-256 in `domain`.
fn hasher(domain: Domain) -> blake2b_simd::State {
	domain.params().to_state()
}

/// Copies a finished 32-byte BLAKE2b hash into a [`Digest`].
fn finish(state: &blake2b_simd::State) -> Digest {
	let mut digest = [0u8; 32];
	digest.copy_from_slice(state.finalize().as_bytes());
	digest
}

/// BLAKE2b-256 of `bytes`.
pub fn digest_bytes(bytes: &[u8]) -> Digest {
	digest_parts(&[bytes])
}

/// BLAKE2b-256 of `values`' canonical little-endian bits.
pub fn digest_f32(values: &[f32]) -> Digest {
	digest_words(&[], values.iter().map(|&value| canonical_bits(value)))
}

/// BLAKE2b-256 of `values` as little-endian `u32`s (labels, permutations).
pub fn digest_u32(values: &[u32]) -> Digest {
	digest_words(&[], values.iter().copied())
}

/// BLAKE2b-256 of the concatenation of `parts`: composite hashes (state
/// hashes, anchors) without an intermediate buffer.
pub fn digest_parts(parts: &[&[u8]]) -> Digest {
	digest_parts_in(Domain::Plain, parts)
}

/// [`digest_parts`] in `domain`.
pub fn digest_parts_in(domain: Domain, parts: &[&[u8]]) -> Digest {
	let mut state = hasher(domain);
	for part in parts {
		state.update(part);
	}
	finish(&state)
}

/// Jobs handed to `hash_many` at once: enough to keep its 4-wide AVX2
/// implementation busy, few enough to stay in the L1 cache.
const BATCH: usize = 64;

/// BLAKE2b-256 in `domain` of each of `inputs`, appended to `out` in order:
/// the same digests as [`digest_parts_in`] of each, computed side by side (four
/// at a time with AVX2) because short independent inputs (Merkle leaves and
/// nodes) would otherwise leave most of the SIMD lanes idle.
pub fn digest_each<'a>(domain: Domain, inputs: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<Digest>) {
	let params = domain.params();
	let mut inputs = inputs.into_iter().peekable();
	let mut jobs = Vec::with_capacity(BATCH);
	while inputs.peek().is_some() {
		jobs.clear();
		jobs.extend(inputs.by_ref().take(BATCH).map(|input| blake2b_simd::many::HashManyJob::new(&params, input)));
		blake2b_simd::many::hash_many(jobs.iter_mut());
		out.extend(jobs.iter().map(|job| {
			let mut digest = [0u8; 32];
			digest.copy_from_slice(job.to_hash().as_bytes());
			digest
		}));
	}
}

/// BLAKE2b-256 of `prefix` followed by a stream of `u32`s, little-endian,
/// staged through a stack buffer so that hashing never allocates.
pub fn digest_words(prefix: &[u8], words: impl Iterator<Item = u32>) -> Digest {
	digest_words_in(Domain::Plain, prefix, words)
}

/// [`digest_words`] in `domain`.
pub fn digest_words_in(domain: Domain, prefix: &[u8], words: impl Iterator<Item = u32>) -> Digest {
	let mut state = hasher(domain);
	state.update(prefix);
	let mut staging = [0u8; STAGING_BYTES];
	let mut filled = 0;
	for word in words {
		if filled == STAGING_BYTES {
			state.update(&staging);
			filled = 0;
		}
		if let Some(slot) = staging.get_mut(filled..filled + 4) {
			slot.copy_from_slice(&word.to_le_bytes());
		}
		filled += 4;
	}
	state.update(staging.get(..filled).unwrap_or_default());
	finish(&state)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn blake2b_256_of_empty_input_matches_the_published_value() {
		// BLAKE2b-256("") from RFC 7693's parameterisation (as sp_core::blake2_256("")).
		let expected = "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8";
		let actual: alloc::string::String = digest_bytes(b"").iter().map(|b| alloc::format!("{b:02x}")).collect();
		assert_eq!(actual, expected);
	}

	#[test]
	fn f32_digest_is_the_digest_of_canonical_le_bytes() {
		let values: alloc::vec::Vec<f32> = (0..1000).map(|i| i as f32 * 0.25 - 7.0).collect();
		let bytes: alloc::vec::Vec<u8> = values.iter().flat_map(|v| canonical_bits(*v).to_le_bytes()).collect();
		assert_eq!(digest_f32(&values), digest_bytes(&bytes));
		assert_eq!(digest_f32(&[-0.0, 1.0]), digest_f32(&[0.0, 1.0]));
		assert_ne!(digest_f32(&[1.0]), digest_f32(&[f32::from_bits(1.0f32.to_bits() + 1)]));
	}

	#[test]
	fn digest_each_equals_one_digest_at_a_time() {
		let data: alloc::vec::Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
		// Lengths around the 128-byte block, and more inputs than one batch.
		let inputs: alloc::vec::Vec<&[u8]> =
			(0..150).map(|i| &data[i * 11..i * 11 + [0, 1, 65, 127, 128, 129, 300][i % 7]]).collect();
		for domain in [Domain::Plain, Domain::MerkleLeaf] {
			let mut batched = alloc::vec::Vec::new();
			digest_each(domain, inputs.iter().copied(), &mut batched);
			let single: alloc::vec::Vec<Digest> = inputs.iter().map(|input| digest_parts_in(domain, &[input])).collect();
			assert_eq!(batched, single);
		}
		// The domains are different functions.
		let one = |domain| digest_parts_in(domain, &[b"x"]);
		assert_ne!(one(Domain::Plain), one(Domain::MerkleLeaf));
	}
}

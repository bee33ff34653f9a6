//! The local content-addressed artifact store: datasets, initial weights, checkpoints and
//! final models, each a file named by the BLAKE2b-256 of its bytes; and units' trace
//! manifests, each named by the trace root its state hashes build.
//!
//! Every read checks the bytes against their name before handing them out, so a file
//! damaged on disk is an error, never a silent wrong model.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::hash::{digest_bytes, Digest};

/// A directory of artifacts named by their hash.
#[derive(Clone, Debug)]
pub struct Store {
	dir: PathBuf,
}

impl Store {
	/// Opens (creating if needed) the store in `dir`.
	pub fn open(dir: &Path) -> Result<Self> {
		let dir = dir.join("artifacts");
		std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the artifact store {}", dir.display()))?;
		Ok(Self { dir })
	}

	/// Where the artifact `hash` lives (whether or not it is there).
	pub fn path(&self, hash: &Digest) -> PathBuf {
		self.dir.join(hex(hash))
	}

	/// Where a transfer of `hash` from a peer accumulates until it is complete and checked.
	pub fn partial_path(&self, hash: &Digest) -> PathBuf {
		self.dir.join(format!("{}.partial", hex(hash)))
	}

	/// Whether the store holds `hash`.
	pub fn contains(&self, hash: &Digest) -> bool {
		self.path(hash).is_file()
	}

	/// Stores `bytes`; returns their hash. Writing is atomic: a crash leaves either the
	/// whole file or none.
	pub fn put(&self, bytes: &[u8]) -> Result<Digest> {
		let hash = digest_bytes(bytes);
		self.put_as(&hash, bytes)?;
		Ok(hash)
	}

	/// Stores `bytes` under `name`: the hash of the bytes, or another name their readers
	/// check them against ([`Store::get_with`]). Atomic, as [`Store::put`].
	pub fn put_as(&self, name: &Digest, bytes: &[u8]) -> Result<()> {
		let path = self.path(name);
		if !path.is_file() {
			write_atomically(&path, bytes)?;
		}
		Ok(())
	}

	/// Reads the artifact `hash`, checking its bytes against it.
	pub fn get(&self, hash: &Digest) -> Result<Vec<u8>> {
		self.get_with(hash, &hashes_to(*hash))
	}

	/// Reads the artifact stored under `name`, which `check` must accept.
	pub fn get_with(&self, name: &Digest, check: &Check<'_>) -> Result<Vec<u8>> {
		let path = self.path(name);
		let bytes = std::fs::read(&path)
			.with_context(|| format!("artifact {} is not in the local store ({})", hex(name), path.display()))?;
		if let Err(error) = check(&bytes) {
			bail!("artifact {} is corrupt on disk: {error:#}; delete {} and fetch it again", hex(name), path.display());
		}
		Ok(bytes)
	}

	/// Every artifact's hash, for serving.
	pub fn list(&self) -> Vec<Digest> {
		let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
		entries
			.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
			.filter_map(|name| parse_digest(&name))
			.collect()
	}
}

/// The check of a model named by its state root (a proof's final state): its bytes parse
/// as a model file whose state has root `root`.
pub fn holds_state(root: Digest) -> impl Fn(&[u8]) -> Result<()> + Send + Sync {
	move |bytes| {
		touchstone_kernels::job::checkpoint::Checkpoint::with_state_root(bytes, &root).map_err(|error| anyhow::anyhow!("{error}"))?;
		Ok(())
	}
}

/// What an artifact's bytes must pass to be used under its name.
pub type Check<'a> = dyn Fn(&[u8]) -> Result<()> + Send + Sync + 'a;

/// The check of an artifact named by its hash: its bytes hash to `hash`.
pub fn hashes_to(hash: Digest) -> impl Fn(&[u8]) -> Result<()> + Send + Sync {
	move |bytes| {
		let actual = digest_bytes(bytes);
		if actual != hash {
			bail!("its bytes hash to {}", hex(&actual));
		}
		Ok(())
	}
}

/// Parses 64 hex digits (an optional `0x` first) into a digest.
pub fn parse_digest(text: &str) -> Option<Digest> {
	let text = text.strip_prefix("0x").unwrap_or(text);
	let bytes = hex::decode(text).ok()?;
	bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn stored_bytes_come_back_and_corruption_is_refused() {
		let dir = std::env::temp_dir().join(format!("touchstone-store-{}", std::process::id()));
		let store = Store::open(&dir).unwrap();
		let hash = store.put(b"weights").unwrap();
		assert_eq!(hash, digest_bytes(b"weights"));
		assert_eq!(store.get(&hash).unwrap(), b"weights");
		assert_eq!(store.list(), vec![hash]);
		std::fs::write(store.path(&hash), b"weightz").unwrap();
		let error = store.get(&hash).unwrap_err().to_string();
		assert!(error.contains("corrupt"), "{error}");
		assert!(store.get(&[7; 32]).unwrap_err().to_string().contains("not in the local store"));
		std::fs::remove_dir_all(&dir).unwrap();
	}
}

/// Writes `bytes` to `path` through a file beside it renamed over it, so a crash leaves
/// the old file or the new one, never half of one.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
	let writing = path.with_extension("writing");
	std::fs::write(&writing, bytes).with_context(|| format!("cannot write {}", writing.display()))?;
	std::fs::rename(&writing, path).with_context(|| format!("cannot write {}", path.display()))
}

//! The local content-addressed artifact store: datasets, initial weights, checkpoints and
//! final models, each a file named by the BLAKE3 of its bytes (its content hash,
//! [`touchstone_kernels::proof::content`]); and units' trace
//! manifests, each named by the trace root its state hashes build.
//!
//! Every read checks the bytes against their name before handing them out, so a file
//! damaged on disk is an error, never a silent wrong model.
//!
//! Beside the artifacts, a ledger notes what each is to which job ([`Kind`]), one file a
//! job under `artifacts/ledger/`: what decides whether an artifact is announced to the
//! network and how long it is kept ([`crate::retention`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::content::{content_hash, group_count, group_len, group_value, GROUP};
use touchstone_kernels::proof::hash::Digest;
use touchstone_primitives::JobId;

/// What an artifact is to a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
	/// The job's dataset.
	Dataset,
	/// The job's initial weights.
	Weights,
	/// A checkpoint inside a unit: asked for by its verifiers and challengers only, who
	/// reach the solver through the endpoint it advertises.
	Checkpoint,
	/// A unit's trace manifest, which its verifiers check their samples against.
	Manifest,
	/// A unit's final model: the next step range starts from it, and the submitter fetches
	/// the job's result by it.
	Model,
}

impl Kind {
	const ALL: [Kind; 5] = [Kind::Dataset, Kind::Weights, Kind::Checkpoint, Kind::Manifest, Kind::Model];

	fn name(self) -> &'static str {
		match self {
			Kind::Dataset => "dataset",
			Kind::Weights => "weights",
			Kind::Checkpoint => "checkpoint",
			Kind::Manifest => "manifest",
			Kind::Model => "model",
		}
	}

	fn parse(name: &str) -> Option<Self> {
		Self::ALL.into_iter().find(|kind| kind.name() == name)
	}

	/// Whether the network is told this node provides it. Checkpoints are not: a job's
	/// solver announces a few a segment, which would fill the DHT, and those who ask for
	/// them (its verifiers and challengers) dial the solver's advertised endpoint.
	pub fn announced(self) -> bool {
		self != Kind::Checkpoint
	}
}

/// What the ledger notes of each job: its artifacts, by kind.
pub type Notes = BTreeMap<JobId, BTreeSet<(Kind, Digest)>>;

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
		let hash = content_hash(bytes);
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

	/// Notes that `hash` is a `kind` of job `job`. A note that cannot be written is
	/// logged: the artifact is then kept and announced as one the ledger does not know.
	pub fn note(&self, job: JobId, kind: Kind, hash: &Digest) {
		let dir = self.ledger_dir();
		let write = || -> std::io::Result<()> {
			std::fs::create_dir_all(&dir)?;
			let mut file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(job.to_string()))?;
			// One write a line: appends from several tasks do not interleave within it.
			file.write_all(format!("{} {}\n", kind.name(), hex(hash)).as_bytes())
		};
		if let Err(error) = write() {
			tracing::warn!(job, "cannot note artifact {} in the ledger: {error}", hex(hash));
		}
	}

	/// What the ledger notes, by job. Lines it cannot read are skipped.
	pub fn notes(&self) -> Notes {
		let Ok(entries) = std::fs::read_dir(self.ledger_dir()) else { return Notes::new() };
		let mut notes = Notes::new();
		for entry in entries.filter_map(|entry| entry.ok()) {
			let Some(job) = entry.file_name().to_str().and_then(|name| name.parse::<JobId>().ok()) else { continue };
			let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
			let lines = text.lines().filter_map(|line| {
				let (kind, hash) = line.split_once(' ')?;
				Some((Kind::parse(kind)?, parse_digest(hash)?))
			});
			notes.entry(job).or_default().extend(lines);
		}
		notes
	}

	/// Replaces what the ledger notes of `job` (nothing: its file goes), atomically.
	pub fn rewrite_notes(&self, job: JobId, kept: &BTreeSet<(Kind, Digest)>) -> Result<()> {
		let path = self.ledger_dir().join(job.to_string());
		if kept.is_empty() {
			return match std::fs::remove_file(&path) {
				Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error).with_context(|| format!("cannot remove {}", path.display())),
				_ => Ok(()),
			};
		}
		let text: String = kept.iter().map(|(kind, hash)| format!("{} {}\n", kind.name(), hex(hash))).collect();
		write_atomically(&path, text.as_bytes())
	}

	/// Where the outline of artifact `name` is kept once computed ([`Store::outline`]).
	fn outline_path(&self, name: &Digest) -> PathBuf {
		self.dir.join(format!("{}.outline", hex(name)))
	}

	/// The length and outline of the artifact stored under `name`
	/// ([`touchstone_kernels::proof::content`]): from beside it, or else computed from its
	/// bytes a group at a time and kept. What peers ask for before its groups.
	pub fn outline(&self, name: &Digest) -> Result<(u64, Vec<Digest>)> {
		let file = std::fs::File::open(self.path(name)).with_context(|| format!("artifact {} is not in the local store", hex(name)))?;
		let len = file.metadata()?.len();
		if group_count(len) == 1 {
			return Ok((len, Vec::new()));
		}
		if let Ok(kept) = std::fs::read(self.outline_path(name)) {
			let values: Vec<Digest> = kept.chunks_exact(32).filter_map(|value| value.try_into().ok()).collect();
			if kept.len() % 32 == 0 && values.len() as u64 == group_count(len) {
				return Ok((len, values));
			}
		}
		let mut values = Vec::with_capacity(group_count(len) as usize);
		let mut bytes = vec![0u8; GROUP];
		for index in 0..group_count(len) {
			let group = &mut bytes[..group_len(len, index) as usize];
			std::os::unix::fs::FileExt::read_exact_at(&file, group, index * GROUP as u64)?;
			values.push(group_value(index, group));
		}
		self.save_outline(name, len, &values);
		Ok((len, values))
	}

	/// Keeps the outline of the artifact stored under `name`, if it has one (a fetch that
	/// verified it saves computing it again). One that cannot be written is computed again
	/// when next asked for.
	pub fn save_outline(&self, name: &Digest, len: u64, values: &[Digest]) {
		if group_count(len) > 1 {
			let _ = write_atomically(&self.outline_path(name), &values.concat());
		}
	}

	/// Deletes the partial files of transfers nothing has written to for `idle`: one given
	/// up (its artifact no longer wanted, or never offered again) would hold its disk for
	/// ever. Returns how many it deleted and the bytes they held on disk.
	pub fn remove_idle_partials(&self, idle: std::time::Duration) -> (usize, u64) {
		use std::os::unix::fs::MetadataExt;
		let Ok(entries) = std::fs::read_dir(&self.dir) else { return (0, 0) };
		let mut removed = (0, 0);
		for entry in entries.filter_map(|entry| entry.ok()) {
			if !entry.file_name().to_str().is_some_and(|name| name.ends_with(".partial")) {
				continue;
			}
			let Ok(meta) = entry.metadata() else { continue };
			let idle_for = meta.modified().ok().and_then(|modified| modified.elapsed().ok());
			if idle_for.is_some_and(|idle_for| idle_for >= idle) && std::fs::remove_file(entry.path()).is_ok() {
				removed.0 += 1;
				// Blocks, not the length: a partial file is sparse until its groups arrive.
				removed.1 += meta.blocks().saturating_mul(512);
			}
		}
		removed
	}

	/// Deletes the artifact `hash` and its outline: the bytes it held, or `None` if it was
	/// not here.
	pub fn remove(&self, hash: &Digest) -> Result<Option<u64>> {
		let path = self.path(hash);
		let _ = std::fs::remove_file(self.outline_path(hash));
		let Ok(meta) = std::fs::metadata(&path) else { return Ok(None) };
		std::fs::remove_file(&path).with_context(|| format!("cannot delete {}", path.display()))?;
		Ok(Some(meta.len()))
	}

	/// The artifacts to announce to the network: every one held but those the ledger
	/// notes only as kinds that are not announced ([`Kind::announced`]). One the ledger
	/// does not know (a submitter's dataset before its job exists) is announced.
	pub fn announced(&self) -> Vec<Digest> {
		let mut quiet = BTreeSet::new();
		let mut loud = BTreeSet::new();
		for (kind, hash) in self.notes().into_values().flatten() {
			if kind.announced() { loud.insert(hash) } else { quiet.insert(hash) };
		}
		self.list().into_iter().filter(|hash| loud.contains(hash) || !quiet.contains(hash)).collect()
	}

	fn ledger_dir(&self) -> PathBuf {
		self.dir.join("ledger")
	}

	/// Every artifact's hash.
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
		let actual = content_hash(bytes);
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
		assert_eq!(hash, content_hash(b"weights"));
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
	// Beside it, with a suffix: an artifact `<hash>` and its `<hash>.outline` write apart.
	let mut writing = path.as_os_str().to_owned();
	writing.push(".writing");
	let writing = std::path::PathBuf::from(writing);
	std::fs::write(&writing, bytes).with_context(|| format!("cannot write {}", writing.display()))?;
	std::fs::rename(&writing, path).with_context(|| format!("cannot write {}", path.display()))
}

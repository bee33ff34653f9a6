//! What a worker keeps: a job's artifacts are deleted once nothing on the chain can still
//! ask for them.
//!
//! The store's ledger ([`crate::store::Store::note`]) says which artifacts belong to which
//! job. Every [`SWEEP_EVERY`] blocks a solver or verifier reads where each of those jobs
//! stands ([`standings`]) and deletes ([`sweep`]):
//!
//! - for a job whose units are all final, and which no open dispute, summons or
//!   overturned proof names: its dataset, initial weights, checkpoints and trace
//!   manifests, and every file and folder the worker keeps per unit (its runs, a
//!   verifier's verdicts, checked marks, spliced runs and summons defences, a solver's
//!   secrets). Its units' final models stay: they are the job's result, which its
//!   submitter fetches.
//! - for a job gone from the chain (the chain removes a job `tasks.Retention`, an hour,
//!   after it finished), and which nothing names: everything, final models included.
//!
//! An artifact another job still keeps (the same dataset in two jobs) is not deleted, nor
//! is one the ledger does not know (kept from before the ledger, or a submitter's own
//! dataset). A transfer's partial file that nothing has written to for [`PARTIAL_IDLE`] is
//! deleted: a transfer that resumes does so within minutes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use touchstone_primitives::JobId;

use crate::chain::{runtime, AtBlock, Chain};
use crate::state::ChainState;
use crate::store::{Kind, Notes, Store};

/// How many blocks apart a worker sweeps its data directory (a minute at 3-second blocks).
pub const SWEEP_EVERY: u64 = 20;

/// How long a transfer's partial file may go unwritten before a sweep deletes it.
pub const PARTIAL_IDLE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Where a job stands, for what its artifacts are kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
	/// Units are still open, or a dispute, summons or overturned proof names the job:
	/// anything of it may be asked for.
	Open,
	/// Every unit is final and nothing names it: only its final models are asked for.
	Finished,
	/// The job is gone from the chain and nothing names it.
	Gone,
}

/// What a sweep deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
	/// Artifacts deleted from the store.
	pub artifacts: usize,
	/// Per-unit folders and files deleted (named `<job>-<unit>-…`).
	pub entries: usize,
	/// Partial files of transfers idle for [`PARTIAL_IDLE`] deleted.
	pub partials: usize,
	/// Bytes the artifacts and partial files held (the folders' are not counted).
	pub bytes: u64,
}

/// Where each of `jobs` stands at `at`, which should be a finalized block: a job
/// finished or gone there stays so on every chain built on it.
pub async fn standings(chain: &Chain, at: &AtBlock, jobs: impl IntoIterator<Item = JobId>) -> Result<BTreeMap<JobId, Standing>> {
	// The jobs a dispute (a summons is one) or an overturned proof names: the parties
	// answer from the unit's artifacts, and summonses are opened from an overturned proof.
	let mut named = BTreeSet::new();
	let mut disputes = at.storage().iter(runtime::storage().disputes().disputes(), ()).await?;
	while let Some(entry) = disputes.next().await {
		let dispute: crate::dispute::Dispute = crate::chain::decode(entry?.value().bytes())?;
		named.insert(dispute.job);
	}
	let mut overturned = at.storage().iter(runtime::storage().disputes().overturned(), ()).await?;
	while let Some(entry) = overturned.next().await {
		let proof: crate::dispute::OverturnedProof = crate::chain::decode(entry?.value().bytes())?;
		named.insert(proof.job);
	}
	// A job missing from a state that has not yet given out its id is not gone: the state
	// is older than the job (a node's first answers after a restart can be).
	let next_job = chain.next_job_id(at).await?;
	let mut standings = BTreeMap::new();
	for job_id in jobs {
		let standing = match at.job(job_id).await? {
			_ if named.contains(&job_id) => Standing::Open,
			Some(job) if job.is_finished() => Standing::Finished,
			Some(_) => Standing::Open,
			None if job_id >= next_job => Standing::Open,
			None => Standing::Gone,
		};
		standings.insert(job_id, standing);
	}
	Ok(standings)
}

/// Deletes what `standings` says no one can ask for any more (see the module's rules):
/// from `store`, whose ledger holds `notes`, and the per-unit folders and files (named
/// `<job>-<unit>-…`, the job first) in `unit_dirs`. A job missing from `standings` is kept
/// whole.
pub fn sweep(store: &Store, notes: &Notes, unit_dirs: &[PathBuf], standings: &BTreeMap<JobId, Standing>) -> Result<Swept> {
	let standing = |job: &JobId| standings.get(job).copied().unwrap_or(Standing::Open);
	let kept_by = |job: &JobId, kind: Kind| match standing(job) {
		Standing::Open => true,
		Standing::Finished => kind == Kind::Model,
		Standing::Gone => false,
	};
	// Whatever any job keeps stays, whichever other job let it go.
	let kept: BTreeSet<_> =
		notes.iter().flat_map(|(job, entries)| entries.iter().filter(|(kind, _)| kept_by(job, *kind)).map(|(_, hash)| *hash)).collect();
	let mut swept = Swept::default();
	let (partials, bytes) = store.remove_idle_partials(PARTIAL_IDLE);
	swept.partials += partials;
	swept.bytes += bytes;
	for (job, entries) in notes {
		if standing(job) == Standing::Open {
			continue;
		}
		for (_, hash) in entries.iter().filter(|(kind, hash)| !kept_by(job, *kind) && !kept.contains(hash)) {
			if let Some(freed) = store.remove(hash)? {
				swept.artifacts += 1;
				swept.bytes += freed;
			}
		}
		let left: BTreeSet<_> = entries.iter().filter(|(kind, _)| kept_by(job, *kind)).copied().collect();
		// A finished job swept before keeps its models: its ledger is not written again.
		if left != *entries {
			store.rewrite_notes(*job, &left)?;
		}
	}
	for dir in unit_dirs {
		let Ok(entries) = std::fs::read_dir(dir) else { continue };
		for entry in entries.filter_map(|entry| entry.ok()) {
			let name = entry.file_name();
			// Names that do not start with a job (a folder of such entries) are not a unit's.
			let Some(job) = name.to_str().and_then(|name| name.split('-').next()).and_then(|job| job.parse::<JobId>().ok()) else {
				continue;
			};
			if !standings.get(&job).is_some_and(|standing| *standing != Standing::Open) {
				continue;
			}
			let path = entry.path();
			let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
			removed.with_context(|| format!("cannot delete {}", path.display()))?;
			swept.entries += 1;
		}
	}
	Ok(swept)
}

/// A role's sweeps: one every [`SWEEP_EVERY`] blocks, of the artifact store and of the
/// folders the role keeps per-unit entries in.
#[derive(Clone, Debug)]
pub struct Sweeps {
	last: Option<u64>,
	unit_dirs: Vec<PathBuf>,
}

impl Sweeps {
	/// The sweeps of a role that keeps per-unit folders and files (named `<job>-<unit>-…`)
	/// in `unit_dirs`.
	pub fn over(unit_dirs: Vec<PathBuf>) -> Self {
		Self { last: None, unit_dirs }
	}

	/// Sweeps `store` and the role's per-unit entries if [`SWEEP_EVERY`] blocks have passed
	/// since the last sweep (or since the role's first pass), by the pass's block `now`,
	/// reading the chain at its finalized block: what is deleted cannot come back. A failure
	/// is logged: the next sweep tries again, and nothing a role owes waits on this.
	pub async fn sweep_if_due(&mut self, chain: &Chain, now: u64, store: &Store) {
		// Not at a role's first pass: a restarted worker sweeps once it has followed the
		// chain for a while, not on the first state its node gives it.
		let last = *self.last.get_or_insert(now);
		if now < last.saturating_add(SWEEP_EVERY) {
			return;
		}
		self.last = Some(now);
		let outcome = async {
			let at = &chain.at().await?;
			let notes = store.notes();
			if notes.is_empty() {
				return Ok(Swept::default());
			}
			let standings = standings(chain, at, notes.keys().copied()).await?;
			tracing::debug!(block = at.block_number(), ?standings, "retention: where the jobs in the ledger stand");
			let (store, unit_dirs) = (store.clone(), self.unit_dirs.clone());
			tokio::task::spawn_blocking(move || sweep(&store, &notes, &unit_dirs, &standings)).await.context("the sweep's thread failed")?
		}
		.await;
		match outcome {
			Ok(swept) if swept != Swept::default() => tracing::info!(
				artifacts = swept.artifacts,
				entries = swept.entries,
				partials = swept.partials,
				mib = swept.bytes as f64 / (1u64 << 20) as f64,
				"retention: deleted what no open unit, round or dispute can still ask for"
			),
			Ok(_) => {},
			Err(error) => tracing::warn!("retention: {error:#}"),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	/// A finished job keeps its final models and loses the rest, unless an open job
	/// shares it; a gone job loses everything; an open job, or one the chain says nothing
	/// of, keeps everything; unknown artifacts stay.
	#[test]
	fn a_job_keeps_what_can_still_be_asked_for_and_loses_the_rest() {
		let base = std::env::temp_dir().join(format!("touchstone-retention-{}", std::process::id()));
		let _ = std::fs::remove_dir_all(&base);
		let store = Store::open(&base).unwrap();
		let units = base.join("units");
		let put = |bytes: &[u8]| store.put(bytes).unwrap();
		let (shared_data, data, checkpoint, manifest, model) = (put(b"shared"), put(b"data"), put(b"ckpt"), put(b"manifest"), put(b"model"));
		let (gone_model, open_checkpoint, unknown) = (put(b"gone model"), put(b"open ckpt"), put(b"unknown"));
		// Job 1 finished, job 2 gone, job 3 open, job 4 not asked about.
		store.note(1, Kind::Dataset, &shared_data);
		store.note(1, Kind::Dataset, &data);
		store.note(1, Kind::Checkpoint, &checkpoint);
		store.note(1, Kind::Manifest, &manifest);
		store.note(1, Kind::Model, &model);
		store.note(2, Kind::Model, &gone_model);
		store.note(2, Kind::Checkpoint, &model);
		store.note(3, Kind::Dataset, &shared_data);
		store.note(3, Kind::Checkpoint, &open_checkpoint);
		store.note(4, Kind::Checkpoint, &checkpoint);
		for folder in ["1-0-aa", "2-3-bb", "3-0-cc", "4-1-dd"] {
			std::fs::create_dir_all(units.join(folder)).unwrap();
			std::fs::write(units.join(folder).join("records.txt"), b"0 1.0").unwrap();
		}
		// A verifier's verdict files beside a folder of spliced runs, and a solver's secrets.
		let verdicts = base.join("verdicts");
		let spliced = verdicts.join("spliced");
		std::fs::create_dir_all(spliced.join("1-0-ee")).unwrap();
		std::fs::create_dir_all(spliced.join("3-1-ff")).unwrap();
		for file in ["1-0-aa", "2-3-bb-escalation", "3-0-cc", "2-3.forced"] {
			std::fs::write(verdicts.join(file), b"salt").unwrap();
		}
		// A transfer given up two days ago, and one that wrote a moment ago.
		let (stale, fresh) = (store.partial_path(&[1; 32]), store.partial_path(&[2; 32]));
		std::fs::write(&stale, b"").unwrap();
		let two_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 24 * 3600);
		std::fs::File::options().write(true).open(&stale).unwrap().set_modified(two_days_ago).unwrap();
		std::fs::write(&fresh, b"half").unwrap();
		let standings = BTreeMap::from([(1, Standing::Finished), (2, Standing::Gone), (3, Standing::Open)]);
		let dirs = [units.clone(), verdicts.clone(), spliced.clone()];
		let swept = sweep(&store, &store.notes(), &dirs, &standings).unwrap();
		assert_eq!(swept.partials, 1);
		assert!(!stale.exists() && fresh.exists(), "only the idle transfer's partial file goes");

		assert_eq!(swept.entries, 6, "the finished and the gone job's folders and files");
		assert!(!units.join("1-0-aa").exists() && !units.join("2-3-bb").exists());
		assert!(units.join("3-0-cc").exists() && units.join("4-1-dd").exists());
		assert!(!spliced.join("1-0-ee").exists() && spliced.join("3-1-ff").exists());
		assert!(!verdicts.join("1-0-aa").exists() && !verdicts.join("2-3-bb-escalation").exists());
		assert!(!verdicts.join("2-3.forced").exists() && verdicts.join("3-0-cc").exists());
		assert!(spliced.exists(), "a folder whose name names no job stays");
		assert!(store.contains(&model), "a finished job's result, though the gone job noted it too");
		assert!(store.contains(&shared_data), "an open job's dataset");
		assert!(store.contains(&checkpoint), "job 4, not asked about, keeps it");
		assert!(store.contains(&open_checkpoint) && store.contains(&unknown));
		assert!(!store.contains(&data) && !store.contains(&manifest) && !store.contains(&gone_model));
		assert_eq!(swept.artifacts, 3);
		assert_eq!(swept.bytes, (b"data".len() + b"manifest".len() + b"gone model".len()) as u64);
		let notes = store.notes();
		assert_eq!(notes[&1], BTreeSet::from([(Kind::Model, model)]), "the ledger keeps what is kept");
		assert!(!notes.contains_key(&2), "a gone job leaves the ledger");
		assert_eq!(notes[&3].len(), 2);

		// Checkpoints are served, not announced; an artifact also noted as announced, or
		// not noted at all, is announced.
		let announced: BTreeSet<_> = store.announced().into_iter().collect();
		assert!(!announced.contains(&open_checkpoint) && !announced.contains(&checkpoint));
		assert!(announced.contains(&model) && announced.contains(&shared_data) && announced.contains(&unknown));

		// A second sweep finds nothing more to delete.
		assert_eq!(sweep(&store, &store.notes(), &dirs, &standings).unwrap(), Swept::default());
		std::fs::remove_dir_all(&base).unwrap();
	}
}

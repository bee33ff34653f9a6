//! Forced errors, the solver's side. When it takes a unit the solver commits the hash of a
//! fresh secret; the chain records randomness a block later, and the two decide whether
//! the unit is forced ([`touchstone_primitives::forced_error`]). A forced solver still
//! trains the unit honestly, then commits a proof whose trace is wrong at one step on
//! purpose, and serves that trace's manifest, so the verifiers sampling that step find a
//! mismatch. Once the verifiers have committed it reveals the secret with the honest proof,
//! which replaces the forced one; the verifiers that caught the error are paid from the
//! jackpot, and nobody is slashed.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use codec::{Decode, Encode};
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::chain::trace_leaf;
use touchstone_kernels::proof::merkle::MerkleTree;
use touchstone_primitives::referee::StateOpening;
use touchstone_primitives::{JobId, LearningProof, Segments, UnitIndex};

use crate::samples::TraceManifest;
use crate::store::Store;
use crate::train::UnitWork;

/// What the solver commits for `secret`: its BLAKE2-256 hash.
pub fn secret_hash(secret: &[u8; 32]) -> [u8; 32] {
	polkadot_sdk::sp_io::hashing::blake2_256(secret)
}

/// A unit whose committed proof is wrong on purpose, and what its solver reveals.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct ForcedUnit {
	/// The step whose state hash the committed proof gets wrong.
	pub step: u32,
	/// The honest proof, which replaces the forced one.
	pub honest: LearningProof,
	/// The honest proof's final-state opening.
	pub final_state: StateOpening,
}

/// Where a solver keeps its secrets and its forced units, so a restart loses neither: a
/// folder of its data directory, outside the artifact store (which is served to peers).
pub struct Secrets {
	dir: PathBuf,
}

impl Secrets {
	/// The folder `dir`, created if missing.
	pub fn open(dir: PathBuf) -> Result<Self> {
		std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
		Ok(Self { dir })
	}

	/// A fresh secret for a unit, from the operating system's randomness, saved before it
	/// is committed (without it the commitment cannot be revealed). Returns it and its hash.
	pub fn create(&self, job: JobId, unit: UnitIndex) -> Result<([u8; 32], [u8; 32])> {
		let mut secret = [0u8; 32];
		getrandom::getrandom(&mut secret).context("no randomness for the forced-error secret")?;
		let hash = secret_hash(&secret);
		let path = self.secret_path(job, unit, &hash);
		std::fs::write(&path, secret).with_context(|| format!("cannot write {}", path.display()))?;
		Ok((secret, hash))
	}

	/// The secret of a unit whose commitment is `hash`, if this solver made it.
	pub fn secret(&self, job: JobId, unit: UnitIndex, hash: &[u8; 32]) -> Option<[u8; 32]> {
		let bytes = std::fs::read(self.secret_path(job, unit, hash)).ok()?;
		let secret: [u8; 32] = bytes.try_into().ok()?;
		(secret_hash(&secret) == *hash).then_some(secret)
	}

	/// Keeps what a forced unit's reveal needs.
	pub fn save_forced(&self, job: JobId, unit: UnitIndex, forced: &ForcedUnit) -> Result<()> {
		let path = self.forced_path(job, unit);
		std::fs::write(&path, forced.encode()).with_context(|| format!("cannot write {}", path.display()))
	}

	/// The unit's forced proof's reveal, while its forced proof may stand.
	pub fn forced(&self, job: JobId, unit: UnitIndex) -> Option<ForcedUnit> {
		let bytes = std::fs::read(self.forced_path(job, unit)).ok()?;
		ForcedUnit::decode(&mut &bytes[..]).ok()
	}

	/// Forgets a forced unit once its honest proof stands.
	pub fn forget_forced(&self, job: JobId, unit: UnitIndex) {
		let _ = std::fs::remove_file(self.forced_path(job, unit));
	}

	fn secret_path(&self, job: JobId, unit: UnitIndex, hash: &[u8; 32]) -> PathBuf {
		self.dir.join(format!("{job}-{unit}-{}", hex(hash)))
	}

	fn forced_path(&self, job: JobId, unit: UnitIndex) -> PathBuf {
		self.dir.join(format!("{job}-{unit}.forced"))
	}
}

/// The step a forced proof gets wrong, chosen by `secret` among the steps whose state hash
/// no other part of the proof repeats: the first step of a segment of at least two steps
/// (so no checkpoint continues from it), and not the step before the unit's last (whose
/// hash the final-state opening names). `None` when the unit has no such step.
pub fn forced_step(work: &UnitWork, secret: &[u8; 32]) -> Option<u32> {
	let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
	let last = work.first_step.checked_add(work.steps)?.checked_sub(1)?;
	let candidates: Vec<u32> = (0..segments.count())
		.filter_map(|index| segments.range(index))
		.filter(|range| range.end.saturating_sub(range.start) >= 2 && range.start.saturating_add(1) < last)
		.map(|range| range.start)
		.collect();
	let pick = usize::from(secret[0]) % candidates.len().max(1);
	candidates.get(pick).copied()
}

/// The forced proof of the unit trained in `work`: the honest proof and opening with the
/// state hash after `step` made wrong. Its manifest is stored under its trace root, where
/// verifiers fetch it.
pub fn forced_proof(
	work: &UnitWork,
	store: &Store,
	honest: &LearningProof,
	honest_opening: &StateOpening,
	step: u32,
) -> Result<(LearningProof, StateOpening)> {
	let mut manifest = TraceManifest::of_unit(work)?;
	let position = step.checked_sub(work.first_step).context("the forced step is before the unit")? as usize;
	let hash = manifest.state_hashes.get_mut(position).context("the forced step is after the unit")?;
	hash[0] ^= 0xff;
	let tree = MerkleTree::new(manifest.state_hashes.iter().map(trace_leaf).collect()).map_err(|error| anyhow!("{error:?}"))?;
	let root = tree.root();
	store.put_as(&root, &manifest.encode())?;
	let opening = match honest_opening {
		StateOpening::Step { previous, state_root, batch_root, loss, .. } => StateOpening::Step {
			previous: *previous,
			state_root: *state_root,
			batch_root: *batch_root,
			loss: *loss,
			proof: tree.proof(manifest.state_hashes.len().saturating_sub(1)).map_err(|error| anyhow!("{error:?}"))?,
		},
		StateOpening::Anchor => bail!("a one-step unit cannot carry a forced error"),
	};
	Ok((LearningProof { trace_root: root.into(), ..*honest }, opening))
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::samples::tests::replay_against;
	use crate::train::{run_unit, tests::work};
	use std::sync::atomic::AtomicBool;
	use touchstone_kernels::CpuBackend;
	use touchstone_primitives::referee::{final_state_root, TraceCommitment};

	/// The forced proof is one the chain accepts (its final state opens against its trace)
	/// and differs from the honest one in its trace only; a verifier replaying the forced
	/// manifest finds the error in exactly the segment that holds the forced step.
	#[test]
	fn a_forced_proof_is_wrong_at_its_step_only_and_the_chain_accepts_it() {
		let base = std::env::temp_dir().join(format!("touchstone-forced-{}", std::process::id()));
		let unit = work(&base.join("unit"));
		let result = run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let store = Store::open(&base.join("store")).unwrap();
		// Segments 10..20, 20..30, 30..35; the last two steps are 33 and 34.
		let steps: Vec<u32> = (0..=255u8).filter_map(|byte| forced_step(&unit, &[byte; 32])).collect();
		assert!(steps.iter().all(|step| [10, 20, 30].contains(step)));
		assert!([10, 20, 30].iter().all(|step| steps.contains(step)));
		let (forced, opening) = forced_proof(&unit, &store, &result.proof, &result.final_state, 20).unwrap();
		assert_ne!(forced.trace_root, result.proof.trace_root);
		assert_eq!(LearningProof { trace_root: result.proof.trace_root, ..forced }, result.proof);
		let trace = TraceCommitment {
			trace_root: forced.trace_root.0,
			first_step: unit.first_step,
			steps: forced.steps,
			start_state_root: forced.start_state_root.0,
		};
		assert_eq!(final_state_root(&trace, &opening).unwrap(), forced.final_state_root.0);
		let root = forced.trace_root.0;
		let bytes = store.get_with(&root, &|bytes| TraceManifest::checked(bytes, &root).map(|_| ())).unwrap();
		let served = TraceManifest::checked(&bytes, &root).unwrap();
		assert_eq!(replay_against(&unit, &served), vec![None, Some(20), None]);
		std::fs::remove_dir_all(&base).unwrap();
	}
}

//! Forced errors, the solver's side. Once it has trained a unit the solver builds, beside
//! its honest proof, the same proof wrong at the step a fresh secret fixes
//! ([`touchstone_primitives::forced_step`]), and commits a hash binding the secret to both
//! trace roots ([`touchstone_primitives::forced_commitment`]). The chain records
//! randomness a block later; with the secret it decides which of the two proofs the solver
//! must commit ([`touchstone_primitives::forced_error`]). A forced solver commits the wrong
//! one and serves its manifest, so the verifiers sampling that step find a mismatch; once
//! they have committed it reveals the secret and the honest root, and the honest proof
//! replaces the forced one. The verifiers that caught the error are paid from the jackpot,
//! and nobody is slashed. Letting the unit time out after the randomness would cost the
//! unit's collateral, so the solver commits only once its proof is ready.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use codec::{Decode, Encode};
use touchstone_kernels::job::data::hex;
use touchstone_primitives::referee::BoundaryOpening;
use touchstone_primitives::{forced_commitment, JobId, LearningProof, Segments, UnitIndex};

use crate::samples::TraceManifest;
use crate::store::{write_atomically, Store};
use crate::train::UnitWork;

/// A secret and the two trace roots its commitment binds, as the solver keeps them for
/// the reveal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct BoundSecret {
	/// The secret.
	pub secret: [u8; 32],
	/// The honest proof's trace root.
	pub honest_root: [u8; 32],
	/// The forced proof's trace root (the honest one when the unit cannot be forced).
	pub forced_root: [u8; 32],
}

impl BoundSecret {
	/// What the solver commits: the hash binding the secret to both roots.
	pub fn commitment(&self) -> [u8; 32] {
		forced_commitment(&self.secret, &self.honest_root, &self.forced_root)
	}

	/// The root committed beside `standing`, which the reveal names.
	pub fn other_than(&self, standing: &[u8; 32]) -> [u8; 32] {
		if *standing == self.forced_root {
			self.honest_root
		} else {
			self.forced_root
		}
	}
}

/// A unit whose committed proof is wrong on purpose, and what its solver reveals.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct ForcedUnit {
	/// The step the committed proof gets wrong (its segment's record is wrong).
	pub step: u32,
	/// The honest proof, which replaces the forced one.
	pub honest: LearningProof,
	/// The honest proof's opening of its last boundary.
	pub final_state: BoundaryOpening,
}

/// Where a solver keeps its secrets and its forced units, so a restart loses neither: a
/// folder of its data directory, outside the artifact store (which is served to peers).
#[derive(Clone)]
pub struct Secrets {
	dir: PathBuf,
}

impl Secrets {
	/// The folder `dir`, created if missing.
	pub fn open(dir: PathBuf) -> Result<Self> {
		std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
		Ok(Self { dir })
	}

	/// The folder the secrets are kept in, one file per unit (`<job>-<unit>-…`).
	pub fn dir(&self) -> &std::path::Path {
		&self.dir
	}

	/// A fresh secret for a unit, from the operating system's randomness. Returns it; the
	/// caller binds it to the unit's roots and saves it with [`Secrets::save`].
	pub fn fresh() -> Result<[u8; 32]> {
		let mut secret = [0u8; 32];
		getrandom::getrandom(&mut secret).context("no randomness for the forced-error secret")?;
		Ok(secret)
	}

	/// Saves a bound secret before it is committed (without it the commitment cannot be
	/// revealed), written whole or not at all.
	pub fn save(&self, job: JobId, unit: UnitIndex, bound: &BoundSecret) -> Result<()> {
		write_atomically(&self.secret_path(job, unit, &bound.commitment()), &bound.encode())
	}

	/// The bound secret of a unit whose commitment is `hash`, if this solver made it.
	pub fn secret(&self, job: JobId, unit: UnitIndex, hash: &[u8; 32]) -> Option<BoundSecret> {
		let bytes = std::fs::read(self.secret_path(job, unit, hash)).ok()?;
		let bound = BoundSecret::decode(&mut &bytes[..]).ok()?;
		(bound.commitment() == *hash).then_some(bound)
	}

	/// Deletes the bound secret of the unit committed as `hash`, once its reveal is on chain:
	/// a secret made public must never be committed again ([`Secrets::saved_for`]).
	pub fn forget(&self, job: JobId, unit: UnitIndex, hash: &[u8; 32]) {
		let path = self.secret_path(job, unit, hash);
		if let Err(error) = std::fs::remove_file(&path) {
			if error.kind() != std::io::ErrorKind::NotFound {
				tracing::warn!(path = %path.display(), "a revealed secret is not deleted: {error}");
			}
		}
	}

	/// A bound secret saved for the unit whose honest traces have the root `honest_root`
	/// (any one, if several were), whether or not its commitment reached the chain.
	pub fn saved_for(&self, job: JobId, unit: UnitIndex, honest_root: &[u8; 32]) -> Option<BoundSecret> {
		let prefix = format!("{job}-{unit}-");
		let mut names: Vec<String> = std::fs::read_dir(&self.dir)
			.ok()?
			.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
			.filter(|name| name.strip_prefix(&prefix).is_some_and(|hash| hash.len() == 64 && hash.bytes().all(|byte| byte.is_ascii_hexdigit())))
			.collect();
		names.sort_unstable();
		names.into_iter().find_map(|name| {
			let bytes = std::fs::read(self.dir.join(&name)).ok()?;
			let bound = BoundSecret::decode(&mut &bytes[..]).ok()?;
			(bound.honest_root == *honest_root && name.ends_with(&hex(&bound.commitment()))).then_some(bound)
		})
	}

	/// Keeps what a forced unit's reveal needs.
	pub fn save_forced(&self, job: JobId, unit: UnitIndex, forced: &ForcedUnit) -> Result<()> {
		write_atomically(&self.forced_path(job, unit), &forced.encode())
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

/// The step a forced proof of the unit trained in `work` gets wrong under `secret`: the
/// chain's rule ([`touchstone_primitives::forced_step`]). `None` when the unit has no step
/// that can carry the error.
pub fn forced_step(work: &UnitWork, secret: &[u8; 32]) -> Option<u32> {
	touchstone_primitives::forced_step(secret, &Segments::new(work.first_step, work.steps, work.train.checkpoint_interval))
}

/// The forced proof of the unit trained in `work`: the honest proof with the record of
/// the segment that holds `step` made wrong (its state roots, the final one included,
/// stay right), and the opening of its last boundary. Its manifest is stored under its
/// segment root, where verifiers fetch it.
pub fn forced_proof(work: &UnitWork, store: &Store, honest: &LearningProof, step: u32) -> Result<(LearningProof, BoundaryOpening)> {
	let mut manifest = TraceManifest::of_unit(work)?;
	let segment = work.segments().of_step(step).context("the forced step is not in the unit")?;
	let (_, _, record) = manifest.boundaries.get_mut(segment as usize).context("the unit has no such segment")?;
	record[0] ^= 0xff;
	let boundaries = manifest
		.boundaries
		.iter()
		.map(|&(next_step, state_root, record)| touchstone_kernels::job::trace::Boundary { next_step, state_root, record })
		.collect();
	let unit = touchstone_kernels::referee::UnitBoundaries::new(boundaries).map_err(|error| anyhow!("{error:?}"))?;
	let root = unit.root();
	store.put_as(&root, &manifest.encode())?;
	let opening = unit.final_opening().context("the forced proof's last boundary")?;
	Ok((LearningProof { trace_root: root.into(), ..*honest }, opening))
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::samples::tests::replay_against;
	use crate::train::{run_unit, tests::work};
	use std::sync::atomic::AtomicBool;
	use touchstone_kernels::CpuBackend;
	use touchstone_primitives::referee::{unit_final_state_root, UnitCommitment};

	/// The forced proof is one the chain accepts (its final state opens at its last boundary)
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
		let (forced, opening) = forced_proof(&unit, &store, &result.proof, 20).unwrap();
		assert_ne!(forced.trace_root, result.proof.trace_root);
		assert_eq!(LearningProof { trace_root: result.proof.trace_root, ..forced }, result.proof);
		let commitment = UnitCommitment {
			root: forced.trace_root.0,
			first_step: unit.first_step,
			steps: forced.steps,
			interval: unit.train.checkpoint_interval,
			start_state_root: forced.start_state_root.0,
		};
		assert_eq!(unit_final_state_root(&commitment, &opening).unwrap(), forced.final_state_root.0);
		let root = forced.trace_root.0;
		let bytes = store.get_with(&root, &|bytes| TraceManifest::checked(bytes, &root).map(|_| ())).unwrap();
		let served = TraceManifest::checked(&bytes, &root).unwrap();
		assert_eq!(replay_against(crate::train::BackendKind::Cpu, &unit, &served), vec![None, Some(20), None]);
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// A secret saved for a unit's traces is found again by them (a restart whose
	/// commitment may still be on its way commits the same one), and only by them: not
	/// for other traces of the unit, another unit, or a file whose name is not its
	/// commitment.
	#[test]
	fn a_saved_secret_is_found_again_by_the_traces_it_is_bound_to() {
		let dir = std::env::temp_dir().join(format!("touchstone-saved-secrets-{}", std::process::id()));
		let secrets = Secrets::open(dir.clone()).unwrap();
		let bound = BoundSecret { secret: [1; 32], honest_root: [2; 32], forced_root: [3; 32] };
		assert_eq!(secrets.saved_for(4, 1, &[2; 32]), None);
		secrets.save(4, 1, &bound).unwrap();
		secrets.save(4, 1, &BoundSecret { honest_root: [9; 32], ..bound }).unwrap();
		assert_eq!(secrets.saved_for(4, 1, &[2; 32]), Some(bound));
		assert_eq!(secrets.saved_for(4, 1, &[5; 32]), None, "other traces");
		assert_eq!(secrets.saved_for(4, 2, &[2; 32]), None, "another unit");
		assert_eq!(secrets.saved_for(41, 1, &[2; 32]), None, "a job whose number starts alike");
		std::fs::remove_dir_all(&dir).unwrap();
		let secrets = Secrets::open(dir.clone()).unwrap();
		std::fs::write(dir.join(format!("4-1-{}", hex(&[7; 32]))), bound.encode()).unwrap();
		assert_eq!(secrets.saved_for(4, 1, &[2; 32]), None, "a file not named by its commitment");
		std::fs::remove_dir_all(&dir).unwrap();
	}
}

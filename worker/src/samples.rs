//! Sampled verification: what a solver serves about a proven unit besides its model files
//! (the trace manifest), and re-executing one checkpoint segment of the unit against it.
//!
//! The chain commits a unit's segment root: the Merkle root over its boundaries, one per
//! segment of the job's checkpoint grid (the state root there and the segment's record of
//! losses). The solver serves the unit's *trace manifest*: every boundary, which must
//! rebuild that root, and the content hashes of its checkpoints. The manifest is named by
//! the root in the artifact network, and checked by rebuilding the root, not by hashing its
//! bytes. A verifier re-executes a segment from the checkpoint before it, once the
//! checkpoint checks out against the manifest (its state's root is the manifest's boundary
//! there), or from the unit's chain-fixed start for the first segment. The segment it runs
//! must then end at the manifest's boundary. A lie shows only in the segment that holds
//! it: the segments after it start from the liar's own checkpoints and reproduce.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{anyhow, bail, ensure, Context, Result};
use codec::{Decode, Encode};
use touchstone_kernels::job::checkpoint::Checkpoint;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::distance::Distance;
use touchstone_kernels::job::trace::{state_root, Boundary, Trainer};
use touchstone_kernels::proof::chain::{boundary_leaf, ChainPoint};
use touchstone_kernels::proof::content::content_hash;
use touchstone_kernels::proof::hash::Digest;
use touchstone_kernels::proof::merkle;

use crate::train::{checkpoint_path, checkpoint_steps, reference_trainer, saved_boundaries, trainer_on, BackendKind, UnitWork};

/// What a solver serves about a unit it proved, under the unit's segment root.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct TraceManifest {
	/// Each segment's boundary, in order, as `(the step after it, the state root there,
	/// the segment's last record)`: their leaves build the segment root.
	pub boundaries: Vec<(u32, Digest, Digest)>,
	/// The unit's checkpoints, oldest first: the global step each resumes at, and the hash
	/// of its model file.
	pub checkpoints: Vec<(u32, Digest)>,
}

impl TraceManifest {
	/// The most bytes the manifest of a unit of `segments` segments can hold: a boundary
	/// and at most one checkpoint a segment, and the two lists' lengths.
	pub fn max_len(segments: u32) -> u64 {
		16 + 104 * u64::from(segments)
	}

	/// The manifest of the unit trained in `work.dir`: its saved boundaries, and the
	/// checkpoint files there whose state is the boundary's (a torn or stale file is left out).
	pub fn of_unit(work: &UnitWork) -> Result<Self> {
		let boundaries = saved_boundaries(&work.dir)?;
		let segments = work.segments().count() as usize;
		ensure!(boundaries.len() == segments, "the unit's boundaries do not cover its segments: it has not finished training");
		let mut checkpoints = Vec::new();
		for next_step in checkpoint_steps(&work.dir)?.into_iter().rev() {
			let Some(boundary) = boundaries.iter().find(|boundary| boundary.next_step == next_step) else { continue };
			let bytes = std::fs::read(checkpoint_path(&work.dir, next_step))?;
			let hash = content_hash(&bytes);
			let Ok(checkpoint) = Checkpoint::from_bytes(&bytes, &hash) else { continue };
			if state_root(&checkpoint.state).ok() == Some(boundary.state_root) {
				checkpoints.push((next_step, hash));
			}
		}
		let boundaries = boundaries.iter().map(|b| (b.next_step, b.state_root, b.record)).collect();
		Ok(Self { boundaries, checkpoints })
	}

	/// The segment root the boundaries build.
	pub fn trace_root(&self) -> Result<Digest> {
		let leaves = self.boundaries.iter().map(|(next_step, root, record)| boundary_leaf(*next_step, root, record)).collect();
		merkle::root(leaves).map_err(|error| anyhow!("{error:?}"))
	}

	/// Decodes a manifest and checks that it is the one of the proof with segment root
	/// `trace_root`.
	pub fn checked(bytes: &[u8], trace_root: &Digest) -> Result<Self> {
		let manifest = Self::decode(&mut &bytes[..]).context("not a trace manifest")?;
		let root = manifest.trace_root()?;
		ensure!(root == *trace_root, "its boundaries build the segment root {}, not {}", hex(&root), hex(trace_root));
		Ok(manifest)
	}

	/// The hash of the checkpoint that resumes at global step `next_step`, if the manifest
	/// names one.
	pub fn checkpoint(&self, next_step: u32) -> Option<Digest> {
		self.checkpoints.iter().find(|(step, _)| *step == next_step).map(|(_, hash)| *hash)
	}

	/// The proof's boundaries, in order.
	pub fn boundaries(&self) -> Vec<Boundary> {
		self.boundaries.iter().map(|&(next_step, state_root, record)| Boundary { next_step, state_root, record }).collect()
	}

	/// The boundary before global step `next_step`, if the manifest has one there.
	fn boundary(&self, next_step: u32) -> Option<Boundary> {
		self.boundaries
			.iter()
			.find(|(step, _, _)| *step == next_step)
			.map(|&(next_step, state_root, record)| Boundary { next_step, state_root, record })
	}
}

/// Where a segment of the unit in `work` starts from: the unit's own start for a segment
/// at its first step; otherwise the checkpoint `checkpoint` (its hash and bytes), which must
/// resume at `start` and agree with the manifest.
pub fn segment_start(
	work: &UnitWork,
	manifest: &TraceManifest,
	start: u32,
	checkpoint: Option<(&Digest, &[u8])>,
) -> Result<(Vec<Vec<f32>>, ChainPoint)> {
	if start == work.first_step {
		return Ok((work.start_state.clone(), ChainPoint::start(start)));
	}
	let (hash, bytes) = checkpoint.with_context(|| format!("the segment from step {start} needs the checkpoint taken there"))?;
	let checkpoint = Checkpoint::from_bytes(bytes, hash).map_err(|error| anyhow!("checkpoint {}: {error}", hex(hash)))?;
	let point = checkpoint.point;
	ensure!(point == ChainPoint::start(start), "checkpoint {} is not the boundary before step {start}", hex(hash));
	let boundary = manifest.boundary(start).context("the manifest has no boundary before the segment")?;
	let root = state_root(&checkpoint.state).map_err(|error| anyhow!("{error:?}"))?;
	if root != boundary.state_root {
		bail!("checkpoint {} holds another state than the one the proof commits before step {start}", hex(hash));
	}
	Ok((checkpoint.state, point))
}

/// The device exact-mode segments are re-executed on: the CPU reference, or wgpu, which is
/// bit-identical to it (libtorch is not, and is refused). A verifier keeps one: opening wgpu
/// compiles every kernel and runs its conformance self-test, which takes seconds, so the
/// open device is kept between segments.
pub struct ReplayDevice {
	kind: BackendKind,
	wgpu: std::sync::Mutex<Option<touchstone_kernels_wgpu::WgpuBackend>>,
}

impl ReplayDevice {
	/// A device of `kind`, opened when first used; libtorch is refused.
	pub fn new(kind: BackendKind) -> Result<Self> {
		if kind == BackendKind::Tch {
			bail!("libtorch is not bit-identical to the reference: exact-mode proofs are re-executed with --backend cpu or wgpu");
		}
		Ok(Self { kind, wgpu: std::sync::Mutex::new(None) })
	}

	/// Re-executes the segment `range` of the unit in `work` from `state` at `point`,
	/// comparing the boundary it ends at with the manifest's. Returns the boundary this run
	/// reached when it is not the manifest's (the segment does not reproduce), `None` when
	/// it is, or an error when stopped.
	pub fn replay(
		&self,
		work: &UnitWork,
		manifest: &TraceManifest,
		range: Range<u32>,
		(state, point): (Vec<Vec<f32>>, ChainPoint),
		stop: &AtomicBool,
	) -> Result<Option<Boundary>> {
		if self.kind != BackendKind::Wgpu {
			return replay_on(touchstone_kernels::CpuBackend, work, manifest, range, (state, point), stop).map(|(differs, _)| differs);
		}
		let kept = self.wgpu.lock().map_err(|_| anyhow!("the wgpu device's lock is poisoned"))?.take();
		let device = match kept {
			Some(device) => device,
			None => touchstone_kernels_wgpu::WgpuBackend::new().map_err(|error| {
				anyhow!("no usable GPU adapter: {error:?}. Install a Vulkan driver, or re-execute on the CPU with --backend cpu")
			})?,
		};
		let (differs, device) = replay_on(device, work, manifest, range, (state, point), stop)?;
		*self.wgpu.lock().map_err(|_| anyhow!("the wgpu device's lock is poisoned"))? = Some(device);
		Ok(differs)
	}
}

/// [`ReplayDevice::replay`] on `backend`, which it gives back.
fn replay_on<B: touchstone_kernels::Backend>(
	backend: B,
	work: &UnitWork,
	manifest: &TraceManifest,
	range: Range<u32>,
	(state, point): (Vec<Vec<f32>>, ChainPoint),
	stop: &AtomicBool,
) -> Result<(Option<Boundary>, B)> {
	ensure!(point.next_step == range.start, "the segment starts at step {}, its start state at {}", range.start, point.next_step);
	let mut trainer = trainer_on(backend, work, state, point)?;
	for step in range.clone() {
		if stop.load(Ordering::Relaxed) {
			bail!("stopped while re-executing step {step}");
		}
		trainer.step().map_err(|error| anyhow!("re-executing step {step} failed: {error:?}"))?;
	}
	let reached = trainer.close_segment().map_err(|error| anyhow!("the boundary after step {}: {error:?}", range.end))?;
	let differs = (manifest.boundary(range.end) != Some(reached)).then_some(reached);
	Ok((differs, trainer.into_backend()))
}

/// Tolerance mode: re-executes the steps `range` of the unit in `work` on the reference,
/// from `state` at `point` (the solver's checkpoint before it), and measures how far the
/// solver's checkpoint at the segment's end, `end` (its state, checked against the
/// manifest by [`segment_start`]), lies from the reference's state there.
pub fn measure_segment(
	work: &UnitWork,
	range: Range<u32>,
	(state, point): (Vec<Vec<f32>>, ChainPoint),
	end: &[Vec<f32>],
	stop: &AtomicBool,
) -> Result<Distance> {
	ensure!(point.next_step == range.start, "the segment starts at step {}, its start state at {}", range.start, point.next_step);
	let mut trainer = reference_trainer(work, state, point)?;
	for step in range {
		if stop.load(Ordering::Relaxed) {
			bail!("stopped while re-executing step {step}");
		}
		trainer.step().map_err(|error| anyhow!("re-executing step {step} failed: {error:?}"))?;
	}
	let reference = trainer.params().map_err(|error| anyhow!("{error:?}"))?;
	Distance::between(&parameters(end, reference.len())?, &reference).map_err(|error| anyhow!("{error:?}"))
}

/// Tolerance mode's profile of one segment: the distance between two executions of the
/// steps `range` of the unit in `work` from the same start (`state` at `point`, the
/// solver's checkpoint before it), on libtorch (the fast backend tolerance-mode solvers
/// train on, here on its CPU kernels) and on the reference. It is how far an honest run of
/// that segment lands from the reference: the chain sets a job's thresholds from its
/// verifiers' profiles.
pub fn profile_segment(
	work: &UnitWork,
	range: Range<u32>,
	(state, point): (Vec<Vec<f32>>, ChainPoint),
	stop: &AtomicBool,
) -> Result<Distance> {
	let mut torch = Trainer::resume(
		touchstone_kernels_tch::TchBackend::cpu(),
		&work.model,
		&work.train,
		work.data.clone(),
		state.clone(),
		point.clone(),
	)
	.map_err(|error| anyhow!("profiling failed: {error:?}"))?;
	if let Some(shard) = &work.shard {
		torch = torch.on_shard(shard.clone()).map_err(|error| anyhow!("profiling failed: {error:?}"))?;
	}
	for step in range.clone() {
		if stop.load(Ordering::Relaxed) {
			bail!("stopped while profiling step {step}");
		}
		torch.step().map_err(|error| anyhow!("profiling step {step} failed: {error:?}"))?;
	}
	let torch = torch.params().map_err(|error| anyhow!("profiling failed: {error:?}"))?;
	measure_segment(work, range, (state, point), &torch, stop)
}

/// The parameters of a state (parameters, then optimiser moments): its first `count`
/// tensors.
fn parameters(state: &[Vec<f32>], count: usize) -> Result<Vec<Vec<f32>>> {
	ensure!(state.len() >= count, "a state of {} tensors has no {count} parameters", state.len());
	Ok(state[..count].to_vec())
}

/// Writes the manifest of the finished unit in `work` where a solver serves it: in its
/// artifact store, named by the unit's trace root. Returns the root.
pub fn write_manifest(work: &UnitWork, store: &crate::store::Store) -> Result<Digest> {
	let manifest = TraceManifest::of_unit(work)?;
	let root = manifest.trace_root()?;
	store.put_as(&root, &manifest.encode())?;
	Ok(root)
}

#[cfg(test)]
pub(crate) mod tests {
	use super::*;
	use crate::train::{run_unit, tests::work};
	#[cfg(feature = "test-equipment")]
	use touchstone_kernels::job::fault::Fault;
	use touchstone_kernels::CpuBackend;
	use touchstone_primitives::{Segments, VerificationMode};

	/// A manifest holds a boundary and a checkpoint a segment, inside its bound.
	#[test]
	fn a_manifest_fits_the_bound_its_segments_give() {
		for segments in [1u32, 7, 300] {
			let n = segments as usize;
			let manifest = TraceManifest { boundaries: vec![(1, [1; 32], [2; 32]); n], checkpoints: vec![(1, [3; 32]); n] };
			assert!(manifest.encode().len() as u64 <= TraceManifest::max_len(segments), "{segments} segments");
		}
	}
	use polkadot_sdk::sp_runtime::FixedU64;

	/// Replays every segment of the unit trained in `work` against its own manifest, each
	/// from its checkpoint; returns the first step each one fails at.
	fn replay_all(work: &UnitWork) -> Vec<Option<u32>> {
		replay_against(BackendKind::Cpu, work, &TraceManifest::of_unit(work).unwrap())
	}

	/// Replays every segment of the unit trained in `work` against `manifest` on `backend`,
	/// each from its checkpoint; returns the first step of each one that fails.
	pub(crate) fn replay_against(backend: BackendKind, work: &UnitWork, manifest: &TraceManifest) -> Vec<Option<u32>> {
		let device = ReplayDevice::new(backend).unwrap();
		let manifest = manifest.clone();
		let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
		(0..segments.count())
			.map(|index| {
				let range = segments.range(index).unwrap();
				let bytes = manifest.checkpoint(range.start).map(|hash| (hash, std::fs::read(checkpoint_path(&work.dir, range.start)).unwrap()));
				let (state, point) =
					segment_start(work, &manifest, range.start, bytes.as_ref().map(|(hash, bytes)| (hash, &bytes[..]))).unwrap();
				device.replay(work, &manifest, range.clone(), (state, point), &AtomicBool::new(false)).unwrap().map(|_| range.start)
			})
			.collect()
	}

	/// An honest unit's manifest rebuilds its segment root and every segment reproduces from
	/// its checkpoint; a liar's own manifest shows its lie in exactly the segment that holds
	/// it, since the later segments start from the liar's checkpoints.
	#[test]
	#[cfg(feature = "test-equipment")]
	fn a_lie_shows_only_in_the_segment_that_holds_it() {
		let base = std::env::temp_dir().join(format!("touchstone-samples-{}", std::process::id()));
		let honest = work(&base.join("honest"));
		let proof = run_unit(CpuBackend, &honest, &AtomicBool::new(false), |_| {}).unwrap().unwrap().proof;
		let manifest = TraceManifest::of_unit(&honest).unwrap();
		assert_eq!(manifest.trace_root().unwrap(), proof.trace_root.0);
		assert_eq!(manifest.checkpoints.iter().map(|(step, _)| *step).collect::<Vec<_>>(), vec![20, 30, 35]);
		assert_eq!(TraceManifest::checked(&manifest.encode(), &proof.trace_root.0).unwrap(), manifest);
		assert!(TraceManifest::checked(&manifest.encode(), &[7; 32]).is_err());
		// Segments 10..20, 20..30, 30..35.
		assert_eq!(replay_all(&honest), vec![None, None, None]);

		let mut liar = work(&base.join("liar"));
		liar.fault = Some(Fault::Output { step: 24, operator: 1, output: 0, element: 0, bit: 20 });
		run_unit(CpuBackend, &liar, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		// Re-executed without the fault, as a verifier does.
		liar.fault = None;
		assert_eq!(replay_all(&liar), vec![None, Some(20), None]);
		// On wgpu (lavapipe here), bit-identical to the reference, the same; libtorch, which
		// is not, is refused.
		let manifest = TraceManifest::of_unit(&liar).unwrap();
		assert_eq!(replay_against(BackendKind::Wgpu, &liar, &manifest), vec![None, Some(20), None]);
		assert_eq!(replay_against(BackendKind::Wgpu, &honest, &TraceManifest::of_unit(&honest).unwrap()), vec![None, None, None]);
		assert!(ReplayDevice::new(BackendKind::Tch).err().unwrap().to_string().contains("not bit-identical"));
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// Measures every segment of the unit trained in `work` against its own manifest, each
	/// from the checkpoint before it to the checkpoint after it, as a tolerance-mode
	/// verifier does.
	fn measure_all(work: &UnitWork) -> Vec<Distance> {
		let manifest = TraceManifest::of_unit(work).unwrap();
		let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
		let state_at = |step: u32| {
			let bytes = manifest.checkpoint(step).map(|hash| (hash, std::fs::read(checkpoint_path(&work.dir, step)).unwrap()));
			segment_start(work, &manifest, step, bytes.as_ref().map(|(hash, bytes)| (hash, &bytes[..]))).unwrap()
		};
		(0..segments.count())
			.map(|index| {
				let range = segments.range(index).unwrap();
				let (end, _) = state_at(range.end);
				measure_segment(work, range.clone(), state_at(range.start), &end, &AtomicBool::new(false)).unwrap()
			})
			.collect()
	}

	/// Profiles every segment of the unit trained in `work`, from the solver's checkpoints.
	fn profile_all(work: &UnitWork) -> Vec<Distance> {
		let manifest = TraceManifest::of_unit(work).unwrap();
		let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
		(0..segments.count())
			.map(|index| {
				let range = segments.range(index).unwrap();
				let bytes =
					manifest.checkpoint(range.start).map(|hash| (hash, std::fs::read(checkpoint_path(&work.dir, range.start)).unwrap()));
				let start = segment_start(work, &manifest, range.start, bytes.as_ref().map(|(hash, bytes)| (hash, &bytes[..]))).unwrap();
				profile_segment(work, range, start, &AtomicBool::new(false)).unwrap()
			})
			.collect()
	}

	/// Tolerance mode, on real training: a unit trained on the reference measures zero in
	/// every segment; one trained on libtorch measures small, non-zero distances within the
	/// thresholds its profile sets; a wrong step (a flipped bit in one operator output) puts
	/// its segment, and only it, beyond them.
	#[test]
	#[cfg(feature = "test-equipment")]
	fn segments_measure_their_distance_to_the_reference() {
		let base = std::env::temp_dir().join(format!("touchstone-measure-{}", std::process::id()));
		let reference = work(&base.join("reference"));
		run_unit(CpuBackend, &reference, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		assert!(measure_all(&reference).iter().all(|d| d.l2 == 0.0 && d.linf == 0.0), "{:?}", measure_all(&reference));

		let torch = work(&base.join("tch"));
		crate::train::run_unit_on(crate::train::BackendKind::Tch, &torch, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let measured = measure_all(&torch);
		assert_eq!(measured.len(), 3);
		// A verifier's profile covers the segments it measures: from the same start, on
		// libtorch and on the reference. The solver ran libtorch on this machine too, so its
		// segments land exactly as far from the reference as the profile's runs do.
		let profiles = profile_all(&torch);
		assert!(profiles.iter().all(|profile| profile.l2 > 0.0), "{profiles:?}");
		assert_eq!(measured, profiles);
		let profile = profiles.iter().fold(Distance { l2: 0.0, linf: 0.0, cosine: 0.0 }, |a, b| Distance {
			l2: a.l2.max(b.l2),
			linf: a.linf.max(b.linf),
			cosine: a.cosine.max(b.cosine),
		});
		// The thresholds the chain sets from such profiles: twice the median
		// (`ToleranceMargin` in the runtime).
		let within = |d: &Distance| d.l2 <= 2.0 * profile.l2 && d.linf <= 2.0 * profile.linf && d.cosine <= 2.0 * profile.cosine;
		for distance in &measured {
			assert!(within(distance), "{distance:?} against {profile:?}");
		}

		let mut liar = work(&base.join("liar"));
		// The top exponent bit of a first-layer output at step 24.
		liar.fault = Some(Fault::Output { step: 24, operator: 1, output: 0, element: 0, bit: 30 });
		run_unit(CpuBackend, &liar, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		liar.fault = None;
		let measured = measure_all(&liar);
		assert_eq!(measured[0].l2, 0.0);
		assert_eq!(measured[2].l2, 0.0);
		assert!(!within(&measured[1]), "{:?} against {profile:?}", measured[1]);

		// The solver's `--inject-fault` in tolerance mode, on libtorch at the unit's last
		// step (a weight's top exponent bit): training stays finite, and the last segment
		// lands far beyond the thresholds.
		let mut gross = work(&base.join("gross"));
		let mode = VerificationMode::Tolerance {
			max_l2: FixedU64::from_u32(1),
			max_linf: FixedU64::from_u32(1),
			max_cosine_distance: FixedU64::from_rational(1, 100),
		};
		gross.fault = Some(crate::solver::injected_fault(34, &mode, &gross).unwrap());
		crate::train::run_unit_on(crate::train::BackendKind::Tch, &gross, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		gross.fault = None;
		let measured = measure_all(&gross);
		assert!(within(&measured[0]) && within(&measured[1]), "{measured:?} against {profile:?}");
		assert!(!within(&measured[2]) && measured[2].l2 > 1e30, "{:?}", measured[2]);
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// A checkpoint that is not the boundary the segment starts at, or holds another state
	/// than the proof commits there, is refused before anything is re-executed.
	#[test]
	fn a_checkpoint_that_does_not_fit_the_trace_is_refused() {
		let base = std::env::temp_dir().join(format!("touchstone-samples-bad-{}", std::process::id()));
		let unit = work(&base.join("unit"));
		run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let manifest = TraceManifest::of_unit(&unit).unwrap();
		let load = |step| Checkpoint::from_bytes(&std::fs::read(checkpoint_path(&unit.dir, step)).unwrap(), &manifest.checkpoint(step).unwrap()).unwrap();
		let start = |checkpoint: &Checkpoint, at: u32| {
			let bytes = checkpoint.to_bytes().unwrap();
			segment_start(&unit, &manifest, at, Some((&content_hash(&bytes), &bytes))).map(|_| ())
		};
		assert!(start(&load(20), 20).is_ok());
		// Another segment's checkpoint.
		assert!(start(&load(30), 20).unwrap_err().to_string().contains("is not the boundary before step 20"));
		// The right chain point over another state.
		let mut altered = load(20);
		altered.state[0][0] += 1.0;
		assert!(start(&altered, 20).unwrap_err().to_string().contains("holds another state"));
		// A chain point in the middle of a segment (a record carried over).
		let mut detached = load(20);
		detached.point.record = [9; 32];
		assert!(start(&detached, 20).unwrap_err().to_string().contains("is not the boundary before step 20"));
		std::fs::remove_dir_all(&base).unwrap();
	}
}

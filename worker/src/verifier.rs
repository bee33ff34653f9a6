//! The verifier role: register and bond as a verifier; in every round the chain draws this
//! node for, re-execute the checkpoint segments the chain names for it
//! (`VerificationApi::samples`), commit the verdict (`Match`, or `Mismatch` with this
//! node's own trace root), reveal it once reveals open, and play to its end the dispute a
//! mismatch opens. The challenger role (`challenge`) re-executes a whole unit without a
//! draw: it disputes one proof that does not reproduce, and plays the dispute to its end.
//!
//! A sample is re-executed on the CPU reference (the bit-exact backend every exact-mode
//! job is judged by) from the solver's checkpoint before it, checked against the unit's
//! trace manifest ([`crate::samples`]). When every sample reproduces the verdict is
//! `Match`. When one does not, the `Mismatch` names the proof's boundaries with the one the
//! verifier reached at that segment's end in its place ([`Verifier::splice`]): its dispute
//! then lands on that segment and is played from the solver's own checkpoint before it, so
//! a verdict costs the samples, never the whole unit, and fits its commit period however
//! long the unit. Only when the solver does not serve what the samples need does the
//! verifier re-execute the whole unit from its chain-fixed start, for a trace root of its
//! own over it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use codec::{Decode, Encode};
use pallet_touchstone_verification::{AttestationState, RoundKind, Verdict};
use polkadot_sdk::sp_runtime::FixedU64;
use touchstone_kernels::job::distance::Distance;
use touchstone_kernels::job::trace::Boundary;
use subxt_signer::sr25519::Keypair;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::chain::ChainPoint;
use touchstone_kernels::proof::hash::digest_bytes;
use touchstone_kernels::referee::UnitBoundaries;
use touchstone_primitives::{JobId, Role, Segments, UnitIndex, UnitState, VerificationMode};

use crate::chain::{decode, runtime, AccountId, AtBlock, BestBlocks, Chain, Heartbeat, Job, Round, Settled, WorkUnit};
use crate::state::{ChainState, Transactions};
use crate::dispute::{Dispute, Party};
use crate::hardware::{self, Detected};
use crate::inputs::Inputs;
use crate::p2p::{Network, NetworkArgs};
use crate::samples::{measure_segment, profile_segment, segment_start, ReplayDevice, TraceManifest};
use crate::store::{Kind, Store};
use crate::train::{run_unit_on, BackendKind, UnitWork};

/// How long a fetch of a solver's trace manifest or checkpoint may wait for its peers.
const FETCH_PATIENCE: Duration = Duration::from_secs(30);

/// What `verify` is told (and, built from [`ChallengeArgs`], what `challenge` is).
#[derive(Clone, Debug, clap::Args)]
pub struct VerifyArgs {
	#[command(flatten)]
	pub key: crate::keys::KeyArgs,
	/// The verifier bond to post when registering, in TST (at least the chain's minimum).
	/// A missed reveal is slashed from it.
	#[arg(long, default_value_t = 100.0)]
	pub bond: f64,
	/// Region tag declared on registration.
	#[arg(long, default_value = "local")]
	pub region: String,
	#[command(flatten)]
	pub network: NetworkArgs,
	/// The backend exact-mode proofs are re-executed on: the CPU reference, or wgpu on a
	/// GPU, bit-identical to it and faster on a real model. (libtorch is not bit-identical
	/// and is refused. Tolerance-mode distances are always measured on the reference, the
	/// yardstick.)
	#[arg(long, value_enum, default_value = "cpu")]
	pub backend: BackendKind,
	/// Serve Prometheus metrics at this address (for example 127.0.0.1:9617).
	#[arg(long)]
	pub metrics: Option<std::net::SocketAddr>,
	/// Test equipment: attest `Match` to every proof without re-executing anything, as a
	/// lazy verifier would. A dispute that overturns such a proof slashes the attestation
	/// (`FalseAttestation`); it exists to rehearse that end to end. Only in a build with the
	/// `test-equipment` feature.
	#[cfg(feature = "test-equipment")]
	#[arg(long, hide = true)]
	pub attest_without_checking: bool,
}

/// What `challenge` is told.
#[derive(Clone, Debug, clap::Args)]
pub struct ChallengeArgs {
	#[command(flatten)]
	pub key: crate::keys::KeyArgs,
	/// The job.
	#[arg(long, requires = "unit", required_unless_present = "watch")]
	pub job: Option<JobId>,
	/// The unit whose standing proof to check.
	#[arg(long, requires = "job", required_unless_present = "watch")]
	pub unit: Option<UnitIndex>,
	/// Instead of one unit, watch the chain: check every exact-mode proof open to
	/// challenge by two segments chosen at random here, dispute the ones that do not
	/// reproduce, and play those disputes. Runs until stopped.
	#[arg(long, conflicts_with_all = ["job", "unit"])]
	pub watch: bool,
	/// Instead of re-executing the unit, demand that its solver post a chunk of a state
	/// its proof commits, as `STEP:CHUNK`: the state before global step STEP (a
	/// checkpoint of the unit or its end, the final model) and its chunk CHUNK (32
	/// segments of the state's tree, 4 KiB). For a solver that serves nothing: if it
	/// posts nothing within the response window, its proof is overturned and it is
	/// slashed; if it posts, the chunk is on chain and the request's bond is its.
	#[arg(long, value_name = "STEP:CHUNK", value_parser = parse_chunk_request, requires = "job", conflicts_with = "watch")]
	pub request_chunk: Option<(u32, u32)>,
	/// The challenger bond to post when registering, in TST (at least the chain's
	/// minimum). A challenge also holds the disputes pallet's challenge bond.
	#[arg(long, default_value_t = 20.0)]
	pub bond: f64,
	/// The backend the unit is re-executed on: `cpu` (the reference) or `wgpu`.
	#[arg(long, value_enum, default_value = "cpu")]
	pub backend: BackendKind,
	/// Serve Prometheus metrics at this address (for example 127.0.0.1:9618).
	#[arg(long)]
	pub metrics: Option<std::net::SocketAddr>,
	#[command(flatten)]
	pub network: NetworkArgs,
}

/// Parses `STEP:CHUNK`.
fn parse_chunk_request(text: &str) -> std::result::Result<(u32, u32), String> {
	let (step, chunk) = text.split_once(':').ok_or("expected STEP:CHUNK, such as 20:0")?;
	let number = |field: &str, what: &str| field.trim().parse::<u32>().map_err(|_| format!("{what} `{field}` is not a whole number"));
	Ok((number(step, "STEP")?, number(chunk, "CHUNK")?))
}

/// A verification round as the chain stores it (the bound only limits decoding).

/// A running verifier. A copy re-executes a round's samples in the background
/// ([`Verifier::start_verdict`]) while the original's passes go on.
#[derive(Clone)]
pub struct Verifier<C = Chain> {
	chain: C,
	signer: Keypair,
	me: AccountId,
	inputs: Inputs,
	args: VerifyArgs,
	detected: Detected,
	stop: Arc<AtomicBool>,
	heartbeat: Heartbeat,
	/// The data directory's sweeps ([`crate::retention`]).
	sweeps: crate::retention::Sweeps,
	/// One file per committed verdict, with its salt: a restarted verifier still reveals.
	verdicts_dir: PathBuf,
	/// Where exact-mode segments are re-executed, kept open between them.
	replay: Arc<ReplayDevice>,
	/// The verdicts being worked out in the background, by round.
	checking: Arc<std::sync::Mutex<BTreeSet<RoundKey>>>,
	/// The overturned proofs this node is done summoning attesters of (it summoned each it
	/// could, or holds no run of the unit), by convicting dispute: not looked at again, and
	/// forgotten once their summons period is over.
	summoned: Arc<std::sync::Mutex<BTreeSet<u64>>>,
}

/// A proof open to challenge as a watcher knows it: its unit, the root it is known by
/// ([`crate::aggregate::committed_root`]), and whether it is a round's aggregate (checked by
/// recomputation rather than re-execution), as the chain lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Watched {
	job: JobId,
	unit: UnitIndex,
	root: [u8; 32],
	aggregate: bool,
}

/// A challenger watching every proof open to challenge: the checker and the proofs it
/// has checked (each once, by unit and root).
struct Watcher {
	checker: Verifier,
	best: BestBlocks,
	/// The proofs checked, with the block each was first read at. Forgotten a challenge
	/// window after it, when the proof is no longer open: a watcher that runs for months
	/// keeps only the proofs of the last window. (A window opened again after a failed
	/// dispute lists its proof anew, and it is checked again.)
	checked: BTreeMap<Watched, u32>,
	/// The first block whose proofs the next pass asks for: every earlier one was final
	/// and read in an earlier pass.
	proofs_from: u32,
	/// The proofs whose check failed (their inputs could not be fetched, say): checked
	/// again in later passes while they stay open to challenge.
	failed: BTreeSet<Watched>,
}

impl crate::chain::EveryBlock for Watcher {
	fn pass(&mut self) -> impl std::future::Future<Output = Result<()>> {
		self.checker.watch_pass(&mut self.best, &mut self.checked, &mut self.failed, &mut self.proofs_from)
	}

	fn best_blocks(&mut self) -> &mut BestBlocks {
		&mut self.best
	}

	fn account(&self) -> &AccountId {
		&self.checker.me
	}
}

/// A round this verifier is drawn for: the unit and the round.
type RoundKey = (JobId, UnitIndex, RoundId);

/// A verifier following the best blocks: one pass at each ([`crate::chain::run_every_block`]).
struct Drawn {
	verifier: Verifier,
	best: BestBlocks,
}

impl crate::chain::EveryBlock for Drawn {
	fn pass(&mut self) -> impl std::future::Future<Output = Result<()>> {
		self.verifier.tick(&mut self.best)
	}

	fn best_blocks(&mut self) -> &mut BestBlocks {
		&mut self.best
	}

	fn account(&self) -> &AccountId {
		&self.verifier.me
	}
}

impl<C: Transactions> Verifier<C> {
	/// Detects the hardware and prepares a verifier on `chain`; nothing is sent yet.
	pub fn new(chain: C, network: Network, store: Store, data_dir: PathBuf, args: VerifyArgs, stop: Arc<AtomicBool>) -> Result<Self> {
		let replay = Arc::new(ReplayDevice::new(args.backend)?);
		if let Some(address) = args.metrics {
			crate::metrics::serve(address);
		}
		let signer = args.key.keypair()?;
		let me = signer.public_key().to_account_id();
		let detected = hardware::detect(None, &args.region)?;
		let verdicts_dir = data_dir.join("verdicts");
		let checked_dir = verdicts_dir.join("checked");
		std::fs::create_dir_all(&checked_dir).with_context(|| format!("cannot create {}", checked_dir.display()))?;
		// Kept apart from a solver's units: this folder holds this node's own runs.
		let inputs = Inputs { store, network, units_dir: data_dir.join("verified"), me: me.clone(), datasets: Default::default() };
		// Every per-unit entry this node keeps is named after its job first, so a finished
		// job's go: its runs, verdicts, checked marks, spliced runs and summons defences.
		let sweeps = crate::retention::Sweeps::over(vec![
			inputs.units_dir.clone(),
			verdicts_dir.clone(),
			checked_dir,
			verdicts_dir.join("spliced"),
			verdicts_dir.join("summons"),
		]);
		Ok(Self {
			chain,
			signer,
			me,
			inputs,
			args,
			detected,
			stop,
			heartbeat: Heartbeat::default(),
			sweeps,
			verdicts_dir,
			replay,
			checking: Arc::default(),
			summoned: Arc::default(),
		})
	}

}

impl Verifier {
	/// Runs until `stop` is set.
	pub async fn run(self) -> Result<()> {
		tracing::info!(account = %self.me, "verifier starting");
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Verifier, self.args.bond, profile, 0).await?;
		self.heartbeat.sent();
		// A re-execution stops at the step it is in; committed verdicts stay on disk.
		let stop = self.stop.clone();
		let best = self.chain.follow_best();
		crate::chain::run_every_block(&mut Drawn { verifier: self, best }, &stop).await?;
		tracing::info!("verifier stopped");
		Ok(())
	}

	/// One pass over the chain: the next move in each dispute this verifier opened, then
	/// every commit and reveal due in the rounds it was drawn for. Both in every pass: a
	/// dispute can outlast a commit period, and a verifier busy with one must not miss
	/// its next round.
	async fn tick(&mut self, best: &mut BestBlocks) -> Result<()> {
		let at = best.at().await?;
		self.heartbeat.send_if_due(&self.chain, at.block_number(), &self.signer);
		self.sweeps.sweep_if_due(&self.chain, at.block_number(), &self.inputs.store).await;
		if let Err(error) = self.play_disputes(&at).await {
			tracing::warn!("dispute: {error:#}");
		}
		if let Err(error) = self.summon_attesters(&at).await {
			tracing::warn!("summons: {error:#}");
		}
		// Moves wait for their blocks: the rounds are read at the newest one.
		self.rounds_pass(&best.at().await?).await
	}
}

impl<C: Transactions> Verifier<C> {
	/// The commits and reveals due in the rounds this verifier is drawn for, at `at`: a
	/// verdict not yet worked out is started in the background, and committed as soon as it
	/// is saved.
	async fn rounds_pass<A: ChainState + Clone + Send + 'static>(&mut self, at: &A) -> Result<()> {
		let now = at.number();
		// This verifier's own rounds, by its own keys: a light client asks for those few,
		// not for every round.
		let rounds = at.rounds_of(&self.me).await?;
		let mut due = Vec::new();
		for (job, unit) in rounds {
			let Some(round) = at.round(job, unit).await? else { continue };
			let Some(drawn) = &round.drawn else { continue };
			let Some(mine) = round.attestations.iter().find(|a| a.verifier == self.me) else { continue };
			// A verifier of a tolerance round may be drawn again into its escalation: that
			// verdict is another, kept in a file of its own.
			let round_id = (round.trace_root, matches!(round.kind, RoundKind::Escalation { .. }));
			let attested = attested_by(&round);
			match mine.state {
				AttestationState::Drawn if now < drawn.commit_ends => due.push((job, unit, round_id, attested, false)),
				AttestationState::Committed(_) if now >= drawn.commit_ends && now < drawn.reveal_ends => {
					due.push((job, unit, round_id, attested, true))
				},
				_ => {},
			}
		}
		for (job, unit, round_id, attested, reveal) in due {
			let result = if reveal { self.reveal(now, job, unit, round_id) } else { self.commit(at, job, unit, round_id, attested) };
			if let Err(error) = result {
				tracing::warn!(job, unit, "verification: {error:#}");
			}
		}
		Ok(())
	}

	/// Commits the verdict on the unit once it is worked out and saved; until then makes
	/// sure it is being worked out in the background ([`Self::start_verdict`]), so a long
	/// re-execution never holds up this verifier's other commits and reveals.
	fn commit<A: ChainState + Clone + Send + 'static>(&mut self, at: &A, job_id: JobId, index: UnitIndex, round_id: RoundId, attested: Attested) -> Result<()> {
		// The background task working the verdict out commits it itself, the moment it is saved.
		if self.checking.lock().map(|checking| checking.contains(&(job_id, index, round_id))).unwrap_or(false) {
			return Ok(());
		}
		if !self.verdict_path(job_id, index, round_id).exists() {
			self.start_verdict(at, job_id, index, round_id, attested);
			return Ok(());
		}
		self.send_commitment(at.number().into(), job_id, index, round_id)
	}

	/// Commits the verdict saved for the round, for a pass that read block `now`: handed
	/// over ([`Chain::send_in_background`]), so the commits and reveals of every round due
	/// together go out in one block.
	fn send_commitment(&self, now: u64, job_id: JobId, index: UnitIndex, round_id: RoundId) -> Result<()> {
		let (verdict, salt) = self.saved_verdict(job_id, index, round_id)?;
		let commitment = digest_bytes(&(&verdict, &salt, &self.me).encode());
		let call = runtime::transactions().verification().commit(job_id, index, subxt::utils::H256(commitment));
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => {
				crate::metrics::get().round("committed");
				tracing::info!(job = job_id, unit = index, verdict = verdict_name(&verdict), "verification: committed");
			},
			Err(error) => tracing::warn!(job = job_id, unit = index, "verification: committing the verdict: {error:#}"),
		};
		self.chain.send_in_background(self.duty_key(job_id, index, round_id, "commit"), now, call, &self.signer, Settled::InBlock, done);
		Ok(())
	}

	/// The verdict and salt saved for the round.
	fn saved_verdict(&self, job_id: JobId, index: UnitIndex, round_id: RoundId) -> Result<(Verdict, [u8; 32])> {
		let path = self.verdict_path(job_id, index, round_id);
		let bytes = std::fs::read(&path).with_context(|| format!("cannot read the verdict {}: without it the round can be neither committed nor revealed", path.display()))?;
		<(Verdict, [u8; 32])>::decode(&mut &bytes[..]).with_context(|| format!("damaged verdict file {}", path.display()))
	}

	/// The key a round's commit or reveal (`duty`) is known by in the background.
	fn duty_key(&self, job_id: JobId, index: UnitIndex, (trace_root, escalation): RoundId, duty: &str) -> String {
		format!("round {job_id} {index} {} {escalation} {duty}", hex(&trace_root))
	}

	/// Works out the verdict on a round in the background, unless that is under way:
	/// re-executes the samples and saves the verdict with a fresh salt, atomically, before
	/// anything is committed (without the salt it cannot be revealed, and a torn file after
	/// a crash would leave the reveal impossible). A failure is logged, and the next pass
	/// starts it again.
	fn start_verdict<A: ChainState + Clone + Send + 'static>(&self, at: &A, job_id: JobId, index: UnitIndex, round_id: RoundId, attested: Attested) {
		let key = (job_id, index, round_id);
		let Ok(mut checking) = self.checking.lock() else { return };
		if !checking.insert(key) {
			return;
		}
		drop(checking);
		crate::metrics::get().round("drawn");
		let mut copy = self.clone();
		let at = at.clone();
		tokio::spawn(async move {
			// Rounds drawn together are re-executed side by side, sharing the device: a short
			// round's commit period, sized to its own work, must not wait out a long one's.
			let outcome = async {
				let started = std::time::Instant::now();
				let verdict = copy.verdict(&at, job_id, index, &round_id.0, attested).await?;
				crate::metrics::get().reexecution_seconds.set(started.elapsed().as_secs_f64());
				crate::metrics::get().round(verdict_name(&verdict));
				let mut salt = [0u8; 32];
				getrandom::getrandom(&mut salt).context("no randomness for the commitment's salt")?;
				crate::store::write_atomically(&copy.verdict_path(job_id, index, round_id), &(verdict, salt).encode())?;
				// At once, not at the next block's pass: a verdict finished late in the commit
				// period may have a single block to spare.
				copy.send_commitment(at.number().into(), job_id, index, round_id)
			}
			.await;
			if let Err(error) = outcome {
				tracing::warn!(job = job_id, unit = index, "verification: {error:#}");
			}
			if let Ok(mut checking) = copy.checking.lock() {
				checking.remove(&key);
			}
		});
	}

	/// Reveals the verdict committed on the unit, for a pass that read block `now`: handed
	/// over ([`Chain::send_in_background`]).
	fn reveal(&mut self, now: u32, job_id: JobId, index: UnitIndex, round_id: RoundId) -> Result<()> {
		let (verdict, salt) = self.saved_verdict(job_id, index, round_id)?;
		let call = runtime::transactions().verification().reveal(job_id, index, subxt::utils::Static(verdict.clone()), salt);
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => {
				crate::metrics::get().reveals.with_label_values(&["verdict"]).inc();
				tracing::info!(job = job_id, unit = index, verdict = verdict_name(&verdict), "verification: revealed");
			},
			Err(error) => tracing::warn!(job = job_id, unit = index, "verification: revealing the verdict: {error:#}"),
		};
		self.chain.send_in_background(self.duty_key(job_id, index, round_id, "reveal"), now.into(), call, &self.signer, Settled::InBlock, done);
		Ok(())
	}

	/// Re-executes this verifier's samples of the unit whose proof has `trace_root` and
	/// attests as the round's kind says (`attested`): in exact mode `Match` when this node's
	/// trace root is the solver's, else `Mismatch` with its own; by distance otherwise.
	async fn verdict(
		&mut self,
		at: &impl ChainState,
		job_id: JobId,
		index: UnitIndex,
		trace_root: &[u8; 32],
		attested: Attested,
	) -> Result<Verdict> {
		let samples = at.samples(job_id, index, &self.me).await?.context("this verifier is not drawn for the unit's proof")?;
		let profiling = match attested {
			Attested::ByMatch => None,
			Attested::ByDistance { profiling } => Some(profiling),
		};
		#[cfg(feature = "test-equipment")]
		if self.args.attest_without_checking {
			tracing::warn!(job = job_id, unit = index, ?samples, "verification: drawn; attesting a match without re-executing (--attest-without-checking)");
			let segment = samples.first().copied().unwrap_or(0);
			return Ok(match profiling {
				None => Verdict::Match,
				Some(profiling) => Verdict::Measured {
					segment,
					distance: Default::default(),
					profile: profiling.then(Default::default),
				},
			});
		}
		if let Some(profiling) = profiling {
			tracing::info!(job = job_id, unit = index, ?samples, profiling, "verification: drawn; measuring the sampled segments' distances");
			return self.measure(at, (job_id, index), trace_root, &samples, profiling).await;
		}
		tracing::info!(job = job_id, unit = index, ?samples, "verification: drawn; re-executing the sampled segments");
		Ok(match self.check_proof(at, (job_id, index), trace_root, Samples::Drawn(&samples), "verification").await? {
			None => Verdict::Match,
			Some(mine) => Verdict::Mismatch { trace_root: mine },
		})
	}

	/// Checks the proof with `trace_root` by re-executing `samples`. Returns this node's
	/// trace root when it differs from the proof's, `None` when the proof holds. When a
	/// sample does not reproduce, that root is the proof's boundaries with the one this node
	/// reached at the sample's end in its place ([`Self::splice`]): no more than the sample
	/// is re-executed, so the verdict fits the commit period however long the unit. Only
	/// when the samples cannot be checked (the solver does not serve a checkpoint or its
	/// manifest) is the whole unit re-executed from its chain-fixed start. The job's inputs
	/// (dataset, start model) are fetched first, and failing to fetch them is an error: the
	/// whole unit needs them as much as the samples do, so the next pass fetches them again
	/// rather than re-execute more. Log lines start with `role`.
	async fn check_proof(
		&mut self,
		at: &impl ChainState,
		(job_id, index): (JobId, UnitIndex),
		trace_root: &[u8; 32],
		samples: Samples<'_>,
		role: &str,
	) -> Result<Option<[u8; 32]>> {
		let work = Arc::new(self.standing_work(at, job_id, index, trace_root).await?);
		match self.check_samples(job_id, index, work.clone(), trace_root, samples).await {
			Ok(None) => {
				tracing::info!(job = job_id, unit = index, "{role}: every sampled segment reproduces");
				return Ok(None);
			},
			Ok(Some(divergence)) => {
				tracing::warn!(
					job = job_id,
					unit = index,
					segment = divergence.segment,
					from = divergence.from,
					mine = %hex(&divergence.trace_root),
					"{role}: a sampled segment does not reproduce from the solver's checkpoint before it"
				);
				return Ok(Some(divergence.trace_root));
			},
			Err(error) => tracing::warn!(
				job = job_id,
				unit = index,
				"{role}: the samples could not be checked ({error:#}); re-executing the whole unit"
			),
		}
		let mine = self.reexecute(work).await?;
		if mine == *trace_root {
			tracing::info!(job = job_id, unit = index, "{role}: the whole unit reproduces");
			return Ok(None);
		}
		tracing::warn!(job = job_id, unit = index, solver = %hex(trace_root), mine = %hex(&mine), "{role}: the unit's trace does not reproduce");
		Ok(Some(mine))
	}

	/// Tolerance mode: re-executes each of `samples` on the reference from the solver's
	/// checkpoint before it, and measures the distance to the solver's checkpoint after it;
	/// in a profiling round, also runs each on libtorch from the same checkpoint and measures
	/// that run's distance to the reference's, its profile. The verdict carries the largest
	/// distance and the largest profile, component by component, and the segment farthest by
	/// L2. A segment whose checkpoints the solver does not serve, or that do not fit its
	/// trace, counts as infinitely far (and is not profiled): serving them is the solver's
	/// duty.
	async fn measure(
		&mut self,
		at: &impl ChainState,
		(job_id, index): (JobId, UnitIndex),
		trace_root: &[u8; 32],
		samples: &[u32],
		profiling: bool,
	) -> Result<Verdict> {
		let work = Arc::new(self.standing_work(at, job_id, index, trace_root).await?);
		// Without the manifest no segment can be measured: each then counts as infinitely far.
		let manifest = self.trace_manifest(job_id, &work, trace_root).await;
		let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
		let mut farthest: Option<(u32, Distance)> = None;
		let zero = Distance { l2: 0.0, linf: 0.0, cosine: 0.0 };
		let (mut largest, mut profile) = (zero, None::<Distance>);
		for &sample in samples {
			let range = segments.range(sample).with_context(|| format!("the unit has no segment {sample}"))?;
			let ends = match &manifest {
				Ok(manifest) => self.segment_ends(job_id, &work, manifest, range.clone()).await,
				Err(error) => Err(anyhow!("{error:#}")),
			};
			let measured = match ends {
				Ok((start, end)) => {
					if profiling {
						let (work, stop, range, start) = (work.clone(), self.stop.clone(), range.clone(), start.clone());
						let profiled = tokio::task::spawn_blocking(move || profile_segment(&work, range, start, &stop))
							.await
							.context("the profiling thread failed")??;
						tracing::info!(job = job_id, unit = index, sample, l2 = profiled.l2, linf = profiled.linf, cosine = profiled.cosine, "verification: segment profiled");
						profile = Some(componentwise_max(&profile.unwrap_or(zero), &profiled));
					}
					let (work, stop) = (work.clone(), self.stop.clone());
					tokio::task::spawn_blocking(move || measure_segment(&work, range, start, &end, &stop))
						.await
						.context("the re-execution thread failed")??
				},
				Err(error) => {
					tracing::warn!(job = job_id, unit = index, sample, "verification: the segment cannot be measured ({error:#}): counted as infinitely far");
					Distance { l2: f64::INFINITY, linf: f64::INFINITY, cosine: f64::INFINITY }
				},
			};
			tracing::info!(job = job_id, unit = index, sample, l2 = measured.l2, linf = measured.linf, cosine = measured.cosine, "verification: segment measured");
			largest = componentwise_max(&largest, &measured);
			if farthest.as_ref().is_none_or(|(_, far)| !(measured.l2 <= far.l2)) {
				farthest = Some((sample, measured));
			}
		}
		let segment = farthest.map(|(segment, _)| segment).context("no segment to measure")?;
		// A profiling round wants a profile even when no segment could be profiled: then
		// this verifier claims no bound (the largest distance), which the median passes over.
		let unbounded = Distance { l2: f64::INFINITY, linf: f64::INFINITY, cosine: f64::INFINITY };
		let profile = profiling.then(|| chain_distance(&profile.unwrap_or(unbounded)));
		Ok(Verdict::Measured { segment, distance: chain_distance(&largest), profile })
	}

	/// The solver's states at both ends of the segment `range` of the unit in `work`: where
	/// it starts (with its chain point) and where it ends, each checked against `manifest`.
	async fn segment_ends(
		&self,
		job_id: JobId,
		work: &UnitWork,
		manifest: &TraceManifest,
		range: std::ops::Range<u32>,
	) -> Result<((Vec<Vec<f32>>, ChainPoint), Vec<Vec<f32>>)> {
		let start = self.solver_state(job_id, work, manifest, range.start).await?;
		let (end, _) = self.solver_state(job_id, work, manifest, range.end).await?;
		Ok((start, end))
	}

	/// The trace manifest of the proof with `trace_root` of the unit in `work` of job
	/// `job_id`, fetched from the solver's peers and checked against the root.
	async fn trace_manifest(&self, job_id: JobId, work: &UnitWork, trace_root: &[u8; 32]) -> Result<TraceManifest> {
		let check = |bytes: &[u8]| TraceManifest::checked(bytes, trace_root).map(|_| ());
		let bound = TraceManifest::max_len(work.segments().count());
		let network = &self.inputs.network;
		let bytes = network.fetch_with(*trace_root, FETCH_PATIENCE, &check, bound).await.context("the unit's trace manifest")?;
		network.keep(job_id, Kind::Manifest, *trace_root);
		TraceManifest::checked(&bytes, trace_root)
	}

	/// This node's run against the proof with `trace_root`, whose segment `segment` does not
	/// reproduce from the solver's checkpoint before it (`checkpoint`, none for the unit's
	/// first): the proof's boundaries (`manifest`) with `reached`, the boundary this node
	/// reached at the segment's end, in place of the proof's. Returns its segment root, this
	/// node's trace root for the mismatch and for the dispute it opens. The run agrees with
	/// the proof at every boundary but that one, so the dispute's segment level ends on that
	/// segment, whose step level is played from the solver's own state before it: the proof
	/// loses there exactly when its transition is not an honest run from its own state. The
	/// run is kept in `dir`, a folder of the proof's own ([`Self::spliced_dir`]), which the
	/// dispute is played from. A proof spliced before (a restart, or another sample in a later
	/// pass) keeps its first run: a verdict or a dispute may already name its root.
	fn splice(
		dir: &Path,
		work: &UnitWork,
		manifest: &TraceManifest,
		segment: u32,
		reached: Boundary,
		checkpoint: Option<&[u8]>,
	) -> Result<[u8; 32]> {
		let kept = crate::train::saved_boundaries(dir)?;
		let boundaries = if kept.len() == manifest.boundaries.len() {
			kept
		} else {
			let mut boundaries = manifest.boundaries();
			*boundaries.get_mut(segment as usize).with_context(|| format!("the proof has no boundary after segment {segment}"))? =
				reached;
			crate::dispute::write_segment_folder(work, dir, &boundaries, segment, checkpoint)?;
			boundaries
		};
		Ok(UnitBoundaries::new(boundaries).map_err(|error| anyhow!("{error:?}"))?.root())
	}

	/// The folder of this node's run of unit `index` of `job_id` spliced against the proof
	/// with `trace_root` ([`Self::splice`]), named after its job first for the sweeps.
	fn spliced_dir(&self, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> PathBuf {
		self.verdicts_dir.join("spliced").join(format!("{job_id}-{index}-{}", hex(trace_root)))
	}

	/// `work`, this node's own run of unit `index` of `job_id`, moved to the run spliced
	/// against the proof with `proof_root` where a sample of that proof did not reproduce
	/// here: the run this node's disputes and summonses over the proof are played from.
	fn against(&self, (job_id, index): (JobId, UnitIndex), mut work: UnitWork, proof_root: Option<&[u8; 32]>) -> Result<UnitWork> {
		if let Some(root) = proof_root {
			let spliced = self.spliced_dir(job_id, index, root);
			if !crate::train::saved_boundaries(&spliced)?.is_empty() {
				work.dir = spliced;
			}
		}
		Ok(work)
	}

	/// The most bytes a model file of the unit in `work` can hold.
	fn model_bound(work: &UnitWork) -> Result<u64> {
		crate::train::model_file_bound(&work.model, &work.train)
	}

	/// The solver's state at `step` of the unit in `work` of job `job_id`, with its chain
	/// point: its checkpoint there, fetched and checked against `manifest`, or the unit's
	/// start.
	async fn solver_state(&self, job_id: JobId, work: &UnitWork, manifest: &TraceManifest, step: u32) -> Result<(Vec<Vec<f32>>, ChainPoint)> {
		let checkpoint = self.solver_checkpoint(job_id, work, manifest, step).await?;
		segment_start(work, manifest, step, checkpoint.as_ref().map(|(hash, bytes)| (hash, &bytes[..])))
	}

	/// The solver's checkpoint at `step` of the unit in `work` of job `job_id`, as `manifest`
	/// names it, with its hash; `None` where the manifest names none (the unit's start).
	async fn solver_checkpoint(
		&self,
		job_id: JobId,
		work: &UnitWork,
		manifest: &TraceManifest,
		step: u32,
	) -> Result<Option<([u8; 32], Vec<u8>)>> {
		let Some(hash) = manifest.checkpoint(step) else { return Ok(None) };
		let bytes = self.inputs.network.fetch(hash, FETCH_PATIENCE, Self::model_bound(work)?).await;
		self.inputs.network.keep(job_id, Kind::Checkpoint, hash);
		Ok(Some((hash, bytes.context("a segment's checkpoint")?)))
	}

	/// Re-executes the segments `samples` of the unit in `work` (its inputs fetched, standing
	/// on the proof with `trace_root`), from the solver's checkpoints; returns the first segment that does
	/// not reach the boundary the proof commits, with this node's run against the proof
	/// there ([`Self::splice`]), or `None` when every one does.
	async fn check_samples(
		&self,
		job_id: JobId,
		index: UnitIndex,
		work: Arc<UnitWork>,
		trace_root: &[u8; 32],
		samples: Samples<'_>,
	) -> Result<Option<Divergence>> {
		let manifest = Arc::new(self.trace_manifest(job_id, &work, trace_root).await?);
		let segments = Segments::new(work.first_step, work.steps, work.train.checkpoint_interval);
		let samples = match samples {
			Samples::Drawn(drawn) => drawn.to_vec(),
			Samples::Random(wanted) => random_segments(segments.count(), wanted)?,
		};
		tracing::debug!(job = job_id, unit = index, ?samples, "re-executing segments");
		for sample in samples {
			// A segment checked before a restart is not re-executed again: the commit period
			// leaves room for one lost segment, not for the whole sample set twice.
			let checked = self.checked_path((job_id, index), trace_root, sample);
			if checked.exists() {
				tracing::info!(job = job_id, unit = index, segment = sample, "segment checked before a restart: it reproduces");
				continue;
			}
			let range = segments.range(sample).with_context(|| format!("the unit has no segment {sample}"))?;
			let checkpoint = self.solver_checkpoint(job_id, &work, &manifest, range.start).await?;
			let (state, point) = segment_start(&work, &manifest, range.start, checkpoint.as_ref().map(|(hash, bytes)| (hash, &bytes[..])))?;
			let (replayed, replayed_manifest, stop) = (work.clone(), manifest.clone(), self.stop.clone());
			let device = self.replay.clone();
			let (from, replayed_range) = (range.start, range.clone());
			let reached = tokio::task::spawn_blocking(move || device.replay(&replayed, &replayed_manifest, replayed_range, (state, point), &stop))
				.await
				.context("the re-execution thread failed")??;
			if let Some(reached) = reached {
				let checkpoint = checkpoint.as_ref().map(|(_, bytes)| &bytes[..]);
				let dir = self.spliced_dir(job_id, index, trace_root);
				let trace_root = Self::splice(&dir, &work, &manifest, sample, reached, checkpoint)?;
				return Ok(Some(Divergence { segment: sample, from, trace_root }));
			}
			crate::store::write_atomically(&checked, b"")?;
		}
		Ok(None)
	}

	/// The work of re-executing the unit, which must still stand on the proof with
	/// `trace_root`, with its inputs fetched and checked.
	async fn standing_work(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> Result<UnitWork> {
		let job = at.job(job_id).await?.context("the job is gone")?;
		let unit = at.unit(job_id, index).await?.context("the unit is gone")?;
		if !matches!(unit.state, UnitState::Proven | UnitState::Challenged) || unit.proof.map(|p| p.trace_root.0) != Some(*trace_root) {
			bail!("the unit no longer stands on the proof with trace root {}", hex(trace_root));
		}
		self.inputs.connect(at, job_id, &job).await?;
		self.inputs.fetch(at, job_id, index, &job, &unit).await?;
		self.inputs.prepare(job_id, index, &job, &unit, &self.detected)
	}

	/// Re-executes the unit in `work` ([`Self::standing_work`]) from its start, on this
	/// node's backend; returns this node's trace root.
	async fn reexecute(&self, work: Arc<UnitWork>) -> Result<[u8; 32]> {
		let stop = self.stop.clone();
		let backend = self.args.backend;
		let result = tokio::task::spawn_blocking(move || run_unit_on(backend, &work, &stop, |_| {}))
			.await
			.context("the re-execution thread failed")??
			.context("stopped before the re-execution finished")?;
		Ok(result.proof.trace_root.0)
	}

}

impl Verifier {
	/// `challenge`: re-executes unit `index` of `job_id` and, if its standing proof does
	/// not reproduce, disputes it and plays the dispute to its end. Returns once the
	/// proof reproduces (nothing to dispute) or the dispute has ended.
	pub async fn challenge(mut self, job_id: JobId, index: UnitIndex) -> Result<()> {
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Challenger, self.args.bond, profile, 0).await?;
		let mut best = self.chain.follow_best();
		let at = best.at().await?;
		let unit = at.unit(job_id, index).await?.with_context(|| format!("job {job_id} has no unit {index}"))?;
		let job = at.job(job_id).await?.with_context(|| format!("no job {job_id}"))?;
		if crate::aggregate::is_aggregate(&unit) {
			if unit.state != UnitState::Proven {
				bail!("unit {index} of job {job_id} has no aggregate open to challenge (it is {:?})", unit.state);
			}
			println!("recomputing the aggregate of unit {index} of job {job_id} from its round");
			match self.challenge_aggregate_if_wrong(&at, job_id, index, &job, &unit).await? {
				Some(chunk) => println!("the aggregate is not the round's: overturned by the referee at chunk {chunk}"),
				None => println!("the aggregate is the round's, bit for bit: nothing to challenge"),
			}
			return Ok(());
		}
		if job.spec.verification != VerificationMode::Exact {
			bail!("job {job_id} is verified in tolerance mode: its proofs are judged by distance, by its drawn verifiers and their escalation committees, not by a dispute");
		}
		let theirs = unit.proof.map(|proof| proof.trace_root.0).context("the unit has no proof to challenge")?;
		let mine = at.unit_disputes(job_id, index).await?.into_iter().find(|(_, d)| d.challenger == self.me);
		let id = match mine {
			// A restart goes on with the dispute it opened.
			Some((id, _)) => id,
			None => {
				if unit.state != UnitState::Proven {
					bail!("unit {index} of job {job_id} has no proof open to challenge (it is {:?})", unit.state);
				}
				println!("re-executing unit {index} of job {job_id} on the CPU reference");
				let work = self.standing_work(&at, job_id, index, &theirs).await?;
				let root = self.reexecute(Arc::new(work)).await?;
				if root == theirs {
					println!("the proof reproduces bit for bit (trace root {}): nothing to challenge", hex(&theirs));
					return Ok(());
				}
				println!("the proof does not reproduce: its trace root is {}, this run's is {}", hex(&theirs), hex(&root));
				self.open_dispute(job_id, index, root).await?
			},
		};
		println!("dispute {id} open; answering every round until it ends");
		while !self.stop.load(Ordering::Relaxed) {
			let at = best.at().await?;
			if at.dispute(id).await?.is_none() {
				let after = at.unit(job_id, index).await?.and_then(|unit| unit.proof).map(|proof| proof.trace_root.0);
				if after == Some(theirs) {
					println!("dispute {id} ended and the proof stands: the challenge lost");
				} else {
					println!("dispute {id} ended and the proof is overturned: the challenge won");
				}
				return Ok(());
			}
			if let Err(error) = self.play_disputes(&at).await {
				tracing::warn!("{error:#}");
			}
			best.next(Duration::from_secs(6)).await;
		}
		println!("stopped with dispute {id} open: run the same command again to go on playing it");
		Ok(())
	}

	/// `challenge --request-chunk`: demands chunk `chunk` of the state before global step
	/// `step` of unit `index`'s proof, and waits until the solver posts it or, silent past
	/// its deadline, loses the proof (this node then ends the request).
	pub async fn request_chunk(mut self, job_id: JobId, index: UnitIndex, (step, chunk): (u32, u32)) -> Result<()> {
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Challenger, self.args.bond, profile, 0).await?;
		let mut best = self.chain.follow_best();
		let at = best.at().await?;
		let unit = at.unit(job_id, index).await?.with_context(|| format!("job {job_id} has no unit {index}"))?;
		let theirs = unit.proof.map(|proof| proof.trace_root.0).context("the unit has no proof to request a chunk of")?;
		let call = runtime::transactions().disputes().request_chunk(job_id, index, step, chunk);
		let events = self.chain.send(&call, &self.signer).await.context("requesting the chunk")?;
		let requested = events
			.find_first::<runtime::disputes::events::ChunkRequested>()
			.transpose()?
			.context("the request was included but opened nothing")?;
		let id = requested.dispute;
		println!("chunk {chunk} of the state before step {step} requested (dispute {id}); the solver must post it by block {}", requested.deadline);
		while !self.stop.load(Ordering::Relaxed) {
			let at = best.at().await?;
			if at.dispute(id).await?.is_none() {
				let proof = at.unit(job_id, index).await?.and_then(|unit| unit.proof).map(|proof| proof.trace_root.0);
				match proof {
					Some(root) if root == theirs => println!("the solver posted the chunk: the proof stands"),
					_ => println!("the solver posted nothing in time: its proof is overturned"),
				}
				return Ok(());
			}
			if let Err(error) = self.play_disputes(&at).await {
				tracing::warn!("{error:#}");
			}
			best.next(Duration::from_secs(6)).await;
		}
		println!("stopped with request {id} open: run `challenge --job {job_id} --unit {index}` to end it once its deadline passes");
		Ok(())
	}

	/// `challenge --watch`: checks every exact-mode proof open to challenge, once, by two
	/// segments chosen here at random, which its solver cannot know; a proof whose sample
	/// does not reproduce is disputed at that segment ([`Self::splice`]).
	/// Every pass also plays the disputes this node opened. Runs until stopped.
	pub async fn watch(self) -> Result<()> {
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Challenger, self.args.bond, profile, 0).await?;
		tracing::info!(account = %self.me, "watch: checking every proof open to challenge");
		let stop = self.stop.clone();
		let best = self.chain.follow_best();
		let mut watcher = Watcher { checker: self, best, checked: BTreeMap::new(), proofs_from: 0, failed: BTreeSet::new() };
		crate::chain::run_every_block(&mut watcher, &stop).await?;
		tracing::info!("watcher stopped");
		Ok(())
	}

	/// One pass of the watcher: the next move in each dispute it opened, then every proof
	/// open to challenge that it has not checked yet, and those whose check `failed`
	/// before while they stay open.
	async fn watch_pass(
		&mut self,
		best: &mut BestBlocks,
		checked: &mut BTreeMap<Watched, u32>,
		failed: &mut BTreeSet<Watched>,
		proofs_from: &mut u32,
	) -> Result<()> {
		let at = best.at().await?;
		self.sweeps.sweep_if_due(&self.chain, at.block_number(), &self.inputs.store).await;
		if let Err(error) = self.play_disputes(&at).await {
			tracing::warn!("dispute: {error:#}");
		}
		if let Err(error) = self.summon_attesters(&at).await {
			tracing::warn!("summons: {error:#}");
		}
		// Read before the best block: every block up to it is then an ancestor of that
		// block, and no later pass needs to read it again.
		let finalized = self.chain.at().await?.block_number() as u32;
		let at = best.at().await?;
		let mut open = self.open_proofs(&at, *proofs_from).await?;
		// A best block behind the finalized one (a follow starting over) has not shown
		// the blocks between them yet.
		*proofs_from = finalized.min(at.block_number() as u32).saturating_add(1).max(*proofs_from);
		// A check that failed is made again while its proof stays open to challenge: a
		// solver restarting while its proof is checked must not let the proof go unchecked.
		let window: u32 = at.constants().entry(runtime::constants().tasks().challenge_window())?;
		let now = at.block_number() as u32;
		checked.retain(|_, seen| now < seen.saturating_add(window));
		for key in std::mem::take(failed) {
			let still_open = at.unit(key.job, key.unit).await?.is_some_and(|unit| {
				unit.state == UnitState::Proven &&
					crate::aggregate::committed_root(&unit) == Some(key.root) &&
					unit.proven_at.is_some_and(|proven| now < proven.saturating_add(window))
			});
			if still_open && checked.remove(&key).is_some() {
				open.push(key);
			}
		}
		for key in open {
			if self.stop.load(Ordering::Relaxed) || checked.contains_key(&key) {
				continue;
			}
			checked.insert(key, now);
			if let Err(error) = self.watch_unit(&at, key).await {
				tracing::warn!(job = key.job, unit = key.unit, "watch: {error:#}; checked again at a later block while the proof is open");
				failed.insert(key);
			}
		}
		Ok(())
	}

	/// The proofs open to challenge at `at` that were submitted (or whose window opened
	/// again) at block `from` or later: units `Proven` inside their challenge window,
	/// solved by another node, of exact-mode jobs, or rounds' aggregates (exact in every
	/// job); with the roots they are known by ([`crate::aggregate::committed_root`]). The
	/// runtime reads one key prefix per block, never every unit, so a light client asks
	/// for a few keys.
	async fn open_proofs(&self, at: &AtBlock, from: u32) -> Result<Vec<Watched>> {
		use runtime::runtime_types::touchstone_primitives::VerificationMode as ChainVerificationMode;
		let open = at
			.runtime_apis()
			.call(runtime::runtime_apis().tasks_api().proofs_since(from))
			.await
			.context("asking the chain for the proofs open to challenge")?;
		Ok(open
			.into_iter()
			.filter(|proof| {
				proof.solver != self.me && (proof.aggregate.is_some() || matches!(proof.verification, ChainVerificationMode::Exact))
			})
			.map(|proof| Watched {
				job: proof.job,
				unit: proof.unit,
				root: proof.aggregate.unwrap_or(proof.trace_root).0,
				aggregate: proof.aggregate.is_some(),
			})
			.collect())
	}

	/// Checks one proof by two random segments and disputes it if it does not reproduce;
	/// a round's aggregate by recomputing it, challenged at its first wrong chunk.
	async fn watch_unit(&mut self, at: &AtBlock, watched: Watched) -> Result<()> {
		let Watched { job: job_id, unit: index, root: theirs, aggregate } = watched;
		if aggregate {
			let (Some(job), Some(unit)) = (at.job(job_id).await?, at.unit(job_id, index).await?) else {
				return Ok(());
			};
			// Checked against the commitment listed, not one that replaced it since.
			if crate::aggregate::committed_root(&unit) != Some(theirs) {
				return Ok(());
			}
			match self.challenge_aggregate_if_wrong(at, job_id, index, &job, &unit).await? {
				Some(chunk) => tracing::warn!(job = job_id, unit = index, chunk, "watch: the aggregate is not the round's; overturned at the referee"),
				None => tracing::info!(job = job_id, unit = index, "watch: the aggregate is the round's"),
			}
			return Ok(());
		}
		if let Some(mine) = self.check_proof(at, (job_id, index), &theirs, Samples::Random(2), "watch").await? {
			let id = self.open_dispute(job_id, index, mine).await?;
			tracing::warn!(job = job_id, unit = index, dispute = id, "watch: the proof does not reproduce; dispute opened");
		}
		Ok(())
	}

	/// Recomputes the aggregate committed for unit `index` and, if it is not the
	/// round's, challenges it at its first wrong chunk, which the referee judges at once.
	/// Returns the chunk it was overturned at, `None` when it is the round's.
	async fn challenge_aggregate_if_wrong(&self, at: &AtBlock, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<Option<u32>> {
		let Some(wrong) = crate::aggregate::check(&self.inputs, at, job_id, index, job, unit).await? else {
			return Ok(None);
		};
		let call = runtime::transactions().disputes().challenge_aggregate(job_id, index, wrong.chunk, subxt::utils::Static(wrong.openings));
		let events = self.chain.send(&call, &self.signer).await.context("challenging the aggregate")?;
		let overturned = events.find_first::<runtime::disputes::events::AggregateOverturned>().transpose()?.is_some();
		ensure!(overturned, "the aggregate challenge was included but overturned nothing");
		Ok(Some(wrong.chunk))
	}

	/// Disputes unit `index` of `job_id` with this node's trace root `mine`; returns the
	/// dispute.
	async fn open_dispute(&self, job_id: JobId, index: UnitIndex, mine: [u8; 32]) -> Result<u64> {
		let events = self
			.chain
			.send(&runtime::transactions().disputes().challenge(job_id, index, mine), &self.signer)
			.await
			.context("opening the dispute")?;
		Ok(events
			.find_first::<runtime::disputes::events::DisputeOpened>()
			.transpose()?
			.context("the challenge was included but opened no dispute")?
			.dispute)
	}

	/// Plays the next move in each dispute this node opened, answering from its own run of
	/// the unit, and in each summons it is a side of: as the summoner, from its own run; as
	/// the summoned verifier, from the overturned proof's boundaries and the checkpoint it
	/// re-executed the segment from ([`Self::summons_work`]).
	async fn play_disputes(&mut self, at: &AtBlock) -> Result<()> {
		let mut units = BTreeSet::new();
		let mut summonses = Vec::new();
		for (id, dispute) in crate::dispute::party_disputes(at, &self.me).await? {
			match (dispute.summons.is_some(), dispute.challenger == self.me, dispute.defender == self.me) {
				(false, true, _) => {
					units.insert((dispute.job, dispute.unit));
				},
				(true, true, _) => summonses.push((id, dispute, Party::Challenger)),
				(true, false, true) => summonses.push((id, dispute, Party::Defender)),
				_ => {},
			}
		}
		for (job_id, index) in units {
			let (Some(job), Some(unit)) = (at.job(job_id).await?, at.unit(job_id, index).await?) else {
				continue;
			};
			let proof_root = unit.proof.as_ref().map(|proof| proof.trace_root.0);
			let prepare = || self.against((job_id, index), self.inputs.prepare(job_id, index, &job, &unit, &self.detected)?, proof_root.as_ref());
			crate::dispute::play(&self.chain, &self.signer, at, (job_id, index), Party::Challenger, prepare).await?;
		}
		for (id, dispute, side) in summonses {
			let (job_id, index) = (dispute.job, dispute.unit);
			let work = match side {
				Party::Challenger => self.summoner_run(at, &dispute).await,
				Party::Defender => self.summons_work(at, &dispute).await,
			};
			let played = match work {
				Ok(work) => {
					let listed = vec![(id, dispute)];
					crate::dispute::play_listed(&self.chain, &self.signer, at, (job_id, index), listed, side, || Ok(work)).await
				},
				Err(error) => Err(error),
			};
			if let Err(error) = played {
				tracing::warn!(job = job_id, unit = index, summons = id, ?side, "summons: {error:#}");
			}
		}
		Ok(())
	}

	/// This node's own run of unit `index` of `job_id` (its folder, whatever it holds).
	async fn own_run(&self, at: &AtBlock, job_id: JobId, index: UnitIndex) -> Result<UnitWork> {
		let job = at.job(job_id).await?.context("the job is gone")?;
		let unit = at.unit(job_id, index).await?.context("the unit is gone")?;
		self.inputs.prepare(job_id, index, &job, &unit, &self.detected)
	}

	/// The run this node plays summons `dispute` from as its summoner: the one it found the
	/// overturned proof's lie with ([`Self::against`]).
	async fn summoner_run(&self, at: &AtBlock, dispute: &Dispute) -> Result<UnitWork> {
		let overturned = dispute.summons.context("not a summons")?;
		let proof = at.overturned(overturned).await?.context("the overturned proof is forgotten")?;
		self.against((dispute.job, dispute.unit), self.own_run(at, dispute.job, dispute.unit).await?, Some(&proof.trace.root))
	}

	/// The work of defending summons `dispute` as the verifier it names: the unit as the
	/// overturned proof commits it (its boundaries, from the proof's trace manifest, and the
	/// checkpoint the segment starts from, both fetched when this node checked its samples)
	/// in a folder of its own, so that the segment is re-executed from the proof's state and
	/// bound to the proof's boundary at its end, as this node attested it reaches.
	async fn summons_work(&self, at: &AtBlock, dispute: &Dispute) -> Result<UnitWork> {
		let overturned = dispute.summons.context("not a summons")?;
		let segment = dispute.segment.context("the summons names no segment")?;
		let proof = at.overturned(overturned).await?.context("the overturned proof is forgotten")?;
		let work = self.own_run(at, dispute.job, dispute.unit).await?;
		let manifest = self.trace_manifest(dispute.job, &work, &proof.trace.root).await?;
		let start = work.segments().range(segment).with_context(|| format!("the unit has no segment {segment}"))?.start;
		let checkpoint = match (start != work.first_step).then(|| manifest.checkpoint(start)) {
			Some(hash) => {
				let hash = hash.context("the proof's manifest names no checkpoint before the segment")?;
				let bytes = self.inputs.network.fetch(hash, FETCH_PATIENCE, Self::model_bound(&work)?).await;
				self.inputs.network.keep(dispute.job, Kind::Checkpoint, hash);
				Some(bytes.context("the checkpoint before the segment")?)
			},
			None => None,
		};
		// Named after its job first, for the sweeps.
		let dir = self.verdicts_dir.join("summons").join(format!("{}-{}-{overturned}-{segment}", dispute.job, dispute.unit));
		crate::dispute::defence_folder(work, dir, &manifest, segment, checkpoint.as_deref())
	}

	/// Summons the verifiers that attested a proof overturned without a step found, over
	/// the first segment where the proof leaves this node's own run of the unit: the proof
	/// agrees with an honest run before it, so that segment holds a lie, and a verifier that
	/// attested it re-executed nothing. Only a node that re-executed the whole unit (a
	/// challenger of the proof) knows the segment; others summon nobody. An attester this
	/// node has a summons open against is not summoned again.
	async fn summon_attesters(&self, at: &AtBlock) -> Result<()> {
		let now = at.block_number() as u32;
		let mut kept = at.storage().iter(runtime::storage().disputes().overturned(), ()).await?;
		let (mut open, mut summonable) = (Vec::new(), BTreeSet::new());
		while let Some(entry) = kept.next().await {
			let entry = entry?;
			let (id,) = entry.key()?.decode()?;
			let proof: crate::dispute::OverturnedProof = decode(entry.value().bytes())?;
			if now >= proof.summons_until {
				continue;
			}
			summonable.insert(id);
			let done = self.summoned.lock().map(|done| done.contains(&id)).unwrap_or(false);
			if !done {
				open.push((id, proof));
			}
		}
		if let Ok(mut summoned) = self.summoned.lock() {
			summoned.retain(|id| summonable.contains(id));
		}
		let done = |overturned| {
			if let Ok(mut summoned) = self.summoned.lock() {
				summoned.insert(overturned);
			}
		};
		for (overturned, proof) in open {
			let Ok(work) = self.own_run(at, proof.job, proof.unit).await else { continue };
			let work = self.against((proof.job, proof.unit), work, Some(&proof.trace.root))?;
			let mine = crate::train::saved_boundaries(&work.dir)?;
			if mine.len() != work.segments().count() as usize {
				done(overturned);
				continue;
			}
			let manifest = match self.trace_manifest(proof.job, &work, &proof.trace.root).await {
				Ok(manifest) => manifest,
				Err(error) => {
					tracing::warn!(job = proof.job, unit = proof.unit, "summons: no manifest of the overturned proof: {error:#}");
					continue;
				},
			};
			let theirs = manifest.boundaries();
			let Some(segment) = (0u32..).zip(mine.iter().zip(&theirs)).find(|(_, (a, b))| a != b).map(|(segment, _)| segment)
			else {
				done(overturned);
				continue;
			};
			let root = UnitBoundaries::new(mine).map_err(|error| anyhow!("{error:?}"))?.root();
			let start = UnitBoundaries::new(theirs)
				.map_err(|error| anyhow!("{error:?}"))?
				.start_opening(segment)
				.context("the proof's boundary before the segment")?;
			let mut refused = false;
			for (attester, samples) in proof.attesters.iter() {
				if *attester == self.me || !samples.contains(&segment) {
					continue;
				}
				let slot = ((overturned, attester.clone(), segment),);
				let open = at.storage().try_fetch(runtime::storage().disputes().summonses(), slot).await?;
				let ids: Vec<u64> = match open {
					Some(value) => decode(value.bytes())?,
					None => Vec::new(),
				};
				let mut mine_open = false;
				for id in ids {
					if let Some(dispute) = at.dispute(id).await? {
						mine_open |= dispute.challenger == self.me;
					}
				}
				if mine_open {
					continue;
				}
				let call = runtime::transactions().disputes().summon(
					overturned,
					attester.clone(),
					segment,
					root,
					start.clone().map(subxt::utils::Static),
				);
				match self.chain.send(&call, &self.signer).await {
					Ok(_) => tracing::warn!(job = proof.job, unit = proof.unit, %attester, segment, "summons: summoned a verifier that attested the lie"),
					Err(error) => {
						// Tried again next block: sybils' summonses holding the slots free them
						// as they lose.
						refused = true;
						tracing::warn!(job = proof.job, unit = proof.unit, %attester, segment, "summons: refused: {error:#}")
					},
				}
			}
			if !refused {
				done(overturned);
			}
		}
		Ok(())
	}

}

impl<C: Transactions> Verifier<C> {
	/// The file whose presence records that segment `sample` of the proof with `trace_root`
	/// of unit `index` of `job_id` reproduced on this node (the checked set, kept across
	/// restarts), named after its job first for the sweeps.
	fn checked_path(&self, (job_id, index): (JobId, UnitIndex), trace_root: &[u8; 32], sample: u32) -> PathBuf {
		self.verdicts_dir.join("checked").join(format!("{job_id}-{index}-{}-{sample}", hex(trace_root)))
	}

	fn verdict_path(&self, job: JobId, unit: UnitIndex, (trace_root, escalation): RoundId) -> PathBuf {
		let round = if escalation { "-escalation" } else { "" };
		self.verdicts_dir.join(format!("{job}-{unit}-{}{round}", hex(&trace_root)))
	}
}

/// A round, as a verdict file is named after it: the trace root of the proof it checks, and
/// whether it is an escalation.
type RoundId = ([u8; 32], bool);

/// How a round's verifiers attest, from its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attested {
	/// Exact mode: a match, or a mismatch with this node's trace root.
	ByMatch,
	/// Tolerance rounds and their escalations: a distance, and in a profiling round a
	/// profile too.
	ByDistance {
		/// Whether the round profiles the job.
		profiling: bool,
	},
}

/// How the verifiers of `round` attest, from its kind.
fn attested_by(round: &Round) -> Attested {
	match round.kind {
		RoundKind::Exact => Attested::ByMatch,
		RoundKind::Tolerance { profiling } => Attested::ByDistance { profiling },
		RoundKind::Escalation { .. } => Attested::ByDistance { profiling: false },
	}
}

/// A sampled segment that does not reproduce.
struct Divergence {
	/// The segment.
	segment: u32,
	/// Its first step.
	from: u32,
	/// This node's trace root against the proof ([`Verifier::splice`]).
	trace_root: [u8; 32],
}

/// Which segments of a unit to re-execute.
enum Samples<'a> {
	/// The ones the chain drew for this verifier.
	Drawn(&'a [u32]),
	/// This many, chosen at random here.
	Random(u32),
}

/// `wanted` distinct segments of `count` (all of them if there are fewer), chosen with
/// this machine's randomness.
fn random_segments(count: u32, wanted: u32) -> Result<Vec<u32>> {
	let mut left: Vec<u32> = (0..count).collect();
	let mut chosen = Vec::new();
	while chosen.len() < wanted as usize && !left.is_empty() {
		let mut bytes = [0u8; 4];
		getrandom::getrandom(&mut bytes).context("no randomness to choose segments")?;
		chosen.push(left.swap_remove(u32::from_le_bytes(bytes) as usize % left.len()));
	}
	Ok(chosen)
}

/// A verdict's name in the log.
fn verdict_name(verdict: &Verdict) -> &'static str {
	match verdict {
		Verdict::Match => "match",
		Verdict::Mismatch { .. } => "mismatch",
		Verdict::Measured { .. } => "distance",
	}
}

/// The larger of two distances, component by component.
fn componentwise_max(a: &Distance, b: &Distance) -> Distance {
	Distance { l2: a.l2.max(b.l2), linf: a.linf.max(b.linf), cosine: a.cosine.max(b.cosine) }
}

/// A distance as the chain takes it: fixed point with nine decimals. A distance too large
/// for it, or not a number (a diverged run), is the largest there is.
fn chain_distance(distance: &Distance) -> touchstone_primitives::Distance {
	let fixed = |value: f64| {
		let scaled = value * 1e9;
		if scaled.is_finite() && scaled < u64::MAX as f64 {
			FixedU64::from_inner(scaled.max(0.0).round() as u64)
		} else {
			FixedU64::from_inner(u64::MAX)
		}
	};
	touchstone_primitives::Distance { l2: fixed(distance.l2), linf: fixed(distance.linf), cosine: fixed(distance.cosine) }
}

#[cfg(test)]
mod tests {
	use super::*;

	/// The verifier's passes against a scripted chain ([`crate::scripted`]).
	mod passes {
		use super::*;
		use crate::scripted::{ScriptedChain, Sent};
		use pallet_touchstone_verification::{Attestation, DrawnRound, SolverSecret};

		/// A verifier (`//Charlie`) on `chain`, working in the folder `dir` (kept across
		/// calls: a second call is the same node restarted).
		async fn scripted_verifier(chain: &ScriptedChain, dir: &Path) -> Verifier<ScriptedChain> {
			#[derive(clap::Parser)]
			struct Cli {
				#[command(flatten)]
				verify: VerifyArgs,
			}
			let store = Store::open(&dir.join("store")).unwrap();
			let cli: Cli = clap::Parser::try_parse_from(["verify", "--key", "//Charlie", "--no-mdns"]).unwrap();
			let network_args =
				NetworkArgs { p2p_listen: Some("/ip4/127.0.0.1/tcp/0".parse().unwrap()), no_mdns: true, ..NetworkArgs::default() };
			let network = Network::start(&network_args, store.clone(), dir).await.unwrap();
			Verifier::new(chain.clone(), network, store, dir.to_owned(), cli.verify, Arc::default()).unwrap()
		}

		/// A round of an exact-mode proof with `trace_root`, drawn with `verifiers`, its
		/// commits open until block 110 and its reveals until 120.
		fn round(trace_root: [u8; 32], verifiers: &[(AccountId, AttestationState)]) -> Round {
			let attestations = verifiers.iter().map(|(verifier, state)| Attestation { verifier: verifier.clone(), state: state.clone() });
			Round {
				trace_root,
				committed_at: 90,
				drawn: Some(DrawnRound { seed: [3; 32], commit_ends: 110, reveal_ends: 120 }),
				kind: RoundKind::Exact,
				attestations: attestations.collect::<Vec<_>>().try_into().unwrap(),
				concluded: false,
				secret: SolverSecret::NotRequired,
			}
		}

		/// A drawn verifier commits the verdict it saved while the commit period runs,
		/// reveals it once the reveal period opens (restarted in between: the verdict and
		/// salt come from its data directory), and sends nothing once the reveals are over;
		/// each duty once while its transaction is on its way.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_drawn_verifier_commits_then_reveals_its_saved_verdict_across_a_restart() {
			let dir = std::env::temp_dir().join(format!("touchstone-verifier-rounds-{}", std::process::id()));
			let _ = std::fs::remove_dir_all(&dir);
			let chain = ScriptedChain::default();
			let mut verifier = scripted_verifier(&chain, &dir).await;
			let me = verifier.me.clone();
			let (trace_root, salt) = ([5; 32], [6; 32]);
			let round_id = (trace_root, false);
			crate::store::write_atomically(&verifier.verdict_path(0, 0, round_id), &(Verdict::Match, salt).encode()).unwrap();
			chain.script(|at| {
				at.number = 100;
				at.rounds.insert((0, 0), round(trace_root, &[(me.clone(), AttestationState::Drawn)]));
			});
			let key = |duty: &str| format!("round 0 0 {} false {duty}", hex(&trace_root));
			let sent = |duty: &str, call: &str| Sent { key: key(duty), call: call.to_owned() };
			verifier.rounds_pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("commit", "Verification.commit")]);
			chain.script(|at| at.number += 1);
			verifier.rounds_pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [], "the commitment is on its way");

			drop(verifier);
			let mut verifier = scripted_verifier(&chain, &dir).await;
			let commitment = digest_bytes(&(&Verdict::Match, &salt, &me).encode());
			chain.land_all();
			chain.script(|at| {
				at.number = 110;
				let committed = AttestationState::Committed(commitment.into());
				at.rounds.insert((0, 0), round(trace_root, &[(me.clone(), committed)]));
			});
			verifier.rounds_pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("reveal", "Verification.reveal")], "revealed after the restart");

			chain.land_all();
			chain.script(|at| at.number = 120);
			verifier.rounds_pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [], "the reveal period is over");
		}
	}
}

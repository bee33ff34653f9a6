//! The solver role: register and bond, take units the hardware can train, train them
//! with checkpoints, commit the learning proofs, and collect pay once their challenge
//! windows pass.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, ensure, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use subxt::utils::Static;
use subxt_signer::sr25519::Keypair;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::fault::Fault;
use touchstone_kernels_wgpu::WgpuBackend;
use touchstone_primitives::referee::BoundaryOpening;
use touchstone_primitives::{Checkpoint, JobId, LearningProof, Role, UnitIndex, UnitState, VerificationMode};

use crate::chain::{runtime, AccountId, AtBlock, BestBlocks, Chain, Heartbeat, Job, Settled, WorkUnit};
use crate::state::{ChainState, Transactions};
use crate::dispute::Party;
use crate::forced::{BoundSecret, ForcedUnit, Secrets};
use crate::hardware::{self, Detected};
use crate::inputs::Inputs;
use crate::jobfile::UNIT;
use crate::metrics::Metrics;
use crate::p2p::{Network, NetworkArgs};
use crate::store::{Kind, Store};
use crate::train::{self, run_unit_on, BackendKind, Device, Progress, UnitWork};

/// Blocks a unit's deadline must leave when the solver commits its forced-error secret:
/// what the chain requires (its randomness may take up to 17 blocks, the proof one or
/// two more); with less, `commit_secret` fails with `DeadlineTooClose`.
const SECRET_MARGIN_BLOCKS: u32 = pallet_touchstone_verification::SECRET_DEADLINE_MARGIN;

/// How much slower than its trial step a solver assumes a segment runs: checkpoint
/// files, the checkpoint's transaction, and a busy machine.
const SEGMENT_TIME_MARGIN: f64 = 1.5;

/// Whether a segment of `segment_steps` steps at `step_seconds` a step, with the
/// [`SEGMENT_TIME_MARGIN`], fits the `unit_timeout` blocks of `block_seconds` each that a
/// deadline gives, less the [`SECRET_MARGIN_BLOCKS`] the proof needs after the last one.
fn deadline_admits(step_seconds: f64, segment_steps: u32, unit_timeout: u32, block_seconds: f64) -> Result<()> {
	let needed = step_seconds * f64::from(segment_steps) * SEGMENT_TIME_MARGIN;
	let allowed = f64::from(unit_timeout.saturating_sub(SECRET_MARGIN_BLOCKS)) * block_seconds;
	ensure!(
		needed <= allowed,
		"a checkpoint segment of {segment_steps} steps takes about {needed:.0} s here ({:.1} ms a step, with a margin of \
		 {SEGMENT_TIME_MARGIN}×), and the unit's timeout of {unit_timeout} blocks leaves {allowed:.0} s between \
		 checkpoints: it would time out",
		step_seconds * 1e3
	);
	Ok(())
}

/// What `solve` is told.
#[derive(Clone, Debug, clap::Args)]
pub struct SolveArgs {
	#[command(flatten)]
	pub key: crate::keys::KeyArgs,
	/// The device to train on. Exact-mode jobs train bit for bit on `cpu` or `wgpu`; with
	/// `tch`, tolerance-mode jobs train on libtorch (CUDA when present) and exact-mode
	/// jobs on the CPU reference.
	#[arg(long, value_enum, default_value = "cpu")]
	pub backend: BackendKind,
	/// The solver bond to post when registering, in TST (at least the chain's minimum).
	#[arg(long, default_value_t = 150.0)]
	pub bond: f64,
	/// The least this solver takes per unit, in TST: it is offered only units paying this much.
	#[arg(long, default_value_t = 0.01)]
	pub min_price: f64,
	/// How many devices train at once, each its own unit, under this one account: the first
	/// N GPUs the backend sees (for `tch`, the first N that `CUDA_VISIBLE_DEVICES` shows;
	/// for `wgpu`, the first N adapters that pass the conformance self-test), or N trainers
	/// on the CPU, which share its cores. The chain sees one solver with the first device's
	/// profile.
	#[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
	pub devices: u16,
	/// Region tag declared on registration.
	#[arg(long, default_value = "local")]
	pub region: String,
	/// Serve Prometheus metrics at this address (for example 127.0.0.1:9616).
	#[arg(long)]
	pub metrics: Option<std::net::SocketAddr>,
	#[command(flatten)]
	pub network: NetworkArgs,
	/// Test equipment, never for real work: corrupt one value at this global step of every
	/// unit that contains it (a first-layer output in exact mode, a weight in tolerance
	/// mode), commit the corrupted proof and defend it as if it were honest. Verifiers and
	/// challengers catch it and the bond is slashed; it exists to rehearse a dispute (exact
	/// mode) or an escalation (tolerance mode: aim at a unit's last step) against a
	/// dishonest solver end to end. Only in a build with the `test-equipment` feature.
	#[cfg(feature = "test-equipment")]
	#[arg(long, value_name = "STEP", hide = true)]
	pub inject_fault: Option<u32>,
	/// Test equipment, never for real work: answer no dispute, as a liar that lets a sybil
	/// convict it by timeout would, so that the conviction finds no step and its attesters
	/// must be summoned. Only in a build with the `test-equipment` feature.
	#[cfg(feature = "test-equipment")]
	#[arg(long, hide = true)]
	pub abandon_disputes: bool,
	/// Test equipment, never for real work: corrupt the first round's aggregate this
	/// solver computes (one low mantissa bit of the word in the middle of the next global
	/// state, or 1 for a zero), commit it and serve it as if honest. Watchers recompute
	/// it, challenge it at the chunk holding the lie and the solver is slashed; it exists
	/// to rehearse `disputes.challenge_aggregate` end to end. Only in a build with the
	/// `test-equipment` feature.
	#[cfg(feature = "test-equipment")]
	#[arg(long, hide = true)]
	pub lie_in_aggregate: bool,
}

/// The fault `--inject-fault` injects at global step `step` of a unit trained with `work`,
/// in a job verified in `mode`.
/// In an exact-mode job: a low mantissa bit of the first layer's output, which every later
/// value of the step depends on, a lie only bit-exact re-execution sees; in a transformer,
/// a mantissa bit of the first block's attention (the first query's weight on itself), so
/// that the dispute ends in an attention piece. In a
/// tolerance-mode job: the top exponent bit of the first parameter as the optimizer updates
/// it (a weight below 2 becomes about 10³⁷), a lie far beyond any hardware's rounding, which
/// verifiers measure beyond the job's thresholds; a low bit would sit inside them, where
/// tolerance mode by design does not look. The next forward pass overflows on such a
/// weight, and the trainer stops rather than commit a non-finite step, so a tolerance-mode
/// rehearsal aims at a unit's last step.
#[cfg(feature = "test-equipment")]
pub(crate) fn injected_fault(step: u32, mode: &VerificationMode, work: &UnitWork) -> Result<Fault> {
	use touchstone_kernels::proof::graph::{Graph, OpKind};
	let graph = || Graph::build(&work.model, &work.train).map_err(|error| anyhow!("the job's step graph: {error:?}"));
	Ok(match mode {
		VerificationMode::Exact => {
			let operator = match work.model {
				touchstone_kernels::job::model::ModelConfig::Transformer(_) => graph()?
					.nodes
					.iter()
					.position(|node| matches!(node.kind, OpKind::CausalSoftmax(_)))
					.context("the transformer's step has no attention")?,
				_ => 1,
			};
			Fault::Output { step, operator, output: 0, element: 0, bit: 20 }
		},
		VerificationMode::Tolerance { .. } => {
			let operator = graph()?
				.nodes
				.iter()
				.position(|node| matches!(node.kind, OpKind::Sgd(_) | OpKind::AdamW(_)))
				.context("the job's step has no optimizer")?;
			Fault::Output { step, operator, output: 0, element: 0, bit: 30 }
		},
	})
}

/// A solver, on the chain `C` ([`Chain`]; a scripted chain in tests).
pub struct Solver<C = Chain> {
	chain: C,
	/// The device this solver trains on: one of the process's devices ([`Slots`]).
	device: Device,
	/// The process's devices, which share the account's units.
	slots: Arc<Slots>,
	/// Set while the account is short of fees ([`BestBlocks::low_funds_flag`]): no new work.
	low_funds: Arc<AtomicBool>,
	signer: Keypair,
	me: AccountId,
	inputs: Inputs,
	args: SolveArgs,
	detected: Detected,
	metrics: &'static Metrics,
	stop: Arc<AtomicBool>,
	/// Units this process gave up on (cannot train them): not claimed again while they stay
	/// in the pool, and forgotten once they leave it.
	refused: BTreeSet<(JobId, UnitIndex)>,
	/// The forced-error secrets of the units it took, and its forced units' reveals, on disk.
	secrets: Secrets,
	heartbeat: Heartbeat,
	/// The data directory's sweeps ([`crate::retention`]).
	sweeps: crate::retention::Sweeps,
	/// The unit training on the device, if one is.
	training: Option<Training>,
	/// The trained unit whose proof is not committed yet, if one is.
	proving: Option<Proving>,
	/// The step range after the proving unit, trained ahead and its proof prepared while
	/// the chain has not made it ready: its secret's commitment goes with the proof of
	/// the range before ([`Self::follow_proof`]), which takes it in the same block, and
	/// it is proven next.
	next_proof: Option<Proving>,
	/// The work prepared for the unit weighed last ([`Solver::ready_to_take`]), which its
	/// training starts from rather than read and check its inputs again.
	prepared: Option<Prepared>,
	/// Rounds' aggregates this solver computed for the aggregate units it takes, until
	/// their commitment lands.
	aggregated: std::collections::HashMap<(JobId, UnitIndex), crate::aggregate::Aggregated>,
	/// What the transactions this solver handed over came to, for its next pass.
	landed: Landed,
	/// The pool unit whose claim was handed over last: while the claim is on its way the
	/// device is spoken for.
	claiming: Option<(JobId, UnitIndex)>,
}

/// The devices of one solver process (`--devices`), which train under one account: which
/// device each unit is, and which devices are busy. A unit is one device's from the pass
/// that takes it (to train, claim, accept or defend) until it leaves the account; an offer
/// is declined only when every device is busy, and left to a free one otherwise.
#[derive(Debug)]
struct Slots(std::sync::Mutex<SlotsInner>);

#[derive(Debug)]
struct SlotsInner {
	/// Each unit taken, by the device that took it (its ordinal).
	owners: std::collections::BTreeMap<(JobId, UnitIndex), usize>,
	/// Whether each device's last pass found it busy.
	busy: Vec<bool>,
}

impl Slots {
	/// `devices` devices, none busy and holding nothing.
	fn new(devices: usize) -> Self {
		Self(std::sync::Mutex::new(SlotsInner { owners: Default::default(), busy: vec![false; devices] }))
	}

	fn inner(&self) -> std::sync::MutexGuard<'_, SlotsInner> {
		self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}

	/// Takes `unit` for `device` unless another device has it; whether it is `device`'s.
	fn take(&self, unit: (JobId, UnitIndex), device: usize) -> bool {
		*self.inner().owners.entry(unit).or_insert(device) == device
	}

	/// Whether `unit` is another device's than `device`.
	fn others(&self, unit: (JobId, UnitIndex), device: usize) -> bool {
		self.inner().owners.get(&unit).is_some_and(|&owner| owner != device)
	}

	/// Lets go of `unit`, if `device` has it.
	fn release(&self, unit: (JobId, UnitIndex), device: usize) {
		let mut inner = self.inner();
		if inner.owners.get(&unit) == Some(&device) {
			inner.owners.remove(&unit);
		}
	}

	/// Lets go of every unit of `device` but those `keep` names.
	fn release_all_but(&self, device: usize, keep: impl Fn(&(JobId, UnitIndex)) -> bool) {
		self.inner().owners.retain(|unit, owner| *owner != device || keep(unit));
	}

	/// Records whether `device` is busy.
	fn set_busy(&self, device: usize, busy: bool) {
		if let Some(flag) = self.inner().busy.get_mut(device) {
			*flag = busy;
		}
	}

	/// How many devices the process trains on.
	fn devices(&self) -> usize {
		self.inner().busy.len()
	}

	/// Whether every device but `device` was busy at its last pass.
	fn others_busy(&self, device: usize) -> bool {
		self.inner().busy.iter().enumerate().all(|(ordinal, busy)| ordinal == device || *busy)
	}
}

/// Work prepared for a unit, with the unit and the state root it was prepared from.
struct Prepared {
	key: (JobId, UnitIndex),
	start_root: Option<[u8; 32]>,
	work: UnitWork,
}

/// What a transaction the solver handed over came to, when its next pass must act on it:
/// filled by the transactions' tasks, emptied by the pass ([`Solver::take_landed`]).
#[derive(Clone, Default)]
struct Landed(Arc<std::sync::Mutex<Vec<Outcome>>>);

/// An outcome a pass acts on.
#[derive(Clone, Copy, Debug)]
enum Outcome {
	/// A claim of the unit was refused: a range trained ahead of it is left to others.
	ClaimRefused((JobId, UnitIndex)),
}

impl Landed {
	fn outcomes(&self) -> std::sync::MutexGuard<'_, Vec<Outcome>> {
		self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}

	/// Adds an outcome for the next pass.
	fn push(&self, outcome: Outcome) {
		self.outcomes().push(outcome);
	}

	/// The outcomes since the last call (at most a few per pass: one per transaction).
	fn take(&self) -> Vec<Outcome> {
		std::mem::take(&mut *self.outcomes())
	}
}

/// A unit training on its own thread while the solver's passes go on.
struct Training {
	key: (JobId, UnitIndex),
	/// The state root the unit starts from.
	start_root: [u8; 32],
	/// The unit's end: the step after its last.
	end: u32,
	/// Whether the job is verified in exact mode (and so owes a forced-error secret).
	exact: bool,
	/// The newest checkpoint the thread has written and stored.
	checkpoints: tokio::sync::watch::Receiver<Option<Checkpoint>>,
	thread: tokio::task::JoinHandle<Result<Option<(train::UnitResult, UnitWork)>>>,
	/// Set to stop the thread at its next step.
	halt: Arc<AtomicBool>,
	/// The step of the last checkpoint committed on chain, as the last pass read it.
	last_committed: u32,
	bar: ProgressBar,
}

/// A trained unit whose proof waits to be committed.
struct Proving {
	key: (JobId, UnitIndex),
	honest: LearningProof,
	final_state: BoundaryOpening,
	/// The forced-error secret saved for the unit (committed by [`Solver::follow_proof`]),
	/// when forced errors are on.
	forced: Option<ForcedPlan>,
}

/// A saved forced-error secret and what it makes the solver commit if it is drawn.
struct ForcedPlan {
	bound: BoundSecret,
	/// The step the forced proof gets wrong, that proof and its final-state opening;
	/// `None` when the unit has no step to force.
	forced: Option<(u32, (LearningProof, BoundaryOpening))>,
}

/// The deadline a proof is prepared against.
#[derive(Clone, Copy, Debug)]
enum Deadline {
	/// The unit's own on chain: it is held.
	Held,
	/// A full unit timeout away: the unit is taken with the proof of the range before,
	/// and the caller checked that the timeout leaves the secret's margin.
	Taken,
}

/// Where a unit training here stands on chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
	/// Accepted by this solver: its checkpoints and proof go on chain.
	Ours,
	/// Trained ahead of the chain: the range before it is this solver's and not proven
	/// yet, or it is offered to this solver and not yet accepted.
	Ahead,
	/// Ready and waiting in the pool, and not passed on by this solver: it claims it.
	InPool,
	/// Another solver's, or no unit to train any more: training stops.
	Lost,
}

/// The key the transaction `what` of a unit is handed over by ([`Chain::send_in_background`]).
fn unit_duty(job_id: JobId, index: UnitIndex, what: &str) -> String {
	format!("unit {job_id} {index} {what}")
}

/// Where `unit`, trained here from `start_root`, stands for solver `me`.
fn standing(unit: Option<&WorkUnit>, predecessor: Option<&WorkUnit>, me: &AccountId, start_root: &[u8; 32]) -> Standing {
	let Some(unit) = unit else { return Standing::Lost };
	// The chain anchored the unit elsewhere (the range before it proved another end).
	if unit.start_state_root.is_some_and(|root| root.0 != *start_root) {
		return Standing::Lost;
	}
	match unit.state {
		UnitState::Assigned if unit.solver.as_ref() == Some(me) => {
			if unit.accepted {
				Standing::Ours
			} else {
				Standing::Ahead
			}
		},
		// Waiting on a range before it that this solver proves. Not on one in the pool or
		// another's, nor on one rolled back with it (an overturned proof further back): that
		// range is not this solver's to prove next, so the device is held for nothing while
		// the range that is due goes untrained, by this solver too.
		UnitState::Waiting => match predecessor {
			Some(before)
				if before.solver.as_ref() == Some(me) &&
					matches!(before.state, UnitState::Assigned | UnitState::Proven | UnitState::Verifying | UnitState::Challenged) =>
				Standing::Ahead,
			_ => Standing::Lost,
		},
		UnitState::Pending if unit.passed_by.as_ref() != Some(me) => Standing::InPool,
		_ => Standing::Lost,
	}
}

/// A solver following the best blocks: one pass at each ([`crate::chain::run_every_block`]).
struct Running {
	solver: Solver,
	best: BestBlocks,
}

impl crate::chain::EveryBlock for Running {
	async fn pass(&mut self) -> Result<()> {
		// Work is read at the best block, so a unit is trained without waiting for
		// finality; only paying out (finalize) waits for it.
		let at = self.best.at().await?;
		self.solver.tick(&at).await
	}

	fn best_blocks(&mut self) -> &mut BestBlocks {
		&mut self.best
	}

	fn account(&self) -> &AccountId {
		&self.solver.me
	}
}

/// The GPU `backend` trains on as device `ordinal`, if it trains on one.
fn gpu_of(backend: BackendKind, ordinal: usize) -> Result<Option<hardware::Gpu>> {
	Ok(match backend {
		BackendKind::Cpu => None,
		BackendKind::Wgpu => {
			let backend = WgpuBackend::nth(ordinal).map_err(|error| {
				anyhow!("no usable GPU adapter for device {ordinal}: {error}. Install a Vulkan driver, ask for fewer --devices, or train on the CPU with --backend cpu")
			})?;
			Some(hardware::Gpu { name: backend.adapter_description(), memory_mib: None, nvidia_id: None })
		},
		BackendKind::Tch => {
			let cuda = hardware::torch_cuda(ordinal);
			match &cuda {
				Some(gpu) => tracing::info!(device = %gpu.name, ordinal, "libtorch sees a CUDA device: tolerance-mode jobs train on it"),
				// Some devices on CUDA and some on the CPU would be matched to work by the first's profile.
				None if ordinal > 0 && hardware::torch_cuda(0).is_some() => {
					bail!("libtorch sees no CUDA device {ordinal} (counting from 0): ask for fewer --devices, or make more visible with CUDA_VISIBLE_DEVICES")
				},
				None => tracing::info!(ordinal, "libtorch sees no CUDA device: tolerance-mode jobs train on libtorch's CPU kernels"),
			}
			cuda
		},
	})
}

/// A solver's devices in one process (`--devices`), each a [`Solver`] with a training slot
/// of its own, under one account.
pub struct Solvers(Vec<Solver>);

impl Solver {
	/// Detects the hardware and prepares a solver on each of `--devices` devices; nothing
	/// is sent yet.
	pub fn new(
		chain: Chain,
		network: Network,
		store: Store,
		data_dir: PathBuf,
		args: SolveArgs,
		stop: Arc<AtomicBool>,
	) -> Result<Solvers> {
		if let Some(address) = args.metrics {
			crate::metrics::serve(address);
		}
		let me = args.key.keypair()?.public_key().to_account_id();
		let inputs = Inputs { store, network, units_dir: data_dir.join("units"), me, datasets: Default::default() };
		let devices = usize::from(args.devices);
		let slots = Arc::new(Slots::new(devices));
		let heartbeat = Heartbeat::default();
		let mut solvers = Vec::with_capacity(devices);
		for ordinal in 0..devices {
			let detected = hardware::detect(gpu_of(args.backend, ordinal)?, &args.region)?;
			let device = Device { backend: args.backend, ordinal };
			let mut solver = Self::on(chain.clone(), inputs.clone(), &data_dir, args.clone(), detected, device, slots.clone(), stop.clone())?;
			// One heartbeat for the account, whichever device's pass finds it due.
			solver.heartbeat = heartbeat.clone();
			solvers.push(solver);
		}
		Ok(Solvers(solvers))
	}
}

impl Solvers {
	/// Registers (with the first device's profile), advertises the endpoint, and runs every
	/// device's passes until `stop` is set, or until one stops on a condition no retry cures,
	/// which stops the others: it concerns the account.
	pub async fn run(self) -> Result<()> {
		let mut solvers = self.0;
		let devices = solvers.len();
		let first = solvers.first_mut().context("a solver trains on at least one device")?;
		tracing::info!(
			account = %first.me,
			devices,
			device = %String::from_utf8_lossy(&first.detected.profile.model),
			memory_mib = first.detected.profile.memory_mib,
			gflops = first.detected.profile.throughput_gflops,
			"solver starting"
		);
		first.ensure_registered().await?;
		if let Err(error) = first.advertise_endpoint().await {
			tracing::warn!("the endpoint is not advertised on-chain: {error:#}");
		}
		let (best, stop) = (first.chain.follow_best(), first.stop.clone());
		let mut devices = tokio::task::JoinSet::new();
		for mut solver in solvers {
			solver.low_funds = best.low_funds_flag();
			let (best, stop) = (best.clone(), stop.clone());
			devices.spawn(async move {
				// Training stops at the step it is in (see `stop_training`), and the unit
				// resumes from its last checkpoint on restart.
				let mut running = Running { solver, best };
				let outcome = crate::chain::run_every_block(&mut running, &stop).await;
				running.solver.stop_training().await;
				outcome
			});
		}
		let mut outcome = Ok(());
		while let Some(joined) = devices.join_next().await {
			let ended = joined.context("a device's task failed").and_then(|ended| ended);
			if ended.is_err() && outcome.is_ok() {
				stop.store(true, std::sync::atomic::Ordering::Relaxed);
				outcome = ended;
			}
		}
		outcome?;
		tracing::info!("solver stopped");
		Ok(())
	}
}

impl Solver {
	/// Registers as a solver with the bond, unless registered already.
	async fn ensure_registered(&mut self) -> Result<()> {
		let min_price = (self.args.min_price * UNIT as f64) as u128;
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Solver, self.args.bond, profile, min_price).await?;
		self.heartbeat.sent();
		Ok(())
	}

	/// Advertises on-chain where this worker accepts peers (`--p2p-external`, or else its
	/// listening address), unless the chain already holds that address. On a live chain
	/// only a publicly routable address is advertised ([`crate::p2p::routable`]).
	async fn advertise_endpoint(&mut self) -> Result<()> {
		let public = self.chain.is_live().await?;
		let Some(address) = self.inputs.network.advertised(self.args.network.p2p_external.as_ref(), public).await? else {
			let which = if public { "no public address to advertise on this live chain" } else { "listening on no specific address" };
			tracing::warn!("{which}: pass --p2p-external with the address peers reach this worker at");
			return Ok(());
		};
		let text = address.to_string();
		let at = self.chain.at().await?;
		if at.endpoint(&self.me).await?.as_deref() == Some(text.as_str()) {
			return Ok(());
		}
		let endpoint = runtime::runtime_types::bounded_collections::bounded_vec::BoundedVec(text.clone().into_bytes());
		self.chain.send_in_block(&runtime::transactions().staking().set_endpoint(Some(endpoint)), &self.signer).await?;
		tracing::info!(%address, "advertised the artifact endpoint on-chain");
		Ok(())
	}

	/// One pass at the best block `at`: the heartbeat and the data directory's sweeps when
	/// due, then the solver's duties ([`Self::pass`]).
	async fn tick(&mut self, at: &AtBlock) -> Result<()> {
		self.metrics.peers.set(self.inputs.network.peers().await.len() as u64);
		let now = at.number();
		self.heartbeat.send_if_due(&self.chain, now.into(), &self.signer);
		// The devices share the data directory: one sweeps it.
		if self.device.ordinal == 0 {
			self.sweeps.sweep_if_due(&self.chain, now.into(), &self.inputs.store).await;
		}
		self.pass(at).await
	}
}

impl<C: Transactions> Solver<C> {
	/// A solver on `chain` that works in `data_dir` on `device`, one of the process's `slots`,
	/// detected as `detected`; nothing is sent yet.
	#[allow(clippy::too_many_arguments)]
	fn on(
		chain: C,
		inputs: Inputs,
		data_dir: &std::path::Path,
		args: SolveArgs,
		detected: Detected,
		device: Device,
		slots: Arc<Slots>,
		stop: Arc<AtomicBool>,
	) -> Result<Self> {
		let signer = args.key.keypair()?;
		let me = signer.public_key().to_account_id();
		let secrets = Secrets::open(data_dir.join("secrets"))?;
		let sweeps = crate::retention::Sweeps::over(vec![inputs.units_dir.clone(), secrets.dir().to_owned()]);
		Ok(Self {
			chain,
			device,
			slots,
			low_funds: Arc::default(),
			inputs,
			signer,
			me,
			args,
			detected,
			metrics: crate::metrics::get(),
			stop,
			refused: BTreeSet::new(),
			secrets,
			heartbeat: Heartbeat::default(),
			sweeps,
			training: None,
			proving: None,
			next_proof: None,
			prepared: None,
			aggregated: Default::default(),
			landed: Landed::default(),
			claiming: None,
		})
	}

	/// One pass over the chain, at every best block, whatever is training: take the
	/// training unit's checkpoints and, once it is trained, commit its proof; answer
	/// offers; reveal the secrets and answer the disputes of proven units; finalize what
	/// is due; and, when the device is free, train an accepted unit or claim one from the
	/// pool. Training runs on its own thread and nothing here waits for it: a reveal or a
	/// dispute move missed while a long range trains costs bond. Nor does it wait for its
	/// own transactions: each is handed over ([`Chain::send_in_background`]), and the next
	/// pass reads what it came to from the chain, or from [`Self::take_landed`].
	async fn pass(&mut self, at: &impl ChainState) -> Result<()> {
		self.take_landed().await;
		let now = at.number();
		let window = at.challenge_window()?;
		let mut held = at.solver_units(&self.me).await?;
		held.sort_unstable();
		// A unit this device no longer trains, proves or claims, and that the account no
		// longer holds, is left to every device again.
		let slot = self.device.ordinal;
		let own = [
			self.training.as_ref().map(|training| training.key),
			self.proving.as_ref().map(|proving| proving.key),
			self.next_proof.as_ref().map(|next| next.key),
			self.claiming,
		];
		self.slots.release_all_but(slot, |key| held.contains(key) || own.contains(&Some(*key)));
		let mut units = Vec::with_capacity(held.len());
		for (job_id, index) in held {
			// Another device's unit is its own business.
			if self.slots.others((job_id, index), slot) {
				continue;
			}
			if let (Some(job), Some(unit)) = (at.job(job_id).await?, at.unit(job_id, index).await?) {
				units.push(((job_id, index), job, unit));
			}
		}
		// An aggregate is kept until its commitment lands (or its claim is refused).
		self.aggregated.retain(|key, _| {
			self.claiming == Some(*key) || units.iter().any(|(held, _, unit)| held == key && unit.state == UnitState::Assigned)
		});
		let still_training = |key: (JobId, UnitIndex)| {
			units.iter().any(|(held, _, unit)| *held == key && unit.state == UnitState::Assigned && unit.accepted)
		};
		// One unit's trouble is reported and must not cost another unit its reveal.
		if let Err(error) = self.follow_training(at).await {
			tracing::warn!("training: {error:#}");
		}
		if let Err(error) = self.follow_proof(at, still_training).await {
			tracing::warn!("proof: {error:#}");
		}
		let waiting_for_proof = self.proving.as_ref().map(|proving| proving.key);
		// The device is spoken for while a unit trains or waits its turn to: an offer
		// accepted now would run its deadline down while it waits.
		let claim_on_its_way = self.claiming.is_some_and(|(job_id, index)| {
			!units.iter().any(|(key, _, _)| *key == (job_id, index)) &&
				self.chain.is_handed_over(&unit_duty(job_id, index, "claimed"), now.into())
		});
		let mut device_busy = self.training.is_some() ||
			self.next_proof.is_some() ||
			claim_on_its_way ||
			units.iter().any(|(key, _, unit)| {
				unit.state == UnitState::Assigned && unit.accepted && Some(*key) != waiting_for_proof && !crate::aggregate::is_aggregate(unit)
			});
		self.slots.set_busy(slot, device_busy);
		for ((job_id, index), job, unit) in &units {
			let (job_id, index) = (*job_id, *index);
			let outcome = match unit.state {
				// The range this solver trains ahead, offered to it: taken at once.
				UnitState::Assigned if !unit.accepted && self.training.as_ref().map(|training| training.key) == Some((job_id, index)) => {
					self.accept(now, job_id, index);
					Ok(())
				},
				// An aggregate computed when its offer was weighed: accepted without
				// computing it again while the acceptance is on its way.
				UnitState::Assigned if !unit.accepted && self.aggregated.contains_key(&(job_id, index)) => {
					self.accept(now, job_id, index);
					Ok(())
				},
				// An aggregate trains nothing: a busy device does not stop this solver
				// taking one.
				UnitState::Assigned if !unit.accepted && crate::aggregate::is_aggregate(unit) => {
					self.answer_offer(at, now, job_id, index, job, unit, false).await.map(|_| ())
				},
				UnitState::Assigned if !unit.accepted => {
					let answered = self.answer_offer(at, now, job_id, index, job, unit, device_busy).await;
					answered.map(|accepted| {
						device_busy |= accepted;
						self.slots.set_busy(slot, device_busy);
					})
				},
				UnitState::Assigned if crate::aggregate::is_aggregate(unit) => {
					if self.slots.take((job_id, index), slot) {
						self.submit_aggregate(at, now, job_id, index, job, unit).await
					} else {
						Ok(())
					}
				},
				UnitState::Assigned => {
					let taken = self.training.as_ref().map(|training| training.key) == Some((job_id, index)) ||
						waiting_for_proof == Some((job_id, index));
					if taken || self.training.is_some() || !self.slots.take((job_id, index), slot) {
						Ok(())
					} else {
						self.start_training(job_id, index, job, unit)
					}
				},
				UnitState::Proven | UnitState::Challenged if self.slots.take((job_id, index), slot) => {
					self.proven_duties(at, (now, window), job_id, index, job, unit).await
				},
				_ => Ok(()),
			};
			if let Err(error) = outcome {
				tracing::warn!(job = job_id, unit = index, "{error:#}");
			}
		}
		// A proven unit waiting out its window, or a proof waiting for its randomness, does
		// not keep the solver from taking more work.
		if device_busy || self.training.is_some() {
			return Ok(());
		}
		self.claim_from_pool(at).await
	}

	/// Acts on what the transactions handed over came to since the last pass: a range
	/// trained ahead whose claim was refused stops (it would be refused again: the range
	/// is left to others).
	async fn take_landed(&mut self) {
		for outcome in self.landed.take() {
			match outcome {
				Outcome::ClaimRefused(key) => {
					// Accepted as an offer meanwhile, the unit is this solver's all the same.
					if self.claiming != Some(key) {
						continue;
					}
					self.claiming = None;
					if self.training.as_ref().is_some_and(|training| training.key == key) {
						tracing::info!(job = key.0, unit = key.1, "the claim was refused: training ahead stopped");
						self.stop_training().await;
					}
				},
			}
		}
	}

	/// What a proven unit owes: its forced-error reveal, its dispute moves (unless its
	/// proof is forced: its error is deliberate, and the reveal dismisses every dispute
	/// over it), and its finalization once its window has passed and, for a step range,
	/// its predecessor is final. Each is handed over ([`Chain::send_in_background`]): the
	/// duties of every unit due together go out in one block, whatever trains meanwhile.
	async fn proven_duties(
		&mut self,
		at: &impl ChainState,
		(now, window): (u32, u32),
		job_id: JobId,
		index: UnitIndex,
		job: &Job,
		unit: &WorkUnit,
	) -> Result<()> {
		self.reveal_secret(at, job_id, index, unit).await?;
		if self.secrets.forced(job_id, index).is_none() {
			self.defend(at, job_id, index, job, unit).await?;
		}
		if unit.state == UnitState::Challenged {
			return Ok(());
		}
		let due = unit.proven_at.is_some_and(|at| now >= at.saturating_add(window));
		// The chain's rule: a unit is finalized only after every unit it started from.
		let mut predecessor_final = true;
		for previous in job.spec.decomposition.predecessors(index, &unit.scope) {
			predecessor_final &= at.unit(job_id, previous).await?.is_some_and(|u| u.state == UnitState::Finalized);
		}
		// The chain finalizes a unit only once its verification round has concluded: asking
		// earlier is refused (`FinalizationBlocked`) and costs a fee every block.
		let round_open = due && at.round(job_id, index).await?.is_some_and(|round| !round.concluded);
		if due && predecessor_final && !round_open {
			self.finalize(now, job_id, index);
		}
		Ok(())
	}

	/// Answers an offer: declines it while the device is busy (accepting would start its
	/// deadline while it waits), accepts it if this machine can train it, or declines it
	/// with the reason. Returns whether it accepted.
	async fn answer_offer(&mut self, at: &impl ChainState, now: u32, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit, device_busy: bool) -> Result<bool> {
		// Declined already, the decline on its way (or waiting to be sent again): an
		// acceptance now would race it, and weighing the unit again costs a fetch.
		if self.chain.is_handed_over(&unit_duty(job_id, index, "declined"), now.into()) {
			return Ok(false);
		}
		let key = (job_id, index);
		// Another device of this process may be free: the offer is left to it.
		if device_busy && !self.slots.others_busy(self.device.ordinal) {
			return Ok(false);
		}
		if !device_busy && !self.slots.take(key, self.device.ordinal) {
			return Ok(false);
		}
		let verdict = if device_busy {
			let which = if self.slots.devices() == 1 { "the device is" } else { "every device is" };
			Err(anyhow!("{which} training another unit"))
		} else if self.low_funds.load(std::sync::atomic::Ordering::Relaxed) {
			Err(anyhow!("the account is short of fees for the transactions a unit needs: fund it"))
		} else {
			match self.ready_to_take(at, job_id, index, job, unit).await {
				Ok(()) => Ok(()),
				Err(reason) => {
					// Not for this machine at all: neither offered nor claimed again.
					self.refused.insert((job_id, index));
					Err(reason)
				},
			}
		};
		match verdict {
			Ok(()) => {
				// Training starts now, not a block later once the acceptance is in: until it
				// is, the range stands as trained ahead ([`standing`]), and a failed
				// acceptance is sent again by the next pass.
				if let Err(error) = self.start_training(job_id, index, job, unit) {
					tracing::warn!(job = job_id, unit = index, "training does not start: {error:#}");
				}
				self.accept(now, job_id, index);
				Ok(true)
			},
			Err(reason) => {
				self.slots.release(key, self.device.ordinal);
				tracing::info!(job = job_id, unit = index, "declining the unit: {reason:#}");
				self.hand_over(now, (job_id, index), "declined", runtime::transactions().tasks().decline_unit(job_id, index), |_| {});
				Ok(false)
			},
		}
	}

	/// Hands over the acceptance of an offered unit (which a claim of it on its way no longer
	/// speaks for).
	fn accept(&mut self, now: u32, job_id: JobId, index: UnitIndex) {
		if self.claiming == Some((job_id, index)) {
			self.claiming = None;
		}
		self.hand_over(now, (job_id, index), "accepted", runtime::transactions().tasks().accept_unit(job_id, index), |_| {});
	}

	/// Hands over a transaction `call` that takes or leaves the unit `key` (`what` names the
	/// outcome: `accepted`, `declined`, `claimed`), counted and logged once it lands;
	/// `then` learns whether it did. Sent once, whichever pass asks again meanwhile.
	fn hand_over<Call>(&self, now: u32, key: (JobId, UnitIndex), what: &'static str, call: Call, then: impl FnOnce(bool) + Send + 'static)
	where
		Call: subxt::tx::Payload + Send + Sync + 'static,
	{
		let metrics = self.metrics;
		let done = move |outcome: Result<crate::state::Included>| {
			match &outcome {
				Ok(_) => {
					metrics.unit(what);
					tracing::info!(job = key.0, unit = key.1, "{what} the unit");
				},
				Err(error) => tracing::info!(job = key.0, unit = key.1, "not {what}: {error:#}"),
			}
			then(outcome.is_ok());
		};
		self.chain.send_in_background(unit_duty(key.0, key.1, what), now.into(), call, &self.signer, Settled::InBlock, done);
	}

	/// Commits the aggregate of an aggregate unit this solver holds: the one it computed
	/// when it took the unit, or computed now (after a restart, say).
	async fn submit_aggregate(&mut self, at: &impl ChainState, now: u32, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		if self.chain.is_handed_over(&unit_duty(job_id, index, "aggregated"), now.into()) {
			return Ok(());
		}
		let aggregated = match self.aggregated.get(&(job_id, index)) {
			Some(aggregated) => *aggregated,
			None => self.compute_aggregate(at, job_id, index, job, unit).await?,
		};
		let call = runtime::transactions().tasks().submit_aggregate(
			job_id,
			index,
			subxt::utils::H256(aggregated.state_root),
			aggregated.momentum_root.map(subxt::utils::H256),
		);
		self.hand_over(now, (job_id, index), "aggregated", call, |_| {});
		Ok(())
	}

	/// Computes, stores and serves the aggregate of aggregate unit `index`, and keeps it
	/// for its commitment. With `--lie-in-aggregate` (test equipment), the first one this
	/// solver computes is corrupted.
	async fn compute_aggregate(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<crate::aggregate::Aggregated> {
		#[cfg(feature = "test-equipment")]
		let lie = self.args.lie_in_aggregate;
		#[cfg(not(feature = "test-equipment"))]
		let lie = false;
		let aggregated = crate::aggregate::compute(&self.inputs, at, job_id, index, job, unit, lie).await?;
		#[cfg(feature = "test-equipment")]
		{
			self.args.lie_in_aggregate = false;
		}
		self.aggregated.insert((job_id, index), aggregated);
		Ok(aggregated)
	}

	/// Claims the first pool unit this solver is eligible for and can train.
	async fn claim_from_pool(&mut self, at: &impl ChainState) -> Result<()> {
		// Short of fees, it would take work whose reveals and proof it cannot pay for.
		if self.low_funds.load(std::sync::atomic::Ordering::Relaxed) {
			return Ok(());
		}
		let min_price = (self.args.min_price * UNIT as f64) as u128;
		let now = at.number();
		let pool = at.pool().await?;
		// A unit out of the pool is claimed by nobody; one that comes back is weighed anew.
		self.refused.retain(|key| pool.contains(key));
		for (job_id, index) in pool {
			if self.refused.contains(&(job_id, index)) {
				continue;
			}
			let (Some(job), Some(unit)) = (at.job(job_id).await?, at.unit(job_id, index).await?) else {
				continue;
			};
			if unit.state != UnitState::Pending ||
				job.spec.price_per_unit < min_price ||
				!job.spec.requirements.is_met_by(&self.detected.profile)
			{
				continue;
			}
			// Weighed and claimed by one device of this process at a time.
			if !self.slots.take((job_id, index), self.device.ordinal) {
				continue;
			}
			if let Err(reason) = self.ready_to_take(at, job_id, index, &job, &unit).await {
				tracing::info!(job = job_id, unit = index, "not claiming the unit: {reason:#}");
				self.slots.release((job_id, index), self.device.ordinal);
				self.refused.insert((job_id, index));
				continue;
			}
			// Refused when another solver (or the scheduler's offer to this one) got there first.
			self.claim(now, job_id, index);
			return Ok(());
		}
		Ok(())
	}

	/// Hands over the claim of a pool unit; a refusal reaches the next pass
	/// ([`Outcome::ClaimRefused`]). Until it lands the device is spoken for.
	fn claim(&mut self, now: u32, job_id: JobId, index: UnitIndex) {
		self.claiming = Some((job_id, index));
		let landed = self.landed.clone();
		let then = move |claimed: bool| {
			if !claimed {
				landed.push(Outcome::ClaimRefused((job_id, index)));
			}
		};
		self.hand_over(now, (job_id, index), "claimed", runtime::transactions().tasks().claim_unit(job_id, index), then);
	}

	/// The unit's work, once this solver holds what it starts from, can train it, and
	/// trains a segment of it inside its deadline; or why not. What an offer is accepted
	/// or declined by, and a pool unit claimed or left by.
	/// The work is kept for the unit's training ([`Self::prepared`]).
	async fn ready_to_take(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		// An aggregate trains nothing: it is taken once it is computed, which takes
		// moments once its round's states are here.
		if crate::aggregate::is_aggregate(unit) {
			self.compute_aggregate(at, job_id, index, job, unit).await?;
			return Ok(());
		}
		self.fetch_inputs(at, job_id, index, job, unit).await?;
		// Reading and checking a large dataset takes a while: off the executor's other tasks.
		let work = tokio::task::block_in_place(|| self.prepare(job_id, index, job, unit))?;
		self.meets_deadline(at, job, &work).await?;
		let start_root = unit.start_state_root.map(|root| root.0);
		self.prepared = Some(Prepared { key: (job_id, index), start_root, work });
		Ok(())
	}

	/// The work for the unit: the one [`Self::ready_to_take`] prepared if it was for this
	/// unit from the same state, else prepared now. Either way nothing stays kept.
	fn prepared(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<UnitWork> {
		let start_root = unit.start_state_root.map(|root| root.0);
		match self.prepared.take() {
			Some(prepared) if prepared.key == (job_id, index) && prepared.start_root == start_root => Ok(prepared.work),
			_ => tokio::task::block_in_place(|| self.prepare(job_id, index, job, unit)),
		}
	}

	/// Whether this machine trains a checkpoint segment of `job` inside the unit's
	/// timeout: the chain moves a unit's deadline on only when a checkpoint is committed,
	/// so a solver that takes a unit it cannot checkpoint in time is timed out however
	/// honest it is. Times a step of the unit on the backend it would train on.
	async fn meets_deadline(&mut self, at: &impl ChainState, job: &Job, work: &UnitWork) -> Result<()> {
		let block_seconds = at.block_seconds()?;
		// Two steps of a large model take seconds: off the executor's other tasks.
		let backend = self.backend_for(job);
		let step_seconds = tokio::task::block_in_place(|| train::measure_step_seconds(backend, work))?;
		let segment_steps = job.spec.hyper.checkpoint_interval.clamp(1, work.steps.max(1));
		deadline_admits(step_seconds, segment_steps, job.spec.unit_timeout, block_seconds)
	}

	/// Everything needed to train a unit, or why this solver cannot (see
	/// [`Inputs::prepare`]); with `--inject-fault`, the fault it is told to inject.
	fn prepare(&self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<UnitWork> {
		#[allow(unused_mut)] // Only test equipment changes it.
		let mut work = self.inputs.prepare(job_id, index, job, unit, &self.detected)?;
		#[cfg(feature = "test-equipment")]
		{
			work.fault = match self.args.inject_fault {
				Some(step) if (work.first_step..work.first_step.saturating_add(work.steps)).contains(&step) => {
					Some(injected_fault(step, &job.spec.verification, &work)?)
				},
				_ => None,
			};
		}
		Ok(work)
	}

	/// Fetches what the unit starts from and this solver lacks (see [`Inputs::fetch`]).
	async fn fetch_inputs(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		self.inputs.fetch(at, job_id, index, job, unit).await
	}

	/// The backend a job trains on: exact mode needs a bit-exact one (the CPU reference or
	/// wgpu), so a libtorch solver trains exact-mode jobs on the reference.
	fn backend_for(&self, job: &Job) -> Device {
		match (&job.spec.verification, self.device.backend) {
			(VerificationMode::Exact, BackendKind::Tch) => BackendKind::Cpu.into(),
			_ => self.device,
		}
	}

	/// Starts training an accepted unit on its own thread, from its last local checkpoint
	/// if it has one. The passes follow it ([`Self::follow_training`]).
	fn start_training(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		if crate::aggregate::is_aggregate(unit) {
			return Ok(());
		}
		let work = self.prepared(job_id, index, job, unit)?;
		let backend = self.backend_for(job);
		let exact = matches!(job.spec.verification, VerificationMode::Exact);
		let (first_step, steps) = (work.first_step, work.steps);
		tracing::info!(job = job_id, unit = index, first_step, steps, backend = ?backend.backend, "training");
		let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
			let bar = ProgressBar::new(steps as u64);
			bar.set_style(
				ProgressStyle::with_template("job {msg} [{bar:30}] {pos}/{len} steps, {per_sec}, eta {eta}")
					.unwrap_or_else(|_| ProgressStyle::default_bar()),
			);
			bar.set_message(format!("{job_id} unit {index}"));
			bar
		} else {
			ProgressBar::hidden()
		};
		// Only the newest checkpoint matters: while one commit waits for its block, training
		// runs on, and the next pass commits the latest.
		let (newest, checkpoints) = tokio::sync::watch::channel(None);
		let halt = Arc::new(AtomicBool::new(false));
		let (store, network, metrics, thread_bar, thread_halt) =
			(self.inputs.store.clone(), self.inputs.network.clone(), self.metrics, bar.clone(), halt.clone());
		let thread = tokio::task::spawn_blocking(move || {
			let mut done_before = 0u32;
			let mut last_checkpoint = (Instant::now(), first_step);
			let report = |update| match update {
				Progress::Steps { done } => {
					thread_bar.set_position(done as u64);
					metrics.steps.inc_by(done.saturating_sub(done_before) as u64);
					done_before = done;
				},
				Progress::Checkpoint { step, hash, bytes } => {
					// A checkpoint this worker cannot serve must not be committed: a chunk
					// request over it would be lost.
					match store.put(&bytes) {
						Ok(key) => network.keep(job_id, Kind::Checkpoint, key),
						Err(error) => {
							tracing::warn!(job = job_id, unit = index, step, "checkpoint not stored: {error:#}");
							return;
						},
					}
					metrics.artifact_bytes.inc_by(bytes.len() as u64);
					let elapsed = last_checkpoint.0.elapsed().as_secs_f64();
					if elapsed > 0.0 {
						metrics.steps_per_second.set(step.saturating_sub(last_checkpoint.1) as f64 / elapsed);
					}
					last_checkpoint = (Instant::now(), step);
					if thread_bar.is_hidden() {
						tracing::info!(job = job_id, unit = index, step, "checkpoint {}", hex(&hash));
					} else {
						thread_bar.println(format!("checkpoint at step {step}: {}", hex(&hash)));
					}
					let _ = newest.send(Some(Checkpoint { step, hash: hash.into() }));
				},
			};
			run_unit_on(backend, &work, &thread_halt, report).map(|done| done.map(|result| (result, work)))
		});
		let last_committed = unit.last_checkpoint.map_or(0, |checkpoint| checkpoint.step);
		let start_root = unit.start_state_root.context("the unit has no start state yet")?.0;
		self.training =
			Some(Training { key: (job_id, index), start_root, end: first_step + steps, exact, checkpoints, thread, halt, last_committed, bar });
		Ok(())
	}

	/// Follows the unit training: commits its newest checkpoint once the unit is this
	/// solver's (which moves its deadline on), stops it once it cannot be, and once it is
	/// trained, serves its results, starts the next step range ahead of the chain
	/// ([`Self::train_ahead`]) and prepares the proof ([`Self::begin_proof`]).
	async fn follow_training(&mut self, at: &impl ChainState) -> Result<()> {
		let Some((key, start_root)) = self.training.as_ref().map(|training| (training.key, training.start_root)) else {
			return Ok(());
		};
		let (job_id, index) = key;
		let unit = at.unit(job_id, index).await?;
		// Only a waiting range's standing depends on the range before it.
		let predecessor = match (unit.as_ref().map(|unit| unit.state), index.checked_sub(1)) {
			(Some(UnitState::Waiting), Some(before)) => at.unit(job_id, before).await?,
			_ => None,
		};
		match standing(unit.as_ref(), predecessor.as_ref(), &self.me, &start_root) {
			Standing::Lost => {
				tracing::warn!(job = job_id, unit = index, "the unit is not this solver's to train (timed out, taken by another, or its job ended): training stopped");
				self.stop_training().await;
				return Ok(());
			},
			Standing::InPool => {
				// A refusal stops the training at the next pass ([`Self::take_landed`]).
				self.claim(at.number(), job_id, index);
				return Ok(());
			},
			// Trained ahead of the chain: its checkpoints and proof wait until it is ours, but
			// once trained, its proof is prepared to go with the proof of the range before.
			Standing::Ahead => {
				if unit.as_ref().is_some_and(|unit| unit.state == UnitState::Waiting) {
					self.prepare_next_proof(at, key).await?;
				}
				return Ok(());
			},
			Standing::Ours => {},
		}
		if self.training.as_ref().is_some_and(|training| training.thread.is_finished()) {
			let Some(training) = self.training.take() else { return Ok(()) };
			training.bar.finish_and_clear();
			let Some((result, work)) = training.thread.await.context("the training thread failed")?? else {
				tracing::info!(job = job_id, unit = index, "stopped; the unit resumes from its last checkpoint on restart");
				return Ok(());
			};
			self.serve_results(job_id, &work, &result)?;
			if let Some(job) = at.job(job_id).await? {
				if let Err(error) = self.train_ahead(at, job_id, index, &job, result.proof.final_state_root.0).await {
					tracing::info!(job = job_id, unit = index.saturating_add(1), "not training the next range ahead: {error:#}");
				}
			}
			return self.begin_proof(at, key, work, training.exact, result).await;
		}
		let Some(training) = self.training.as_mut() else { return Ok(()) };
		// What the chain holds is committed: a checkpoint that landed after this pass began
		// is in `unit` once a pass reads its block, and until then it is held as handed over.
		let on_chain = unit.as_ref().and_then(|unit| unit.last_checkpoint).map_or(0, |checkpoint| checkpoint.step);
		training.last_committed = training.last_committed.max(on_chain);
		// The proof covers the unit's end: only earlier checkpoints are committed.
		let newest = *training.checkpoints.borrow_and_update();
		let (end, last_committed) = (training.end, training.last_committed);
		let Some(checkpoint) = newest.filter(|checkpoint| checkpoint.step < end && checkpoint.step > last_committed) else {
			return Ok(());
		};
		// Handed over: once a pass reads the block it landed in, the unit shows it (above);
		// one that failed is sent again, or a newer one instead.
		let call = runtime::transactions().tasks().commit_checkpoint(job_id, index, Static(checkpoint));
		let (metrics, step) = (self.metrics, checkpoint.step);
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => metrics.checkpoints.inc(),
			Err(error) => tracing::warn!(job = job_id, unit = index, step, "checkpoint not committed: {error:#}"),
		};
		let duty = unit_duty(job_id, index, &format!("checkpoint {step}"));
		self.chain.send_in_background(duty, u64::from(at.number()), call, &self.signer, Settled::InBlock, done);
		Ok(())
	}

	/// Starts training the step range after `index` from the state it ended at
	/// (`end_root`), before the chain has the proof that makes the range ready: the device
	/// never waits on the proof's randomness or the offer's round trip. The range's
	/// checkpoints and proof are committed only once the chain gives it to this solver,
	/// and its training is dropped if the chain gives it to another.
	async fn train_ahead(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, end_root: [u8; 32]) -> Result<()> {
		if !matches!(job.spec.decomposition, touchstone_primitives::Decomposition::StepRanges { .. }) {
			return Ok(());
		}
		let next = index.saturating_add(1);
		let Some(mut unit) = at.unit(job_id, next).await? else { return Ok(()) };
		// Another device of this process may train it already (after a restart, say).
		if unit.state != UnitState::Waiting || !self.slots.take((job_id, next), self.device.ordinal) {
			return Ok(());
		}
		unit.start_state_root = Some(end_root.into());
		self.start_training(job_id, next, job, &unit)?;
		tracing::info!(job = job_id, unit = next, "training the next range ahead of its proof");
		Ok(())
	}

	/// Stops the training thread, if one runs, and waits for it: the unit resumes from its
	/// last checkpoint on restart.
	async fn stop_training(&mut self) {
		if let Some(training) = self.training.take() {
			training.halt.store(true, std::sync::atomic::Ordering::Relaxed);
			training.bar.finish_and_clear();
			let _ = training.thread.await;
		}
	}

	/// Serves a trained unit's final model, named by its proven state root (the next step
	/// range and the job's submitter fetch it by that root and check it against it), and
	/// its trace manifest, which verifiers check their samples against.
	fn serve_results(&self, job_id: JobId, work: &UnitWork, result: &train::UnitResult) -> Result<()> {
		let model = result.proof.final_state_root.0;
		self.inputs.store.put_as(&model, &result.final_model)?;
		self.inputs.network.keep(job_id, Kind::Model, model);
		let manifest = crate::samples::write_manifest(work, &self.inputs.store)?;
		ensure!(manifest == result.proof.trace_root.0, "the unit's trace manifest does not build its proof's trace root");
		self.inputs.network.keep(job_id, Kind::Manifest, manifest);
		Ok(())
	}

	/// Prepares a trained unit's proof, once its results are served.
	/// While forced errors are on (exact mode only: a distance has no error to place), the
	/// solver builds beside its honest proof the one wrong at the step a fresh secret
	/// fixes, and saves the secret; [`Self::follow_proof`] commits the hash binding it to
	/// both roots, the chain records randomness after it (three blocks or so, at most 17),
	/// and it then commits the proof the secret and the randomness call for. A solver restarted
	/// after its commitment finds its secret on disk and commits by the same rule (its
	/// training is bit-exact, so its roots are the same).
	async fn begin_proof(&mut self, at: &impl ChainState, key: (JobId, UnitIndex), work: UnitWork, exact: bool, result: train::UnitResult) -> Result<()> {
		self.proving = Some(self.plan_proof(at, key, &work, exact, &result, Deadline::Held).await?);
		Ok(())
	}

	/// Takes the finished training of the step range `key`, trained ahead and not yet made
	/// ready by the chain, and prepares its proof as the next one ([`Self::next_proof`]):
	/// only while the range before it waits for its own proof here, and the job owes
	/// forced-error secrets (the one thing the chain can take with that proof). A range
	/// whose proof needs no secret waits trained until it is offered.
	async fn prepare_next_proof(&mut self, at: &impl ChainState, key: (JobId, UnitIndex)) -> Result<()> {
		let (job_id, index) = key;
		let Some(training) = self.training.as_ref().filter(|training| training.key == key && training.thread.is_finished()) else {
			return Ok(());
		};
		// The proof before it not yet handed over: a proof on its way would not take it.
		let before_proving = index.checked_sub(1).is_some_and(|before| {
			self.proving.as_ref().is_some_and(|p| p.key == (job_id, before)) &&
				!self.chain.is_handed_over(&unit_duty(job_id, before, "proof"), u64::from(at.number()))
		});
		if !training.exact || !before_proving || self.next_proof.is_some() || at.forced_error_rate().await?.is_zero() {
			return Ok(());
		}
		// A timeout the secret's margin does not fit (the commitment lands a block or two
		// after the best block read here): the range waits for its offer, and its secret
		// is committed once it is taken.
		let Some(job) = at.job(job_id).await? else { return Ok(()) };
		if job.spec.unit_timeout < SECRET_MARGIN_BLOCKS + 2 {
			return Ok(());
		}
		let Some(mut training) = self.training.take() else { return Ok(()) };
		let Some((result, work)) = (&mut training.thread).await.context("the training thread failed")?? else { return Ok(()) };
		let prepared = match self.serve_results(job_id, &work, &result) {
			Ok(()) => self.plan_proof(at, key, &work, true, &result, Deadline::Taken).await,
			Err(error) => Err(error),
		};
		match prepared {
			Ok(next) => {
				training.bar.finish_and_clear();
				tracing::info!(job = job_id, unit = index, "trained ahead: its forced-error secret goes with the proof of the range before");
				self.next_proof = Some(next);
				Ok(())
			},
			// Kept trained, as a range trained ahead waits for its offer; tried again next pass.
			Err(error) => {
				training.thread = tokio::task::spawn_blocking(move || Ok(Some((result, work))));
				self.training = Some(training);
				Err(error)
			},
		}
	}

	/// A trained unit's proof, ready to commit ([`Self::begin_proof`]), for a unit whose
	/// deadline is as `deadline` says.
	async fn plan_proof(
		&mut self,
		at: &impl ChainState,
		key: (JobId, UnitIndex),
		work: &UnitWork,
		exact: bool,
		result: &train::UnitResult,
		deadline: Deadline,
	) -> Result<Proving> {
		let (job_id, index) = key;
		let (honest, final_state) = (result.proof.clone(), result.final_state.clone());
		if !exact || at.forced_error_rate().await?.is_zero() {
			return Ok(Proving { key, honest, final_state, forced: None });
		}
		let saved = match at.secret(job_id, index).await?.filter(|c| c.solver == self.me) {
			Some(commitment) => match self.secrets.secret(job_id, index, &commitment.hash.0) {
				Some(saved) => Some(saved),
				None => {
					tracing::warn!(job = job_id, unit = index, "this unit's forced-error secret is not in the data directory: its reveal will be missed");
					return Ok(Proving { key, honest, final_state, forced: None });
				},
			},
			None => {
				// Randomness comes 3 to 17 blocks after the commitment, and a unit let go after
				// it costs its collateral: the chain refuses a commitment closer to the
				// deadline than its margin, so let the unit go now, for its reputation only.
				if let Deadline::Held = deadline {
					let deadline = at.unit(job_id, index).await?.and_then(|unit| unit.deadline);
					let now = at.number();
					// The commitment lands a block or two after the best block read here.
					ensure!(
						deadline.is_some_and(|deadline| deadline >= now.saturating_add(SECRET_MARGIN_BLOCKS + 2)),
						"the unit's deadline is too close to commit a forced-error secret and then the proof"
					);
				}
				None
			},
		};
		// A secret saved for these traces whose commitment the chain does not show (the
		// worker stopped while it was on its way, and it may still land) is committed again,
		// never replaced: two commitments to one unit's traces must not both be in flight.
		let secret = match saved.or_else(|| self.secrets.saved_for(job_id, index, &honest.trace_root.0)) {
			Some(saved) => saved.secret,
			None => Secrets::fresh()?,
		};
		let step = crate::forced::forced_step(work, &secret);
		let forced = tokio::task::block_in_place(|| {
			step.map(|step| crate::forced::forced_proof(work, &self.inputs.store, &honest, step)).transpose()
		})?;
		let forced_root = forced.as_ref().map_or(honest.trace_root.0, |(proof, _)| proof.trace_root.0);
		let bound = BoundSecret { secret, honest_root: honest.trace_root.0, forced_root };
		match saved {
			Some(saved) => ensure!(saved == bound, "the retrained unit's traces differ from those its secret was committed with"),
			// Saved before it is committed, and committed by [`Self::follow_proof`].
			None => self.secrets.save(job_id, index, &bound)?,
		}
		let plan = ForcedPlan { bound, forced: step.zip(forced) };
		Ok(Proving { key, honest, final_state, forced: Some(plan) })
	}

	/// Commits the proof of the trained unit once it may: at once without a forced-error
	/// secret, else once the chain has recorded randomness after the secret (which it
	/// commits first). A forced unit commits the proof wrong on purpose, and keeps the
	/// honest one for the reveal. Both are handed over ([`Chain::send_in_background`]); a
	/// failed one is tried again by a later pass. The proof is forgotten once the unit is
	/// no longer assigned to this solver (proven, or lost).
	async fn follow_proof(&mut self, at: &impl ChainState, still_ours: impl Fn((JobId, UnitIndex)) -> bool) -> Result<()> {
		let Some(proving) = self.proving.as_ref() else { return Ok(()) };
		let (job_id, index) = proving.key;
		let now = u64::from(at.number());
		let duty = unit_duty(job_id, index, "proof");
		if !still_ours(proving.key) {
			if !self.chain.is_handed_over(&duty, now) {
				tracing::info!(job = job_id, unit = index, "the unit is no longer assigned to this solver: its proof is in, or it timed out or its job ended");
			}
			self.proving = None;
			// The range prepared behind it is proven next, if the proof took it; the range
			// after that trains ahead meanwhile.
			let Some(next) = self.next_proof.take() else { return Ok(()) };
			let (next_key, end_root) = (next.key, next.honest.final_state_root.0);
			if !still_ours(next_key) {
				tracing::info!(job = next_key.0, unit = next_key.1, "the range trained ahead was not taken with the proof before it: dropped");
				return Ok(());
			}
			self.proving = Some(next);
			if self.training.is_none() {
				if let Some(job) = at.job(next_key.0).await? {
					if let Err(error) = self.train_ahead(at, next_key.0, next_key.1, &job, end_root).await {
						tracing::info!(job = next_key.0, unit = next_key.1.saturating_add(1), "not training the next range ahead: {error:#}");
					}
				}
			}
			// Its proof waits for the randomness after its secret: a later pass commits it.
			return Ok(());
		}
		// On its way, or in a block this pass does not read yet.
		if self.chain.is_handed_over(&duty, now) {
			return Ok(());
		}
		let (proof, final_state) = match &proving.forced {
			None => (proving.honest.clone(), proving.final_state.clone()),
			Some(plan) => {
				let Some(commitment) = at.secret(job_id, index).await? else {
					let commit = runtime::transactions().verification().commit_secret(job_id, index, subxt::utils::H256(plan.bound.commitment()));
					let done = move |outcome: Result<crate::state::Included>| match outcome {
						Ok(_) => tracing::info!(job = job_id, unit = index, "committed a forced-error secret bound to the honest and the forced proof"),
						Err(error) => tracing::warn!(job = job_id, unit = index, "committing the forced-error secret: {error:#}"),
					};
					let key = unit_duty(job_id, index, "secret commitment");
					self.chain.send_in_background(key, now, commit, &self.signer, Settled::InBlock, done);
					return Ok(());
				};
				// Not the secret this proof was built for (one committed by an earlier run of this
				// worker that landed after all): the proof is built again from the chain's.
				if commitment.hash.0 != plan.bound.commitment() {
					tracing::warn!(job = job_id, unit = index, "the chain holds another forced-error secret for this unit than the one the proof was built for: building the proof again from it");
					self.proving = None;
					return Ok(());
				}
				// The rate in force when the secret was committed is the one the unit is judged by.
				let Some(random) = commitment.random else { return Ok(()) };
				match &plan.forced {
					Some((step, (forced, opening)))
						if touchstone_primitives::forced_error(&plan.bound.secret, &random, job_id, index, commitment.rate) =>
					{
						self.inputs.network.keep(job_id, Kind::Manifest, forced.trace_root.0);
						tracing::info!(
							job = job_id,
							unit = index,
							step,
							"the unit is forced: committing a proof wrong at this step on purpose; the honest one replaces it once the verifiers have committed"
						);
						let reveal = ForcedUnit { step: *step, honest: proving.honest.clone(), final_state: proving.final_state.clone() };
						self.secrets.save_forced(job_id, index, &reveal)?;
						(forced.clone(), opening.clone())
					},
					_ => (proving.honest.clone(), proving.final_state.clone()),
				}
			},
		};
		let model = proving.honest.final_state_root.0;
		let loss = proof.metrics.loss.into_inner() as f64 / 1e9;
		let next_secret = self.next_secret(at, (job_id, index)).await?;
		let call = runtime::transactions().tasks().submit_proof(job_id, index, Static(proof), Static(final_state), next_secret);
		let metrics = self.metrics;
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => {
				metrics.proofs.inc();
				metrics.unit("proven");
				tracing::info!(
					job = job_id,
					unit = index,
					model = %hex(&model),
					loss,
					"learning proof committed; the unit is paid once its challenge window passes"
				);
			},
			Err(error) => tracing::warn!(job = job_id, unit = index, "committing the learning proof: {error:#}"),
		};
		self.chain.send_in_background(duty, now, call, &self.signer, Settled::InBlock, done);
		Ok(())
	}

	/// The commitment of the forced-error secret of the range after `key`, when it is
	/// trained and prepared ([`Self::next_proof`]) and the chain still holds it waiting
	/// for `key`'s proof: it goes with that proof, which then takes the range.
	async fn next_secret(&self, at: &impl ChainState, (job_id, index): (JobId, UnitIndex)) -> Result<Option<subxt::utils::H256>> {
		let next = index.saturating_add(1);
		let Some(plan) = self.next_proof.as_ref().filter(|p| p.key == (job_id, next)).and_then(|p| p.forced.as_ref()) else {
			return Ok(None);
		};
		let waiting = at.unit(job_id, next).await?.is_some_and(|unit| unit.state == UnitState::Waiting);
		Ok(waiting.then(|| subxt::utils::H256(plan.bound.commitment())))
	}

	/// Reveals the forced-error secret of a proven unit once its verifiers' commit period
	/// is over, with the root committed beside the proof's, and the honest proof's final
	/// state if the unit is forced; forgets a forced unit once its honest proof stands.
	/// The reveal is handed over ([`Chain::send_in_background`]) and sent once.
	async fn reveal_secret(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, unit: &WorkUnit) -> Result<()> {
		use pallet_touchstone_verification::SolverSecret;
		let forced = self.secrets.forced(job_id, index);
		if let (Some(forced), Some(proof)) = (forced.as_ref(), unit.proof.as_ref()) {
			if forced.honest.trace_root == proof.trace_root {
				tracing::info!(job = job_id, unit = index, "the honest proof replaced the forced one");
				self.secrets.forget_forced(job_id, index);
			}
		}
		let Some(round) = at.round(job_id, index).await? else { return Ok(()) };
		let now = at.number();
		let due = round.drawn.as_ref().is_some_and(|drawn| now >= drawn.commit_ends && now < drawn.reveal_ends);
		let SolverSecret::Awaited { hash, .. } = round.secret else { return Ok(()) };
		let key = unit_duty(job_id, index, &format!("secret {}", hex(&hash.0)));
		// Sent, and deleted from the data directory once it landed.
		if !due || self.chain.is_handed_over(&key, now.into()) {
			return Ok(());
		}
		let Some(bound) = self.secrets.secret(job_id, index, &hash.0) else {
			tracing::warn!(job = job_id, unit = index, "this unit's forced-error secret is not in the data directory: it cannot be revealed");
			return Ok(());
		};
		let alternative = bound.other_than(&round.trace_root);
		let honest_final_state = forced.filter(|forced| forced.honest.trace_root.0 == alternative).map(|forced| Static(forced.final_state));
		let was_forced = honest_final_state.is_some();
		let reveal = runtime::transactions().verification().reveal_secret(
			job_id,
			index,
			bound.secret,
			subxt::utils::H256(alternative),
			honest_final_state,
		);
		let (metrics, secrets) = (self.metrics, self.secrets.clone());
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(_) => {
				metrics.reveals.with_label_values(&["secret"]).inc();
				tracing::info!(job = job_id, unit = index, forced = was_forced, "revealed the forced-error secret");
				// Public now: were the unit ever taken again from the same start, its traces
				// would find this secret, and it must not be committed a second time.
				secrets.forget(job_id, index, &hash.0);
			},
			Err(error) => tracing::warn!(job = job_id, unit = index, "revealing the forced-error secret: {error:#}"),
		};
		self.chain.send_in_background(key, now.into(), reveal, &self.signer, Settled::InBlock, done);
		Ok(())
	}

	/// Answers the disputes over this solver's proof of a unit: the next move of each one
	/// that awaits it.
	async fn defend(&mut self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		#[cfg(feature = "test-equipment")]
		if self.args.abandon_disputes {
			return Ok(());
		}
		let prepare = || self.prepare(job_id, index, job, unit);
		crate::dispute::play(&self.chain, &self.signer, at, (job_id, index), Party::Defender, prepare).await.map(drop)
	}

	/// Finalizes a proven unit whose window has passed, collecting its pay: handed over
	/// ([`Chain::send_in_background`]) and awaited to finality, for it moves money.
	fn finalize(&self, now: u32, job_id: JobId, index: UnitIndex) {
		let metrics = self.metrics;
		let done = move |outcome: Result<crate::state::Included>| match outcome {
			Ok(events) => {
				if let Some(event) = events.find_first::<runtime::tasks::events::UnitFinalized>() {
					metrics.earnings.inc_by(event.paid as u64);
					tracing::info!(job = job_id, unit = index, paid_tst = event.paid as f64 / UNIT as f64, "unit finalized and paid");
				}
				metrics.unit("finalized");
			},
			Err(error) => tracing::warn!(job = job_id, unit = index, "finalizing: {error:#}"),
		};
		let call = runtime::transactions().tasks().finalize_unit(job_id, index);
		self.chain.send_in_background(unit_duty(job_id, index, "finalize"), now.into(), call, &self.signer, Settled::Finalized, done);
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	/// A unit of step range 1 in `state`, held by `solver`, anchored at `start` once ready.
	fn range(state: UnitState, solver: Option<AccountId>, accepted: bool, start: Option<[u8; 32]>) -> WorkUnit {
		WorkUnit {
			scope: touchstone_primitives::UnitScope::Steps { first_step: 100, steps: 100 },
			state,
			solver,
			accepted,
			deadline: None,
			pool_deadline: None,
			passed_by: None,
			start_state_root: start.map(Into::into),
			last_checkpoint: None,
			proof: None,
			proven_at: None,
			attempts: 0,
		}
	}

	/// A range trained ahead of its predecessor's proof goes on while the chain may still
	/// give it to this solver, becomes its own once accepted, is claimed from the pool
	/// unless passed on, and stops once another solver has it, the chain anchored it at
	/// another state, or the range before it is no longer this solver's to prove (rolled
	/// back by an overturned proof further back, or in the pool).
	#[test]
	fn a_range_trained_ahead_runs_on_only_while_the_chain_may_give_it_to_this_solver() {
		let (me, other) = (AccountId::from([1; 32]), AccountId::from([2; 32]));
		let (ours, theirs) = ([7; 32], [8; 32]);
		let proving = range(UnitState::Assigned, Some(me.clone()), true, Some(ours));
		let waiting = range(UnitState::Waiting, None, false, None);
		let before_cases = [
			(Some(proving.clone()), Standing::Ahead),
			(Some(range(UnitState::Proven, Some(me.clone()), true, Some(ours))), Standing::Ahead),
			(Some(range(UnitState::Challenged, Some(me.clone()), true, Some(ours))), Standing::Ahead),
			// Rolled back with it: the overturned range is due first, and this solver may take it.
			(Some(waiting.clone()), Standing::Lost),
			(Some(range(UnitState::Pending, None, false, Some(ours))), Standing::Lost),
			(Some(range(UnitState::Reassigned, Some(me.clone()), true, Some(ours))), Standing::Lost),
			(Some(range(UnitState::Assigned, Some(other.clone()), true, Some(ours))), Standing::Lost),
			(None, Standing::Lost),
		];
		for (before, expected) in before_cases {
			assert_eq!(standing(Some(&waiting), before.as_ref(), &me, &ours), expected, "after {before:?}");
		}
		let cases = [
			(range(UnitState::Pending, None, false, Some(ours)), Standing::InPool),
			(range(UnitState::Assigned, Some(me.clone()), false, Some(ours)), Standing::Ahead),
			(range(UnitState::Assigned, Some(me.clone()), true, Some(ours)), Standing::Ours),
			(range(UnitState::Assigned, Some(other.clone()), false, Some(ours)), Standing::Lost),
			(range(UnitState::Assigned, Some(other.clone()), true, Some(ours)), Standing::Lost),
			(range(UnitState::Assigned, Some(me.clone()), true, Some(theirs)), Standing::Lost),
			(range(UnitState::Proven, Some(me.clone()), true, Some(ours)), Standing::Lost),
			(range(UnitState::Failed, None, false, Some(ours)), Standing::Lost),
		];
		for (unit, expected) in cases {
			assert_eq!(standing(Some(&unit), Some(&proving), &me, &ours), expected, "{unit:?}");
		}
		let mut passed = range(UnitState::Pending, None, false, Some(ours));
		passed.passed_by = Some(me.clone());
		assert_eq!(standing(Some(&passed), Some(&proving), &me, &ours), Standing::Lost, "a range this solver declined is not claimed back");
		assert_eq!(standing(None, Some(&proving), &me, &ours), Standing::Lost);
	}

	/// A unit is taken only if a checkpoint segment, with the margin, fits its timeout less
	/// the blocks the proof needs after the last checkpoint; the refusal says why.
	#[test]
	fn a_unit_is_taken_only_if_a_segment_fits_between_its_deadlines() {
		// 80 steps of 0.125 s with the 1.5× margin: 15 s; 25 blocks of 3 s less 20: 15 s.
		assert_eq!(SECRET_MARGIN_BLOCKS, 20);
		assert!(deadline_admits(0.125, 80, 25, 3.0).is_ok());
		let error = deadline_admits(0.125, 81, 25, 3.0).unwrap_err().to_string();
		assert!(error.contains("segment of 81 steps") && error.contains("it would time out"), "{error}");
		assert!(deadline_admits(0.001, 1, SECRET_MARGIN_BLOCKS, 3.0).is_err(), "a timeout the proof's margin uses up admits nothing");
	}

	/// The solver's passes against a scripted chain ([`crate::scripted`]): what a pass hands
	/// over, read from the chain it is shown, with real training, a real store and a real
	/// (loopback) libp2p node underneath.
	mod passes {
		use super::*;
		use crate::scripted::{ScriptedChain, Sent};
		use touchstone_primitives::{JobStatus, UnitScope};

		/// A solver (`//Bob`) on a scripted chain, working in a fresh folder `name`.
		async fn scripted_solver(name: &str) -> (ScriptedChain, Solver<ScriptedChain>) {
			let (chain, mut devices) = scripted_devices(name, 1).await;
			(chain, devices.remove(0))
		}

		/// A solver (`//Bob`) on `devices` CPU devices of one process, on a scripted chain,
		/// working in a fresh folder `name`.
		async fn scripted_devices(name: &str, devices: usize) -> (ScriptedChain, Vec<Solver<ScriptedChain>>) {
			#[derive(clap::Parser)]
			struct Cli {
				#[command(flatten)]
				solve: SolveArgs,
			}
			let dir = std::env::temp_dir().join(format!("touchstone-solver-{name}-{}", std::process::id()));
			let _ = std::fs::remove_dir_all(&dir);
			let store = Store::open(&dir.join("store")).unwrap();
			let cli: Cli = clap::Parser::try_parse_from(["solve", "--key", "//Bob", "--no-mdns"]).unwrap();
			let network_args =
				NetworkArgs { p2p_listen: Some("/ip4/127.0.0.1/tcp/0".parse().unwrap()), no_mdns: true, ..NetworkArgs::default() };
			let network = Network::start(&network_args, store.clone(), &dir).await.unwrap();
			let me = cli.solve.key.keypair().unwrap().public_key().to_account_id();
			let inputs = Inputs { store, network, units_dir: dir.join("units"), me, datasets: Default::default() };
			let detected = hardware::detect(None, "local").unwrap();
			let chain = ScriptedChain::default();
			chain.script(|at| {
				at.number = 100;
				at.challenge_window = 10;
				at.block_seconds = 6.0;
			});
			let slots = Arc::new(Slots::new(devices));
			let solvers = (0..devices)
				.map(|ordinal| {
					let device = Device { backend: BackendKind::Cpu, ordinal };
					let (inputs, args, detected) = (inputs.clone(), cli.solve.clone(), detected.clone());
					Solver::on(chain.clone(), inputs, &dir, args, detected, device, slots.clone(), Arc::default()).unwrap()
				})
				.collect();
			(chain, solvers)
		}

		/// The digits job of `steps` steps in ranges of `per_unit`, checkpointed every
		/// `checkpoint_interval` steps, its dataset in the solver's store.
		fn digits_job(solver: &Solver<ScriptedChain>, steps: u32, per_unit: u32, checkpoint_interval: u32) -> Job {
			let mut file = crate::jobfile::digits_example();
			file.train.steps = steps;
			file.train.checkpoint_interval = checkpoint_interval;
			file.units.steps_per_unit = Some(per_unit);
			let prepared = crate::jobfile::prepare(&file, std::path::Path::new("."), &solver.inputs.store).unwrap();
			Job {
				owner: AccountId::from([9; 32]),
				spec: prepared.spec,
				status: JobStatus::Active,
				units: steps.div_ceil(per_unit),
				units_final: 0,
				escrow: 0,
				deposit: 0,
				submitted_at: 1,
				result: None,
				removable_at: None,
				tolerance: Default::default(),
			}
		}

		/// Range `index` of `job`, in `state`, held by `solver`.
		fn unit_of(job: &Job, index: UnitIndex, state: UnitState, solver: Option<&AccountId>, accepted: bool) -> WorkUnit {
			let touchstone_primitives::Decomposition::StepRanges { steps_per_unit } = job.spec.decomposition else {
				panic!("a step-range job")
			};
			WorkUnit {
				scope: UnitScope::Steps { first_step: index * steps_per_unit, steps: steps_per_unit },
				start_state_root: (index == 0).then_some(job.spec.initial_state_root),
				solver: solver.cloned(),
				accepted,
				..range(state, None, false, None)
			}
		}

		fn sent(key: &str, call: &str) -> Sent {
			Sent { key: key.to_owned(), call: call.to_owned() }
		}

		/// While a unit trains on its thread, a pass still declines an offer it cannot train
		/// now, finalizes a unit whose window has passed, and commits the checkpoints the
		/// thread writes: no duty waits for the training.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_pass_does_every_duty_while_a_unit_trains() {
			let (chain, mut solver) = scripted_solver("duties").await;
			let me = solver.me.clone();
			// 100,000 steps: far more than the passes below take.
			let long = digits_job(&solver, 100_000, 100_000, 1_000);
			let short = digits_job(&solver, 1_000, 250, 50);
			chain.script(|at| {
				at.jobs.insert(0, long.clone());
				at.units.insert((0, 0), unit_of(&long, 0, UnitState::Assigned, Some(&me), true));
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(solver.training.as_ref().map(|training| training.key), Some((0, 0)), "the accepted unit trains");

			chain.script(|at| {
				at.jobs.insert(1, short.clone());
				at.units.insert((1, 0), unit_of(&short, 0, UnitState::Assigned, Some(&me), false));
				at.jobs.insert(2, short.clone());
				let mut proven = unit_of(&short, 0, UnitState::Proven, Some(&me), true);
				proven.proven_at = Some(at.number - at.challenge_window);
				at.units.insert((2, 0), proven);
			});
			solver.pass(&chain.at()).await.unwrap();
			let duties: Vec<Sent> = chain.take_sent().into_iter().filter(|sent| !sent.key.contains("checkpoint")).collect();
			assert_eq!(
				duties,
				[sent("unit 1 0 declined", "Tasks.decline_unit"), sent("unit 2 0 finalize", "Tasks.finalize_unit")],
				"the offer is declined (the device trains another unit) and the proven unit finalized"
			);
			assert_eq!(solver.training.as_ref().map(|training| training.key), Some((0, 0)), "training goes on");

			// The thread's first checkpoint, within two minutes however slow the machine.
			let mut checkpoints = solver.training.as_ref().unwrap().checkpoints.clone();
			let written = tokio::time::timeout(std::time::Duration::from_secs(120), checkpoints.wait_for(Option::is_some)).await;
			let step = written.expect("a checkpoint within two minutes").unwrap().unwrap().step;
			chain.script(|at| at.number += 1);
			solver.pass(&chain.at()).await.unwrap();
			let committed: Vec<Sent> = chain.take_sent().into_iter().filter(|sent| sent.call == "Tasks.commit_checkpoint").collect();
			assert!(!committed.is_empty() && committed[0].key.starts_with("unit 0 0 checkpoint "), "{committed:?}");
			let committed_step: u32 = committed.last().unwrap().key.rsplit(' ').next().unwrap().parse().unwrap();
			assert!(committed_step >= step && committed_step % 1_000 == 0, "the newest checkpoint, at a checkpoint step: {committed_step}");
			solver.stop_training().await;
		}

		/// An idle solver claims a pool unit it can train; while the claim is on its way the
		/// device is spoken for (an offer is declined, the pool left alone), and once the
		/// claim lands the unit trains.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_claim_on_its_way_speaks_for_the_device() {
			let (chain, mut solver) = scripted_solver("claim").await;
			let me = solver.me.clone();
			let job = digits_job(&solver, 1_000, 250, 50);
			chain.script(|at| {
				at.jobs.insert(3, job.clone());
				at.units.insert((3, 0), unit_of(&job, 0, UnitState::Pending, None, false));
				at.pool = vec![(3, 0)];
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 3 0 claimed", "Tasks.claim_unit")]);

			chain.script(|at| {
				at.jobs.insert(4, job.clone());
				at.units.insert((4, 0), unit_of(&job, 0, UnitState::Assigned, Some(&me), false));
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 4 0 declined", "Tasks.decline_unit")], "the claim holds the device");
			assert!(solver.training.is_none());

			chain.land_all();
			chain.script(|at| {
				at.number += 1;
				at.pool.clear();
				at.units.remove(&(4, 0));
				at.units.insert((3, 0), unit_of(&job, 0, UnitState::Assigned, Some(&me), true));
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(solver.training.as_ref().map(|training| training.key), Some((3, 0)), "the claimed unit trains");
			solver.stop_training().await;
		}

		/// A claim the chain refused (another solver got there first) no longer holds the
		/// device: the next offer is weighed, accepted and trained.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_refused_claim_frees_the_device_for_the_next_offer() {
			let (chain, mut solver) = scripted_solver("refused-claim").await;
			let me = solver.me.clone();
			let job = digits_job(&solver, 1_000, 250, 50);
			chain.refuse("Tasks.claim_unit");
			chain.script(|at| {
				at.jobs.insert(7, job.clone());
				at.units.insert((7, 0), unit_of(&job, 0, UnitState::Pending, None, false));
				at.pool = vec![(7, 0)];
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 7 0 claimed", "Tasks.claim_unit")]);
			chain.land_all();
			chain.script(|at| {
				at.number += 1;
				at.pool.clear();
				at.units.insert((7, 0), unit_of(&job, 0, UnitState::Assigned, Some(&AccountId::from([2; 32])), true));
				at.jobs.insert(8, job.clone());
				at.units.insert((8, 0), unit_of(&job, 0, UnitState::Assigned, Some(&me), false));
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 8 0 accepted", "Tasks.accept_unit")]);
			assert_eq!(solver.training.as_ref().map(|training| training.key), Some((8, 0)), "the offer trains at once");
			solver.stop_training().await;
		}

		/// Two devices under one account each take an offer and train it side by side; a
		/// third offer is declined only once both are busy, and a unit one device trains is
		/// left alone by the other.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn two_devices_under_one_account_train_two_units_at_once() {
			let (chain, mut devices) = scripted_devices("devices", 2).await;
			let me = devices[0].me.clone();
			let long = digits_job(&devices[0], 100_000, 100_000, 1_000);
			chain.script(|at| {
				for job in [10, 11] {
					at.jobs.insert(job, long.clone());
					at.units.insert((job, 0), unit_of(&long, 0, UnitState::Assigned, Some(&me), false));
				}
			});
			devices[0].pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 10 0 accepted", "Tasks.accept_unit")], "the other offer is left to the free device");
			devices[1].pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 11 0 accepted", "Tasks.accept_unit")]);
			let training = |solver: &Solver<ScriptedChain>| solver.training.as_ref().map(|training| training.key);
			assert_eq!((training(&devices[0]), training(&devices[1])), (Some((10, 0)), Some((11, 0))));

			chain.land_all();
			chain.script(|at| {
				at.number += 1;
				for job in [10, 11] {
					at.units.insert((job, 0), unit_of(&long, 0, UnitState::Assigned, Some(&me), true));
				}
				at.jobs.insert(12, long.clone());
				at.units.insert((12, 0), unit_of(&long, 0, UnitState::Assigned, Some(&me), false));
			});
			for device in &mut devices {
				device.pass(&chain.at()).await.unwrap();
			}
			assert_eq!(chain.take_sent(), [sent("unit 12 0 declined", "Tasks.decline_unit")], "every device busy");
			assert_eq!((training(&devices[0]), training(&devices[1])), (Some((10, 0)), Some((11, 0))), "each trains its own");
			for device in &mut devices {
				device.stop_training().await;
			}
		}

		/// A solver short of fees takes no new work: an offer is declined and the pool left.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_solver_short_of_fees_takes_no_new_work() {
			let (chain, mut solver) = scripted_solver("low-funds").await;
			let me = solver.me.clone();
			let job = digits_job(&solver, 1_000, 250, 50);
			solver.low_funds.store(true, std::sync::atomic::Ordering::Relaxed);
			chain.script(|at| {
				at.jobs.insert(5, job.clone());
				at.units.insert((5, 0), unit_of(&job, 0, UnitState::Pending, None, false));
				at.units.insert((5, 1), unit_of(&job, 1, UnitState::Assigned, Some(&me), false));
				at.pool = vec![(5, 0)];
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 5 1 declined", "Tasks.decline_unit")]);
			assert!(solver.training.is_none());
		}

		/// A proven range is finalized once its challenge window has passed and the range
		/// before it is final, and not before: the chain would refuse it, for a fee.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn a_proven_range_is_finalized_after_its_window_and_its_predecessor() {
			let (chain, mut solver) = scripted_solver("finalize").await;
			let me = solver.me.clone();
			let job = digits_job(&solver, 1_000, 250, 50);
			chain.script(|at| {
				at.jobs.insert(6, job.clone());
				for index in 0..2 {
					let mut proven = unit_of(&job, index, UnitState::Proven, Some(&me), true);
					proven.proven_at = Some(at.number - 5);
					at.units.insert((6, index), proven);
				}
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [], "inside the window");
			chain.script(|at| at.number += 5);
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 6 0 finalize", "Tasks.finalize_unit")], "range 1 waits for range 0");
			chain.land_all();
			chain.script(|at| {
				at.number += 1;
				if let Some(unit) = at.units.get_mut(&(6, 0)) {
					unit.state = UnitState::Finalized;
				}
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(chain.take_sent(), [sent("unit 6 1 finalize", "Tasks.finalize_unit")]);
		}

		/// An offered aggregate of a round is computed from its shards' proven end states,
		/// accepted while the device trains another unit (an aggregate does not need it),
		/// and committed with the roots of the kernels' aggregate, which the solver then
		/// serves; it is computed once. A watcher's recomputation finds the honest
		/// commitment right and a lying one wrong at the chunk of the lie, with openings the
		/// chain's referee convicts.
		#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
		async fn an_offered_aggregate_is_computed_from_its_round_and_committed() {
			use touchstone_kernels::job::checkpoint::Checkpoint as KernelCheckpoint;
			use touchstone_kernels::job::trace::state_root;
			use touchstone_kernels::ops::aggregate::{aggregate_state, weights, Weighting};
			let (chain, mut solver) = scripted_solver("aggregate").await;
			let me = solver.me.clone();
			let mut file = crate::jobfile::digits_example();
			file.train.steps = 100;
			file.units = crate::jobfile::UnitsFile {
				shards: Some(2),
				rounds: Some(2),
				outer_learning_rate: Some(0.7),
				outer_momentum: Some(0.9),
				..Default::default()
			};
			let prepared = crate::jobfile::prepare(&file, std::path::Path::new("."), &solver.inputs.store).unwrap();
			let long = digits_job(&solver, 100_000, 100_000, 1_000);
			let mut job = digits_job(&solver, 100, 50, 50);
			job.spec = prepared.spec.clone();
			job.units = 6;
			// Each shard's end state a step away from the initial one, held by this worker.
			let initial = prepared.initial_state.clone();
			let shards: Vec<Vec<Vec<f32>>> = (1..=2)
				.map(|shard| initial.iter().map(|tensor| tensor.iter().map(|value| value + 0.001 * shard as f32).collect()).collect())
				.collect();
			let mut roots = Vec::new();
			for state in &shards {
				let root = state_root(state).unwrap();
				let bytes = KernelCheckpoint { point: touchstone_kernels::proof::chain::ChainPoint::start(50), state: state.clone() }.to_bytes().unwrap();
				solver.inputs.store.put_as(&root, &bytes).unwrap();
				roots.push(root);
			}
			let all = prepared.spec.dataset.samples;
			let samples = [all / 2, all - all / 2];
			chain.script(|at| {
				at.jobs.insert(7, job.clone());
				for shard in 0..2u32 {
					let mut unit = range(UnitState::Proven, Some(AccountId::from([5; 32])), true, Some(job.spec.initial_state_root.0));
					unit.scope = UnitScope::RoundShard { round: 0, first_sample: shard * samples[0], samples: samples[shard as usize] };
					unit.proof = Some(LearningProof {
						trace_root: [1; 32].into(),
						steps: 50,
						start_state_root: job.spec.initial_state_root,
						final_state_root: roots[shard as usize].into(),
						metrics: Default::default(),
					});
					at.units.insert((7, shard), unit);
				}
				let mut aggregate = range(UnitState::Assigned, Some(me.clone()), false, Some(job.spec.initial_state_root.0));
				aggregate.scope = UnitScope::Aggregate { round: 0 };
				at.units.insert((7, 2), aggregate);
				// The device trains a long unit meanwhile.
				at.jobs.insert(8, long.clone());
				at.units.insert((8, 0), unit_of(&long, 0, UnitState::Assigned, Some(&me), true));
			});
			solver.pass(&chain.at()).await.unwrap();
			assert_eq!(solver.training.as_ref().map(|training| training.key), Some((8, 0)), "the device trains");
			let sent_now: Vec<Sent> = chain.take_sent().into_iter().filter(|sent| !sent.key.contains("checkpoint")).collect();
			assert_eq!(sent_now, [sent("unit 7 2 accepted", "Tasks.accept_unit")]);
			let computed = *solver.aggregated.get(&(7, 2)).expect("computed when the offer was weighed");
			// The kernels' aggregate from zero momentum, weighted by the shards' samples.
			let zeros: Vec<Vec<f32>> = initial.iter().map(|tensor| vec![0.0; tensor.len()]).collect();
			let weights = weights(Weighting::BySamples, &samples.map(u64::from)).unwrap();
			let outer = touchstone_primitives::referee::kernel_outer(&match job.spec.decomposition {
				touchstone_primitives::Decomposition::Rounds { outer, .. } => outer,
				_ => unreachable!(),
			});
			let (next, momentum) = aggregate_state(&outer, &weights, &shards, &initial, &zeros).unwrap();
			assert_eq!(computed.state_root, state_root(&next).unwrap());
			assert_eq!(computed.momentum_root, Some(state_root(&momentum).unwrap()));
			assert!(solver.inputs.store.contains(&computed.state_root) && solver.inputs.store.contains(&computed.momentum_root.unwrap()));

			// Accepted: committed, not computed again.
			chain.land_all();
			chain.script(|at| {
				at.number += 1;
				if let Some(unit) = at.units.get_mut(&(7, 2)) {
					unit.accepted = true;
				}
			});
			solver.pass(&chain.at()).await.unwrap();
			let sent_now: Vec<Sent> = chain.take_sent().into_iter().filter(|sent| !sent.key.contains("checkpoint")).collect();
			assert_eq!(sent_now, [sent("unit 7 2 aggregated", "Tasks.submit_aggregate")]);
			solver.stop_training().await;

			// A watcher's check: the honest commitment is the round's; a lying one (test
			// equipment) is found at the chunk holding the lie, and its openings convict it
			// at the chain's referee.
			let commit = |aggregated: crate::aggregate::Aggregated| {
				chain.script(|at| {
					let unit = at.units.get_mut(&(7, 2)).unwrap();
					unit.state = UnitState::Proven;
					unit.proof = Some(LearningProof {
						trace_root: aggregated.momentum_root.unwrap().into(),
						steps: 0,
						start_state_root: job.spec.initial_state_root,
						final_state_root: aggregated.state_root.into(),
						metrics: Default::default(),
					});
				});
			};
			commit(computed);
			let unit = chain.at().unit(7, 2).await.unwrap().unwrap();
			let checked = crate::aggregate::check(&solver.inputs, &chain.at(), 7, 2, &job, &unit).await.unwrap();
			assert!(checked.is_none(), "the honest aggregate is the round's");
			let lie = crate::aggregate::compute(&solver.inputs, &chain.at(), 7, 2, &job, &unit, true).await.unwrap();
			assert_ne!(lie.state_root, computed.state_root);
			assert_eq!(lie.momentum_root, computed.momentum_root, "the lie is in the state, not the momentum");
			commit(lie);
			let unit = chain.at().unit(7, 2).await.unwrap().unwrap();
			let wrong = crate::aggregate::check(&solver.inputs, &chain.at(), 7, 2, &job, &unit).await.unwrap().expect("the lie is found");
			let middle = next.iter().map(Vec::len).sum::<usize>() / 2;
			let first_word_of = |chunk: usize| {
				let lens: Vec<usize> = next.iter().map(Vec::len).collect();
				let (tensor, within) = touchstone_kernels::proof::state_tree::locate_chunk(lens.iter().copied(), chunk).unwrap();
				lens[..tensor].iter().sum::<usize>() + within * touchstone_kernels::proof::state_tree::CHUNK_WORDS
			};
			let chunk = wrong.chunk as usize;
			assert!(first_word_of(chunk) <= middle && middle < first_word_of(chunk) + touchstone_kernels::proof::state_tree::CHUNK_WORDS);
			let (shard_roots, global_root) = (roots.iter().zip(samples).map(|(root, samples)| ((*root).into(), samples)).collect(), job.spec.initial_state_root);
			let claim = touchstone_primitives::traits::ProvenAggregate {
				solver: (),
				collateral: 0u128,
				model: job.spec.model.clone(),
				hyper: job.spec.hyper.clone(),
				outer: match job.spec.decomposition {
					touchstone_primitives::Decomposition::Rounds { outer, .. } => outer,
					_ => unreachable!(),
				},
				aggregation: touchstone_primitives::Aggregation::WeightedBySamples,
				shards: shard_roots,
				global_root,
				momentum_root: None,
				claimed_root: lie.state_root.into(),
				claimed_momentum_root: lie.momentum_root.map(Into::into),
				window_ends: 0u32,
			};
			let verdict = touchstone_primitives::referee::judge_aggregate(&claim, wrong.chunk, &wrong.openings);
			assert!(matches!(verdict, Err(touchstone_primitives::referee::AggregateError::WrongAggregate { .. })), "{verdict:?}");
		}
	}
}

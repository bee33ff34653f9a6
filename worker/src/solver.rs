//! The solver role: register and bond, take units the hardware can train, train them
//! with checkpoints, commit the learning proofs, and collect pay once their challenge
//! windows pass.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use subxt::utils::Static;
use subxt_signer::sr25519::Keypair;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::fault::Fault;
use touchstone_kernels_wgpu::WgpuBackend;
use touchstone_primitives::referee::StateOpening;
use touchstone_primitives::{Checkpoint, JobId, LearningProof, Role, UnitIndex, UnitState, VerificationMode};

use crate::chain::{runtime, AccountId, AtBlock, BestBlocks, Chain, Heartbeat, Job, WorkUnit};
use crate::dispute::Party;
use crate::forced::{BoundSecret, ForcedUnit, Secrets};
use crate::hardware::{self, Detected};
use crate::inputs::Inputs;
use crate::jobfile::UNIT;
use crate::metrics::Metrics;
use crate::p2p::{Network, NetworkArgs};
use crate::store::Store;
use crate::train::{self, run_unit_on, BackendKind, Progress, UnitWork};

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
	/// dishonest solver end to end.
	#[arg(long, value_name = "STEP", hide = true)]
	pub inject_fault: Option<u32>,
}

/// The fault `--inject-fault` injects at global step `step` of a unit trained with `work`,
/// in a job verified in `mode`.
/// In an exact-mode job: a low mantissa bit of the first layer's output, which every later
/// value of the step depends on, a lie only bit-exact re-execution sees. In a
/// tolerance-mode job: the top exponent bit of the first parameter as the optimizer updates
/// it (a weight below 2 becomes about 10³⁷), a lie far beyond any hardware's rounding, which
/// verifiers measure beyond the job's thresholds; a low bit would sit inside them, where
/// tolerance mode by design does not look. The next forward pass overflows on such a
/// weight, and the trainer stops rather than commit a non-finite step, so a tolerance-mode
/// rehearsal aims at a unit's last step.
pub(crate) fn injected_fault(step: u32, mode: &VerificationMode, work: &UnitWork) -> Result<Fault> {
	use touchstone_kernels::proof::graph::{Graph, OpKind};
	Ok(match mode {
		VerificationMode::Exact => Fault::Output { step, operator: 1, output: 0, element: 0, bit: 20 },
		VerificationMode::Tolerance { .. } => {
			let graph = Graph::build(&work.model, &work.train).map_err(|error| anyhow!("the job's step graph: {error:?}"))?;
			let operator = graph
				.nodes
				.iter()
				.position(|node| matches!(node.kind, OpKind::Sgd(_) | OpKind::AdamW(_)))
				.context("the job's step has no optimizer")?;
			Fault::Output { step, operator, output: 0, element: 0, bit: 30 }
		},
	})
}

/// A running solver.
pub struct Solver {
	chain: Chain,
	best: BestBlocks,
	signer: Keypair,
	me: AccountId,
	inputs: Inputs,
	args: SolveArgs,
	detected: Detected,
	metrics: Metrics,
	stop: Arc<AtomicBool>,
	/// Units this process gave up on (cannot train them): not claimed again.
	refused: BTreeSet<(JobId, UnitIndex)>,
	/// The forced-error secrets of the units it took, and its forced units' reveals, on disk.
	secrets: Secrets,
	heartbeat: Heartbeat,
}

impl crate::chain::EveryBlock for Solver {
	fn pass(&mut self) -> impl std::future::Future<Output = Result<()>> {
		self.tick()
	}

	fn best_blocks(&mut self) -> &mut BestBlocks {
		&mut self.best
	}
}

impl Solver {
	/// Detects the hardware and prepares a solver; nothing is sent yet.
	pub fn new(
		chain: Chain,
		network: Network,
		store: Store,
		data_dir: PathBuf,
		args: SolveArgs,
		stop: Arc<AtomicBool>,
	) -> Result<Self> {
		let signer = args.key.keypair()?;
		let me = signer.public_key().to_account_id();
		let gpu = match args.backend {
			BackendKind::Cpu => None,
			BackendKind::Wgpu => {
				let backend = WgpuBackend::new().map_err(|error| {
					anyhow!("no usable GPU adapter: {error:?}. Install a Vulkan driver, or train on the CPU with --backend cpu")
				})?;
				Some(hardware::Gpu { name: backend.adapter_description(), memory_mib: None })
			},
			BackendKind::Tch => {
				let cuda = hardware::torch_cuda();
				match &cuda {
					Some(gpu) => tracing::info!(device = %gpu.name, "libtorch sees a CUDA device: tolerance-mode jobs train on it"),
					None => tracing::info!("libtorch sees no CUDA device: tolerance-mode jobs train on libtorch's CPU kernels"),
				}
				cuda
			},
		};
		let detected = hardware::detect(gpu, &args.region)?;
		let metrics = match args.metrics {
			Some(address) => Metrics::serve(address)?,
			None => Metrics::unserved()?,
		};
		let inputs = Inputs { store, network, units_dir: data_dir.join("units"), me: me.clone() };
		Ok(Self {
			best: chain.follow_best(),
			chain,
			inputs,
			signer,
			me,
			args,
			detected,
			metrics,
			stop,
			refused: BTreeSet::new(),
			secrets: Secrets::open(data_dir.join("secrets"))?,
			heartbeat: Heartbeat::default(),
		})
	}

	/// Runs until `stop` is set.
	pub async fn run(mut self) -> Result<()> {
		tracing::info!(
			account = %self.me,
			device = %String::from_utf8_lossy(&self.detected.profile.model),
			memory_mib = self.detected.profile.memory_mib,
			gflops = self.detected.profile.throughput_gflops,
			"solver starting"
		);
		self.ensure_registered().await?;
		if let Err(error) = self.advertise_endpoint().await {
			tracing::warn!("the endpoint is not advertised on-chain: {error:#}");
		}
		// Training stops at the step it is in, and the unit resumes from its last checkpoint
		// on restart.
		let stop = self.stop.clone();
		crate::chain::run_every_block(&mut self, &stop).await;
		tracing::info!("solver stopped");
		Ok(())
	}

	/// Registers as a solver with the bond, unless registered already.
	async fn ensure_registered(&mut self) -> Result<()> {
		let min_price = (self.args.min_price * UNIT as f64) as u128;
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Solver, self.args.bond, profile, min_price).await?;
		self.heartbeat.sent();
		Ok(())
	}

	/// Advertises on-chain where this worker accepts peers (`--p2p-external`, or else its
	/// listening address), unless the chain already holds that address.
	async fn advertise_endpoint(&mut self) -> Result<()> {
		let Some(address) = self.inputs.network.advertised(self.args.network.p2p_external.as_ref()).await? else {
			tracing::info!("listening on no specific address: pass --p2p-external to advertise one on-chain");
			return Ok(());
		};
		let text = address.to_string();
		let at = self.chain.at().await?;
		if self.chain.endpoint(&at, &self.me).await?.as_deref() == Some(text.as_str()) {
			return Ok(());
		}
		let endpoint = runtime::runtime_types::bounded_collections::bounded_vec::BoundedVec(text.clone().into_bytes());
		self.chain.send_in_block(&runtime::transactions().staking().set_endpoint(Some(endpoint)), &self.signer).await?;
		tracing::info!(%address, "advertised the artifact endpoint on-chain");
		Ok(())
	}

	/// Tells the chain the solver is online, at most once a minute.
	async fn heartbeat_if_due(&mut self) {
		self.heartbeat.send_if_due(&self.chain, &self.signer).await;
	}

	/// One pass over the chain: answer offers, train what is accepted, finalize what is
	/// due, and claim from the pool when idle.
	async fn tick(&mut self) -> Result<()> {
		self.metrics.peers.set(self.inputs.network.peers().await.len() as u64);
		self.heartbeat_if_due().await;
		// Work is read at the best block, so a unit is trained without waiting for
		// finality; only paying out (finalize) waits for it.
		let at = self.best.at().await?;
		let now = at.block_number() as u32;
		let window: u32 = at.constants().entry(runtime::constants().tasks().challenge_window())?;
		let mut held = self.chain.solver_units(&at, &self.me).await?;
		held.sort_unstable();
		for (job_id, index) in held {
			let (Some(job), Some(unit)) = (self.chain.job(&at, job_id).await?, self.chain.unit(&at, job_id, index).await?) else {
				continue;
			};
			match unit.state {
				UnitState::Assigned if !unit.accepted => {
					self.answer_offer(job_id, index, &job, &unit).await?;
					// The chain moved on: read it again before doing more.
					return Ok(());
				},
				UnitState::Assigned => {
					let work = self.prepare(job_id, index, &job, &unit)?;
					let backend = self.backend_for(&job);
					let exact = matches!(job.spec.verification, VerificationMode::Exact);
					self.train(job_id, index, work, backend, unit.last_checkpoint.map(|c| c.step), exact).await?;
					return Ok(());
				},
				UnitState::Proven | UnitState::Challenged => {
					if self.reveal_secret(&at, job_id, index, &unit).await? {
						return Ok(());
					}
					// A forced proof is not defended: its error is deliberate, and the reveal
					// dismisses every dispute over it.
					if self.secrets.forced(job_id, index).is_none() && self.defend(&at, job_id, index, &job, &unit).await? {
						return Ok(());
					}
					if unit.state == UnitState::Challenged {
						continue;
					}
					let due = unit.proven_at.is_some_and(|at| now >= at.saturating_add(window));
					let predecessor_final = match (job.spec.decomposition, index.checked_sub(1)) {
						(touchstone_primitives::Decomposition::StepRanges { .. }, Some(previous)) => {
							self.chain.unit(&at, job_id, previous).await?.is_some_and(|u| u.state == UnitState::Finalized)
						},
						_ => true,
					};
					if due && predecessor_final {
						self.finalize(job_id, index).await?;
						return Ok(());
					}
				},
				_ => {},
			}
		}
		// Nothing to train: a proven unit waiting out its window does not keep the
		// solver from taking more work.
		self.claim_from_pool(&at).await
	}

	/// The duties this solver's proven units owe while another unit (`training`) trains:
	/// each one's forced-error reveal, and its dispute moves (unless its proof is forced).
	/// Runs once per best block (`last` keeps the block it last ran at).
	async fn proven_duties(&mut self, training: (JobId, UnitIndex), last: &mut Option<u64>) -> Result<()> {
		let at = self.best.at().await?;
		if *last == Some(at.block_number()) {
			return Ok(());
		}
		*last = Some(at.block_number());
		for (job_id, index) in self.chain.solver_units(&at, &self.me).await? {
			if (job_id, index) == training {
				continue;
			}
			let (Some(job), Some(unit)) = (self.chain.job(&at, job_id).await?, self.chain.unit(&at, job_id, index).await?) else {
				continue;
			};
			if !matches!(unit.state, UnitState::Proven | UnitState::Challenged) {
				continue;
			}
			self.reveal_secret(&at, job_id, index, &unit).await?;
			if self.secrets.forced(job_id, index).is_none() {
				self.defend(&at, job_id, index, &job, &unit).await?;
			}
		}
		Ok(())
	}

	/// Accepts an offered unit this machine can train, or declines it with the reason.
	async fn answer_offer(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		match self.ready_to_take(job_id, index, job, unit).await {
			Ok(_) => {
				self.chain.send_in_block(&runtime::transactions().tasks().accept_unit(job_id, index), &self.signer).await?;
				self.metrics.unit("accepted");
				tracing::info!(job = job_id, unit = index, "accepted the unit");
			},
			Err(reason) => {
				tracing::warn!(job = job_id, unit = index, "declining the unit: {reason:#}");
				self.refused.insert((job_id, index));
				self.chain.send_in_block(&runtime::transactions().tasks().decline_unit(job_id, index), &self.signer).await?;
				self.metrics.unit("declined");
			},
		}
		Ok(())
	}

	/// Claims the first pool unit this solver is eligible for and can train.
	async fn claim_from_pool(&mut self, at: &AtBlock) -> Result<()> {
		let min_price = (self.args.min_price * UNIT as f64) as u128;
		for (job_id, index) in self.chain.pool(at).await? {
			if self.refused.contains(&(job_id, index)) {
				continue;
			}
			let (Some(job), Some(unit)) = (self.chain.job(at, job_id).await?, self.chain.unit(at, job_id, index).await?) else {
				continue;
			};
			if unit.state != UnitState::Pending ||
				job.spec.price_per_unit < min_price ||
				!job.spec.requirements.is_met_by(&self.detected.profile)
			{
				continue;
			}
			if let Err(reason) = self.ready_to_take(job_id, index, &job, &unit).await {
				tracing::info!(job = job_id, unit = index, "not claiming the unit: {reason:#}");
				self.refused.insert((job_id, index));
				continue;
			}
			match self.chain.send_in_block(&runtime::transactions().tasks().claim_unit(job_id, index), &self.signer).await {
				Ok(_) => {
					self.metrics.unit("claimed");
					tracing::info!(job = job_id, unit = index, "claimed the unit");
				},
				// Another solver (or the scheduler's offer to this one) got there first.
				Err(error) => tracing::info!(job = job_id, unit = index, "claim refused: {error:#}"),
			}
			return Ok(());
		}
		Ok(())
	}

	/// The unit's work, once this solver holds what it starts from, can train it, and
	/// trains a segment of it inside its deadline; or why not. What an offer is accepted
	/// or declined by, and a pool unit claimed or left by.
	async fn ready_to_take(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<UnitWork> {
		self.fetch_inputs(job_id, index, job, unit).await?;
		let work = self.prepare(job_id, index, job, unit)?;
		self.meets_deadline(job, &work).await?;
		Ok(work)
	}

	/// Whether this machine trains a checkpoint segment of `job` inside the unit's
	/// timeout: the chain moves a unit's deadline on only when a checkpoint is committed,
	/// so a solver that takes a unit it cannot checkpoint in time is timed out however
	/// honest it is. Times a step of the unit on the backend it would train on.
	async fn meets_deadline(&mut self, job: &Job, work: &UnitWork) -> Result<()> {
		let at = self.best.at().await?;
		// A slot is twice the timestamp pallet's minimum period.
		let period: u64 = at.constants().entry(runtime::constants().timestamp().minimum_period())?;
		let block_seconds = 2.0 * period as f64 / 1000.0;
		// Two steps of a large model take seconds: off the executor's other tasks.
		let backend = self.backend_for(job);
		let step_seconds = tokio::task::block_in_place(|| train::measure_step_seconds(backend, work))?;
		let segment_steps = job.spec.hyper.checkpoint_interval.clamp(1, work.steps.max(1));
		deadline_admits(step_seconds, segment_steps, job.spec.unit_timeout, block_seconds)
	}

	/// Everything needed to train a unit, or why this solver cannot (see
	/// [`Inputs::prepare`]); with `--inject-fault`, the fault it is told to inject.
	fn prepare(&self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<UnitWork> {
		let mut work = self.inputs.prepare(job_id, index, job, unit, self.detected.available_mib)?;
		work.fault = match self.args.inject_fault {
			Some(step) if (work.first_step..work.first_step.saturating_add(work.steps)).contains(&step) => {
				Some(injected_fault(step, &job.spec.verification, &work)?)
			},
			_ => None,
		};
		Ok(work)
	}

	/// Fetches what the unit starts from and this solver lacks (see [`Inputs::fetch`]).
	async fn fetch_inputs(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		let at = self.best.at().await?;
		self.inputs.fetch(&self.chain, &at, job_id, index, job, unit).await
	}

	/// The backend a job trains on: exact mode needs a bit-exact one (the CPU reference or
	/// wgpu), so a libtorch solver trains exact-mode jobs on the reference.
	fn backend_for(&self, job: &Job) -> BackendKind {
		match (&job.spec.verification, self.args.backend) {
			(VerificationMode::Exact, BackendKind::Tch) => BackendKind::Cpu,
			(_, backend) => backend,
		}
	}

	/// Trains an accepted unit, committing checkpoints as it goes, then commits the proof.
	async fn train(
		&mut self,
		job_id: JobId,
		index: UnitIndex,
		work: UnitWork,
		backend: BackendKind,
		committed: Option<u32>,
		exact: bool,
	) -> Result<()> {
		let steps = work.steps;
		let first_step = work.first_step;
		let end = first_step + steps;
		tracing::info!(job = job_id, unit = index, first_step = work.first_step, steps, "training");
		let (sender, mut progress) = tokio::sync::mpsc::unbounded_channel();
		let stop = self.stop.clone();
		let worker = tokio::task::spawn_blocking(move || {
			let report = |update| {
				let _ = sender.send(update);
			};
			run_unit_on(backend, &work, &stop, report).map(|done| done.map(|result| (result, work)))
		});
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
		let mut last_committed = committed.unwrap_or(0);
		let mut pending: Option<Checkpoint> = None;
		let mut last_step = (Instant::now(), first_step);
		let mut done_before = 0u32;
		// About a block: the duties of the solver's other units are checked once a block.
		let mut tick = tokio::time::interval(Duration::from_secs(3));
		let mut duties_at = None;
		let mut finished = false;
		while !finished {
			// Wait for news (or the heartbeat tick), then take everything already queued:
			// while a commit waits for finality, training runs on, and only the newest
			// checkpoint is committed next.
			let mut updates = Vec::new();
			tokio::select! {
				update = progress.recv() => match update {
					Some(update) => updates.push(update),
					None => finished = true,
				},
				_ = tick.tick() => {},
			}
			loop {
				match progress.try_recv() {
					Ok(update) => updates.push(update),
					Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
					Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
						finished = true;
						break;
					},
				}
			}
			for update in updates {
				match update {
					Progress::Steps { done } => {
						bar.set_position(done as u64);
						self.metrics.steps.inc_by(done.saturating_sub(done_before) as u64);
						done_before = done;
					},
					Progress::Checkpoint { step, hash, bytes } => {
						self.inputs.network.provide(self.inputs.store.put(&bytes)?);
						self.metrics.artifact_bytes.inc_by(bytes.len() as u64);
						let elapsed = last_step.0.elapsed().as_secs_f64();
						if elapsed > 0.0 {
							self.metrics.steps_per_second.set(step.saturating_sub(last_step.1) as f64 / elapsed);
						}
						last_step = (Instant::now(), step);
						if bar.is_hidden() {
							tracing::info!(job = job_id, unit = index, step, "checkpoint {}", hex(&hash));
						} else {
							bar.println(format!("checkpoint at step {step}: {}", hex(&hash)));
						}
						// The proof covers the unit's end: only earlier checkpoints are committed.
						if step < end && step > last_committed {
							pending = Some(Checkpoint { step, hash: hash.into() });
						}
					},
				}
			}
			// Once training is done the proof supersedes any checkpoint still pending.
			if finished {
				break;
			}
			if let Some(checkpoint) = pending.take() {
				let call = runtime::transactions().tasks().commit_checkpoint(job_id, index, Static(checkpoint));
				match self.chain.send_in_block(&call, &self.signer).await {
					Ok(_) => {
						last_committed = checkpoint.step;
						self.metrics.checkpoints.inc();
					},
					Err(error) => tracing::warn!(job = job_id, unit = index, "checkpoint not committed: {error:#}"),
				}
			}
			self.heartbeat_if_due().await;
			// A reveal or a dispute move of another unit cannot wait for this one's training:
			// missing it costs bond. A failure is reported and tried again next block.
			match self.proven_duties((job_id, index), &mut duties_at).await {
				Ok(()) => {},
				Err(error) => tracing::warn!(job = job_id, unit = index, "duties of the other units while training: {error:#}"),
			}
		}
		bar.finish_and_clear();
		let Some((result, work)) = worker.await.context("the training thread failed")?? else {
			tracing::info!(job = job_id, unit = index, "stopped; the unit resumes from its last checkpoint on restart");
			return Ok(());
		};
		// The final model is named by its proven state root: the next step range and the
		// job's submitter fetch it by that root and check it against it.
		let model = result.proof.final_state_root.0;
		self.inputs.store.put_as(&model, &result.final_model)?;
		self.inputs.network.provide(model);
		// Served before the proof goes out: verifiers check their samples against it.
		let manifest = crate::samples::write_manifest(&work, &self.inputs.store)?;
		ensure!(manifest == result.proof.trace_root.0, "the unit's trace manifest does not build its proof's trace root");
		self.inputs.network.provide(manifest);
		let (proof, final_state) = self.forced_if_drawn(job_id, index, &work, exact, result.proof, result.final_state).await?;
		let call = runtime::transactions().tasks().submit_proof(job_id, index, Static(proof), Static(final_state));
		self.chain.send_in_block(&call, &self.signer).await.context("committing the learning proof")?;
		self.metrics.proofs.inc();
		self.metrics.unit("proven");
		tracing::info!(
			job = job_id,
			unit = index,
			model = %hex(&model),
			loss = proof.metrics.loss.into_inner() as f64 / 1e9,
			"learning proof committed; the unit is paid once its challenge window passes"
		);
		tracing::debug!(dir = %work.dir.display(), "the unit's checkpoints stay for the challenge window");
		Ok(())
	}

	/// The proof to commit for a trained unit. While forced errors are on (exact mode
	/// only: a distance has no error to place), the solver builds beside its honest proof
	/// the one wrong at the step a fresh secret fixes, commits the hash binding the secret
	/// to both roots, and waits for the randomness the chain records after it (four blocks
	/// or so, at most 17): with the secret it says which proof to commit. The forced one is kept, with
	/// the honest one for the reveal. A solver restarted after its commitment finds its
	/// secret on disk and commits by the same rule (its training is bit-exact, so its
	/// roots are the same).
	async fn forced_if_drawn(
		&mut self,
		job_id: JobId,
		index: UnitIndex,
		work: &UnitWork,
		exact: bool,
		honest: LearningProof,
		final_state: StateOpening,
	) -> Result<(LearningProof, StateOpening)> {
		let at = self.best.at().await?;
		if !exact || self.chain.forced_error_rate(&at).await?.is_zero() {
			return Ok((honest, final_state));
		}
		let saved = match self.chain.secret(&at, job_id, index).await?.filter(|c| c.solver == self.me) {
			Some(commitment) => match self.secrets.secret(job_id, index, &commitment.hash.0) {
				Some(saved) => Some(saved),
				None => {
					tracing::warn!(job = job_id, unit = index, "this unit's forced-error secret is not in the data directory: its reveal will be missed");
					return Ok((honest, final_state));
				},
			},
			None => {
				// Randomness comes 3 to 17 blocks after the commitment, and a unit let go after
				// it costs its collateral: the chain refuses a commitment closer to the
				// deadline than its margin, so let the unit go now, for its reputation only.
				let deadline = self.chain.unit(&at, job_id, index).await?.and_then(|unit| unit.deadline);
				let now = at.block_number() as u32;
				// The commitment lands a block or two after the best block read here.
				ensure!(
					deadline.is_some_and(|deadline| deadline >= now.saturating_add(SECRET_MARGIN_BLOCKS + 2)),
					"the unit's deadline is too close to commit a forced-error secret and then the proof"
				);
				None
			},
		};
		let secret = match saved {
			Some(saved) => saved.secret,
			None => Secrets::fresh()?,
		};
		let step = crate::forced::forced_step(work, &secret);
		let forced = step.map(|step| crate::forced::forced_proof(work, &self.inputs.store, &honest, &final_state, step)).transpose()?;
		let forced_root = forced.as_ref().map_or(honest.trace_root.0, |(proof, _)| proof.trace_root.0);
		let bound = BoundSecret { secret, honest_root: honest.trace_root.0, forced_root };
		match saved {
			Some(saved) => ensure!(saved == bound, "the retrained unit's traces differ from those its secret was committed with"),
			None => {
				self.secrets.save(job_id, index, &bound)?;
				let commit = runtime::transactions().verification().commit_secret(job_id, index, subxt::utils::H256(bound.commitment()));
				self.chain.send_in_block(&commit, &self.signer).await.context("committing the forced-error secret")?;
				tracing::info!(job = job_id, unit = index, "committed a forced-error secret bound to the honest and the forced proof");
			},
		}
		let mut waited = 0;
		let (random, rate) = loop {
			let at = self.best.at().await?;
			let commitment = self.chain.secret(&at, job_id, index).await?.context("the unit's forced-error commitment is gone")?;
			if let Some(random) = commitment.random {
				// The rate in force when the secret was committed is the one the unit is judged by.
				break (random, commitment.rate);
			}
			waited += 1;
			ensure!(waited < 30, "the chain has not recorded randomness after this unit's forced-error secret");
			self.best.next(Duration::from_secs(6)).await;
		};
		let (Some(step), Some((forced, opening))) = (step, forced) else {
			return Ok((honest, final_state));
		};
		if !touchstone_primitives::forced_error(&bound.secret, &random, job_id, index, rate) {
			return Ok((honest, final_state));
		}
		self.inputs.network.provide(forced.trace_root.0);
		tracing::info!(
			job = job_id,
			unit = index,
			step,
			"the unit is forced: committing a proof wrong at this step on purpose; the honest one replaces it once the verifiers have committed"
		);
		self.secrets.save_forced(job_id, index, &ForcedUnit { step, honest, final_state })?;
		Ok((forced, opening))
	}

	/// Reveals the forced-error secret of a proven unit once its verifiers' commit period
	/// is over, with the root committed beside the proof's, and the honest proof's final
	/// state if the unit is forced; forgets a forced unit once its honest proof stands.
	/// Returns whether it sent anything.
	async fn reveal_secret(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, unit: &WorkUnit) -> Result<bool> {
		use pallet_touchstone_verification::SolverSecret;
		let forced = self.secrets.forced(job_id, index);
		if let (Some(forced), Some(proof)) = (forced.as_ref(), unit.proof.as_ref()) {
			if forced.honest.trace_root == proof.trace_root {
				tracing::info!(job = job_id, unit = index, "the honest proof replaced the forced one");
				self.secrets.forget_forced(job_id, index);
			}
		}
		let Some(round) = self.chain.round(at, job_id, index).await? else { return Ok(false) };
		let now = at.block_number() as u32;
		let due = round.drawn.as_ref().is_some_and(|drawn| now >= drawn.commit_ends && now < drawn.reveal_ends);
		let SolverSecret::Awaited { hash, .. } = round.secret else { return Ok(false) };
		if !due {
			return Ok(false);
		}
		let Some(bound) = self.secrets.secret(job_id, index, &hash.0) else {
			tracing::warn!(job = job_id, unit = index, "this unit's forced-error secret is not in the data directory: it cannot be revealed");
			return Ok(false);
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
		self.chain.send_in_block(&reveal, &self.signer).await.context("revealing the forced-error secret")?;
		tracing::info!(job = job_id, unit = index, forced = was_forced, "revealed the forced-error secret");
		Ok(true)
	}

	/// Answers the disputes over this solver's proof of a unit: the next move of each one
	/// that awaits it. Returns whether it sent anything (the chain then moved on).
	async fn defend(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<bool> {
		let prepare = || self.prepare(job_id, index, job, unit);
		crate::dispute::play(&self.chain, &self.signer, at, (job_id, index), Party::Defender, prepare).await
	}

	/// Finalizes a proven unit whose window has passed, collecting its pay.
	async fn finalize(&mut self, job_id: JobId, index: UnitIndex) -> Result<()> {
		let events = self.chain.send(&runtime::transactions().tasks().finalize_unit(job_id, index), &self.signer).await?;
		if let Some(event) = events.find_first::<runtime::tasks::events::UnitFinalized>() {
			let event = event?;
			self.metrics.earnings.inc_by(event.paid as u64);
			tracing::info!(job = job_id, unit = index, paid_tst = event.paid as f64 / UNIT as f64, "unit finalized and paid");
		}
		self.metrics.unit("finalized");
		Ok(())
	}
}

#[cfg(test)]
mod tests {
	use super::*;

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
}

//! The solver role: register and bond, take units the hardware can train, train them
//! with checkpoints, commit the learning proofs, and collect pay once their challenge
//! windows pass.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use subxt::utils::Static;
use subxt_signer::sr25519::Keypair;
use touchstone_kernels::job::checkpoint::Checkpoint as KernelCheckpoint;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::trace::state_root;
use touchstone_kernels::proof::hash::Digest;
use touchstone_kernels_wgpu::WgpuBackend;
use touchstone_primitives::referee::{kernel_model, kernel_train};
use touchstone_primitives::{Checkpoint, JobId, UnitIndex, UnitScope, UnitState, VerificationMode};

use crate::chain::{runtime, AccountId, AtBlock, BestBlocks, Chain, Job, WorkUnit};
use crate::defender::Move;
use crate::hardware::{self, Detected};
use crate::jobfile::UNIT;
use crate::metrics::Metrics;
use crate::p2p::{Network, NetworkArgs};
use crate::store::{parse_digest, Store};
use crate::train::{run_unit_on, BackendKind, Progress, UnitWork};
use crate::dataset;

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
}

/// A running solver.
pub struct Solver {
	chain: Chain,
	best: BestBlocks,
	network: Network,
	signer: Keypair,
	me: AccountId,
	store: Store,
	units_dir: PathBuf,
	args: SolveArgs,
	detected: Detected,
	metrics: Metrics,
	stop: Arc<AtomicBool>,
	/// Units this process gave up on (cannot train them): not claimed again.
	refused: BTreeSet<(JobId, UnitIndex)>,
	last_heartbeat: Option<Instant>,
}

/// Blocks in a minute: heartbeats go out about this often.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(60);

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
		let units_dir = data_dir.join("units");
		Ok(Self {
			best: chain.follow_best(),
			chain,
			network,
			signer,
			me,
			store,
			units_dir,
			args,
			detected,
			metrics,
			stop,
			refused: BTreeSet::new(),
			last_heartbeat: None,
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
		let stop = self.stop.clone();
		let stopped = || async {
			while !stop.load(Ordering::Relaxed) {
				tokio::time::sleep(Duration::from_millis(200)).await;
			}
		};
		while !self.stop.load(Ordering::Relaxed) {
			// A stop interrupts a pass even when the node is gone and a call would retry for
			// ever; training stops at the step it is in, and the unit resumes on restart.
			tokio::select! {
				result = self.tick() => if let Err(error) = result {
					tracing::warn!("{error:#}");
				},
				_ = stopped() => break,
			}
			// The next pass starts as soon as the chain moves on.
			tokio::select! {
				_ = self.best.next(Duration::from_secs(6)) => {},
				_ = stopped() => break,
			}
		}
		tracing::info!("solver stopped");
		Ok(())
	}

	/// Registers as a solver with the bond, unless registered already.
	async fn ensure_registered(&mut self) -> Result<()> {
		let at = self.chain.at().await?;
		let node = at.storage().try_fetch(runtime::storage().staking().nodes(), (self.me.clone(),)).await?;
		if let Some(node) = node {
			let node = node.decode()?;
			if !node.roles.solver {
				bail!("{} is registered, but not as a solver: bond for the solver role (staking.bondMore) or use another key", self.me);
			}
			tracing::info!("already registered as a solver");
			return Ok(());
		}
		let bond = (self.args.bond * UNIT as f64) as u128;
		let min_bond: u128 = at.constants().entry(runtime::constants().staking().min_solver_bond())?;
		if bond < min_bond {
			bail!("--bond {} TST is below the chain's minimum solver bond of {} TST", self.args.bond, min_bond / UNIT);
		}
		let free = self.chain.free_balance(&at, &self.me).await?;
		// The bond plus a margin for transaction fees.
		if free < bond.saturating_add(UNIT) {
			bail!(
				"balance too low for the bond: {} holds {:.3} TST, the bond is {} TST plus fees. Fund the account or pass a smaller --bond",
				self.me,
				free as f64 / UNIT as f64,
				self.args.bond
			);
		}
		let bonds = runtime::runtime_types::bounded_collections::bounded_vec::BoundedVec(vec![(
			runtime::runtime_types::touchstone_primitives::Role::Solver,
			bond,
		)]);
		let min_price = (self.args.min_price * UNIT as f64) as u128;
		let call = runtime::transactions().staking().register(Static(self.detected.profile.clone()), bonds, min_price);
		self.chain.send(&call, &self.signer).await.context("registering as a solver")?;
		self.last_heartbeat = Some(Instant::now());
		tracing::info!(bond_tst = self.args.bond, "registered as a solver");
		Ok(())
	}

	/// Advertises on-chain where this worker accepts peers (`--p2p-external`, or else its
	/// listening address), unless the chain already holds that address.
	async fn advertise_endpoint(&mut self) -> Result<()> {
		let Some(address) = self.network.advertised(self.args.network.p2p_external.as_ref()).await? else {
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
	async fn heartbeat_if_due(&mut self) -> Result<()> {
		if self.last_heartbeat.is_some_and(|last| last.elapsed() < HEARTBEAT_EVERY) {
			return Ok(());
		}
		self.chain.send_in_block(&runtime::transactions().staking().heartbeat(), &self.signer).await.context("heartbeat")?;
		self.last_heartbeat = Some(Instant::now());
		Ok(())
	}

	/// One pass over the chain: answer offers, train what is accepted, finalize what is
	/// due, and claim from the pool when idle.
	async fn tick(&mut self) -> Result<()> {
		self.metrics.peers.set(self.network.peers().await.len() as u64);
		self.heartbeat_if_due().await?;
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
					self.train(job_id, index, work, backend, unit.last_checkpoint.map(|c| c.step)).await?;
					return Ok(());
				},
				UnitState::Proven | UnitState::Challenged => {
					if self.defend(&at, job_id, index, &job, &unit).await? {
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

	/// Accepts an offered unit this machine can train, or declines it with the reason.
	async fn answer_offer(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		let ready = match self.fetch_inputs(job_id, index, job, unit).await {
			Ok(()) => self.prepare(job_id, index, job, unit),
			Err(error) => Err(error),
		};
		match ready {
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
			let ready = match self.fetch_inputs(job_id, index, &job, &unit).await {
				Ok(()) => self.prepare(job_id, index, &job, &unit).map(|_| ()),
				Err(error) => Err(error),
			};
			if let Err(reason) = ready {
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

	/// Everything needed to train a unit, or why this solver cannot: its dataset and
	/// start state are here and check out against the chain, and it fits in memory.
	fn prepare(&self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<UnitWork> {
		let spec = &job.spec;
		let model = kernel_model(&spec.model);
		let train = kernel_train(&spec.hyper);
		let dataset_hash: Digest = spec.dataset.content.hash.0;
		let bytes = self.store.get(&dataset_hash).with_context(|| {
			format!("the job's dataset {} is not available to this solver", hex(&dataset_hash))
		})?;
		let data = dataset::from_bytes(&bytes)?;
		let root = data.root().map_err(|error| anyhow!("{error:?}"))?;
		if root != spec.dataset.root.0 || data.len() != spec.dataset.samples as usize {
			bail!("the dataset does not match the job's dataset root: refusing to train on it");
		}
		let needed = hardware::unit_memory_mib(&model, &train, &data)?;
		if needed > self.detected.available_mib {
			bail!("the unit needs about {needed} MiB and {} MiB are available", self.detected.available_mib);
		}
		let (first_step, steps, shard) = match unit.scope {
			UnitScope::Steps { first_step, steps } => (first_step, steps, None),
			UnitScope::Shard { first_sample, samples } => {
				(0, spec.hyper.steps, Some(first_sample as usize..(first_sample + samples) as usize))
			},
		};
		let start_root = unit.start_state_root.context("the unit has no start state yet")?.0;
		let start_state = if start_root == spec.initial_state_root.0 {
			let weights = match &spec.initial_weights {
				Some(weights) => {
					let hash = weights.hash.0;
					let bytes = self.store.get(&hash).with_context(|| {
						format!("the job's initial weights {} are not available to this solver", hex(&hash))
					})?;
					let checkpoint = KernelCheckpoint::from_bytes(&bytes, &hash)
						.map_err(|error| anyhow!("the job's initial weights are not a model file: {error}"))?;
					Some(checkpoint.state)
				},
				None => None,
			};
			let state = crate::train::initial_state(&model, &train, &data, weights.as_deref())?;
			if state_root(&state).map_err(|error| anyhow!("{error:?}"))? != start_root {
				let source = if weights.is_some() { "initial weights" } else { "seed" };
				bail!("the job's initial state root is not the state its {source} gives: refusing the job");
			}
			state
		} else {
			self.state_with_root(&start_root)?
		};
		let dir = self.units_dir.join(format!("{job_id}-{index}-{}", hex(&start_root)));
		Ok(UnitWork { model, train, data, shard, first_step, steps, start_state, dir })
	}

	/// Fetches what the unit starts from and this solver lacks, from the peers that hold
	/// it: the job's dataset, and for a later step range the model the previous range
	/// proved (named by its proof's model hash, and checked against the unit's start state
	/// root).
	async fn fetch_inputs(&mut self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		let patience = Duration::from_secs(30);
		let dataset = job.spec.dataset.content.hash.0;
		let weights = job.spec.initial_weights.as_ref().map(|weights| weights.hash.0);
		let start = unit.start_state_root.map(|root| root.0);
		let from_initial = start == Some(job.spec.initial_state_root.0);
		let missing = !self.store.contains(&dataset) ||
			(from_initial && weights.is_some_and(|hash| !self.store.contains(&hash))) ||
			start.is_some_and(|start| !from_initial && self.state_with_root(&start).is_err());
		if !missing {
			return Ok(());
		}
		// The solvers of the job's other units hold its inputs: connect to the endpoints
		// they advertise on-chain.
		let at = self.best.at().await?;
		for endpoint in self.chain.job_endpoints(&at, job_id, job.units, Some(&self.me), 8).await? {
			match endpoint.parse() {
				Ok(address) => self.network.dial(address),
				Err(error) => tracing::debug!(%endpoint, "not a multiaddr: {error}"),
			}
		}
		if !self.store.contains(&dataset) {
			tracing::info!(job = job_id, "fetching the job's dataset {} from peers", hex(&dataset));
			self.network.fetch(dataset, patience).await.context("the job's dataset")?;
		}
		let Some(start) = start else { return Ok(()) };
		if from_initial {
			if let Some(weights) = weights.filter(|hash| !self.store.contains(hash)) {
				tracing::info!(job = job_id, "fetching the job's initial weights {} from peers", hex(&weights));
				self.network.fetch(weights, patience).await.context("the job's initial weights")?;
			}
			return Ok(());
		}
		if self.state_with_root(&start).is_ok() {
			return Ok(());
		}
		let previous = match index.checked_sub(1) {
			Some(previous) => self.chain.unit(&at, job_id, previous).await?.and_then(|unit| unit.proof),
			None => None,
		};
		let model = previous.context("the unit's start state is not a proven model this solver can fetch")?.final_model_hash.0;
		tracing::info!(job = job_id, unit = index, "fetching the start model {} from peers", hex(&model));
		let bytes = self.network.fetch(model, patience).await.context("the unit's start model")?;
		let checkpoint = KernelCheckpoint::from_bytes(&bytes, &model).map_err(|error| anyhow!("{error}"))?;
		if state_root(&checkpoint.state).map_err(|error| anyhow!("{error:?}"))? != start {
			bail!("the previous range's model {} does not hold the unit's start state", hex(&model));
		}
		self.index_state(&start, &model)
	}

	/// Records that the model file `model` holds the state with root `root`.
	fn index_state(&self, root: &Digest, model: &Digest) -> Result<()> {
		let states = self.units_dir.join("states");
		std::fs::create_dir_all(&states)?;
		std::fs::write(states.join(hex(root)), hex(model))?;
		Ok(())
	}

	/// A model state this solver holds, by its state root.
	fn state_with_root(&self, root: &Digest) -> Result<Vec<Vec<f32>>> {
		let index = self.units_dir.join("states").join(hex(root));
		let text = std::fs::read_to_string(&index)
			.with_context(|| format!("the unit starts from state {}, which this solver does not hold", hex(root)))?;
		let hash = parse_digest(text.trim()).context("damaged state index")?;
		let checkpoint = KernelCheckpoint::from_bytes(&self.store.get(&hash)?, &hash).map_err(|error| anyhow!("{error}"))?;
		Ok(checkpoint.state)
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
	async fn train(&mut self, job_id: JobId, index: UnitIndex, work: UnitWork, backend: BackendKind, committed: Option<u32>) -> Result<()> {
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
			run_unit_on(backend, &work, &stop, report).map(|done| done.map(|result| (result, work.dir)))
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
		let mut tick = tokio::time::interval(Duration::from_secs(10));
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
						self.network.provide(self.store.put(&bytes)?);
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
			self.heartbeat_if_due().await?;
		}
		bar.finish_and_clear();
		let Some((result, dir)) = worker.await.context("the training thread failed")?? else {
			tracing::info!(job = job_id, unit = index, "stopped; the unit resumes from its last checkpoint on restart");
			return Ok(());
		};
		let model_hash = self.store.put(&result.final_model)?;
		self.network.provide(model_hash);
		// Index the final state by its root, so the next step range can start from it.
		self.index_state(&result.proof.final_state_root.0, &model_hash)?;
		let proof = result.proof;
		let call = runtime::transactions().tasks().submit_proof(job_id, index, Static(proof), Static(result.final_state));
		self.chain.send_in_block(&call, &self.signer).await.context("committing the learning proof")?;
		self.metrics.proofs.inc();
		self.metrics.unit("proven");
		tracing::info!(
			job = job_id,
			unit = index,
			model = %hex(&model_hash),
			loss = proof.metrics.loss.into_inner() as f64 / 1e9,
			"learning proof committed; the unit is paid once its challenge window passes"
		);
		tracing::debug!(dir = %dir.display(), "the unit's checkpoints stay for the challenge window");
		Ok(())
	}

	/// Answers the disputes over this solver's proof of a unit: the next move of each one
	/// that awaits it. Returns whether it sent anything (the chain then moved on).
	async fn defend(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<bool> {
		let disputes: Vec<_> = crate::defender::disputes_of(at, job_id, index)
			.await?
			.into_iter()
			.filter(|(_, dispute)| dispute.defender == self.me)
			.collect();
		if disputes.is_empty() {
			return Ok(false);
		}
		let work = self.prepare(job_id, index, job, unit)?;
		let run = crate::defender::Run::load(&work).context("the unit's records, to answer a dispute")?;
		let now = at.block_number() as u32;
		let calls = runtime::transactions().disputes();
		for (id, dispute) in disputes {
			let Some(next) = run.next_move(&dispute, now)? else { continue };
			let (name, sent) = match next {
				Move::Reveal(reveal) => ("reveal", self.chain.send_in_block(&calls.reveal(id, reveal), &self.signer).await),
				Move::BindStep(root, binding) => {
					("bind_step", self.chain.send_in_block(&calls.bind_step(id, root, binding), &self.signer).await)
				},
				Move::BindOperator(root, proof) => {
					("bind_operator", self.chain.send_in_block(&calls.bind_operator(id, root, proof), &self.signer).await)
				},
				Move::Resolve(openings) => ("resolve", self.chain.send(&calls.resolve(id, openings), &self.signer).await),
				Move::TimeOut => ("time_out", self.chain.send(&calls.time_out(id), &self.signer).await),
			};
			match sent {
				Ok(_) => tracing::info!(job = job_id, unit = index, dispute = id, round = dispute.rounds, "dispute: sent {name}"),
				Err(error) => tracing::warn!(job = job_id, unit = index, dispute = id, "dispute: {name} refused: {error:#}"),
			}
			return Ok(true);
		}
		Ok(false)
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

//! What a unit starts from: the job's dataset and the unit's start state, fetched from
//! peers, checked against the chain's roots, and turned into the work a solver trains or a
//! verifier re-executes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use touchstone_kernels::job::checkpoint::Checkpoint as KernelCheckpoint;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::job::trace::state_root;
use touchstone_kernels::proof::hash::Digest;
use touchstone_primitives::referee::{kernel_model, kernel_train};
use touchstone_primitives::{JobId, UnitIndex, UnitScope};

use crate::chain::{AccountId, Chain, Job, WorkUnit};
use crate::state::ChainState;
use crate::dataset::CheckedDatasets;
use crate::hardware;
use crate::p2p::Network;
use crate::store::{holds_state, Kind, Store};
use crate::train::UnitWork;

/// A worker's artifacts and the folder its units are worked in.
#[derive(Clone)]
pub struct Inputs {
	/// The content-addressed artifact store.
	pub store: Store,
	/// The libp2p node artifacts are fetched through and served from.
	pub network: Network,
	/// Where units are worked: one folder per unit and start state, and `states/`, the
	/// index from state roots to the model files that hold them.
	pub units_dir: PathBuf,
	/// The worker's account: its own advertised endpoint is not dialled.
	pub me: AccountId,
	/// The datasets read from the store and checked, kept for the next unit or pass.
	pub datasets: CheckedDatasets,
}

impl Inputs {
	/// Everything needed to train a unit, or why this worker cannot: its dataset and
	/// start state are here and check out against the chain, and it fits in the memory
	/// free on the `device` now.
	pub fn prepare(&self, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit, device: &hardware::Detected) -> Result<UnitWork> {
		let spec = &job.spec;
		let model = kernel_model(&spec.model);
		let train = kernel_train(&spec.hyper);
		let data = self.datasets.get(&self.store, &model, &spec.dataset)?;
		device.admit(&model, &train, &data)?;
		let shard = |first_sample: u32, samples: u32| Some(first_sample as usize..first_sample as usize + samples as usize);
		let (first_step, steps, shard) = match unit.scope {
			UnitScope::Steps { first_step, steps } => (first_step, steps, None),
			UnitScope::Shard { first_sample, samples } => (0, spec.hyper.steps, shard(first_sample, samples)),
			UnitScope::RoundShard { round, first_sample, samples } => {
				let local_steps = spec.decomposition.local_steps();
				(round.saturating_mul(local_steps), local_steps, shard(first_sample, samples))
			},
			UnitScope::Aggregate { round } => bail!("unit {index} is round {round}'s aggregate, which trains nothing"),
		};
		let start_root = unit.start_state_root.context("the unit has no start state yet")?.0;
		let start_state = self.state_of_job(job, &start_root, &data)?;
		let dir = self.units_dir.join(format!("{job_id}-{index}-{}", hex(&start_root)));
		Ok(UnitWork { model, train, data: TrainingData::clone(&data), shard, first_step, steps, start_state, dir, fault: None })
	}

	/// The state of `job` with root `root`: its initial state, built from its seed or
	/// initial weights (and checked against the chain's root), or a model this worker
	/// holds, checked against `root`.
	pub fn state_of_job(&self, job: &Job, root: &Digest, data: &TrainingData) -> Result<Vec<Vec<f32>>> {
		let spec = &job.spec;
		let (model, train) = (kernel_model(&spec.model), kernel_train(&spec.hyper));
		let start_root = *root;
		let start_state = if start_root == spec.initial_state_root.0 {
			let weights = match &spec.initial_weights {
				Some(weights) => {
					let hash = weights.hash.0;
					let bytes = self.store.get(&hash).with_context(|| {
						format!("the job's initial weights {} are not available to this worker", hex(&hash))
					})?;
					let checkpoint = KernelCheckpoint::from_bytes(&bytes, &hash)
						.map_err(|error| anyhow!("the job's initial weights are not a model file: {error}"))?;
					Some(checkpoint.state)
				},
				None => None,
			};
			let state = crate::train::initial_state(&model, &train, data, weights.as_deref())?;
			if state_root(&state).map_err(|error| anyhow!("{error:?}"))? != start_root {
				let source = if weights.is_some() { "initial weights" } else { "seed" };
				bail!("the job's initial state root is not the state its {source} gives: refusing the job");
			}
			state
		} else {
			self.state_with_root(&start_root)?
		};
		Ok(start_state)
	}

	/// Fetches what the unit starts from and this worker lacks, from the peers that hold
	/// it: the job's dataset, and for a later step range the model the previous range
	/// proved (named by its proven final state root, the unit's start state root, and
	/// checked against it). `at` is the chain state the unit was read at.
	/// Each is noted as the job's ([`Network::keep`]) once here.
	pub async fn fetch(&self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		let dataset = job.spec.dataset.content.hash.0;
		let weights = job.spec.initial_weights.as_ref().map(|weights| weights.hash.0);
		let start = unit.start_state_root.map(|root| root.0).filter(|start| *start != job.spec.initial_state_root.0);
		self.fetch_missing(at, job_id, index, job, unit).await?;
		self.network.keep(job_id, Kind::Dataset, dataset);
		if let Some(weights) = weights {
			self.network.keep(job_id, Kind::Weights, weights);
		}
		if let Some(start) = start {
			self.network.keep(job_id, Kind::Model, start);
		}
		Ok(())
	}

	async fn fetch_missing(&self, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<()> {
		let patience = Duration::from_secs(30);
		let dataset = job.spec.dataset.content.hash.0;
		let weights = job.spec.initial_weights.as_ref().map(|weights| weights.hash.0);
		let start = unit.start_state_root.map(|root| root.0);
		let from_initial = start == Some(job.spec.initial_state_root.0);
		let missing = !self.store.contains(&dataset) ||
			(from_initial && weights.is_some_and(|hash| !self.store.contains(&hash))) ||
			start.is_some_and(|start| !from_initial && !self.store.contains(&start));
		if !missing {
			return Ok(());
		}
		// The most bytes each can hold, from the job's shapes: a peer that declares more
		// is lying.
		let model = kernel_model(&job.spec.model);
		let model_bound = crate::train::model_file_bound(&model, &kernel_train(&job.spec.hyper))?;
		let dataset_bound = crate::dataset::file_len(&model, u64::from(job.spec.dataset.samples))?;
		self.connect(at, job_id, job).await?;
		if !self.store.contains(&dataset) {
			tracing::info!(job = job_id, "fetching the job's dataset {} from peers", hex(&dataset));
			self.network.fetch_to_store(dataset, patience, dataset_bound).await.context("the job's dataset")?;
		}
		let Some(start) = start else { return Ok(()) };
		if from_initial {
			if let Some(weights) = weights.filter(|hash| !self.store.contains(hash)) {
				tracing::info!(job = job_id, "fetching the job's initial weights {} from peers", hex(&weights));
				self.network.fetch_to_store(weights, patience, model_bound).await.context("the job's initial weights")?;
			}
			return Ok(());
		}
		if !self.store.contains(&start) {
			tracing::info!(job = job_id, unit = index, "fetching the start model {} from peers", hex(&start));
			self.fetch_model(start, model_bound).await.context("the unit's start model")?;
		}
		Ok(())
	}

	/// Fetches the model with state root `root` from the peers connected, unless this
	/// worker holds it, checking it against the root; `bound` is the most bytes a model
	/// file of its job holds ([`crate::train::model_file_bound`]).
	pub async fn fetch_model(&self, root: Digest, bound: u64) -> Result<()> {
		if self.store.contains(&root) {
			return Ok(());
		}
		let check = holds_state(root);
		self.network.fetch_with(root, Duration::from_secs(30), &check, bound).await.map(|_| ())
	}

	/// Connects to the endpoints the solvers of the job's units advertise on-chain: they
	/// hold its inputs, their units' checkpoints and their trace manifests.
	pub async fn connect(&self, at: &impl ChainState, job_id: JobId, job: &Job) -> Result<()> {
		for endpoint in at.job_endpoints(job_id, job.units, Some(&self.me), 8).await? {
			match endpoint.parse() {
				Ok(address) => self.network.dial(address),
				Err(error) => tracing::debug!(%endpoint, "not a multiaddr: {error}"),
			}
		}
		Ok(())
	}

	/// A model state this worker holds, by its state root.
	pub fn state_with_root(&self, root: &Digest) -> Result<Vec<Vec<f32>>> {
		// Parsed and checked once, below, rather than by the store's check and again here.
		let bytes = self
			.store
			.get_with(root, &|_| Ok(()))
			.with_context(|| format!("the unit starts from state {}, which this worker does not hold", hex(root)))?;
		let checkpoint = KernelCheckpoint::with_state_root(&bytes, root)
			.map_err(|error| anyhow!("{error}; delete it from the store and fetch it again"))?;
		Ok(checkpoint.state)
	}
}

/// How many of the endpoints advertised on-chain a worker joins the artifact network
/// through.
pub const JOINED_ENDPOINTS: usize = 32;

/// Joins the artifact network through the endpoints nodes advertise on-chain: dials up to
/// [`JOINED_ENDPOINTS`] of them (not those already connected) and bootstraps the DHT from
/// them. A submitter does so, so that the solvers it dials fetch its dataset from it with
/// no `--peer`, even from behind NAT, since it dials out; solvers, verifiers and
/// challengers do so to find what others announce. A failure to read them is logged: the
/// worker still has `--peer`, mDNS and the endpoints of each job's solvers.
pub async fn join_network(chain: &Chain, network: &Network) {
	let joined = async {
		let at = chain.at().await?;
		let endpoints = chain.endpoints(&at, JOINED_ENDPOINTS).await?;
		let addresses: Vec<libp2p::Multiaddr> = endpoints.iter().filter_map(|endpoint| endpoint.parse().ok()).collect();
		let count = addresses.len();
		network.join(addresses);
		anyhow::Ok(count)
	};
	match joined.await {
		Ok(count) => tracing::debug!("joining the artifact network through {count} endpoints advertised on-chain"),
		Err(error) => tracing::warn!("cannot read the endpoints advertised on-chain: {error:#}"),
	}
}

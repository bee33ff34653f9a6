//! A round's aggregate, as the solver that holds a rounds job's aggregate unit computes
//! it: the round's proven shard end states, fetched by their roots and checked against
//! them, averaged by the job's weighting, and the outer step from the round's global state
//! and outer momentum (`touchstone_kernels::ops::aggregate`, the arithmetic the referee
//! recomputes chunk by chunk). The next global state and momentum are stored as model
//! files named by their roots and served to the next round's solvers.

use anyhow::{anyhow, bail, ensure, Context, Result};
use touchstone_kernels::job::checkpoint::Checkpoint;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::trace::state_root;
use touchstone_kernels::ops::aggregate::{aggregate_state, weights, Weighting};
use touchstone_kernels::proof::chain::ChainPoint;
use touchstone_kernels::proof::hash::Digest;
use touchstone_primitives::referee::{kernel_model, kernel_outer, kernel_train};
use touchstone_primitives::{Aggregation, Decomposition, JobId, UnitIndex, UnitScope};

use crate::chain::{Job, WorkUnit};
use crate::inputs::Inputs;
use crate::state::ChainState;
use crate::store::Kind;

/// A round's aggregate, stored and served: what `submit_aggregate` commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aggregated {
	/// The root of the next global state.
	pub state_root: Digest,
	/// The root of the next outer momentum (Nesterov only).
	pub momentum_root: Option<Digest>,
}

/// What a round's aggregate is computed from, read from the chain.
struct RoundInputs {
	/// The round's global state root: every shard's start.
	global: Digest,
	/// Each shard's proven end state root and sample count, in shard order.
	shards: Vec<(Digest, u64)>,
	/// The outer momentum the round starts from: the previous aggregate's, `None` for
	/// the first round (zeros) and for plain averaging.
	momentum: Option<Digest>,
}

/// Reads what aggregate unit `index` of `job` is computed from: every shard of its round
/// must stand proven from the round's global state.
async fn round_inputs(at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<RoundInputs> {
	let UnitScope::Aggregate { round } = unit.scope else { bail!("unit {index} is not a round's aggregate") };
	let layout = job.spec.decomposition.round_layout().context("the job is not cut into rounds")?;
	let global = unit.start_state_root.context("the aggregate is not ready: its round's shards are not all proven")?.0;
	let mut shards = Vec::with_capacity(layout.shards as usize);
	for shard in 0..layout.shards {
		let shard_index = layout.shard_index(round, shard);
		let shard_unit = at.unit(job_id, shard_index).await?.with_context(|| format!("shard unit {shard_index} is missing"))?;
		let proof = shard_unit.proof.with_context(|| format!("shard unit {shard_index} has no proof"))?;
		ensure!(proof.start_state_root.0 == global, "shard unit {shard_index} did not start from the round's global state");
		let (_, samples) = shard_unit.scope.data(job.spec.dataset.samples).context("a shard reads data")?;
		shards.push((proof.final_state_root.0, u64::from(samples)));
	}
	let nesterov = matches!(job.spec.decomposition, Decomposition::Rounds { outer: touchstone_primitives::OuterOptimizer::Nesterov { .. }, .. });
	let momentum = match round.checked_sub(1) {
		Some(previous) if nesterov => {
			let previous_index = layout.aggregate_index(previous);
			let previous_unit = at.unit(job_id, previous_index).await?.context("the previous round's aggregate is missing")?;
			Some(previous_unit.proof.context("the previous round's aggregate has no proof")?.trace_root.0)
		},
		_ => None,
	};
	Ok(RoundInputs { global, shards, momentum })
}

/// Computes, stores and serves the aggregate of unit `index` (fetching the states it
/// reads from the job's peers first).
pub async fn compute(inputs: &Inputs, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<Aggregated> {
	let round = round_inputs(at, job_id, index, job, unit).await?;
	let Decomposition::Rounds { aggregation, outer, local_steps, .. } = job.spec.decomposition else {
		bail!("the job is not cut into rounds");
	};
	let (model, train) = (kernel_model(&job.spec.model), kernel_train(&job.spec.hyper));
	let bound = crate::train::model_file_bound(&model, &train)?;
	// The dataset and the round's global state, as a shard of the round fetches them.
	inputs.fetch(at, job_id, index, job, unit).await?;
	inputs.connect(at, job_id, job).await?;
	for root in round.shards.iter().map(|(root, _)| *root).chain(round.momentum).collect::<Vec<_>>() {
		inputs.fetch_model(root, bound).await.with_context(|| format!("fetching state {} for the aggregate", hex(&root)))?;
	}
	let data = inputs.datasets.get(&inputs.store, &job.spec.dataset)?;
	tokio::task::block_in_place(|| {
		let global = inputs.state_of_job(job, &round.global, &data)?;
		let shards = round.shards.iter().map(|(root, _)| inputs.state_with_root(root)).collect::<Result<Vec<_>>>()?;
		let nesterov = matches!(kernel_outer(&outer), touchstone_kernels::ops::aggregate::Outer::Nesterov { .. });
		let momentum = match (round.momentum, nesterov) {
			(Some(root), _) => inputs.state_with_root(&root)?,
			(None, true) => global.iter().map(|tensor| vec![0.0; tensor.len()]).collect(),
			(None, false) => Vec::new(),
		};
		let weighting = match aggregation {
			Aggregation::WeightedBySamples => Weighting::BySamples,
			Aggregation::Uniform => Weighting::Uniform,
		};
		let samples: Vec<u64> = round.shards.iter().map(|(_, samples)| *samples).collect();
		let weights = weights(weighting, &samples).map_err(|error| anyhow!("the round's weights: {error:?}"))?;
		let (next, next_momentum) = aggregate_state(&kernel_outer(&outer), &weights, &shards, &global, &momentum)
			.map_err(|error| anyhow!("the aggregate: {error:?}"))?;
		let UnitScope::Aggregate { round: number } = unit.scope else { bail!("unit {index} is not a round's aggregate") };
		// The next round starts at this step: the model file says so.
		let next_step = number.saturating_add(1).saturating_mul(local_steps);
		let state_root = store_state(inputs, job_id, next_step, next)?;
		let momentum_root = if nesterov { Some(store_state(inputs, job_id, next_step, next_momentum)?) } else { None };
		tracing::info!(job = job_id, unit = index, "aggregated {} shards into state {}", samples.len(), hex(&state_root));
		Ok(Aggregated { state_root, momentum_root })
	})
}

/// Stores `state` as a model file named by its root, served to the job's peers.
fn store_state(inputs: &Inputs, job_id: JobId, next_step: u32, state: Vec<Vec<f32>>) -> Result<Digest> {
	let root = state_root(&state).map_err(|error| anyhow!("{error:?}"))?;
	let bytes = Checkpoint { point: ChainPoint::start(next_step), state }.to_bytes().map_err(|error| anyhow!("{error}"))?;
	inputs.store.put_as(&root, &bytes)?;
	inputs.network.keep(job_id, Kind::Model, root);
	Ok(root)
}

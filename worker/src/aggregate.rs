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
use touchstone_kernels::referee::aggregate::{aggregate_openings, first_wrong_chunk, AggregateOpenings};
use touchstone_primitives::referee::{kernel_model, kernel_outer, kernel_train};
use touchstone_primitives::{Aggregation, Decomposition, JobId, UnitIndex, UnitScope};

use crate::chain::{Job, WorkUnit};
use crate::inputs::Inputs;
use crate::state::ChainState;
use crate::store::Kind;

/// Whether `unit` is a round's aggregate, which trains nothing.
pub fn is_aggregate(unit: &WorkUnit) -> bool {
	matches!(unit.scope, UnitScope::Aggregate { .. })
}

/// The root a unit's standing commitment is known by: an aggregate's next global state, a
/// trained unit's trace. `None` without a proof.
pub fn committed_root(unit: &WorkUnit) -> Option<Digest> {
	let proof = unit.proof.as_ref()?;
	Some(if is_aggregate(unit) { proof.final_state_root.0 } else { proof.trace_root.0 })
}

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

/// A round's aggregate recomputed by the contract, with the states it was computed from.
struct Recomputed {
	/// What the chain says the aggregate is computed from.
	round: RoundInputs,
	/// Each shard's end state, in shard order.
	shards: Vec<Vec<Vec<f32>>>,
	/// The round's global state.
	global: Vec<Vec<f32>>,
	/// The outer momentum the round starts from: zeros in the first round of a Nesterov
	/// job, nothing for plain averaging.
	momentum: Vec<Vec<f32>>,
	/// Whether the outer step is Nesterov's (the aggregate commits a momentum).
	nesterov: bool,
	/// The next global state.
	next: Vec<Vec<f32>>,
	/// The next outer momentum (Nesterov only; empty otherwise).
	next_momentum: Vec<Vec<f32>>,
	/// The global step the next round starts at.
	next_step: u32,
}

/// Recomputes the aggregate of unit `index` from its round (fetching the states it reads
/// from the job's peers first), as its solver computes it and as a watcher checks it.
async fn recompute(inputs: &Inputs, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<Recomputed> {
	let round = round_inputs(at, job_id, index, job, unit).await?;
	let Decomposition::Rounds { aggregation, outer, local_steps, .. } = job.spec.decomposition else {
		bail!("the job is not cut into rounds");
	};
	let UnitScope::Aggregate { round: number } = unit.scope else { bail!("unit {index} is not a round's aggregate") };
	let (model, train) = (kernel_model(&job.spec.model), kernel_train(&job.spec.hyper));
	let bound = crate::train::model_file_bound(&model, &train)?;
	// The dataset and the round's global state, as a shard of the round fetches them.
	inputs.fetch(at, job_id, index, job, unit).await?;
	inputs.connect(at, job_id, job).await?;
	for root in round.shards.iter().map(|(root, _)| *root).chain(round.momentum).collect::<Vec<_>>() {
		inputs.fetch_model(root, bound).await.with_context(|| format!("fetching state {} for the aggregate", hex(&root)))?;
	}
	let data = inputs.datasets.get(&inputs.store, &model, &job.spec.dataset)?;
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
		let next_momentum = if nesterov { next_momentum } else { Vec::new() };
		// The next round starts at this step: the model file says so.
		let next_step = number.saturating_add(1).saturating_mul(local_steps);
		Ok(Recomputed { round, shards, global, momentum, nesterov, next, next_momentum, next_step })
	})
}

/// Computes, stores and serves the aggregate of unit `index` (fetching the states it
/// reads from the job's peers first). `lie` is test equipment (`solve
/// --lie-in-aggregate`): it flips a low mantissa bit of the word in the middle of the next
/// state (sets it to 1 if it is zero), a lie only a recomputation sees.
pub async fn compute(
	inputs: &Inputs,
	at: &impl ChainState,
	job_id: JobId,
	index: UnitIndex,
	job: &Job,
	unit: &WorkUnit,
	lie: bool,
) -> Result<Aggregated> {
	let recomputed = recompute(inputs, at, job_id, index, job, unit).await?;
	let shards = recomputed.shards.len();
	let Recomputed { nesterov, mut next, next_momentum, next_step, .. } = recomputed;
	if lie {
		let middle = next.iter().map(Vec::len).sum::<usize>() / 2;
		let word = next.iter_mut().flatten().nth(middle).context("the state is empty")?;
		// A low bit of a zero would make a subnormal, which the state's canonical form
		// flushes: the lie would not survive its own model file.
		*word = if word.is_normal() { f32::from_bits(word.to_bits() ^ 1) } else { 1.0 };
		tracing::warn!(job = job_id, unit = index, "test equipment: the aggregate lies at word {middle} of the next state");
	}
	tokio::task::block_in_place(|| {
		let state_root = store_state(inputs, job_id, next_step, next)?;
		let momentum_root = if nesterov { Some(store_state(inputs, job_id, next_step, next_momentum)?) } else { None };
		tracing::info!(job = job_id, unit = index, "aggregated {shards} shards into state {}", hex(&state_root));
		Ok(Aggregated { state_root, momentum_root })
	})
}

/// A committed aggregate that is not what its round gives: the chunk at which to
/// challenge it, and the openings that convict it there.
pub struct WrongAggregate {
	/// The first chunk of the next state (or momentum) that differs.
	pub chunk: u32,
	/// That chunk opened in every input and in the committed states.
	pub openings: AggregateOpenings,
}

/// Checks the aggregate committed for unit `index` by recomputing it: `None` when its
/// roots are the contract's; otherwise the committed states, fetched from the aggregator
/// by their roots, are compared chunk by chunk, and the first wrong chunk is returned
/// with its openings, ready for `disputes.challenge_aggregate`.
pub async fn check(inputs: &Inputs, at: &impl ChainState, job_id: JobId, index: UnitIndex, job: &Job, unit: &WorkUnit) -> Result<Option<WrongAggregate>> {
	let proof = unit.proof.as_ref().context("the aggregate has no commitment")?;
	let (claimed_root, claimed_momentum_root) = (proof.final_state_root.0, proof.trace_root.0);
	let recomputed = recompute(inputs, at, job_id, index, job, unit).await?;
	let root_of = |state: &[Vec<f32>]| state_root(state).map_err(|error| anyhow!("{error:?}"));
	let momentum_matches = !recomputed.nesterov || root_of(&recomputed.next_momentum)? == claimed_momentum_root;
	if root_of(&recomputed.next)? == claimed_root && momentum_matches {
		return Ok(None);
	}
	let bound = crate::train::model_file_bound(&kernel_model(&job.spec.model), &kernel_train(&job.spec.hyper))?;
	let mut claimed_roots = vec![claimed_root];
	if recomputed.nesterov {
		claimed_roots.push(claimed_momentum_root);
	}
	for root in &claimed_roots {
		inputs.fetch_model(*root, bound).await.with_context(|| format!("fetching the committed aggregate state {}", hex(root)))?;
	}
	tokio::task::block_in_place(|| {
		let claimed = inputs.state_with_root(&claimed_root)?;
		let claimed_momentum = if recomputed.nesterov { inputs.state_with_root(&claimed_momentum_root)? } else { Vec::new() };
		let chunk = first_wrong_chunk((&recomputed.next, &recomputed.next_momentum), (&claimed, &claimed_momentum))
			.context("the committed aggregate is not this node's, but its states are not of the job's layout: no chunk of it can be judged")?;
		let momentum = recomputed.round.momentum.is_some().then_some(recomputed.momentum.as_slice());
		let claimed_momentum = recomputed.nesterov.then_some(claimed_momentum.as_slice());
		let openings = aggregate_openings(&recomputed.shards, &recomputed.global, momentum, &claimed, claimed_momentum, chunk)
			.context("opening the wrong chunk")?;
		Ok(Some(WrongAggregate { chunk: chunk as u32, openings }))
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

//! Data-parallel rounds on the digits job, simulated on this machine: what a rounds job
//! would reach, before the chain schedules one.
//!
//! In each round every shard trains `H` local steps on its quarter of the training set
//! from the round's global state; their end states are averaged by samples
//! (`touchstone_kernels::ops::aggregate`, the operator the referee recomputes) and the
//! outer step makes the next global state. The parameters take the outer step; the
//! optimizer's own momentum is averaged plainly. Each setting trains as many sequential
//! steps per shard as the digits job has (1,000), so four shards do four times its
//! gradient steps; the table compares test accuracy with one run of the job's 1,000 steps
//! and one of 4,000 (the same total), on the CPU reference.
//!
//! `scripts/bench-rounds.sh` builds and runs it: a few seconds on one core.

use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use touchstone_kernels::job::data::Dataset;
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::job::trace::Trainer;
use touchstone_kernels::ops::aggregate::{average, outer_step, weights, Outer, Weighting};
use touchstone_kernels::proof::chain::ChainPoint;
use touchstone_kernels::CpuBackend;
use touchstone_primitives::referee::{kernel_model, kernel_train};
use touchstone_worker::{dataset, jobfile, store::Store};

/// Shards in every round.
const SHARDS: usize = 4;

fn main() -> Result<()> {
	// One core, as one solver's share of this 2-core machine would be.
	touchstone_kernels::exec::parallel::set_threads(1);
	let dir = std::env::temp_dir().join(format!("touchstone-rounds-{}", std::process::id()));
	let store = Store::open(&dir)?;
	let prepared = jobfile::prepare(&jobfile::digits_example(), &dir, &store)?;
	let _ = std::fs::remove_dir_all(&dir);
	let (model, train) = (kernel_model(&prepared.spec.model), kernel_train(&prepared.spec.hyper));
	let (_, test) = dataset::digits_split()?;
	let TrainingData::Samples(data) = prepared.train else { bail!("the digits job trains on samples") };
	let initial = prepared.initial_state;
	let steps = prepared.spec.hyper.steps;
	let params = model.params().map_err(|error| anyhow!("{error:?}"))?.len();
	let accuracy = |state: &[Vec<f32>]| -> Result<f64> {
		let predictions = model.predict(&state[..params], &test.features, test.len()).map_err(|error| anyhow!("{error:?}"))?;
		Ok(predictions.iter().zip(&test.labels).filter(|(p, l)| p == l).count() as f64 / test.len() as f64)
	};
	println!("digits: {} training samples in {SHARDS} shards, {} test samples; MLP 64-64-10, SGD lr 0.1 momentum 0.9, batch 32", data.len(), test.len());
	println!("{:<44} {:>9} {:>10}", "run", "accuracy", "seconds");
	for total in [steps, steps * SHARDS as u32] {
		let started = Instant::now();
		let state = run(&model, &train, &data, initial.clone(), 0..data.len(), 0, total)?;
		let label = format!("one run, {total} steps");
		println!("{label:<44} {:>8.2}% {:>10.1}", 100.0 * accuracy(&state)?, started.elapsed().as_secs_f64());
	}
	let outers = [("average", Outer::Average), ("nesterov 0.7/0.9", Outer::Nesterov { learning_rate: 0.7, momentum: 0.9 })];
	for local_steps in [10u32, 50, 250] {
		for (name, outer) in outers {
			let started = Instant::now();
			let state = rounds(&model, &train, &data, initial.clone(), params, steps / local_steps, local_steps, outer)?;
			let label = format!("{SHARDS} shards, {} rounds of {local_steps}, {name}", steps / local_steps);
			println!("{label:<44} {:>8.2}% {:>10.1}", 100.0 * accuracy(&state)?, started.elapsed().as_secs_f64());
		}
	}
	Ok(())
}

/// `steps` steps from `state` at global step `first`, on the samples `shard`.
fn run(
	model: &ModelConfig,
	train: &TrainConfig,
	data: &Dataset,
	state: Vec<Vec<f32>>,
	shard: std::ops::Range<usize>,
	first: u32,
	steps: u32,
) -> Result<Vec<Vec<f32>>> {
	let kernel = |error| anyhow!("{error:?}");
	let mut trainer =
		Trainer::resume(CpuBackend, model, train, data.clone(), state, ChainPoint::start(first)).map_err(kernel)?.on_shard(shard).map_err(kernel)?;
	for _ in 0..steps {
		trainer.step().map_err(kernel)?;
	}
	trainer.state().map_err(kernel)
}

/// `rounds` rounds of `local_steps` on each of [`SHARDS`] shards, from `global`.
#[allow(clippy::too_many_arguments)]
fn rounds(
	model: &ModelConfig,
	train: &TrainConfig,
	data: &Dataset,
	mut global: Vec<Vec<f32>>,
	params: usize,
	rounds: u32,
	local_steps: u32,
	outer: Outer,
) -> Result<Vec<Vec<f32>>> {
	let bounds: Vec<usize> = (0..=SHARDS).map(|shard| shard * data.len() / SHARDS).collect();
	let samples: Vec<u64> = bounds.windows(2).map(|pair| (pair[1] - pair[0]) as u64).collect();
	let weights = weights(Weighting::BySamples, &samples).map_err(|error| anyhow!("{error}"))?;
	let mut momentum: Vec<Vec<f32>> = global[..params].iter().map(|tensor| vec![0.0; tensor.len()]).collect();
	for round in 0..rounds {
		let first = round * local_steps;
		let ends = (0..SHARDS)
			.map(|shard| run(model, train, data, global.clone(), bounds[shard]..bounds[shard + 1], first, local_steps))
			.collect::<Result<Vec<_>>>()?;
		for (tensor, next) in global.iter_mut().enumerate() {
			let inputs: Vec<&[f32]> = ends.iter().map(|end| end[tensor].as_slice()).collect();
			let mut mean = vec![0.0; next.len()];
			average(&weights, &inputs, &mut mean).map_err(|error| anyhow!("{error}"))?;
			// The parameters take the outer step; the inner optimizer's moments the average.
			let step = if tensor < params { outer } else { Outer::Average };
			let mut unused = Vec::new();
			let tensor_momentum = momentum.get_mut(tensor).unwrap_or(&mut unused);
			outer_step(&step, next, &mean, tensor_momentum).context("the outer step")?;
		}
	}
	Ok(global)
}

//! Job descriptions: a file (TOML or JSON) or the built-in digits example, turned into
//! the chain's `JobSpec` with the dataset and initial state committed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use polkadot_sdk::sp_core::Get;
use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64};
use touchstone_kernels::job::checkpoint::Checkpoint;
use touchstone_kernels::job::model::ModelConfig;
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::proof::content::content_hash;
use touchstone_kernels::proof::hash::Digest;
use touchstone_kernels::job::trace::state_root;
use touchstone_primitives::referee::{kernel_model, kernel_train};
use touchstone_primitives::{
	Activation, Aggregation, ContentRef, DatasetRef, Decomposition, DeviceKind, HardwareRequirements, HyperParams,
	JobSpec, ModelArch, Normalization, Optimizer, OuterOptimizer, VerificationMode,
};

use crate::dataset;
use crate::store::Store;

/// One TST in plancks.
pub const UNIT: u128 = 1_000_000_000_000;

/// A job as a user writes it. Real numbers are decimals; the chain's fixed-point values
/// are derived from them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
	/// The training set: a dataset file, relative to the job file; `"digits"` for the
	/// digits training split; or `"synthetic:SAMPLES:FEATURES:CLASSES:SEED"` for the
	/// kernels' seeded synthetic classification set. A transformer's is a token stream
	/// file (`touchstone/tokens/v1`), cut to the whole windows of its context, or
	/// `"shakespeare"` for the Shakespeare corpus's training nine tenths.
	pub dataset: String,
	/// The model.
	pub model: ModelFile,
	/// Weights to start from: a Touchstone model file (`fetch` and `train --out` write
	/// them), relative to the job file. Its parameters are used, with fresh optimizer
	/// state; the file is published to solvers like the dataset. Seeded weights when absent.
	#[serde(default)]
	pub initial_weights: Option<String>,
	/// How proofs are checked: `"exact"` (the default: bit for bit, on the CPU reference or
	/// wgpu) or `{ tolerance = { max_l2, max_linf, max_cosine_distance } }` (solvers may
	/// train on libtorch; re-executions must land within these distances).
	#[serde(default)]
	pub verification: VerificationFile,
	/// Training hyper-parameters.
	pub train: TrainFile,
	/// How the job is cut into units.
	pub units: UnitsFile,
	/// TST paid per finalized unit.
	pub price_per_unit: f64,
	/// TST held in escrow; defaults to the price of every unit.
	#[serde(default)]
	pub budget: Option<f64>,
	/// Blocks a solver may go without progress before its unit returns to the pool.
	#[serde(default = "default_unit_timeout")]
	pub unit_timeout: u32,
	/// Blocks a unit may wait in the pool.
	#[serde(default = "default_pool_timeout")]
	pub pool_timeout: u32,
	/// What a solver's hardware must offer.
	#[serde(default)]
	pub requirements: RequirementsFile,
}

fn default_unit_timeout() -> u32 {
	100
}
fn default_pool_timeout() -> u32 {
	600
}

/// A model architecture.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum ModelFile {
	/// A multi-layer perceptron.
	Mlp { inputs: u32, hidden: Vec<u32>, classes: u32, activation: ActivationFile },
	/// A small convolutional network.
	Cnn {
		channels: u32,
		height: u32,
		width: u32,
		conv_channels: Vec<u32>,
		kernel_size: u32,
		hidden: Vec<u32>,
		classes: u32,
		activation: ActivationFile,
	},
	/// A pre-norm, decoder-only transformer over a token stream; it trains with AdamW.
	Transformer {
		vocab: u32,
		context: u32,
		layers: u32,
		heads: u32,
		width: u32,
		mlp_ratio: u32,
		norm: NormFile,
		tied_embeddings: bool,
	},
}

/// A transformer's normalisation.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormFile {
	LayerNorm,
	RmsNorm,
}

/// A hidden-layer activation.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationFile {
	Relu,
	Tanh,
	Gelu,
}

/// How a job's proofs are checked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum VerificationFile {
	/// Bit-exact re-execution.
	#[default]
	Exact,
	/// Re-executions must land within these distances of the committed weights.
	Tolerance { max_l2: f64, max_linf: f64, max_cosine_distance: f64 },
}

/// Training hyper-parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainFile {
	pub steps: u32,
	pub batch_size: u32,
	pub learning_rate: f64,
	pub optimizer: OptimizerFile,
	#[serde(default)]
	pub grad_clip_norm: Option<f64>,
	pub seed: u64,
	pub checkpoint_interval: u32,
}

/// The optimizer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum OptimizerFile {
	Sgd { momentum: f64 },
	Adamw { beta1: f64, beta2: f64, epsilon: f64, weight_decay: f64 },
}

/// How the job is cut into units: `steps_per_unit` for step ranges, or `shards` for
/// data-parallel shards, with `rounds` (and optionally the outer step) for rounds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitsFile {
	/// Consecutive step ranges of this many steps.
	#[serde(default)]
	pub steps_per_unit: Option<u32>,
	/// Data-parallel shards.
	#[serde(default)]
	pub shards: Option<u32>,
	/// Data-parallel rounds: the job's steps are cut into this many rounds of
	/// `steps / rounds` local steps, each round's shard models averaged into the next
	/// round's model. Needs `shards`.
	#[serde(default)]
	pub rounds: Option<u32>,
	/// The rounds' outer learning rate, for Nesterov's outer step; without it the
	/// average is the next model. Needs `rounds` and `outer_momentum`.
	#[serde(default)]
	pub outer_learning_rate: Option<f64>,
	/// The rounds' outer momentum, for Nesterov's outer step. Needs `outer_learning_rate`.
	#[serde(default)]
	pub outer_momentum: Option<f64>,
}

/// Hardware requirements.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementsFile {
	/// `"cpu"`, `"gpu"`, or absent for either.
	#[serde(default)]
	pub device: Option<String>,
	#[serde(default)]
	pub min_memory_mib: u32,
	#[serde(default)]
	pub min_throughput_gflops: u32,
}

/// A job ready to submit: its spec, with the dataset (and any initial weights) published
/// to the store.
pub struct PreparedJob {
	/// The spec to submit.
	pub spec: JobSpec<u128>,
	/// The training data.
	pub train: TrainingData,
	/// The state the job starts from, whose root the spec commits to.
	pub initial_state: Vec<Vec<f32>>,
}

/// The built-in digits job: the digits classifier (64 → 64 → 10, ReLU) trained for 1,000
/// steps of SGD with momentum in four step ranges of 250, the run whose test accuracy the
/// kernels pin (352/360).
pub fn digits_example() -> JobFile {
	JobFile {
		dataset: "digits".into(),
		model: ModelFile::Mlp { inputs: 64, hidden: vec![64], classes: 10, activation: ActivationFile::Relu },
		initial_weights: None,
		verification: VerificationFile::Exact,
		train: TrainFile {
			steps: 1000,
			batch_size: 32,
			learning_rate: 0.1,
			optimizer: OptimizerFile::Sgd { momentum: 0.9 },
			grad_clip_norm: None,
			seed: dataset::DIGITS_SEED,
			checkpoint_interval: 50,
		},
		units: UnitsFile { steps_per_unit: Some(250), ..Default::default() },
		price_per_unit: 1.0,
		budget: None,
		unit_timeout: default_unit_timeout(),
		pool_timeout: default_pool_timeout(),
		requirements: RequirementsFile { device: None, min_memory_mib: 64, min_throughput_gflops: 0 },
	}
}

/// The built-in Shakespeare job: a character transformer (4 blocks of width 64, 4 heads,
/// context 64, tied embeddings: 209,536 parameters) trained for 2,000 steps of AdamW at
/// batch 16 on the corpus's training stream, in four step ranges of 500. On the CPU
/// reference it trains in about three minutes here, to a validation loss of 1.79 nats a
/// character (`docs/performance.md`).
pub fn shakespeare_example() -> JobFile {
	JobFile {
		dataset: "shakespeare".into(),
		model: ModelFile::Transformer {
			vocab: 84,
			context: 64,
			layers: 4,
			heads: 4,
			width: 64,
			mlp_ratio: 4,
			norm: NormFile::LayerNorm,
			tied_embeddings: true,
		},
		initial_weights: None,
		verification: VerificationFile::Exact,
		train: TrainFile {
			steps: 2000,
			batch_size: 16,
			learning_rate: 0.005,
			optimizer: OptimizerFile::Adamw { beta1: 0.9, beta2: 0.99, epsilon: 1e-8, weight_decay: 0.1 },
			grad_clip_norm: Some(1.0),
			seed: 1,
			checkpoint_interval: 100,
		},
		units: UnitsFile { steps_per_unit: Some(500), ..Default::default() },
		price_per_unit: 1.0,
		budget: None,
		unit_timeout: default_unit_timeout(),
		pool_timeout: default_pool_timeout(),
		requirements: RequirementsFile { device: None, min_memory_mib: 256, min_throughput_gflops: 0 },
	}
}

/// Reads a job file: TOML, or JSON when its name ends in `.json`.
pub fn read(path: &Path) -> Result<(JobFile, PathBuf)> {
	let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the job file {}", path.display()))?;
	let job: JobFile = if path.extension().is_some_and(|ext| ext == "json") {
		serde_json::from_str(&text).with_context(|| format!("{} is not a valid job description", path.display()))?
	} else {
		toml::from_str(&text).with_context(|| format!("{} is not a valid job description", path.display()))?
	};
	let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
	Ok((job, base))
}

fn fixed(name: &str, value: f64) -> Result<FixedU64> {
	if !(value.is_finite() && value >= 0.0 && value < 1.0e9) {
		bail!("{name} must be a finite number in [0, 10⁹); got {value}");
	}
	Ok(FixedU64::from_inner((value * 1e9).round() as u64))
}

fn plancks(name: &str, tst: f64) -> Result<u128> {
	if !(tst.is_finite() && tst >= 0.0) {
		bail!("{name} must be a non-negative number of TST; got {tst}");
	}
	Ok((tst * UNIT as f64).round() as u128)
}

fn bounded<T, S: Get<u32>>(name: &str, values: Vec<T>) -> Result<BoundedVec<T, S>> {
	BoundedVec::try_from(values).map_err(|_| anyhow::anyhow!("{name} has more entries than the chain accepts"))
}

/// The chain's model architecture of a described one.
pub fn model_arch(model: &ModelFile) -> Result<ModelArch> {
	let activation = |a: ActivationFile| match a {
		ActivationFile::Relu => Activation::Relu,
		ActivationFile::Tanh => Activation::Tanh,
		ActivationFile::Gelu => Activation::Gelu,
	};
	Ok(match model {
		ModelFile::Mlp { inputs, hidden, classes, activation: a } => ModelArch::Mlp {
			inputs: *inputs,
			hidden: bounded("model.hidden", hidden.clone())?,
			classes: *classes,
			activation: activation(*a),
		},
		ModelFile::Cnn { channels, height, width, conv_channels, kernel_size, hidden, classes, activation: a } => {
			ModelArch::Cnn {
				channels: *channels,
				height: *height,
				width: *width,
				conv_channels: bounded("model.conv_channels", conv_channels.clone())?,
				kernel_size: *kernel_size,
				hidden: bounded("model.hidden", hidden.clone())?,
				classes: *classes,
				activation: activation(*a),
			}
		},
		ModelFile::Transformer { vocab, context, layers, heads, width, mlp_ratio, norm, tied_embeddings } => ModelArch::Transformer {
			vocab: *vocab,
			context: *context,
			layers: *layers,
			heads: *heads,
			width: *width,
			mlp_ratio: *mlp_ratio,
			norm: match norm {
				NormFile::LayerNorm => Normalization::LayerNorm,
				NormFile::RmsNorm => Normalization::RmsNorm,
			},
			tied_embeddings: *tied_embeddings,
		},
	})
}

/// The training data `job` names, for its model: a dataset, or for a transformer a token
/// stream cut to the whole windows of its context.
fn training_data(job: &JobFile, base: &Path, model: &ModelConfig) -> Result<TrainingData> {
	let read = || -> Result<TrainingData> {
		let path = base.join(&job.dataset);
		let bytes = std::fs::read(&path).with_context(|| format!("cannot read the dataset {}", path.display()))?;
		dataset::training_from_bytes(&bytes).with_context(|| format!("in {}", path.display()))
	};
	let synthetic = job.dataset.strip_prefix("synthetic:");
	match model {
		ModelConfig::Transformer(config) => {
			let context = config.context as usize;
			if job.dataset == "shakespeare" {
				return Ok(dataset::shakespeare_stream(context)?.into());
			}
			if job.dataset == "digits" || synthetic.is_some() {
				bail!("a transformer trains on a token stream: dataset = \"shakespeare\" or a token stream file");
			}
			match read()? {
				TrainingData::Tokens(stream) => Ok(std::sync::Arc::unwrap_or_clone(stream).cut_to_windows(context).into()),
				TrainingData::Samples(_) => bail!("{} is a dataset of samples; a transformer trains on a token stream file", job.dataset),
			}
		},
		_ if job.dataset == "digits" => Ok(dataset::digits_split()?.0.into()),
		_ if job.dataset == "shakespeare" => bail!("the Shakespeare token stream is a transformer's data: use model.transformer"),
		_ => match synthetic {
			Some(shape) => Ok(dataset::synthetic_from(shape)?.into()),
			None => match read()? {
				samples @ TrainingData::Samples(_) => Ok(samples),
				TrainingData::Tokens(_) => bail!("{} is a token stream; only a transformer trains on one", job.dataset),
			},
		},
	}
}

/// Prepares `job`: loads its dataset, publishes it to `store`, computes the roots the
/// chain commits to, and builds the spec. Every check the chain makes on the shape runs
/// here first, so a bad job fails before it costs a transaction fee.
pub fn prepare(job: &JobFile, base: &Path, store: &Store) -> Result<PreparedJob> {
	let model = model_arch(&job.model)?;
	let kernel = kernel_model(&model);
	let train = training_data(job, base, &kernel)?;
	let file = dataset::training_bytes(&train);
	let file_hash = store.put(&file)?;
	let root = train.as_ref().tree().map_err(|error| anyhow::anyhow!("cannot commit to the dataset: {error:?}"))?.root();
	let context = kernel.input_len().map_err(|error| anyhow::anyhow!("the model: {error:?}"))?;
	let samples = u32::try_from(train.as_ref().samples(context)).context("the dataset holds more samples than the chain counts")?;
	let t = &job.train;
	let hyper = HyperParams {
		steps: t.steps,
		batch_size: t.batch_size,
		learning_rate: fixed("train.learning_rate", t.learning_rate)?,
		optimizer: match t.optimizer {
			OptimizerFile::Sgd { momentum } => Optimizer::Sgd { momentum: fixed("momentum", momentum)? },
			OptimizerFile::Adamw { beta1, beta2, epsilon, weight_decay } => Optimizer::AdamW {
				beta1: fixed("beta1", beta1)?,
				beta2: fixed("beta2", beta2)?,
				epsilon: fixed("epsilon", epsilon)?,
				weight_decay: fixed("weight_decay", weight_decay)?,
			},
		},
		grad_clip_norm: t.grad_clip_norm.map(|norm| fixed("train.grad_clip_norm", norm)).transpose()?,
		seed: t.seed,
		checkpoint_interval: t.checkpoint_interval,
	};
	let u = &job.units;
	let outer = match (u.outer_learning_rate, u.outer_momentum) {
		(None, None) => OuterOptimizer::Average,
		(Some(rate), Some(momentum)) => OuterOptimizer::Nesterov {
			learning_rate: fixed("units.outer_learning_rate", rate)?,
			momentum: fixed("units.outer_momentum", momentum)?,
		},
		_ => bail!("units: give both outer_learning_rate and outer_momentum for Nesterov's outer step, or neither to average"),
	};
	if u.rounds.is_none() && outer != OuterOptimizer::Average {
		bail!("units: an outer step needs rounds");
	}
	let (decomposition, units) = match (u.steps_per_unit, u.shards, u.rounds) {
		(Some(steps_per_unit), None, None) if steps_per_unit > 0 => {
			(Decomposition::StepRanges { steps_per_unit }, t.steps.div_ceil(steps_per_unit))
		},
		(None, Some(shards), None) if shards > 0 => {
			(Decomposition::DataShards { shards, aggregation: Aggregation::WeightedBySamples }, shards)
		},
		(None, Some(shards), Some(rounds)) if shards > 0 && rounds > 0 => {
			if t.steps % rounds != 0 {
				bail!("units: rounds = {rounds} must divide train.steps = {} (each round trains steps / rounds local steps)", t.steps);
			}
			let local_steps = t.steps / rounds;
			let aggregation = Aggregation::WeightedBySamples;
			(Decomposition::Rounds { shards, rounds, local_steps, aggregation, outer }, rounds.saturating_mul(shards + 1))
		},
		(_, None, Some(_)) => bail!("units: rounds needs shards"),
		_ => bail!("units: give exactly one of steps_per_unit or shards (with rounds, if any), above zero"),
	};
	// The state the job starts from: the seeded or given weights and zeroed optimizer
	// state, as the trainer builds them (which also validates the model against the data).
	let initial_weights = match &job.initial_weights {
		Some(name) => {
			let path = base.join(name);
			let bytes = std::fs::read(&path).with_context(|| format!("cannot read the initial weights {}", path.display()))?;
			let checkpoint = Checkpoint::from_bytes(&bytes, &content_hash(&bytes))
				.map_err(|error| anyhow::anyhow!("{} is not a Touchstone model file: {error}", path.display()))?;
			Some((store.put(&bytes)?, checkpoint.state))
		},
		None => None,
	};
	let initial = crate::train::initial_state(
		&kernel,
		&kernel_train(&hyper),
		&train,
		initial_weights.as_ref().map(|(_, state)| state.as_slice()),
	);
	let initial = match &job.initial_weights {
		Some(name) => initial.with_context(|| format!("with the initial weights {name}"))?,
		None => initial?,
	};
	let initial_state_root = state_root(&initial).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let verification = match job.verification {
		VerificationFile::Exact => VerificationMode::Exact,
		VerificationFile::Tolerance { max_l2, max_linf, max_cosine_distance } => VerificationMode::Tolerance {
			max_l2: fixed("verification.tolerance.max_l2", max_l2)?,
			max_linf: fixed("verification.tolerance.max_linf", max_linf)?,
			max_cosine_distance: fixed("verification.tolerance.max_cosine_distance", max_cosine_distance)?,
		},
	};
	let price_per_unit = plancks("price_per_unit", job.price_per_unit)?;
	let budget = match job.budget {
		Some(budget) => plancks("budget", budget)?,
		None => price_per_unit.saturating_mul(units as u128),
	};
	let device = match job.requirements.device.as_deref() {
		None => None,
		Some("cpu") => Some(DeviceKind::Cpu),
		Some("gpu") => Some(DeviceKind::Gpu),
		Some(other) => bail!("requirements.device must be \"cpu\" or \"gpu\", not {other:?}"),
	};
	let content = |hash: Digest| -> Result<ContentRef> {
		let location = format!("touchstone:{}", touchstone_kernels::job::data::hex(&hash));
		Ok(ContentRef { hash: hash.into(), location: bounded("location", location.into_bytes())? })
	};
	let spec = JobSpec {
		model,
		initial_weights: initial_weights.map(|(hash, _)| content(hash)).transpose()?,
		initial_state_root: initial_state_root.into(),
		dataset: DatasetRef {
			content: content(file_hash)?,
			samples,
			root: root.into(),
		},
		hyper,
		decomposition,
		verification,
		requirements: HardwareRequirements {
			device,
			min_memory_mib: job.requirements.min_memory_mib,
			min_throughput_gflops: job.requirements.min_throughput_gflops,
			min_bandwidth_mbps: 0,
			region: None,
		},
		price_per_unit,
		budget,
		unit_timeout: job.unit_timeout,
		pool_timeout: job.pool_timeout,
	};
	Ok(PreparedJob { spec, train, initial_state: initial })
}

#[cfg(test)]
mod tests {
	use super::*;

	/// The Shakespeare example prepares to a transformer's spec over the corpus's training
	/// stream cut to windows of 64: 71,210 windows, the stream's file published and its
	/// root committed. A transformer on samples, a classifier on the stream and a
	/// transformer trained with SGD are refused with what to change.
	#[test]
	fn the_shakespeare_example_commits_the_training_stream_cut_to_its_windows() {
		let dir = std::env::temp_dir().join(format!("touchstone-jobfile-{}", std::process::id()));
		let store = Store::open(&dir).unwrap();
		let here = Path::new(".");
		let prepared = prepare(&shakespeare_example(), here, &store).unwrap();
		assert!(matches!(prepared.spec.model, ModelArch::Transformer { vocab: 84, context: 64, .. }), "{:?}", prepared.spec.model);
		assert_eq!(prepared.spec.dataset.samples, 71_210);
		let TrainingData::Tokens(stream) = &prepared.train else { panic!("a token stream") };
		assert_eq!(stream.tokens.len(), 71_210 * 64 + 1);
		assert_eq!(prepared.spec.dataset.root.0, stream.root().unwrap());
		let published = store.get(&prepared.spec.dataset.content.hash.0).unwrap();
		assert_eq!(dataset::training_from_bytes(&published).unwrap(), prepared.train);
		let refused = |job: JobFile| prepare(&job, here, &store).err().map(|error| format!("{error:#}")).unwrap_or_default();
		let on_digits = JobFile { dataset: "digits".into(), ..shakespeare_example() };
		assert!(refused(on_digits).contains("a transformer trains on a token stream"));
		let classifier = JobFile { dataset: "shakespeare".into(), ..digits_example() };
		assert!(refused(classifier).contains("a transformer's data"));
		let mut sgd = shakespeare_example();
		sgd.train.optimizer = OptimizerFile::Sgd { momentum: 0.9 };
		assert!(refused(sgd).contains("a transformer trains with AdamW"));
		std::fs::remove_dir_all(&dir).unwrap();
	}
}

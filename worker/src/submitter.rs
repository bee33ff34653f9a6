//! The submitter's side: a job from its description to a tested model. `submit` publishes
//! the dataset and commits the job, `status` shows jobs and units, `fetch` writes a proven
//! model, `evaluate` tests one, and `train` runs a job locally, without a chain, as solvers
//! would.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use subxt::utils::Static;
use touchstone_kernels::job::checkpoint::Checkpoint;
use touchstone_kernels::job::data::{hex, Dataset};
use touchstone_kernels::job::model::ModelConfig;
use touchstone_kernels::job::text::{first_windows, load_shakespeare};
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::job::transformer::{generate, mean_loss, next_token_accuracy, TransformerConfig};
use touchstone_kernels::proof::content::content_hash;
use touchstone_primitives::referee::kernel_model;
use touchstone_primitives::{JobId, JobStatus, UnitState};

use crate::chain::{runtime, Chain, ChainAccess};
use crate::state::ChainState;
use crate::jobfile::UNIT;
use crate::store::{holds_state, Store};
use crate::{dataset, jobfile, keys, p2p, train};

#[derive(clap::Args)]
pub struct SubmitArgs {
	#[command(flatten)]
	pub key: keys::KeyArgs,
	/// A job description file (TOML, or JSON by its extension).
	#[arg(long, conflicts_with = "example", required_unless_present = "example")]
	pub job: Option<PathBuf>,
	/// A built-in job instead of a file.
	#[arg(long, value_enum)]
	pub example: Option<Example>,
	/// Wait until the job completes, printing its progress, and serve the job's dataset
	/// to solvers over the network meanwhile.
	#[arg(long)]
	pub wait: bool,
	#[command(flatten)]
	pub network: p2p::NetworkArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Example {
	/// The digits classifier: 1,000 steps in four units, about 98 % test accuracy.
	Digits,
	/// A character transformer on the Shakespeare corpus: 600 steps in four units.
	Shakespeare,
}

#[derive(clap::Args)]
pub struct TrainArgs {
	/// A job description file (TOML, or JSON by its extension).
	#[arg(long, conflicts_with = "example", required_unless_present = "example")]
	pub job: Option<PathBuf>,
	/// A built-in job instead of a file.
	#[arg(long, value_enum)]
	pub example: Option<Example>,
	/// The device to train on.
	#[arg(long, value_enum, default_value = "cpu")]
	pub backend: train::BackendKind,
	/// Write the final model here.
	#[arg(long)]
	pub out: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct EvaluateArgs {
	/// The model file (`fetch` writes one).
	#[arg(long, default_value = "model.safetensors")]
	pub model: PathBuf,
	/// The job whose model architecture the file holds.
	#[arg(long, required_unless_present_any = ["example", "job_file"])]
	pub job: Option<JobId>,
	/// A job description file whose model the file holds (one `train --job FILE` trained).
	#[arg(long, conflicts_with_all = ["job", "example"])]
	pub job_file: Option<PathBuf>,
	/// Evaluate as a built-in example's model, on its held-out split.
	#[arg(long, value_enum)]
	pub example: Option<Example>,
	/// A dataset file to test on; the example's held-out split by default. For a
	/// transformer, a token stream file (the Shakespeare corpus's validation tenth when
	/// the model reads its 84-token vocabulary).
	#[arg(long)]
	pub test_data: Option<PathBuf>,
	/// A transformer of the Shakespeare corpus's vocabulary: continue this text.
	#[arg(long)]
	pub generate: Option<String>,
	/// How many characters `--generate` writes.
	#[arg(long, default_value_t = 300)]
	pub characters: usize,
}

/// Validation windows a transformer's evaluation reads (at most), in batches of
/// [`EVALUATION_BATCH`].
const EVALUATION_WINDOWS: usize = 256;
/// Windows per forward pass of a transformer's evaluation.
const EVALUATION_BATCH: usize = 16;

/// A job description from `--job FILE` or `--example`.
pub fn describe(job: &Option<PathBuf>, example: Option<Example>) -> Result<(jobfile::JobFile, PathBuf)> {
	match (job, example) {
		(Some(path), _) => jobfile::read(path),
		(None, Some(Example::Digits)) => Ok((jobfile::digits_example(), PathBuf::new())),
		(None, Some(Example::Shakespeare)) => Ok((jobfile::shakespeare_example(), PathBuf::new())),
		(None, None) => bail!("pass --job FILE or --example digits (or shakespeare)"),
	}
}

/// Trains the job `args` describe on this machine, without a chain, and prints the time.
pub fn train_locally(data_dir: &Path, args: TrainArgs) -> Result<()> {
	let (job, base) = describe(&args.job, args.example)?;
	let store = Store::open(data_dir)?;
	let prepared = jobfile::prepare(&job, &base, &store)?;
	let spec = &prepared.spec;
	if !matches!(spec.decomposition, touchstone_primitives::Decomposition::StepRanges { .. }) {
		bail!("train runs step-range jobs (one training run); a data-shard job trains one run per shard");
	}
	let (model, train) = (kernel_model(&spec.model), touchstone_primitives::referee::kernel_train(&spec.hyper));
	let start_state = prepared.initial_state;
	let dir = data_dir.join("local").join(format!("{}-{}", std::process::id(), hex(&spec.initial_state_root.0)));
	let work = train::UnitWork { model, train, data: prepared.train, shard: None, first_step: 0, steps: spec.hyper.steps, start_state, dir: dir.clone(), fault: None };
	let started = std::time::Instant::now();
	let result = train::run_unit_on(args.backend, &work, &AtomicBool::new(false), |_| {})?.context("training stopped")?;
	let seconds = started.elapsed().as_secs_f64();
	let _ = std::fs::remove_dir_all(&dir);
	println!(
		"trained {} steps in {seconds:.2} s ({:.0} steps/s); final state root {} (the model's name)",
		spec.hyper.steps,
		spec.hyper.steps as f64 / seconds,
		hex(&result.proof.final_state_root.0)
	);
	if let Some(out) = args.out {
		std::fs::write(&out, &result.final_model).with_context(|| format!("cannot write {}", out.display()))?;
		println!("wrote {}", out.display());
	}
	Ok(())
}

/// Submits the job `args` describe, and with `--wait` follows it to its end while serving
/// its dataset.
pub async fn submit(access: &ChainAccess, data_dir: &Path, args: SubmitArgs) -> Result<()> {
	let signer = args.key.keypair()?;
	let store = Store::open(data_dir)?;
	let (job, base) = describe(&args.job, args.example)?;
	let prepared = jobfile::prepare(&job, &base, &store)?;
	let chain = Chain::open(access).await?;
	// Solvers fetch the dataset from this process while it runs: it dials the endpoints
	// they advertise on-chain, so they need no address of it.
	let network = p2p::Network::start(&args.network, store.clone(), data_dir).await?;
	crate::inputs::join_network(&chain, &network).await;
	if !args.wait {
		eprintln!("note: the dataset is served to solvers only while this command runs; pass --wait to keep serving it, or run a solver on the same --data-dir");
	}
	let spec = prepared.spec;
	eprintln!(
		"submitting: {} samples (dataset {}), {} steps, {:.3} TST per unit, {:.3} TST budget",
		spec.dataset.samples,
		hex(&spec.dataset.content.hash.0),
		spec.hyper.steps,
		spec.price_per_unit as f64 / UNIT as f64,
		spec.budget as f64 / UNIT as f64
	);
	let events = chain.send(&runtime::transactions().tasks().submit_job(Static(spec)), &signer).await?;
	let submitted = events
		.find_first::<runtime::tasks::events::JobSubmitted>()
		.context("the chain accepted the job but emitted no JobSubmitted event")??;
	println!("job {} submitted: {} units, {:.3} TST in escrow", submitted.job, submitted.units, submitted.escrow as f64 / UNIT as f64);
	if args.wait {
		// Stopping the wait stops nothing on the chain: the job goes on without this command.
		tokio::select! {
			waited = wait_for_job(&chain, &network, submitted.job) => waited?,
			() = crate::shutdown_signal() => eprintln!(
				"stopped waiting; job {} goes on, and `touchstone-worker status --job {}` shows it (its dataset is no longer served from here)",
				submitted.job, submitted.job
			),
		}
	}
	drop(network);
	Ok(())
}

/// How often `submit --wait` dials the endpoints advertised on-chain again.
const JOIN_EVERY: Duration = Duration::from_secs(15);

/// Follows a job until it completes, printing each change of its units' states as the
/// best block shows it (`best:`, what solvers act on) and as finality does (`finalized:`,
/// what cannot be undone), with the seconds since the wait began.
async fn wait_for_job(chain: &Chain, network: &p2p::Network, job_id: JobId) -> Result<()> {
	let mut best = chain.follow_best();
	let mut last = [String::new(), String::new()];
	let started = std::time::Instant::now();
	let mut joined = std::time::Instant::now();
	loop {
		// Solvers that advertise an endpoint after the job went in are dialled too.
		if joined.elapsed() >= JOIN_EVERY {
			crate::inputs::join_network(chain, network).await;
			joined = std::time::Instant::now();
		}
		let views = [("best", best.at().await?), ("finalized", chain.at().await?)];
		for (index, (view, at)) in views.iter().enumerate() {
			let job = at.job(job_id).await?.context("the job disappeared")?;
			let mut states = Vec::new();
			for index in 0..job.units {
				states.push(at.unit(job_id, index).await?.map_or("gone".to_string(), |unit| format!("{:?}", unit.state)));
			}
			let line = format!("job {job_id}: {:?}, units {}", job.status, states.join(" "));
			if line != last[index] {
				eprintln!("[{:>5.0} s] {view}: {line}", started.elapsed().as_secs_f64());
				last[index] = line;
			}
			if *view == "finalized" && (job.status != JobStatus::Active || job.is_finished()) {
				if let Some(result) = job.result {
					println!(
						"job {job_id} completed: {} units finalized, {} failed, model {}",
						result.units_finalized,
						result.units_failed,
						hex(&result.state_root.0)
					);
				}
				return Ok(());
			}
		}
		tokio::time::sleep(Duration::from_secs(1)).await;
	}
}

/// Prints the latest ten jobs, or `job`, with their units, at the finalized block.
pub async fn status(access: &ChainAccess, job: Option<JobId>) -> Result<()> {
	let chain = Chain::open(access).await?;
	let at = chain.at().await?;
	let next = chain.next_job_id(&at).await?;
	let jobs: Vec<JobId> = match job {
		Some(job) => vec![job],
		None => (next.saturating_sub(10)..next).collect(),
	};
	println!("finalized block #{}", at.block_number());
	if jobs.is_empty() {
		println!("no jobs yet");
	}
	for job_id in jobs {
		let Some(job) = at.job(job_id).await? else {
			println!("job {job_id}: not found (never submitted, or its records were removed)");
			continue;
		};
		println!(
			"job {job_id}: {:?}, owner {}, {} of {} units final, escrow {:.3} TST",
			job.status,
			job.owner,
			job.units_final,
			job.units,
			job.escrow as f64 / UNIT as f64
		);
		for index in 0..job.units {
			let Some(unit) = at.unit(job_id, index).await? else { continue };
			let solver = unit.solver.as_ref().map_or("-".to_string(), |solver| solver.to_string());
			let progress = match (unit.state, unit.last_checkpoint) {
				(UnitState::Assigned, Some(checkpoint)) => format!(" at step {}", checkpoint.step),
				_ => String::new(),
			};
			println!("  unit {index}: {:?}{progress} {:?} solver {solver}", unit.state, unit.scope);
		}
		if let Some(result) = job.result {
			println!(
				"  result: model (its state root) {}, loss {:.4}",
				hex(&result.state_root.0),
				result.metrics.loss.into_inner() as f64 / 1e9
			);
		}
	}
	Ok(())
}

/// Writes job `job_id`'s final model to `out`, fetched from its solvers unless stored
/// here, checked against the state root the chain proved.
pub async fn fetch(
	access: &ChainAccess,
	data_dir: &Path,
	job_id: JobId,
	out: &Path,
	network: &p2p::NetworkArgs,
) -> Result<()> {
	let chain = Chain::open(access).await?;
	let at = chain.at().await?;
	let job = at.job(job_id).await?.with_context(|| format!("job {job_id} not found"))?;
	let result = job.result.with_context(|| format!("job {job_id} has no result yet ({:?}, {} of {} units final)", job.status, job.units_final, job.units))?;
	if let touchstone_primitives::Decomposition::DataShards { .. } = job.spec.decomposition {
		bail!(
			"job {job_id} trained data shards: its result is one model per shard, each named by its unit's final state root (see `status --job {job_id}`); there is no single model to fetch"
		);
	}
	let store = Store::open(data_dir)?;
	// The model is named by its proven state root; whatever is fetched or read must hold
	// that state (`holds_state`).
	let root = result.state_root.0;
	let check = holds_state(root);
	let bytes = if store.contains(&root) {
		store.get_with(&root, &check)?
	} else {
		let network = p2p::Network::start(network, store.clone(), data_dir).await?;
		// The solvers that trained the job hold its model: connect to the endpoints they
		// advertise on-chain (peers given with --peer and found by mDNS are asked too).
		for endpoint in at.job_endpoints(job_id, job.units, None, 8).await? {
			match endpoint.parse() {
				Ok(address) => network.dial(address),
				Err(error) => tracing::debug!(%endpoint, "not a multiaddr: {error}"),
			}
		}
		let bound = train::model_file_bound(&kernel_model(&job.spec.model), &touchstone_primitives::referee::kernel_train(&job.spec.hyper))?;
		network.fetch_with(root, Duration::from_secs(60), &check, bound).await.context("fetching the final model from the solvers")?
	};
	std::fs::write(out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
	println!("wrote {} ({} bytes, state root {}, the one the chain proved)", out.display(), bytes.len(), hex(&root));
	Ok(())
}

/// Prints the accuracy of the model file `args` name on a held-out split; for a
/// transformer, its validation loss and next-token accuracy, and with `--generate` a
/// continuation of the text given.
pub async fn evaluate(access: &ChainAccess, args: EvaluateArgs) -> Result<()> {
	let (model, default_test): (ModelConfig, Option<Dataset>) = match (args.example, args.job) {
		(Some(Example::Digits), _) => {
			let model = jobfile::model_arch(&jobfile::digits_example().model)?;
			(kernel_model(&model), Some(dataset::digits_split()?.1))
		},
		(Some(Example::Shakespeare), _) => (kernel_model(&jobfile::model_arch(&jobfile::shakespeare_example().model)?), None),
		(None, Some(job_id)) => {
			let chain = Chain::open(access).await?;
			let at = chain.at().await?;
			let job = at.job(job_id).await?.with_context(|| format!("job {job_id} not found"))?;
			(kernel_model(&job.spec.model), None)
		},
		(None, None) => match &args.job_file {
			Some(path) => (kernel_model(&jobfile::model_arch(&jobfile::read(path)?.0.model)?), None),
			None => bail!("pass --job N, --job-file FILE or --example digits (or shakespeare)"),
		},
	};
	let weights = || -> Result<Vec<Vec<f32>>> {
		let bytes = std::fs::read(&args.model).with_context(|| format!("cannot read the model {}", args.model.display()))?;
		let checkpoint = Checkpoint::from_bytes(&bytes, &content_hash(&bytes)).map_err(|error| anyhow!("{} is not a model file: {error}", args.model.display()))?;
		let params = model.params().map_err(|error| anyhow!("{error:?}"))?.len();
		Ok(checkpoint.state.get(..params).context("the model file holds fewer tensors than the model has")?.to_vec())
	};
	if let ModelConfig::Transformer(config) = model {
		return evaluate_transformer(config, &weights()?, &args);
	}
	if args.generate.is_some() {
		bail!("--generate continues text with a transformer; this model is a classifier");
	}
	let test = match (&args.test_data, default_test) {
		(Some(path), _) => dataset::from_bytes(&std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?)?,
		(None, Some(test)) => test,
		(None, None) => bail!("pass --test-data FILE: a held-out dataset file"),
	};
	let predictions = model.predict(&weights()?, &test.features, test.len()).map_err(|error| anyhow!("the model file does not fit the model: {error:?}"))?;
	let correct = predictions.iter().zip(&test.labels).filter(|(p, l)| p == l).count();
	println!("test accuracy {:.1} % ({correct}/{})", 100.0 * correct as f64 / test.len().max(1) as f64, test.len());
	Ok(())
}

/// A transformer's evaluation: mean loss and next-token accuracy over (at most) the first
/// [`EVALUATION_WINDOWS`] windows of a validation stream of its context, and with
/// `--generate` a sampled continuation.
fn evaluate_transformer(config: TransformerConfig, weights: &[Vec<f32>], args: &EvaluateArgs) -> Result<()> {
	let context = config.context as usize;
	// The Shakespeare corpus's vocabulary, when the model reads it: its validation tenth
	// is the default test stream, and its bytes are how generated tokens print.
	let corpus = match config.vocab as usize == touchstone_kernels::job::text::SHAKESPEARE_VOCAB {
		true => Some(load_shakespeare().map_err(|error| anyhow!("{error}"))?),
		false => None,
	};
	let validation = match (&args.test_data, &corpus) {
		(Some(path), _) => match dataset::training_from_bytes(&std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?)? {
			TrainingData::Tokens(stream) if stream.vocab == config.vocab => std::sync::Arc::unwrap_or_clone(stream).tokens,
			TrainingData::Tokens(stream) => bail!("{} holds a vocabulary of {} tokens; the model reads {}", path.display(), stream.vocab, config.vocab),
			TrainingData::Samples(_) => bail!("{} is a dataset of samples; a transformer is tested on a token stream file", path.display()),
		},
		(None, Some(corpus)) => corpus.split().1,
		(None, None) => bail!("pass --test-data FILE: a held-out token stream file"),
	};
	let windows = first_windows(&validation, context, EVALUATION_WINDOWS);
	let window = context + 1;
	ensure!(!windows.is_empty(), "the test stream holds no window of {context} tokens and the next");
	let (mut loss, mut accuracy, mut count) = (0.0f64, 0.0f64, 0usize);
	for batch in windows.chunks(EVALUATION_BATCH * window) {
		let batch_windows = batch.len() / window;
		let kernel = |error| anyhow!("the model file does not fit the model: {error:?}");
		loss += f64::from(mean_loss(config, weights, batch, context).map_err(kernel)?) * batch_windows as f64;
		accuracy += next_token_accuracy(config, weights, batch, context).map_err(kernel)? * batch_windows as f64;
		count += batch_windows;
	}
	println!(
		"validation loss {:.4} nats a token, next-token accuracy {:.1} % ({count} windows of {context} tokens)",
		loss / count as f64,
		100.0 * accuracy / count as f64
	);
	if let Some(prompt) = &args.generate {
		let corpus = corpus.context("--generate needs the model's byte vocabulary: the Shakespeare corpus's (84 tokens)")?;
		let tokens = corpus.encode(prompt.as_bytes()).context("the prompt holds a character outside the corpus's vocabulary")?;
		ensure!(!tokens.is_empty(), "--generate needs at least one character to continue");
		let text = generate(config, weights, &tokens, args.characters, false, 1).map_err(|error| anyhow!("{error:?}"))?;
		let text = corpus.decode(&text).context("a generated token outside the vocabulary")?;
		println!("{prompt}{}", String::from_utf8_lossy(&text));
	}
	Ok(())
}

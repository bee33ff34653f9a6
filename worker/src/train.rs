//! Training one work unit, checkpointed and resumable, and the learning proof it ends with.
//!
//! A unit's folder holds its checkpoints (`step-<next step>.safetensors`, the kernels'
//! format), `records.txt`, one line per step run so far (step, loss bits, record), and
//! `boundaries.txt`, one line per checkpoint boundary passed (the step after it, the state
//! root there, the segment's last record). All are written at every checkpoint, the text
//! files atomically, so after a crash or a restart the unit resumes from its last
//! checkpoint with the records and boundaries that lead to it, and the proof (the Merkle
//! root over the boundaries) covers every step as if it had run at once. A segment's
//! step-level trace, which only a dispute asks for, is re-executed on demand and kept as
//! `segment-<k>.trace`.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, ensure, Context, Result};
use polkadot_sdk::sp_runtime::{FixedU64, Perbill};
use touchstone_kernels::arith::canonical_bits;
use touchstone_kernels::job::checkpoint::Checkpoint;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::job::text::first_windows;
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::job::fault::Fault;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::job::trace::{state_root, Boundary, StepRecord, StepTrace, Trainer};
use touchstone_kernels::proof::chain::{ChainPoint, TracedStep};
use touchstone_kernels::proof::content::content_hash;
use touchstone_kernels::proof::hash::Digest;
use touchstone_kernels::referee::{SegmentTrace, UnitBoundaries};
use touchstone_kernels::Backend;
use touchstone_primitives::referee::BoundaryOpening;
use touchstone_primitives::{LearningProof, Segments, TrainingMetrics};

use crate::store::parse_digest;

/// The device a solver trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
	/// The CPU reference kernels (exact mode), on every core.
	Cpu,
	/// The wgpu kernels on the best GPU adapter that passes the conformance self-test
	/// (exact mode; bit-identical to the reference).
	Wgpu,
	/// libtorch: CUDA when libtorch sees a device, else its CPU kernels. Fast, not
	/// bit-reproducible: for tolerance-mode jobs only.
	Tch,
}

/// A device a unit trains on: a backend, and which of its GPUs (counted from 0 among
/// those the backend sees; the CPU has only 0). A solver trains on several at once with
/// `--devices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
	/// The backend.
	pub backend: BackendKind,
	/// The GPU, for `wgpu` and for `tch` on CUDA.
	pub ordinal: usize,
}

impl From<BackendKind> for Device {
	/// The backend's first device.
	fn from(backend: BackendKind) -> Self {
		Self { backend, ordinal: 0 }
	}
}

/// [`run_unit`] on `device`.
pub fn run_unit_on(device: impl Into<Device>, work: &UnitWork, stop: &AtomicBool, report: impl FnMut(Progress)) -> Result<Option<UnitResult>> {
	let Device { backend, ordinal } = device.into();
	match backend {
		BackendKind::Cpu => run_unit(touchstone_kernels::CpuBackend, work, stop, report),
		BackendKind::Wgpu => run_unit(wgpu_device(ordinal)?, work, stop, report),
		BackendKind::Tch => run_unit(tch_device(ordinal), work, stop, report),
	}
}

/// Everything needed to train one unit.
pub struct UnitWork {
	/// The model.
	pub model: ModelConfig,
	/// The hyper-parameters.
	pub train: TrainConfig,
	/// The job's training data: a set of samples, or a transformer's token stream.
	pub data: TrainingData,
	/// For a data shard, its samples; `None` for a step range.
	pub shard: Option<Range<usize>>,
	/// The first global step.
	pub first_step: u32,
	/// Steps in the unit.
	pub steps: u32,
	/// The state the unit starts from (parameters, then moments).
	pub start_state: Vec<Vec<f32>>,
	/// The unit's working folder.
	pub dir: PathBuf,
	/// A fault to inject (`solve --inject-fault`, test equipment): training and every
	/// re-execution for a dispute apply it, so the run stays consistent with its proof.
	pub fault: Option<Fault>,
}

impl UnitWork {
	/// The unit's checkpoint grid: the segments its proof commits a boundary for.
	pub fn segments(&self) -> Segments {
		Segments::new(self.first_step, self.steps, self.train.checkpoint_interval)
	}

	/// The samples a batch draws from: the set's, or the stream's windows of the model's
	/// context. The job's whole data; a shard is a range of them.
	pub fn samples(&self) -> usize {
		self.data.as_ref().samples(self.model.input_len().unwrap_or(0))
	}
}

/// What a finished unit hands to the chain and to the store.
pub struct UnitResult {
	/// The learning proof.
	pub proof: LearningProof,
	/// The opening of the last boundary, which proves the final state root.
	pub final_state: BoundaryOpening,
	/// The final checkpoint's bytes: the model file whose hash the proof names.
	pub final_model: Vec<u8>,
}

/// Progress reported while a unit trains.
pub enum Progress {
	/// `done` of the unit's steps have run.
	Steps { done: u32 },
	/// A checkpoint was written: commit it.
	Checkpoint { step: u32, hash: Digest, bytes: Vec<u8> },
}

const RECORDS: &str = "records.txt";
const BOUNDARIES: &str = "boundaries.txt";

/// Room a model file takes beyond its state's words: the safetensors header (each
/// tensor's name, shape and offsets) and Touchstone's metadata.
const MODEL_FILE_HEADER_BOUND: u64 = 1 << 20;

/// The most bytes a model file (a checkpoint, initial weights, a final model) of `model`
/// trained with `train` can hold: its state's words and a header. A peer that declares a
/// longer one is lying.
pub fn model_file_bound(model: &ModelConfig, train: &TrainConfig) -> Result<u64> {
	let graph = touchstone_kernels::proof::graph::Graph::build(model, train).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let words: u64 = graph.state_lens().map(|len| len as u64).sum();
	Ok(words.saturating_mul(4).saturating_add(MODEL_FILE_HEADER_BOUND))
}

/// The state a job starts from: its weights and zeroed optimizer state, as the trainer
/// builds them (which also checks that the model fits the dataset). The weights are the
/// seeded ones, or the parameters of `weights` (a model file's state: parameters first,
/// then any optimizer moments, which are not carried over).
pub fn initial_state(
	model: &ModelConfig,
	train: &TrainConfig,
	data: &TrainingData,
	weights: Option<&[Vec<f32>]>,
) -> Result<Vec<Vec<f32>>> {
	let mut trainer = Trainer::new(touchstone_kernels::CpuBackend, model, train, data.clone())
		.map_err(|error| anyhow::anyhow!("the model, hyper-parameters and dataset do not fit together: {error:?}"))?;
	let mut state = trainer.state().map_err(|error| anyhow::anyhow!("{error:?}"))?;
	if let Some(weights) = weights {
		let params = model.params().map_err(|error| anyhow::anyhow!("{error:?}"))?.len();
		ensure!(
			weights.len() >= params,
			"the initial weights hold {} tensors and the model has {params} parameters",
			weights.len()
		);
		for (index, (slot, tensor)) in state.iter_mut().zip(weights).take(params).enumerate() {
			ensure!(
				slot.len() == tensor.len(),
				"initial weight tensor {index} has {} values and the model's parameter has {}: the weights are for another model",
				tensor.len(),
				slot.len()
			);
			slot.copy_from_slice(tensor);
		}
	}
	Ok(state)
}

/// Where the checkpoint that resumes at global step `next_step` lives in a unit's folder.
pub(crate) fn checkpoint_path(dir: &Path, next_step: u32) -> PathBuf {
	dir.join(format!("step-{next_step:08}.safetensors"))
}

fn record_line(record: &StepRecord) -> String {
	format!("{} {:08x} {}\n", record.step, canonical_bits(record.loss), hex(&record.record))
}

fn parse_record(line: &str) -> Option<StepRecord> {
	let mut fields = line.split(' ');
	let step = fields.next()?.parse().ok()?;
	let loss = f32::from_bits(u32::from_str_radix(fields.next()?, 16).ok()?);
	let record = parse_digest(fields.next()?)?;
	fields.next().is_none().then_some(StepRecord { step, loss, record })
}

fn boundary_line(boundary: &Boundary) -> String {
	format!("{} {} {}\n", boundary.next_step, hex(&boundary.state_root), hex(&boundary.record))
}

fn parse_boundary(line: &str) -> Option<Boundary> {
	let mut fields = line.split(' ');
	let next_step = fields.next()?.parse().ok()?;
	let state_root = parse_digest(fields.next()?)?;
	let record = parse_digest(fields.next()?)?;
	fields.next().is_none().then_some(Boundary { next_step, state_root, record })
}

/// Writes `records` and `boundaries` atomically, the boundaries first: a crash between
/// the two leaves records that lead to an older checkpoint, which resuming finds.
fn save_progress(dir: &Path, records: &[StepRecord], boundaries: &[Boundary]) -> Result<()> {
	save_boundaries(dir, boundaries)?;
	let text: String = records.iter().map(record_line).collect();
	crate::store::write_atomically(&dir.join(RECORDS), text.as_bytes())
}

/// Writes `boundaries` as the boundaries of the unit in `dir`, atomically: those of a run
/// this node trained, or those a proof commits when this node defends a segment of it.
pub fn save_boundaries(dir: &Path, boundaries: &[Boundary]) -> Result<()> {
	let text: String = boundaries.iter().map(boundary_line).collect();
	crate::store::write_atomically(&dir.join(BOUNDARIES), text.as_bytes())
}

/// Parses the lines of the text file `name` in `dir` with `parse` (none if it is absent).
fn saved_lines<T>(dir: &Path, name: &str, parse: fn(&str) -> Option<T>) -> Result<Vec<T>> {
	let Ok(text) = std::fs::read_to_string(dir.join(name)) else { return Ok(Vec::new()) };
	text.lines().map(|line| parse(line).with_context(|| format!("{} is damaged", dir.join(name).display()))).collect()
}

/// The step records saved in a unit's folder (none before its first checkpoint).
pub fn saved_records(dir: &Path) -> Result<Vec<StepRecord>> {
	saved_lines(dir, RECORDS, parse_record)
}

/// The boundaries saved in a unit's folder (none before its first checkpoint).
pub fn saved_boundaries(dir: &Path) -> Result<Vec<Boundary>> {
	saved_lines(dir, BOUNDARIES, parse_boundary)
}

/// The steps a unit's folder holds checkpoints for (each file named by the step it
/// resumes at), newest first.
pub(crate) fn checkpoint_steps(dir: &Path) -> Result<Vec<u32>> {
	let mut steps: Vec<u32> = std::fs::read_dir(dir)?
		.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
		.filter_map(|name| name.strip_prefix("step-")?.strip_suffix(".safetensors")?.parse().ok())
		.collect();
	steps.sort_unstable_by(|a, b| b.cmp(a));
	Ok(steps)
}

/// The full trace of global step `step` of the unit in `work` (every operator's output
/// and piece tree, for a dispute), re-executed on the reference from the start of its
/// segment, hashing every step of the segment's trace up to it.
pub fn trace_step(work: &UnitWork, step: u32) -> Result<StepTrace> {
	let segments = work.segments();
	let segment = segments.of_step(step).with_context(|| format!("step {step} is not in the unit"))?;
	let start = segments.range(segment).context("the unit has no such segment")?.start;
	let mut trainer = boundary_trainer(work, start)?;
	let kernel = |error| anyhow::anyhow!("re-executing step {step} failed: {error:?}");
	trainer.start_trace().map_err(kernel)?;
	while trainer.next_step() < step {
		trainer.step().map_err(kernel)?;
	}
	trainer.trace_step().map_err(kernel)
}

/// The step-level trace of segment `segment` of the unit in `work`, which a dispute that
/// lands on it asks for: kept in the unit's folder once re-executed on the reference from
/// the boundary before it. It ends at the boundary the unit's proof commits there, or the
/// run is not the one proven.
pub fn segment_trace(work: &UnitWork, segment: u32) -> Result<SegmentTrace> {
	let range = work.segments().range(segment).with_context(|| format!("the unit has no segment {segment}"))?;
	let path = work.dir.join(format!("segment-{segment}.trace"));
	let parse = |line: &str| -> Option<TracedStep> {
		let mut fields = line.split(' ');
		let step = TracedStep {
			state_hash: parse_digest(fields.next()?)?,
			state_root: parse_digest(fields.next()?)?,
			record: parse_digest(fields.next()?)?,
		};
		fields.next().is_none().then_some(step)
	};
	let kept: Option<(Digest, Vec<TracedStep>)> = std::fs::read_to_string(&path).ok().and_then(|text| {
		let mut lines = text.lines();
		let start = parse_digest(lines.next()?)?;
		let steps: Option<Vec<TracedStep>> = lines.map(parse).collect();
		steps.filter(|steps| steps.len() == range.len()).map(|steps| (start, steps))
	});
	let (start, steps) = match kept {
		Some(kept) => kept,
		None => {
			let mut trainer = boundary_trainer(work, range.start)?;
			let start = trainer.state_tree_root().map_err(|error| anyhow::anyhow!("{error:?}"))?;
			let (steps, boundary) = trainer
				.segment_trace(range.end)
				.map_err(|error| anyhow::anyhow!("re-executing segment {segment} failed: {error:?}"))?;
			if let Some(proven) = saved_boundaries(&work.dir)?.get(segment as usize) {
				ensure!(*proven == boundary, "re-executing segment {segment} does not reach the boundary the unit committed");
			}
			let mut text = format!("{}\n", hex(&start));
			for step in &steps {
				text.push_str(&format!("{} {} {}\n", hex(&step.state_hash), hex(&step.state_root), hex(&step.record)));
			}
			crate::store::write_atomically(&path, text.as_bytes())?;
			(start, steps)
		},
	};
	SegmentTrace::new(range.start, start, steps).map_err(|error| anyhow::anyhow!("{error:?}"))
}

/// The state the unit in `work` holds before global step `step` (its end included: the
/// final model), for an availability request: the checkpoint there, or re-executed on
/// the reference from the newest checkpoint before it.
pub fn state_before(work: &UnitWork, step: u32) -> Result<Vec<Vec<f32>>> {
	let segments = work.segments();
	let end = segments.end();
	anyhow::ensure!((work.first_step..=end).contains(&step), "step {step} is not in the unit");
	// From the boundary at or before the step: the step itself, or its segment's start.
	let boundary = segments.of_step(step).and_then(|segment| segments.range(segment)).map_or(step, |range| range.start);
	let mut trainer = boundary_trainer(work, boundary)?;
	let kernel = |error| anyhow::anyhow!("the state before step {step}: {error:?}");
	while trainer.next_step() < step {
		trainer.step().map_err(kernel)?;
	}
	trainer.state().map_err(kernel)
}

/// A reference trainer of the unit in `work` at global step `step`, which must be the
/// unit's start or one of its boundaries: from the newest checkpoint at or before it,
/// closing each segment on the way, so that the next step starts a segment.
fn boundary_trainer(work: &UnitWork, step: u32) -> Result<Trainer<touchstone_kernels::CpuBackend>> {
	let mut from = (work.start_state.clone(), ChainPoint::start(work.first_step));
	for next_step in checkpoint_steps(&work.dir)? {
		if next_step > step || next_step <= work.first_step {
			continue;
		}
		let bytes = std::fs::read(checkpoint_path(&work.dir, next_step))?;
		if let Ok(checkpoint) = Checkpoint::from_bytes(&bytes, &content_hash(&bytes)) {
			from = (checkpoint.state, checkpoint.point);
			break;
		}
	}
	let kernel = |error| anyhow::anyhow!("re-executing up to step {step} failed: {error:?}");
	let end = work.segments().end();
	let mut trainer = reference_trainer(work, from.0, from.1)?;
	while trainer.next_step() < step {
		trainer.step().map_err(kernel)?;
		if work.train.is_checkpoint_step(trainer.next_step(), end) {
			trainer.close_segment().map_err(kernel)?;
		}
	}
	ensure!(trainer.chain_point().record == [0; 32], "step {step} is not a boundary of the unit");
	Ok(trainer)
}

/// A reference trainer for the unit in `work`, at `point` from `state`: on the unit's
/// shard, and with its fault, if any.
pub(crate) fn reference_trainer(work: &UnitWork, state: Vec<Vec<f32>>, point: ChainPoint) -> Result<Trainer<touchstone_kernels::CpuBackend>> {
	trainer_on(touchstone_kernels::CpuBackend, work, state, point)
}

/// The wgpu device a unit trains on: an adapter that passes the conformance self-test.
fn wgpu_device(ordinal: usize) -> Result<touchstone_kernels_wgpu::WgpuBackend> {
	touchstone_kernels_wgpu::WgpuBackend::nth(ordinal).map_err(|error| {
		anyhow::anyhow!("no usable GPU adapter: {error:?}. Install a Vulkan driver, or train on the CPU with --backend cpu")
	})
}

/// The libtorch device a unit trains on: CUDA device `ordinal` where libtorch sees it, else
/// the CPU.
fn tch_device(ordinal: usize) -> touchstone_kernels_tch::TchBackend {
	let device = match crate::hardware::torch_cuda(ordinal) {
		Some(_) => tch::Device::Cuda(ordinal),
		None => tch::Device::Cpu,
	};
	touchstone_kernels_tch::TchBackend::on(device)
}

/// Seconds one training step of `work` takes on `kind` here, proof records included: the
/// second of two steps from the unit's start state (the first pays for buffers and
/// pipelines). A solver weighs a unit's deadline with it before taking the unit.
pub fn measure_step_seconds(device: impl Into<Device>, work: &UnitWork) -> Result<f64> {
	fn time<B: Backend>(backend: B, work: &UnitWork) -> Result<f64> {
		let point = ChainPoint::start(work.first_step);
		let mut trainer = trainer_on(backend, work, work.start_state.clone(), point)?;
		let kernel = |error| anyhow::anyhow!("a trial step failed: {error:?}");
		trainer.step().map_err(kernel)?;
		let started = std::time::Instant::now();
		trainer.step().map_err(kernel)?;
		Ok(started.elapsed().as_secs_f64())
	}
	let Device { backend, ordinal } = device.into();
	match backend {
		BackendKind::Cpu => time(touchstone_kernels::CpuBackend, work),
		BackendKind::Wgpu => time(wgpu_device(ordinal)?, work),
		BackendKind::Tch => time(tch_device(ordinal), work),
	}
}

/// As [`reference_trainer`], on `backend`.
pub(crate) fn trainer_on<B: Backend>(backend: B, work: &UnitWork, state: Vec<Vec<f32>>, point: ChainPoint) -> Result<Trainer<B>> {
	let kernel = |error| anyhow::anyhow!("the unit cannot be re-executed: {error:?}");
	let mut trainer = Trainer::resume(backend, &work.model, &work.train, work.data.clone(), state, point).map_err(kernel)?;
	if let Some(shard) = &work.shard {
		trainer = trainer.on_shard(shard.clone()).map_err(|error| anyhow::anyhow!("the unit's shard cannot be re-executed: {error:?}"))?;
	}
	if let Some(fault) = work.fault {
		trainer.inject(fault);
	}
	Ok(trainer)
}

/// What a unit resumes from: its latest checkpoint that the saved records and
/// boundaries lead to, with those records and boundaries.
type Resumed = (Checkpoint, Vec<StepRecord>, Vec<Boundary>);

/// The latest checkpoint in `dir` that the saved records and boundaries lead to: a
/// boundary saved at its step, with the checkpoint's state root, and records up to it.
fn resume_point(dir: &Path, first_step: u32) -> Result<Option<Resumed>> {
	let (mut records, mut boundaries) = (saved_records(dir)?, saved_boundaries(dir)?);
	if records.is_empty() || boundaries.is_empty() {
		return Ok(None);
	}
	// Newer checkpoints than the records and boundaries (a crash between the writes) are
	// passed over.
	for next_step in checkpoint_steps(dir)? {
		let Some(done) = next_step.checked_sub(first_step).map(|done| done as usize) else { continue };
		if done == 0 || done > records.len() {
			continue;
		}
		let Some(kept) = boundaries.iter().position(|boundary| boundary.next_step == next_step) else { continue };
		let bytes = std::fs::read(checkpoint_path(dir, next_step))?;
		let Ok(checkpoint) = Checkpoint::from_bytes(&bytes, &content_hash(&bytes)) else { continue };
		let root = state_root(&checkpoint.state).map_err(|error| anyhow::anyhow!("{error:?}"))?;
		if checkpoint.point == ChainPoint::start(next_step) && boundaries.get(kept).map(|b| b.state_root) == Some(root) {
			records.truncate(done);
			boundaries.truncate(kept + 1);
			return Ok(Some((checkpoint, records, boundaries)));
		}
	}
	Ok(None)
}

/// Trains `work` on `backend` from its start or from its last local checkpoint, reporting
/// progress; stops early (leaving the unit to resume) when `stop` is set. Returns `None`
/// when stopped.
pub fn run_unit<B: Backend>(
	backend: B,
	work: &UnitWork,
	stop: &AtomicBool,
	mut report: impl FnMut(Progress),
) -> Result<Option<UnitResult>> {
	std::fs::create_dir_all(&work.dir).with_context(|| format!("cannot create {}", work.dir.display()))?;
	let end = work.first_step.checked_add(work.steps).context("unit ends past step 2³²")?;
	let start_root = state_root(&work.start_state).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let kernel = |error: B::Error| anyhow::anyhow!("training failed: {error:?}");
	let (state, point, mut records, mut boundaries) = match resume_point(&work.dir, work.first_step)? {
		Some((checkpoint, records, boundaries)) => {
			tracing::info!(step = checkpoint.point.next_step, "resuming from the last local checkpoint");
			(checkpoint.state, checkpoint.point, records, boundaries)
		},
		None => (work.start_state.clone(), ChainPoint::start(work.first_step), Vec::new(), Vec::new()),
	};
	let mut trainer = Trainer::resume(backend, &work.model, &work.train, work.data.clone(), state, point).map_err(kernel)?;
	if let Some(shard) = &work.shard {
		trainer = trainer.on_shard(shard.clone()).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	}
	if let Some(fault) = work.fault {
		trainer.inject(fault);
	}
	report(Progress::Steps { done: trainer.next_step() - work.first_step });
	while trainer.next_step() < end {
		if stop.load(Ordering::Relaxed) {
			return Ok(None);
		}
		records.push(trainer.step().map_err(kernel)?);
		let next_step = trainer.next_step();
		report(Progress::Steps { done: next_step - work.first_step });
		if work.train.is_checkpoint_step(next_step, end) {
			// A boundary: the segment's state root and record, which the proof commits.
			boundaries.push(trainer.close_segment().map_err(kernel)?);
			let checkpoint = Checkpoint::of(&mut trainer).map_err(kernel)?;
			let bytes = checkpoint.to_bytes().map_err(|error| anyhow::anyhow!("{error}"))?;
			let path = checkpoint_path(&work.dir, next_step);
			crate::store::write_atomically(&path, &bytes)?;
			save_progress(&work.dir, &records, &boundaries)?;
			report(Progress::Checkpoint { step: next_step, hash: content_hash(&bytes), bytes });
		}
	}
	ensure!(records.len() == work.steps as usize, "the unit's records do not cover its steps");
	let final_model = std::fs::read(checkpoint_path(&work.dir, end))?;
	let params = trainer.params().map_err(kernel)?;
	let accuracy = training_accuracy(&work.model, &params, &work.data)?;
	ensure!(boundaries.len() == work.segments().count() as usize, "the unit's boundaries do not cover its segments");
	Ok(Some(prove(&records, boundaries, start_root, final_model, accuracy, work.train.checkpoint_interval)?))
}

/// Accuracy on (at most the first 4,096 samples of) the training set, reported with the
/// proof; for a transformer, next-token accuracy over the positions of (at most) the
/// stream's first 16 windows.
fn training_accuracy(model: &ModelConfig, params: &[Vec<f32>], data: &TrainingData) -> Result<Perbill> {
	let kernel = |error| anyhow::anyhow!("{error:?}");
	let accuracy = match (model, data) {
		(ModelConfig::Transformer(config), TrainingData::Tokens(stream)) => {
			let context = config.context as usize;
			// Each window's context tokens and its next one: neighbours share a token.
			let sequences = first_windows(&stream.tokens, context, 16);
			touchstone_kernels::job::transformer::next_token_accuracy(*config, params, &sequences, context).map_err(kernel)?
		},
		(_, TrainingData::Samples(data)) => {
			let samples = data.len().min(4096);
			let features = &data.features[..samples * data.feature_len];
			model.accuracy(params, features, &data.labels[..samples]).map_err(kernel)?
		},
		(_, TrainingData::Tokens(_)) => bail!("only a transformer trains on a token stream"),
	};
	Ok(Perbill::from_parts((accuracy.clamp(0.0, 1.0) * 1e9).round() as u32))
}

/// Builds the learning proof of a unit from its step records and boundaries.
fn prove(
	records: &[StepRecord],
	boundaries: Vec<Boundary>,
	start_root: Digest,
	final_model: Vec<u8>,
	accuracy: Perbill,
	interval: u32,
) -> Result<UnitResult> {
	if records.is_empty() {
		bail!("a unit has at least one step");
	}
	let unit = UnitBoundaries::new(boundaries).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let last = *unit.boundaries.last().context("a unit has at least one boundary")?;
	let final_state = unit.final_opening().context("the unit's last boundary cannot be opened")?;
	// The loss reported is the mean over the last checkpoint interval.
	let window = records.len().min(interval.max(1) as usize);
	let tail = &records[records.len() - window..];
	let loss = tail.iter().map(|record| record.loss as f64).sum::<f64>() / window as f64;
	let proof = LearningProof {
		trace_root: unit.root().into(),
		steps: records.len() as u32,
		start_state_root: start_root.into(),
		final_state_root: last.state_root.into(),
		metrics: TrainingMetrics { loss: FixedU64::from_inner((loss.max(0.0) * 1e9) as u64), accuracy },
	};
	Ok(UnitResult { proof, final_state, final_model })
}

#[cfg(test)]
pub(crate) mod tests {
	use super::*;
	use touchstone_kernels::job::data::synthetic;
	use touchstone_kernels::job::model::OptimizerConfig;
	use touchstone_kernels::{Activation, CpuBackend};

	/// A model file holds its state's words and a header, inside the bound its shapes give.
	#[test]
	fn a_model_file_fits_the_bound_its_shapes_give() {
		let dir = std::env::temp_dir().join(format!("touchstone-bound-{}", std::process::id()));
		let unit = work(&dir);
		let result = run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let graph = touchstone_kernels::proof::graph::Graph::build(&unit.model, &unit.train).unwrap();
		let words: u64 = graph.state_lens().map(|len| len as u64).sum();
		let bound = model_file_bound(&unit.model, &unit.train).unwrap();
		let len = result.final_model.len() as u64;
		assert!(4 * words < len && len <= bound, "{len} bytes against {words} words and a bound of {bound}");
		let _ = std::fs::remove_dir_all(&dir);
	}

	/// A 25-step unit from step 10 of a small MLP, checkpointing every 10 steps, in `dir`.
	pub(crate) fn work(dir: &Path) -> UnitWork {
		let model = ModelConfig::Mlp { inputs: 8, hidden: vec![12], classes: 4, activation: Activation::Tanh };
		let train = TrainConfig {
			steps: 40,
			batch_size: 16,
			learning_rate: 100_000_000,
			optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
			grad_clip_norm: None,
			seed: 5,
			checkpoint_interval: 10,
		};
		let data = TrainingData::from(synthetic(9, 96, 8, 4));
		let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).unwrap();
		for _ in 0..10 {
			trainer.step().unwrap();
		}
		let start_state = trainer.state().unwrap();
		UnitWork { model, train, data, shard: None, first_step: 10, steps: 25, start_state, dir: dir.to_path_buf(), fault: None }
	}

	/// A trial step is timed on the reference and on wgpu (lavapipe here), and it writes
	/// nothing to the unit's folder: the unit still trains from its start.
	#[test]
	fn a_trial_step_is_timed_on_the_backend_the_unit_would_train_on_and_leaves_no_trace() {
		let dir = std::env::temp_dir().join(format!("touchstone-trial-{}", std::process::id()));
		let work = work(&dir);
		for kind in [BackendKind::Cpu, BackendKind::Wgpu] {
			let seconds = measure_step_seconds(kind, &work).unwrap();
			assert!(seconds > 0.0 && seconds.is_finite(), "{kind:?}: {seconds}");
		}
		assert!(!dir.exists(), "a trial step wrote to the unit's folder");
	}

	/// A unit stopped after a checkpoint and resumed proves exactly what an uninterrupted
	/// run proves, and its final state opening is accepted by the kernels' check.
	#[test]
	fn a_resumed_unit_proves_what_an_uninterrupted_one_does() {
		let base = std::env::temp_dir().join(format!("touchstone-train-{}", std::process::id()));
		let whole = run_unit(CpuBackend, &work(&base.join("whole")), &AtomicBool::new(false), |_| {}).unwrap().unwrap();

		let dir = base.join("resumed");
		let stop = AtomicBool::new(false);
		let mut checkpoints = Vec::new();
		let stopped = run_unit(CpuBackend, &work(&dir), &stop, |progress| {
			if let Progress::Checkpoint { step, .. } = progress {
				checkpoints.push(step);
				stop.store(true, Ordering::Relaxed);
			}
		})
		.unwrap();
		assert!(stopped.is_none());
		assert_eq!(checkpoints, vec![20]);
		// A checkpoint newer than the records (a crash between the writes) is passed over.
		std::fs::write(checkpoint_path(&dir, 30), b"torn").unwrap();
		let resumed = run_unit(CpuBackend, &work(&dir), &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		assert_eq!(resumed.proof, whole.proof);
		assert_eq!(resumed.final_model, whole.final_model);
		assert_eq!(resumed.proof.steps, 25);

		let unit = touchstone_primitives::referee::UnitCommitment {
			root: whole.proof.trace_root.0,
			first_step: 10,
			steps: 25,
			interval: 10,
			start_state_root: whole.proof.start_state_root.0,
		};
		let proven = touchstone_primitives::referee::unit_final_state_root(&unit, &whole.final_state);
		assert_eq!(proven.ok(), Some(whole.proof.final_state_root.0));
		// A segment's trace, re-executed on demand, ends at the boundary the proof commits
		// and is kept for the dispute's later moves.
		let trace = segment_trace(&work(&dir), 1).unwrap();
		assert_eq!((trace.first_step, trace.steps.len()), (20, 10));
		assert!(dir.join("segment-1.trace").exists());
		let again = segment_trace(&work(&dir), 1).unwrap();
		assert_eq!(again.root(), trace.root());
		let boundaries = saved_boundaries(&dir).unwrap();
		assert_eq!(trace.steps.last().map(|step| (step.state_root, step.record)), Some((boundaries[1].state_root, boundaries[1].record)));
		std::fs::remove_dir_all(&base).unwrap();
	}

	/// Initial weights replace the seeded parameters and leave the optimizer state zeroed;
	/// weights shaped for another model are refused, naming the tensor.
	#[test]
	fn initial_weights_replace_the_seeded_parameters() {
		let unit = work(Path::new("unused"));
		let seeded = initial_state(&unit.model, &unit.train, &unit.data, None).unwrap();
		// A trained state (parameters and non-zero moments), as a model file holds it.
		let trained = unit.start_state.clone();
		let params = unit.model.params().unwrap().len();
		let state = initial_state(&unit.model, &unit.train, &unit.data, Some(&trained)).unwrap();
		assert_eq!(&state[..params], &trained[..params]);
		assert_ne!(&state[..params], &seeded[..params]);
		assert!(state[params..].iter().all(|moment| moment.iter().all(|&value| value == 0.0)), "moments start at zero");
		assert!(trained[params..].iter().any(|moment| moment.iter().any(|&value| value != 0.0)));
		assert_ne!(state_root(&state).unwrap(), state_root(&seeded).unwrap());

		let mut other = trained.clone();
		other[1].push(0.0);
		let error = initial_state(&unit.model, &unit.train, &unit.data, Some(&other)).unwrap_err();
		assert!(error.to_string().contains("initial weight tensor 1"), "{error}");
		let error = initial_state(&unit.model, &unit.train, &unit.data, Some(&trained[..1])).unwrap_err();
		assert!(error.to_string().contains("hold 1 tensors"), "{error}");
	}

	/// A unit trains on libtorch (a tolerance-mode backend) with the same checkpoints and
	/// proof shape, ending within a small distance of the reference's weights.
	#[test]
	fn a_unit_trains_on_libtorch_close_to_the_reference() {
		let base = std::env::temp_dir().join(format!("touchstone-train-tch-{}", std::process::id()));
		let unit = work(&base.join("reference"));
		let reference = run_unit(CpuBackend, &unit, &AtomicBool::new(false), |_| {}).unwrap().unwrap();
		let mut checkpoints = Vec::new();
		let torch = run_unit_on(BackendKind::Tch, &work(&base.join("tch")), &AtomicBool::new(false), |progress| {
			if let Progress::Checkpoint { step, .. } = progress {
				checkpoints.push(step);
			}
		})
		.unwrap()
		.unwrap();
		assert_eq!(checkpoints, vec![20, 30, 35]);
		assert_eq!(torch.proof.steps, 25);
		assert_eq!(torch.proof.start_state_root, reference.proof.start_state_root);
		let params = unit.model.params().unwrap().len();
		let load = |bytes: &[u8]| Checkpoint::from_bytes(bytes, &content_hash(bytes)).unwrap().state[..params].to_vec();
		let distance = touchstone_kernels::job::distance::Distance::between(&load(&torch.final_model), &load(&reference.final_model)).unwrap();
		assert!(distance.linf < 1e-3 && distance.cosine < 1e-6, "{distance:?}");
		std::fs::remove_dir_all(&base).unwrap();
	}
}

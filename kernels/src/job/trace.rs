//! Training traces: the loop over the [`Backend`] trait, the per-step state
//! hash chain, and the per-operator commitments of one step.
//!
//! The state-hash chain each step extends is [`crate::proof::chain`].
//!
//! # Batch order
//!
//! Epoch `e` visits the run's samples (the training set, or a data-shard
//! unit's shard) in the order of the [`RandomPermutation`] keyed by Philox
//! stream [`BATCH_STREAM`]` + e` of the seed; step `t` takes positions
//! `[(t mod s)·B, (t mod s)·B + B)` of epoch `⌊t/s⌋`, with `s = ⌊samples/B⌋`
//! steps per epoch (the incomplete last batch is dropped, as PyTorch's
//! `drop_last=True`). A shard's positions are offset by its first sample. The
//! permutation has random access, so drawing one batch costs the same however
//! large the set is.

use alloc::vec;
use alloc::vec::Vec;

use crate::exec::backend::Backend;
use crate::exec::graph::GraphBuffers;
use crate::arith::canonical_bits;
use crate::ops::contraction::{fold_chunk_partials, ChunkId, Contraction};
use crate::job::training_data::TrainingData;
use crate::error::KernelError;
use crate::proof::graph::{Graph, OpKind};
use crate::job::fault::{flip, Fault, Flip};
use crate::proof::chain::{operator_leaf, record_hash, state_hash, ChainPoint, TracePoint, TracedStep};
use crate::proof::hash::Digest;
use crate::proof::merkle::{
	self, index_segment_leaf, segment_leaf, MerkleError, MerkleTree,
};
use crate::job::model::{ModelConfig, TrainConfig, BATCH_STREAM};
use crate::proof::reduction::Reduction;
use crate::arith::rng::{RandomPermutation, RandomStream};

/// The state root of `tensors` (parameters, then moments): the root of their
/// state tree ([`crate::proof::state_tree`]), BLAKE3 over 1 KiB chunks, hashed
/// straight from the tensors and (with `std`) on several threads.
pub fn state_root(tensors: &[Vec<f32>]) -> Result<Digest, MerkleError> {
	crate::proof::state_tree::root(&state_views(tensors))
}

/// The state tree of `tensors`, for the prover's openings.
pub fn state_tree(tensors: &[Vec<f32>]) -> Result<MerkleTree, MerkleError> {
	crate::proof::state_tree::tree(&state_views(tensors))
}

/// Borrowed views of a state's tensors.
fn state_views(tensors: &[Vec<f32>]) -> Vec<&[f32]> {
	tensors.iter().map(Vec::as_slice).collect()
}

/// Segment leaves of an `f32` tensor; an empty tensor has one empty segment.
fn f32_segment_leaves(values: &[f32]) -> Vec<Digest> {
	if values.is_empty() {
		return vec![segment_leaf(&[])];
	}
	merkle::segment_leaves(values)
}

/// A host copy of a value of the step.
#[derive(Clone, Debug, PartialEq)]
pub enum HostTensor {
	/// `f32`s.
	F32(Vec<f32>),
	/// `u32`s.
	U32(Vec<u32>),
}

impl HostTensor {
	/// Elements.
	pub fn len(&self) -> usize {
		match self {
			Self::F32(values) => values.len(),
			Self::U32(values) => values.len(),
		}
	}

	/// Whether it holds no elements.
	pub fn is_empty(&self) -> bool {
		self.len() == 0
	}

	/// The segment leaves, in order.
	pub fn segment_leaves(&self) -> Vec<Digest> {
		match self {
			Self::F32(values) => f32_segment_leaves(values),
			Self::U32(values) if values.is_empty() => vec![index_segment_leaf(&[])],
			Self::U32(values) => merkle::index_segment_leaves(values),
		}
	}

	/// The canonical word of element `index`: an `f32`'s canonical bits, or the `u32`.
	pub fn word(&self, index: usize) -> Option<u32> {
		match self {
			Self::F32(values) => values.get(index).map(|&v| crate::arith::canonical_bits(v)),
			Self::U32(values) => values.get(index).copied(),
		}
	}

	/// The canonical words of segment `index` (empty past the end).
	pub fn segment_words(&self, index: usize) -> Vec<u32> {
		let range = |len: usize| merkle::segment_range(len, index);
		match self {
			Self::F32(values) => values
				.get(range(values.len()))
				.unwrap_or_default()
				.iter()
				.map(|&v| crate::arith::canonical_bits(v))
				.collect(),
			Self::U32(values) => values.get(range(values.len())).unwrap_or_default().to_vec(),
		}
	}

	/// The `f32` values (empty for `u32`s).
	pub fn as_f32(&self) -> &[f32] {
		match self {
			Self::F32(values) => values,
			Self::U32(_) => &[],
		}
	}
}

/// The sample indices of global step `step` of a run on the samples `shard`
/// of the training set (the whole set for a step-range unit): positions in the
/// shard's epoch order, offset to the shard's place in the set. See the module docs.
pub fn batch_indices(shard: core::ops::Range<usize>, batch: usize, seed: u64, step: u32) -> Result<Vec<u32>, KernelError> {
	(0..batch).map(|row| batch_sample(shard.clone(), batch, seed, step, row)).collect()
}

/// Row `row` of [`batch_indices`], drawn alone: its cost does not depend on
/// the shard's size or the batch's.
pub fn batch_sample(shard: core::ops::Range<usize>, batch: usize, seed: u64, step: u32, row: usize) -> Result<u32, KernelError> {
	let (epoch, window) = batch_window(shard.len(), batch, step)?;
	let position = window.start.checked_add(row).filter(|&position| position < window.end);
	let position = position.and_then(|p| u32::try_from(p).ok()).ok_or(KernelError::InvalidHyperparameter { name: "batch_size" })?;
	let sample = epoch_order(shard.len(), seed, epoch)?.get(position).ok_or(KernelError::InvalidHyperparameter { name: "batch_size" })?;
	let first = u32::try_from(shard.start).map_err(|_| KernelError::ShapeOverflow)?;
	sample.checked_add(first).ok_or(KernelError::ShapeOverflow)
}

/// Where global step `step`'s batch lies: its epoch, and its positions in that
/// epoch's sample order (see the module docs).
pub fn batch_window(samples: usize, batch: usize, step: u32) -> Result<(usize, core::ops::Range<usize>), KernelError> {
	let steps_per_epoch = samples.checked_div(batch).filter(|&s| s > 0).ok_or(KernelError::InvalidHyperparameter {
		name: "batch_size",
	})?;
	let start = (step as usize % steps_per_epoch) * batch;
	Ok((step as usize / steps_per_epoch, start..start + batch))
}

/// The sample order of epoch `epoch` of a run on `samples` samples: the
/// [`RandomPermutation`] keyed by Philox stream [`BATCH_STREAM`]` + epoch` of the seed.
pub fn epoch_order(samples: usize, seed: u64, epoch: usize) -> Result<RandomPermutation, KernelError> {
	let samples = u32::try_from(samples).map_err(|_| KernelError::ShapeOverflow)?;
	Ok(RandomPermutation::new(RandomStream::new(seed, BATCH_STREAM + epoch as u64), samples))
}

/// What one step produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRecord {
	/// Global step number.
	pub step: u32,
	/// Mean training loss of the batch.
	pub loss: f32,
	/// The segment's record after the step ([`crate::proof::chain::record_hash`]).
	pub record: Digest,
}

/// A step re-executed with every operator committed: the prover's side of a dispute.
#[derive(Clone, Debug)]
pub struct StepTrace {
	/// The step's record (identical to the one the plain run produced).
	pub record: StepRecord,
	/// The state root after the step.
	pub state_root: Digest,
	/// The state hash after the step, in its segment's trace.
	pub state_hash: Digest,
	/// The state hash before the step (the segment's anchor for its first step).
	pub previous_hash: Digest,
	/// The state root before the step.
	pub previous_state_root: Digest,
	/// The record before the step (zeros for the segment's first step).
	pub previous_record: Digest,
	/// The state hash before the previous one (to open the previous state hash).
	pub previous_previous_hash: Digest,
	/// A host copy of every value of the step, by value id.
	pub values: Vec<HostTensor>,
	/// The step's samples (a token stream's windows), by index in the whole training set:
	/// what the prover opens a batch's rows by.
	pub samples: Vec<u32>,
	/// Each operator's piece tree.
	pub pieces: Vec<MerkleTree>,
	/// The operator-level tree.
	pub operators: MerkleTree,
	/// The state tree before the step.
	pub previous_state: MerkleTree,
}

/// Trains a model through any [`Backend`], one step at a time, chaining state hashes.
pub struct Trainer<B: Backend> {
	backend: B,
	graph: Graph,
	train: TrainConfig,
	data: TrainingData,
	/// A classification set's features on the backend (a token stream's batches are
	/// built on the host: a few kilobytes of tokens a step).
	data_tensor: Option<B::Tensor>,
	buffers: GraphBuffers<B>,
	/// The samples (windows) of the last batch loaded.
	batch_samples: Vec<u32>,
	/// The samples of `data` this run trains on.
	shard: core::ops::Range<usize>,
	point: ChainPoint,
	/// The segment's step-level trace, while the run hashes every step.
	trace: Option<TracePoint>,
	faults: Vec<Fault>,
	recording: Option<Vec<Option<HostTensor>>>,
}

/// A checkpoint boundary of a run: where a segment ends, and what it commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boundary {
	/// The first step after the boundary.
	pub next_step: u32,
	/// The BLAKE3 state root there ([`crate::proof::state_tree`]).
	pub state_root: Digest,
	/// The last record of the segment that ends there ([`crate::proof::chain::record_hash`]).
	pub record: Digest,
}

impl Boundary {
	/// The boundary's leaf ([`crate::proof::chain::boundary_leaf`]).
	pub fn leaf(&self) -> Digest {
		crate::proof::chain::boundary_leaf(self.next_step, &self.state_root, &self.record)
	}
}

impl<B: Backend> Trainer<B> {
	/// A trainer at step 0 with the model's seeded initial parameters and zero moments.
	pub fn new(backend: B, model: &ModelConfig, train: &TrainConfig, data: impl Into<TrainingData>) -> Result<Self, B::Error> {
		let params = model.init_params(train.seed)?;
		let optimizer = train.optimizer()?;
		let mut state = params.clone();
		for _ in 0..optimizer.moments() {
			state.extend(params.iter().map(|p| vec![0.0f32; p.len()]));
		}
		Self::resume(backend, model, train, data, state, ChainPoint::start(0))
	}

	/// A trainer at `point`, from `state` (parameters then moments): a
	/// checkpoint's contents, or a unit's starting model.
	pub fn resume(
		mut backend: B,
		model: &ModelConfig,
		train: &TrainConfig,
		data: impl Into<TrainingData>,
		state: Vec<Vec<f32>>,
		point: ChainPoint,
	) -> Result<Self, B::Error> {
		let graph = Graph::build(model, train)?;
		let data = data.into();
		let samples = data.as_ref().samples(graph.input_len);
		// The same data the referee can judge: words addressable in `u32`, at most `MAX_SAMPLES`.
		let layout = graph.data_layout(samples);
		let addressable = layout.words().is_some() && samples <= crate::job::data::MAX_SAMPLES;
		let fits = match (&data, layout) {
			(TrainingData::Samples(set), crate::job::data::DataLayout::Samples(_)) => {
				set.feature_len == graph.input_len && set.classes == model.classes()
			},
			// The stream holds exactly its windows' tokens, over the model's vocabulary.
			(TrainingData::Tokens(stream), crate::job::data::DataLayout::Windows(windows)) => {
				stream.vocab == model.classes() && windows.words() == Some(stream.tokens.len())
			},
			_ => false,
		};
		if !fits || samples < graph.batch || !addressable {
			return Err(KernelError::InvalidHyperparameter { name: "dataset" }.into());
		}
		if state.len() != graph.state.len() {
			return Err(KernelError::LengthMismatch { operand: "state", expected: graph.state.len(), actual: state.len() }.into());
		}
		let mut tensors = Vec::with_capacity(state.len());
		for values in &state {
			tensors.push(backend.upload(values)?);
		}
		let buffers = GraphBuffers::new(&mut backend, &graph, tensors)?;
		let data_tensor = match &data {
			TrainingData::Samples(set) => Some(backend.upload(&set.features)?),
			TrainingData::Tokens(_) => None,
		};
		Ok(Self {
			backend,
			graph,
			train: *train,
			data,
			data_tensor,
			buffers,
			batch_samples: Vec::new(),
			shard: 0..samples,
			point,
			trace: None,
			faults: Vec::new(),
			recording: None,
		})
	}

	/// Restricts the run to the samples `shard` of its training set: a
	/// data-shard unit draws every batch inside its shard, and its batches
	/// name samples by their place in the whole set.
	pub fn on_shard(mut self, shard: core::ops::Range<usize>) -> Result<Self, KernelError> {
		if shard.end > self.data.as_ref().samples(self.graph.input_len) || shard.len() < self.graph.batch {
			return Err(KernelError::InvalidHyperparameter { name: "shard" });
		}
		self.shard = shard;
		Ok(self)
	}

	/// Makes this trainer dishonest: `fault` is applied when its step runs, with
	/// any injected before (a lie inside a reduction's partial that its output
	/// also carries takes two). Test equipment: faults exist only with the
	/// `testing` feature.
	pub fn inject(&mut self, fault: Fault) {
		self.faults.push(fault);
	}

	/// The step graph.
	pub fn graph(&self) -> &Graph {
		&self.graph
	}

	/// The hyper-parameters the run trains with.
	pub fn train_config(&self) -> &TrainConfig {
		&self.train
	}

	/// The next global step to run.
	pub fn next_step(&self) -> u32 {
		self.point.next_step
	}

	/// Where the run stands: its next step and the current segment's record.
	pub fn chain_point(&self) -> ChainPoint {
		self.point
	}

	/// Where the segment's step-level trace stands, while the run hashes every step.
	pub fn trace_point(&self) -> Option<TracePoint> {
		self.trace
	}

	/// Starts hashing every step: the step-level trace of the segment that starts
	/// here, anchored at the current state's root. Only at a segment's start (no
	/// record yet): a trace anchored mid-segment would commit nothing a party's
	/// boundary holds.
	pub fn start_trace(&mut self) -> Result<TracePoint, B::Error> {
		if self.point.record != [0; 32] {
			return Err(KernelError::InvalidHyperparameter { name: "trace start (not at a segment boundary)" }.into());
		}
		let point = TracePoint::anchored(&self.state_tree_root()?);
		self.trace = Some(point);
		Ok(point)
	}

	/// Stops hashing every step.
	pub fn stop_trace(&mut self) {
		self.trace = None;
	}

	/// Gives the backend back (a device stays open for the next run).
	pub fn into_backend(self) -> B {
		self.backend
	}

	/// The backend.
	pub fn backend_mut(&mut self) -> &mut B {
		&mut self.backend
	}

	/// Downloads the current state: parameters, then moments.
	pub fn state(&mut self) -> Result<Vec<Vec<f32>>, B::Error> {
		let ids = self.graph.state.clone();
		self.download_values(&ids)
	}

	/// The state tree's root of the current state
	/// ([`crate::proof::state_tree::root`]): hashed by the backend where the
	/// state lives when it can, so that a device sends back 32 bytes, and
	/// otherwise downloaded and hashed on the host.
	pub fn state_tree_root(&mut self) -> Result<Digest, B::Error> {
		let mut tensors = Vec::with_capacity(self.graph.state.len());
		for &id in &self.graph.state {
			tensors.push(self.buffers.tensor(&self.graph, id)?);
		}
		if let Some(root) = self.backend.state_root(&tensors)? {
			return Ok(root);
		}
		let state = self.state()?;
		let views: Vec<&[f32]> = state.iter().map(Vec::as_slice).collect();
		Ok(crate::proof::state_tree::root(&views).map_err(KernelError::Commitment)?)
	}

	/// Ends the current segment here: the boundary before the next step, with
	/// the state tree's root ([`Trainer::state_tree_root`]) and the segment's last
	/// record; the next step starts a new segment. The caller closes segments
	/// where the job's checkpoint grid puts them, as it writes checkpoints there.
	pub fn close_segment(&mut self) -> Result<Boundary, B::Error> {
		// A run that hashes every step already has the root.
		let state_root = match self.trace {
			Some(trace) => trace.last_state_root,
			None => self.state_tree_root()?,
		};
		let boundary = Boundary { next_step: self.point.next_step, state_root, record: self.point.record };
		self.point.record = [0; 32];
		// The next segment's trace starts from this boundary's state.
		if self.trace.is_some() {
			self.trace = Some(TracePoint::anchored(&state_root));
		}
		Ok(boundary)
	}

	/// The step-level trace of the segment that starts here (at a boundary) and
	/// ends before `end`: for each step, its state hash
	/// ([`crate::proof::chain::state_hash`]), chained from the anchor of the
	/// state here, with the state tree's root after the step and the step's record.
	/// What a party re-executes when a dispute lands on a segment; the segment
	/// is closed at `end`, as the run closed it, and the run stops hashing.
	pub fn segment_trace(&mut self, end: u32) -> Result<(Vec<TracedStep>, Boundary), B::Error> {
		self.start_trace()?;
		let mut steps = Vec::with_capacity(end.saturating_sub(self.point.next_step) as usize);
		let result = (|| {
			while self.point.next_step < end {
				let record = self.step()?;
				let trace = self.trace.unwrap_or(TracePoint::anchored(&[0; 32]));
				steps.push(TracedStep { state_hash: trace.last_hash, state_root: trace.last_state_root, record: record.record });
			}
			self.close_segment()
		})();
		self.stop_trace();
		Ok((steps, result?))
	}

	/// Downloads the current parameters.
	pub fn params(&mut self) -> Result<Vec<Vec<f32>>, B::Error> {
		let ids: Vec<_> = self.graph.state.iter().take(self.graph.params).copied().collect();
		self.download_values(&ids)
	}

	/// Downloads the buffers of `ids`.
	fn download_values(&mut self, ids: &[usize]) -> Result<Vec<Vec<f32>>, B::Error> {
		let mut out = Vec::with_capacity(ids.len());
		for &id in ids {
			let tensor = self.buffers.tensor(&self.graph, id)?;
			out.push(self.backend.download(tensor)?);
		}
		Ok(out)
	}

	/// Runs one step; returns its record.
	pub fn step(&mut self) -> Result<StepRecord, B::Error> {
		let step = self.point.next_step;
		self.load_batch(step)?;
		let node_count = self.graph.nodes.len();
		for id in 1..node_count {
			self.run_node(id, step)?;
		}
		let loss_tensor = self.buffers.tensor(&self.graph, self.graph.loss)?;
		let loss = self.backend.download(loss_tensor)?.first().copied().unwrap_or(f32::NAN);
		// Rule 7 (every operator's outputs were checked as it ran, or the device
		// reports its queued checks now; the loss is one of them). A traced step goes
		// on past a non-finite value, so that the prover can open the first
		// non-finite piece as the proof that the step diverges.
		let device_found = self.backend.take_non_finite()?;
		if (device_found || !loss.is_finite()) && self.recording.is_none() {
			return Err(KernelError::NonFinite { step }.into());
		}
		let record = record_hash(&self.point.record, step, canonical_bits(loss));
		self.point = ChainPoint { next_step: step.saturating_add(1), record };
		// A segment's trace also hashes the state after every step (in the same
		// buffers as before it: in-place updates), where the state lives.
		if let Some(trace) = self.trace {
			let state_root = self.state_tree_root()?;
			self.trace = Some(TracePoint {
				last_hash: state_hash(&trace.last_hash, step, &state_root, &record),
				previous_hash: trace.last_hash,
				last_state_root: state_root,
			});
		}
		Ok(StepRecord { step, loss, record })
	}

	/// Runs one step with every value copied to the host and every operator
	/// committed. The record equals the one [`Trainer::step`] gives. Unlike
	/// `step`, it goes on past a non-finite value, so that a solver whose run
	/// stopped with [`KernelError::NonFinite`] can trace the step from its last
	/// checkpoint and prove the divergence
	/// ([`first_non_finite_piece`](crate::referee::first_non_finite_piece)); such a
	/// trace's later hashes cover non-finite bits and are not portable. The run
	/// must be hashing its segment's trace ([`Trainer::start_trace`]).
	pub fn trace_step(&mut self) -> Result<StepTrace, B::Error> {
		let Some(start) = self.trace else {
			return Err(KernelError::InvalidHyperparameter { name: "trace step (the run is not hashing its segment)" }.into());
		};
		let previous_record = self.point.record;
		let mut recording: Vec<Option<HostTensor>> = vec![None; self.graph.values.len()];
		let before = self.state()?;
		for (&id, values) in self.graph.state.iter().zip(before) {
			if let Some(slot) = recording.get_mut(id) {
				*slot = Some(HostTensor::F32(values));
			}
		}
		self.recording = Some(recording);
		let result = self.step();
		let recording = self.recording.take().unwrap_or_default();
		let record = result?;
		let values: Vec<HostTensor> =
			recording.into_iter().map(|value| value.unwrap_or(HostTensor::F32(Vec::new()))).collect();
		let after = self.trace.unwrap_or(start);
		let trace = build_step_trace(&self.graph, record, values, &self.faults)?;
		Ok(StepTrace {
			state_root: after.last_state_root,
			state_hash: after.last_hash,
			previous_hash: start.last_hash,
			previous_state_root: start.last_state_root,
			previous_record,
			previous_previous_hash: start.previous_hash,
			samples: self.batch_samples.clone(),
			..trace
		})
	}

	/// Computes the batch of `step` and runs operator 0.
	fn load_batch(&mut self, step: u32) -> Result<(), B::Error> {
		let indices = batch_indices(self.shard.clone(), self.graph.batch, self.train.seed, step)?;
		// A traced step keeps a host copy of the batch, built from the host's copy of the
		// data by the reference operators: a gather is a copy, so these are the device's
		// bits, and reading them back would make the host wait mid-step.
		let batch = match (&self.data, &self.data_tensor) {
			(TrainingData::Samples(data), Some(data_tensor)) => {
				let labels: Vec<u32> = indices.iter().map(|&i| data.labels.get(i as usize).copied().unwrap_or(0)).collect();
				let [features_id, labels_id, _] = self.graph.batch_values;
				let device_indices = self.backend.upload_indices(&indices)?;
				let mut features = self.buffers.take(&self.graph, features_id)?;
				let gathered = self.backend.gather_rows(data_tensor, self.graph.input_len, &device_indices, &mut features);
				self.buffers.put(&self.graph, features_id, features)?;
				gathered?;
				let device_labels = self.backend.upload_indices(&labels)?;
				self.buffers.put_indices(&self.graph, labels_id, device_labels)?;
				if self.recording.is_some() {
					let mut host_features = vec![0.0; indices.len().saturating_mul(self.graph.input_len)];
					crate::ops::gather::gather_rows(&data.features, self.graph.input_len, &indices, &mut host_features)?;
					Some([HostTensor::F32(host_features), HostTensor::U32(labels), HostTensor::U32(indices.clone())])
				} else {
					None
				}
			},
			(TrainingData::Tokens(stream), _) => {
				let windows = crate::job::text::windows_at(&stream.tokens, self.graph.input_len, &indices)?;
				let rows = crate::job::text::batch_rows(&windows, self.graph.input_len)?;
				for (&id, values) in self.graph.batch_values.iter().zip(&rows) {
					let tensor = self.backend.upload_indices(values)?;
					self.buffers.put_indices(&self.graph, id, tensor)?;
				}
				self.recording.is_some().then(|| rows.map(HostTensor::U32))
			},
			(TrainingData::Samples(_), None) => return Err(KernelError::InvalidHyperparameter { name: "dataset" }.into()),
		};
		if let (Some(recording), Some(batch)) = (self.recording.as_mut(), batch) {
			for (&id, tensor) in self.graph.batch_values.iter().zip(batch) {
				if let Some(slot) = recording.get_mut(id) {
					*slot = Some(tensor);
				}
			}
		}
		self.batch_samples = indices;
		Ok(())
	}

	/// Runs operator `id` of `step` on the backend (applying the fault, recording).
	fn run_node(&mut self, id: usize, step: u32) -> Result<(), B::Error> {
		let node = self.graph.nodes.get(id).cloned().ok_or(KernelError::MissingValue { id })?;
		self.buffers.run(&mut self.backend, &self.graph, id, step)?;
		// Rule 7: a step that produces NaN or an infinity in any operator's output
		// is invalid (the referee refuses to judge one). Checking every output, not
		// only the state, catches an infinity that a later operator hides (tanh of an
		// overflowed sum, ReLU of −∞). The run stops before the hash chain moves on.
		for &value in node.outputs.iter().filter(|_| self.recording.is_none()) {
			let tensor = self.buffers.tensor(&self.graph, value)?;
			if self.backend.check_finite(tensor)? == Some(false) {
				return Err(KernelError::NonFinite { step }.into());
			}
		}
		self.apply_faults(id, step)?;
		if self.recording.is_some() {
			let outputs = self.download_values(&node.outputs)?;
			if let Some(recording) = self.recording.as_mut() {
				for (&value, host) in node.outputs.iter().zip(outputs) {
					if let Some(slot) = recording.get_mut(value) {
						*slot = Some(HostTensor::F32(host));
					}
				}
			}
		}
		Ok(())
	}

	/// Applies the injected faults that target operator `id` of `step`.
	fn apply_faults(&mut self, id: usize, step: u32) -> Result<(), B::Error> {
		for fault in self.faults.clone() {
			self.apply_fault(fault, id, step)?;
		}
		Ok(())
	}

	/// Applies `fault` if it targets operator `id` of `step`.
	fn apply_fault(&mut self, fault: Fault, id: usize, step: u32) -> Result<(), B::Error> {
		let node = self.graph.nodes.get(id).cloned().ok_or(KernelError::MissingValue { id })?;
		let (output, values) = if let Some((output, element, bit)) = fault.output(step, id) {
			let value = node.outputs.get(output).copied().ok_or(KernelError::MissingValue { id })?;
			let mut values = self.download_values(&[value])?.pop().unwrap_or_default();
			flip(&mut values, element, bit);
			(value, values)
		} else if let (Some(target), OpKind::Contract(contraction)) = (fault.accumulator(step, id), node.kind) {
			let inputs = self.download_values(&node.inputs)?;
			let (lhs, rhs) = (inputs.first().cloned().unwrap_or_default(), inputs.get(1).cloned().unwrap_or_default());
			let accumulators = accumulators(contraction, &lhs, &rhs, Some(target))?;
			let value = node.outputs.first().copied().ok_or(KernelError::MissingValue { id })?;
			let mut out = vec![0.0f32; contraction.output_len()?];
			write_final_accumulators(contraction, &accumulators, &mut out)?;
			(value, out)
		} else {
			return Ok(());
		};
		let tensor = self.backend.upload(&values)?;
		self.buffers.put(&self.graph, output, tensor)?;
		Ok(())
	}
}

/// Every accumulator of a contraction, in piece order (tile-major, chunk-minor):
/// `acc_c = acc_{c−1} + partial_c` from `+0`, as [`fold_chunk_partials`] folds.
///
/// `fault` = `(chunk, element, bit)` flips one bit of one partial sum (for the
/// dispute tests, [`Fault`]). Holds every accumulator at once:
/// [`for_each_accumulator`] is the way for a whole step.
pub fn accumulators(
	contraction: Contraction,
	lhs: &[f32],
	rhs: &[f32],
	fault: Flip<ChunkId>,
) -> Result<Vec<Vec<f32>>, KernelError> {
	let mut out = Vec::with_capacity(contraction.grid()?.len());
	for_each_accumulator(contraction, lhs, rhs, fault, |_, accumulator| {
		out.push(accumulator.to_vec());
		Ok(())
	})?;
	Ok(out)
}

/// [`accumulators`] one at a time: `visit` gets each accumulator's piece index and words,
/// in piece order, and only one tile's running sum is held (a GPT-2-sized vocabulary
/// head has 200,000 tiles of 24 K-chunks each).
pub fn for_each_accumulator<E: From<KernelError>>(
	contraction: Contraction,
	lhs: &[f32],
	rhs: &[f32],
	fault: Flip<ChunkId>,
	mut visit: impl FnMut(usize, &[f32]) -> Result<(), E>,
) -> Result<(), E> {
	let grid = contraction.grid()?;
	let mut index = 0;
	for tile_row in 0..grid.tile_rows {
		for tile_col in 0..grid.tile_cols {
			let mut running: Option<Vec<f32>> = None;
			for chunk in 0..grid.chunks {
				let id = ChunkId { tile_row, tile_col, chunk };
				let mut partial = contraction.chunk(lhs, rhs, id)?;
				if let Some((target, element, bit)) = fault {
					if target == id {
						flip(&mut partial, element, bit);
					}
				}
				let next = match &running {
					None => fold_chunk_partials([partial.as_slice()], partial.len())?,
					Some(previous) => fold_chunk_partials([previous.as_slice(), partial.as_slice()], partial.len())?,
				};
				visit(index, &next)?;
				index += 1;
				running = Some(next);
			}
		}
	}
	Ok(())
}

/// Every partial of `reduction`, whose inputs are the values `inputs` of a
/// step's host copies `values`, in piece order, to `visit` with its piece index.
/// `fault` = `(piece, element, bit)` flips one bit of one partial
/// ([`Reduction::for_each_partial`]).
pub fn for_each_reduction_partial<E: From<KernelError>>(
	reduction: &Reduction,
	inputs: &[usize],
	values: &[HostTensor],
	fault: Flip<usize>,
	visit: impl FnMut(usize, &[f32]) -> Result<(), E>,
) -> Result<(), E> {
	let word = |position: usize, index: usize| -> Result<u32, E> {
		let input = inputs.get(position).and_then(|&input| values.get(input));
		input.and_then(|tensor| tensor.word(index)).ok_or_else(|| KernelError::MissingInput { position, index }.into())
	};
	reduction.for_each_partial(word, fault, visit)
}

/// The running sums of operator `operator` of a step, in piece order, to `visit` with each
/// one's piece index: a contraction's accumulators or a reduction's partials (nothing for
/// any other operator). `fault` flips one bit of one of them ([`Fault`]).
pub fn for_each_running_sum<E: From<KernelError>>(
	graph: &Graph,
	operator: usize,
	values: &[HostTensor],
	faults: (Flip<ChunkId>, Flip<usize>),
	mut visit: impl FnMut(usize, &[f32]) -> Result<(), E>,
) -> Result<(), E> {
	let node = graph.node(operator).map_err(|_| KernelError::MissingValue { id: operator })?;
	let operand = |position: usize| -> Result<&[f32], KernelError> {
		let id = node.inputs.get(position).copied().unwrap_or_default();
		values.get(id).map(HostTensor::as_f32).ok_or(KernelError::MissingValue { id })
	};
	if let OpKind::Contract(contraction) = node.kind {
		return for_each_accumulator(contraction, operand(0)?, operand(1)?, faults.0, visit);
	}
	match graph.reduction(operator).map_err(|_| KernelError::MissingValue { id: operator })? {
		Some(reduction) => for_each_reduction_partial(&reduction, &node.inputs, values, faults.1, &mut visit),
		None => Ok(()),
	}
}

/// Scatters each tile's last accumulator into the contraction's output layout.
pub fn write_final_accumulators(
	contraction: Contraction,
	accumulators: &[Vec<f32>],
	out: &mut [f32],
) -> Result<(), KernelError> {
	let grid = contraction.grid()?;
	for tile_row in 0..grid.tile_rows {
		for tile_col in 0..grid.tile_cols {
			let last = ChunkId { tile_row, tile_col, chunk: grid.chunks - 1 };
			let extent = contraction.extent(last)?;
			let index = Graph::accumulator_index(&grid, last);
			let tile = accumulators.get(index).ok_or(KernelError::MissingInput { position: usize::MAX, index })?;
			let width = extent.cols.len();
			for (r, row) in extent.rows.clone().enumerate() {
				for (c, col) in extent.cols.clone().enumerate() {
					let value = tile.get(r * width + c).copied().unwrap_or_default();
					if let Some(slot) = out.get_mut(contraction.output_index(row, col)) {
						*slot = value;
					}
				}
			}
		}
	}
	Ok(())
}

/// Commits every operator of a recorded step.
fn build_step_trace(
	graph: &Graph,
	record: StepRecord,
	values: Vec<HostTensor>,
	faults: &[Fault],
) -> Result<StepTrace, KernelError> {
	let value = |id: usize| values.get(id).cloned().unwrap_or(HostTensor::F32(Vec::new()));
	let mut pieces = Vec::with_capacity(graph.nodes.len());
	let mut operator_leaves = Vec::with_capacity(graph.nodes.len());
	for (id, node) in graph.nodes.iter().enumerate() {
		// The running sums are hashed as they are made, never held all at once.
		let mut leaves = Vec::new();
		let step_faults = (
			faults.iter().find_map(|fault| fault.accumulator(record.step, id)),
			faults.iter().find_map(|fault| fault.partial(record.step, id)),
		);
		for_each_running_sum(graph, id, &values, step_faults, |_, sum| {
			leaves.push(segment_leaf(sum));
			Ok::<(), KernelError>(())
		})?;
		let tree = if node.kind == OpKind::Commit {
			// The new state's chunks: Commit's piece tree is the state tree.
			let state: Vec<&[f32]> = node.inputs.iter().map(|&id| values.get(id).map_or(&[][..], HostTensor::as_f32)).collect();
			crate::proof::state_tree::tree(&state).map_err(KernelError::Commitment)?
		} else {
			for &id in &node.outputs {
				leaves.extend(value(id).segment_leaves());
			}
			MerkleTree::new(leaves).map_err(KernelError::Commitment)?
		};
		let count = tree.len() as u32;
		operator_leaves.push(operator_leaf(id as u32, node.kind.code(), count, &tree.root()));
		pieces.push(tree);
	}
	let state: Vec<&[f32]> = graph.state.iter().map(|&id| values.get(id).map_or(&[][..], HostTensor::as_f32)).collect();
	let previous_state = crate::proof::state_tree::tree(&state).map_err(KernelError::Commitment)?;
	Ok(StepTrace {
		record,
		state_root: [0; 32],
		state_hash: [0; 32],
		previous_hash: [0; 32],
		previous_state_root: previous_state.root(),
		previous_record: [0; 32],
		previous_previous_hash: [0; 32],
		values,
		samples: Vec::new(),
		pieces,
		operators: MerkleTree::new(operator_leaves).map_err(KernelError::Commitment)?,
		previous_state,
	})
}

//! Checkpoints: the training state in safetensors, addressed by the
//! BLAKE3 of the file's bytes ([`crate::proof::content`]). Never pickles.
//!
//! # Format
//!
//! One `F32` tensor per state tensor, named `state.0000`, `state.0001`, … in
//! state order (parameters, then first moments, then second moments), each of
//! shape `[len]`, little-endian. The header's `__metadata__` holds exactly one
//! entry, `touchstone`, with the value
//! `v3 next_step=<n> record=<hex>` (hex: 64 digits): the step the checkpoint
//! resumes at and the segment's record there ([`ChainPoint`]; zeros at a segment
//! boundary, where checkpoints are taken). One entry, because the `safetensors` crate
//! writes metadata from a hash map, whose order is not fixed: with one entry
//! (and zero-padded tensor names, which it sorts) the same state always gives
//! the same bytes, so the same hash.
//!
//! Loading reads the file, checks its content hash against the hash the
//! caller expects (the one committed on chain) **before** parsing anything,
//! then parses and brings the values onto the contract's grid.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::exec::backend::Backend;
use crate::job::data::hex;
use crate::proof::content::content_hash;
use crate::proof::hash::Digest;
use crate::job::trace::{StepRecord, Trainer};
use crate::proof::chain::ChainPoint;

/// The metadata key of a checkpoint.
const METADATA_KEY: &str = "touchstone";
/// The format tag at the start of the metadata value.
const FORMAT: &str = "v3";

/// A resumable training state.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
	/// Where the run stands in its hash chain.
	pub point: ChainPoint,
	/// Parameters, then moments.
	pub state: Vec<Vec<f32>>,
}

/// Why a checkpoint could not be written or loaded.
#[derive(Debug)]
pub enum CheckpointError {
	/// Reading or writing the file failed.
	Io(std::io::Error),
	/// The file's content hash is not the expected one; nothing was parsed.
	WrongHash {
		/// Expected, hex.
		expected: String,
		/// Found, hex.
		actual: String,
	},
	/// The bytes are not a checkpoint of this format.
	Format(String),
	/// The state the file holds does not have the expected root.
	WrongStateRoot {
		/// Expected, hex.
		expected: String,
		/// Found, hex.
		actual: String,
	},
}

impl fmt::Display for CheckpointError {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			Self::Io(error) => write!(f, "checkpoint I/O: {error}"),
			Self::WrongHash { expected, actual } => {
				write!(f, "checkpoint hash is {actual}, expected {expected}: refusing to load it")
			},
			Self::Format(reason) => write!(f, "not a Touchstone checkpoint: {reason}"),
			Self::WrongStateRoot { expected, actual } => {
				write!(f, "the model's state root is {actual}, expected {expected}: refusing to load it")
			},
		}
	}
}

impl std::error::Error for CheckpointError {}

impl From<std::io::Error> for CheckpointError {
	fn from(error: std::io::Error) -> Self {
		Self::Io(error)
	}
}

/// A state tensor as a safetensors view.
struct Tensor {
	shape: [usize; 1],
	bytes: Vec<u8>,
}

impl safetensors::tensor::View for &Tensor {
	fn dtype(&self) -> Dtype {
		Dtype::F32
	}
	fn shape(&self) -> &[usize] {
		&self.shape
	}
	fn data(&self) -> std::borrow::Cow<'_, [u8]> {
		std::borrow::Cow::Borrowed(&self.bytes)
	}
	fn data_len(&self) -> usize {
		self.bytes.len()
	}
}

impl Checkpoint {
	/// The checkpoint's file bytes; the same state always gives the same bytes.
	pub fn to_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
		let tensors: Vec<(String, Tensor)> = self
			.state
			.iter()
			.enumerate()
			.map(|(index, values)| {
				let bytes = values.iter().flat_map(|v| crate::arith::canonical_bits(*v).to_le_bytes()).collect();
				(format!("state.{index:04}"), Tensor { shape: [values.len()], bytes })
			})
			.collect();
		let point = &self.point;
		let value = format!("{FORMAT} next_step={} record={}", point.next_step, hex(&point.record));
		let metadata = HashMap::from([(METADATA_KEY.to_string(), value)]);
		safetensors::serialize(tensors.iter().map(|(name, tensor)| (name.as_str(), tensor)), Some(metadata))
			.map_err(|error| CheckpointError::Format(error.to_string()))
	}

	/// The content address of [`Checkpoint::to_bytes`] ([`content_hash`]).
	pub fn hash(&self) -> Result<Digest, CheckpointError> {
		Ok(content_hash(&self.to_bytes()?))
	}

	/// Writes the checkpoint to `path`; returns its hash.
	pub fn write(&self, path: &Path) -> Result<Digest, CheckpointError> {
		let bytes = self.to_bytes()?;
		std::fs::write(path, &bytes)?;
		Ok(content_hash(&bytes))
	}

	/// Parses checkpoint bytes whose hash is `expected`, checking the hash first.
	pub fn from_bytes(bytes: &[u8], expected: &Digest) -> Result<Self, CheckpointError> {
		let actual = content_hash(bytes);
		if actual != *expected {
			return Err(CheckpointError::WrongHash { expected: hex(expected), actual: hex(&actual) });
		}
		Self::parse(bytes)
	}

	/// Parses a model file named by its state root (a proven final state): its state's
	/// root must be `expected`. Only the state is checked; the chain point the file
	/// carries is not, and a caller must not resume a trace from it.
	pub fn with_state_root(bytes: &[u8], expected: &Digest) -> Result<Self, CheckpointError> {
		let checkpoint = Self::parse(bytes)?;
		let actual = crate::job::trace::state_root(&checkpoint.state)
			.map_err(|error| CheckpointError::Format(format!("the state cannot be hashed: {error:?}")))?;
		if actual != *expected {
			return Err(CheckpointError::WrongStateRoot { expected: hex(expected), actual: hex(&actual) });
		}
		Ok(checkpoint)
	}

	/// Parses checkpoint bytes, checking their format only.
	fn parse(bytes: &[u8]) -> Result<Self, CheckpointError> {
		let format = |reason: &str| CheckpointError::Format(reason.to_string());
		let (_, metadata) =
			SafeTensors::read_metadata(bytes).map_err(|error| CheckpointError::Format(error.to_string()))?;
		let value = metadata
			.metadata()
			.as_ref()
			.and_then(|map| map.get(METADATA_KEY))
			.ok_or_else(|| format("no touchstone metadata"))?;
		let mut fields = value.split(' ');
		if fields.next() != Some(FORMAT) {
			return Err(format("unknown format version"));
		}
		let next_step = fields
			.next()
			.and_then(|field| field.strip_prefix("next_step="))
			.and_then(|n| n.parse().ok())
			.ok_or_else(|| format("bad next_step"))?;
		let record = fields
			.next()
			.and_then(|field| field.strip_prefix("record="))
			.and_then(parse_hex)
			.ok_or_else(|| format("bad record"))?;
		if fields.next().is_some() {
			return Err(format("unexpected metadata after the record"));
		}
		let tensors = SafeTensors::deserialize(bytes).map_err(|error| CheckpointError::Format(error.to_string()))?;
		let mut state = Vec::with_capacity(tensors.len());
		for index in 0..tensors.len() {
			let view: TensorView<'_> =
				tensors.tensor(&format!("state.{index:04}")).map_err(|_| format("missing state tensor"))?;
			if view.dtype() != Dtype::F32 || view.shape().len() != 1 {
				return Err(format("state tensors are one-dimensional f32"));
			}
			let mut values: Vec<f32> = view
				.data()
				.chunks_exact(4)
				.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
				.collect();
			crate::arith::canonicalize(&mut values);
			state.push(values);
		}
		Ok(Self { point: ChainPoint { next_step, record }, state })
	}

	/// Reads and verifies the checkpoint at `path` whose hash is `expected`.
	pub fn read(path: &Path, expected: &Digest) -> Result<Self, CheckpointError> {
		Self::from_bytes(&std::fs::read(path)?, expected)
	}

	/// The checkpoint of `trainer`'s current state.
	pub fn of<B: Backend>(trainer: &mut Trainer<B>) -> Result<Self, B::Error> {
		Ok(Self { point: trainer.chain_point(), state: trainer.state()? })
	}
}

/// Parses 64 hex digits.
fn parse_hex(text: &str) -> Option<Digest> {
	if text.len() != 64 {
		return None;
	}
	let mut digest = [0u8; 32];
	for (slot, pair) in digest.iter_mut().zip(text.as_bytes().chunks(2)) {
		*slot = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
	}
	Some(digest)
}

/// A checkpoint written during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenCheckpoint {
	/// The step it resumes at.
	pub next_step: u32,
	/// Its file's hash.
	pub hash: Digest,
	/// Where it was written.
	pub path: std::path::PathBuf,
	/// The segment boundary it is taken at: what the learning proof commits there.
	pub boundary: crate::job::trace::Boundary,
}

/// Runs `steps` steps, writing a checkpoint into `dir` wherever
/// [`TrainConfig::is_checkpoint_step`](crate::job::model::TrainConfig::is_checkpoint_step)
/// says one is taken: at global multiples of `interval` (`next_step = k, 2k, …`,
/// whatever step the run starts at) and after the last step. Each checkpoint
/// closes a segment ([`Trainer::close_segment`]), so it carries its boundary.
pub fn run_with_checkpoints<B: Backend>(
	trainer: &mut Trainer<B>,
	steps: u32,
	interval: u32,
	dir: &Path,
) -> Result<(Vec<StepRecord>, Vec<WrittenCheckpoint>), String> {
	let mut records = Vec::with_capacity(steps as usize);
	let mut written = Vec::new();
	let end = trainer.next_step().saturating_add(steps);
	let rule = crate::job::model::TrainConfig { checkpoint_interval: interval, ..*trainer.train_config() };
	for _ in 0..steps {
		records.push(trainer.step().map_err(|error| format!("{error:?}"))?);
		if rule.is_checkpoint_step(trainer.next_step(), end) {
			let boundary = trainer.close_segment().map_err(|error| format!("{error:?}"))?;
			let checkpoint = Checkpoint::of(trainer).map_err(|error| format!("{error:?}"))?;
			let next_step = checkpoint.point.next_step;
			let path = dir.join(format!("step-{next_step:08}.safetensors"));
			let hash = checkpoint.write(&path).map_err(|error| error.to_string())?;
			written.push(WrittenCheckpoint { next_step, hash, path, boundary });
		}
	}
	Ok((records, written))
}

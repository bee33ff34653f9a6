//! Protocol types shared by the Touchstone runtime, its pallets and the worker.
//!
//! Everything a client or a worker needs to encode a job, read a work unit or build a
//! learning-proof commitment lives here, once. The layouts are part of the public
//! interface: polkadot.js and subxt decode them from metadata, so a field changed after
//! launch breaks every client. Add variants and fields only with a storage migration.
//!
//! Real numbers that the chain stores (learning rate, thresholds, loss) are
//! [`FixedU64`]s: a `u64` holding the value times 10⁹. SCALE has no floats, and a fixed
//! point value converts to the same `f32` on every machine.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use polkadot_sdk::sp_core::{ConstU32, H256};
use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64, Perbill};
use scale_info::TypeInfo;

pub mod referee;
mod runtime_api;
pub mod traits;
pub use runtime_api::*;

/// Identifies a job; assigned sequentially from zero.
pub type JobId = u64;
/// Position of a work unit inside its job, from zero.
pub type UnitIndex = u32;
/// A 256-bit content hash (BLAKE2b-256 unless a field says otherwise).
pub type ContentHash = H256;

// Bounds of the encoded types. They are the protocol's limits, declared once: a field
// over them does not decode, so no pallet re-declares or re-checks them, and storage is
// sized for exactly what is accepted.

/// Most layers a model configuration can encode (hidden layers, plus convolutions for
/// a CNN). Each layer adds operators to a step's graph, which the referee rebuilds.
pub const MAX_LAYERS: u32 = 16;
/// The largest training set a job may name (`DatasetRef::samples`): the kernels' bound
/// (`touchstone_kernels::job::data::MAX_SAMPLES`), which keeps sample indices and dataset
/// words inside `u32`. A disputed batch costs the referee the same at any size.
pub const MAX_DATASET_SAMPLES: u32 = touchstone_kernels::job::data::MAX_SAMPLES as u32;
/// Longest content location (a URI or path) in bytes that can be encoded.
pub const MAX_LOCATION_LEN: u32 = 256;
/// Longest device model string in bytes that can be encoded.
pub const MAX_DEVICE_MODEL_LEN: u32 = 64;
/// Longest region tag in bytes that can be encoded.
pub const MAX_REGION_LEN: u32 = 32;

/// A content location: a URI or a path the solver can fetch, UTF-8.
pub type Location = BoundedVec<u8, ConstU32<MAX_LOCATION_LEN>>;
/// A device model string, UTF-8.
pub type DeviceModel = BoundedVec<u8, ConstU32<MAX_DEVICE_MODEL_LEN>>;
/// A region tag, UTF-8.
pub type Region = BoundedVec<u8, ConstU32<MAX_REGION_LEN>>;
/// Layer widths of a model.
pub type LayerWidths = BoundedVec<u32, ConstU32<MAX_LAYERS>>;

/// The roles a compute node can register for. Each role is bonded separately.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	PartialOrd, Ord, Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Role {
	/// Claims work units, trains and commits learning proofs.
	Solver,
	/// Re-executes sampled segments of proofs and attests.
	Verifier,
	/// Re-checks proofs and attestations and opens disputes.
	Challenger,
}

impl Role {
	/// Every role, in declaration order.
	pub const ALL: [Role; 3] = [Role::Solver, Role::Verifier, Role::Challenger];
}

/// The kind of device a node trains on.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum DeviceKind {
	/// A CPU-only node.
	Cpu,
	/// A node with a GPU.
	Gpu,
}

/// What a compute node declares about its hardware when it registers.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct HardwareProfile {
	/// CPU or GPU.
	pub device: DeviceKind,
	/// The device's model string, UTF-8.
	pub model: DeviceModel,
	/// Device memory in MiB (GPU memory for a GPU, RAM for a CPU node).
	pub memory_mib: u32,
	/// Sustained training throughput estimate in GFLOP/s.
	pub throughput_gflops: u32,
	/// Network bandwidth in Mbit/s.
	pub bandwidth_mbps: u32,
	/// Region tag, UTF-8.
	pub region: Region,
}

/// What a job requires of the hardware that trains it.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct HardwareRequirements {
	/// The device kind required; `None` accepts either.
	pub device: Option<DeviceKind>,
	/// Minimum device memory in MiB.
	pub min_memory_mib: u32,
	/// Minimum throughput in GFLOP/s.
	pub min_throughput_gflops: u32,
	/// Minimum bandwidth in Mbit/s.
	pub min_bandwidth_mbps: u32,
	/// The region required; `None` accepts any.
	pub region: Option<Region>,
}

impl HardwareRequirements {
	/// Whether a node with `profile` can train a job with these requirements.
	pub fn is_met_by(&self, profile: &HardwareProfile) -> bool {
		self.device.map_or(true, |device| device == profile.device) &&
			profile.memory_mib >= self.min_memory_mib &&
			profile.throughput_gflops >= self.min_throughput_gflops &&
			profile.bandwidth_mbps >= self.min_bandwidth_mbps &&
			self.region.as_ref().map_or(true, |region| *region == profile.region)
	}
}

/// A content-addressed object: its hash and where to fetch it.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct ContentRef {
	/// BLAKE2b-256 of the object's bytes. A fetched object whose hash differs is rejected.
	pub hash: ContentHash,
	/// Where to fetch it, UTF-8.
	pub location: Location,
}

/// The training dataset of a job: labelled samples, or for a transformer a token stream
/// whose windows play the samples' part.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct DatasetRef {
	/// The dataset file.
	pub content: ContentRef,
	/// Number of training samples in it; data shards are cut from this count. For a
	/// transformer, the stream's windows: `n` windows of `context` tokens are a stream of
	/// `n·context + 1` tokens, window `w` reading tokens `w·context ..= (w + 1)·context`.
	pub samples: u32,
	/// Merkle root of the training samples as the units train on them:
	/// `touchstone_kernels::job::data::Dataset::root`, over their canonical words (every
	/// feature's `f32` bits, sample by sample, then every label) in 32-word segments; for
	/// a transformer `touchstone_kernels::job::text::TokenStream::root`, over its tokens
	/// in 32-token segments. The referee proves a disputed batch's rows against it.
	pub root: ContentHash,
}

/// The hidden-layer activation of a model.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Activation {
	/// max(0, x).
	Relu,
	/// tanh(x), computed as the kernels' contract prescribes.
	Tanh,
	/// GELU (tanh approximation), computed as the kernels' contract prescribes.
	Gelu,
}

/// The normalisation of a transformer's blocks and of its final norm.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Normalization {
	/// LayerNorm: centred and scaled, with a gain and a bias.
	LayerNorm,
	/// RMSNorm: scaled by the root mean square, with a gain only.
	RmsNorm,
}

/// Model architecture and configuration.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum ModelArch {
	/// A multi-layer perceptron: `inputs → hidden… → classes`.
	Mlp {
		/// Input features per sample.
		inputs: u32,
		/// Widths of the hidden layers, in order.
		hidden: LayerWidths,
		/// Output classes.
		classes: u32,
		/// Activation after each hidden layer.
		activation: Activation,
	},
	/// A small convolutional network: valid 2-D convolutions with stride 1, each followed
	/// by the activation, then dense layers.
	Cnn {
		/// Input channels.
		channels: u32,
		/// Input height in pixels.
		height: u32,
		/// Input width in pixels.
		width: u32,
		/// Output channels of each convolution, in order.
		conv_channels: LayerWidths,
		/// Square kernel size of every convolution.
		kernel_size: u32,
		/// Widths of the dense hidden layers after the convolutions.
		hidden: LayerWidths,
		/// Output classes.
		classes: u32,
		/// Activation after each convolution and hidden layer.
		activation: Activation,
	},
	/// A pre-norm, decoder-only transformer over a token stream: token and learned
	/// position embeddings, `layers` blocks of causal multi-head self-attention and a GELU
	/// MLP with residual connections, a final norm, and cross-entropy over the vocabulary
	/// at every position. It trains with AdamW only, at the warm-up and cosine schedule the
	/// kernels derive from the job's learning rate and steps; its dataset is a token
	/// stream cut into windows of `context` tokens ([`DatasetRef`]). The chain accepts
	/// only what the kernels' `TransformerConfig::validated` does (vocabulary 2 to
	/// 65,536, context 1 to 1,024, 1 to 48 blocks, width up to 2,048 divisible by
	/// `heads` into heads at most 256 wide, an MLP ratio 1 to 8), and then only a job whose
	/// worst dispute piece the referee can afford.
	Transformer {
		/// Tokens in the vocabulary: the classes the head predicts.
		vocab: u32,
		/// Tokens per training window: the position embedding's rows.
		context: u32,
		/// Blocks.
		layers: u32,
		/// Attention heads per block.
		heads: u32,
		/// Width of the residual stream, a multiple of `heads`.
		width: u32,
		/// The MLP's hidden width over `width`.
		mlp_ratio: u32,
		/// The normalisation of every block and of the final norm.
		norm: Normalization,
		/// Whether the head is the token embedding, transposed.
		tied_embeddings: bool,
	},
}

/// The optimizer and its settings.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Optimizer {
	/// Stochastic gradient descent with heavy-ball momentum.
	Sgd {
		/// Momentum factor.
		momentum: FixedU64,
	},
	/// AdamW (decoupled weight decay).
	AdamW {
		/// First-moment decay.
		beta1: FixedU64,
		/// Second-moment decay.
		beta2: FixedU64,
		/// Denominator epsilon.
		epsilon: FixedU64,
		/// Decoupled weight decay.
		weight_decay: FixedU64,
	},
}

/// Training hyper-parameters.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct HyperParams {
	/// Total optimizer steps of the job.
	pub steps: u32,
	/// Samples per step.
	pub batch_size: u32,
	/// Learning rate.
	pub learning_rate: FixedU64,
	/// Optimizer and its settings.
	pub optimizer: Optimizer,
	/// Clip the global gradient L2 norm to this value; `None` disables clipping.
	pub grad_clip_norm: Option<FixedU64>,
	/// Seed of the Philox streams for initialisation and batch order.
	pub seed: u64,
	/// A checkpoint is written, and may be committed, every this many steps.
	pub checkpoint_interval: u32,
}

/// Whether a unit's proof must carry a forced error. Its solver trained the unit, then
/// committed [`forced_commitment`] of a fresh `secret` and of its two candidate trace
/// roots, and the chain recorded `random` after that. The unit is forced when
/// `blake2_256(SCALE("touchstone/forced-error", secret, random, job, unit))`, its first four
/// bytes read as a little-endian fraction of 2^32, is below `rate` (and the unit has a step
/// to carry the error, [`forced_step`]). The solver learns the answer only once it is bound
/// to both proofs it may be judged on, and could not steer it: `secret` was fixed before
/// `random` existed. Nobody else can tell until it reveals `secret`.
pub fn forced_error(secret: &[u8; 32], random: &[u8; 32], job: JobId, unit: UnitIndex, rate: Perbill) -> bool {
	use polkadot_sdk::sp_runtime::traits::{BlakeTwo256, Hash};
	let draw = BlakeTwo256::hash(&(b"touchstone/forced-error", secret, random, job, unit).encode()).0;
	let value = u64::from(u32::from_le_bytes([draw[0], draw[1], draw[2], draw[3]]));
	// rate × 2^32, exact: at most 10^9 × 2^32 < 2^62.
	let threshold = u64::from(rate.deconstruct()).saturating_mul(1 << 32) / 1_000_000_000;
	value < threshold
}

/// What a solver commits before it learns whether its unit is forced: `blake2_256` of
/// `SCALE("touchstone/forced-commitment", secret, honest_root, forced_root)`, binding its
/// secret to the trace root of its honest proof and to that of the proof wrong at
/// [`forced_step`]. The randomness that decides which of the two stands comes later.
pub fn forced_commitment(secret: &[u8; 32], honest_root: &[u8; 32], forced_root: &[u8; 32]) -> [u8; 32] {
	use polkadot_sdk::sp_runtime::traits::{BlakeTwo256, Hash};
	BlakeTwo256::hash(&(b"touchstone/forced-commitment", secret, honest_root, forced_root).encode()).0
}

/// The step a forced proof of the unit gets wrong (the record of its segment, the
/// boundary's), fixed by `secret`
/// before any verifier's samples exist: among the steps no other part of the proof repeats
/// (the first step of a segment of at least two steps, so no checkpoint continues from it,
/// and not the step before the unit's last, whose hash the final-state opening names), the
/// one `blake2_256(SCALE("touchstone/forced-step", secret))` picks. `None` when the unit
/// has no such step: it cannot be forced.
pub fn forced_step(secret: &[u8; 32], segments: &Segments) -> Option<u32> {
	use polkadot_sdk::sp_runtime::traits::{BlakeTwo256, Hash};
	let last = segments.end().checked_sub(1)?;
	let candidates = (0..segments.count())
		.filter_map(|index| segments.range(index))
		.filter(|range| range.end.saturating_sub(range.start) >= 2 && range.start.saturating_add(1) < last)
		.map(|range| range.start);
	let count = candidates.clone().count() as u64;
	let draw = BlakeTwo256::hash(&(b"touchstone/forced-step", secret).encode()).0;
	let pick = u64::from_le_bytes([draw[0], draw[1], draw[2], draw[3], draw[4], draw[5], draw[6], draw[7]]);
	candidates.clone().nth(pick.checked_rem(count)? as usize)
}

/// The checkpoint segments of a unit (defined with the kernels, which train and prove by them).
pub use touchstone_kernels::proof::segments::Segments;

/// Multiply-adds of one training step of `model` at `hyper`'s batch size: the products of
/// its dense layers and of its valid, stride-1 convolutions, three times over (the forward
/// pass, the input gradient and the weight gradient), saturating. Contractions are nearly
/// all of a step's work, so this is what the chain sizes the deadlines of re-execution by
/// ([`reexecution_blocks`]).
pub fn step_multiply_adds(model: &ModelArch, hyper: &HyperParams) -> u64 {
	let dense = |inputs: u64, hidden: &LayerWidths, classes: u32| {
		let mut total = 0u64;
		let mut previous = inputs;
		for &width in hidden.iter().chain(core::iter::once(&classes)) {
			total = total.saturating_add(previous.saturating_mul(u64::from(width)));
			previous = u64::from(width);
		}
		total
	};
	let per_sample = match model {
		ModelArch::Mlp { inputs, hidden, classes, .. } => dense(u64::from(*inputs), hidden, *classes),
		ModelArch::Cnn { channels, height, width, conv_channels, kernel_size, hidden, classes, .. } => {
			let (mut channels, mut height, mut width) = (u64::from(*channels), u64::from(*height), u64::from(*width));
			let kernel = u64::from(*kernel_size);
			let mut total = 0u64;
			for &out in conv_channels.iter() {
				height = height.saturating_sub(kernel.saturating_sub(1));
				width = width.saturating_sub(kernel.saturating_sub(1));
				let products = height.saturating_mul(width).saturating_mul(u64::from(out)).saturating_mul(kernel.saturating_mul(kernel)).saturating_mul(channels);
				total = total.saturating_add(products);
				channels = u64::from(out);
			}
			total.saturating_add(dense(channels.saturating_mul(height).saturating_mul(width), hidden, *classes))
		},
		// Per window: each block's four projections and its MLP over every position, the
		// scores and the weighted values (counted whole, though causal attention needs
		// about half), then the head over every position.
		ModelArch::Transformer { vocab, context, layers, width, mlp_ratio, .. } => {
			let (positions, width) = (u64::from(*context), u64::from(*width));
			let projections = width.saturating_mul(width).saturating_mul(u64::from(*mlp_ratio).saturating_mul(2).saturating_add(4));
			let attention = positions.saturating_mul(width).saturating_mul(2);
			let block = positions.saturating_mul(projections.saturating_add(attention));
			let head = positions.saturating_mul(width).saturating_mul(u64::from(*vocab));
			block.saturating_mul(u64::from(*layers)).saturating_add(head)
		},
	};
	per_sample.saturating_mul(u64::from(hyper.batch_size)).saturating_mul(3)
}

/// Whole blocks it takes to re-execute `steps` steps of `step_work` multiply-adds each at
/// `work_per_block` multiply-adds a block, rounded down: a deadline's allowance for the
/// work beyond its floor, which covers the part block. Zero when `work_per_block` is.
pub fn reexecution_blocks(step_work: u64, steps: u32, work_per_block: u64) -> u32 {
	let work = step_work.saturating_mul(u64::from(steps));
	u32::try_from(work.checked_div(work_per_block).unwrap_or(0)).unwrap_or(u32::MAX)
}

/// How a proof is checked.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum VerificationMode {
	/// Re-executed segments must reproduce the committed boundaries bit for bit.
	Exact,
	/// Re-executed segments must land within these distances of the committed weights.
	Tolerance {
		/// Largest L2 distance accepted.
		max_l2: FixedU64,
		/// Largest L-infinity distance accepted.
		max_linf: FixedU64,
		/// Largest cosine distance (1 − cosine similarity) accepted.
		max_cosine_distance: FixedU64,
	},
}

impl VerificationMode {
	/// The submitter's ceilings of a tolerance-mode job: the profiled thresholds never
	/// exceed them. `None` for exact mode.
	pub fn ceiling(&self) -> Option<Distance> {
		match self {
			VerificationMode::Exact => None,
			VerificationMode::Tolerance { max_l2, max_linf, max_cosine_distance } => {
				Some(Distance { l2: *max_l2, linf: *max_linf, cosine: *max_cosine_distance })
			},
		}
	}
}

/// How far one set of model parameters is from another, over all parameters concatenated:
/// the L2 norm and the largest absolute value of their difference, and one minus their
/// cosine similarity. Tolerance mode's measure, and its thresholds.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug, Default,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct Distance {
	/// ‖a − b‖₂.
	pub l2: FixedU64,
	/// max |aᵢ − bᵢ|.
	pub linf: FixedU64,
	/// 1 − a·b / (‖a‖ ‖b‖).
	pub cosine: FixedU64,
}

impl Distance {
	/// Whether every component is at most `bound`'s.
	pub fn within(&self, bound: &Distance) -> bool {
		self.l2 <= bound.l2 && self.linf <= bound.linf && self.cosine <= bound.cosine
	}

	/// The componentwise smaller of the two.
	pub fn min(&self, other: &Distance) -> Distance {
		Distance { l2: self.l2.min(other.l2), linf: self.linf.min(other.linf), cosine: self.cosine.min(other.cosine) }
	}

	/// The componentwise larger of the two.
	pub fn max(&self, other: &Distance) -> Distance {
		Distance { l2: self.l2.max(other.l2), linf: self.linf.max(other.linf), cosine: self.cosine.max(other.cosine) }
	}

	/// `share` of every component, rounded down.
	pub fn share(&self, share: Perbill) -> Distance {
		let part = |value: FixedU64| FixedU64::from_inner(share.mul_floor(value.into_inner()));
		Distance { l2: part(self.l2), linf: part(self.linf), cosine: part(self.cosine) }
	}

	/// Every component multiplied by `factor`, saturating.
	pub fn scaled(&self, factor: u32) -> Distance {
		let scale = |value: FixedU64| FixedU64::from_inner(value.into_inner().saturating_mul(u64::from(factor)));
		Distance { l2: scale(self.l2), linf: scale(self.linf), cosine: scale(self.cosine) }
	}

	/// The componentwise median of `distances` (the mean of the two middle values of an
	/// even count, rounded down); `None` for none. Each component is taken on its own, so
	/// no single report sets them all.
	pub fn median(distances: &[Distance]) -> Option<Distance> {
		if distances.is_empty() {
			return None;
		}
		let (lower, upper) = ((distances.len().saturating_sub(1)) / 2, distances.len() / 2);
		let component = |pick: fn(&Distance) -> FixedU64| {
			let mut values: alloc::vec::Vec<u64> = distances.iter().map(|d| pick(d).into_inner()).collect();
			values.sort();
			let (a, b) = (values.get(lower).copied().unwrap_or_default(), values.get(upper).copied().unwrap_or_default());
			// Halved before adding, so that no sum overflows.
			FixedU64::from_inner((a / 2).saturating_add(b / 2).saturating_add(((a % 2).saturating_add(b % 2)) / 2))
		};
		Some(Distance { l2: component(|d| d.l2), linf: component(|d| d.linf), cosine: component(|d| d.cosine) })
	}
}

/// The thresholds a tolerance-mode job's proofs are judged by, profiled on the chain.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug, Default,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct ToleranceProfile {
	/// The profiled thresholds: a re-executed segment within them matches. `None` until
	/// the job's first verification round profiles it, and again after a challenge.
	pub thresholds: Option<Distance>,
	/// How many times the thresholds were challenged and profiled again.
	pub challenges: u32,
}

/// How unit results combine into the job's result, for data-parallel jobs.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Aggregation {
	/// Average weighted by each shard's sample count.
	WeightedBySamples,
	/// Plain mean over shards.
	Uniform,
}

/// How a job is cut into work units.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum Decomposition {
	/// Consecutive step ranges of one training run. Unit `i + 1` starts from the model
	/// unit `i` proved, so units run one after the other.
	StepRanges {
		/// Steps per unit; the last unit takes the remainder.
		steps_per_unit: u32,
	},
	/// Data-parallel shards: every unit trains all `steps` on its own shard, in parallel.
	DataShards {
		/// Number of shards.
		shards: u32,
		/// How shard results combine.
		aggregation: Aggregation,
	},
	/// Data-parallel rounds (local SGD, DiLoCo): in round `r` every shard's unit trains
	/// `local_steps` steps on its shard from round `r`'s global state; once all of them
	/// are proven, an aggregate unit averages their end states by `aggregation` and takes
	/// the `outer` step, and its result is round `r + 1`'s global state. The last round's
	/// aggregate is the job's model. `rounds × local_steps` must equal the job's `steps`.
	///
	/// Round `r`'s shard `s` is unit `r × (shards + 1) + s`, its aggregate unit
	/// `r × (shards + 1) + shards` ([`RoundLayout`]).
	Rounds {
		/// Shards in every round (at most [`MAX_ROUND_SHARDS`]).
		shards: u32,
		/// Number of rounds.
		rounds: u32,
		/// Steps each shard trains in a round.
		local_steps: u32,
		/// How the shards' end states are weighed in the average.
		aggregation: Aggregation,
		/// What makes the average the next global state.
		outer: OuterOptimizer,
	},
}

impl Decomposition {
	/// Where the units of a rounds job sit; `None` for other decompositions.
	pub fn round_layout(&self) -> Option<RoundLayout> {
		match *self {
			Decomposition::Rounds { shards, rounds, .. } => Some(RoundLayout { shards, rounds }),
			_ => None,
		}
	}

	/// Steps each shard trains in a round; zero for other decompositions.
	pub fn local_steps(&self) -> u32 {
		match *self {
			Decomposition::Rounds { local_steps, .. } => local_steps,
			_ => 0,
		}
	}

	/// The units unit `index` (of `scope`) started from, which must be finalized before
	/// it may be: the step range before it; for a round's shard the aggregate of the
	/// round before; for an aggregate its round's shards. None for a data shard or a
	/// first unit.
	pub fn predecessors(&self, index: UnitIndex, scope: &UnitScope) -> core::ops::Range<UnitIndex> {
		match (*scope, self.round_layout()) {
			(UnitScope::Steps { .. }, _) => index.saturating_sub(1)..index,
			(UnitScope::RoundShard { round, .. }, Some(layout)) if round > 0 => {
				let previous = layout.aggregate_index(round.saturating_sub(1));
				previous..previous.saturating_add(1)
			},
			(UnitScope::Aggregate { round }, Some(layout)) => layout.shard_index(round, 0)..index,
			_ => 0..0,
		}
	}
}

/// The most shards a round may have: the referee recomputes one chunk of the aggregate
/// from one chunk of every shard's end state, so its work grows with them.
pub const MAX_ROUND_SHARDS: u32 = touchstone_kernels::referee::aggregate::MAX_AGGREGATE_SHARDS as u32;

/// The outer step of a rounds job: what makes a round's average of the shards' end states
/// the next global state.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum OuterOptimizer {
	/// The average is the next global state (outer learning rate 1, no momentum).
	Average,
	/// SGD with Nesterov momentum over the pseudo-gradient `global − average`, the outer
	/// momentum part of the global state (DiLoCo: learning rate 0.7, momentum 0.9).
	Nesterov {
		/// The outer learning rate.
		learning_rate: FixedU64,
		/// The outer momentum.
		momentum: FixedU64,
	},
}

/// Where the units of a rounds job sit: each round's shards, then its aggregate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RoundLayout {
	/// Shards in every round.
	pub shards: u32,
	/// Number of rounds.
	pub rounds: u32,
}

/// What a unit of a rounds job is, by its index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RoundUnit {
	/// Shard `shard` of round `round`.
	Shard {
		/// The round.
		round: u32,
		/// The shard.
		shard: u32,
	},
	/// The aggregate of round `round`.
	Aggregate {
		/// The round.
		round: u32,
	},
}

impl RoundLayout {
	/// Units per round: its shards and its aggregate.
	pub fn per_round(&self) -> u32 {
		self.shards.saturating_add(1)
	}

	/// Units of the whole job.
	pub fn units(&self) -> u32 {
		self.rounds.saturating_mul(self.per_round())
	}

	/// The index of shard `shard` of round `round`.
	pub fn shard_index(&self, round: u32, shard: u32) -> UnitIndex {
		round.saturating_mul(self.per_round()).saturating_add(shard)
	}

	/// The index of round `round`'s aggregate.
	pub fn aggregate_index(&self, round: u32) -> UnitIndex {
		self.shard_index(round, self.shards)
	}

	/// What unit `index` is; `None` past the job's units.
	pub fn unit(&self, index: UnitIndex) -> Option<RoundUnit> {
		if index >= self.units() {
			return None;
		}
		let per_round = self.per_round();
		let (round, position) = (index / per_round, index % per_round);
		Some(if position == self.shards {
			RoundUnit::Aggregate { round }
		} else {
			RoundUnit::Shard { round, shard: position }
		})
	}
}

/// Everything a submitter states about a training job.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct JobSpec<Balance> {
	/// Model architecture and configuration.
	pub model: ModelArch,
	/// Initial weights; `None` initialises from `hyper.seed` with the Philox stream.
	pub initial_weights: Option<ContentRef>,
	/// State root of the model the job starts from (its weights and zeroed optimizer
	/// state: `touchstone_kernels::job::trace::state_root`). The first step range and
	/// every data shard start from it; a dispute over their first step is judged against
	/// it. A solver checks it against the initial weights before it accepts a unit.
	pub initial_state_root: ContentHash,
	/// The training data.
	pub dataset: DatasetRef,
	/// Hyper-parameters.
	pub hyper: HyperParams,
	/// How the job is cut into work units.
	pub decomposition: Decomposition,
	/// How proofs are checked.
	pub verification: VerificationMode,
	/// What the solver's hardware must offer.
	pub requirements: HardwareRequirements,
	/// Paid to the solver for each finalized unit. At least the runtime's
	/// `MinPricePerUnit`; only solvers whose own minimum price it meets are offered it.
	pub price_per_unit: Balance,
	/// The most the submitter will pay; held in escrow at submission. Must cover
	/// `price_per_unit` times the number of units.
	pub budget: Balance,
	/// Blocks a solver may go without progress (acceptance, checkpoint or proof) before
	/// its unit returns to the pool.
	pub unit_timeout: u32,
	/// Blocks a unit may wait in the pool without a solver taking it. A unit nobody
	/// takes in time expires: its price is refunded, and for a step range every later
	/// range fails with it. At most the runtime's `MaxPoolWait`.
	pub pool_timeout: u32,
}

/// Which part of the job a unit covers.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum UnitScope {
	/// Steps `first_step .. first_step + steps` of the single training run.
	Steps {
		/// First step (global index).
		first_step: u32,
		/// Number of steps.
		steps: u32,
	},
	/// A data shard trained for the job's full step count.
	Shard {
		/// First sample of the shard.
		first_sample: u32,
		/// Samples in the shard.
		samples: u32,
	},
	/// A shard of one round of a rounds job: steps `round × local_steps` to
	/// `(round + 1) × local_steps` on the shard, from the round's global state.
	RoundShard {
		/// The round.
		round: u32,
		/// First sample of the shard.
		first_sample: u32,
		/// Samples in the shard.
		samples: u32,
	},
	/// The aggregate of one round of a rounds job: the weighted average of the round's
	/// proven shard end states, and the outer step. It trains no steps.
	Aggregate {
		/// The round.
		round: u32,
	},
}

impl UnitScope {
	/// The samples a unit trains on, `(first_sample, samples)`, in a training set of
	/// `dataset_samples`: its shard's, or the whole set for a step range. `None` for an
	/// aggregate, which reads no data.
	pub fn data(&self, dataset_samples: u32) -> Option<(u32, u32)> {
		match *self {
			UnitScope::Steps { .. } => Some((0, dataset_samples)),
			UnitScope::Shard { first_sample, samples } | UnitScope::RoundShard { first_sample, samples, .. } =>
				Some((first_sample, samples)),
			UnitScope::Aggregate { .. } => None,
		}
	}
}

/// The state machine of a work unit.
///
/// `Waiting → Pending → Assigned → Proven → (Verifying | Challenged) → Finalized | Failed`,
/// with `Reassigned` when a solver times out and `Cancelled` when the submitter cancels
/// before the unit started.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum UnitState {
	/// Waits for the previous step range to be proven.
	Waiting,
	/// In the pool: the scheduler may assign it and eligible solvers may claim it.
	Pending,
	/// Assigned to a solver.
	Assigned,
	/// A learning proof is committed; the challenge window runs.
	Proven,
	/// Verifiers are re-executing samples of the proof.
	Verifying,
	/// A dispute over the proof is open.
	Challenged,
	/// Survived its windows and was paid. Final.
	Finalized,
	/// Failed for good; its price was refunded. Final.
	Failed,
	/// Timed out; back in the pool, resuming from its last committed checkpoint.
	Reassigned,
	/// Cancelled by the submitter before it started; its price was refunded. Final.
	Cancelled,
}

impl UnitState {
	/// Whether the unit has reached a state it never leaves.
	pub fn is_final(self) -> bool {
		matches!(self, UnitState::Finalized | UnitState::Failed | UnitState::Cancelled)
	}

	/// Whether the unit sits in the pool, ready for assignment or a claim.
	pub fn is_claimable(self) -> bool {
		matches!(self, UnitState::Pending | UnitState::Reassigned)
	}
}

/// A checkpoint a solver committed on its way through a unit.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct Checkpoint {
	/// Global step after which the checkpoint was taken.
	pub step: u32,
	/// Hash of the checkpoint file (safetensors), which also fixes the state hash.
	pub hash: ContentHash,
}

/// Metrics a solver reports with its proof.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug, Default,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct TrainingMetrics {
	/// Mean training loss over the unit's last checkpoint interval.
	pub loss: FixedU64,
	/// Accuracy of the final model on the unit's data.
	pub accuracy: Perbill,
}

/// The learning-proof commitment for one unit.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct LearningProof {
	/// The unit's segment root: the Merkle root over its boundary leaves, one per
	/// segment of the job's checkpoint grid, in order
	/// (`touchstone_kernels::referee::boundary`): each commits the state root at the
	/// segment's end and the chained record of its losses. Step-level traces are
	/// produced on demand, in a dispute, for one segment.
	///
	/// An aggregate unit of a rounds job has no segments: its `trace_root` is the root of
	/// the next outer momentum (Nesterov), or all zeros for plain averaging; its `steps`
	/// are zero, its start is the round's global state and its final state the next one.
	pub trace_root: ContentHash,
	/// Number of steps the trace covers; must equal the unit's step count.
	pub steps: u32,
	/// State root of the model the unit starts from: the unit's anchor. It must equal
	/// the job's `initial_state_root` (first step range, data shards) or the previous
	/// step range's proven `final_state_root`.
	pub start_state_root: ContentHash,
	/// State root of the model after the unit's last step, proven against `trace_root`
	/// (its last boundary) when the proof is committed. The next step range starts from it. It also names the
	/// final model (weights and optimizer state): a worker fetches the model by this root
	/// and checks what it fetched against it, so the model a proof names is always the
	/// one it proved.
	pub final_state_root: ContentHash,
	/// Metrics of the final model.
	pub metrics: TrainingMetrics,
}

/// A work unit and where it stands.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct WorkUnit<AccountId, BlockNumber> {
	/// What part of the job it covers.
	pub scope: UnitScope,
	/// Where it is in its state machine.
	pub state: UnitState,
	/// The solver it is assigned to, while `Assigned` and after.
	pub solver: Option<AccountId>,
	/// Whether the assigned solver accepted it.
	pub accepted: bool,
	/// While `Assigned`, the last block the solver may make progress (or accept) in; while
	/// in the pool, the last block it may wait there before it expires.
	pub deadline: Option<BlockNumber>,
	/// The last block the unit may wait in the pool, set when it enters the pool and kept
	/// while offers to solvers are declined or lapse.
	pub pool_deadline: Option<BlockNumber>,
	/// The last solver that declined the unit or let an offer of it lapse; the scheduler
	/// offers the unit to others first.
	pub passed_by: Option<AccountId>,
	/// State root of the model the unit starts from, once known: the job's initial state
	/// root, or the previous step range's proven final state root. `None` while the unit
	/// waits for that range.
	pub start_state_root: Option<ContentHash>,
	/// The latest checkpoint committed; a reassigned unit resumes from it.
	pub last_checkpoint: Option<Checkpoint>,
	/// The committed proof, once `Proven`.
	pub proof: Option<LearningProof>,
	/// The block the proof was committed in.
	pub proven_at: Option<BlockNumber>,
	/// How many solvers took the unit (accepted an offer or claimed it). Declined and
	/// lapsed offers do not count.
	pub attempts: u32,
}

/// The state of a job.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum JobStatus {
	/// Units are being trained.
	Active,
	/// The submitter cancelled; units already started run to the end, and the result of
	/// those is recorded once every unit is final. The job stays `Cancelled`.
	Cancelled,
	/// Every unit is final and the result is recorded.
	Completed,
}

/// The aggregated result of a completed job.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct JobResult {
	/// The proven final state, which also names the final model: the last step range's
	/// `final_state_root`, or for data shards the BLAKE2b-256 of the finalized shards' final
	/// state roots in unit order (each shard's model is fetched by its unit's root). Each
	/// was proven against its unit's trace, which survived its challenge window, so a
	/// model whose state root (`touchstone_kernels::job::trace::state_root`) matches is
	/// the trained one.
	pub state_root: ContentHash,
	/// Metrics, aggregated by the job's rule. Reported by the solvers; the chain does not
	/// check them.
	pub metrics: TrainingMetrics,
	/// Units that finalized.
	pub units_finalized: u32,
	/// Units that failed or were cancelled.
	pub units_failed: u32,
}

/// A job and its bookkeeping.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct Job<AccountId, Balance, BlockNumber> {
	/// Who submitted and pays.
	pub owner: AccountId,
	/// The submitted spec.
	pub spec: JobSpec<Balance>,
	/// Where the job stands.
	pub status: JobStatus,
	/// Number of work units.
	pub units: u32,
	/// Units in a final state.
	pub units_final: u32,
	/// Escrow still held for this job.
	pub escrow: Balance,
	/// The storage deposit held from the owner; returned when the job's records are
	/// removed.
	pub deposit: Balance,
	/// Block of submission.
	pub submitted_at: BlockNumber,
	/// The result, once every unit is final.
	pub result: Option<JobResult>,
	/// The block from which the job's records may be removed, once every unit is final.
	pub removable_at: Option<BlockNumber>,
	/// The profiled thresholds of a tolerance-mode job; unused in exact mode.
	pub tolerance: ToleranceProfile,
}

impl<AccountId, Balance, BlockNumber> Job<AccountId, Balance, BlockNumber> {
	/// Whether every unit of the job is final.
	pub fn is_finished(&self) -> bool {
		self.units_final >= self.units
	}
}

/// Why a bond was slashed: each names the proven misbehaviour.
#[derive(
	Encode, Decode, DecodeWithMemTracking, MaxEncodedLen, TypeInfo, Clone, Copy, PartialEq, Eq,
	Debug,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum SlashReason {
	/// A solver's learning proof was shown wrong by the referee.
	InvalidProof,
	/// A verifier attested against what re-execution shows.
	FalseAttestation,
	/// A challenger's dispute failed.
	FailedChallenge,
	/// A verifier committed an attestation and did not reveal it in time.
	MissedReveal,
	/// A solver did not reveal its forced-error secret in time.
	MissedSecretReveal,
	/// A solver let a unit time out after the chain had recorded the randomness that told
	/// it whether the unit was forced: it forfeits the unit's collateral.
	AbandonedAfterDesignation,
}

/// The layouts earlier runtimes stored, for the pallets' storage migrations.
pub mod previous {
	use super::*;

	/// A learning proof as runtimes before spec version 119 stored it: with a
	/// `final_model_hash` of its own, which nothing proved. The final model is now named by
	/// its final state root.
	#[derive(Encode, Decode, Clone, Copy, PartialEq, Eq, Debug)]
	pub struct LearningProofV0 {
		/// As [`LearningProof::trace_root`].
		pub trace_root: ContentHash,
		/// As [`LearningProof::steps`].
		pub steps: u32,
		/// As [`LearningProof::start_state_root`].
		pub start_state_root: ContentHash,
		/// As [`LearningProof::final_state_root`].
		pub final_state_root: ContentHash,
		/// Dropped: the hash of a model file the solver named.
		pub final_model_hash: ContentHash,
		/// As [`LearningProof::metrics`].
		pub metrics: TrainingMetrics,
	}

	impl From<LearningProofV0> for LearningProof {
		fn from(old: LearningProofV0) -> Self {
			let LearningProofV0 { trace_root, steps, start_state_root, final_state_root, final_model_hash: _, metrics } = old;
			LearningProof { trace_root, steps, start_state_root, final_state_root, metrics }
		}
	}
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
	use super::{Distance, FixedU64};

	/// A median takes each component on its own; an even count's is the mean of its two
	/// middle values, and no sum overflows.
	#[test]
	fn the_median_of_an_even_count_is_the_mean_of_its_middle_values() {
		let d = |l2: u64, linf: u64, cosine: u64| Distance {
			l2: FixedU64::from_inner(l2),
			linf: FixedU64::from_inner(linf),
			cosine: FixedU64::from_inner(cosine),
		};
		assert_eq!(Distance::median(&[]), None);
		assert_eq!(Distance::median(&[d(1, 9, 5), d(3, 1, 5), d(2, 4, 7)]), Some(d(2, 4, 5)));
		assert_eq!(Distance::median(&[d(1, 9, 5), d(4, 1, 6)]), Some(d(2, 5, 5)));
		assert_eq!(Distance::median(&[d(u64::MAX, 1, 1), d(u64::MAX, 1, 1)]), Some(d(u64::MAX, 1, 1)));
	}

	/// A step's multiply-adds count every dense product and every valid convolution's, forward
	/// and backward, for the whole batch; re-execution blocks round down.
	#[test]
	fn a_steps_work_counts_its_products_and_sizes_blocks_of_re_execution() {
		use super::{reexecution_blocks, step_multiply_adds, Activation, HyperParams, ModelArch, Optimizer};
		use polkadot_sdk::sp_runtime::BoundedVec;
		let hyper = |batch_size| HyperParams {
			steps: 10,
			batch_size,
			learning_rate: FixedU64::from_rational(1, 10),
			optimizer: Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) },
			grad_clip_norm: None,
			seed: 1,
			checkpoint_interval: 5,
		};
		let mlp = ModelArch::Mlp {
			inputs: 784,
			hidden: BoundedVec::truncate_from(vec![1024, 1024]),
			classes: 10,
			activation: Activation::Relu,
		};
		assert_eq!(step_multiply_adds(&mlp, &hyper(128)), 128 * 3 * (784 * 1024 + 1024 * 1024 + 1024 * 10));
		let cnn = ModelArch::Cnn {
			channels: 1,
			height: 28,
			width: 28,
			conv_channels: BoundedVec::truncate_from(vec![8, 16]),
			kernel_size: 3,
			hidden: BoundedVec::truncate_from(vec![64]),
			classes: 10,
			activation: Activation::Relu,
		};
		let convolutions = 26 * 26 * 8 * 9 + 24 * 24 * 16 * 9 * 8;
		let dense = 16 * 24 * 24 * 64 + 64 * 10;
		assert_eq!(step_multiply_adds(&cnn, &hyper(32)), 32 * 3 * (convolutions + dense));
		let transformer = ModelArch::Transformer {
			vocab: 84,
			context: 64,
			layers: 4,
			heads: 4,
			width: 128,
			mlp_ratio: 4,
			norm: super::Normalization::LayerNorm,
			tied_embeddings: true,
		};
		// Per position: q, k, v, the output and the 4× MLP, 12·128² per block; the scores
		// and the weighted values, 2·64·128 per block; the head, 128·84.
		let per_window = 64 * (4 * (12 * 128 * 128 + 2 * 64 * 128) + 128 * 84);
		assert_eq!(step_multiply_adds(&transformer, &hyper(32)), 32 * 3 * per_window);
		assert_eq!(reexecution_blocks(1_000, 50, 20_000), 2);
		assert_eq!(reexecution_blocks(1_000, 50, 30_000), 1);
		assert_eq!(reexecution_blocks(u64::MAX, u32::MAX, 1), u32::MAX);
		assert_eq!(reexecution_blocks(1_000, 50, 0), 0);
	}
}

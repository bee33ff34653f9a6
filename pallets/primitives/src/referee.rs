//! The chain's view of the kernels' referee: the job's model and hyper-parameters as the
//! kernels take them, and the `RefereeApi` runtime API that runs the referee inside the
//! runtime's wasm, where a disputes pallet will call it.

use crate::{Activation, DatasetRef, HyperParams, ModelArch, Normalization, Optimizer, OuterOptimizer, UnitScope};
use touchstone_kernels::{
	job::model::{fixed_to_f32, transformer::TransformerConfig, ModelConfig, OptimizerConfig, TrainConfig},
	ops::norm::Norm,
	ops::aggregate::Outer,
	Activation as KernelActivation,
};

pub use touchstone_kernels::proof::bisection::{reveal, Foul, Game, Reveal};
pub use touchstone_kernels::proof::graph::Graph;
pub use touchstone_kernels::proof::hash::Digest;
pub use touchstone_kernels::proof::merkle::{index_segment_leaf, MerkleProof, MerkleTree, MultiProof, SEGMENT};
pub use touchstone_kernels::referee::{
	bind_operator, bind_step, boundary_before, level_kind, level_leaves, open_state_chunk, request_chunks, state_chunks, BindingError,
	DataCommitment, Dispute, JobError, Level, Openings, PieceCost, Position, RefereeError, StateChunk, StateOpening, StepBinding,
	TraceCommitment, Verdict, CHUNKS_PER_REQUEST,
};
pub use touchstone_kernels::proof::merkle::TreeKind;
pub use touchstone_kernels::referee::boundary::{
	bind_segment, segment_start, segment_trace_commitment, unit_final_state_root, BoundaryOpening, SegmentBinding, UnitCommitment,
};
pub use touchstone_kernels::proof::state_tree::{self, chunk_range, locate_chunk, CHUNK_WORDS};
pub use touchstone_kernels::referee::aggregate::{
	judge_aggregate_chunk, AggregateDispute, AggregateError, AggregateOpenings, ChunkOpening, MAX_AGGREGATE_SHARDS,
};
use touchstone_kernels::ops::aggregate::{weights, Weighting};

/// The most work the chain lets the referee do to judge one piece of any job it accepts:
/// words opened, Merkle hashes checked and operators rebuilt
/// (`touchstone_kernels::referee::worst_piece`). Any piece's words fit (a contraction's
/// K-chunk reads at most 66,560, a loss piece at `MAX_CLASSES` 34,912); the hashes allow
/// a K-chunk whose inputs lie in trees of up to 2²⁴ leaves (a state, a dataset or an
/// operator's pieces of up to 2²⁴ segments of 32 words), and a job with deeper trees is
/// refused (`DisputeTooCostly`). Its openings (about 1.9 MB) fit the runtime's
/// `MaxOpeningsLen` of 2 MiB, at which one resolution is charged under 5 % of a block (a
/// runtime test checks both).
///
/// The operators allow a transformer of thirteen blocks (a twelve-block step has 907); the
/// chain charges a transformer's validation at submission by its operators
/// ([`step_operator_bound`]). GPT-2 small's shape fits: a matmul's K-chunk opens at most
/// 64 segments of each operand (32 runs of 32 words), so its pieces' trees of 2²⁶ leaves
/// cost hundreds of hashes; its worst piece is an embedding gradient's partial.
pub const MAX_PIECE_COST: PieceCost = PieceCost { words: 70_000, hashes: 52_000, operators: 1_024 };

/// An upper bound on the operators of one training step of a transformer `model`, from
/// its shape alone (each block adds 74 with LayerNorm, fewer with RMSNorm; the
/// embeddings, the final norm, the head, the loss and the optimizer's tail fewer than 40):
/// what the chain charges the kernels' validation of a transformer job by, before it
/// builds the step. Zero for an MLP or a CNN, whose few operators the benchmarked weight
/// of a submission covers.
pub fn step_operator_bound(model: &ModelArch) -> u64 {
	match model {
		ModelArch::Transformer { layers, .. } => u64::from(*layers).saturating_mul(80).saturating_add(40),
		ModelArch::Mlp { .. } | ModelArch::Cnn { .. } => 0,
	}
}

/// What rebuilding one operator of a transformer's step graph costs in the runtime's wasm,
/// in picoseconds: every dispute call that judges or binds against the graph
/// (`bind_step`, `bind_operator`, `resolve`, `request_chunk`, `provide_chunk`) rebuilds it,
/// and their benchmarks, taken on an MLP of a dozen operators, do not cover a
/// transformer's hundreds. Measured by `scripts/bench-referee.sh` (its `graph` section:
/// the slope of the referee's time over one to thirteen blocks), with a margin.
pub const GRAPH_PICOSECONDS_PER_OPERATOR: u64 = 2_000_000;

/// The picoseconds of wasm a dispute call spends rebuilding `model`'s step graph beyond its
/// benchmarked weight: [`GRAPH_PICOSECONDS_PER_OPERATOR`] for each operator of
/// [`step_operator_bound`], at most [`MAX_PIECE_COST`]'s operators (no accepted job has
/// more). Zero for an MLP or a CNN.
pub fn graph_rebuild_picoseconds(model: &ModelArch) -> u64 {
	step_operator_bound(model).min(MAX_PIECE_COST.operators).saturating_mul(GRAPH_PICOSECONDS_PER_OPERATOR)
}

/// [`graph_rebuild_picoseconds`] of the largest graph any accepted job has: what a dispute
/// call charges before it knows the job.
pub const MAX_GRAPH_REBUILD_PICOSECONDS: u64 = MAX_PIECE_COST.operators * GRAPH_PICOSECONDS_PER_OPERATOR;

/// Why a job's shape cannot be accepted: the referee could not judge its disputes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
	/// The model and hyper-parameters do not describe a step the kernels can build.
	InvalidShape,
	/// More classes than the kernels' `MAX_CLASSES` (1,024).
	TooManyClasses,
	/// The training set, or a unit's share of it, does not fit the model or a batch.
	InvalidData,
	/// Judging the job's worst piece would cost more than [`MAX_PIECE_COST`].
	DisputeTooCostly,
}

/// Runs the validation the trainer and the referee run on a job, for every unit scope,
/// and checks the referee's worst piece against [`MAX_PIECE_COST`]. Returns that worst
/// piece. The chain calls this at submission, so every accepted job is one whose
/// disputes the referee can judge.
pub fn check_judgeable(
	model: &ModelArch,
	hyper: &HyperParams,
	dataset: &DatasetRef,
	scopes: &[UnitScope],
) -> Result<PieceCost, ShapeError> {
	let graph = touchstone_kernels::referee::validate_job(&kernel_model(model), &kernel_train(hyper))
		.map_err(|error| match error {
			JobError::TooManyClasses => ShapeError::TooManyClasses,
			JobError::InvalidShape => ShapeError::InvalidShape,
			JobError::InvalidData => ShapeError::InvalidData,
		})?;
	let mut words = 0;
	for scope in scopes {
		// An aggregate reads no data.
		let Some((first_sample, shard_samples)) = scope.data(dataset.samples) else { continue };
		let data = DataCommitment { root: dataset.root.0, samples: dataset.samples, first_sample, shard_samples };
		words = touchstone_kernels::referee::validate_data(&graph, &data).map_err(|_| ShapeError::InvalidData)?;
	}
	let segments = (words as u64).div_ceil(touchstone_kernels::proof::merkle::SEGMENT as u64);
	let worst = touchstone_kernels::referee::worst_piece(&graph, hyper.steps, segments)
		.map_err(|_| ShapeError::InvalidShape)?;
	let fits = worst.words <= MAX_PIECE_COST.words &&
		worst.hashes <= MAX_PIECE_COST.hashes &&
		worst.operators <= MAX_PIECE_COST.operators;
	if fits { Ok(worst) } else { Err(ShapeError::DisputeTooCostly) }
}

/// A job's model architecture as the kernels take it.
pub fn kernel_model(model: &ModelArch) -> ModelConfig {
	let activation = |activation: &Activation| match activation {
		Activation::Relu => KernelActivation::Relu,
		Activation::Tanh => KernelActivation::Tanh,
		Activation::Gelu => KernelActivation::GeluTanh,
	};
	match model {
		ModelArch::Mlp { inputs, hidden, classes, activation: act } => ModelConfig::Mlp {
			inputs: *inputs,
			hidden: hidden.to_vec(),
			classes: *classes,
			activation: activation(act),
		},
		ModelArch::Cnn {
			channels,
			height,
			width,
			conv_channels,
			kernel_size,
			hidden,
			classes,
			activation: act,
		} => ModelConfig::Cnn {
			channels: *channels,
			height: *height,
			width: *width,
			conv_channels: conv_channels.to_vec(),
			kernel_size: *kernel_size,
			hidden: hidden.to_vec(),
			classes: *classes,
			activation: activation(act),
		},
		ModelArch::Transformer { vocab, context, layers, heads, width, mlp_ratio, norm, tied_embeddings } => {
			ModelConfig::Transformer(TransformerConfig {
				vocab: *vocab,
				context: *context,
				layers: *layers,
				heads: *heads,
				width: *width,
				mlp_ratio: *mlp_ratio,
				norm: match norm {
					Normalization::LayerNorm => Norm::Layer,
					Normalization::RmsNorm => Norm::Rms,
				},
				tied_embeddings: *tied_embeddings,
			})
		},
	}
}

/// Whether `model`, if a transformer, is within the kernels' bounds on every dimension
/// (`TransformerConfig::validated`, the check the trainer makes); true for any other
/// model, whose rules [`check_judgeable`] covers.
pub fn transformer_within_bounds(model: &ModelArch) -> bool {
	match kernel_model(model) {
		ModelConfig::Transformer(config) => config.validated().is_ok(),
		_ => true,
	}
}

/// A job's hyper-parameters as the kernels take them: fixed-point values pass as their
/// inner `u64` (value × 10⁹), which the kernels round to `f32` once, identically
/// everywhere.
pub fn kernel_train(hyper: &HyperParams) -> TrainConfig {
	TrainConfig {
		steps: hyper.steps,
		batch_size: hyper.batch_size,
		learning_rate: hyper.learning_rate.into_inner(),
		optimizer: match hyper.optimizer {
			Optimizer::Sgd { momentum } => OptimizerConfig::Sgd { momentum: momentum.into_inner() },
			Optimizer::AdamW { beta1, beta2, epsilon, weight_decay } => OptimizerConfig::AdamW {
				beta1: beta1.into_inner(),
				beta2: beta2.into_inner(),
				epsilon: epsilon.into_inner(),
				weight_decay: weight_decay.into_inner(),
			},
		},
		grad_clip_norm: hyper.grad_clip_norm.map(|norm| norm.into_inner()),
		seed: hyper.seed,
		checkpoint_interval: hyper.checkpoint_interval,
	}
}

/// A rounds job's outer step as the kernels take it; the learning rate and momentum
/// round to `f32` once, as the hyper-parameters do.
pub fn kernel_outer(outer: &OuterOptimizer) -> Outer {
	match *outer {
		OuterOptimizer::Average => Outer::Average,
		OuterOptimizer::Nesterov { learning_rate, momentum } => Outer::Nesterov {
			learning_rate: fixed_to_f32(learning_rate.into_inner()),
			momentum: fixed_to_f32(momentum.into_inner()),
		},
	}
}

/// Whether a rounds job's outer step is one the kernels take, with a learning rate that
/// moves the global state: a positive learning rate and a momentum below one.
pub fn outer_is_valid(outer: &OuterOptimizer) -> bool {
	let moves = match outer {
		OuterOptimizer::Average => true,
		OuterOptimizer::Nesterov { learning_rate, .. } => learning_rate.into_inner() > 0,
	};
	moves && kernel_outer(outer).check().is_ok()
}

/// Judges one chunk of a round's aggregate against the chain's records of it
/// (`touchstone_kernels::referee::aggregate`): `Ok(())` upholds the committed chunk,
/// `Err(WrongAggregate)` shows it wrong, and any other error refuses the openings (or the
/// chunk) without a verdict.
pub fn judge_aggregate<AccountId, BlockNumber, Balance>(
	claim: &crate::traits::ProvenAggregate<AccountId, BlockNumber, Balance>,
	chunk: u32,
	openings: &AggregateOpenings,
) -> Result<(), AggregateError> {
	// The chain accepts no job whose graph the kernels cannot build.
	let graph = job_graph(&claim.model, &claim.hyper).ok_or(AggregateError::Kernel(touchstone_kernels::error::KernelError::ShapeOverflow))?;
	let chunk_count = state_tree::state_chunk_count(graph.state_lens());
	let weighting = match claim.aggregation {
		crate::Aggregation::WeightedBySamples => Weighting::BySamples,
		crate::Aggregation::Uniform => Weighting::Uniform,
	};
	let samples: alloc::vec::Vec<u64> = claim.shards.iter().map(|(_, samples)| u64::from(*samples)).collect();
	let weights = weights(weighting, &samples).map_err(AggregateError::Kernel)?;
	let dispute = AggregateDispute {
		outer: kernel_outer(&claim.outer),
		weights,
		shard_roots: claim.shards.iter().map(|(root, _)| root.0).collect(),
		global_root: claim.global_root.0,
		momentum_root: claim.momentum_root.map(|root| root.0),
		claimed_root: claim.claimed_root.0,
		claimed_momentum_root: claim.claimed_momentum_root.map(|root| root.0),
		chunk_count: u32::try_from(chunk_count).map_err(|_| AggregateError::ChunkOutOfRange)?,
		chunk,
	};
	judge_aggregate_chunk(&dispute, openings)
}

/// The operator graph of one training step of a job with `model` and `hyper`: what
/// fixes the shape of the operator and piece levels of a dispute. `None` for a shape the
/// kernels cannot build (the chain never accepts one).
pub fn job_graph(model: &ModelArch, hyper: &HyperParams) -> Option<Graph> {
	touchstone_kernels::referee::validate_job(&kernel_model(model), &kernel_train(hyper)).ok()
}

/// Judges one disputed piece of a training step of a job with `model` and `hyper`.
/// `dispute` comes from the chain's records (the claimant's learning proof, the job's
/// data, the position the bisection ended on, the roots it fixed); `openings` from a
/// party. `Ok` upholds the claimed output, `Err(WrongClaimedOutput)` rejects it,
/// `Err(NonFiniteOutput)` says the step diverges, and any other error means the
/// openings are invalid.
pub fn judge(model: &ModelArch, hyper: &HyperParams, dispute: &Dispute, openings: &Openings) -> Result<Verdict, RefereeError> {
	touchstone_kernels::referee::judge(&kernel_model(model), &kernel_train(hyper), dispute, openings)
}

polkadot_sdk::sp_api::decl_runtime_apis! {
	/// The on-chain referee: recomputes one piece of a training step with the kernels'
	/// reference code, inside the runtime.
	pub trait RefereeApi {
		/// See [`judge`].
		fn judge(model: ModelArch, hyper: HyperParams, dispute: Dispute, openings: Openings) -> Result<Verdict, RefereeError>;
	}
}


/// A unit's segment-level commitment that is well formed at its end only: one filler
/// boundary leaf (drawn from `salt`) per segment of `steps` steps from `first_step` on a
/// grid of `interval`, the last of which holds `final_state_root`. Returns its tree (whose
/// root is the segment root) and the opening of its last boundary, which proves
/// `final_state_root` against it. For tests and benchmarks of the chain's bookkeeping,
/// which never judge the training inside a unit; a real commitment comes from the
/// kernels' trainer.
pub fn filler_segments(
	first_step: u32,
	steps: u32,
	interval: u32,
	final_state_root: Digest,
	salt: u8,
) -> Option<(MerkleTree, BoundaryOpening)> {
	use touchstone_kernels::proof::chain::boundary_leaf;
	let segments = crate::Segments::new(first_step, steps, interval);
	let last = segments.count().checked_sub(1)?;
	let record = [salt; 32];
	let mut leaves = alloc::vec::Vec::with_capacity(segments.count() as usize);
	for index in 0..segments.count() {
		let end = segments.range(index)?.end;
		let state_root = if index == last { final_state_root } else { [salt ^ 0x5a; 32] };
		leaves.push(boundary_leaf(end, &state_root, &record));
	}
	let tree = MerkleTree::new(leaves).ok()?;
	let proof = tree.proof(last as usize).ok()?;
	Some((tree, BoundaryOpening { state_root: final_state_root, record, proof }))
}

/// A learning proof over [`filler_segments`]' commitment, for tests and benchmarks of the
/// chain's bookkeeping: `steps` steps from `first_step` on a grid of `interval`, from
/// `start_state_root` and ending at `final_state_root`, with fixed metrics. Returns the
/// proof, the opening of its final state, and its segment-level tree.
pub fn filler_proof(
	first_step: u32,
	steps: u32,
	interval: u32,
	start_state_root: Digest,
	final_state_root: Digest,
	salt: u8,
) -> Option<(crate::LearningProof, BoundaryOpening, MerkleTree)> {
	use polkadot_sdk::sp_runtime::{FixedU64, Perbill};
	let (tree, opening) = filler_segments(first_step, steps, interval, final_state_root, salt)?;
	let proof = crate::LearningProof {
		trace_root: tree.root().into(),
		steps,
		start_state_root: start_state_root.into(),
		final_state_root: final_state_root.into(),
		metrics: crate::TrainingMetrics { loss: FixedU64::from_rational(1, 2), accuracy: Perbill::from_percent(50) },
	};
	Some((proof, opening, tree))
}

/// A small job the chain accepts, for tests and benchmarks of the chain's bookkeeping: a
/// 4→6→3 tanh MLP over 24 samples, `units` step ranges of `steps_per_unit` steps each,
/// checkpointed every `checkpoint_interval` steps, from `initial_state_root`. Its price
/// and budget are zero: the caller sets them.
pub fn bookkeeping_spec<Balance: Default>(
	steps_per_unit: u32,
	units: u32,
	checkpoint_interval: u32,
	initial_state_root: Digest,
) -> crate::JobSpec<Balance> {
	use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64};
	crate::JobSpec {
		model: ModelArch::Mlp {
			inputs: 4,
			hidden: BoundedVec::truncate_from(alloc::vec![6]),
			classes: 3,
			activation: Activation::Tanh,
		},
		initial_weights: None,
		initial_state_root: initial_state_root.into(),
		dataset: DatasetRef {
			content: crate::ContentRef { hash: [1; 32].into(), location: BoundedVec::truncate_from(b"bench".to_vec()) },
			samples: 24,
			root: [4; 32].into(),
		},
		hyper: HyperParams {
			steps: steps_per_unit.saturating_mul(units),
			batch_size: 4,
			learning_rate: FixedU64::from_rational(1, 10),
			optimizer: Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) },
			grad_clip_norm: None,
			seed: 1,
			checkpoint_interval,
		},
		decomposition: crate::Decomposition::StepRanges { steps_per_unit },
		verification: crate::VerificationMode::Exact,
		requirements: crate::HardwareRequirements {
			device: None,
			min_memory_mib: 0,
			min_throughput_gflops: 0,
			min_bandwidth_mbps: 0,
			region: None,
		},
		price_per_unit: Default::default(),
		budget: Default::default(),
		unit_timeout: 20,
		pool_timeout: 20,
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64};

	/// A pre-norm transformer with LayerNorm and tied embeddings, a 4× MLP.
	fn transformer(vocab: u32, context: u32, layers: u32, heads: u32, width: u32) -> ModelArch {
		ModelArch::Transformer {
			vocab,
			context,
			layers,
			heads,
			width,
			mlp_ratio: 4,
			norm: Normalization::LayerNorm,
			tied_embeddings: true,
		}
	}

	/// `steps` steps of AdamW with clipping at batch `batch`.
	fn adamw(steps: u32, batch_size: u32) -> HyperParams {
		HyperParams {
			steps,
			batch_size,
			learning_rate: FixedU64::from_rational(1, 1_000),
			optimizer: Optimizer::AdamW {
				beta1: FixedU64::from_rational(9, 10),
				beta2: FixedU64::from_rational(95, 100),
				epsilon: FixedU64::from_rational(1, 100_000_000),
				weight_decay: FixedU64::from_rational(1, 10),
			},
			grad_clip_norm: Some(FixedU64::from_rational(1, 1)),
			seed: 1,
			checkpoint_interval: 100,
		}
	}

	/// A token stream of `windows` windows, as a job names it.
	fn stream(windows: u32) -> DatasetRef {
		DatasetRef {
			content: crate::ContentRef { hash: [1; 32].into(), location: BoundedVec::truncate_from(b"tokens".to_vec()) },
			samples: windows,
			root: [2; 32].into(),
		}
	}

	/// The chain judges the character model on the Shakespeare stream (71,210
	/// windows of 64) and GPT-2 small's shape, refuses fourteen blocks as too many
	/// operators, and a transformer outside the kernels' bounds is no model at all.
	#[test]
	fn the_chain_judges_a_character_transformer_and_refuses_one_outside_the_bounds() {
		let character = transformer(84, 64, 4, 4, 128);
		// The operator bound holds for either norm, tied or not.
		for layers in [1, 4, 12, 48] {
			for norm in [Normalization::LayerNorm, Normalization::RmsNorm] {
				for tied_embeddings in [true, false] {
					let model = ModelArch::Transformer { vocab: 84, context: 64, layers, heads: 4, width: 128, mlp_ratio: 4, norm, tied_embeddings };
					let operators = job_graph(&model, &adamw(100, 4)).expect("a graph").nodes.len() as u64;
					assert!(operators <= step_operator_bound(&model), "{layers} blocks, {norm:?}, tied {tied_embeddings}: {operators} operators");
					// A dispute call's graph charge covers the real graph, within the most charged up front.
					let charged = graph_rebuild_picoseconds(&model);
					assert!(charged <= MAX_GRAPH_REBUILD_PICOSECONDS);
					assert!(operators > MAX_PIECE_COST.operators || charged >= operators * GRAPH_PICOSECONDS_PER_OPERATOR);
				}
			}
		}
		let scopes = [UnitScope::Steps { first_step: 0, steps: 2_000 }];
		let worst = check_judgeable(&character, &adamw(2_000, 12), &stream(71_210), &scopes).expect("judgeable");
		assert!(worst.words <= MAX_PIECE_COST.words && worst.hashes <= MAX_PIECE_COST.hashes);
		// Shards of the stream's windows, as a rounds job cuts them.
		let shards = [UnitScope::Shard { first_sample: 0, samples: 35_605 }, UnitScope::Shard { first_sample: 35_605, samples: 35_605 }];
		assert!(check_judgeable(&character, &adamw(2_000, 12), &stream(71_210), &shards).is_ok());
		let gpt2_small = transformer(50_257, 1_024, 12, 12, 768);
		// GPT-2 small at 8 sequences of 1,024: its matmuls' pieces lie in trees of 2²⁶
		// leaves, but a K-chunk opens at most 64 segments of each operand; the worst piece
		// is an embedding gradient's partial (a span's ids and a tile's run of `dy` each).
		let worst = check_judgeable(&gpt2_small, &adamw(1_000, 8), &stream(100_000), &scopes).expect("judgeable");
		assert!(worst.words <= MAX_PIECE_COST.words && worst.hashes <= MAX_PIECE_COST.hashes);
		assert!(worst.hashes < 2 * MAX_PIECE_COST.hashes / 3, "{worst:?}");
		assert!(transformer_within_bounds(&gpt2_small));
		// Thirteen blocks: 981 operators, within the bound; fourteen: 1,055, beyond it.
		assert!(check_judgeable(&transformer(84, 64, 13, 4, 128), &adamw(100, 4), &stream(1_000), &scopes).is_ok());
		let too_deep = check_judgeable(&transformer(84, 64, 14, 4, 128), &adamw(100, 4), &stream(1_000), &scopes);
		assert_eq!(too_deep, Err(ShapeError::DisputeTooCostly));
		let too_wide = transformer(84, 64, 1, 1, 512);
		assert!(!transformer_within_bounds(&too_wide), "a head 512 wide");
		assert_eq!(check_judgeable(&too_wide, &adamw(10, 4), &stream(100), &scopes), Err(ShapeError::InvalidShape));
		// A transformer trains with AdamW only: the kernels build no step for SGD.
		let mut sgd = adamw(10, 4);
		sgd.optimizer = Optimizer::Sgd { momentum: FixedU64::from_rational(9, 10) };
		assert_eq!(check_judgeable(&character, &sgd, &stream(100), &scopes), Err(ShapeError::InvalidShape));
	}
}

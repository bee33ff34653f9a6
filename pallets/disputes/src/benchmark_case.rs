//! Disputes over real traces, recorded for the benchmarks. They run in the runtime's wasm,
//! where no trainer runs, so the test `the_benchmark_cases_are_current` plays each dispute
//! with the kernels' trainer and checks its recording holds exactly what it recorded
//! (`TOUCHSTONE_WRITE_BENCHMARK_CASE=1` rewrites them).
//!
//! Two recordings, at the two ends of what the referee judges:
//! - [`Recording::KChunk`]: a digits-sized job (a 64→64→10 MLP, batch 32, 1,437 samples);
//!   the defender lied in the second K-chunk of the first layer's matmul, the densest
//!   arithmetic per opened byte (docs/performance.md). 16 KB of openings.
//! - [`Recording::LargestPiece`]: a job at the chain's bounds for its costliest kind of
//!   piece: a 1,000→1,000→1,024 MLP (`MAX_CLASSES` classes), batch 64, 4,096 samples; the
//!   defender lied in the second partial of the loss, which opens 64 rows of 1,024 logits,
//!   their labels and the first partial. About 142 KB of openings: the largest any piece of
//!   a real step opens (contraction chunks open at most about 31 KB, at any width).

use crate::Pair;
use codec::{Decode, Encode};
use touchstone_primitives::{
	referee::{BoundaryOpening, Digest, MerkleProof, Openings, SegmentBinding, StepBinding},
	HyperParams, LearningProof, ModelArch,
};

/// Everything the benchmarks of `bind_segment`, `bind_step`, `bind_operator` and
/// `resolve` need.
#[derive(Encode, Decode, Clone, Debug, PartialEq, Eq)]
pub struct BenchmarkCase {
	/// The job's model.
	pub model: ModelArch,
	/// Its hyper-parameters (one unit of `hyper.steps` steps).
	pub hyper: HyperParams,
	/// Samples in its training set.
	pub samples: u32,
	/// The training set's root.
	pub dataset_root: Digest,
	/// The state root the job starts from.
	pub initial_state_root: Digest,
	/// The defender's (dishonest) learning proof.
	pub proof: LearningProof,
	/// The opening of its final state (its last boundary).
	pub final_state: BoundaryOpening,
	/// The challenger's (honest) segment root.
	pub challenger_trace_root: Digest,
	/// The disputed segment.
	pub segment: u32,
	/// The state root it starts from.
	pub segment_start: Digest,
	/// Both sides' step-level trace roots of the segment.
	pub segment_traces: Pair<Digest>,
	/// The defender's binding of its segment trace.
	pub segment_binding: SegmentBinding,
	/// Where the game ended.
	pub step: u32,
	/// The disputed operator.
	pub operator: u32,
	/// The disputed piece.
	pub piece: u32,
	/// Both sides' operator roots of the step.
	pub operator_roots: Pair<Digest>,
	/// Both sides' piece roots of the operator.
	pub piece_roots: Pair<Digest>,
	/// The defender's binding of its operator root.
	pub step_binding: StepBinding,
	/// The defender's operator leaf proof of its piece root.
	pub operator_proof: MerkleProof,
	/// The defender's openings of its claimed piece.
	pub openings: Openings,
}

/// Which recorded dispute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
	/// A K-chunk of a digits-sized step.
	KChunk,
	/// A loss partial of a job with `MAX_CLASSES` classes: the largest piece.
	LargestPiece,
}

impl Recording {
	/// The recording's encoded case.
	pub fn encoded(self) -> &'static [u8] {
		match self {
			Self::KChunk => include_bytes!("benchmark_case.scale"),
			Self::LargestPiece => include_bytes!("benchmark_case_largest.scale"),
		}
	}

	/// Its file, relative to this crate's `src`.
	pub fn file(self) -> &'static str {
		match self {
			Self::KChunk => "benchmark_case.scale",
			Self::LargestPiece => "benchmark_case_largest.scale",
		}
	}

	/// The recorded case, decoded.
	pub fn case(self) -> Option<BenchmarkCase> {
		BenchmarkCase::decode(&mut &self.encoded()[..]).ok()
	}
}

//! A dispute over a real trace, recorded for the benchmarks. They run in the runtime's wasm,
//! where no trainer runs, so the test `the_benchmark_case_is_current` plays the dispute
//! with the kernels' trainer and checks `benchmark_case.scale` holds exactly what it
//! recorded (`TOUCHSTONE_WRITE_BENCHMARK_CASE=1` rewrites it).
//!
//! The job is digits-sized (a 64→64→10 MLP, batch 32, 1,437 samples); the defender lied
//! in the second K-chunk of the first layer's matmul, the costliest kind of piece the
//! referee judges in it (docs/performance.md).

use crate::Pair;
use codec::{Decode, Encode};
use touchstone_primitives::{
	referee::{Digest, MerkleProof, Openings, StateOpening, StepBinding},
	HyperParams, LearningProof, ModelArch,
};

/// Everything the benchmarks of `bind_step`, `bind_operator` and `resolve` need.
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
	/// The opening of its final state.
	pub final_state: StateOpening,
	/// The challenger's (honest) trace root.
	pub challenger_trace_root: Digest,
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

/// The recorded case.
pub const ENCODED: &[u8] = include_bytes!("benchmark_case.scale");

/// The recorded case, decoded.
pub fn recorded() -> Option<BenchmarkCase> {
	BenchmarkCase::decode(&mut &ENCODED[..]).ok()
}

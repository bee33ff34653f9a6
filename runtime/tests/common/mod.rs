//! Runs the referee inside the runtime's real wasm blob, the way the chain executes it.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing)]

use codec::{Decode, Encode};
use polkadot_sdk::{
	sc_executor::WasmExecutor,
	sp_core::traits::{CallContext, CodeExecutor, RuntimeCode, WrappedRuntimeCode},
	sp_io::{self, TestExternalities},
	sp_runtime::{BoundedVec, FixedU64},
};
use std::borrow::Cow;
use touchstone_kernels::{
	job::data::synthetic,
	job::trace::{state_root, Trainer},
	job::training_data::TrainingData,
	proof::chain::trace_leaf,
	proof::graph::{Graph, Node},
	proof::merkle::MerkleTree,
	referee::{open_case, RunOpening},
	CpuBackend,
};
use touchstone_primitives::{
	referee::{kernel_model, kernel_train, Dispute, Openings, RefereeError, Verdict},
	Activation, HyperParams, ModelArch, Optimizer,
};

/// The digits job's shape: 64 inputs, one hidden layer of 64, 10 classes, batch 32,
/// AdamW with clipping (the optimizer with the most operators per step).
pub fn digits_sized_job() -> (ModelArch, HyperParams) {
	let model = ModelArch::Mlp {
		inputs: 64,
		hidden: BoundedVec::truncate_from(vec![64]),
		classes: 10,
		activation: Activation::Relu,
	};
	let hyper = HyperParams {
		steps: 8,
		batch_size: 32,
		learning_rate: FixedU64::from_rational(1, 100),
		optimizer: Optimizer::AdamW {
			beta1: FixedU64::from_rational(9, 10),
			beta2: FixedU64::from_rational(999, 1000),
			epsilon: FixedU64::from_inner(10),
			weight_decay: FixedU64::from_rational(1, 100),
		},
		grad_clip_norm: Some(FixedU64::from_u32(1)),
		seed: 42,
		checkpoint_interval: 4,
	};
	(model, hyper)
}

/// A larger job than the digits one, MNIST-shaped: 784 inputs, two hidden layers of
/// 512, batch 128, AdamW with clipping. Its reductions cover hundreds of thousands of
/// elements, so it shows that no piece's cost grows with the model.
pub fn mnist_sized_job() -> (ModelArch, HyperParams) {
	let (_, hyper) = digits_sized_job();
	let model = ModelArch::Mlp {
		inputs: 784,
		hidden: BoundedVec::truncate_from(vec![512, 512]),
		classes: 10,
		activation: Activation::Relu,
	};
	(model, HyperParams { batch_size: 128, ..hyper })
}

/// What the referee judges: the chain's dispute and a party's openings.
pub type Case = (Dispute, Openings);

/// Honest cases for step `traced` of a job on `samples` synthetic samples, labelled
/// `operator:kind#piece`. For every operator they cover its first
/// piece, its last running sum (a contraction's accumulator or a reduction's
/// partial, which also reads the one before), its first output segment and its last
/// piece: the ends of each kind of piece.
pub fn honest_cases(model: &ModelArch, hyper: &HyperParams, traced: u32, samples: usize) -> Vec<(String, Case)> {
	let graph = Graph::build(&kernel_model(model), &kernel_train(hyper)).expect("graph");
	let data = synthetic(7, samples, graph.input_len, 10);
	honest_cases_on(model, hyper, traced, data.into(), |_, _| true)
}

/// [`honest_cases`] on the training data `data` (samples or a token stream), for the
/// operators `wanted` picks by index and node.
pub fn honest_cases_on(
	model: &ModelArch,
	hyper: &HyperParams,
	traced: u32,
	data: TrainingData,
	wanted: impl Fn(usize, &Node) -> bool,
) -> Vec<(String, Case)> {
	let (model, train) = (kernel_model(model), kernel_train(hyper));
	let graph = Graph::build(&model, &train).expect("graph");
	let samples = data.as_ref().samples(graph.input_len);
	let data_tree = data.as_ref().tree().expect("dataset tree");
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).expect("trainer starts");
	let start_state_root = state_root(&trainer.state().expect("state")).expect("state root");
	// The run is the disputed segment's trace: it hashes every step from the start.
	trainer.start_trace().expect("the trace starts");
	let mut hashes = Vec::new();
	let mut trace = None;
	for step in 0..=traced {
		if step == traced {
			let traced_step = trainer.trace_step().expect("step traces");
			hashes.push(traced_step.state_hash);
			trace = Some(traced_step);
		} else {
			trainer.step().expect("step runs");
			hashes.push(trainer.trace_point().expect("hashing").last_hash);
		}
	}
	let trace = trace.expect("traced step");
	let tree = MerkleTree::new(hashes.iter().map(trace_leaf).collect()).expect("tree");
	let run = RunOpening { trace: &tree, first_step: 0, start_state_root, dataset: (&data).into(), dataset_tree: &data_tree, shard: 0..samples };
	let mut cases = Vec::new();
	for (operator, node) in graph.nodes.iter().enumerate().filter(|(operator, node)| wanted(*operator, node)) {
		let count = graph.piece_count(operator).expect("pieces");
		let running = graph.accumulator_count(operator).expect("running sums");
		let mut pieces = vec![0, running.saturating_sub(1), running, count - 1];
		pieces.sort_unstable();
		pieces.dedup();
		for piece in pieces.into_iter().filter(|&piece| piece < count) {
			let case = open_case(&graph, &trace, &run, operator, piece).expect("case opens");
			cases.push((format!("{operator}:{}#{piece}", node.kind.name()), case));
		}
	}
	cases
}

/// The runtime's wasm blob with the executor the node uses, ready to call its APIs.
pub struct WasmRuntime {
	executor: WasmExecutor<sp_io::SubstrateHostFunctions>,
	code: WrappedRuntimeCode<'static>,
	ext: TestExternalities,
}

impl WasmRuntime {
	/// Loads the runtime that `touchstone-runtime`'s build script compiled.
	pub fn new() -> Self {
		let wasm = touchstone_runtime::WASM_BINARY.expect("the runtime's wasm was built");
		Self {
			executor: WasmExecutor::builder().build(),
			code: WrappedRuntimeCode(Cow::Borrowed(wasm)),
			ext: TestExternalities::default(),
		}
	}

	/// Calls runtime API function `method` with SCALE-encoded `args`.
	pub fn call(&mut self, method: &str, args: &[u8]) -> Vec<u8> {
		let runtime_code = RuntimeCode { code_fetcher: &self.code, heap_pages: None, hash: vec![7; 32] };
		let mut ext = self.ext.ext();
		let (result, _) = self.executor.call(&mut ext, &runtime_code, method, args, CallContext::Offchain);
		result.expect("the runtime call completes")
	}

	/// `RefereeApi::judge`, executed in wasm.
	pub fn judge(&mut self, model: &ModelArch, hyper: &HyperParams, case: &Case) -> Result<Verdict, RefereeError> {
		let output = self.call("RefereeApi_judge", &(model, hyper, &case.0, &case.1).encode());
		Decode::decode(&mut &output[..]).expect("the verdict decodes")
	}
}

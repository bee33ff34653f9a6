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
	data::synthetic,
	graph::{Graph, OpKind},
	merkle::MerkleTree,
	referee::{open_case, RunOpening},
	trace::{trace_leaf, Trainer},
	CpuBackend,
};
use touchstone_primitives::{
	referee::{kernel_model, kernel_train, RefereeCase, RefereeError, Verdict},
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

/// Honest cases for the first and the last piece of every operator of step `traced`,
/// labelled `operator:kind#piece`. For a contraction the first piece reads its input
/// segments; the last also folds in every earlier chunk's piece.
pub fn honest_cases(model: &ModelArch, hyper: &HyperParams, traced: u32) -> Vec<(String, RefereeCase)> {
	let (model, train) = (kernel_model(model), kernel_train(hyper));
	let data = synthetic(7, 256, 64, 10);
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data).expect("trainer starts");
	let anchor = trainer.last_hash();
	let mut hashes = Vec::new();
	let mut trace = None;
	for step in 0..=traced {
		if step == traced {
			let traced_step = trainer.trace_step().expect("step traces");
			hashes.push(traced_step.record.state_hash);
			trace = Some(traced_step);
		} else {
			hashes.push(trainer.step().expect("step runs").state_hash);
		}
	}
	let trace = trace.expect("traced step");
	let tree = MerkleTree::new(hashes.iter().map(trace_leaf).collect()).expect("tree");
	let graph = Graph::build(&model, &train).expect("graph");
	let run = RunOpening { trace: &tree, first_step: 0, anchor };
	graph
		.nodes
		.iter()
		.enumerate()
		// The batch operator needs a dataset commitment the chain does not hold yet.
		.filter(|(_, node)| !matches!(node.kind, OpKind::Batch))
		.flat_map(|(operator, node)| {
			let last = graph.piece_count(operator).expect("pieces") - 1;
			let pieces = if last == 0 { vec![0] } else { vec![0, last] };
			pieces.into_iter().map(move |piece| (operator, node, piece))
		})
		.map(|(operator, node, piece)| {
			let case = open_case(&graph, &trace, &run, operator, piece).expect("case opens");
			let kind = format!("{:?}", node.kind);
			let kind = kind.split(['(', ' ']).next().unwrap_or_default().to_string();
			(format!("{operator}:{kind}#{piece}"), case)
		})
		.collect()
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
	pub fn judge(&mut self, model: &ModelArch, hyper: &HyperParams, case: &RefereeCase) -> Result<Verdict, RefereeError> {
		let output = self.call("RefereeApi_judge", &(model, hyper, case).encode());
		Decode::decode(&mut &output[..]).expect("the verdict decodes")
	}
}

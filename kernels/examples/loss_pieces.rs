//! What judging one piece of a softmax cross-entropy costs the referee, natively, as the
//! vocabulary grows: a 1,024-class loss (the last narrow layout: a partial reads 32 whole
//! rows) against GPT-2's 50,257-token vocabulary (wide: a piece reads one span of one row,
//! or sixteen rows' sum partials).
//!
//! For each, an MLP `64 → 64 → classes` (batch 32, SGD) trains two steps on synthetic data
//! and traces the second; every kind of loss piece is opened from the honest run and judged
//! by `referee::judge_step` 200 times. Prints the median time, the words opened, and the
//! pieces of the loss operator.
//!
//! `cargo run --locked -p touchstone-kernels --example loss_pieces`

use std::time::Instant;

use touchstone_kernels::job::data::synthetic;
use touchstone_kernels::job::model::{ModelConfig, OptimizerConfig, TrainConfig};
use touchstone_kernels::job::trace::{state_root, Trainer};
use touchstone_kernels::proof::chain::trace_leaf;
use touchstone_kernels::proof::graph::{Graph, OpKind, Piece};
use touchstone_kernels::proof::merkle::MerkleTree;
use touchstone_kernels::proof::reduction::{is_wide, Reduction, LOSS_SPAN};
use touchstone_kernels::referee::{judge_step, open_case, RunOpening};
use touchstone_kernels::{Activation, CpuBackend};

fn main() {
	println!("| classes | piece | words opened | earlier pieces | judge_step, median µs |");
	println!("|---:|---|---:|---:|---:|");
	for classes in [1_024u32, 50_257] {
		measure(classes);
	}
}

fn measure(classes: u32) {
	let model = ModelConfig::Mlp { inputs: 64, hidden: vec![64], classes, activation: Activation::Relu };
	let train = TrainConfig {
		steps: 2,
		batch_size: 32,
		learning_rate: 10_000_000,
		optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
		grad_clip_norm: None,
		seed: 11,
		checkpoint_interval: 2,
	};
	let data = synthetic(3, 256, 64, classes);
	let graph = Graph::build(&model, &train).expect("a valid job");
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data.clone()).expect("a valid job");
	let start = state_root(&trainer.state().expect("the state")).expect("a state root");
	trainer.start_trace().expect("a trace");
	let mut hashes = vec![trainer.step().map(|_| trainer.trace_point().expect("hashed").last_hash).expect("step 0")];
	let traced = trainer.trace_step().expect("step 1, traced");
	hashes.push(traced.state_hash);
	let tree = MerkleTree::new(hashes.iter().map(trace_leaf).collect()).expect("a trace tree");
	let data_tree = data.tree().expect("a dataset tree");
	let run = RunOpening {
		trace: &tree,
		first_step: 0,
		start_state_root: start,
		dataset: (&data).into(),
		dataset_tree: &data_tree,
		shard: 0..data.len(),
	};
	let loss = graph.nodes.iter().position(|node| matches!(node.kind, OpKind::SoftmaxCrossEntropy(_))).expect("a loss");
	let Some(Reduction::SoftmaxCrossEntropy(shape)) = graph.reduction(loss).expect("a reduction") else { panic!("the loss") };
	let partials = graph.accumulator_count(loss).expect("its partials");
	let count = graph.piece_count(loss).expect("its pieces");
	// The first partial (a max lane's, when wide), for a wide loss the first sum-lane
	// partial and the last loss-lane partial, then the loss and a gradient segment.
	let mut pieces = vec![0];
	if is_wide(shape) {
		pieces.extend([shape.rows * shape.classes.div_ceil(LOSS_SPAN), partials - 1]);
	}
	pieces.extend([partials, partials + (count - partials) / 2]);
	for piece in pieces {
		let (dispute, openings) = open_case(&graph, &traced, &run, loss, piece).expect("an honest case");
		let words: usize = openings.inputs.iter().flat_map(|input| &input.segments).map(|segment| segment.words.len()).sum::<usize>()
			+ openings.pieces.iter().map(|piece| piece.words.len()).sum::<usize>();
		let mut times: Vec<f64> = (0..200)
			.map(|_| {
				let started = Instant::now();
				judge_step(&graph, train.seed, &dispute, &openings).expect("the honest piece is upheld");
				started.elapsed().as_secs_f64() * 1e6
			})
			.collect();
		times.sort_by(f64::total_cmp);
		let name = match graph.piece(loss, piece).expect("a piece") {
			Piece::Partial { lane, span } => format!("partial (lane {lane}, span {span})"),
			Piece::Segment { value: 0, .. } => "the loss".to_string(),
			Piece::Segment { segment, .. } => format!("gradient segment {segment}"),
			other => format!("{other:?}"),
		};
		println!("| {classes} | {name} | {words} | {} | {:.0} |", openings.pieces.len(), times[times.len() / 2]);
	}
}

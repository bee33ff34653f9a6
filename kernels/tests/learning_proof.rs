//! The learning proof end to end: the state-hash chain, the operator-level and
//! piece-level commitments of a step, the three-level bisection between an
//! honest and a dishonest trace, and the referee's verdicts and named errors.

mod support;

use support::*;
use touchstone_kernels::proof::bisection::{bisect, BisectionError};
use touchstone_kernels::job::data::{synthetic, Dataset};
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::proof::graph::{BatchKind, Graph, OpKind, Origin, Piece};
use touchstone_kernels::proof::merkle::{depth, MerkleTree, SEGMENT};
use touchstone_kernels::job::model::{ModelConfig, OptimizerConfig, TrainConfig};
use touchstone_kernels::proof::reduction::Reduction;
use touchstone_kernels::referee::{
	bind_operator, bind_step, judge, judge_step, open_case, open_step_binding, open_state, recompute, BindingError, Dispute, Level,
	Openings, RefereeError, RunOpening, StateOpening, TraceCommitment, Verdict,
};
use touchstone_kernels::job::fault::Fault;
use touchstone_kernels::job::trace::{StepTrace, Trainer};
use touchstone_kernels::proof::chain::trace_leaf;
use touchstone_kernels::job::text::TokenStream;
use touchstone_kernels::job::transformer::TransformerConfig;
use touchstone_kernels::{Activation, ChunkId, CpuBackend, Digest, Norm};

/// A small CNN: 1×7×7 → conv 3×3 (3 channels) → conv 3×3 (4 channels) → 12 hidden → 3 classes.
fn cnn() -> (ModelConfig, TrainConfig, Dataset) {
	let model = ModelConfig::Cnn {
		channels: 1,
		height: 7,
		width: 7,
		conv_channels: vec![3, 4],
		kernel_size: 3,
		hidden: vec![12],
		classes: 3,
		activation: Activation::Relu,
	};
	let train = TrainConfig {
		steps: 8,
		batch_size: 6,
		learning_rate: 50_000_000,
		optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
		grad_clip_norm: None,
		seed: 77,
		checkpoint_interval: 2,
	};
	(model, train, synthetic(12, 60, 49, 3))
}

/// The blob MLP job: AdamW with clipping, contractions of several tiles and K-chunks.
fn mlp() -> (ModelConfig, TrainConfig, Dataset) {
	(blob_model(), blob_train(8), blobs(200))
}

/// A small GPT on the first 2,001 tokens of the Shakespeare training stream: one block
/// of two heads, width 16, context 8, tied embeddings, LayerNorm, five windows a step
/// (40 rows: two K-chunks in every weight gradient), AdamW with decay and clipping on
/// the derived warm-up and cosine schedule.
fn transformer() -> (ModelConfig, TrainConfig, TrainingData) {
	let corpus = touchstone_kernels::job::text::load_shakespeare().unwrap_or_else(|error| panic!("{error}"));
	let (training, _) = corpus.split();
	let config = TransformerConfig {
		vocab: corpus.vocab_len() as u32,
		context: 8,
		layers: 1,
		heads: 2,
		width: 16,
		mlp_ratio: 2,
		norm: Norm::Layer,
		tied_embeddings: true,
	};
	let stream = TokenStream { tokens: training[..2_001].to_vec(), vocab: config.vocab }.cut_to_windows(8);
	let train = TrainConfig {
		steps: 8,
		batch_size: 5,
		learning_rate: 3_000_000,
		optimizer: OptimizerConfig::AdamW { beta1: 900_000_000, beta2: 950_000_000, epsilon: 10, weight_decay: 100_000_000 },
		grad_clip_norm: Some(1_000_000_000),
		seed: 21,
		checkpoint_interval: 4,
	};
	(ModelConfig::Transformer(config), train, stream.into())
}

/// A classification job with its set as training data.
fn with_data((model, train, data): (ModelConfig, TrainConfig, Dataset)) -> (ModelConfig, TrainConfig, TrainingData) {
	(model, train, data.into())
}

/// A job's training data: a classification set or a token stream.
trait Data: Clone + Into<TrainingData> {}
impl<D: Clone + Into<TrainingData>> Data for D {}

/// A case: what the chain holds, and a party's openings.
type Case = (Dispute, Openings);

/// The referee's verdict on `case` for `job`.
/// Past the chain's class bound (a wide loss), the step graph's judgement; within it, the
/// chain's entry point, which must agree with it.
fn verdict(job: &(ModelConfig, TrainConfig, impl Data), case: &Case) -> Result<Verdict, RefereeError> {
	let graph = Graph::build(&job.0, &job.1).map_err(|_| RefereeError::InvalidJob)?;
	let on_graph = judge_step(&graph, job.1.seed, &case.0, &case.1);
	if job.0.classes() > touchstone_kernels::referee::MAX_CLASSES {
		return on_graph;
	}
	let judged = judge(&job.0, &job.1, &case.0, &case.1);
	assert_eq!(judged, on_graph);
	judged
}

/// The referee's recomputation for `case`.
fn recomputed(job: &(ModelConfig, TrainConfig, impl Data), case: &Case) -> Result<Digest, RefereeError> {
	recompute(&job.0, &job.1, &case.0, &case.1)
}

/// Leaves of `level` below the segment level, for a trace of one segment.
fn level_leaves(graph: &Graph, trace: &TraceCommitment, level: Level) -> Result<u32, BindingError> {
	let unit = touchstone_kernels::referee::boundary::UnitCommitment {
		root: [0; 32],
		first_step: trace.first_step,
		steps: trace.steps,
		interval: trace.steps,
		start_state_root: trace.start_state_root,
	};
	touchstone_kernels::referee::level_leaves(graph, &unit, Some(trace), level)
}

/// A run of one segment: its step-level trace's state hashes, and a full trace of step `traced`.
struct Run {
	hashes: Vec<Digest>,
	trace: StepTrace,
	/// The state root the run starts from.
	start: Digest,
	/// The samples it trains on.
	shard: std::ops::Range<usize>,
	/// The training set and its tree.
	data: TrainingData,
	data_tree: MerkleTree,
}

impl Run {
	/// The step-level tree.
	fn tree(&self) -> MerkleTree {
		MerkleTree::new(self.hashes.iter().map(trace_leaf).collect()).unwrap()
	}

	/// What the prover opens cases from, with the step-level tree `tree`.
	fn opening<'a>(&'a self, tree: &'a MerkleTree) -> RunOpening<'a> {
		RunOpening {
			trace: tree,
			first_step: 0,
			start_state_root: self.start,
			dataset: (&self.data).into(),
			dataset_tree: &self.data_tree,
			shard: self.shard.clone(),
		}
	}
}

/// Runs `steps` steps of a job, tracing step `traced`, with an optional fault.
fn run(job: &(ModelConfig, TrainConfig, impl Data), steps: u32, traced: u32, fault: Option<Fault>) -> Run {
	let graph = Graph::build(&job.0, &job.1).unwrap();
	run_on(job, 0..job.2.clone().into().as_ref().samples(graph.input_len), steps, traced, fault)
}

/// [`run`] on the samples `shard` of the job's training set.
fn run_on(job: &(ModelConfig, TrainConfig, impl Data), shard: std::ops::Range<usize>, steps: u32, traced: u32, fault: Option<Fault>) -> Run {
	let (model, train, data) = job;
	let data: TrainingData = data.clone().into();
	let mut trainer = Trainer::new(CpuBackend, model, train, data.clone()).unwrap().on_shard(shard.clone()).unwrap();
	let start = touchstone_kernels::job::trace::state_root(&trainer.state().unwrap()).unwrap();
	if let Some(fault) = fault {
		trainer.inject(fault);
	}
	// The whole run is the disputed segment: it hashes every step from its start.
	trainer.start_trace().unwrap();
	let mut hashes = Vec::new();
	let mut trace = None;
	for step in 0..steps {
		if step == traced {
			let traced = trainer.trace_step().unwrap();
			hashes.push(traced.state_hash);
			trace = Some(traced);
		} else {
			trainer.step().unwrap();
			hashes.push(trainer.trace_point().unwrap().last_hash);
		}
	}
	let data_tree = data.as_ref().tree().unwrap();
	Run { hashes, trace: trace.unwrap(), start, shard, data, data_tree }
}

#[test]
fn a_traced_step_commits_the_same_state_as_a_plain_step() {
	for job in [with_data(mlp()), with_data(cnn()), transformer()] {
		let (plain, roots) = {
			let (model, train, data) = &job;
			let mut trainer = Trainer::new(CpuBackend, model, train, data.clone()).unwrap();
			let mut roots = Vec::new();
			let records: Vec<_> = (0..3)
				.map(|_| {
					let record = trainer.step().unwrap();
					roots.push(trainer.state_tree_root().unwrap());
					record
				})
				.collect();
			(records, roots)
		};
		let traced = run(&job, 3, 2, None);
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let trace = &traced.trace;
		// A plain run keeps the records a traced run chains: the same record, losses and states.
		assert_eq!(trace.record, plain[2]);
		assert_eq!(trace.previous_record, plain[1].record);
		// The last operator's pieces are the new state.
		assert_eq!(trace.pieces.last().unwrap().root(), roots[2]);
		assert_eq!(trace.state_root, roots[2]);
		assert_eq!(trace.previous_state.root(), roots[1]);
		assert_eq!(trace.previous_state_root, roots[1]);
		assert_eq!(trace.state_hash, traced.hashes[2]);
		assert_eq!(trace.operators.len(), graph.nodes.len());
		for (id, tree) in trace.pieces.iter().enumerate() {
			assert_eq!(tree.len(), graph.piece_count(id).unwrap(), "operator {id}");
		}
		// Merkle proofs of every step and every operator verify.
		let tree = traced.tree();
		for (i, hash) in traced.hashes.iter().enumerate() {
			assert!(tree.proof(i).unwrap().verify(&tree.root(), &trace_leaf(hash)));
		}
		for i in 0..trace.operators.len() {
			assert!(trace.operators.proof(i).unwrap().verify(&trace.operators.root(), &trace.operators.leaves()[i]));
		}
	}
}

#[test]
fn the_operator_graph_is_enumerable_in_the_documented_order() {
	let (model, train, _) = mlp();
	let graph = Graph::build(&model, &train).unwrap();
	let kinds: Vec<u8> = graph.nodes.iter().map(|node| node.kind.code()).collect();
	// Batch; matmul, bias, tanh; matmul, bias; loss; dW2, db2, dA1, tanh′; dW1, db1; clip; 4 × AdamW; commit.
	assert_eq!(kinds, [0, 1, 5, 6, 1, 5, 8, 1, 9, 1, 7, 1, 9, 10, 12, 12, 12, 12, 13]);
	let (model, train, _) = cnn();
	let graph = Graph::build(&model, &train).unwrap();
	let kinds: Vec<u8> = graph.nodes.iter().map(|node| node.kind.code()).collect();
	assert_eq!(kinds, [0, 2, 5, 6, 2, 5, 6, 1, 5, 6, 1, 5, 8, 1, 9, 1, 7, 1, 9, 1, 7, 4, 9, 3, 7, 4, 9, 11, 11, 11, 11, 11, 11, 11, 11, 13]);
}

/// Which piece a fault must be found at.
fn expected_piece(graph: &Graph, operator: usize, fault: &Fault) -> usize {
	match *fault {
		Fault::Output { output, element, .. } => {
			let skip = graph.accumulator_count(operator).unwrap();
			let values = graph.piece_values(operator).unwrap();
			graph.segment_leaf_index(values, output, element / SEGMENT, skip).unwrap()
		},
		Fault::Accumulator { chunk, .. } => {
			let (_, grid) = graph.accumulator_grid(operator).unwrap().unwrap();
			Graph::accumulator_index(&grid, chunk)
		},
		Fault::Partial { piece, .. } => piece,
	}
}

/// Plays the three-level game between an honest run and a run with `fault`
/// at step `step`, checks each level lands where the fault is in ⌈log₂⌉ rounds,
/// and checks the referee upholds the honest piece and rejects the dishonest one.
/// Returns false when the fault changed nothing (no dispute to play).
fn dispute(job: &(ModelConfig, TrainConfig, impl Data), steps: u32, step: u32, operator: usize, fault: Fault) -> bool {
	let honest = run(job, steps, step, None);
	let dishonest = run(job, steps, step, Some(fault));
	if honest.hashes == dishonest.hashes {
		return false;
	}
	// Level 1: steps, as many as the unit has.
	let level1 = bisect(steps, &honest.tree(), &dishonest.tree()).unwrap();
	assert_eq!((level1.leaf, level1.rounds), (step as usize, depth(steps as usize)));
	dispute_within_step(job, &honest, &dishonest, operator, fault);
	true
}

/// Levels 2 and 3 and the referee, for two traces of the same step: each
/// party's roots bind to the level above, each level has the job's shape, and
/// the referee upholds the honest claim and rejects the dishonest one, each
/// judged against that party's own commitments.
fn dispute_within_step(job: &(ModelConfig, TrainConfig, impl Data), honest: &Run, dishonest: &Run, operator: usize, fault: Fault) {
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let (honest_tree, dishonest_tree) = (honest.tree(), dishonest.tree());
	let (honest_run, dishonest_run) = (honest.opening(&honest_tree), dishonest.opening(&dishonest_tree));
	let step = honest.trace.record.step;
	// Both operator roots belong to their party's step: the binding cannot tell
	// them apart, the next level does.
	for (party, run) in [(honest, &honest_run), (dishonest, &dishonest_run)] {
		let binding = open_step_binding(&graph, &party.trace, run).unwrap();
		let hash = bind_step(&graph, &run.trace_commitment(), step, &party.trace.operators.root(), &binding).unwrap();
		assert_eq!(hash, party.trace.state_hash);
	}
	// Level 2: operators of that step.
	let operators = level_leaves(&graph, &honest_run.trace_commitment(), Level::Operators).unwrap();
	let level2 = bisect(operators, &honest.trace.operators, &dishonest.trace.operators).unwrap();
	assert_eq!((level2.leaf, level2.rounds), (operator, depth(graph.nodes.len())), "{fault:?}");
	// Level 3: pieces of that operator.
	let pieces = (&honest.trace.pieces[operator], &dishonest.trace.pieces[operator]);
	let count = level_leaves(&graph, &honest_run.trace_commitment(), Level::Pieces { operator: operator as u32 }).unwrap();
	let level3 = bisect(count, pieces.0, pieces.1).unwrap();
	assert_eq!(level3.leaf, expected_piece(&graph, operator, &fault), "{fault:?}");
	assert_eq!(level3.rounds, depth(pieces.0.len()));

	// The referee, from each party's own openings.
	let case = open_case(&graph, &honest.trace, &honest_run, operator, level3.leaf).unwrap();
	assert_eq!(verdict(job, &case).unwrap().output, pieces.0.leaves()[level3.leaf]);
	let dishonest_case = open_case(&graph, &dishonest.trace, &dishonest_run, operator, level3.leaf).unwrap();
	assert_eq!(
		verdict(job, &dishonest_case),
		Err(RefereeError::WrongClaimedOutput {
			claimed: pieces.1.leaves()[level3.leaf],
			recomputed: pieces.0.leaves()[level3.leaf]
		})
	);
	// The honest openings judged against the dishonest party's commitments are refused.
	let crossed = (dishonest_case.0.clone(), case.1.clone());
	let refused = verdict(job, &crossed);
	assert!(matches!(refused, Err(ref error) if !matches!(error, RefereeError::WrongClaimedOutput { .. })), "{refused:?}");
}

/// Flips a bit of one element of every output of every operator (but the
/// batch and the commit) that a later operator reads, trying elements until the
/// flip changes the state hash. The loss and the clipping norm feed no later
/// operator and are skipped here; `a_wrong_reported_loss_is_caught` covers the
/// loss, which the state hash binds.
fn every_operator_output(job: &(ModelConfig, TrainConfig, impl Data)) {
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let (steps, step) = (5u32, 3u32);
	let mut located_outputs = 0;
	for (operator, node) in graph.nodes.iter().enumerate() {
		if matches!(node.kind, OpKind::Batch | OpKind::Commit) {
			continue;
		}
		for (output, &value) in node.outputs.iter().enumerate() {
			let consumed = graph.nodes[operator + 1..].iter().any(|later| later.inputs.contains(&value));
			if !consumed {
				continue;
			}
			let len = graph.value(value).unwrap().len;
			// The last elements first; then elements across the whole value, for values that
			// are zero at their end (an embedding's gradient rows of tokens the batch lacks).
			let spread = (0..len).step_by(len / 16 + 1);
			let located = (0..len).rev().step_by(7).take(6).chain(spread).any(|element| {
				let fault = Fault::Output { step, operator, output, element, bit: 22 };
				dispute(job, steps, step, operator, fault)
			});
			assert!(located, "no flip in output {output} of operator {operator} ({:?}) changed the state", node.kind);
			located_outputs += 1;
		}
	}
	assert!(located_outputs >= graph.nodes.len() - 2);
}

#[test]
fn a_flipped_bit_in_any_operator_output_of_an_mlp_step_is_located_and_refereed() {
	every_operator_output(&mlp());
}

#[test]
fn a_flipped_bit_in_any_operator_output_of_a_cnn_step_is_located_and_refereed() {
	every_operator_output(&cnn());
}

/// A transformer's step on a token stream, through the job's trainer: every operator a
/// lie can sit in (the attention's scores, causal softmax and batched matmuls, the norms,
/// the embedding's gathers and scatter-add, AdamW) is located and refereed.
#[test]
fn a_flipped_bit_in_any_operator_output_of_a_transformer_step_is_located_and_refereed() {
	every_operator_output(&transformer());
}

#[test]
fn a_flipped_bit_in_a_weight_is_located() {
	// A weight flipped after its update: the optimizer's parameter output,
	// committed in the state; the dispute lands on that optimizer operator.
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let optimizers: Vec<usize> =
		graph.nodes.iter().enumerate().filter(|(_, n)| matches!(n.kind, OpKind::AdamW(_))).map(|(i, _)| i).collect();
	for (param, &operator) in optimizers.iter().enumerate() {
		let len = graph.value(graph.nodes[operator].outputs[0]).unwrap().len;
		let fault = Fault::Output { step: 1, operator, output: 0, element: (param * 13) % len, bit: 20 };
		assert!(dispute(&job, 4, 1, operator, fault), "param {param}");
	}
}

#[test]
fn a_wrong_chunk_inside_a_contraction_is_located_down_to_the_k_chunk() {
	for job in [mlp(), cnn()] {
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let mut contractions = 0;
		for (operator, node) in graph.nodes.iter().enumerate() {
			let OpKind::Contract(contraction) = node.kind else { continue };
			let grid = contraction.grid().unwrap();
			// The last K-chunk of the last tile: every earlier piece agrees.
			let chunk = ChunkId { tile_row: grid.tile_rows - 1, tile_col: grid.tile_cols - 1, chunk: grid.chunks - 1 };
			let located = (0..1024).any(|element| {
				let fault = Fault::Accumulator { step: 2, operator, chunk, element, bit: 22 };
				dispute(&job, 4, 2, operator, fault)
			});
			assert!(located, "contraction {operator}");
			if grid.chunks > 1 {
				// A middle chunk: its accumulator and all later ones of the tile differ.
				let chunk = ChunkId { tile_row: 0, tile_col: 0, chunk: grid.chunks / 2 };
				let located = (0..1024).any(|element| {
					let fault = Fault::Accumulator { step: 2, operator, chunk, element, bit: 22 };
					dispute(&job, 4, 2, operator, fault)
				});
				assert!(located, "contraction {operator}, middle chunk");
			}
			contractions += 1;
		}
		assert!(contractions >= 5);
	}
}

#[test]
fn a_wrong_partial_inside_a_reduction_is_located_down_to_the_span() {
	// A partial alone changes no output and so no state hash: the step-level
	// round is the one any wrong output plays (above). The dishonest trace
	// here commits one wrong running sum, which the later sums of its lane carry.
	for job in [mlp(), cnn()] {
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let honest = run(&job, 4, 2, None);
		let mut reductions = 0;
		for operator in 0..graph.nodes.len() {
			let Some(reduction) = graph.reduction(operator).unwrap() else { continue };
			let mut pieces = vec![0, reduction.len() - 1, reduction.len() / 2];
			pieces.dedup();
			for piece in pieces {
				let fault = Fault::Partial { step: 2, operator, piece, element: 0, bit: 22 };
				let dishonest = run(&job, 4, 2, Some(fault));
				assert_eq!(honest.hashes, dishonest.hashes);
				dispute_within_step(&job, &honest, &dishonest, operator, fault);
			}
			reductions += 1;
		}
		assert!(reductions >= 3);
	}
}

#[test]
fn the_referee_upholds_every_honest_piece_of_every_reduction_from_bounded_openings() {
	for job in [mlp(), cnn()] {
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let honest = run(&job, 3, 2, None);
		let tree = honest.tree();
		let opening = honest.opening(&tree);
		for operator in 0..graph.nodes.len() {
			let Some(reduction) = graph.reduction(operator).unwrap() else { continue };
			let pieces = &honest.trace.pieces[operator];
			for piece in 0..pieces.len() {
				let case = open_case(&graph, &honest.trace, &opening, operator, piece).unwrap();
				assert_eq!(verdict(&job, &case).unwrap().output, pieces.leaves()[piece], "{operator}#{piece}");
				// Every piece reads a bounded slice, whatever the batch or the model:
				// at most 1,024 elements (two segments more when unaligned) or 32 rows.
				let words: usize = case.1.inputs.iter().flat_map(|i| &i.segments).map(|s| s.words.len()).sum();
				let bound = match reduction {
					Reduction::SoftmaxCrossEntropy(shape) => 32 * (shape.classes + 1) + 2 * SEGMENT,
					_ => 1024 + 2 * SEGMENT * 32,
				};
				assert!(words <= bound, "{operator}#{piece} reads {words} words");
				assert!(case.1.pieces.len() <= 2, "{operator}#{piece}");
			}
		}
	}
}

/// A classifier wider than one loss span (1,100 classes: a small vocabulary's shape): the
/// referee upholds every honest piece of its loss from openings of at most one span of one
/// row, within the job's cost bound, and a wrong running maximum, sum or loss-lane partial
/// is located at its piece and refereed.
#[test]
fn a_wide_loss_is_judged_a_span_at_a_time() {
	use touchstone_kernels::proof::reduction::{LOSS_LANE_ROWS, LOSS_SPAN};
	use touchstone_kernels::referee::piece_cost;
	let ModelConfig::Mlp { inputs, hidden, activation, .. } = blob_model() else { panic!("an MLP") };
	let job = (ModelConfig::Mlp { inputs, hidden, classes: 1_100, activation }, blob_train(4), synthetic(13, 200, inputs as usize, 1_100));
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let loss = graph.nodes.iter().position(|node| matches!(node.kind, OpKind::SoftmaxCrossEntropy(_))).unwrap();
	let reduction = graph.reduction(loss).unwrap().unwrap();
	let rows = graph.batch;
	// Two spans per row, for the maxima and for the sums, then the loss lane.
	assert_eq!(reduction.len(), 2 * rows * 2 + rows.div_ceil(LOSS_LANE_ROWS));
	let honest = run(&job, 3, 2, None);
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	let bound = piece_cost(&graph, loss, 3, honest.data_tree.len() as u64).unwrap();
	let pieces = &honest.trace.pieces[loss];
	for piece in 0..pieces.len() {
		let case = open_case(&graph, &honest.trace, &opening, loss, piece).unwrap();
		assert_eq!(verdict(&job, &case).unwrap().output, pieces.leaves()[piece], "#{piece}");
		let words: usize = case.1.inputs.iter().flat_map(|i| &i.segments).map(|s| s.words.len()).sum();
		let piece_words: usize = case.1.pieces.iter().map(|p| p.words.len()).sum();
		let hashes: usize = case.1.inputs.iter().map(|i| i.segments.len() + i.proof.hashes.len()).sum::<usize>()
			+ case.1.pieces.iter().map(|p| 1 + p.proof.siblings.len()).sum::<usize>();
		assert!(words <= LOSS_SPAN + 3 * SEGMENT, "#{piece} reads {words} words");
		assert!(case.1.pieces.len() <= LOSS_LANE_ROWS + 1, "#{piece}");
		assert!((words + piece_words) as u64 <= bound.words && hashes as u64 <= bound.hashes, "#{piece}: {bound:?}");
	}
	// A wrong first maximum, a wrong last sum, and a wrong loss-lane partial.
	for piece in [0, 2 * rows * 2 - 1, reduction.len() - 1] {
		let fault = Fault::Partial { step: 2, operator: loss, piece, element: 0, bit: 22 };
		let dishonest = run(&job, 3, 2, Some(fault));
		dispute_within_step(&job, &honest, &dishonest, loss, fault);
	}
}

#[test]
fn the_referee_judges_every_batch_piece_against_the_dataset_root() {
	for job in [with_data(mlp()), with_data(cnn()), transformer()] {
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let honest = run(&job, 3, 2, None);
		let tree = honest.tree();
		let opening = honest.opening(&tree);
		let pieces = &honest.trace.pieces[0];
		for piece in 0..pieces.len() {
			let case = open_case(&graph, &honest.trace, &opening, 0, piece).unwrap();
			assert_eq!(verdict(&job, &case).unwrap().output, pieces.leaves()[piece], "batch piece {piece}");
			let mut wrong = case.clone();
			wrong.1.claimed_output[1] ^= 4;
			// A claim that is not the leaf under the claimant's piece root is refused outright.
			assert_eq!(verdict(&job, &wrong), Err(RefereeError::InvalidClaimProof));
			// Features and labels are read from the dataset; the sample indices are drawn from the seed.
			let Piece::Segment { value, .. } = graph.piece(0, piece).unwrap() else { panic!("a batch piece is a segment") };
			assert_eq!(case.1.inputs.is_empty(), value == 2, "batch piece {piece}");
			if value < 2 {
				let mut other_dataset = case.clone();
				other_dataset.0.data.root[0] ^= 1;
				assert_eq!(recomputed(&job, &other_dataset), Err(RefereeError::InvalidInputProof { input: 0 }));
				let mut forged_row = case.clone();
				forged_row.1.inputs[0].segments[0].words[0] ^= 1 << 20;
				assert_eq!(recomputed(&job, &forged_row), Err(RefereeError::InvalidInputProof { input: 0 }));
			}
			// A training set of another size draws another batch, and lays its words out
			// elsewhere; a token batch's positions are the same in any window.
			if value == 2 && graph.batch_kind == BatchKind::Windows {
				continue;
			}
			let mut resized = case.clone();
			resized.0.data.samples = 2 * resized.0.data.samples + 1;
			resized.0.data.shard_samples = resized.0.data.samples;
			let judged = verdict(&job, &resized);
			let refused = matches!(
				judged,
				Err(RefereeError::InvalidInputProof { .. } | RefereeError::MissingInput { .. } | RefereeError::WrongClaimedOutput { .. })
			);
			assert!(refused, "batch piece {piece}: {judged:?}");
			// A training set too large to draw in the runtime is not a valid job.
			let mut huge = case.clone();
			huge.0.data.samples = touchstone_kernels::job::data::MAX_SAMPLES as u32 + 1;
			huge.0.data.shard_samples = huge.0.data.samples;
			assert_eq!(recomputed(&job, &huge), Err(RefereeError::InvalidJob), "batch piece {piece}");
		}
	}
}

/// An honest case for a contraction accumulator piece of step 2.
fn honest_case(job: &(ModelConfig, TrainConfig, impl Data)) -> (Run, Case) {
	let honest = run(job, 4, 2, None);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let tree = honest.tree();
	// The first layer's weight gradient (matmul over the batch): several K-chunks.
	let operator = graph.nodes.iter().rposition(|n| matches!(n.kind, OpKind::Contract(_))).unwrap();
	let (_, grid) = graph.accumulator_grid(operator).unwrap().unwrap();
	let piece = Graph::accumulator_index(&grid, ChunkId { tile_row: 0, tile_col: 0, chunk: grid.chunks - 1 });
	assert!(matches!(graph.piece(operator, piece).unwrap(), Piece::Accumulator(id) if id.chunk > 0));
	let opening = honest.opening(&tree);
	let case = open_case(&graph, &honest.trace, &opening, operator, piece).unwrap();
	(honest, case)
}

#[test]
fn a_claim_that_is_not_under_the_claimants_piece_root_is_refused() {
	let job = mlp();
	let (_, case) = honest_case(&job);
	verdict(&job, &case).unwrap();
	let mut wrong = case.clone();
	wrong.1.claimed_output[5] ^= 0x10;
	assert_eq!(verdict(&job, &wrong), Err(RefereeError::InvalidClaimProof));
	let mut elsewhere = case.clone();
	elsewhere.1.claim_proof.index += 1;
	assert_eq!(verdict(&job, &elsewhere), Err(RefereeError::InvalidClaimProof));
}

/// The chain's commitments, not the party's, decide: openings judged against a
/// dispute whose trace, start state, operator root or data differ are refused.
#[test]
fn openings_against_commitments_other_than_the_chains_are_refused() {
	let job = mlp();
	let (_, case) = honest_case(&job);
	let mut other_trace = case.clone();
	other_trace.0.trace.trace_root[0] ^= 1;
	assert_eq!(recomputed(&job, &other_trace), Err(RefereeError::InvalidStateProof));
	let mut other_range = case.clone();
	other_range.0.trace.steps += 1;
	assert_eq!(recomputed(&job, &other_range), Err(RefereeError::InvalidStateProof));
	let mut other_root = case.clone();
	other_root.0.operator_root[0] ^= 1;
	let operator = case.0.position.operator;
	assert_eq!(recomputed(&job, &other_root), Err(RefereeError::InvalidOperatorProof { operator }));
	let mut other_step = case.clone();
	other_step.0.position.step -= 1;
	assert_eq!(recomputed(&job, &other_step), Err(RefereeError::InvalidStateProof));
}

#[test]
fn the_referee_rejects_a_wrong_input_proof() {
	let job = mlp();
	let (honest, case) = honest_case(&job);
	// A value changed under an honest proof.
	let mut tampered = case.clone();
	tampered.1.inputs[0].segments[0].words[3] ^= 1 << 22;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A forged node.
	let mut tampered = case.clone();
	tampered.1.inputs[1].proof.hashes[0][0] ^= 1;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidInputProof { input: 1 }));
	// An honest segment presented as another one.
	let mut tampered = case.clone();
	tampered.1.inputs[0].segments[0].segment += 1;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A short segment.
	let mut tampered = case.clone();
	tampered.1.inputs[0].segments[0].words.pop();
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A segment left out under a valid proof of the rest is missing, not silently zero.
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let producer = match graph.value(graph.nodes[case.0.position.operator as usize].inputs[0]).unwrap().origin {
		Origin::Node { node, .. } => node,
		Origin::State(_) => panic!("the weight gradient's first input is an activation"),
	};
	let mut tampered = case.clone();
	let dropped = tampered.1.inputs[0].segments.remove(0).segment;
	let kept: Vec<usize> = tampered.1.inputs[0].proof.indices[1..].iter().map(|&i| i as usize).collect();
	tampered.1.inputs[0].proof = honest.trace.pieces[producer].multiproof(&kept).unwrap();
	assert_eq!(
		recomputed(&job, &tampered),
		Err(RefereeError::MissingInput { input: 0, segment: dropped })
	);
	// A forged previous state.
	let mut tampered = case.clone();
	if let StateOpening::Step { state_root, .. } = &mut tampered.1.previous_state {
		state_root[0] ^= 1;
	}
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidStateProof));
	// A forged producer leaf.
	let mut tampered = case.clone();
	tampered.1.operators[0].piece_root[0] ^= 1;
	let operator = tampered.1.operators[0].operator;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidOperatorProof { operator }));
	// A forged earlier piece.
	let mut tampered = case.clone();
	tampered.1.pieces[0].words[0] ^= 1;
	let piece = tampered.1.pieces[0].piece;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidPieceProof { piece }));
	// A piece root that the disputed operator's leaf does not commit.
	let mut tampered = case.clone();
	tampered.0.piece_root[0] ^= 1;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidOperatorProof { operator: case.0.position.operator }));
	let mut tampered = case.clone();
	tampered.1.operator_proof.siblings[0][0] ^= 1;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::InvalidOperatorProof { operator: case.0.position.operator }));
	// An opening outside the agreed prefix.
	let mut tampered = case.clone();
	tampered.1.operators[0].operator = tampered.0.position.operator;
	assert_eq!(recomputed(&job, &tampered), Err(RefereeError::NotAgreed));
}

/// A weight is read from the state before the step in whole 1 KiB chunks,
/// proven in the state tree: the honest piece is upheld from a few chunks, and a
/// changed word, a chunk presented at another index, a short chunk or a
/// non-canonical zero is refused.
#[test]
fn a_weight_is_opened_in_state_chunks_and_a_wrong_chunk_is_refused() {
	let job = mlp();
	let honest = run(&job, 4, 2, None);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	// The first layer's forward product reads its weight (input 1) from the state.
	let operator = graph.nodes.iter().position(|n| matches!(n.kind, OpKind::Contract(_))).unwrap();
	let weight = graph.nodes[operator].inputs[1];
	assert!(matches!(graph.value(weight).unwrap().origin, Origin::State(0)));
	let (_, grid) = graph.accumulator_grid(operator).unwrap().unwrap();
	let piece = Graph::accumulator_index(&grid, ChunkId { tile_row: 0, tile_col: 0, chunk: grid.chunks - 1 });
	let case = open_case(&graph, &honest.trace, &opening, operator, piece).unwrap();
	verdict(&job, &case).unwrap();
	let chunks = &case.1.inputs.iter().find(|input| input.input == 1).unwrap().segments;
	assert!(!chunks.is_empty() && chunks.len() <= 2 * SEGMENT, "{} chunks", chunks.len());
	assert!(chunks.iter().all(|chunk| chunk.words.len() <= 256));
	let position = case.1.inputs.iter().position(|input| input.input == 1).unwrap();
	let refused = Err(RefereeError::InvalidInputProof { input: 1 });
	let mut tampered = case.clone();
	tampered.1.inputs[position].segments[0].words[100] ^= 1 << 22;
	assert_eq!(recomputed(&job, &tampered), refused);
	let mut tampered = case.clone();
	tampered.1.inputs[position].segments[0].segment += 1;
	assert_eq!(recomputed(&job, &tampered), refused);
	let mut tampered = case.clone();
	tampered.1.inputs[position].segments[0].words.pop();
	assert_eq!(recomputed(&job, &tampered), refused);
	// The tree hashes `+0` for a zero; an opening that shows `-0` there is another value.
	let mut tampered = case.clone();
	let words = &mut tampered.1.inputs[position].segments[0].words;
	let zero = words.iter().position(|&word| word == 0);
	match zero {
		Some(index) => {
			words[index] = 0x8000_0000;
			assert_eq!(recomputed(&job, &tampered), refused);
		},
		None => assert!(words.iter().all(|&word| word != 0x8000_0000)),
	}
}

/// A party whose committed state is not what its own optimizer produced (the
/// `Commit` operator lies) is found at the state chunk that differs and loses
/// to the chunk the referee copies from the optimizer's outputs.
#[test]
fn a_committed_state_that_is_not_the_optimizers_output_loses_at_its_chunk() {
	use touchstone_kernels::proof::chain::operator_leaf;
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let honest = run(&job, 4, 2, None);
	let commit = graph.nodes.len() - 1;
	assert_eq!(graph.nodes[commit].kind, OpKind::Commit);
	// The liar's trace: the same values, but a state tree with one weight changed.
	let mut forged = honest.trace.clone();
	let mut state: Vec<Vec<f32>> = graph.nodes[commit].inputs.iter().map(|&id| forged.values[id].as_f32().to_vec()).collect();
	let tensor = 0usize;
	let element = state[tensor].len() - 1;
	assert!(element >= 256, "the change lies past the first chunk");
	state[tensor][element] += 1.0;
	forged.pieces[commit] = touchstone_kernels::job::trace::state_tree(&state).unwrap();
	let leaves: Vec<Digest> = graph
		.nodes
		.iter()
		.enumerate()
		.map(|(id, node)| operator_leaf(id as u32, node.kind.code(), forged.pieces[id].len() as u32, &forged.pieces[id].root()))
		.collect();
	forged.operators = MerkleTree::new(leaves).unwrap();
	assert_eq!(forged.pieces[commit].root(), touchstone_kernels::job::trace::state_root(&state).unwrap());
	// The operator level lands on Commit, the piece level on the chunk holding the change.
	let operators = bisect(graph.nodes.len() as u32, &honest.trace.operators, &forged.operators).unwrap();
	assert_eq!(operators.leaf, commit);
	let count = level_leaves(&graph, &honest.opening(&honest.tree()).trace_commitment(), Level::Pieces { operator: commit as u32 }).unwrap();
	assert_eq!(count as usize, graph.state_chunks());
	let pieces = bisect(count, &honest.trace.pieces[commit], &forged.pieces[commit]).unwrap();
	let expected = graph.state_chunk_index(tensor, element / 256).unwrap();
	assert_eq!(pieces.leaf, expected);
	assert_eq!(graph.piece(commit, expected).unwrap(), Piece::Chunk { value: tensor, chunk: element / 256 });
	// The referee copies the chunk from the optimizer's outputs: the honest claim
	// stands, the liar's does not.
	let tree = honest.tree();
	let case = open_case(&graph, &honest.trace, &honest.opening(&tree), commit, pieces.leaf).unwrap();
	assert_eq!(verdict(&job, &case).unwrap().output, honest.trace.pieces[commit].leaves()[pieces.leaf]);
	let liar = open_case(&graph, &forged, &honest.opening(&tree), commit, pieces.leaf).unwrap();
	assert!(matches!(verdict(&job, &liar), Err(RefereeError::WrongClaimedOutput { .. })), "{:?}", verdict(&job, &liar));
}

#[test]
fn the_referee_rejects_out_of_range_ids() {
	let job = mlp();
	let (_, case) = honest_case(&job);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let count = graph.piece_count(case.0.position.operator as usize).unwrap() as u32;
	let mut out = case.clone();
	out.0.position.piece = count;
	assert_eq!(recomputed(&job, &out), Err(RefereeError::PieceOutOfRange { piece: count, count }));
	out.0.position.piece = u32::MAX;
	assert_eq!(recomputed(&job, &out), Err(RefereeError::PieceOutOfRange { piece: u32::MAX, count }));
	let mut out = case.clone();
	out.0.position.operator = graph.nodes.len() as u32;
	let operator = out.0.position.operator;
	assert_eq!(recomputed(&job, &out), Err(RefereeError::OperatorOutOfRange { operator, count: operator }));
	let mut out = case.clone();
	out.0.position.step = 4;
	assert_eq!(recomputed(&job, &out), Err(RefereeError::StepOutOfRange { step: 4 }));
	let mut out = case.clone();
	out.0.position.operator = 0;
	out.0.position.piece = 0;
	out.1.operators.clear();
	out.1.pieces.clear();
	out.1.inputs.clear();
	// The openings' operator proof is for another operator.
	assert_eq!(recomputed(&job, &out), Err(RefereeError::InvalidOperatorProof { operator: 0 }));
}

#[test]
fn the_first_step_is_judged_against_the_start_state() {
	let job = mlp();
	let honest = run(&job, 3, 0, None);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	// The first operator that reads parameters: the first layer's matmul.
	let case = open_case(&graph, &honest.trace, &opening, 1, 0).unwrap();
	assert_eq!(case.1.previous_state, StateOpening::Anchor);
	verdict(&job, &case).unwrap();
	let mut other_start = case.clone();
	other_start.0.trace.start_state_root[0] ^= 1;
	// The weights are proven against the chain's start state, which this is not.
	assert_eq!(verdict(&job, &other_start), Err(RefereeError::InvalidInputProof { input: 1 }));
	// The first step's binding chains from the start state's anchor.
	let binding = open_step_binding(&graph, &honest.trace, &opening).unwrap();
	bind_step(&graph, &case.0.trace, 0, &honest.trace.operators.root(), &binding).unwrap();
	assert_eq!(
		bind_step(&graph, &other_start.0.trace, 0, &honest.trace.operators.root(), &binding),
		Err(BindingError::InvalidStepHash)
	);
}

/// A party whose state hash for the disputed step is wrong cannot enter the
/// operator level with the honest operator tree: the tree's batch and commit
/// leaves give the honest `h_t`, which is not its leaf.
#[test]
fn a_wrong_state_hash_over_an_honest_operator_tree_loses() {
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let honest = run(&job, 4, 2, None);
	let honest_tree = honest.tree();
	let honest_run = honest.opening(&honest_tree);
	let binding = open_step_binding(&graph, &honest.trace, &honest_run).unwrap();
	let operator_root = honest.trace.operators.root();
	// The liar commits another h_2 (and so other later hashes).
	let mut lie = Run { hashes: honest.hashes.clone(), ..run(&job, 4, 2, None) };
	for hash in &mut lie.hashes[2..] {
		hash[0] ^= 1;
	}
	let lie_tree = lie.tree();
	let lie_run = lie.opening(&lie_tree);
	assert_eq!(bisect(4, &honest_tree, &lie_tree).unwrap().leaf, 2);
	// Its own leaf 2, with the honest operator tree's loss and commit roots.
	let StateOpening::Step { previous, state_root, record, .. } = binding.previous.clone() else {
		panic!("step 2 has a previous step")
	};
	let lie_binding = touchstone_kernels::referee::StepBinding {
		previous: StateOpening::Step { previous, state_root, record, proof: lie_tree.proof(1).unwrap() },
		proof: lie_tree.proof(2).unwrap(),
		..binding.clone()
	};
	assert_eq!(
		bind_step(&graph, &lie_run.trace_commitment(), 2, &operator_root, &lie_binding),
		Err(BindingError::InvalidStepHash)
	);
	assert_eq!(bind_step(&graph, &honest_run.trace_commitment(), 2, &operator_root, &binding), Ok(honest.hashes[2]));
	// An operator root whose leaves do not give the state root fails too.
	let mut forged = binding.clone();
	forged.state_root[0] ^= 1;
	let last = graph.nodes.len() as u32 - 1;
	assert_eq!(
		bind_step(&graph, &honest_run.trace_commitment(), 2, &operator_root, &forged),
		Err(BindingError::InvalidOperatorProof { operator: last })
	);
	// A previous state hash that is not the trace's leaf 1 fails.
	let mut forged = binding.clone();
	if let StateOpening::Step { previous, .. } = &mut forged.previous {
		previous[0] ^= 1;
	}
	assert_eq!(
		bind_step(&graph, &honest_run.trace_commitment(), 2, &operator_root, &forged),
		Err(BindingError::InvalidStateProof)
	);
	// And a piece root that the operator leaf does not commit fails at level 3's entry.
	let piece_root = honest.trace.pieces[3].root();
	let proof = honest.trace.operators.proof(3).unwrap();
	bind_operator(&graph, 3, &operator_root, &piece_root, &proof).unwrap();
	assert_eq!(bind_operator(&graph, 3, &operator_root, &[0; 32], &proof), Err(BindingError::InvalidOperatorProof { operator: 3 }));
}

/// The loss a solver reports is bound to its state hash: a trace that reports
/// a wrong loss is found by the game and loses at the referee, and a party
/// whose state hash carries another loss than its operator tree cannot bind it.
#[test]
fn a_wrong_reported_loss_is_caught() {
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let loss_operator = graph.nodes.iter().position(|node| matches!(node.kind, OpKind::SoftmaxCrossEntropy(_))).unwrap();
	// The dishonest trace reports another loss at step 2; nothing else changes.
	let fault = Fault::Output { step: 2, operator: loss_operator, output: 0, element: 0, bit: 3 };
	let honest = run(&job, 4, 2, None);
	let dishonest = run(&job, 4, 2, Some(fault));
	assert_eq!(honest.trace.state_root, dishonest.trace.state_root);
	assert_ne!(honest.trace.record.loss, dishonest.trace.record.loss);
	assert!(dispute(&job, 4, 2, loss_operator, fault));

	// A state hash over another loss, presented with the honest operator tree.
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	let binding = open_step_binding(&graph, &honest.trace, &opening).unwrap();
	let operator_root = honest.trace.operators.root();
	let mut other_loss = binding.clone();
	other_loss.loss ^= 1 << 3;
	assert_eq!(
		bind_step(&graph, &opening.trace_commitment(), 2, &operator_root, &other_loss),
		Err(BindingError::InvalidLossProof)
	);
	let mut nan = binding.clone();
	nan.loss = f32::NAN.to_bits();
	assert_eq!(bind_step(&graph, &opening.trace_commitment(), 2, &operator_root, &nan), Err(BindingError::InvalidLossProof));
}

/// The cost bound the chain weighs disputes by holds for every kind of piece of
/// an MLP and a CNN step, and a job beyond the class bound is refused.
#[test]
fn every_piece_reads_within_the_jobs_cost_bound() {
	use touchstone_kernels::referee::{piece_cost, validate_job, worst_piece, JobError, MAX_CLASSES};
	for job in [with_data(mlp()), with_data(cnn()), transformer()] {
		let graph = validate_job(&job.0, &job.1).unwrap();
		let honest = run(&job, 3, 2, None);
		let tree = honest.tree();
		let opening = honest.opening(&tree);
		let dataset_segments = honest.data_tree.len() as u64;
		let worst = worst_piece(&graph, 3, dataset_segments).unwrap();
		let mut largest = 0;
		for operator in 0..graph.nodes.len() {
			// Each piece against its own operator's bound, which the worst case covers.
			let bound = piece_cost(&graph, operator, 3, dataset_segments).unwrap();
			assert!(bound.words <= worst.words && bound.hashes <= worst.hashes);
			let count = graph.piece_count(operator).unwrap();
			let stride = (count / 24).max(1);
			for piece in (0..count).step_by(stride).chain([count - 1]) {
				let (_, openings) = open_case(&graph, &honest.trace, &opening, operator, piece).unwrap();
				let words: usize = openings.inputs.iter().flat_map(|i| &i.segments).map(|s| s.words.len()).sum::<usize>()
					+ openings.pieces.iter().map(|p| p.words.len()).sum::<usize>();
				let hashes: usize = openings.inputs.iter().map(|i| i.segments.len() + i.proof.hashes.len()).sum::<usize>()
					+ openings.pieces.iter().map(|p| 1 + p.proof.siblings.len()).sum::<usize>();
				assert!(words as u64 <= bound.words, "{operator}#{piece}: {words} words > {bound:?}");
				assert!(hashes as u64 <= bound.hashes, "{operator}#{piece}: {hashes} hashes > {bound:?}");
				largest = largest.max(words);
			}
		}
		assert!(largest > 0);
	}
	let (model, train, _) = mlp();
	let ModelConfig::Mlp { inputs, hidden, activation, .. } = model else { panic!("an MLP") };
	let wide = ModelConfig::Mlp { inputs, hidden, classes: MAX_CLASSES + 1, activation };
	assert_eq!(validate_job(&wide, &train).err(), Some(JobError::TooManyClasses));
}

/// Openings beyond what a piece needs are refused, so a party cannot make the
/// referee's work exceed the job's bound; a data commitment the trainer would
/// refuse is not a valid job.
#[test]
fn openings_are_bounded_and_data_commitments_checked() {
	use touchstone_kernels::referee::{validate_data, JobError};
	let job = mlp();
	let (_, case) = honest_case(&job);
	let mut twice = case.clone();
	twice.1.inputs.push(twice.1.inputs[0].clone());
	assert_eq!(recomputed(&job, &twice), Err(RefereeError::TooManyOpenings));
	let mut twice = case.clone();
	twice.1.operators.push(twice.1.operators[0].clone());
	assert_eq!(recomputed(&job, &twice), Err(RefereeError::TooManyOpenings));
	let mut twice = case.clone();
	twice.1.pieces.push(twice.1.pieces[0].clone());
	assert_eq!(recomputed(&job, &twice), Err(RefereeError::TooManyOpenings));
	let mut many = case.clone();
	many.1.pieces = vec![case.1.pieces[0].clone(); touchstone_kernels::referee::MAX_OPENED_PIECES + 1];
	assert_eq!(recomputed(&job, &many), Err(RefereeError::TooManyOpenings));

	let graph = Graph::build(&job.0, &job.1).unwrap();
	let data = case.0.data.clone();
	assert!(validate_data(&graph, &data).is_ok());
	for bad in [
		touchstone_kernels::referee::DataCommitment { first_sample: data.samples, ..data.clone() },
		touchstone_kernels::referee::DataCommitment { shard_samples: graph.batch as u32 - 1, ..data.clone() },
		touchstone_kernels::referee::DataCommitment { first_sample: u32::MAX, ..data.clone() },
		touchstone_kernels::referee::DataCommitment { samples: u32::MAX, shard_samples: u32::MAX, ..data.clone() },
	] {
		assert_eq!(validate_data(&graph, &bad), Err(JobError::InvalidData), "{bad:?}");
	}
}

/// Each level's leaf count comes from the job; a party with another tree
/// shape loses, whichever side it is on.
#[test]
fn a_party_whose_tree_has_the_wrong_shape_loses() {
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let honest = run(&job, 3, 2, None);
	let trace = honest.opening(&honest.tree()).trace_commitment();
	assert_eq!(level_leaves(&graph, &trace, Level::Steps).unwrap(), 3);
	assert_eq!(level_leaves(&graph, &trace, Level::Operators).unwrap() as usize, graph.nodes.len());
	// An operator tree with one extra leaf.
	let mut leaves = honest.trace.operators.leaves().to_vec();
	leaves.push([5; 32]);
	let longer = MerkleTree::new(leaves).unwrap();
	let expected = level_leaves(&graph, &trace, Level::Operators).unwrap();
	assert!(matches!(bisect(expected, &honest.trace.operators, &longer), Err(BisectionError::Second(_))));
	assert!(matches!(bisect(expected, &longer, &honest.trace.operators), Err(BisectionError::First(_))));
	// A piece tree one leaf short.
	let pieces = &honest.trace.pieces[1];
	let shorter = MerkleTree::new(pieces.leaves()[..pieces.len() - 1].to_vec()).unwrap();
	let expected = level_leaves(&graph, &trace, Level::Pieces { operator: 1 }).unwrap();
	assert!(matches!(bisect(expected, pieces, &shorter), Err(BisectionError::Second(_))));
}

/// A segment trace's final state (the state root and record it ends at, which its
/// boundary commits) opens against the trace.
#[test]
fn the_final_state_opens_against_the_trace() {
	let job = mlp();
	let honest = run(&job, 3, 2, None);
	let tree = honest.tree();
	let trace = honest.opening(&tree).trace_commitment();
	let last = &honest.trace;
	let opening = StateOpening::Step {
		previous: last.previous_hash,
		state_root: last.state_root,
		record: last.record.record,
		proof: tree.proof(2).unwrap(),
	};
	assert_eq!(open_state(&trace, 3, &opening), Ok((last.state_hash, last.state_root, last.record.record)));
	let mut forged = opening.clone();
	if let StateOpening::Step { state_root, .. } = &mut forged {
		state_root[0] ^= 1;
	}
	assert_eq!(open_state(&trace, 3, &forged), Err(BindingError::InvalidStateProof));
	let mut forged = opening.clone();
	if let StateOpening::Step { record, .. } = &mut forged {
		record[0] ^= 1;
	}
	assert_eq!(open_state(&trace, 3, &forged), Err(BindingError::InvalidStateProof));
}

/// A data-shard unit draws its batches inside its shard and proves the rows
/// against the whole training set's root at their places in it.
#[test]
fn a_shard_units_batch_pieces_are_upheld_for_the_honest_party() {
	let job = mlp();
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let shard = 70..170;
	let honest = run_on(&job, shard.clone(), 3, 2, None);
	let indices = honest.trace.values[graph.batch_values[2]].clone();
	let touchstone_kernels::job::trace::HostTensor::U32(indices) = indices else { panic!("sample indices are u32s") };
	assert!(indices.iter().all(|&i| shard.contains(&(i as usize))), "{indices:?}");
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	let pieces = &honest.trace.pieces[0];
	for piece in 0..pieces.len() {
		let case = open_case(&graph, &honest.trace, &opening, 0, piece).unwrap();
		assert_eq!(case.0.data.first_sample, 70);
		assert_eq!(verdict(&job, &case).unwrap().output, pieces.leaves()[piece], "batch piece {piece}");
		// Judged as if the unit trained on the whole set, the same piece is another batch.
		let mut whole = case.clone();
		(whole.0.data.first_sample, whole.0.data.shard_samples) = (0, whole.0.data.samples);
		let judged = verdict(&job, &whole);
		// Other samples: their rows were not opened, or the indices differ.
		let refused = matches!(
			judged,
			Err(RefereeError::InvalidInputProof { .. } | RefereeError::MissingInput { .. } | RefereeError::WrongClaimedOutput { .. })
		);
		assert!(refused, "batch piece {piece}: {judged:?}");
	}
	// A shard that does not lie inside the training set is not a valid job.
	let mut case = open_case(&graph, &honest.trace, &opening, 0, 0).unwrap();
	case.0.data.first_sample = case.0.data.samples;
	assert_eq!(recomputed(&job, &case), Err(RefereeError::InvalidJob));
}

/// Rule 7: a NaN or an infinity ends a run with a named error before its state
/// is committed, and the referee refuses any opened word that is not finite.
#[test]
fn non_finite_values_are_refused_by_the_trainer_and_the_referee() {
	let (model, train, mut data) = cnn();
	// Features near f32's largest value overflow the first convolution's sums,
	// and ReLU carries the infinity on to the loss.
	data.features.iter_mut().for_each(|feature| *feature = f32::MAX);
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	let result = trainer.step();
	let Err(touchstone_kernels::KernelError::NonFinite { step }) = result else { panic!("the step is refused: {result:?}") };
	assert_eq!(step, 0);
	// The hash chain stopped before the invalid step.
	assert_eq!(trainer.next_step(), step);
	// The solver proves the divergence: it traces the step, opens its first
	// non-finite piece, and the referee recomputes it from finite, proven inputs.
	let (model, train, mut data) = cnn();
	data.features.iter_mut().for_each(|feature| *feature = f32::MAX);
	let job = (model, train, data);
	let diverged = run(&job, 1, 0, None);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let (operator, piece) = touchstone_kernels::referee::first_non_finite_piece(&graph, &diverged.trace).unwrap().unwrap();
	assert!(matches!(graph.nodes[operator].kind, OpKind::Contract(_)), "the first convolution overflows: {operator}");
	let tree = diverged.tree();
	let case = open_case(&graph, &diverged.trace, &diverged.opening(&tree), operator, piece).unwrap();
	assert_eq!(verdict(&job, &case), Err(RefereeError::NonFiniteOutput));
	// Every piece before it is finite, and upheld.
	if piece > 0 {
		let before = open_case(&graph, &diverged.trace, &diverged.opening(&tree), operator, piece - 1).unwrap();
		assert!(verdict(&job, &before).is_ok());
	}
	let finite = run(&cnn(), 1, 0, None);
	assert_eq!(touchstone_kernels::referee::first_non_finite_piece(&graph, &finite.trace), Ok(None));
	// An infinity that tanh hides from the loss and the state is refused all the same.
	let (model, train, mut data) = mlp();
	assert!(matches!(model, ModelConfig::Mlp { activation: Activation::Tanh, .. }));
	data.features.iter_mut().for_each(|feature| *feature = f32::MAX);
	let mut trainer = Trainer::new(CpuBackend, &model, &train, data).unwrap();
	assert_eq!(trainer.step().err(), Some(touchstone_kernels::KernelError::NonFinite { step: 0 }));
	// An overflowed sum of squares is an infinite norm, not a finite one.
	assert_eq!(touchstone_kernels::arith::math::sqrt(f32::INFINITY), f32::INFINITY);
	assert_eq!(touchstone_kernels::global_grad_norm([[f32::MAX, f32::MAX].as_slice()]), f32::INFINITY);

	// A party whose producer tree commits a NaN (or an infinity): the word is
	// proven, and refused as input to any piece.
	let job = mlp();
	let (honest, case) = honest_case(&job);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let operator = case.0.position.operator as usize;
	let Origin::Node { node: producer, .. } = graph.value(graph.nodes[operator].inputs[0]).unwrap().origin else {
		panic!("the weight gradient's first input is an activation")
	};
	for word in [f32::NAN.to_bits(), f32::INFINITY.to_bits(), f32::NEG_INFINITY.to_bits(), 0x7fc0_0001] {
		let mut tampered = case.clone();
		let opening = &mut tampered.1.inputs[0];
		opening.segments[0].words[0] = word;
		let mut leaves = honest.trace.pieces[producer].leaves().to_vec();
		leaves[opening.proof.indices[0] as usize] = touchstone_kernels::proof::merkle::index_segment_leaf(&opening.segments[0].words);
		let producer_tree = MerkleTree::new(leaves).unwrap();
		let opened: Vec<usize> = opening.proof.indices.iter().map(|&i| i as usize).collect();
		opening.proof = producer_tree.multiproof(&opened).unwrap();
		let mut operator_leaves = honest.trace.operators.leaves().to_vec();
		let kind = graph.nodes[producer].kind.code();
		operator_leaves[producer] =
			touchstone_kernels::proof::chain::operator_leaf(producer as u32, kind, producer_tree.len() as u32, &producer_tree.root());
		let operator_tree = MerkleTree::new(operator_leaves).unwrap();
		tampered.0.operator_root = operator_tree.root();
		tampered.1.operator_proof = operator_tree.proof(operator).unwrap();
		for opening in &mut tampered.1.operators {
			opening.proof = operator_tree.proof(opening.operator as usize).unwrap();
			if opening.operator as usize == producer {
				opening.piece_root = producer_tree.root();
			}
		}
		assert_eq!(recomputed(&job, &tampered), Err(RefereeError::NonFiniteInput { input: 0 }), "{word:08x}");
	}
}

#[cfg(feature = "codec")]
#[test]
fn a_dispute_and_its_openings_survive_scale_encoding_and_are_judged_the_same() {
	use codec::{Decode, Encode};
	let job = mlp();
	let (_, case) = honest_case(&job);
	let bytes = case.encode();
	let decoded = Case::decode(&mut bytes.as_slice()).unwrap();
	assert_eq!(decoded, case);
	let judged: Result<Verdict, RefereeError> = verdict(&job, &decoded);
	let round_trip = <Result<Verdict, RefereeError>>::decode(&mut judged.encode().as_slice()).unwrap();
	assert_eq!(round_trip, judged);
	assert!(judged.is_ok());
	let _ = scale_info::meta_type::<Dispute>();
	let _ = scale_info::meta_type::<Openings>();
}

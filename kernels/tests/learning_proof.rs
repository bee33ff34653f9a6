//! The learning proof end to end: the state-hash chain, the operator-level and
//! piece-level commitments of a step, the three-level bisection between an
//! honest and a dishonest trace, and the referee's verdicts and named errors.

mod support;

use support::*;
use touchstone_kernels::bisection::bisect;
use touchstone_kernels::data::{synthetic, Dataset};
use touchstone_kernels::graph::{Graph, OpKind, Origin, Piece};
use touchstone_kernels::merkle::{depth, MerkleTree, SEGMENT};
use touchstone_kernels::model::{ModelConfig, OptimizerConfig, TrainConfig};
use touchstone_kernels::reduction::Reduction;
use touchstone_kernels::referee::{open_case, recompute, referee, RefereeError, RunOpening, StateOpening};
use touchstone_kernels::trace::{trace_leaf, Fault, StepTrace, Trainer};
use touchstone_kernels::{Activation, ChunkId, CpuBackend, Digest};

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

/// A run: its per-step state hashes, and a full trace of step `traced`.
struct Run {
	hashes: Vec<Digest>,
	trace: StepTrace,
	anchor: Digest,
	/// The training set and its tree.
	data: Dataset,
	data_tree: MerkleTree,
}

impl Run {
	/// The step-level tree.
	fn tree(&self) -> MerkleTree {
		MerkleTree::new(self.hashes.iter().map(trace_leaf).collect()).unwrap()
	}

	/// What the prover opens cases from, with the step-level tree `tree`.
	fn opening<'a>(&'a self, tree: &'a MerkleTree) -> RunOpening<'a> {
		RunOpening { trace: tree, first_step: 0, anchor: self.anchor, dataset: &self.data, dataset_tree: &self.data_tree }
	}
}

/// Runs `steps` steps of a job, tracing step `traced`, with an optional fault.
fn run(job: &(ModelConfig, TrainConfig, Dataset), steps: u32, traced: u32, fault: Option<Fault>) -> Run {
	let (model, train, data) = job;
	let mut trainer = Trainer::new(CpuBackend, model, train, data.clone()).unwrap();
	let anchor = trainer.last_hash();
	if let Some(fault) = fault {
		trainer.inject(fault);
	}
	let mut hashes = Vec::new();
	let mut trace = None;
	for step in 0..steps {
		if step == traced {
			let traced = trainer.trace_step().unwrap();
			hashes.push(traced.record.state_hash);
			trace = Some(traced);
		} else {
			hashes.push(trainer.step().unwrap().state_hash);
		}
	}
	Run { hashes, trace: trace.unwrap(), anchor, data: data.clone(), data_tree: data.tree().unwrap() }
}

#[test]
fn a_traced_step_commits_the_same_state_as_a_plain_step() {
	for job in [mlp(), cnn()] {
		let plain = {
			let (model, train, data) = &job;
			let mut trainer = Trainer::new(CpuBackend, model, train, data.clone()).unwrap();
			(0..3).map(|_| trainer.step().unwrap()).collect::<Vec<_>>()
		};
		let traced = run(&job, 3, 2, None);
		assert_eq!(traced.hashes, plain.iter().map(|r| r.state_hash).collect::<Vec<_>>());
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let trace = &traced.trace;
		assert_eq!(trace.record, plain[2]);
		// Operator 0's pieces are the batch, the last operator's the new state.
		assert_eq!(trace.pieces[0].root(), plain[2].batch_root);
		assert_eq!(trace.pieces.last().unwrap().root(), plain[2].state_root);
		assert_eq!(trace.previous_state.root(), plain[1].state_root);
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
fn dispute(job: &(ModelConfig, TrainConfig, Dataset), steps: u32, step: u32, operator: usize, fault: Fault) -> bool {
	let honest = run(job, steps, step, None);
	let dishonest = run(job, steps, step, Some(fault));
	if honest.hashes == dishonest.hashes {
		return false;
	}
	// Level 1: steps.
	let level1 = bisect(&honest.tree(), &dishonest.tree()).unwrap();
	assert_eq!((level1.leaf, level1.rounds), (step as usize, depth(steps as usize)));
	dispute_within_step(job, &honest, &dishonest, operator, fault);
	true
}

/// Levels 2 and 3 and the referee, for two traces of the same step.
fn dispute_within_step(job: &(ModelConfig, TrainConfig, Dataset), honest: &Run, dishonest: &Run, operator: usize, fault: Fault) {
	let graph = Graph::build(&job.0, &job.1).unwrap();
	// Level 2: operators of that step.
	let level2 = bisect(&honest.trace.operators, &dishonest.trace.operators).unwrap();
	assert_eq!((level2.leaf, level2.rounds), (operator, depth(graph.nodes.len())), "{fault:?}");
	// Level 3: pieces of that operator.
	let pieces = (&honest.trace.pieces[operator], &dishonest.trace.pieces[operator]);
	let level3 = bisect(pieces.0, pieces.1).unwrap();
	assert_eq!(level3.leaf, expected_piece(&graph, operator, &fault), "{fault:?}");
	assert_eq!(level3.rounds, depth(pieces.0.len()));

	// The referee, from the honest party's openings.
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	let case = open_case(&graph, &honest.trace, &opening, operator, level3.leaf).unwrap();
	assert_eq!(referee(&job.0, &job.1, &case).unwrap().output, pieces.0.leaves()[level3.leaf]);
	let dishonest_claim = touchstone_kernels::referee::RefereeCase {
		claimed_output: pieces.1.leaves()[level3.leaf],
		..case.clone()
	};
	assert_eq!(
		referee(&job.0, &job.1, &dishonest_claim),
		Err(RefereeError::WrongClaimedOutput {
			claimed: pieces.1.leaves()[level3.leaf],
			recomputed: pieces.0.leaves()[level3.leaf]
		})
	);
}

/// Flips a bit of one element of every output of every operator (but the
/// batch and the commit) that the state depends on, trying elements until the
/// flip changes the state. The loss and the clipping norm are committed at
/// the operator level but feed nothing: a flip there changes no state hash,
/// so there is no step-level dispute to play, and they are skipped.
fn every_operator_output(job: &(ModelConfig, TrainConfig, Dataset)) {
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
			let located = (0..len).rev().step_by(7).take(6).any(|element| {
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
				assert_eq!(referee(&job.0, &job.1, &case).unwrap().output, pieces.leaves()[piece], "{operator}#{piece}");
				// Every piece reads a bounded slice, whatever the batch or the model:
				// at most 1,024 elements (two segments more when unaligned) or 32 rows.
				let words: usize = case.inputs.iter().flat_map(|i| &i.segments).map(|s| s.words.len()).sum();
				let bound = match reduction {
					Reduction::SoftmaxCrossEntropy(shape) => 32 * (shape.classes + 1) + 2 * SEGMENT,
					_ => 1024 + 2 * SEGMENT * 32,
				};
				assert!(words <= bound, "{operator}#{piece} reads {words} words");
				assert!(case.pieces.len() <= 2, "{operator}#{piece}");
			}
		}
	}
}

#[test]
fn the_referee_judges_every_batch_piece_against_the_dataset_root() {
	for job in [mlp(), cnn()] {
		let graph = Graph::build(&job.0, &job.1).unwrap();
		let honest = run(&job, 3, 2, None);
		let tree = honest.tree();
		let opening = honest.opening(&tree);
		let pieces = &honest.trace.pieces[0];
		assert_eq!(pieces.root(), honest.trace.record.batch_root);
		for piece in 0..pieces.len() {
			let case = open_case(&graph, &honest.trace, &opening, 0, piece).unwrap();
			assert_eq!(referee(&job.0, &job.1, &case).unwrap().output, pieces.leaves()[piece], "batch piece {piece}");
			let mut wrong = case.clone();
			wrong.claimed_output[1] ^= 4;
			assert!(matches!(referee(&job.0, &job.1, &wrong), Err(RefereeError::WrongClaimedOutput { .. })));
			// Features and labels are read from the dataset; the sample indices are drawn from the seed.
			let Piece::Segment { value, .. } = graph.piece(0, piece).unwrap() else { panic!("a batch piece is a segment") };
			assert_eq!(case.inputs.is_empty(), value == 2, "batch piece {piece}");
			if value < 2 {
				let mut other_dataset = case.clone();
				other_dataset.commitments.dataset_root[0] ^= 1;
				assert_eq!(recompute(&job.0, &job.1, &other_dataset), Err(RefereeError::InvalidInputProof { input: 0 }));
				let mut forged_row = case.clone();
				forged_row.inputs[0].segments[0].words[0] ^= 1 << 20;
				assert_eq!(recompute(&job.0, &job.1, &forged_row), Err(RefereeError::InvalidInputProof { input: 0 }));
			}
			// A different training-set size draws a different batch.
			let mut resized = case.clone();
			resized.commitments.samples += 1;
			assert!(referee(&job.0, &job.1, &resized).is_err(), "batch piece {piece}");
			// A training set too large to draw in the runtime is not a valid job.
			let mut huge = case.clone();
			huge.commitments.samples = touchstone_kernels::data::MAX_SAMPLES as u32 + 1;
			assert_eq!(recompute(&job.0, &job.1, &huge), Err(RefereeError::InvalidJob), "batch piece {piece}");
		}
	}
}

/// An honest case for a contraction accumulator piece of step 2.
fn honest_case(job: &(ModelConfig, TrainConfig, Dataset)) -> (Run, touchstone_kernels::referee::RefereeCase) {
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
fn the_referee_rejects_a_wrong_claimed_output() {
	let job = mlp();
	let (_, case) = honest_case(&job);
	let right = referee(&job.0, &job.1, &case).unwrap();
	let mut wrong = case.clone();
	wrong.claimed_output[5] ^= 0x10;
	assert_eq!(
		referee(&job.0, &job.1, &wrong),
		Err(RefereeError::WrongClaimedOutput { claimed: wrong.claimed_output, recomputed: right.output })
	);
}

#[test]
fn the_referee_rejects_a_wrong_input_proof() {
	let job = mlp();
	let (honest, case) = honest_case(&job);
	// A value changed under an honest proof.
	let mut tampered = case.clone();
	tampered.inputs[0].segments[0].words[3] ^= 1 << 22;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A forged node.
	let mut tampered = case.clone();
	tampered.inputs[1].proof.hashes[0][0] ^= 1;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidInputProof { input: 1 }));
	// An honest segment presented as another one.
	let mut tampered = case.clone();
	tampered.inputs[0].segments[0].segment += 1;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A short segment.
	let mut tampered = case.clone();
	tampered.inputs[0].segments[0].words.pop();
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidInputProof { input: 0 }));
	// A segment left out under a valid proof of the rest is missing, not silently zero.
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let producer = match graph.value(graph.nodes[case.operator as usize].inputs[0]).unwrap().origin {
		Origin::Node { node, .. } => node,
		Origin::State(_) => panic!("the weight gradient's first input is an activation"),
	};
	let mut tampered = case.clone();
	let dropped = tampered.inputs[0].segments.remove(0).segment;
	let kept: Vec<usize> = tampered.inputs[0].proof.indices[1..].iter().map(|&i| i as usize).collect();
	tampered.inputs[0].proof = honest.trace.pieces[producer].multiproof(&kept).unwrap();
	assert_eq!(
		recompute(&job.0, &job.1, &tampered),
		Err(RefereeError::MissingInput { input: 0, segment: dropped })
	);
	// A forged previous state.
	let mut tampered = case.clone();
	if let StateOpening::Step { state_root, .. } = &mut tampered.previous_state {
		state_root[0] ^= 1;
	}
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidStateProof));
	// A forged producer leaf.
	let mut tampered = case.clone();
	tampered.operators[0].piece_root[0] ^= 1;
	let operator = tampered.operators[0].operator;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidOperatorProof { operator }));
	// A forged earlier piece.
	let mut tampered = case.clone();
	tampered.pieces[0].words[0] ^= 1;
	let piece = tampered.pieces[0].piece;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidPieceProof { piece }));
	// A piece root that the disputed operator's leaf does not commit.
	let mut tampered = case.clone();
	tampered.commitments.piece_root[0] ^= 1;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidOperatorProof { operator: case.operator }));
	let mut tampered = case.clone();
	tampered.operator_proof.siblings[0][0] ^= 1;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::InvalidOperatorProof { operator: case.operator }));
	// An opening outside the agreed prefix.
	let mut tampered = case.clone();
	tampered.operators[0].operator = tampered.operator;
	assert_eq!(recompute(&job.0, &job.1, &tampered), Err(RefereeError::NotAgreed));
}

#[test]
fn the_referee_rejects_out_of_range_ids() {
	let job = mlp();
	let (_, case) = honest_case(&job);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let count = graph.piece_count(case.operator as usize).unwrap() as u32;
	let mut out = case.clone();
	out.chunk = count;
	assert_eq!(recompute(&job.0, &job.1, &out), Err(RefereeError::ChunkOutOfRange { chunk: count, count }));
	out.chunk = u32::MAX;
	assert_eq!(recompute(&job.0, &job.1, &out), Err(RefereeError::ChunkOutOfRange { chunk: u32::MAX, count }));
	let mut out = case.clone();
	out.operator = graph.nodes.len() as u32;
	assert_eq!(
		recompute(&job.0, &job.1, &out),
		Err(RefereeError::OperatorOutOfRange { operator: out.operator, count: out.operator })
	);
	let mut out = case.clone();
	out.step = 4;
	assert_eq!(recompute(&job.0, &job.1, &out), Err(RefereeError::StepOutOfRange { step: 4 }));
	let mut out = case.clone();
	out.operator = 0;
	out.chunk = 0;
	out.operators.clear();
	out.pieces.clear();
	out.inputs.clear();
	// The case's operator proof is for another operator.
	assert_eq!(recompute(&job.0, &job.1, &out), Err(RefereeError::InvalidOperatorProof { operator: 0 }));
}

#[test]
fn the_first_step_is_judged_against_the_anchor() {
	let job = mlp();
	let honest = run(&job, 3, 0, None);
	let graph = Graph::build(&job.0, &job.1).unwrap();
	let tree = honest.tree();
	let opening = honest.opening(&tree);
	// The first operator that reads parameters: the first layer's matmul.
	let case = open_case(&graph, &honest.trace, &opening, 1, 0).unwrap();
	assert!(matches!(case.previous_state, StateOpening::Anchor { .. }));
	referee(&job.0, &job.1, &case).unwrap();
	let mut wrong_anchor = case.clone();
	wrong_anchor.commitments.anchor[0] ^= 1;
	assert_eq!(recompute(&job.0, &job.1, &wrong_anchor), Err(RefereeError::InvalidStateProof));
}

#[cfg(feature = "codec")]
#[test]
fn a_case_survives_scale_encoding_and_is_judged_the_same() {
	use codec::{Decode, Encode};
	use touchstone_kernels::referee::{RefereeCase, Verdict};
	let job = mlp();
	let (_, case) = honest_case(&job);
	let bytes = case.encode();
	let decoded = RefereeCase::decode(&mut bytes.as_slice()).unwrap();
	assert_eq!(decoded, case);
	let verdict: Result<Verdict, RefereeError> = referee(&job.0, &job.1, &decoded);
	let round_trip = <Result<Verdict, RefereeError>>::decode(&mut verdict.encode().as_slice()).unwrap();
	assert_eq!(round_trip, verdict);
	assert!(verdict.is_ok());
	let _ = scale_info::meta_type::<RefereeCase>();
}

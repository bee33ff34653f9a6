//! The referee's pieces of a transformer's own operators, against a step run on the
//! reference: every piece of every residual sum, gather, head copy, normalisation, causal
//! softmax (and its gradient), normalisation's backward, scatter-add and batched matmul is
//! recomputed from exactly the inputs
//! the prover opens for it, equals the honest piece bit for bit, and reads no more than
//! the cost model bounds.

use alloc::vec;
use alloc::vec::Vec;

use super::prover::{data_reads, gather_reads, requirements};
use super::*;
use crate::exec::cpu::CpuBackend;
use crate::exec::graph::GraphBuffers;
use crate::job::trace::HostTensor;
use crate::job::transformer::{TransformerConfig, TransformerTraining};
use crate::ops::norm::Norm;
use crate::ops::schedule::WarmupCosine;
use crate::arith::rng::RandomStream;

/// Every value of one training step of `config` on random windows, as canonical words by
/// value id, with the graph.
fn traced_step(config: TransformerConfig, sequences: usize) -> (Graph, Vec<Vec<u32>>) {
	let positions = config.context as usize;
	let training = TransformerTraining {
		batch: sequences,
		schedule: WarmupCosine { peak: 1e-3, floor: 1e-4, warmup_steps: 1, total_steps: 4 },
		beta1: 0.9,
		beta2: 0.95,
		epsilon: 1e-8,
		weight_decay: 0.1,
		clip_norm: Some(1.0),
	};
	let graph = Graph::build_transformer(config, sequences, positions, Some(&training)).unwrap();
	let mut state = config.init(3).unwrap();
	// Gains and biases away from 1 and 0, so that every operand matters.
	for (index, tensor) in state.iter_mut().enumerate() {
		let mut noise = vec![0.0f32; tensor.len()];
		RandomStream::new(3, 50 + index as u64).fill_uniform(-0.3, 0.3, &mut noise);
		crate::ops::residual::add_assign(tensor, &noise).unwrap();
	}
	let moments: Vec<Vec<f32>> = state.iter().chain(&state).map(|tensor| vec![0.0; tensor.len()]).collect();
	state.extend(moments);
	let draws = RandomStream::new(4, 1);
	let tokens: Vec<u32> = (0..sequences * positions).map(|i| draws.word(i as u64) % config.vocab).collect();
	let targets: Vec<u32> = (0..sequences * positions).map(|i| draws.word(i as u64 + 10_000) % config.vocab).collect();
	let places: Vec<u32> = (0..sequences * positions).map(|row| (row % positions) as u32).collect();

	let backend = &mut CpuBackend;
	let mut values = vec![Vec::new(); graph.values.len()];
	for (&id, tensor) in graph.state.iter().zip(&state) {
		values[id] = words_of(tensor);
	}
	let mut buffers = GraphBuffers::new(backend, &graph, state).unwrap();
	for (&id, rows) in graph.batch_values.iter().zip([tokens, targets, places]) {
		buffers.put_indices(&graph, id, rows.clone()).unwrap();
		values[id] = rows;
	}
	for (id, node) in graph.nodes.iter().enumerate().skip(1) {
		buffers.run(backend, &graph, id, 0).unwrap();
		for &output in &node.outputs {
			values[output] = words_of(buffers.tensor(&graph, output).unwrap());
		}
	}
	(graph, values)
}

/// Whether operator `kind` is one this module checks.
fn checked(kind: OpKind) -> bool {
	matches!(
		kind,
		OpKind::Residual
			| OpKind::Gather { .. }
			| OpKind::SplitHeads(_)
			| OpKind::MergeHeads(_)
			| OpKind::Norm(_)
			| OpKind::NormGrad(_)
			| OpKind::ScatterAddRows { .. }
			| OpKind::CausalSoftmax(_)
			| OpKind::CausalSoftmaxGrad(_)
			| OpKind::Contract(Contraction::BatchedMatmul { .. })
	)
}

/// Recomputes every piece of every checked operator of `config`'s step from the inputs
/// the prover would open, and compares.
fn check_every_piece(config: TransformerConfig, sequences: usize) {
	let (graph, values) = traced_step(config, sequences);
	let mut judged = 0;
	for (operator, node) in graph.nodes.iter().enumerate().filter(|(_, node)| checked(node.kind)) {
		let reduction = graph.reduction(operator).unwrap();
		let honest_accumulators = match (node.kind, &reduction) {
			(OpKind::Contract(contraction), _) => {
				let operand = |position: usize| values[node.inputs[position]].iter().map(|&w| f32::from_bits(w)).collect::<Vec<_>>();
				crate::job::trace::accumulators(contraction, &operand(0), &operand(1), None).unwrap()
			},
			(_, Some(reduction)) => {
				let word = |position: usize, index: usize| Ok::<u32, crate::error::KernelError>(values[node.inputs[position]][index]);
				reduction.partials(word, None).unwrap()
			},
			_ => Vec::new(),
		};
		let bound = cost::piece_cost(&graph, operator, 1, 1).unwrap().words;
		for piece in 0..graph.piece_count(operator).unwrap() {
			let decoded = graph.piece(operator, piece).unwrap();
			let (mut inputs, pieces) = requirements(&graph, operator, piece).unwrap();
			let ids = node.inputs.get(1).map(|&id| HostTensor::U32(values[id].clone()));
			match (node.kind, decoded) {
				(OpKind::Gather { row_len }, Piece::Segment { segment, .. }) => {
					inputs.insert(0, (0, gather_reads(&graph, operator, row_len, segment, ids.as_ref().unwrap()).unwrap()));
				},
				(_, Piece::Partial { lane, span }) => {
					let reads = data_reads(reduction.as_ref().unwrap(), lane, span, || Ok(ids.as_ref().unwrap()));
					if !reads.is_empty() {
						inputs.insert(0, (0, reads));
					}
				},
				_ => {},
			}
			// Exactly the opened segments, and what opening them costs (a state input opens
			// whole chunks).
			let mut opened_words = 0u64;
			let mut segments: Vec<Segments<'_>> = vec![Segments::new(); node.inputs.len()];
			for (position, list) in &inputs {
				let value = graph.value(node.inputs[*position]).unwrap();
				let is_state = matches!(value.origin, Origin::State(_));
				let mut chunks: Vec<usize> = list.iter().map(|s| s / SEGMENTS_PER_CHUNK).collect();
				chunks.dedup();
				opened_words += if is_state { (chunks.len() * CHUNK_WORDS) as u64 } else { (list.len() * SEGMENT) as u64 };
				for &segment in list {
					let words = &values[node.inputs[*position]];
					let range = segment_range(words.len(), segment);
					segments[*position].insert(segment, &words[range]);
				}
			}
			let previous: Vec<Vec<u32>> = pieces.iter().map(|&index| words_of(&honest_accumulators[index])).collect();
			opened_words += previous.iter().map(|words| words.len() as u64).sum::<u64>();
			assert!(opened_words <= bound, "{} piece {piece} opens {opened_words} words, over the bound {bound}", node.kind.name());
			let reader = Inputs { graph: &graph, segments: &segments, last: core::cell::Cell::new(None) };
			let earlier: BTreeMap<usize, &[u32]> = previous.iter().zip(&pieces).map(|(words, &index)| (index, words.as_slice())).collect();
			let proven = Proven { reader: &reader, pieces: &earlier };
			let (recomputed, honest) = match (node.kind, decoded) {
				(_, Piece::Partial { lane, span }) => {
					let recomputed = words_of(&reduction.as_ref().unwrap().partial(lane, span, &proven).unwrap());
					(recomputed, words_of(&honest_accumulators[piece]))
				},
				(_, Piece::Segment { value, segment }) if reduction.is_some() => {
					let recomputed = words_of(&reduction.as_ref().unwrap().output_segment(value, segment, &proven).unwrap());
					let output = &values[node.outputs[value]];
					(recomputed, output[segment_range(output.len(), segment)].to_vec())
				},
				(OpKind::Contract(contraction), Piece::Accumulator(id)) => {
					let previous = previous.first().map(Vec::as_slice);
					let recomputed = accumulator_piece(contraction, id, &reader, previous.as_ref()).unwrap();
					(recomputed, words_of(&honest_accumulators[piece]))
				},
				(OpKind::Contract(contraction), Piece::Segment { segment, .. }) => {
					let tiles: BTreeMap<usize, &[u32]> = previous.iter().zip(&pieces).map(|(words, &index)| (index, words.as_slice())).collect();
					let output = &values[node.outputs[0]];
					let recomputed = contraction_output_segment(contraction, output.len(), segment, &tiles).unwrap();
					(recomputed, output[segment_range(output.len(), segment)].to_vec())
				},
				(_, Piece::Segment { value, segment }) => {
					let recomputed = operator_segment(&graph, operator, 0, value, segment, &reader).unwrap();
					let output = &values[node.outputs[value]];
					(recomputed, output[segment_range(output.len(), segment)].to_vec())
				},
				other => panic!("unexpected piece {other:?}"),
			};
			assert_eq!(recomputed, honest, "{} (operator {operator}) piece {piece}", node.kind.name());
			judged += 1;
		}
	}
	assert!(judged > 100, "only {judged} pieces");
}

/// Width and head width off the 32 grid, a context shorter than a segment, LayerNorm and
/// tied embeddings.
#[test]
fn short_rows_are_judged_from_what_the_prover_opens() {
	check_every_piece(TransformerConfig { vocab: 11, context: 9, layers: 1, heads: 2, width: 40, mlp_ratio: 2, norm: Norm::Layer, tied_embeddings: true }, 3);
}

/// A row narrower than a segment and a context longer than one: rows of the norm and of
/// the attention straddle segments, RMSNorm, an untied head.
#[test]
fn long_rows_are_judged_from_what_the_prover_opens() {
	check_every_piece(TransformerConfig { vocab: 7, context: 40, layers: 1, heads: 3, width: 24, mlp_ratio: 1, norm: Norm::Rms, tied_embeddings: false }, 2);
}

/// A tiny vocabulary over more rows than a scatter-add span: each token's rows fill many
/// rule-4 chunks, which close inside spans and across them.
#[test]
fn many_lookups_of_few_tokens_are_judged_from_what_the_prover_opens() {
	check_every_piece(TransformerConfig { vocab: 2, context: 33, layers: 1, heads: 1, width: 8, mlp_ratio: 1, norm: Norm::Layer, tied_embeddings: true }, 20);
}

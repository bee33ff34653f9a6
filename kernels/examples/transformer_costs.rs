//! What the referee's cost model bounds for one piece of each operator of a transformer's
//! step: the words a piece opens and the Merkle hashes that check them, the largest over
//! each kind of operator, for the character model of the Shakespeare figures (4 blocks,
//! 4 heads, width 128, context 64, 84 tokens, 16 sequences) and for one GPT-2-small-shaped
//! block (width 768, 12 heads, context 1,024, an MLP of 4×, GPT-2's 50,257 tokens, tied,
//! 8 sequences). The bounds are what the disputes pallet's weights scale with.
//!
//! It also times what the proof adds to training between disputes: the state root of the
//! character model's state (parameters and both moments), which a run computes at every
//! checkpoint boundary, against one training step of the reference (one thread, the
//! median of 11).
//!
//! And the prover's memory for the largest piece tree of a GPT-2-sized step, the token
//! embedding's gradient (a scatter-add over 50,257 × 768): its partials hashed as they are
//! made, with the time and the process's peak resident memory.
//!
//! `cargo run --locked -p touchstone-kernels --example transformer_costs`

use std::collections::BTreeMap;
use std::time::Instant;

use touchstone_kernels::exec::parallel::set_threads;
use touchstone_kernels::job::trace::state_root;
use touchstone_kernels::job::transformer::{batch_windows, TransformerConfig, TransformerState, TransformerTraining};
use touchstone_kernels::ops::norm::Norm;
use touchstone_kernels::ops::schedule::WarmupCosine;
use touchstone_kernels::error::KernelError;
use touchstone_kernels::proof::graph::Graph;
use touchstone_kernels::proof::merkle::segment_leaf;
use touchstone_kernels::proof::reduction::Reduction;
use touchstone_kernels::referee::piece_cost;

fn main() {
	let character = TransformerConfig { vocab: 84, context: 64, layers: 4, heads: 4, width: 128, mlp_ratio: 4, norm: Norm::Layer, tied_embeddings: true };
	let gpt2_block = TransformerConfig { vocab: 50_257, context: 1024, layers: 1, heads: 12, width: 768, mlp_ratio: 4, norm: Norm::Layer, tied_embeddings: true };
	for (name, config, sequences) in [("character model", character, 16), ("GPT-2-small block", gpt2_block, 8)] {
		report(name, config, sequences);
	}
	proof_share(character, 16);
	for sequences in [1, 8] {
		scatter_partials(sequences);
	}
}

/// The process's peak resident memory so far (Linux's `VmHWM`), in MB.
fn peak_resident_mb() -> f64 {
	let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
	let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap_or_default();
	let kilobytes: f64 = line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).unwrap_or_default();
	kilobytes / 1024.0
}

/// The leaves of the scatter-add's piece tree for GPT-2's token table at `sequences`
/// sequences of 1,024 (random ids, a synthetic `dy`), each partial hashed as it is made.
fn scatter_partials(sequences: usize) {
	let (row_len, table_rows, rows) = (768, 50_257, sequences * 1024);
	let reduction = Reduction::ScatterAddRows { row_len, table_rows, rows };
	let dy: Vec<u32> = (0..rows * row_len).map(|i| (((i % 1_000) as f32 - 500.0) * 1e-5).to_bits()).collect();
	let ids: Vec<u32> = (0..rows as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % table_rows as u32).collect();
	let word = |position: usize, index: usize| -> Result<u32, KernelError> {
		let values = if position == 0 { &dy } else { &ids };
		values.get(index).copied().ok_or(KernelError::MissingInput { position, index })
	};
	let before = peak_resident_mb();
	let start = Instant::now();
	let mut leaves = Vec::with_capacity(reduction.len());
	reduction
		.for_each_partial(word, None, |_, partial| {
			leaves.push(segment_leaf(partial));
			Ok(())
		})
		.expect("partials");
	let seconds = start.elapsed().as_secs_f64();
	println!(
		"
GPT-2's token-embedding gradient, {sequences} sequence(s): {} partials hashed in {seconds:.1} s; peak resident memory {before:.0} MB before, {:.0} MB after ({:.0} MB of them the {} leaves)",
		leaves.len(),
		peak_resident_mb(),
		(leaves.len() * 32) as f64 / 1_048_576.0,
		leaves.len(),
	);
}

/// The median of 11 timings of `run`, in milliseconds.
fn median_ms(mut run: impl FnMut()) -> f64 {
	let mut times: Vec<f64> = (0..11)
		.map(|_| {
			let start = Instant::now();
			run();
			start.elapsed().as_secs_f64() * 1e3
		})
		.collect();
	times.sort_by(f64::total_cmp);
	times[times.len() / 2]
}

fn proof_share(config: TransformerConfig, sequences: usize) {
	set_threads(1);
	let training = training(sequences);
	let mut state = TransformerState::new(config, 1).expect("a state");
	let stream: Vec<u32> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % config.vocab).collect();
	let mut step = 0;
	let step_ms = median_ms(|| {
		let windows = batch_windows(&stream, config.context as usize, sequences, 1, step).expect("windows");
		state.step(config, &training, &windows).expect("a step");
		step += 1;
	});
	let tensors: Vec<Vec<f32>> = state.params.iter().chain(&state.first_moments).chain(&state.second_moments).cloned().collect();
	let words: usize = tensors.iter().map(Vec::len).sum();
	let root_ms = median_ms(|| {
		state_root(&tensors).expect("a root");
	});
	println!("\ncharacter model, {sequences} sequences, one thread: step {step_ms:.1} ms; state root of {words} words {root_ms:.2} ms");
	println!("({:.2} % of a step at a boundary every step, {:.3} % at one every 50 steps)", 100.0 * root_ms / step_ms, 2.0 * root_ms / step_ms);
}

/// GPT-2's AdamW and a warm-up and cosine schedule over 2,000 steps, clipping at 1.
fn training(sequences: usize) -> TransformerTraining {
	TransformerTraining {
		batch: sequences,
		schedule: WarmupCosine { peak: 1e-3, floor: 1e-4, warmup_steps: 100, total_steps: 2000 },
		beta1: 0.9,
		beta2: 0.95,
		epsilon: 1e-8,
		weight_decay: 0.1,
		clip_norm: Some(1.0),
	}
}

fn report(name: &str, config: TransformerConfig, sequences: usize) {
	let training = training(sequences);
	let graph = Graph::build_transformer(config, sequences, config.context as usize, Some(&training)).expect("a valid transformer");
	// Per kind of operator: operators, pieces, and the largest bounds.
	let mut kinds: BTreeMap<&str, (usize, usize, u64, u64)> = BTreeMap::new();
	for (operator, node) in graph.nodes.iter().enumerate() {
		let cost = piece_cost(&graph, operator, 1, 1).expect("every operator has a bound");
		let pieces = graph.piece_count(operator).expect("pieces");
		let entry = kinds.entry(node.kind.name()).or_default();
		entry.0 += 1;
		entry.1 += pieces;
		entry.2 = entry.2.max(cost.words);
		entry.3 = entry.3.max(cost.hashes);
	}
	println!("\n{name}: {} parameters, {} operators\n", config.parameter_count(), graph.nodes.len());
	println!("| operator | count | pieces | words opened, worst | hashes, worst |");
	println!("|---|---:|---:|---:|---:|");
	for (kind, (count, pieces, words, hashes)) in kinds {
		println!("| {kind} | {count} | {pieces} | {words} | {hashes} |");
	}
}

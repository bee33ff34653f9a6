//! Times the referee inside the runtime's wasm blob, piece by piece, for every operator
//! of a digits-sized and of an MNIST-sized training step and of the character
//! transformer's, and for each kind of operator of a GPT-2-small-shaped block, and prints
//! the worst case of each. Run with
//! `scripts/bench-referee.sh` (or `cargo run -p touchstone-runtime --example referee_wasm_bench`).
//!
//! Every runtime call creates a fresh wasm instance, as the node does for each call;
//! `Core_version` is timed the same way so that instantiation can be told apart from
//! the referee's own work.
//!
//! With `TOUCHSTONE_PROFILE_CASE=LABEL` (a row's label, such as `146:matmul#1535`) a
//! section judges that one case 4,000 times in wasm instead of timing every case: run it
//! under `perf record` with `WASMTIME_PROFILING_STRATEGY=perfmap` to see where the
//! referee's time goes, function by function.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects)]

#[path = "../tests/common/mod.rs"]
mod common;

use codec::Encode;
use common::{digits_sized_job, honest_cases, honest_cases_on, mnist_sized_job, Case, WasmRuntime};
use polkadot_sdk::sp_runtime::{BoundedVec, FixedU64};
use touchstone_kernels::{job::text::TokenStream, proof::graph::Node};
use touchstone_primitives::{Activation, HyperParams, ModelArch, Normalization, Optimizer};
use std::time::{Duration, Instant};
use touchstone_primitives::referee::judge;

const REPEATS: usize = 20;

/// The median of `REPEATS` timings of `run`.
fn median(mut run: impl FnMut()) -> Duration {
	run(); // warm-up: the first call compiles the module
	let mut times: Vec<Duration> = (0..REPEATS)
		.map(|_| {
			let start = Instant::now();
			run();
			start.elapsed()
		})
		.collect();
	times.sort();
	times[REPEATS / 2]
}

fn main() {
	let mut runtime = WasmRuntime::new();
	let baseline = median(|| {
		runtime.call("Core_version", &[]);
	});
	println!("wasm instantiation and call overhead (Core_version): {:>9.1} µs", baseline.as_secs_f64() * 1e6);
	// Sections to run (`mlp`, `transformer`, `gpt2`, `graph`, `batch`); all without arguments.
	let sections: Vec<String> = std::env::args().skip(1).collect();
	let wanted = |section: &str| sections.is_empty() || sections.iter().any(|s| s == section);
	// Training-set sizes as in the digits training split and in MNIST: a batch piece
	// draws the epoch's permutation, so its cost follows the training set's size.
	let mlps = [("digits-sized", digits_sized_job(), 1437), ("MNIST-sized", mnist_sized_job(), 60_000)];
	for (job, (model, hyper), samples) in mlps.into_iter().filter(|_| wanted("mlp")) {
		let cases = honest_cases(&model, &hyper, 2, samples);
		println!("\n{job} step (AdamW with clipping, {samples} training samples)");
		report(&mut runtime, &model, &hyper, &cases, baseline, job);
	}

	// Transformers: the character model on the Shakespeare stream (every operator), and
	// one GPT-2-small-shaped block on a synthetic stream of GPT-2's vocabulary (the first
	// operator of each kind: pieces cost the same in every block).
	let corpus = touchstone_kernels::job::text::load_shakespeare().expect("the Shakespeare corpus (scripts/setup-data.sh)");
	let (training, _) = corpus.split();
	let character = transformer(corpus.vocab_len() as u32, 64, 4, 4, 128);
	let gpt2_block = transformer(50_257, 1_024, 1, 12, 768);
	let character_stream = TokenStream { tokens: training[..64 * 1_000 + 1].to_vec(), vocab: corpus.vocab_len() as u32 };
	let mut seed = 7u64;
	let gpt2_tokens = (0..1_024 * 16 + 1)
		.map(|_| {
			seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
			((seed >> 33) % 50_257) as u32
		})
		.collect();
	let gpt2_stream = TokenStream { tokens: gpt2_tokens, vocab: 50_257 };
	let every_kind = |graph_kinds: &mut Vec<&'static str>, node: &Node| {
		let fresh = !graph_kinds.contains(&node.kind.name());
		if fresh {
			graph_kinds.push(node.kind.name());
		}
		fresh
	};
	let transformers = [
		("transformer", "character transformer (4 blocks, width 128, context 64)", character.clone(), 12, character_stream, true),
		("gpt2", "GPT-2-small-shaped block (width 768, 12 heads, context 1,024, 50,257 tokens)", gpt2_block, 1, gpt2_stream, false),
	];
	for (_, job, model, batch, stream, all) in transformers.into_iter().filter(|(section, ..)| wanted(section)) {
		let ModelArch::Transformer { context, .. } = model else { unreachable!() };
		let hyper = transformer_hyper(batch);
		let seen = std::cell::RefCell::new(Vec::new());
		let started = Instant::now();
		let cases = honest_cases_on(&model, &hyper, 1, stream.cut_to_windows(context as usize).into(), |_, node| {
			all || every_kind(&mut seen.borrow_mut(), node)
		});
		println!("\n{job}, {batch} sequences a step: {} cases opened in {:.1} s", cases.len(), started.elapsed().as_secs_f64());
		report(&mut runtime, &model, &hyper, &cases, baseline, job);
	}

	// What rebuilding a transformer's step graph costs the referee: a case whose operator
	// lies past the graph's end is refused right after the graph is built, so its time is
	// instantiation, decoding and the build. Per operator, between one block and thirteen.
	if wanted("graph") {
		let hyper = transformer_hyper(12);
		let mut cases = honest_cases_on(&character, &hyper, 1, TokenStream { tokens: training[..64 * 100 + 1].to_vec(), vocab: corpus.vocab_len() as u32 }.cut_to_windows(64).into(), |operator, _| operator == 0);
		let (_, mut case) = cases.swap_remove(0);
		case.0.position.operator = u32::MAX;
		println!("\nRebuilding a character transformer's step graph (width 128, context 64, batch 12): a case refused past the last operator");
		println!("{:>7} {:>10} {:>12} {:>12} {:>14} {:>16}", "blocks", "operators", "native µs", "wasm µs", "wasm - base", "wasm µs/operator");
		let mut first = None;
		for layers in [1, 4, 8, 13] {
			let model = transformer(corpus.vocab_len() as u32, 64, layers, 4, 128);
			let operators = touchstone_primitives::referee::job_graph(&model, &hyper).expect("a graph").nodes.len();
			let native = median(|| {
				judge(&model, &hyper, &case.0, &case.1).expect_err("past the last operator");
			});
			let wasm = median(|| {
				runtime.judge(&model, &hyper, &case).expect_err("past the last operator");
			});
			let work = wasm.saturating_sub(baseline).as_secs_f64() * 1e6;
			let (operators0, work0) = *first.get_or_insert((operators, work));
			let slope = if operators > operators0 { (work - work0) / (operators - operators0) as f64 } else { f64::NAN };
			println!("{layers:>7} {operators:>10} {:>12.1} {:>12.1} {work:>14.1} {slope:>16.2}", native.as_secs_f64() * 1e6, wasm.as_secs_f64() * 1e6);
		}
	}
	if !wanted("batch") {
		return;
	}

	// A batch piece draws its rows' samples by random access: its cost must not
	// follow the training set's size. A small model keeps a 4,194,304-sample set in memory.
	let (_, hyper) = digits_sized_job();
	let model = ModelArch::Mlp {
		inputs: 16,
		hidden: BoundedVec::truncate_from(vec![16]),
		classes: 10,
		activation: Activation::Relu,
	};
	println!("\nBatch pieces against the training set's size (16 features, batch 32)");
	println!("{:>12} {:>10} {:>14} {:>14}", "samples", "pieces", "worst wasm µs", "worst - base");
	for samples in [1_797, 60_000, 4_194_304] {
		let cases = honest_cases(&model, &hyper, 2, samples);
		let mut worst = Duration::ZERO;
		let mut pieces = 0;
		for (_, case) in cases.iter().filter(|(label, _)| label.starts_with("0:")) {
			worst = worst.max(median(|| {
				runtime.judge(&model, &hyper, case).expect("honest");
			}));
			pieces += 1;
		}
		println!(
			"{:>12} {:>10} {:>14.1} {:>14.1}",
			samples,
			pieces,
			worst.as_secs_f64() * 1e6,
			worst.saturating_sub(baseline).as_secs_f64() * 1e6
		);
	}
}

/// Times every case natively and in wasm, prints a row each and the worst case; or, with
/// `TOUCHSTONE_PROFILE_CASE` naming one of `cases`, judges that case in a loop.
fn report(runtime: &mut WasmRuntime, model: &ModelArch, hyper: &HyperParams, cases: &[(String, Case)], baseline: Duration, job: &str) {
	if let Some(wanted) = std::env::var_os("TOUCHSTONE_PROFILE_CASE") {
		let Some((label, case)) = cases.iter().find(|(label, _)| wanted == label.as_str()) else {
			println!("{job}: no case {wanted:?}");
			return;
		};
		const CALLS: u32 = 4_000;
		let start = Instant::now();
		for _ in 0..CALLS {
			runtime.judge(model, hyper, case).expect("honest");
		}
		println!("{job}: {label} judged {CALLS} times in wasm, {:.1} µs a call", start.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS));
		return;
	}
	println!("{:<32} {:>10} {:>12} {:>12} {:>12}", "operator:kind#piece", "case bytes", "native µs", "wasm µs", "wasm - base");
	let mut worst = (String::new(), Duration::ZERO);
	for (label, case) in cases {
		let native = median(|| {
			judge(model, hyper, &case.0, &case.1).expect("honest");
		});
		let wasm = median(|| {
			runtime.judge(model, hyper, case).expect("honest");
		});
		let work = wasm.saturating_sub(baseline);
		println!(
			"{:<32} {:>10} {:>12.1} {:>12.1} {:>12.1}",
			label,
			case.0.encoded_size() + case.1.encoded_size(),
			native.as_secs_f64() * 1e6,
			wasm.as_secs_f64() * 1e6,
			work.as_secs_f64() * 1e6
		);
		if work > worst.1 {
			worst = (label.clone(), work);
		}
	}
	println!("{job} worst case: {} at {:.1} µs of wasm beyond instantiation", worst.0, worst.1.as_secs_f64() * 1e6);
}

/// A pre-norm transformer with LayerNorm, an MLP of 4× and tied embeddings.
fn transformer(vocab: u32, context: u32, layers: u32, heads: u32, width: u32) -> ModelArch {
	ModelArch::Transformer { vocab, context, layers, heads, width, mlp_ratio: 4, norm: Normalization::LayerNorm, tied_embeddings: true }
}

/// AdamW with decay on matrices and clipping at 1, as the Shakespeare example trains.
fn transformer_hyper(batch_size: u32) -> HyperParams {
	HyperParams {
		steps: 8,
		batch_size,
		learning_rate: FixedU64::from_rational(1, 1_000),
		optimizer: Optimizer::AdamW {
			beta1: FixedU64::from_rational(9, 10),
			beta2: FixedU64::from_rational(99, 100),
			epsilon: FixedU64::from_rational(1, 100_000_000),
			weight_decay: FixedU64::from_rational(1, 10),
		},
		grad_clip_norm: Some(FixedU64::from_u32(1)),
		seed: 3,
		checkpoint_interval: 4,
	}
}

//! Times the referee inside the runtime's wasm blob, piece by piece, for every operator
//! of a digits-sized and of an MNIST-sized training step, and prints the worst case of
//! each. Run with
//! `scripts/bench-referee.sh` (or `cargo run -p touchstone-runtime --example referee_wasm_bench`).
//!
//! Every runtime call creates a fresh wasm instance, as the node does for each call;
//! `Core_version` is timed the same way so that instantiation can be told apart from
//! the referee's own work.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing, clippy::arithmetic_side_effects)]

#[path = "../tests/common/mod.rs"]
mod common;

use codec::Encode;
use common::{digits_sized_job, honest_cases, mnist_sized_job, WasmRuntime};
use polkadot_sdk::sp_runtime::BoundedVec;
use touchstone_primitives::{Activation, ModelArch};
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
	// Training-set sizes as in the digits training split and in MNIST: a batch piece
	// draws the epoch's permutation, so its cost follows the training set's size.
	for (job, (model, hyper), samples) in
		[("digits-sized", digits_sized_job(), 1437), ("MNIST-sized", mnist_sized_job(), 60_000)]
	{
		let cases = honest_cases(&model, &hyper, 2, samples);
		println!("\n{job} step (AdamW with clipping, {samples} training samples)");
		println!("{:<32} {:>10} {:>12} {:>12} {:>12}", "operator:kind#piece", "case bytes", "native µs", "wasm µs", "wasm - base");
		let mut worst = (String::new(), Duration::ZERO);
		for (label, case) in &cases {
			let native = median(|| {
				judge(&model, &hyper, &case.0, &case.1).expect("honest");
			});
			let wasm = median(|| {
				runtime.judge(&model, &hyper, case).expect("honest");
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

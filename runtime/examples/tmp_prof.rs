#![allow(clippy::all)]
#[path = "../tests/common/mod.rs"]
mod common;
use common::{honest_cases, mnist_sized_job, WasmRuntime};
use std::time::{Duration, Instant};
fn median(mut run: impl FnMut()) -> Duration {
	run();
	let mut t: Vec<Duration> = (0..30).map(|_| { let s = Instant::now(); run(); s.elapsed() }).collect();
	t.sort(); t[15]
}
fn main() {
	let (model, hyper) = mnist_sized_job();
	let cases = honest_cases(&model, &hyper, 2);
	let (_, case) = cases.iter().find(|(l, _)| l == "21:adamw#0").unwrap();
	{
		use touchstone_primitives::referee::{kernel_model, kernel_train, judge};
		let (m, t) = (kernel_model(&model), kernel_train(&hyper));
		println!("allocs graph build {}", count(|| touchstone_kernels::graph::Graph::build(&m, &t).unwrap()));
		for (label, c) in cases.iter().filter(|(l, _)| ["21:adamw#0", "1:matmul#0", "20:clip_grad_norm#0", "15:bias_grad#0"].contains(&l.as_str())) {
			println!("allocs judge {label} {}", count(|| judge(&model, &hyper, c).unwrap()));
		}
	}
	if std::env::var("NATIVE_LOOP").is_ok() {
		let (_, c) = cases.iter().find(|(l, _)| l == "1:matmul#0").unwrap();
		let start = Instant::now();
		for _ in 0..3000 { touchstone_primitives::referee::judge(&model, &hyper, c).unwrap(); }
		println!("native {:?}", start.elapsed() / 3000);
		return;
	}
	let mut rt = WasmRuntime::new();
	let base = median(|| { rt.call("Core_version", &[]); });
	let mut bad_op = case.clone(); bad_op.operator = 10_000;
	let mut bad_step = case.clone(); bad_step.step = 10_000;
	let mut bad_chunk = case.clone(); bad_chunk.chunk = u32::MAX;
	println!("base {:?}", base);
	println!("op out of range {:?}", median(|| { let _ = rt.judge(&model, &hyper, &bad_op); }));
	println!("chunk out of range {:?}", median(|| { let _ = rt.judge(&model, &hyper, &bad_chunk); }));
	println!("step out of range {:?}", median(|| { let _ = rt.judge(&model, &hyper, &bad_step); }));
	let bad_model = match model.clone() { touchstone_primitives::ModelArch::Mlp { hidden, classes, activation, .. } => touchstone_primitives::ModelArch::Mlp { inputs: 0, hidden, classes, activation }, m => m };
	println!("invalid model {:?}", median(|| { let _ = rt.judge(&bad_model, &hyper, case); }));
	let mut empty = case.clone(); empty.inputs.clear(); empty.operators.clear(); empty.pieces.clear();
	println!("invalid model, empty case {:?}", median(|| { let _ = rt.judge(&bad_model, &hyper, &empty); }));
	println!("honest {:?}", median(|| { let _ = rt.judge(&model, &hyper, case); }));
	for (label, c) in cases.iter().filter(|(l, _)| ["1:matmul#0", "18:matmul#0", "15:bias_grad#0", "20:clip_grad_norm#0"].contains(&l.as_str())) {
		println!("honest {label} {:?}", median(|| { let _ = rt.judge(&model, &hyper, c); }));
	}
}
struct Counting;
static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
unsafe impl std::alloc::GlobalAlloc for Counting {
	unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 { COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed); unsafe { std::alloc::System.alloc(l) } }
	unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) { unsafe { std::alloc::System.dealloc(p, l) } }
	unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 { COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed); unsafe { std::alloc::System.realloc(p, l, n) } }
}
#[global_allocator]
static A: Counting = Counting;
pub fn count<R>(f: impl FnOnce() -> R) -> usize { let b = COUNT.load(std::sync::atomic::Ordering::Relaxed); f(); COUNT.load(std::sync::atomic::Ordering::Relaxed) - b }

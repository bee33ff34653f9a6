//! Benchmarks for docs/performance.md: per-operator throughput, MLP training
//! steps against PyTorch eager, and the cost of state hashing.
//!
//! Run through `kernels/scripts/bench.sh`, which sets up libtorch and runs the
//! reference, wgpu (`touchstone-kernels-wgpu`) and libtorch
//! (`touchstone-kernels-tch`). Prints Markdown tables; asserts nothing.
//!
//! Method: every figure is the median over several timing rounds, each long
//! enough (≥ 0.1 s, or at least one call) to dwarf the clock, after a warm-up
//! call. Device backends are synchronised at the end of each round, so queued
//! work is counted. Arguments after `--`: `--quick` for tiny sizes only (a
//! smoke test), `--only ops|steps|protocol|proof|trace|merkle` for one section, `--max-size N`
//! to cap matrix sizes, `--threads N` (default 1) for the reference's
//! contraction and hashing threads (`parallel::set_threads`), libtorch's intra-op threads,
//! lavapipe's `LP_NUM_THREADS` and PyTorch eager's threads alike. `--unchecked` times the
//! preferred wgpu adapter without the conformance self-test (for a driver the self-test
//! refuses: its timings hold, its results do not).

use std::time::{Duration, Instant};

use touchstone_kernels::job::data::synthetic;
use touchstone_kernels::job::model::{ModelConfig, OptimizerConfig, TrainConfig};
use touchstone_kernels::job::trace::{state_root, Trainer};
use touchstone_kernels::*;

/// Timing rounds per figure; the median is reported.
const ROUNDS: usize = 5;
/// Minimum duration of one timing round.
const ROUND_TIME: Duration = Duration::from_millis(100);

/// What to run, from the command line.
struct Options {
	quick: bool,
	max_size: usize,
	threads: usize,
	only: Option<String>,
}

impl Options {
	fn parse() -> Self {
		let args: Vec<String> = std::env::args().collect();
		let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
		let number = |flag: &str, default: usize| {
			value(flag).map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{flag} takes a number, not {v:?}")))
		};
		Self {
			quick: args.iter().any(|a| a == "--quick"),
			max_size: number("--max-size", usize::MAX),
			threads: number("--threads", 1).max(1),
			only: value("--only"),
		}
	}

	fn runs(&self, section: &str) -> bool {
		self.only.as_deref().is_none_or(|only| only == section)
	}
}

/// A backend the benchmark can drive: the [`Backend`] trait plus a barrier.
trait Bench: Backend {
	/// Waits until all queued work is done.
	fn sync(&mut self);
	/// Threads the backend computes with, for the tables.
	fn threads(&self) -> String;
}

impl Bench for CpuBackend {
	fn sync(&mut self) {}
	fn threads(&self) -> String {
		// Contractions use this many; the other operators run on one thread.
		format!("{} ({})", exec::parallel::threads(), ops::gemm::kernel().name())
	}
}

impl Bench for touchstone_kernels_wgpu::WgpuBackend {
	fn sync(&mut self) {
		self.synchronize().expect("wgpu device failed");
	}
	fn threads(&self) -> String {
		// A real GPU has no host thread count to report.
		if self.adapter_info().device_type != wgpu::DeviceType::Cpu {
			return "GPU".to_string();
		}
		// llvmpipe runs workgroups on LP_NUM_THREADS threads, by default one per core.
		std::env::var("LP_NUM_THREADS").unwrap_or_else(|_| format!("{} (llvmpipe)", available_cores()))
	}
}

#[cfg(feature = "tch")]
impl Bench for touchstone_kernels_tch::TchBackend {
	fn sync(&mut self) {}
	fn threads(&self) -> String {
		::tch::get_num_threads().to_string()
	}
}

/// The wgpu backend the tables time: the one `WgpuBackend::new` opens (an adapter that
/// passes the conformance self-test), or, with `--unchecked`, the preferred adapter
/// without the self-test. Timings of an unchecked adapter are valid; its results are
/// not, so it may never prove or verify anything: the flag exists to time a device
/// whose driver the self-test refuses.
fn open_wgpu() -> touchstone_kernels_wgpu::WgpuBackend {
	if !std::env::args().any(|a| a == "--unchecked") {
		return touchstone_kernels_wgpu::WgpuBackend::new().expect("wgpu backend");
	}
	let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
	let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
	let adapter = adapters
		.iter()
		.find(|adapter| adapter.get_info().device_type == wgpu::DeviceType::DiscreteGpu)
		.or(adapters.first())
		.expect("no wgpu adapter");
	eprintln!("--unchecked: timing {} without the conformance self-test", adapter.get_info().name);
	touchstone_kernels_wgpu::WgpuBackend::open_unchecked(adapter).expect("wgpu backend")
}

fn available_cores() -> usize {
	std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Median seconds per call of `run` on `target`; `sync` waits for queued work.
///
/// A warm-up call, synchronised, sets how many calls a round makes (enough
/// for [`ROUND_TIME`]); each round records that many calls and synchronises
/// once. Counting calls by elapsed time instead would be wrong for a device
/// backend, whose calls only queue work: the round would queue far more than
/// it measured. Calls slower than half a second get three rounds, not five.
fn measure<T>(target: &mut T, mut run: impl FnMut(&mut T), mut sync: impl FnMut(&mut T)) -> f64 {
	let warm_up = Instant::now();
	run(target);
	sync(target);
	let once = warm_up.elapsed();
	let calls = calls_per_round(once);
	let rounds_wanted = if once > Duration::from_millis(500) { 3 } else { ROUNDS };
	let mut rounds = Vec::with_capacity(rounds_wanted);
	for _ in 0..rounds_wanted {
		let start = Instant::now();
		for _ in 0..calls {
			run(target);
		}
		sync(target);
		rounds.push(start.elapsed().as_secs_f64() / f64::from(calls));
	}
	median(rounds)
}

/// Calls per timing round for a call that took `once`: enough for [`ROUND_TIME`].
fn calls_per_round(once: Duration) -> u32 {
	(ROUND_TIME.as_secs_f64() / once.as_secs_f64().max(1e-9)).ceil().clamp(1.0, 1e6) as u32
}

/// Median seconds per call of `run` on a backend, synchronised per round.
fn time<B: Bench>(backend: &mut B, run: impl FnMut(&mut B)) -> f64 {
	measure(backend, run, |backend| backend.sync())
}

fn median(mut values: Vec<f64>) -> f64 {
	values.sort_by(f64::total_cmp);
	values[values.len() / 2]
}

/// Canonical uniform values from Philox stream `stream`.
fn values(stream: u64, len: usize, low: f32, high: f32) -> Vec<f32> {
	let mut out = vec![0.0; len];
	RandomStream::new(99, stream).fill_uniform(low, high, &mut out);
	arith::canonicalize(&mut out);
	out
}

/// One operator workload: its name, its size label, and its work per call.
struct Workload {
	operator: &'static str,
	size: String,
	/// Floating-point operations per call (multiply-adds count two).
	flops: f64,
	/// Elements produced per call, for element-wise operators.
	elements: f64,
}

/// Runs every operator workload on `backend`; returns seconds per call, in workload order.
fn operator_times<B: Bench>(backend: &mut B, options: &Options) -> (Vec<Workload>, Vec<f64>) {
	let quick = options.quick;
	let mut workloads = Vec::new();
	let mut seconds = Vec::new();
	let matmul_sizes: &[usize] = if quick { &[8, 64] } else { &[8, 32, 128, 256, 512, 1024] };
	for &n in matmul_sizes.iter().filter(|&&n| n <= options.max_size) {
		let shape = MatmulShape { m: n, k: n, n };
		let a = backend.upload(&values(1, n * n, -1.0, 1.0)).unwrap();
		let b = backend.upload(&values(2, n * n, -1.0, 1.0)).unwrap();
		let mut c = backend.zeros(n * n).unwrap();
		let t = time(backend, |be| be.matmul(shape, MatmulLayout::default(), &a, &b, &mut c).unwrap());
		let flops = 2.0 * (n * n * n) as f64;
		workloads
			.push(Workload { operator: "matmul", size: format!("{n}×{n}×{n}"), flops, elements: (n * n) as f64 });
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
	}
	let convs: &[(usize, usize, usize, usize, usize)] =
		if quick { &[(1, 1, 4, 8, 3)] } else { &[(1, 1, 4, 8, 3), (8, 16, 32, 32, 3), (32, 32, 64, 32, 3)] };
	for &(batch, ci, co, hw, k) in convs {
		let shape = Conv2dShape {
			batch,
			in_channels: ci,
			out_channels: co,
			height: hw,
			width: hw,
			kernel_height: k,
			kernel_width: k,
		};
		let x = backend.upload(&values(3, shape.input_len().unwrap(), -1.0, 1.0)).unwrap();
		let w = backend.upload(&values(4, shape.weight_len().unwrap(), -1.0, 1.0)).unwrap();
		let mut y = backend.zeros(shape.output_len().unwrap()).unwrap();
		let t = time(backend, |be| be.conv2d(shape, &x, &w, &mut y).unwrap());
		let outputs = shape.output_len().unwrap() as f64;
		workloads.push(Workload {
			operator: "conv2d",
			size: format!("{batch}×{ci}×{hw}×{hw} → {co}, {k}×{k}"),
			flops: 2.0 * outputs * (ci * k * k) as f64,
			elements: outputs,
		});
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
	}
	let element_sizes: &[usize] = if quick { &[32] } else { &[32, 256, 1024] };
	for &side in element_sizes.iter().filter(|&&side| side <= options.max_size) {
		let len = side * side;
		let size = format!("{side}×{side}");
		let x = backend.upload(&values(5, len, -4.0, 4.0)).unwrap();
		let mut y = backend.zeros(len).unwrap();
		for (operator, kind) in [("relu", Activation::Relu), ("gelu (tanh)", Activation::GeluTanh)] {
			let t = time(backend, |be| be.activation(kind, &x, &mut y).unwrap());
			workloads.push(Workload { operator, size: size.clone(), flops: 0.0, elements: len as f64 });
			progress(backend.name(), workloads.last().expect("just pushed"), t);
			seconds.push(t);
		}
		let bias = backend.upload(&values(6, side, -1.0, 1.0)).unwrap();
		let t = time(backend, |be| be.bias_add(BiasLayout::dense(side, side), &mut y, &bias).unwrap());
		workloads.push(Workload { operator: "bias add", size: size.clone(), flops: len as f64, elements: len as f64 });
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
		let rows = len / 10;
		let classifier = ClassifierShape { rows, classes: 10 };
		let logits = backend.upload(&values(7, rows * 10, -4.0, 4.0)).unwrap();
		let labels = backend.upload_indices(&(0..rows as u32).map(|r| r % 10).collect::<Vec<_>>()).unwrap();
		let (mut loss, mut dlogits) = (backend.zeros(1).unwrap(), backend.zeros(rows * 10).unwrap());
		let t = time(backend, |be| {
			be.softmax_cross_entropy(classifier, &logits, &labels, &mut loss, &mut dlogits).unwrap()
		});
		workloads.push(Workload {
			operator: "softmax cross-entropy",
			size: format!("{rows}×10"),
			flops: 0.0,
			elements: (rows * 10) as f64,
		});
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
		let grad = backend.upload(&values(8, len, -0.1, 0.1)).unwrap();
		let (mut param, mut m, mut v) = (
			backend.upload(&values(9, len, -1.0, 1.0)).unwrap(),
			backend.zeros(len).unwrap(),
			backend.zeros(len).unwrap(),
		);
		let adamw = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: 0.01 };
		let scalars = adamw.scalars(10).unwrap();
		let t = time(backend, |be| be.adamw(&scalars, &mut param, &grad, &mut m, &mut v).unwrap());
		workloads.push(Workload { operator: "AdamW update", size: size.clone(), flops: 0.0, elements: len as f64 });
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
		let mut grad_copy = backend.upload(&values(8, len, -0.1, 0.1)).unwrap();
		let mut norm = backend.zeros(1).unwrap();
		let t = time(backend, |be| be.clip_grad_norm(1.0, &mut [&mut grad_copy], &mut norm).unwrap());
		workloads.push(Workload { operator: "grad-norm clip", size, flops: 0.0, elements: len as f64 });
		progress(backend.name(), workloads.last().expect("just pushed"), t);
		seconds.push(t);
	}
	(workloads, seconds)
}

/// Logs one finished workload to stderr, so that a long run shows progress.
fn progress(backend: &str, workload: &Workload, seconds: f64) {
	eprintln!("{backend}: {} {}: {:.3} ms", workload.operator, workload.size, seconds * 1e3);
}

/// An MLP training step written against [`Backend`]: the workload of the
/// step-time table, identical for every backend and matched by
/// `kernels/scripts/bench_torch.py` in PyTorch.
struct MlpStep<B: Backend> {
	widths: Vec<usize>,
	batch: usize,
	samples: usize,
	dataset: B::Tensor,
	labels: Vec<u32>,
	params: Vec<B::Tensor>,
	grads: Vec<B::Tensor>,
	velocity: Vec<B::Tensor>,
	/// Pre-activations and activations per layer (the input batch is `activations[0]`).
	pre: Vec<B::Tensor>,
	activations: Vec<B::Tensor>,
	/// Gradients with respect to pre-activations and activations per layer.
	dpre: Vec<B::Tensor>,
	dactivations: Vec<B::Tensor>,
	loss: B::Tensor,
	step: u64,
}

impl<B: Backend> MlpStep<B> {
	fn new(backend: &mut B, widths: &[usize], batch: usize, samples: usize) -> Self {
		let layers = widths.len() - 1;
		let mut params = Vec::new();
		let (mut grads, mut velocity) = (Vec::new(), Vec::new());
		for (layer, pair) in widths.windows(2).enumerate() {
			let bound = arith::math::rsqrt(pair[0] as f32);
			for (index, len) in [pair[0] * pair[1], pair[1]].into_iter().enumerate() {
				params
					.push(backend.upload(&values(100 + 2 * layer as u64 + index as u64, len, -bound, bound)).unwrap());
				grads.push(backend.zeros(len).unwrap());
				velocity.push(backend.zeros(len).unwrap());
			}
		}
		let mut pre = Vec::new();
		let mut activations = vec![backend.zeros(batch * widths[0]).unwrap()];
		let (mut dpre, mut dactivations) = (Vec::new(), vec![backend.zeros(batch * widths[0]).unwrap()]);
		for &width in &widths[1..] {
			pre.push(backend.zeros(batch * width).unwrap());
			activations.push(backend.zeros(batch * width).unwrap());
			dpre.push(backend.zeros(batch * width).unwrap());
			dactivations.push(backend.zeros(batch * width).unwrap());
		}
		let dataset = backend.upload(&values(10, samples * widths[0], 0.0, 1.0)).unwrap();
		let classes = widths[layers] as u32;
		let labels = (0..samples as u32).map(|i| i % classes).collect();
		let loss = backend.zeros(1).unwrap();
		Self {
			widths: widths.to_vec(),
			batch,
			samples,
			dataset,
			labels,
			params,
			grads,
			velocity,
			pre,
			activations,
			dpre,
			dactivations,
			loss,
			step: 0,
		}
	}

	/// One step: gather a batch, forward, softmax cross-entropy, backward,
	/// SGD with momentum; reads the loss back, as a training loop does.
	fn run(&mut self, backend: &mut B) -> f32 {
		let layers = self.widths.len() - 1;
		let order = RandomStream::new(3, self.step).permutation(self.samples as u32);
		self.step += 1;
		let indices: Vec<u32> = order[..self.batch].to_vec();
		let labels: Vec<u32> = indices.iter().map(|&i| self.labels[i as usize]).collect();
		let indices = backend.upload_indices(&indices).unwrap();
		let labels = backend.upload_indices(&labels).unwrap();
		backend.gather_rows(&self.dataset, self.widths[0], &indices, &mut self.activations[0]).unwrap();
		for layer in 0..layers {
			let shape = MatmulShape { m: self.batch, k: self.widths[layer], n: self.widths[layer + 1] };
			let (inputs, rest) = self.activations.split_at_mut(layer + 1);
			let z = &mut self.pre[layer];
			backend.matmul(shape, MatmulLayout::default(), &inputs[layer], &self.params[2 * layer], z).unwrap();
			backend.bias_add(BiasLayout::dense(self.batch, shape.n), z, &self.params[2 * layer + 1]).unwrap();
			if layer + 1 < layers {
				backend.activation(Activation::Relu, z, &mut rest[0]).unwrap();
			}
		}
		let classifier = ClassifierShape { rows: self.batch, classes: self.widths[layers] };
		backend
			.softmax_cross_entropy(
				classifier,
				&self.pre[layers - 1],
				&labels,
				&mut self.loss,
				&mut self.dpre[layers - 1],
			)
			.unwrap();
		for layer in (0..layers).rev() {
			let shape = MatmulShape { m: self.batch, k: self.widths[layer], n: self.widths[layer + 1] };
			let (weight_grad, rest) = self.grads[2 * layer..].split_at_mut(1);
			backend
				.contract(
					shape.rhs_grad_contraction(),
					&self.activations[layer],
					&self.dpre[layer],
					&mut weight_grad[0],
				)
				.unwrap();
			backend.bias_grad(BiasLayout::dense(self.batch, shape.n), &self.dpre[layer], &mut rest[0]).unwrap();
			if layer > 0 {
				let (lower, upper) = self.dpre.split_at_mut(layer);
				let da = &mut self.dactivations[layer];
				backend.contract(shape.lhs_grad_contraction(), &upper[0], &self.params[2 * layer], da).unwrap();
				backend.activation_grad(Activation::Relu, &self.pre[layer - 1], da, &mut lower[layer - 1]).unwrap();
			}
		}
		let sgd = SgdMomentum { learning_rate: 0.1, momentum: 0.9, weight_decay: 0.0, nesterov: false };
		for ((param, grad), velocity) in self.params.iter_mut().zip(&self.grads).zip(self.velocity.iter_mut()) {
			backend.sgd_momentum(&sgd, param, grad, velocity).unwrap();
		}
		backend.download(&self.loss).unwrap()[0]
	}

	/// The state a step's hash covers: parameters then momentum, downloaded.
	fn state(&self, backend: &mut B) -> Vec<Vec<f32>> {
		self.params.iter().chain(&self.velocity).map(|tensor| backend.download(tensor).unwrap()).collect()
	}
}

/// One MLP workload of the step table.
struct MlpJob {
	name: &'static str,
	widths: &'static [usize],
	batch: usize,
}

const JOBS: &[MlpJob] = &[
	MlpJob { name: "digits MLP 64→64→10, batch 32", widths: &[64, 64, 10], batch: 32 },
	MlpJob { name: "MLP 784→1024→1024→10, batch 128", widths: &[784, 1024, 1024, 10], batch: 128 },
];

/// Step, download and hash timings of one backend on one job, in seconds.
struct StepTimes {
	step: f64,
	download: f64,
	/// The protocol's state root: BLAKE3 over 1 KiB chunks (`trace::state_root`).
	hash: f64,
	/// For scale: one flat BLAKE2b-256 digest per state tensor (phase 1's `digest_f32`).
	flat: f64,
}

/// One backend's MLP step, set up and warmed up, to be timed in rounds
/// interleaved with the other backends' rounds.
struct StepRunner {
	name: String,
	threads: String,
	/// Runs one timing round (a fixed number of steps, then a synchronisation);
	/// returns seconds per step.
	round: Box<dyn FnMut() -> f64>,
	/// Download and hashing times; `step` is filled in from the rounds.
	times: StepTimes,
}

/// Sets up `job` on `backend`, measures its state download and hashing, and
/// warms the step up.
fn step_runner<B: Bench + 'static>(name: String, mut backend: B, job: &MlpJob) -> StepRunner {
	let threads = backend.threads();
	let mut mlp = MlpStep::new(&mut backend, job.widths, job.batch, 2048);
	let download = time(&mut backend, |be| {
		mlp.state(be);
	});
	let state = mlp.state(&mut backend);
	let hash = measure(
		&mut (),
		|_| {
			std::hint::black_box(state_root(&state).unwrap());
		},
		|_| {},
	);
	let flat = measure(
		&mut (),
		|_| {
			for tensor in &state {
				std::hint::black_box(digest_f32(tensor));
			}
		},
		|_| {},
	);
	let warm_up = Instant::now();
	mlp.run(&mut backend);
	backend.sync();
	let calls = calls_per_round(warm_up.elapsed());
	let round = Box::new(move || {
		let start = Instant::now();
		for _ in 0..calls {
			mlp.run(&mut backend);
		}
		backend.sync();
		start.elapsed().as_secs_f64() / f64::from(calls)
	});
	StepRunner { name, threads, round, times: StepTimes { step: f64::NAN, download, hash, flat } }
}

/// A [`StepRunner`] for every backend, the reference first.
fn step_runners(job: &MlpJob) -> Vec<StepRunner> {
	let mut runners = vec![step_runner("reference (CPU)".to_string(), CpuBackend, job)];
	{
		let gpu = open_wgpu();
		let name = format!("wgpu ({})", gpu.adapter_info().name);
		runners.push(step_runner(name, gpu, job));
	}
	#[cfg(feature = "tch")]
	runners.push(step_runner("tch (libtorch CPU)".to_string(), touchstone_kernels_tch::TchBackend::cpu(), job));
	runners
}

/// PyTorch eager's milliseconds per step on `job` with `threads` threads, by
/// running kernels/scripts/bench_torch.py; `None` (with the reason on stderr)
/// when Python or torch is unavailable.
fn pytorch_eager(job: &MlpJob, threads: usize) -> Option<(f64, String)> {
	let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/bench_torch.py");
	let widths: Vec<String> = job.widths.iter().map(ToString::to_string).collect();
	let output = std::process::Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()))
		.arg(script)
		.arg("--widths")
		.args(&widths)
		.args(["--batch", &job.batch.to_string(), "--threads", &threads.to_string()])
		.output();
	match output {
		Ok(output) if output.status.success() => {
			let text = String::from_utf8_lossy(&output.stdout);
			let field = |name: &str| -> Option<String> {
				let start = text.find(&format!("\"{name}\": "))? + name.len() + 4;
				let rest = &text[start..];
				let end = rest.find([',', '}'])?;
				Some(rest[..end].trim().trim_matches('"').to_string())
			};
			Some((field("ms_per_step")?.parse().ok()?, field("torch")?))
		},
		Ok(output) => {
			eprintln!("bench_torch.py failed: {}", String::from_utf8_lossy(&output.stderr));
			None
		},
		Err(error) => {
			eprintln!("could not run python3 for the PyTorch eager baseline: {error}");
			None
		},
	}
}

/// The backends of this build, each run through `f`; returns (name, threads, result).
macro_rules! each_backend {
	($f:expr) => {{
		let mut rows = Vec::new();
		{
			let mut cpu = CpuBackend;
			rows.push(("reference (CPU)".to_string(), cpu.threads(), $f(&mut cpu)));
		}
		{
			let mut gpu = open_wgpu();
			let name = format!("wgpu ({})", gpu.adapter_info().name);
			rows.push((name, gpu.threads(), $f(&mut gpu)));
		}
		#[cfg(feature = "tch")]
		{
			let mut torch = touchstone_kernels_tch::TchBackend::cpu();
			rows.push(("tch (libtorch CPU)".to_string(), torch.threads(), $f(&mut torch)));
		}
		rows
	}};
}

fn print_operators(options: &Options) {
	let rows = each_backend!(|backend: &mut _| operator_times(backend, options));
	let workloads = &rows[0].2 .0;
	println!("\n### Per-operator throughput\n");
	println!("GFLOP/s for contractions and bias add; million elements per second (Melem/s) for the rest.\n");
	let mut header = String::from("| operator | size |");
	let mut rule = String::from("|---|---|");
	for (name, threads, _) in &rows {
		header.push_str(&format!(" {name}, {threads} thr. |"));
		rule.push_str("---:|");
	}
	println!("{header}\n{rule}");
	for (index, workload) in workloads.iter().enumerate() {
		let mut line = format!("| {} | {} |", workload.operator, workload.size);
		for (_, _, (_, seconds)) in &rows {
			let t = seconds[index];
			if workload.flops > 0.0 {
				line.push_str(&format!(" {:.2} |", workload.flops / t / 1e9));
			} else {
				line.push_str(&format!(" {:.0} Melem/s |", workload.elements / t / 1e6));
			}
		}
		println!("{line}");
	}
}

fn print_steps(options: &Options) {
	let jobs = if options.quick { &JOBS[..1] } else { JOBS };
	println!("\n### MLP training step (SGD with momentum; ms per step, median of {ROUNDS} interleaved rounds)\n");
	println!(
		"| job | backend | threads | step | state download | state root (BLAKE3, 1 KiB chunks) | hashing share | flat digest of the state |"
	);
	println!("|---|---|---:|---:|---:|---:|---:|---:|");
	let mut pairs = Vec::new();
	for job in jobs {
		let mut runners = step_runners(job);
		// Rounds interleaved across the backends: the machine is shared, and a
		// change in its load then hits every backend alike. Each round also
		// pairs the reference with every other backend.
		let mut rounds = vec![Vec::with_capacity(ROUNDS); runners.len()];
		for _ in 0..ROUNDS {
			for (runner, times) in runners.iter_mut().zip(&mut rounds) {
				times.push((runner.round)());
			}
		}
		for (runner, times) in runners.iter_mut().zip(&rounds) {
			runner.times.step = median(times.clone());
		}
		if let Some((reference, others)) = rounds.split_first() {
			for (other, runner) in others.iter().zip(&runners[1..]) {
				let ratios: Vec<f64> = reference.iter().zip(other).map(|(r, o)| r / o).collect();
				pairs.push((job.name, runner.name.clone(), ratios));
			}
		}
		for StepRunner { name, threads, times, .. } in &runners {
			let hashing = times.download + times.hash;
			println!(
				"| {} | {name} | {threads} | {:.3} | {:.3} | {:.3} | {:.1} % | {:.3} |",
				job.name,
				times.step * 1e3,
				times.download * 1e3,
				times.hash * 1e3,
				100.0 * hashing / (times.step + hashing),
				times.flat * 1e3
			);
		}
		{
			let threads = options.threads;
			match pytorch_eager(job, threads) {
				Some((ms, version)) => {
					println!(
						"| {} | PyTorch {version} eager (Python) | {threads} | {ms:.3} | – | – | – | – |",
						job.name
					)
				},
				None => println!("| {} | PyTorch eager (Python) | {threads} | unavailable | – | – | – | – |", job.name),
			}
		}
	}
	if pairs.is_empty() {
		return;
	}
	println!("\n### Paired rounds: reference step ÷ the other backend's step, round by round\n");
	println!("The rounds above ran interleaved: each ratio compares two rounds run back to back.\n");
	println!("| job | reference ÷ | median | min – max |");
	println!("|---|---|---:|---:|");
	for (job, name, ratios) in pairs {
		let (low, high) = ratios.iter().fold((f64::MAX, f64::MIN), |(low, high), &r| (low.min(r), high.max(r)));
		println!("| {job} | {name} | {:.2} | {low:.2} – {high:.2} |", median(ratios.clone()));
	}
}

/// Milliseconds per `trace::Trainer::step` of the digits-shaped job on `backend`.
fn protocol_step<B: Bench>(backend: B) -> f64 {
	let model = ModelConfig::Mlp { inputs: 64, hidden: vec![64], classes: 10, activation: Activation::Relu };
	let train = TrainConfig {
		steps: u32::MAX,
		batch_size: 32,
		learning_rate: 100_000_000,
		optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
		grad_clip_norm: None,
		seed: 42,
		checkpoint_interval: 50,
	};
	let mut trainer = Trainer::new(backend, &model, &train, synthetic(1, 1437, 64, 10)).unwrap();
	let seconds = measure(
		&mut trainer,
		|trainer| {
			trainer.step().unwrap();
		},
		|trainer| trainer.backend_mut().sync(),
	);
	seconds * 1e3
}

fn print_protocol_step() {
	// The real protocol loop (trace::Trainer): the job's Philox batch order,
	// the step, the state download, the state root and the chained state hash.
	println!("\n### Protocol step: `job::trace::Trainer::step` on a digits-shaped job (ms per step, median)\n");
	println!("| backend | threads | trainer step (compute + state hash chain) |");
	println!("|---|---:|---:|");
	println!("| reference (CPU) | {} | {:.3} |", CpuBackend.threads(), protocol_step(CpuBackend));
	{
		let gpu = open_wgpu();
		let (name, threads) = (gpu.adapter_info().name.clone(), gpu.threads());
		println!("| wgpu ({name}) | {threads} | {:.3} |", protocol_step(gpu));
	}
	#[cfg(feature = "tch")]
	{
		let torch = touchstone_kernels_tch::TchBackend::cpu();
		let threads = torch.threads();
		println!("| tch (libtorch CPU) | {threads} | {:.3} |", protocol_step(torch));
	}
}

/// A job for the proof-cost table.
struct ProofJob {
	name: &'static str,
	model: ModelConfig,
	batch: u32,
	samples: usize,
}

/// The jobs of the proof-cost table: the digits MLP, the wide MLP and a small CNN.
fn proof_jobs(quick: bool) -> Vec<ProofJob> {
	let mlp = |inputs: u32, hidden: Vec<u32>| ModelConfig::Mlp { inputs, hidden, classes: 10, activation: Activation::Relu };
	let cnn = ModelConfig::Cnn {
		channels: 1,
		height: 28,
		width: 28,
		conv_channels: vec![8, 16],
		kernel_size: 3,
		hidden: vec![64],
		classes: 10,
		activation: Activation::Relu,
	};
	let mut jobs = vec![ProofJob { name: "digits MLP 64→64→10, batch 32", model: mlp(64, vec![64]), batch: 32, samples: 1437 }];
	if !quick {
		jobs.push(ProofJob { name: "wide MLP 784→1024→1024→10, batch 128", model: mlp(784, vec![1024, 1024]), batch: 128, samples: 1024 });
		jobs.push(ProofJob { name: "CNN 1×28×28 →8→16 conv 3×3 →64→10, batch 32", model: cnn, batch: 32, samples: 512 });
	}
	jobs
}

/// The proof-cost figures of one job on one backend, in ms.
struct ProofShare {
	/// The training step, with its record.
	step: f64,
	/// The BLAKE3 state root over 1 KiB chunks, taken where the state lives
	/// (`Trainer::state_tree_root`): what a checkpoint boundary commits (and what
	/// every step's state hash committed before the boundary commitments).
	state_root: f64,
}

/// A trainer of `job` on `backend` (SGD with momentum, synthetic data) with
/// checkpoint boundaries every `interval` steps: the proof and trace tables' runs.
fn proof_trainer<B: Bench>(backend: B, job: &ProofJob, interval: u32) -> Trainer<B> {
	let train = TrainConfig {
		steps: u32::MAX,
		batch_size: job.batch,
		learning_rate: 10_000_000,
		optimizer: OptimizerConfig::Sgd { momentum: 900_000_000 },
		grad_clip_norm: None,
		seed: 42,
		checkpoint_interval: interval,
	};
	let features = job.model.input_len().unwrap();
	Trainer::new(backend, &job.model, &train, synthetic(1, job.samples, features, 10)).unwrap()
}

/// Median seconds of one `Trainer::step`, synchronised per round.
fn step_time<B: Bench>(trainer: &mut Trainer<B>) -> f64 {
	measure(
		trainer,
		|trainer| {
			trainer.step().unwrap();
		},
		|trainer| trainer.backend_mut().sync(),
	)
}

/// Steps between checkpoint boundaries in the proof-cost table.
const PROOF_INTERVAL: u32 = 50;

/// The [`ProofShare`] of `job` on `backend`: the trainer's step (which commits
/// only its record) and the state root, timed on the same trainer in the same run.
fn proof_share<B: Bench>(backend: B, job: &ProofJob) -> ProofShare {
	let mut trainer = proof_trainer(backend, job, PROOF_INTERVAL);
	let whole = step_time(&mut trainer);
	let state_root = measure(
		&mut trainer,
		|trainer| {
			std::hint::black_box(trainer.state_tree_root().unwrap());
		},
		|trainer| trainer.backend_mut().sync(),
	);
	ProofShare { step: whole * 1e3, state_root: state_root * 1e3 }
}

fn print_proof_share(options: &Options) {
	println!("\n### Proof cost per step: the BLAKE3 state root at checkpoint boundaries\n");
	println!(
		"The protocol's budget for proof work is a tenth of the step. A step commits only its record (one small \
		 hash of its loss); the state tree's BLAKE3 root (1 KiB chunks) is committed at checkpoint boundaries, \
		 hashed where the state lives (wgpu: on the device, 32 bytes read back), once every {PROOF_INTERVAL} \
		 steps here. The middle share is what hashing the state every step would cost. One run, every part \
		 timed on the same trainer.\n"
	);
	println!("| job | backend | threads | training step (ms) | state root (ms) | ÷ step, were it every step | ÷ step at {PROOF_INTERVAL} steps per boundary |");
	println!("|---|---|---:|---:|---:|---:|---:|");
	for job in proof_jobs(options.quick) {
		let row = |backend: &str, threads: String, share: ProofShare| {
			let step = share.step.max(1e-9);
			println!(
				"| {} | {backend} | {threads} | {:.2} | {:.2} | {:.1} % | {:.2} % |",
				job.name,
				share.step,
				share.state_root,
				100.0 * share.state_root / step,
				100.0 * share.state_root / f64::from(PROOF_INTERVAL) / step
			);
		};
		row("reference", CpuBackend.threads(), proof_share(CpuBackend, &job));
		let gpu = open_wgpu();
		let (name, threads) = (gpu.adapter_info().name.clone(), gpu.threads());
		row(&format!("wgpu ({name})"), threads, proof_share(gpu, &job));
	}
}

/// Steps in the segment the trace-on-demand figures re-execute.
const TRACE_SEGMENT: u32 = 10;

/// `(training step, traced step)` in ms: a plain step of `job` on `backend`, and a
/// step of `Trainer::segment_trace`, which a party runs when a dispute lands on a
/// segment (the step, then the state tree's root after it and the chained hash).
fn trace_cost<B: Bench>(backend: B, job: &ProofJob) -> (f64, f64) {
	let mut trainer = proof_trainer(backend, job, TRACE_SEGMENT);
	let step = step_time(&mut trainer);
	let segment = measure(
		&mut trainer,
		|trainer| {
			let end = trainer.next_step() + TRACE_SEGMENT;
			std::hint::black_box(trainer.segment_trace(end).unwrap());
		},
		|trainer| trainer.backend_mut().sync(),
	);
	(step * 1e3, segment * 1e3 / f64::from(TRACE_SEGMENT))
}

fn print_trace_cost(options: &Options) {
	println!("\n### A segment's step trace on demand\n");
	println!(
		"What each side of a dispute pays per step to re-execute the disputed segment ({TRACE_SEGMENT} steps here) \
		 and commit its step-level trace (`Trainer::segment_trace`: the step, the state tree's root after it, \
		 the chained hash), against a plain training step. Both include today's per-step proof work, which \
		 `Trainer::step` still does.\n"
	);
	println!("| job | backend | threads | training step (ms) | traced step (ms) | traced ÷ plain |");
	println!("|---|---|---:|---:|---:|---:|");
	for job in proof_jobs(options.quick) {
		let row = |backend: &str, threads: String, (step, traced): (f64, f64)| {
			println!("| {} | {backend} | {threads} | {step:.2} | {traced:.2} | {:.2}× |", job.name, traced / step.max(1e-9));
		};
		row("reference", CpuBackend.threads(), trace_cost(CpuBackend, &job));
		let gpu = open_wgpu();
		let (name, threads) = (gpu.adapter_info().name.clone(), gpu.threads());
		row(&format!("wgpu ({name})"), threads, trace_cost(gpu, &job));
	}
}

fn main() {
	let options = Options::parse();
	// Before any Vulkan instance exists: llvmpipe reads it when a device is created.
	if std::env::var_os("LP_NUM_THREADS").is_none() {
		std::env::set_var("LP_NUM_THREADS", options.threads.to_string());
	}
	#[cfg(feature = "tch")]
	::tch::set_num_threads(options.threads as i32);
	exec::parallel::set_threads(options.threads);
	let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
	println!("## touchstone-kernels benchmark\n");
	println!(
		"{} CPU cores; {} thread(s) per backend; {} sizes; load average at start: {}",
		available_cores(),
		options.threads,
		if options.quick { "quick" } else { "full" },
		load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
	);
	if options.runs("ops") {
		print_operators(&options);
	}
	if options.runs("steps") {
		print_steps(&options);
	}
	if options.runs("protocol") {
		print_protocol_step();
	}
	if options.runs("proof") {
		print_proof_share(&options);
	}
	if options.runs("trace") {
		print_trace_cost(&options);
	}
	if options.runs("merkle") {
		print_merkle_cost(&options);
	}
	let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
	println!("\nLoad average at the end: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
}

/// What a segment tree costs the prover per node, with its node function (BLAKE3 keyed,
/// one compression) against BLAKE2b over the same 64-byte pairs hashed four at a time
/// (what the node function was until spec 136), and per 32-word leaf. One thread.
fn print_merkle_cost(options: &Options) {
	use touchstone_kernels::proof::hash::{digest_each, Digest, Domain};
	use touchstone_kernels::proof::merkle::{node_hash, segment_leaves, MerkleTree, SEGMENT};
	let leaves_len: usize = if options.quick { 1 << 12 } else { 1 << 20 };
	let words = values(7, leaves_len * SEGMENT, -1.0, 1.0);
	let leaves = segment_leaves(&words);
	let pairs: Vec<u8> = leaves.iter().flatten().copied().collect();
	let nodes = (leaves_len - 1) as f64;
	let mut out: Vec<Digest> = Vec::with_capacity(leaves_len);
	let per_pair = (leaves_len / 2) as f64;
	let blake3_pairs = measure(&mut (), |_| {
		out.clear();
		out.extend(leaves.chunks_exact(2).map(|pair| node_hash(&pair[0], &pair[1])));
		std::hint::black_box(&out);
	}, |_| {});
	let blake2b_pairs = measure(&mut (), |_| {
		out.clear();
		digest_each(Domain::Plain, pairs.chunks_exact(64), &mut out);
		std::hint::black_box(&out);
	}, |_| {});
	let tree = measure(&mut (), |_| {
		std::hint::black_box(MerkleTree::new(leaves.clone()).unwrap().root());
	}, |_| {});
	let leaf = measure(&mut (), |_| {
		std::hint::black_box(segment_leaves(&words));
	}, |_| {});
	println!("\n### A segment tree's hashes\n");
	println!("Over {leaves_len} segments of 32 words, one thread; nanoseconds.\n");
	println!("| what | ns each |");
	println!("|---|---:|");
	println!("| a node, BLAKE3 keyed (`node_hash`, the node function) | {:.1} |", blake3_pairs * 1e9 / per_pair);
	println!("| a node's 64 bytes in BLAKE2b, four at a time (the node function before spec 136) | {:.1} |", blake2b_pairs * 1e9 / per_pair);
	println!("| a node of a whole tree (`MerkleTree::new` over the leaves, every level kept) | {:.1} |", tree * 1e9 / nodes);
	println!("| a 32-word leaf, BLAKE2b four at a time (`segment_leaves`) | {:.1} |", leaf * 1e9 / leaves_len as f64);
}

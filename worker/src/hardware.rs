//! The hardware a solver declares, detected rather than typed in, and the memory check a
//! unit must pass before it is accepted.

use std::time::Instant;

use anyhow::Result;
use polkadot_sdk::sp_runtime::BoundedVec;
use touchstone_kernels::job::data::Dataset;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::proof::graph::Graph;
use touchstone_kernels::{matmul, MatmulLayout, MatmulShape};
use touchstone_primitives::{DeviceKind, HardwareProfile};

/// What was detected, with the profile to declare on-chain.
pub struct Detected {
	/// The profile.
	pub profile: HardwareProfile,
	/// Memory available for training now, in MiB.
	pub available_mib: u64,
}

fn meminfo(field: &str) -> Option<u64> {
	let text = std::fs::read_to_string("/proc/meminfo").ok()?;
	let line = text.lines().find(|line| line.starts_with(field))?;
	line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib / 1024)
}

fn cpu_model() -> String {
	std::fs::read_to_string("/proc/cpuinfo")
		.ok()
		.and_then(|text| text.lines().find(|line| line.starts_with("model name")).map(str::to_owned))
		.and_then(|line| line.split_once(':').map(|(_, name)| name.trim().to_owned()))
		.unwrap_or_else(|| "unknown CPU".into())
}

/// Measures the reference's matrix-product throughput in GFLOP/s: 256³ products for about
/// a fifth of a second.
pub fn measure_cpu_gflops() -> u32 {
	let n = 256usize;
	let shape = MatmulShape { m: n, k: n, n };
	let lhs: Vec<f32> = (0..n * n).map(|i| ((i % 17) as f32) * 0.125).collect();
	let rhs: Vec<f32> = (0..n * n).map(|i| ((i % 13) as f32) * 0.25).collect();
	let mut out = vec![0.0f32; n * n];
	let started = Instant::now();
	let mut products = 0u64;
	while started.elapsed().as_secs_f64() < 0.2 {
		if matmul(shape, MatmulLayout { lhs_transposed: false, rhs_transposed: false }, &lhs, &rhs, &mut out).is_err() {
			return 0;
		}
		products += 1;
	}
	let flops = products as f64 * 2.0 * (n * n * n) as f64;
	(flops / started.elapsed().as_secs_f64() / 1e9).round() as u32
}

/// Detects this machine: the device the chosen backend trains on, its memory, and a
/// measured throughput. `gpu` names the GPU adapter when training on one.
pub fn detect(gpu: Option<String>, region: &str) -> Result<Detected> {
	let total = meminfo("MemTotal:").unwrap_or(0);
	let available = meminfo("MemAvailable:").unwrap_or(total);
	let (device, model) = match gpu {
		Some(adapter) => (DeviceKind::Gpu, adapter),
		None => (DeviceKind::Cpu, cpu_model()),
	};
	let mut model = model.into_bytes();
	model.truncate(touchstone_primitives::MAX_DEVICE_MODEL_LEN as usize);
	let mut region = region.as_bytes().to_vec();
	region.truncate(touchstone_primitives::MAX_REGION_LEN as usize);
	let profile = HardwareProfile {
		device,
		model: BoundedVec::truncate_from(model),
		memory_mib: total.min(u32::MAX as u64) as u32,
		throughput_gflops: measure_cpu_gflops().max(1),
		bandwidth_mbps: 1000,
		region: BoundedVec::truncate_from(region),
	};
	Ok(Detected { profile, available_mib: available })
}

/// The memory training a unit needs, in MiB: every buffer of the step graph (parameters,
/// moments, activations, gradients), the dataset on the device, and a host copy of the
/// state for checkpoints. Known from the spec alone, so it is checked before accepting.
pub fn unit_memory_mib(model: &ModelConfig, train: &TrainConfig, data: &Dataset) -> Result<u64> {
	let graph = Graph::build(model, train).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let buffers: u64 = graph.buffers.iter().map(|&(len, _)| len as u64).sum();
	let state: u64 = graph.state.iter().filter_map(|&id| graph.values.get(id)).map(|value| value.len as u64).sum();
	let words = buffers + 2 * state + data.features.len() as u64 + data.labels.len() as u64;
	Ok((words * 4).div_ceil(1 << 20) + 64)
}

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
#[derive(Clone)]
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

/// A GPU a backend trains on.
pub struct Gpu {
	/// The device's name.
	pub name: String,
	/// Its memory in MiB, where known (host memory is used otherwise).
	pub memory_mib: Option<u64>,
}

/// libtorch's first CUDA device, when this machine has one. tch builds against
/// libtorch's CPU library, so libtorch's CUDA library is loaded first (found on the
/// library path, or next to the libtorch the worker was built with) to register its
/// kernels; then libtorch itself is asked. The name and memory come from `nvidia-smi`.
pub fn torch_cuda() -> Option<Gpu> {
	static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
	let loaded = *LOADED.get_or_init(|| {
		let mut candidates = vec![std::path::PathBuf::from("libtorch_cuda.so")];
		if let Some(libtorch) = option_env!("TOUCHSTONE_LIBTORCH") {
			candidates.push(std::path::Path::new(libtorch).join("../site-packages/torch/lib/libtorch_cuda.so"));
			candidates.push(std::path::Path::new(libtorch).join("lib/libtorch_cuda.so"));
		}
		candidates.iter().any(|path| {
			// SAFETY: loading libtorch's own CUDA library runs its static initialisers,
			// which register CUDA kernels with the libtorch already loaded; it is kept
			// loaded for the life of the process.
			match unsafe { libloading::Library::new(path) } {
				Ok(library) => {
					std::mem::forget(library);
					true
				},
				Err(error) => {
					tracing::debug!(path = %path.display(), "libtorch CUDA library not loaded: {error}");
					false
				},
			}
		})
	});
	if !loaded || !tch::Cuda::is_available() {
		return None;
	}
	// libtorch's device 0 is the first `CUDA_VISIBLE_DEVICES` names; nvidia-smi ignores
	// that variable and counts every GPU, so it is asked for that one by name.
	let id = format!("--id={}", first_visible_device(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()));
	let query = std::process::Command::new("nvidia-smi")
		.args(["--query-gpu=name,memory.total", "--format=csv,noheader,nounits", id.as_str()])
		.output()
		.ok()
		.filter(|output| output.status.success())
		.map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
	let (name, memory_mib) = match query.as_deref().and_then(|line| line.rsplit_once(',')) {
		Some((name, memory)) => (name.trim().to_owned(), memory.trim().parse().ok()),
		None => ("CUDA device 0".to_owned(), None),
	};
	Some(Gpu { name: format!("{name} (libtorch CUDA)"), memory_mib })
}

/// The GPU (an index or a UUID, as nvidia-smi takes it) that CUDA numbers 0 under
/// `CUDA_VISIBLE_DEVICES` = `visible`: its first entry, or GPU 0 when it is unset or empty.
fn first_visible_device(visible: Option<&str>) -> String {
	visible
		.and_then(|list| list.split(',').next())
		.map(str::trim)
		.filter(|first| !first.is_empty())
		.unwrap_or("0")
		.to_owned()
}

/// Detects this machine: the device the chosen backend trains on, its memory, and a
/// measured throughput. `gpu` is the GPU when training on one.
pub fn detect(gpu: Option<Gpu>, region: &str) -> Result<Detected> {
	let host_total = meminfo("MemTotal:").unwrap_or(0);
	let host_available = meminfo("MemAvailable:").unwrap_or(host_total);
	let (device, model, total, available) = match gpu {
		Some(Gpu { name, memory_mib: Some(memory) }) => (DeviceKind::Gpu, name, memory, memory),
		Some(Gpu { name, memory_mib: None }) => (DeviceKind::Gpu, name, host_total, host_available),
		None => (DeviceKind::Cpu, cpu_model(), host_total, host_available),
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

#[cfg(test)]
mod tests {
	use super::*;

	/// libtorch's first device is the first `CUDA_VISIBLE_DEVICES` names, by index or UUID.
	#[test]
	fn the_gpu_queried_is_the_first_cuda_makes_visible() {
		assert_eq!(first_visible_device(None), "0");
		assert_eq!(first_visible_device(Some("")), "0");
		assert_eq!(first_visible_device(Some("2,3")), "2");
		assert_eq!(first_visible_device(Some(" GPU-8f3a,1")), "GPU-8f3a");
	}
}

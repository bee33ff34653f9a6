//! The hardware a solver declares, detected rather than typed in, and the memory check a
//! unit must pass before it is accepted.

use std::time::Instant;

use anyhow::Result;
use polkadot_sdk::sp_runtime::BoundedVec;
use touchstone_kernels::job::training_data::TrainingData;
use touchstone_kernels::job::model::{ModelConfig, TrainConfig};
use touchstone_kernels::proof::graph::Graph;
use touchstone_kernels::{matmul, MatmulLayout, MatmulShape};
use touchstone_primitives::{DeviceKind, HardwareProfile};

/// What was detected, with the profile to declare on-chain.
#[derive(Clone)]
pub struct Detected {
	/// The profile.
	pub profile: HardwareProfile,
	/// Where the memory a unit trains in is measured when the unit is admitted.
	memory: MemorySource,
}

/// Where a unit's memory comes from, and so where its free memory is read.
#[derive(Clone, Debug, PartialEq)]
enum MemorySource {
	/// Host memory: the CPU reference, and GPUs whose memory is not known (wgpu adapters,
	/// which do not report it).
	Host,
	/// An NVIDIA GPU's memory, as `nvidia-smi` reports it for the GPU with this index or UUID.
	Nvidia(String),
}

/// What a backend takes beyond the unit's buffers, in MiB: the program and allocator
/// slack on the host, and on a GPU the driver's context and staging buffers. Allowances,
/// not measurements: a unit is refused when it would leave less than this free.
const HOST_OVERHEAD_MIB: u64 = 64;
/// See [`HOST_OVERHEAD_MIB`]: a CUDA context and libtorch's caching allocator.
const GPU_OVERHEAD_MIB: u64 = 768;

impl Detected {
	/// Memory free for a unit now, in MiB: read at each admission, not once at start,
	/// because other programs and this worker's own work use memory too.
	pub fn free_mib(&self) -> u64 {
		match &self.memory {
			MemorySource::Host => meminfo("MemAvailable:").or_else(|| meminfo("MemFree:")).unwrap_or(0),
			MemorySource::Nvidia(id) => nvidia_smi(id, "memory.free").and_then(|free| free.parse().ok()).unwrap_or(0),
		}
	}

	/// Whether a unit of `model`, trained with `train` on `data`, fits in the memory free
	/// now; the error says how much it needs and how much is free.
	pub fn admit(&self, model: &ModelConfig, train: &TrainConfig, data: &TrainingData) -> Result<()> {
		let on_gpu = self.profile.device == DeviceKind::Gpu;
		let needed = unit_memory_mib(model, train, data, on_gpu)?;
		let free = self.free_mib();
		if needed > free {
			anyhow::bail!("the unit needs about {needed} MiB and {free} MiB are free on the device now");
		}
		Ok(())
	}
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
	/// The index or UUID `nvidia-smi` knows it by, for an NVIDIA GPU.
	pub nvidia_id: Option<String>,
}

/// One field of `nvidia-smi --query-gpu` for the GPU `id` (an index or a UUID).
fn nvidia_smi(id: &str, field: &str) -> Option<String> {
	std::process::Command::new("nvidia-smi")
		.args([format!("--query-gpu={field}"), "--format=csv,noheader,nounits".to_owned(), format!("--id={id}")])
		.output()
		.ok()
		.filter(|output| output.status.success())
		.map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// libtorch's CUDA device `ordinal` (counted from 0 among those `CUDA_VISIBLE_DEVICES`
/// shows), when this machine has it. tch builds against
/// libtorch's CPU library, so libtorch's CUDA library is loaded first (found on the
/// library path, or next to the libtorch the worker was built with) to register its
/// kernels; then libtorch itself is asked. The name and memory come from `nvidia-smi`.
pub fn torch_cuda(ordinal: usize) -> Option<Gpu> {
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
	if !loaded || !tch::Cuda::is_available() || usize::try_from(tch::Cuda::device_count()).unwrap_or(0) <= ordinal {
		return None;
	}
	// libtorch's device n is the n-th that `CUDA_VISIBLE_DEVICES` names; nvidia-smi ignores
	// that variable and counts every GPU, so it is asked for that one by name.
	let id = visible_device(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(), ordinal);
	let query = nvidia_smi(&id, "name,memory.total");
	let (name, memory_mib, nvidia_id) = match query.as_deref().and_then(|line| line.rsplit_once(',')) {
		Some((name, memory)) => (name.trim().to_owned(), memory.trim().parse().ok(), Some(id)),
		None => (format!("CUDA device {ordinal}"), None, None),
	};
	Some(Gpu { name: format!("{name} (libtorch CUDA)"), memory_mib, nvidia_id })
}

/// The GPU (an index or a UUID, as nvidia-smi takes it) that CUDA numbers `ordinal` under
/// `CUDA_VISIBLE_DEVICES` = `visible`: its entry `ordinal`, or GPU `ordinal` when it is
/// unset or empty.
fn visible_device(visible: Option<&str>, ordinal: usize) -> String {
	let listed = visible.map(|list| list.split(',').map(str::trim).filter(|entry| !entry.is_empty()).collect::<Vec<_>>());
	match listed {
		Some(entries) if !entries.is_empty() => entries.get(ordinal).map_or_else(|| ordinal.to_string(), |entry| (*entry).to_owned()),
		_ => ordinal.to_string(),
	}
}

/// Detects this machine: the device the chosen backend trains on, its memory, and a
/// measured throughput. `gpu` is the GPU when training on one.
pub fn detect(gpu: Option<Gpu>, region: &str) -> Result<Detected> {
	let host_total = meminfo("MemTotal:").unwrap_or(0);
	let (device, model, total, memory) = match gpu {
		Some(Gpu { name, memory_mib: Some(total), nvidia_id: Some(id) }) => (DeviceKind::Gpu, name, total, MemorySource::Nvidia(id)),
		Some(Gpu { name, .. }) => (DeviceKind::Gpu, name, host_total, MemorySource::Host),
		None => (DeviceKind::Cpu, cpu_model(), host_total, MemorySource::Host),
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
	Ok(Detected { profile, memory })
}

/// The memory training a unit needs, in MiB: every buffer of the step graph (parameters,
/// moments, activations, gradients), the dataset (twice on a GPU: the host's copy and the
/// device's), a host copy of the state for checkpoints, and the backend's allowance.
/// Known from the spec alone, so it is checked before accepting.
pub fn unit_memory_mib(model: &ModelConfig, train: &TrainConfig, data: &TrainingData, on_gpu: bool) -> Result<u64> {
	let graph = Graph::build(model, train).map_err(|error| anyhow::anyhow!("{error:?}"))?;
	let buffers: u64 = graph.buffers.iter().map(|&(len, _)| len as u64).sum();
	let state: u64 = graph.state.iter().filter_map(|&id| graph.values.get(id)).map(|value| value.len as u64).sum();
	let dataset = data.as_ref().word_count() as u64;
	let (copies, overhead) = if on_gpu { (2, GPU_OVERHEAD_MIB) } else { (1, HOST_OVERHEAD_MIB) };
	let words = buffers + 2 * state + copies * dataset;
	Ok((words * 4).div_ceil(1 << 20) + overhead)
}

#[cfg(test)]
mod tests {
	use super::*;

	/// A unit is admitted by the memory free when it comes, which is there to read on any
	/// host, and a GPU counts the dataset twice and its driver's allowance.
	#[test]
	fn admission_reads_the_free_memory_and_counts_what_a_gpu_adds() {
		let detected = detect(None, "local").unwrap();
		let free = detected.free_mib();
		assert!(free > 0 && free <= u64::from(detected.profile.memory_mib), "{free} of {}", detected.profile.memory_mib);
		let crate::train::UnitWork { model, train, .. } = crate::train::tests::work(&std::env::temp_dir());
		// 4,096 samples of 63 features and a label: exactly 1 MiB.
		let data = TrainingData::from(touchstone_kernels::job::data::Dataset {
			features: vec![0.0; 63 * 4096],
			labels: vec![0; 4096],
			feature_len: 63,
			classes: 4,
		});
		let on_cpu = unit_memory_mib(&model, &train, &data, false).unwrap();
		let on_gpu = unit_memory_mib(&model, &train, &data, true).unwrap();
		assert_eq!(on_gpu - on_cpu, GPU_OVERHEAD_MIB - HOST_OVERHEAD_MIB + 1, "one more 1 MiB dataset copy and the driver");
		assert!(detected.admit(&model, &train, &data).is_ok());
		// A GPU whose memory cannot be read has none free: nothing is admitted on a guess.
		let unreadable = Detected { memory: MemorySource::Nvidia("no-such-gpu".into()), ..detected };
		assert_eq!(unreadable.free_mib(), 0);
		let refused = unreadable.admit(&model, &train, &data).unwrap_err().to_string();
		assert!(refused.contains("MiB and 0 MiB are free on the device now"), "{refused}");
	}

	/// libtorch's device n is the n-th `CUDA_VISIBLE_DEVICES` names, by index or UUID.
	#[test]
	fn the_gpu_queried_is_the_one_cuda_makes_visible_under_that_number() {
		assert_eq!(visible_device(None, 0), "0");
		assert_eq!(visible_device(None, 1), "1");
		assert_eq!(visible_device(Some(""), 0), "0");
		assert_eq!(visible_device(Some("2,3"), 0), "2");
		assert_eq!(visible_device(Some("2,3"), 1), "3");
		assert_eq!(visible_device(Some(" GPU-8f3a,1"), 0), "GPU-8f3a");
	}
}

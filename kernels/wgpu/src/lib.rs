//! Backend 2: WGSL compute kernels through `wgpu`, bit-identical to the CPU reference.
//!
//! Every operator is a port of its reference module, line by line, in a
//! `.wgsl` file beside this one; each file opens with its reduction order.
//! `common.wgsl` ports `contract.rs` and `math.rs` and is prepended to every
//! other shader. The arithmetic follows the contract exactly (see
//! `docs/kernels.md`): only `+`, `−`, `×` and integer operations, every
//! product outside a contraction masked by `flush`, contraction operands
//! quantized to 12 bits when loaded, every sum in 32-wide chunks folded in
//! order, no atomics, no split-K, no subgroup operations.
//!
//! # Trusting an adapter
//!
//! A driver may contract a multiply-add into an FMA, flush subnormals, or
//! miscompile an integer mask; the contract is built so that none of this
//! changes a bit, but that is a claim about the driver, so it is tested on
//! every adapter before use. [`WgpuBackend::new`] runs the conformance self-test
//! ([`conformance`]): the pinned functions over the contract vectors' inputs,
//! cancellation-heavy multiply-add triples, tiny operands, and every operator
//! on the contract vectors' shapes, each compared bit for bit with the CPU
//! reference. An adapter that differs anywhere is refused with
//! [`WgpuError::Nonconformant`], naming what differed.
//!
//! # Execution
//!
//! Operators are recorded into one command encoder and submitted in batches;
//! [`Backend::download`] submits and waits. Per-dispatch parameters go to a
//! uniform arena at distinct offsets, so no write overtakes a recorded
//! dispatch. Index buffers keep a host copy, so that bad labels and row
//! indices are refused with the reference's own errors before any dispatch.

extern crate alloc;

pub mod conformance;

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use std::sync::{mpsc, Mutex};

use ::wgpu as gpu;
use gpu::util::DeviceExt;

use touchstone_kernels::ops::activation::Activation;
use touchstone_kernels::ops::attention::CausalShape;
use touchstone_kernels::ops::norm::{Norm, NormShape};
use touchstone_kernels::ops::heads::HeadsShape;
use touchstone_kernels::ops::embedding::rows_by_index;
use touchstone_kernels::exec::backend::Backend;
use touchstone_kernels::ops::bias::BiasLayout;
use touchstone_kernels::arith::CHUNK;
use touchstone_kernels::ops::contraction::Contraction;
use touchstone_kernels::error::{check_len, check_nonzero, element_count, KernelError};
use touchstone_kernels::ops::loss::ClassifierShape;
use touchstone_kernels::arith::math;
use touchstone_kernels::ops::optim::{self, AdamWScalars, SgdMomentum};
use touchstone_kernels::proof::hash::Digest;
use touchstone_kernels::proof::merkle::MerkleError;
use touchstone_kernels::proof::state_tree::{chunk_count, state_chunk_count};

/// Environment variable that restricts adapter selection to adapters whose
/// name contains its value (case-insensitive), e.g. `llvmpipe`.
pub const ADAPTER_ENV: &str = "TOUCHSTONE_WGPU_ADAPTER";

/// The shared prelude: the contract's arithmetic and pinned math in WGSL.
const COMMON_WGSL: &str = include_str!("common.wgsl");
const CONTRACT_WGSL: &str = include_str!("contract.wgsl");
const ELEMENTWISE_WGSL: &str = include_str!("elementwise.wgsl");
const GATHER_WGSL: &str = include_str!("gather.wgsl");
const REDUCE_WGSL: &str = include_str!("reduce.wgsl");
const SOFTMAX_WGSL: &str = include_str!("softmax.wgsl");
const TRANSFORMER_WGSL: &str = include_str!("transformer.wgsl");
const PROBE_WGSL: &str = include_str!("probe.wgsl");
const FINITE_WGSL: &str = include_str!("finite.wgsl");
const BLAKE3_WGSL: &str = include_str!("blake3.wgsl");

/// BLAKE3's flag on the root node's compression.
const BLAKE3_ROOT_FLAG: u32 = 8;

/// BLAKE3's compression function in WGSL, fully unrolled: every round's
/// message word is a named local, so no array is indexed at run time (GPUs
/// keep such locals in registers). Appended to `blake3.wgsl`.
fn blake3_compress_wgsl() -> String {
	const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
	const LANES: [[usize; 4]; 8] =
		[[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15], [0, 5, 10, 15], [1, 6, 11, 12], [2, 7, 8, 13], [3, 4, 9, 14]];
	let mut source = String::from(
		"fn blake3_compress(cv: array<u32, 8>, m: array<u32, 16>, counter_lo: u32, counter_hi: u32, block_len: u32, flags: u32) -> array<u32, 8> {\n",
	);
	for i in 0..8 {
		source += &format!("    var v{i} = cv[{i}u];\n");
	}
	for (i, iv) in ["0x6A09E667u", "0xBB67AE85u", "0x3C6EF372u", "0xA54FF53Au"].iter().enumerate() {
		source += &format!("    var v{} = {iv};\n", i + 8);
	}
	source += "    var v12 = counter_lo;\n    var v13 = counter_hi;\n    var v14 = block_len;\n    var v15 = flags;\n";
	for i in 0..16 {
		source += &format!("    let m{i} = m[{i}u];\n");
	}
	// Round r reads the message permuted r times: word i of it is m[schedule[i]].
	let mut schedule: [usize; 16] = core::array::from_fn(|i| i);
	for _round in 0..7 {
		for (g, [a, b, c, d]) in LANES.iter().enumerate() {
			let (x, y) = (schedule[2 * g], schedule[2 * g + 1]);
			source += &format!(
				"    v{a} = v{a} + v{b} + m{x}; v{d} = rotr(v{d} ^ v{a}, 16u); v{c} = v{c} + v{d}; v{b} = rotr(v{b} ^ v{c}, 12u);\n    v{a} = v{a} + v{b} + m{y}; v{d} = rotr(v{d} ^ v{a}, 8u); v{c} = v{c} + v{d}; v{b} = rotr(v{b} ^ v{c}, 7u);\n"
			);
		}
		schedule = core::array::from_fn(|i| schedule[PERMUTATION[i]]);
	}
	source += "    return array<u32, 8>(v0 ^ v8, v1 ^ v9, v2 ^ v10, v3 ^ v11, v4 ^ v12, v5 ^ v13, v6 ^ v14, v7 ^ v15);\n}\n";
	source
}

/// Bytes of the per-batch parameter arena; a batch is submitted when it fills.
const ARENA_BYTES: u64 = 1 << 18;
/// Dispatches recorded before a batch is submitted anyway, to bound latency.
const MAX_PENDING_DISPATCHES: usize = 512;
/// Bytes reserved for one dispatch's uniform parameters (every `Params` struct fits).
const PARAMS_BYTES: u64 = 256;
/// Invocations per workgroup of the one-dimensional kernels.
const LINEAR_WIDTH: u32 = 256;
/// Workgroups per dispatch dimension that every adapter accepts.
const MAX_GROUPS: u32 = 65_535;
/// Output tile edge of `contract.wgsl` (a work layout, not an arithmetic rule).
const CONTRACT_TILE: u32 = 32;

/// What can go wrong in the wgpu backend.
#[derive(Debug)]
pub enum WgpuError {
	/// The operator's input is invalid, exactly as the reference would report it.
	Kernel(KernelError),
	/// No adapter at all: no Vulkan (or Metal, DX12) driver is installed.
	NoAdapter {
		/// The adapter filter in effect, if any.
		filter: Option<String>,
	},
	/// Device `ordinal` was asked for ([`WgpuBackend::nth`]), and only `conforming` adapters
	/// pass the conformance self-test.
	TooFewAdapters {
		/// The device asked for, from 0.
		ordinal: usize,
		/// The adapters that pass.
		conforming: usize,
	},
	/// Adapters exist, but none reproduces the reference bit for bit.
	Nonconformant {
		/// Each refused adapter with the checks it failed.
		reports: Vec<conformance::Report>,
	},
	/// The adapter refused a device, a shader, a dispatch or a buffer mapping.
	Device {
		/// The adapter, by name.
		adapter: String,
		/// wgpu's message.
		message: String,
	},
	/// A tensor is larger than the adapter can bind.
	TooLarge {
		/// Bytes asked for.
		bytes: u64,
		/// The adapter's limit on one storage binding.
		limit: u64,
	},
}

impl From<KernelError> for WgpuError {
	fn from(error: KernelError) -> Self {
		Self::Kernel(error)
	}
}

impl fmt::Display for WgpuError {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		match self {
			Self::Kernel(error) => write!(f, "{error}"),
			Self::NoAdapter { filter: None } => write!(
				f,
				"no wgpu adapter found: install a Vulkan driver; for the CPU driver (lavapipe) run \
				 `apt-get install mesa-vulkan-drivers libvulkan1`"
			),
			Self::NoAdapter { filter: Some(filter) } => write!(
				f,
				"no wgpu adapter whose name contains {filter:?} ({ADAPTER_ENV}); unset it, or install the \
				 driver (for lavapipe: `apt-get install mesa-vulkan-drivers libvulkan1`)"
			),
			Self::TooFewAdapters { ordinal, conforming } => write!(
				f,
				"GPU {ordinal} (counting from 0) was asked for, and {conforming} adapters pass the conformance self-test: ask for fewer devices"
			),
			Self::Nonconformant { reports } => {
				write!(f, "no adapter reproduces the CPU reference bit for bit, so none can be trusted:")?;
				for report in reports {
					write!(f, " [{report}]")?;
				}
				write!(f, "; use the CPU reference, or report the driver (see docs/kernels.md)")
			},
			Self::Device { adapter, message } => write!(f, "wgpu adapter {adapter}: {message}"),
			Self::TooLarge { bytes, limit } => {
				write!(f, "a {bytes}-byte tensor exceeds the adapter's {limit}-byte storage binding limit")
			},
		}
	}
}

impl std::error::Error for WgpuError {}

/// A device-resident `f32` buffer.
///
/// Deliberately not `Clone`: a writable operand must never alias another
/// operand of the same dispatch, and the borrow checker enforces that only
/// for distinct values.
#[derive(Debug)]
pub struct WgpuTensor {
	buffer: gpu::Buffer,
	len: usize,
}

/// A device-resident `u32` buffer with its host copy (for validation).
#[derive(Debug)]
pub struct WgpuIndices {
	buffer: gpu::Buffer,
	host: Vec<u32>,
}

/// One kernel entry point: its pipeline and the layout of its bind group.
#[derive(Clone)]
struct Kernel {
	pipeline: gpu::ComputePipeline,
	/// Fetched once: `get_bind_group_layout` is not free, and every dispatch needs it.
	layout: gpu::BindGroupLayout,
}

/// `transformer.wgsl`'s parameters for a norm of `shape`: rows, width, mode, `recip(width)`, `ε`.
fn norm_params(shape: NormShape) -> [u32; 8] {
	let mode = match shape.norm {
		Norm::Layer => 0,
		Norm::Rms => 1,
	};
	[shape.rows as u32, shape.width as u32, mode, math::recip(shape.width as f32).to_bits(), shape.epsilon.to_bits(), 0, 0, 0]
}

/// `transformer.wgsl`'s parameters for a causal softmax of `shape`: rows, positions, scale.
fn causal_params(shape: CausalShape) -> [u32; 8] {
	[(shape.blocks * shape.positions) as u32, shape.positions as u32, 0, 0, shape.scale.to_bits(), 0, 0, 0]
}

/// The compute kernels, one per entry point.
struct Pipelines {
	/// `contract.wgsl`, one per index-map kind: matmul, conv forward, input grad, weight grad.
	contract: [Kernel; 4],
	bias_add: Kernel,
	activation_forward: Kernel,
	activation_backward: Kernel,
	sgd_momentum: Kernel,
	adamw: Kernel,
	scale_below_one: Kernel,
	add_assign: Kernel,
	gather_rows: Kernel,
	chunk_sums: Kernel,
	fold_chunks: Kernel,
	square_chunk_sums: Kernel,
	finish_norm: Kernel,
	softmax_rows: Kernel,
	softmax_loss: Kernel,
	/// `transformer.wgsl`: the norms and the causal softmax, a row per invocation.
	norm_forward: Kernel,
	norm_backward_rows: Kernel,
	norm_backward_columns: Kernel,
	causal_softmax: Kernel,
	causal_softmax_grad: Kernel,
	scatter_add_rows: Kernel,
	/// `gather.wgsl`: the heads' layouts, bit copies.
	split_heads: Kernel,
	merge_heads: Kernel,
	probe: Kernel,
	non_finite: Kernel,
	/// `blake3.wgsl`: chunk chaining values of one tensor, then one level of parents.
	chunk_cvs: Kernel,
	merge_level: Kernel,
}

/// The wgpu backend: one device, its pipelines and the recording state.
pub struct WgpuBackend {
	device: gpu::Device,
	queue: gpu::Queue,
	info: gpu::AdapterInfo,
	name: String,
	pipelines: Pipelines,
	/// Storage binding limit of the device, in bytes.
	max_binding: u64,
	/// The compute pass being recorded. Declared before `encoder` so that it
	/// is dropped (ended) first.
	pass: Option<gpu::ComputePass<'static>>,
	/// The encoder of the current batch.
	encoder: Option<gpu::CommandEncoder>,
	pending: usize,
	/// Per-dispatch parameters, reset after each submission.
	arena: gpu::Buffer,
	arena_offset: u64,
	/// Alignment of uniform and storage binding offsets in the arena.
	arena_alignment: u64,
	/// Grow-only scratch for chunk sums and row losses.
	scratch: Option<gpu::Buffer>,
	/// Norm and clipping coefficient, written by `finish_norm`.
	clip_state: gpu::Buffer,
	/// Set by `non_finite` when a checked tensor holds NaN or an infinity.
	finite_flag: gpu::Buffer,
	/// Grow-only read-back buffer.
	staging: Option<gpu::Buffer>,
	/// Errors wgpu reported outside an error scope, surfaced at the next sync.
	device_errors: Arc<Mutex<Vec<String>>>,
}

impl fmt::Debug for WgpuBackend {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		f.debug_struct("WgpuBackend").field("adapter", &self.info.name).field("driver", &self.info.driver).finish()
	}
}

/// Bytes of `values` in little-endian order.
fn f32_bytes(values: &[f32]) -> Vec<u8> {
	values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Bytes of `values` in little-endian order.
fn u32_bytes(values: &[u32]) -> Vec<u8> {
	values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Workgroup counts for `len` invocations of `width`: X up to the limit, then rows along Y.
fn linear_groups(len: usize, width: u32) -> [u32; 3] {
	let groups = (len as u64).div_ceil(u64::from(width)).max(1);
	let x = groups.min(u64::from(MAX_GROUPS));
	[x as u32, groups.div_ceil(x) as u32, 1]
}

/// An adapter's rank when several are present: real GPUs first.
fn preference(info: &gpu::AdapterInfo) -> u8 {
	match info.device_type {
		gpu::DeviceType::DiscreteGpu => 0,
		gpu::DeviceType::IntegratedGpu => 1,
		gpu::DeviceType::VirtualGpu => 2,
		gpu::DeviceType::Cpu => 3,
		gpu::DeviceType::Other => 4,
	}
}

impl WgpuBackend {
	/// Opens the preferred adapter that passes the conformance self-test.
	///
	/// Adapters are tried in the order discrete GPU, integrated, virtual, CPU
	/// (lavapipe); [`ADAPTER_ENV`] restricts them by name. Fails with
	/// [`WgpuError::NoAdapter`] when there is none, and with
	/// [`WgpuError::Nonconformant`] when none reproduces the reference.
	pub fn new() -> Result<Self, WgpuError> {
		Self::nth(0)
	}

	/// Opens the `ordinal`-th adapter, counting from 0 in the order of [`Self::new`], that
	/// passes the conformance self-test: a worker training on several GPUs opens one per
	/// device. Only adapters on the graphics API of the preferred one are counted, so a
	/// GPU that several APIs list (Vulkan and GL) is not opened twice. Fails as
	/// [`Self::new`] does when fewer than `ordinal + 1` adapters conform.
	pub fn nth(ordinal: usize) -> Result<Self, WgpuError> {
		let filter = std::env::var(ADAPTER_ENV).ok().filter(|value| !value.is_empty());
		let instance = gpu::Instance::new(gpu::InstanceDescriptor::new_without_display_handle_from_env());
		let mut adapters = pollster::block_on(instance.enumerate_adapters(gpu::Backends::all()));
		if let Some(filter) = &filter {
			let wanted = filter.to_lowercase();
			adapters.retain(|adapter| adapter.get_info().name.to_lowercase().contains(&wanted));
		}
		adapters.sort_by_key(|adapter| preference(&adapter.get_info()));
		let Some(api) = adapters.first().map(|adapter| adapter.get_info().backend) else {
			return Err(WgpuError::NoAdapter { filter });
		};
		adapters.retain(|adapter| ordinal == 0 || adapter.get_info().backend == api);
		let mut reports = Vec::new();
		let mut conforming = 0;
		for adapter in adapters {
			let mut backend = Self::open(&adapter)?;
			let failures = conformance::self_test(&mut backend)?;
			if failures.is_empty() {
				if conforming == ordinal {
					return Ok(backend);
				}
				conforming += 1;
				continue;
			}
			reports.push(conformance::Report { adapter: backend.adapter_description(), failures });
		}
		if conforming > 0 {
			return Err(WgpuError::TooFewAdapters { ordinal, conforming });
		}
		Err(WgpuError::Nonconformant { reports })
	}

	/// Opens `adapter` without the conformance self-test. Only for the
	/// self-test's own tests and for diagnosing a refused driver: nothing a
	/// backend opened this way computes may be trusted until
	/// [`conformance::self_test`] returns no failures for it.
	pub fn open_unchecked(adapter: &gpu::Adapter) -> Result<Self, WgpuError> {
		Self::open(adapter)
	}

	/// Creates the device, compiles every kernel and allocates the fixed buffers.
	fn open(adapter: &gpu::Adapter) -> Result<Self, WgpuError> {
		let info = adapter.get_info();
		let device_error = |message: String| WgpuError::Device { adapter: info.name.clone(), message };
		let limits = adapter.limits();
		let (device, queue) = pollster::block_on(adapter.request_device(&gpu::DeviceDescriptor {
			label: Some("touchstone-kernels"),
			required_features: gpu::Features::empty(),
			required_limits: limits.clone(),
			experimental_features: gpu::ExperimentalFeatures::disabled(),
			memory_hints: gpu::MemoryHints::Performance,
			trace: gpu::Trace::Off,
		}))
		.map_err(|error| device_error(error.to_string()))?;

		let scope = device.push_error_scope(gpu::ErrorFilter::Validation);
		let pipelines = Pipelines::new(&device);
		if let Some(error) = pollster::block_on(scope.pop()) {
			return Err(device_error(format!("a kernel failed to compile: {error}")));
		}
		let device_errors = Arc::new(Mutex::new(Vec::new()));
		let sink = Arc::clone(&device_errors);
		device.on_uncaptured_error(Arc::new(move |error: gpu::Error| {
			if let Ok(mut errors) = sink.lock() {
				errors.push(error.to_string());
			}
		}));
		let arena = device.create_buffer(&gpu::BufferDescriptor {
			label: Some("parameter arena"),
			size: ARENA_BYTES,
			usage: gpu::BufferUsages::UNIFORM | gpu::BufferUsages::STORAGE | gpu::BufferUsages::COPY_DST,
			mapped_at_creation: false,
		});
		let clip_state = device.create_buffer(&gpu::BufferDescriptor {
			label: Some("clip state"),
			size: 8,
			usage: gpu::BufferUsages::STORAGE | gpu::BufferUsages::COPY_SRC,
			mapped_at_creation: false,
		});
		let finite_flag = device.create_buffer(&gpu::BufferDescriptor {
			label: Some("non-finite flag"),
			size: 4,
			usage: gpu::BufferUsages::STORAGE | gpu::BufferUsages::COPY_SRC | gpu::BufferUsages::COPY_DST,
			mapped_at_creation: false,
		});
		let arena_alignment = u64::from(limits.min_uniform_buffer_offset_alignment)
			.max(u64::from(limits.min_storage_buffer_offset_alignment))
			.max(PARAMS_BYTES);
		let name = format!("wgpu ({}, {})", info.name, info.driver_info);
		Ok(Self {
			device,
			queue,
			name,
			pipelines,
			max_binding: limits.max_storage_buffer_binding_size.min(limits.max_buffer_size),
			pass: None,
			encoder: None,
			pending: 0,
			arena,
			arena_offset: 0,
			arena_alignment,
			scratch: None,
			clip_state,
			finite_flag,
			staging: None,
			device_errors,
			info,
		})
	}

	/// The adapter this backend runs on.
	pub fn adapter_info(&self) -> &gpu::AdapterInfo {
		&self.info
	}

	/// "name (device type, driver, driver info)", for reports and benchmark tables.
	pub fn adapter_description(&self) -> String {
		format!("{} ({:?}, {} {})", self.info.name, self.info.device_type, self.info.driver, self.info.driver_info)
	}

	/// Submits everything recorded so far and waits until the device is idle.
	pub fn synchronize(&mut self) -> Result<(), WgpuError> {
		self.flush();
		self.wait()
	}

	/// Submits the batch being recorded, if any, and resets the arena.
	fn flush(&mut self) {
		self.pass = None;
		if let Some(encoder) = self.encoder.take() {
			self.queue.submit([encoder.finish()]);
		}
		self.pending = 0;
		self.arena_offset = 0;
	}

	/// Blocks until submitted work is done; reports errors wgpu raised meanwhile.
	fn wait(&mut self) -> Result<(), WgpuError> {
		self.device.poll(gpu::PollType::wait_indefinitely()).map_err(|error| self.device_error(error.to_string()))?;
		self.take_device_errors()
	}

	/// Fails with the first error wgpu reported outside an error scope, if any.
	fn take_device_errors(&self) -> Result<(), WgpuError> {
		let mut errors = self.device_errors.lock().map_err(|_| self.device_error("error sink poisoned".into()))?;
		if errors.is_empty() {
			return Ok(());
		}
		let message = errors.join("; ");
		errors.clear();
		Err(self.device_error(message))
	}

	fn device_error(&self, message: String) -> WgpuError {
		WgpuError::Device { adapter: self.info.name.clone(), message }
	}

	/// The encoder of the current batch, for commands outside a compute pass
	/// (the open pass, if any, is ended first).
	fn encoder(&mut self) -> &mut gpu::CommandEncoder {
		self.pass = None;
		self.encoder.get_or_insert_with(|| {
			self.device.create_command_encoder(&gpu::CommandEncoderDescriptor { label: Some("touchstone batch") })
		})
	}

	/// Writes each of `blocks` to its own aligned region of the arena, all in
	/// the same batch (submitting the current batch first if they do not fit
	/// together). Returns the buffer and each block's offset and size.
	///
	/// Regions are never reused within a batch: `write_buffer` lands before
	/// the whole next submission, so a reused region would be overwritten
	/// before earlier dispatches of the batch read it.
	fn arena_regions(&mut self, blocks: &[&[u32]]) -> (gpu::Buffer, Vec<(u64, u64)>) {
		let sizes: Vec<u64> = blocks
			.iter()
			.map(|words| ((words.len() as u64) * 4).max(16).div_ceil(self.arena_alignment) * self.arena_alignment)
			.collect();
		let total: u64 = sizes.iter().sum();
		if total > ARENA_BYTES {
			// Larger than the whole arena: a buffer of their own.
			let mut contents = Vec::new();
			let mut regions = Vec::new();
			for (words, &size) in blocks.iter().zip(&sizes) {
				regions.push((contents.len() as u64, size));
				let mut bytes = u32_bytes(words);
				bytes.resize(size as usize, 0);
				contents.extend(bytes);
			}
			let buffer = self.device.create_buffer_init(&gpu::util::BufferInitDescriptor {
				label: Some("large parameters"),
				contents: &contents,
				usage: gpu::BufferUsages::UNIFORM | gpu::BufferUsages::STORAGE,
			});
			return (buffer, regions);
		}
		if self.arena_offset + total > ARENA_BYTES {
			self.flush();
		}
		let mut regions = Vec::new();
		for (words, &size) in blocks.iter().zip(&sizes) {
			let offset = self.arena_offset;
			self.arena_offset += size;
			let mut bytes = u32_bytes(words);
			bytes.resize(bytes.len().max(16), 0);
			self.queue.write_buffer(&self.arena, offset, &bytes);
			regions.push((offset, size));
		}
		(self.arena.clone(), regions)
	}

	/// A binding of `size` bytes at `offset` of `buffer`.
	fn region_binding(buffer: &gpu::Buffer, (offset, size): (u64, u64)) -> gpu::BindingResource<'_> {
		gpu::BindingResource::Buffer(gpu::BufferBinding { buffer, offset, size: core::num::NonZeroU64::new(size) })
	}

	/// Records one dispatch of `kernel` with `params` at binding 0 and
	/// `buffers` at their bindings.
	fn dispatch(&mut self, kernel: &Kernel, params: &[u32], buffers: &[(u32, &gpu::Buffer)], groups: [u32; 3]) {
		let (params_buffer, regions) = self.arena_regions(&[params]);
		let mut entries =
			vec![gpu::BindGroupEntry { binding: 0, resource: Self::region_binding(&params_buffer, regions[0]) }];
		for &(binding, buffer) in buffers {
			entries.push(gpu::BindGroupEntry { binding, resource: buffer.as_entire_binding() });
		}
		self.record(kernel, &entries, groups);
	}

	/// Records one dispatch of `kernel` with the bind group `entries`.
	///
	/// All dispatches of a batch share one compute pass: each dispatch is its
	/// own usage scope, and wgpu orders a dispatch that reads a buffer after
	/// the one that wrote it, so sharing changes nothing but the overhead.
	fn record(&mut self, kernel: &Kernel, entries: &[gpu::BindGroupEntry<'_>], groups: [u32; 3]) {
		let bind_group =
			self.device.create_bind_group(&gpu::BindGroupDescriptor { label: None, layout: &kernel.layout, entries });
		if self.pass.is_none() {
			let encoder = self.encoder();
			let pass = encoder.begin_compute_pass(&gpu::ComputePassDescriptor::default()).forget_lifetime();
			self.pass = Some(pass);
		}
		if let Some(pass) = self.pass.as_mut() {
			pass.set_pipeline(&kernel.pipeline);
			pass.set_bind_group(0, &bind_group, &[]);
			pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
		}
		self.pending += 1;
		if self.pending >= MAX_PENDING_DISPATCHES {
			self.flush();
		}
	}

	/// A device buffer of `len` `f32`s (at least one word: bindings cannot be empty).
	fn storage_buffer(&self, len: usize, contents: Option<&[u8]>) -> Result<gpu::Buffer, WgpuError> {
		let bytes = (len.max(1) as u64) * 4;
		if bytes > self.max_binding {
			return Err(WgpuError::TooLarge { bytes, limit: self.max_binding });
		}
		let usage = gpu::BufferUsages::STORAGE | gpu::BufferUsages::COPY_SRC | gpu::BufferUsages::COPY_DST;
		Ok(match contents {
			Some(contents) if !contents.is_empty() => {
				self.device.create_buffer_init(&gpu::util::BufferInitDescriptor { label: None, contents, usage })
			},
			// wgpu zero-initialises new buffers.
			_ => self.device.create_buffer(&gpu::BufferDescriptor {
				label: None,
				size: bytes,
				usage,
				mapped_at_creation: false,
			}),
		})
	}

	/// The scratch buffer, grown to at least `len` `f32`s.
	fn scratch(&mut self, len: usize) -> Result<gpu::Buffer, WgpuError> {
		let bytes = (len.max(1) as u64) * 4;
		match &self.scratch {
			Some(buffer) if buffer.size() >= bytes => Ok(buffer.clone()),
			_ => {
				// Recorded dispatches keep the old buffer alive until they ran.
				let buffer = self.storage_buffer(len.max(1024), None)?;
				self.scratch = Some(buffer.clone());
				Ok(buffer)
			},
		}
	}

	/// Reads `len` `u32` words of `buffer` back, after all recorded work.
	fn read_words(&mut self, buffer: &gpu::Buffer, len: usize) -> Result<Vec<u32>, WgpuError> {
		if len == 0 {
			return Ok(Vec::new());
		}
		let bytes = (len as u64) * 4;
		let staging = match &self.staging {
			Some(staging) if staging.size() >= bytes => staging.clone(),
			_ => {
				let staging = self.device.create_buffer(&gpu::BufferDescriptor {
					label: Some("read-back"),
					size: bytes.next_power_of_two().max(4096),
					usage: gpu::BufferUsages::MAP_READ | gpu::BufferUsages::COPY_DST,
					mapped_at_creation: false,
				});
				self.staging = Some(staging.clone());
				staging
			},
		};
		self.encoder().copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
		self.flush();
		let (sender, receiver) = mpsc::channel();
		staging.map_async(gpu::MapMode::Read, 0..bytes, move |result| {
			// The receiver waits below; a failed send means it is gone, and nothing is lost.
			let _ = sender.send(result);
		});
		self.wait()?;
		let mapped = receiver.recv().map_err(|error| self.device_error(format!("buffer mapping lost: {error}")))?;
		mapped.map_err(|error| self.device_error(format!("buffer mapping failed: {error}")))?;
		let words = {
			let view = staging.get_mapped_range(0..bytes).map_err(|error| self.device_error(error.to_string()))?;
			view.chunks_exact(4).map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]])).collect()
		};
		staging.unmap();
		Ok(words)
	}

	/// Runs the conformance probe: `function` (see `probe.wgsl`) over `x`, `y`, `z`.
	pub(crate) fn probe(&mut self, function: u32, x: &[f32], y: &[f32], z: &[f32]) -> Result<Vec<f32>, WgpuError> {
		check_len("y", y.len(), x.len())?;
		check_len("z", z.len(), x.len())?;
		let inputs = [self.upload(x)?, self.upload(y)?, self.upload(z)?];
		let out = self.zeros(x.len())?;
		if !x.is_empty() {
			let kernel = self.pipelines.probe.clone();
			self.dispatch(
				&kernel,
				&[x.len() as u32, function, 0, 0],
				&[(1, &inputs[0].buffer), (2, &inputs[1].buffer), (3, &inputs[2].buffer), (4, &out.buffer)],
				linear_groups(x.len(), LINEAR_WIDTH),
			);
		}
		self.download(&out)
	}

	/// Records a contraction; a batched matmul's blocks are block `z` of each operand and
	/// of the output in the dispatch's third dimension ([`Contraction::per_block`]). The
	/// lengths are checked by the caller.
	fn record_contraction(
		&mut self,
		contraction: Contraction,
		lhs: &WgpuTensor,
		rhs: &WgpuTensor,
		out: &WgpuTensor,
	) -> Result<(), WgpuError> {
		// A batched matmul runs its matmul once per block, the block in dispatch `z`.
		let (contraction, blocks) = contraction.per_block();
		let dims = contraction.dims()?;
		let strides = if blocks > 1 {
			[contraction.lhs_len()? as u32, contraction.rhs_len()? as u32, contraction.output_len()? as u32]
		} else {
			[0; 3]
		};
		let (kind, transposed, conv) = match contraction {
			Contraction::Matmul { layout, .. } | Contraction::BatchedMatmul { layout, .. } => {
				(0, [u32::from(layout.lhs_transposed), u32::from(layout.rhs_transposed)], None)
			},
			Contraction::Conv2d(shape) => (1, [0, 0], Some(shape)),
			Contraction::Conv2dInputGrad(shape) => (2, [0, 0], Some(shape)),
			Contraction::Conv2dWeightGrad(shape) => (3, [0, 0], Some(shape)),
		};
		let geometry = conv.map_or([0u32; 8], |shape| {
			[
				shape.in_channels as u32,
				shape.out_channels as u32,
				shape.height as u32,
				shape.width as u32,
				shape.kernel_height as u32,
				shape.kernel_width as u32,
				shape.out_height() as u32,
				shape.out_width() as u32,
			]
		});
		let tile_rows = (dims.rows as u32).div_ceil(CONTRACT_TILE);
		let tile_cols = (dims.cols as u32).div_ceil(CONTRACT_TILE);
		let kernel = self.pipelines.contract[kind].clone();
		// Very tall or wide outputs, or very many blocks, are split into several dispatches.
		let blocks = blocks as u32;
		for block_offset in (0..blocks).step_by(MAX_GROUPS as usize) {
			for row_offset in (0..tile_rows).step_by(MAX_GROUPS as usize) {
				for col_offset in (0..tile_cols).step_by(MAX_GROUPS as usize) {
					let mut params =
						vec![dims.rows as u32, dims.cols as u32, dims.depth as u32, transposed[0], transposed[1]];
					params.extend_from_slice(&geometry);
					params.extend_from_slice(&[row_offset, col_offset]);
					params.extend_from_slice(&strides);
					params.push(block_offset);
					let groups = [
						(tile_cols - col_offset).min(MAX_GROUPS),
						(tile_rows - row_offset).min(MAX_GROUPS),
						(blocks - block_offset).min(MAX_GROUPS),
					];
					self.dispatch(&kernel, &params, &[(1, &lhs.buffer), (2, &rhs.buffer), (3, &out.buffer)], groups);
				}
			}
		}
		Ok(())
	}

	/// Records a heads' layout copy (`split_heads` or `merge_heads`) from `source` into `destination`.
	fn copy_heads(&mut self, kernel: &Kernel, shape: HeadsShape, source: &WgpuTensor, destination: &WgpuTensor) {
		let params = [destination.len as u32, shape.head_width as u32, shape.positions as u32, shape.heads as u32];
		let buffers = [(1, &source.buffer), (3, &destination.buffer)];
		self.dispatch(kernel, &params, &buffers, linear_groups(destination.len, LINEAR_WIDTH));
	}

	/// Records one element-wise dispatch of `kernel` over `len` elements.
	fn elementwise(
		&mut self,
		kernel: &Kernel,
		len: usize,
		mode: u32,
		layout: (u32, u32),
		scalars: &[f32],
		buffers: &[(u32, &gpu::Buffer)],
	) {
		if len == 0 {
			return;
		}
		let mut params = [0u32; 12];
		params[0] = len as u32;
		params[1] = mode;
		params[2] = layout.0;
		params[3] = layout.1;
		for (slot, scalar) in params[4..].iter_mut().zip(scalars) {
			*slot = scalar.to_bits();
		}
		self.dispatch(kernel, &params, buffers, linear_groups(len, LINEAR_WIDTH));
	}
}

impl Pipelines {
	/// Compiles every kernel; errors surface through the caller's error scope.
	fn new(device: &gpu::Device) -> Self {
		let module = |label: &str, source: &str| {
			device.create_shader_module(gpu::ShaderModuleDescriptor {
				label: Some(label),
				source: gpu::ShaderSource::Wgsl(format!("{COMMON_WGSL}\n{source}").into()),
			})
		};
		let pipeline = |module: &gpu::ShaderModule, entry: &str, constants: &[(&str, f64)]| {
			let pipeline = device.create_compute_pipeline(&gpu::ComputePipelineDescriptor {
				label: Some(entry),
				layout: None,
				module,
				entry_point: Some(entry),
				compilation_options: gpu::PipelineCompilationOptions {
					constants,
					// Every kernel writes its workgroup memory before reading it.
					zero_initialize_workgroup_memory: false,
				},
				cache: None,
			});
			Kernel { layout: pipeline.get_bind_group_layout(0), pipeline }
		};
		let contract = module("contract.wgsl", CONTRACT_WGSL);
		let elementwise = module("elementwise.wgsl", ELEMENTWISE_WGSL);
		let gather = module("gather.wgsl", GATHER_WGSL);
		let reduce = module("reduce.wgsl", REDUCE_WGSL);
		let softmax = module("softmax.wgsl", SOFTMAX_WGSL);
		let transformer = module("transformer.wgsl", TRANSFORMER_WGSL);
		let probe = module("probe.wgsl", PROBE_WGSL);
		let finite = module("finite.wgsl", FINITE_WGSL);
		let blake3 = module("blake3.wgsl", &format!("{BLAKE3_WGSL}\n{}", blake3_compress_wgsl()));
		Self {
			contract: [0.0, 1.0, 2.0, 3.0].map(|kind| pipeline(&contract, "contract", &[("KIND", kind)])),
			bias_add: pipeline(&elementwise, "bias_add", &[]),
			activation_forward: pipeline(&elementwise, "activation_forward", &[]),
			activation_backward: pipeline(&elementwise, "activation_backward", &[]),
			sgd_momentum: pipeline(&elementwise, "sgd_momentum", &[]),
			adamw: pipeline(&elementwise, "adamw", &[]),
			scale_below_one: pipeline(&elementwise, "scale_below_one", &[]),
			add_assign: pipeline(&elementwise, "add_assign", &[]),
			gather_rows: pipeline(&gather, "gather_rows", &[]),
			chunk_sums: pipeline(&reduce, "chunk_sums", &[]),
			fold_chunks: pipeline(&reduce, "fold_chunks", &[]),
			square_chunk_sums: pipeline(&reduce, "square_chunk_sums", &[]),
			finish_norm: pipeline(&reduce, "finish_norm", &[]),
			softmax_rows: pipeline(&softmax, "softmax_rows", &[]),
			softmax_loss: pipeline(&softmax, "softmax_loss", &[]),
			norm_forward: pipeline(&transformer, "norm_forward", &[]),
			norm_backward_rows: pipeline(&transformer, "norm_backward_rows", &[]),
			norm_backward_columns: pipeline(&transformer, "norm_backward_columns", &[]),
			causal_softmax: pipeline(&transformer, "causal_softmax", &[]),
			causal_softmax_grad: pipeline(&transformer, "causal_softmax_grad", &[]),
			scatter_add_rows: pipeline(&transformer, "scatter_add_rows", &[]),
			split_heads: pipeline(&gather, "split_heads", &[]),
			merge_heads: pipeline(&gather, "merge_heads", &[]),
			probe: pipeline(&probe, "probe", &[]),
			non_finite: pipeline(&finite, "non_finite", &[]),
			chunk_cvs: pipeline(&blake3, "chunk_cvs", &[]),
			merge_level: pipeline(&blake3, "merge_level", &[]),
		}
	}
}

/// The kernel mode number of an activation (see `common.wgsl`).
fn activation_mode(kind: Activation) -> u32 {
	match kind {
		Activation::Relu => 0,
		Activation::Tanh => 1,
		Activation::GeluTanh => 2,
	}
}

impl Backend for WgpuBackend {
	type Tensor = WgpuTensor;
	type Indices = WgpuIndices;
	type Error = WgpuError;

	fn name(&self) -> &str {
		&self.name
	}

	fn is_bit_exact(&self) -> bool {
		true
	}

	fn upload(&mut self, values: &[f32]) -> Result<WgpuTensor, WgpuError> {
		element_count(&[values.len()])?;
		Ok(WgpuTensor { buffer: self.storage_buffer(values.len(), Some(&f32_bytes(values)))?, len: values.len() })
	}

	fn upload_indices(&mut self, values: &[u32]) -> Result<WgpuIndices, WgpuError> {
		element_count(&[values.len()])?;
		Ok(WgpuIndices { buffer: self.storage_buffer(values.len(), Some(&u32_bytes(values)))?, host: values.to_vec() })
	}

	fn zeros(&mut self, len: usize) -> Result<WgpuTensor, WgpuError> {
		element_count(&[len])?;
		Ok(WgpuTensor { buffer: self.storage_buffer(len, None)?, len })
	}

	fn download(&mut self, tensor: &WgpuTensor) -> Result<Vec<f32>, WgpuError> {
		let words = self.read_words(&tensor.buffer, tensor.len)?;
		Ok(words.into_iter().map(f32::from_bits).collect())
	}

	fn tensor_len(&self, tensor: &WgpuTensor) -> usize {
		tensor.len
	}

	/// The state root, hashed on the device: one dispatch per tensor for its
	/// chunks' chaining values, one per level of parents, and a read-back of
	/// the root's 32 bytes. The state itself never leaves the device.
	fn state_root(&mut self, tensors: &[&WgpuTensor]) -> Result<Option<Digest>, WgpuError> {
		let chunks = state_chunk_count(tensors.iter().map(|tensor| tensor.len));
		if chunks < 2 || u32::try_from(chunks).is_err() {
			// The host refuses these states with the reference's own error.
			return Err(KernelError::Commitment(MerkleError::Empty).into());
		}
		// Two buffers, read and written in turn, level by level.
		let mut level = self.storage_buffer(chunks * 8, None)?;
		let mut parents = self.storage_buffer(chunks.div_ceil(2) * 8, None)?;
		let kernel = self.pipelines.chunk_cvs.clone();
		let mut first_chunk = 0usize;
		for tensor in tensors {
			let count = chunk_count(tensor.len);
			let params = [count as u32, tensor.len as u32, first_chunk as u32, 0];
			self.dispatch(&kernel, &params, &[(1, &tensor.buffer), (2, &level)], linear_groups(count, 64));
			first_chunk += count;
		}
		let kernel = self.pipelines.merge_level.clone();
		let mut width = chunks;
		while width > 1 {
			let flags = if width == 2 { BLAKE3_ROOT_FLAG } else { 0 };
			let params = [width as u32, 0, 0, flags];
			self.dispatch(&kernel, &params, &[(1, &level), (2, &parents)], linear_groups(width.div_ceil(2), 64));
			core::mem::swap(&mut level, &mut parents);
			width = width.div_ceil(2);
		}
		let words = self.read_words(&level, 8)?;
		let mut root = Digest::default();
		for (bytes, word) in root.chunks_exact_mut(4).zip(words) {
			bytes.copy_from_slice(&word.to_le_bytes());
		}
		Ok(Some(root))
	}

	fn check_finite(&mut self, tensor: &WgpuTensor) -> Result<Option<bool>, WgpuError> {
		if tensor.len > 0 {
			let kernel = self.pipelines.non_finite.clone();
			let flag = self.finite_flag.clone();
			let params = [tensor.len as u32, 0, 0, 0];
			self.dispatch(&kernel, &params, &[(1, &tensor.buffer), (2, &flag)], linear_groups(tensor.len, 256));
		}
		Ok(None)
	}

	fn take_non_finite(&mut self) -> Result<bool, WgpuError> {
		let flag = self.finite_flag.clone();
		let found = self.read_words(&flag, 1)?.first().is_some_and(|&word| word != 0);
		if found {
			self.queue.write_buffer(&flag, 0, &[0u8; 4]);
		}
		Ok(found)
	}

	fn contract(
		&mut self,
		contraction: Contraction,
		lhs: &WgpuTensor,
		rhs: &WgpuTensor,
		out: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		contraction.dims()?;
		check_len("lhs", lhs.len, contraction.lhs_len()?)?;
		check_len("rhs", rhs.len, contraction.rhs_len()?)?;
		check_len("out", out.len, contraction.output_len()?)?;
		self.record_contraction(contraction, lhs, rhs, out)
	}

	fn bias_add(&mut self, layout: BiasLayout, values: &mut WgpuTensor, bias: &WgpuTensor) -> Result<(), WgpuError> {
		check_len("values", values.len, layout.values_len()?)?;
		check_len("bias", bias.len, layout.channels)?;
		let kernel = self.pipelines.bias_add.clone();
		let shape = (layout.channels as u32, layout.inner as u32);
		self.elementwise(&kernel, values.len, 0, shape, &[], &[(1, &values.buffer), (2, &bias.buffer)]);
		Ok(())
	}

	fn bias_grad(
		&mut self,
		layout: BiasLayout,
		out_grad: &WgpuTensor,
		bias_grad: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		check_len("out_grad", out_grad.len, layout.values_len()?)?;
		check_len("bias_grad", bias_grad.len, layout.channels)?;
		let sequence = layout.outer * layout.inner;
		let slots = sequence.div_ceil(CHUNK) * layout.channels;
		let scratch = self.scratch(slots)?;
		let params = [sequence as u32, layout.channels as u32, layout.inner as u32, 0, 0, 0, 0, 0];
		let kernel = self.pipelines.chunk_sums.clone();
		self.dispatch(&kernel, &params, &[(1, &out_grad.buffer), (2, &scratch)], linear_groups(slots, 256));
		let kernel = self.pipelines.fold_chunks.clone();
		self.dispatch(&kernel, &params, &[(2, &scratch), (3, &bias_grad.buffer)], linear_groups(layout.channels, 64));
		Ok(())
	}

	fn activation(&mut self, kind: Activation, input: &WgpuTensor, output: &mut WgpuTensor) -> Result<(), WgpuError> {
		check_len("output", output.len, input.len)?;
		let kernel = self.pipelines.activation_forward.clone();
		let buffers = [(1, &output.buffer), (2, &input.buffer)];
		// The 1.0 the shader's activations take from the host (see `common.wgsl`).
		self.elementwise(&kernel, input.len, activation_mode(kind), (0, 0), &[1.0], &buffers);
		Ok(())
	}

	fn activation_grad(
		&mut self,
		kind: Activation,
		input: &WgpuTensor,
		output_grad: &WgpuTensor,
		input_grad: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		check_len("output_grad", output_grad.len, input.len)?;
		check_len("input_grad", input_grad.len, input.len)?;
		let kernel = self.pipelines.activation_backward.clone();
		let buffers = [(1, &input_grad.buffer), (2, &input.buffer), (3, &output_grad.buffer)];
		// The 1.0 the shader's activations take from the host (see `common.wgsl`).
		self.elementwise(&kernel, input.len, activation_mode(kind), (0, 0), &[1.0], &buffers);
		Ok(())
	}

	fn softmax_cross_entropy(
		&mut self,
		shape: ClassifierShape,
		logits: &WgpuTensor,
		labels: &WgpuIndices,
		loss: &mut WgpuTensor,
		logits_grad: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		// The reference's checks, in its order.
		check_len("loss", loss.len, 1)?;
		check_len("logits", logits.len, shape.logits_len()?)?;
		check_len("labels", labels.host.len(), shape.rows)?;
		for (row, &label) in labels.host.iter().enumerate() {
			if usize::try_from(label).map_or(true, |label| label >= shape.classes) {
				return Err(KernelError::LabelOutOfRange { row, label, classes: shape.classes }.into());
			}
		}
		check_len("logits_grad", logits_grad.len, logits.len)?;
		let row_losses = self.scratch(shape.rows)?;
		let params = [shape.rows as u32, shape.classes as u32, math::recip(shape.rows as f32).to_bits(), 0];
		let kernel = self.pipelines.softmax_rows.clone();
		let buffers = [(1, &logits.buffer), (2, &labels.buffer), (3, &logits_grad.buffer), (4, &row_losses)];
		self.dispatch(&kernel, &params, &buffers, linear_groups(shape.rows, 64));
		let kernel = self.pipelines.softmax_loss.clone();
		self.dispatch(&kernel, &params, &[(4, &row_losses), (5, &loss.buffer)], [1, 1, 1]);
		Ok(())
	}

	fn gather_rows(
		&mut self,
		source: &WgpuTensor,
		row_len: usize,
		indices: &WgpuIndices,
		destination: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		// The reference's checks, in its order.
		check_nonzero("row_len", row_len)?;
		check_len("destination", destination.len, element_count(&[indices.host.len(), row_len])?)?;
		let source_rows = source.len / row_len;
		check_len("source", source.len, element_count(&[source_rows, row_len])?)?;
		if let Some(&index) = indices.host.iter().find(|&&index| index as usize >= source_rows) {
			return Err(KernelError::IndexOutOfRange { index, rows: source_rows }.into());
		}
		let kernel = self.pipelines.gather_rows.clone();
		if destination.len > 0 {
			self.dispatch(
				&kernel,
				&[destination.len as u32, row_len as u32, 0, 0],
				&[(1, &source.buffer), (2, &indices.buffer), (3, &destination.buffer)],
				linear_groups(destination.len, LINEAR_WIDTH),
			);
		}
		Ok(())
	}

	fn sgd_momentum(
		&mut self,
		hyper: &SgdMomentum,
		param: &mut WgpuTensor,
		grad: &WgpuTensor,
		velocity: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		let hyper = hyper.validated()?;
		check_len("grads", grad.len, param.len)?;
		check_len("velocity", velocity.len, param.len)?;
		let scalars = [hyper.learning_rate, hyper.momentum, hyper.weight_decay];
		let kernel = self.pipelines.sgd_momentum.clone();
		let buffers = [(1, &param.buffer), (2, &grad.buffer), (4, &velocity.buffer)];
		self.elementwise(&kernel, param.len, u32::from(hyper.nesterov), (0, 0), &scalars, &buffers);
		Ok(())
	}

	fn adamw(
		&mut self,
		scalars: &AdamWScalars,
		param: &mut WgpuTensor,
		grad: &WgpuTensor,
		first_moment: &mut WgpuTensor,
		second_moment: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		check_len("grads", grad.len, param.len)?;
		check_len("first_moment", first_moment.len, param.len)?;
		check_len("second_moment", second_moment.len, param.len)?;
		let s = scalars;
		let values = [
			s.decay,
			s.beta1,
			s.one_minus_beta1,
			s.beta2,
			s.one_minus_beta2,
			s.step_size,
			s.second_moment_scale,
			s.epsilon,
		];
		let kernel = self.pipelines.adamw.clone();
		let buffers = [(1, &param.buffer), (2, &grad.buffer), (4, &first_moment.buffer), (5, &second_moment.buffer)];
		self.elementwise(&kernel, param.len, 0, (0, 0), &values, &buffers);
		Ok(())
	}

	fn clip_grad_norm(
		&mut self,
		max_norm: f32,
		grads: &mut [&mut WgpuTensor],
		norm: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		check_len("norm", norm.len, 1)?;
		// The reference validates `max_norm` before touching a tensor; run it
		// on no tensors to get exactly its checks and errors.
		optim::clip_grad_norm(&mut [], max_norm)?;
		let counts: Vec<u32> = grads.iter().map(|grad| grad.len.div_ceil(CHUNK) as u32).collect();
		let total_chunks: usize = counts.iter().map(|&count| count as usize).sum();
		let scratch = self.scratch(total_chunks)?;
		let kernel = self.pipelines.square_chunk_sums.clone();
		let mut offset = 0u32;
		for (grad, &count) in grads.iter().zip(&counts) {
			if count > 0 {
				let params = [grad.len as u32, 0, 0, offset, 0, 0, 0, 0];
				let groups = linear_groups(count as usize, 256);
				self.dispatch(&kernel, &params, &[(1, &grad.buffer), (2, &scratch)], groups);
			}
			offset += count;
		}
		// `finish_norm` also reads the per-tensor chunk counts, so its
		// parameters and the counts share one arena reservation.
		let params = [0, grads.len() as u32, 0, 0, max_norm.to_bits(), 0, 0, 0];
		let (arena, regions) = self.arena_regions(&[&params, &counts]);
		let kernel = self.pipelines.finish_norm.clone();
		let clip_state = self.clip_state.clone();
		let entries = [
			gpu::BindGroupEntry { binding: 0, resource: Self::region_binding(&arena, regions[0]) },
			gpu::BindGroupEntry { binding: 2, resource: scratch.as_entire_binding() },
			gpu::BindGroupEntry { binding: 3, resource: clip_state.as_entire_binding() },
			gpu::BindGroupEntry { binding: 4, resource: Self::region_binding(&arena, regions[1]) },
		];
		self.record(&kernel, &entries, [1, 1, 1]);
		self.encoder().copy_buffer_to_buffer(&clip_state, 0, &norm.buffer, 0, 4);
		let kernel = self.pipelines.scale_below_one.clone();
		for grad in grads.iter_mut() {
			let len = grad.len;
			self.elementwise(&kernel, len, 0, (0, 0), &[], &[(1, &grad.buffer), (2, &clip_state)]);
		}
		Ok(())
	}

	fn norm(
		&mut self,
		shape: NormShape,
		x: &WgpuTensor,
		gamma: &WgpuTensor,
		beta: Option<&WgpuTensor>,
		y: &mut WgpuTensor,
		normalised: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		// The reference's checks, in its order.
		let len = shape.values_len()?;
		check_len("x", x.len, len)?;
		check_len("gamma", gamma.len, shape.width)?;
		check_len("beta", beta.map_or(0, |beta| beta.len), shape.bias_len())?;
		check_len("y", y.len, len)?;
		check_len("normalised", normalised.len, len)?;
		let kernel = self.pipelines.norm_forward.clone();
		// RMSNorm has no bias: its binding holds the gain again, and is not read.
		let bias = beta.unwrap_or(gamma);
		let buffers = [(1, &x.buffer), (2, &gamma.buffer), (3, &bias.buffer), (4, &y.buffer), (5, &normalised.buffer)];
		self.dispatch(&kernel, &norm_params(shape), &buffers, linear_groups(shape.rows, 64));
		Ok(())
	}

	fn norm_backward(
		&mut self,
		shape: NormShape,
		x: &WgpuTensor,
		gamma: &WgpuTensor,
		dy: &WgpuTensor,
		normalised: &WgpuTensor,
		x_grad: &mut WgpuTensor,
		gamma_grad: &mut WgpuTensor,
		beta_grad: Option<&mut WgpuTensor>,
	) -> Result<(), WgpuError> {
		// The reference's checks, in its order.
		let len = shape.values_len()?;
		check_len("x", x.len, len)?;
		check_len("gamma", gamma.len, shape.width)?;
		check_len("beta_grad", beta_grad.as_ref().map_or(0, |beta| beta.len), shape.bias_len())?;
		check_len("dy", dy.len, len)?;
		check_len("normalised", normalised.len, len)?;
		check_len("x_grad", x_grad.len, len)?;
		check_len("gamma_grad", gamma_grad.len, shape.width)?;
		// The rows recompute `x̂` into scratch for `dx`; `dγ` sums the forward's `x̂`.
		let recomputed = self.scratch(len)?;
		let params = norm_params(shape);
		let kernel = self.pipelines.norm_backward_rows.clone();
		let buffers = [(1, &x.buffer), (2, &gamma.buffer), (3, &dy.buffer), (4, &x_grad.buffer), (5, &recomputed)];
		self.dispatch(&kernel, &params, &buffers, linear_groups(shape.rows, 64));
		// RMSNorm has no bias gradient: its binding is a word the kernel does not write.
		let unused;
		let beta_buffer = match beta_grad {
			Some(beta) => &beta.buffer,
			None => {
				unused = self.storage_buffer(1, None)?;
				&unused
			},
		};
		let kernel = self.pipelines.norm_backward_columns.clone();
		let buffers = [(3, &dy.buffer), (5, &normalised.buffer), (6, &gamma_grad.buffer), (7, beta_buffer)];
		self.dispatch(&kernel, &params, &buffers, linear_groups(shape.width, 64));
		Ok(())
	}

	fn add_assign(&mut self, into: &mut WgpuTensor, other: &WgpuTensor) -> Result<(), WgpuError> {
		check_len("other", other.len, into.len)?;
		let kernel = self.pipelines.add_assign.clone();
		self.elementwise(&kernel, into.len, 0, (0, 0), &[], &[(1, &into.buffer), (2, &other.buffer)]);
		Ok(())
	}

	fn split_heads(&mut self, shape: HeadsShape, side_by_side: &WgpuTensor, blocked: &mut WgpuTensor) -> Result<(), WgpuError> {
		let len = shape.values_len()?;
		check_len("side_by_side", side_by_side.len, len)?;
		check_len("blocked", blocked.len, len)?;
		let kernel = self.pipelines.split_heads.clone();
		self.copy_heads(&kernel, shape, side_by_side, blocked);
		Ok(())
	}

	fn merge_heads(&mut self, shape: HeadsShape, blocked: &WgpuTensor, side_by_side: &mut WgpuTensor) -> Result<(), WgpuError> {
		let len = shape.values_len()?;
		check_len("blocked", blocked.len, len)?;
		check_len("side_by_side", side_by_side.len, len)?;
		let kernel = self.pipelines.merge_heads.clone();
		self.copy_heads(&kernel, shape, blocked, side_by_side);
		Ok(())
	}

	fn scatter_add_rows(
		&mut self,
		dy: &WgpuTensor,
		row_len: usize,
		ids: &WgpuIndices,
		table_rows: usize,
		dtable: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		// The reference's checks, in its order.
		check_nonzero("row_len", row_len)?;
		check_nonzero("table_rows", table_rows)?;
		check_len("dy", dy.len, element_count(&[ids.host.len(), row_len])?)?;
		check_len("dtable", dtable.len, element_count(&[table_rows, row_len])?)?;
		// The lookups sorted by table row on the host, stably: no float atomics on the device.
		let (starts, rows) = rows_by_index(&ids.host, table_rows)?;
		let to_words = |values: Vec<usize>| values.into_iter().map(|value| value as u32).collect::<Vec<u32>>();
		let starts = self.upload_indices(&to_words(starts))?;
		let rows = self.upload_indices(&to_words(rows))?;
		let kernel = self.pipelines.scatter_add_rows.clone();
		let params = [table_rows as u32, row_len as u32, 0, 0, 0, 0, 0, 0];
		let buffers = [(1, &dy.buffer), (4, &dtable.buffer), (8, &starts.buffer), (9, &rows.buffer)];
		self.dispatch(&kernel, &params, &buffers, linear_groups(dtable.len, 64));
		Ok(())
	}

	fn causal_softmax(&mut self, shape: CausalShape, scores: &WgpuTensor, probs: &mut WgpuTensor) -> Result<(), WgpuError> {
		let len = shape.scores_len()?;
		check_len("scores", scores.len, len)?;
		check_len("probs", probs.len, len)?;
		let kernel = self.pipelines.causal_softmax.clone();
		let rows = shape.blocks * shape.positions;
		self.dispatch(&kernel, &causal_params(shape), &[(1, &scores.buffer), (4, &probs.buffer)], linear_groups(rows, 64));
		Ok(())
	}

	fn causal_softmax_grad(
		&mut self,
		shape: CausalShape,
		probs: &WgpuTensor,
		probs_grad: &WgpuTensor,
		scores_grad: &mut WgpuTensor,
	) -> Result<(), WgpuError> {
		let len = shape.scores_len()?;
		check_len("probs", probs.len, len)?;
		check_len("probs_grad", probs_grad.len, len)?;
		check_len("scores_grad", scores_grad.len, len)?;
		let kernel = self.pipelines.causal_softmax_grad.clone();
		let rows = shape.blocks * shape.positions;
		let buffers = [(1, &probs.buffer), (2, &probs_grad.buffer), (4, &scores_grad.buffer)];
		self.dispatch(&kernel, &causal_params(shape), &buffers, linear_groups(rows, 64));
		Ok(())
	}
}

//! The state root hashed on the device is the reference's, bit for bit: on
//! ragged tensors with negative zeros, on a state as large as the wide MLP's,
//! and at the boundaries of a run trained on the device.
//!
//! Needs an adapter (lavapipe here); fails, never skips, saying what to install.
#[path = "../../tests/support/mod.rs"]
mod support;

use support::*;
use touchstone_kernels::exec::backend::Backend;
use touchstone_kernels::job::trace::Trainer;
use touchstone_kernels::proof::state_tree;
use touchstone_kernels::CpuBackend;
use touchstone_kernels_wgpu::conformance::{random_values, state_root_tensors};
use touchstone_kernels_wgpu::WgpuBackend;

/// Opens the wgpu backend or fails the test with what to install.
fn wgpu_backend() -> WgpuBackend {
	WgpuBackend::new().unwrap_or_else(|error| {
		panic!(
			"the wgpu backend is required by this test and could not be opened: {error}\n\
			 (on Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libvulkan1` provides lavapipe)"
		)
	})
}

/// The device's root of `host` (uploaded) and the reference's.
fn both_roots(backend: &mut WgpuBackend, host: &[Vec<f32>]) -> (String, String) {
	let tensors: Vec<_> = host.iter().map(|values| backend.upload(values).unwrap()).collect();
	let refs: Vec<_> = tensors.iter().collect();
	let device = backend.state_root(&refs).unwrap().expect("the wgpu backend hashes on the device");
	let views: Vec<&[f32]> = host.iter().map(Vec::as_slice).collect();
	(hex(&device), hex(&state_tree::root(&views).unwrap()))
}

#[test]
fn the_device_root_of_ragged_tensors_with_negative_zeros_is_the_references() {
	let mut backend = wgpu_backend();
	let host = state_root_tensors();
	assert!(host.iter().flatten().any(|value| value.to_bits() == 0x8000_0000), "the check covers -0");
	let (device, reference) = both_roots(&mut backend, &host);
	assert_eq!(device, reference);
	// Every tensor counts, and so does its place: swapping two changes the root.
	let swapped = [host[3].clone(), host[2].clone()];
	let (device, reference) = both_roots(&mut backend, &swapped);
	assert_eq!(device, reference);
	assert_ne!(device, both_roots(&mut backend, &host[2..4]).0);
}

#[test]
fn the_device_root_of_a_wide_mlp_sized_state_is_the_references() {
	// The wide MLP's parameters and SGD momenta, 784→1024→1024→10: 14.9 MB, 14,562 chunks,
	// so the merge runs over fourteen levels with odd widths among them.
	let lens = [784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10];
	let host: Vec<Vec<f32>> = lens
		.iter()
		.chain(&lens)
		.enumerate()
		.map(|(stream, &len)| random_values(40 + stream as u64, len, -0.5, 0.5))
		.collect();
	assert_eq!(state_tree::state_chunk_count(host.iter().map(Vec::len)), 14_562);
	let mut backend = wgpu_backend();
	let (device, reference) = both_roots(&mut backend, &host);
	assert_eq!(device, reference);
}

#[test]
fn a_state_trained_on_the_device_closes_the_references_boundaries_without_leaving_the_device() {
	let (model, train) = (blob_model(), blob_train(30));
	let mut reference = Trainer::new(CpuBackend, &model, &train, blobs(400)).unwrap();
	let mut device = Trainer::new(wgpu_backend(), &model, &train, blobs(400)).unwrap();
	for step in 0..30 {
		reference.step().unwrap();
		device.step().unwrap();
		if step % 10 == 9 {
			// The boundary: the state root hashed on the device, and the segment's loss records.
			let expected = reference.close_segment().unwrap();
			let actual = device.close_segment().unwrap();
			assert_eq!(
				(hex(&actual.state_root), hex(&actual.record), actual.next_step),
				(hex(&expected.state_root), hex(&expected.record), expected.next_step),
				"after step {step}"
			);
			// The host's hash of the downloaded state agrees too.
			let state = device.state().unwrap();
			let views: Vec<&[f32]> = state.iter().map(Vec::as_slice).collect();
			assert_eq!(hex(&state_tree::root(&views).unwrap()), hex(&expected.state_root));
		}
	}
}

#[test]
fn a_state_of_one_chunk_is_refused_on_the_device_as_on_the_host() {
	let mut backend = wgpu_backend();
	let tensor = backend.upload(&[1.0, 2.0]).unwrap();
	assert!(backend.state_root(&[&tensor]).is_err());
	assert!(state_tree::root(&[&[1.0, 2.0][..]]).is_err());
}

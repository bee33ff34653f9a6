//! Adapter selection: `TOUCHSTONE_WGPU_ADAPTER` restricts the adapters tried, devices
//! are counted among the adapters that conform,
//! and having none to try is an error that says what to install.
//!
//! A file of its own, because it changes the process environment.
use touchstone_kernels_wgpu::{WgpuBackend, WgpuError, ADAPTER_ENV};

#[test]
fn no_matching_adapter_is_an_error_that_says_what_to_do() {
	std::env::set_var(ADAPTER_ENV, "no adapter has this name");
	let error = WgpuBackend::new().expect_err("no adapter matches the filter");
	assert!(matches!(&error, WgpuError::NoAdapter { filter: Some(filter) } if filter == "no adapter has this name"));
	let message = error.to_string();
	assert!(message.contains(ADAPTER_ENV) && message.contains("mesa-vulkan-drivers"), "{message}");
	let unfiltered = WgpuError::NoAdapter { filter: None }.to_string();
	assert!(unfiltered.contains("apt-get install mesa-vulkan-drivers libvulkan1"), "{unfiltered}");

	// The filter is case-insensitive and matches part of the name: lavapipe
	// calls itself "llvmpipe (LLVM …)".
	std::env::set_var(ADAPTER_ENV, "LLVMpipe");
	let backend = WgpuBackend::new().unwrap_or_else(|error| {
		panic!("lavapipe is required by this test: {error} (apt-get install mesa-vulkan-drivers libvulkan1)")
	});
	assert!(backend.adapter_info().name.to_lowercase().contains("llvmpipe"));
	// Here, not in a test of its own: tests run side by side, and the variable is the process's.
	a_device_past_the_conforming_adapters_is_an_error_that_says_how_many_there_are();
	std::env::remove_var(ADAPTER_ENV);
}

/// Devices are counted from 0 among the adapters that conform: with the filter set to
/// lavapipe (by the caller) there is exactly one, so device 1 is an error that names both
/// numbers.
fn a_device_past_the_conforming_adapters_is_an_error_that_says_how_many_there_are() {
	let first = WgpuBackend::nth(0).expect("lavapipe conforms");
	assert!(first.adapter_info().name.to_lowercase().contains("llvmpipe"));
	let error = WgpuBackend::nth(1).expect_err("one lavapipe adapter");
	assert!(matches!(error, WgpuError::TooFewAdapters { ordinal: 1, conforming: 1 }), "{error}");
	assert!(error.to_string().contains("ask for fewer devices"), "{error}");
}

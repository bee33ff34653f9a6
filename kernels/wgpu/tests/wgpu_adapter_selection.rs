//! Adapter selection: `TOUCHSTONE_WGPU_ADAPTER` restricts the adapters tried,
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
	std::env::remove_var(ADAPTER_ENV);
}

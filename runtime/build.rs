//! Builds the runtime's wasm blob, which the node embeds as its genesis runtime.
fn main() {
	#[cfg(feature = "std")]
	{
		// The build folder lives outside the clone (see scripts/lib.sh), so
		// substrate-wasm-builder cannot find this workspace's Cargo.lock by walking up
		// from OUT_DIR: tell it where the workspace is. Set here rather than globally,
		// because other crates' wasm builds (the test runtime inside
		// frame-benchmarking-cli) are not members of this workspace and must not be
		// looked up in it.
		const HINT: &str = "WASM_BUILD_WORKSPACE_HINT";
		if std::env::var_os(HINT).is_none() {
			// Read when the script runs, not baked in when it compiles: the shared build
			// folder reuses one compiled script for every clone of the workspace.
			if let Some(manifest_dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
				std::env::set_var(HINT, std::path::Path::new(&manifest_dir).join(".."));
			}
		}
		substrate_wasm_builder::WasmBuilder::build_using_defaults();
	}
}

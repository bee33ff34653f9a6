//! Builds the runtime's wasm blob, which the node embeds as its genesis runtime.
fn main() {
	#[cfg(feature = "std")]
	substrate_wasm_builder::WasmBuilder::build_using_defaults();
}

//! Lets the worker find libtorch without a library path: the libtorch it links
//! (`LIBTORCH`, set by `kernels/scripts/torch-env.sh`) and the CUDA runtime libraries the
//! PyPI wheel's libtorch needs go into the binary's run path, and libtorch's folder is
//! remembered so the CUDA library beside it can be loaded.

fn main() {
	println!("cargo:rerun-if-env-changed=LIBTORCH");
	// subxt's code generation reads `metadata.scale` without telling cargo: a fingerprint
	// of it in the environment rebuilds the worker whenever the metadata is regenerated.
	println!("cargo:rerun-if-changed=metadata.scale");
	let metadata = std::fs::read("metadata.scale").unwrap_or_default();
	let fingerprint = metadata.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
		(hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
	});
	println!("cargo:rustc-env=TOUCHSTONE_METADATA_FINGERPRINT={fingerprint:016x}");
	if let Ok(libtorch) = std::env::var("LIBTORCH") {
		// DT_RPATH rather than DT_RUNPATH: it also applies to libtorch's own dependencies.
		println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags");
		println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/lib");
		println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/../site-packages/nvidia/cu13/lib");
		println!("cargo:rustc-env=TOUCHSTONE_LIBTORCH={libtorch}");
	}
}

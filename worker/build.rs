//! Lets the worker find libtorch without a library path: the libtorch it links
//! (`LIBTORCH`, set by `kernels/scripts/torch-env.sh`) and the CUDA runtime libraries the
//! PyPI wheel's libtorch needs go into the binary's run path, and libtorch's folder is
//! remembered so the CUDA library beside it can be loaded.

fn main() {
	println!("cargo:rerun-if-env-changed=LIBTORCH");
	if let Ok(libtorch) = std::env::var("LIBTORCH") {
		// DT_RPATH rather than DT_RUNPATH: it also applies to libtorch's own dependencies.
		println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags");
		println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/lib");
		println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/../site-packages/nvidia/cu13/lib");
		println!("cargo:rustc-env=TOUCHSTONE_LIBTORCH={libtorch}");
	}
}

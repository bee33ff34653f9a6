//! The worker's calls and storage are generated from `worker/metadata.scale`. This test
//! fails when that file is not the runtime's current metadata; regenerate it with
//! `TOUCHSTONE_WRITE_METADATA=1 cargo test -p touchstone-runtime --test metadata`. It lives
//! here, not in the worker, so that it runs before the worker builds against the file.

use std::path::Path;

#[test]
fn the_committed_metadata_is_the_runtimes() {
	// Storage-backed parameters (the forced-error rate) read their value from storage: at
	// genesis, their default.
	let opaque = polkadot_sdk::sp_io::TestExternalities::default()
		.execute_with(|| touchstone_runtime::Runtime::metadata_at_version(16))
		.expect("the runtime serves metadata v16");
	let current: Vec<u8> = opaque.to_vec();
	// The checkout `cargo test` runs in, which a shared build folder may not have built.
	let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
	let path = Path::new(&manifest).join("../worker/metadata.scale");
	if std::env::var_os("TOUCHSTONE_WRITE_METADATA").is_some() {
		std::fs::write(&path, &current).unwrap();
	}
	let committed = std::fs::read(&path).unwrap();
	assert!(
		committed == current,
		"worker/metadata.scale is stale: regenerate it with TOUCHSTONE_WRITE_METADATA=1 cargo test -p touchstone-runtime --test metadata, then rebuild the worker"
	);
}

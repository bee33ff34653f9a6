//! The crate's layout by concern holds: no module imports one that imports it
//! back (directly or through others), and the test-only fault injection is
//! compiled only with the `testing` feature.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
	for entry in std::fs::read_dir(dir).unwrap() {
		let path = entry.unwrap().path();
		if path.is_dir() {
			sources(&path, out);
		} else if path.extension().is_some_and(|e| e == "rs") {
			out.push(path);
		}
	}
}

/// The module path of a source file (`ops::matmul` for `src/ops/matmul.rs`).
fn module_of(src: &Path, file: &Path) -> String {
	let relative = file.strip_prefix(src).unwrap().with_extension("");
	let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
	if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
		parts.pop();
	}
	parts.join("::")
}

/// The modules `code` refers to by `crate::…` or `super::…` paths outside
/// comments and test modules, resolved to the longest known module prefix.
fn references(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
	let code = code.split("#[cfg(test)]").next().unwrap_or_default();
	let parent = module.rsplit_once("::").map_or("", |(parent, _)| parent);
	let mut found = BTreeSet::new();
	for line in code.lines().filter(|line| !line.trim_start().starts_with("//")) {
		for (prefix, base) in [("crate::", ""), ("super::", parent)] {
			for (at, _) in line.match_indices(prefix) {
				let rest = &line[at + prefix.len()..];
				let path: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
				let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
				if !base.is_empty() {
					parts.insert(0, base);
				}
				while !parts.is_empty() {
					let candidate = parts.join("::");
					if modules.contains(&candidate) {
						if candidate != module && !module.starts_with(&format!("{candidate}::")) {
							found.insert(candidate);
						}
						break;
					}
					parts.pop();
				}
			}
		}
	}
	found
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
	// The directory `cargo test` runs in, not the one the binary was built in: a build
	// folder shared between checkouts may run a binary built in another one.
	let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
	let src = Path::new(&manifest).join("src");
	let mut files = Vec::new();
	sources(&src, &mut files);
	let modules: BTreeMap<String, String> =
		files.iter().map(|file| (module_of(&src, file), std::fs::read_to_string(file).unwrap())).collect();
	let names: BTreeSet<String> = modules.keys().cloned().collect();
	let edges: BTreeMap<&str, BTreeSet<String>> =
		modules.iter().map(|(module, code)| (module.as_str(), references(module, code, &names))).collect();
	// Depth-first search for a path from each module back to itself.
	for start in edges.keys() {
		let mut stack: Vec<(String, Vec<String>)> = vec![(start.to_string(), vec![start.to_string()])];
		let mut seen = BTreeSet::new();
		while let Some((module, path)) = stack.pop() {
			for next in edges.get(module.as_str()).into_iter().flatten() {
				assert!(next != start, "import cycle: {} -> {next}", path.join(" -> "));
				if seen.insert(next.clone()) {
					let mut longer = path.clone();
					longer.push(next.clone());
					stack.push((next.clone(), longer));
				}
			}
		}
	}
	assert!(edges.len() > 20, "found {} modules", edges.len());
	assert!(edges["referee"].contains("proof::graph"), "references are resolved: {:?}", edges["referee"]);
}

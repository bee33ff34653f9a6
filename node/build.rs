//! Embeds the git commit and build date in `--version`, and rebuilds on branch changes.
fn main() {
	substrate_build_script_utils::generate_cargo_keys();
	substrate_build_script_utils::rerun_if_git_head_changed();
}

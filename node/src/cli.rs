//! The command line: `run` (the default) and the standard `sc-cli` subcommands.

use polkadot_sdk::sc_cli;

/// Subcommands besides running the node.
#[derive(Debug, clap::Subcommand)]
#[allow(clippy::large_enum_variant)]
pub enum Subcommand {
	/// Key management: generate, inspect, insert keys and node keys.
	#[command(subcommand)]
	Key(sc_cli::KeySubcommand),

	/// Build a chain specification; `--raw` gives the raw genesis storage a network shares.
	BuildSpec(sc_cli::BuildSpecCmd),

	/// Export the chain specification of a chain, with no node key involved.
	ExportChainSpec(sc_cli::ExportChainSpecCmd),

	/// Validate blocks.
	CheckBlock(sc_cli::CheckBlockCmd),

	/// Export blocks.
	ExportBlocks(sc_cli::ExportBlocksCmd),

	/// Export the state of a given block into a chain spec.
	ExportState(sc_cli::ExportStateCmd),

	/// Import blocks.
	ImportBlocks(sc_cli::ImportBlocksCmd),

	/// Remove the whole chain.
	PurgeChain(sc_cli::PurgeChainCmd),

	/// Revert the chain to a previous state.
	Revert(sc_cli::RevertCmd),

	/// Benchmark the runtime's pallets (built with `--features runtime-benchmarks`).
	#[cfg(feature = "runtime-benchmarks")]
	#[command(subcommand)]
	Benchmark(polkadot_sdk::frame_benchmarking_cli::BenchmarkCmd),

	/// Database metadata.
	ChainInfo(sc_cli::ChainInfoCmd),
}

/// The node's command line.
#[derive(Debug, clap::Parser)]
#[command(
	propagate_version = true,
	args_conflicts_with_subcommands = true,
	subcommand_negates_reqs = true
)]
pub struct Cli {
	/// A subcommand; without one, the node runs.
	#[command(subcommand)]
	pub subcommand: Option<Subcommand>,

	/// Options of the node itself.
	#[clap(flatten)]
	pub run: sc_cli::RunCmd,
}

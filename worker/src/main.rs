//! `touchstone-worker`: the program GPU operators and submitters run against a Touchstone
//! chain. `solve` trains work units and proves them; `submit`, `status`, `fetch` and
//! `evaluate` take a job from a description to a tested model; `keys` manages
//! identities. Verifier and challenger roles come as further subcommands.

use touchstone_worker::{chain, config, inputs, keys, p2p, solver, store, submitter, verifier};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use touchstone_primitives::JobId;

use crate::chain::Chain;
use crate::store::Store;

/// The Touchstone worker: trains and proves work units from the chain (solver), and takes
/// jobs from a description to a tested model (submitter).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
	/// The node's WebSocket RPC endpoint. The worker believes what this node tells it;
	/// --chain-spec trusts no node instead.
	#[arg(long, global = true, env = "TOUCHSTONE_NODE_URL", default_value = "ws://127.0.0.1:9944")]
	node: String,
	/// Reach the chain through a light client in this process instead of --node: FILE is the
	/// chain spec (the JSON a node's `sync_state_genSyncSpec` RPC returns, from a source you
	/// trust); --node is then not used. Every header, storage value and runtime call is
	/// checked against the chain it describes.
	#[arg(long, global = true, env = "TOUCHSTONE_CHAIN_SPEC", value_name = "FILE")]
	chain_spec: Option<PathBuf>,
	/// With --chain-spec: a peer of the chain to sync from (a multiaddr ending in /p2p/<peer
	/// id>, a validator's for example), in place of the spec's boot nodes; repeatable.
	#[arg(long = "boot-node", global = true, env = "TOUCHSTONE_BOOT_NODES", value_delimiter = ',', value_name = "MULTIADDR", requires = "chain_spec")]
	boot_nodes: Vec<String>,
	/// Where the worker keeps its artifacts, checkpoints and unit state.
	#[arg(long, global = true, env = "TOUCHSTONE_WORKER_DIR")]
	data_dir: Option<PathBuf>,
	/// A TOML file of settings: the program's flags at the top, each subcommand's in a
	/// table named after it (`[solve]`), by their long names. The command line and the
	/// environment (`TOUCHSTONE_<SUBCOMMAND>_<FLAG>`) take precedence over it.
	#[arg(long, global = true, env = config::CONFIG_VARIABLE, value_name = "FILE")]
	config: Option<PathBuf>,
	/// How many CPU threads training, re-execution and state hashing may use on the CPU
	/// (the reference backend and libtorch's CPU device); every core when absent. Results
	/// never depend on it. On a host shared with a node, leave the node a core.
	#[arg(long, global = true, env = "TOUCHSTONE_CPU_THREADS", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
	cpu_threads: Option<u16>,
	#[command(subcommand)]
	command: Command,
}

#[derive(Subcommand)]
enum Command {
	/// Run a solver: register and bond, take units this machine can train, train them
	/// with checkpoints, commit learning proofs and collect pay. Stops cleanly on Ctrl-C,
	/// leaving the current unit to resume from its last checkpoint.
	Solve(solver::SolveArgs),
	/// Run a verifier: register and bond, and in every round the chain draws this node for,
	/// re-execute the sampled segments, commit and reveal the verdict, and play the dispute
	/// a mismatch opens. Stops cleanly on Ctrl-C.
	Verify(verifier::VerifyArgs),
	/// Check one unit's standing proof by re-executing it; if it does not reproduce,
	/// dispute it as a challenger and play the dispute to its end. With --watch, check
	/// every proof open to challenge as it appears. Stops cleanly on Ctrl-C.
	Challenge(verifier::ChallengeArgs),
	/// Submit a training job (a TOML or JSON description, or a built-in example): publish
	/// its dataset, commit its roots, hold its budget in escrow, and print its id.
	Submit(submitter::SubmitArgs),
	/// Show jobs and their units.
	Status {
		/// One job; the latest ten when absent.
		#[arg(long)]
		job: Option<JobId>,
	},
	/// Write a completed job's final model to a safetensors file, checked against the
	/// state root the chain proved.
	Fetch {
		/// The job.
		#[arg(long)]
		job: JobId,
		/// The file to write.
		#[arg(long, default_value = "model.safetensors")]
		out: PathBuf,
		#[command(flatten)]
		network: p2p::NetworkArgs,
	},
	/// Offer relay service on the artifact network: workers behind NAT reserve a slot
	/// here (`--p2p-relay`) and peers reach them through it. Run it on a publicly
	/// reachable host (beside a validator, for example). Prints the addresses to give
	/// `--p2p-relay`; stops on Ctrl-C.
	Relay {
		#[command(flatten)]
		network: p2p::NetworkArgs,
	},
	/// Print a model's accuracy on a held-out test split; a transformer's validation loss
	/// and next-token accuracy, and with `--generate` a continuation of the text given.
	Evaluate(submitter::EvaluateArgs),
	/// Train a job locally, without a chain, exactly as solvers would (the same kernels,
	/// checkpoints and proof): to try a job description before submitting it, and the
	/// baseline the protocol's overhead is measured against.
	Train(submitter::TrainArgs),
	/// Generate or inspect account keys.
	#[command(subcommand)]
	Keys(KeysCommand),
}

#[derive(Subcommand)]
enum KeysCommand {
	/// Generate a new account: prints its mnemonic (keep it secret) and address.
	Generate,
	/// Print the address of a secret URI or keystore file.
	Inspect(keys::KeyArgs),
}

fn default_data_dir() -> PathBuf {
	let home = std::env::var_os("HOME").unwrap_or_default();
	PathBuf::from(home).join(".local/share/touchstone-worker")
}

#[tokio::main]
async fn main() {
	// The light client's services log under their own names, each followed by the chain's
	// (`sync-service-<chain>`): routine progress (a warp sync idle at the head, a legacy RPC
	// call) is not the operator's business unless RUST_LOG asks for it.
	let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
		tracing_subscriber::EnvFilter::new(
			"info,subxt=warn,jsonrpsee=warn,libp2p_mdns=warn,libp2p_swarm=warn,libp2p_kad=error,smoldot=warn,sync-service=error,json-rpc=error,runtime=warn,tx-service=warn,network=warn",
		)
	});
	tracing_subscriber::fmt()
		.with_env_filter(filter)
		.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
		.with_writer(std::io::stderr)
		.init();
	if let Err(error) = run(parse_command_line()).await {
		eprintln!("error: {error:#}");
		std::process::exit(1);
	}
}

/// The command line, with the environment's and the config file's settings beneath it;
/// exits with clap's message on a usage error and with ours on a bad config file.
fn parse_command_line() -> Cli {
	let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
	let command = match config::config_path(&args) {
		Some(path) => config::with_file(Cli::command(), &path).unwrap_or_else(|error| {
			eprintln!("error: {error:#}");
			std::process::exit(2);
		}),
		None => Cli::command(),
	};
	let matches = config::with_environment(command).get_matches_from(args);
	Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// A flag set on Ctrl-C or SIGTERM, after logging that the worker is shutting down and
/// `kept`: what survives for a restart.
fn stop_on_signal(kept: &'static str) -> Arc<AtomicBool> {
	let stop = Arc::new(AtomicBool::new(false));
	let signal = stop.clone();
	tokio::spawn(async move {
		touchstone_worker::shutdown_signal().await;
		tracing::info!("shutting down: {kept}");
		signal.store(true, Ordering::Relaxed);
	});
	stop
}

async fn run(cli: Cli) -> Result<()> {
	let data_dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
	if let Some(threads) = cli.cpu_threads {
		touchstone_kernels::exec::parallel::set_threads(threads.into());
		tch::set_num_threads(threads.into());
	}
	let access = match cli.chain_spec {
		Some(chain_spec) => chain::ChainAccess::LightClient { chain_spec, boot_nodes: cli.boot_nodes },
		None => chain::ChainAccess::Node(cli.node),
	};
	match cli.command {
		Command::Keys(KeysCommand::Generate) => {
			let phrase = keys::generate()?;
			let pair = keys::from_secret(&phrase.to_string())?;
			println!("secret phrase: {phrase}");
			println!("address:       {}", keys::address(&pair));
			Ok(())
		},
		Command::Keys(KeysCommand::Inspect(key)) => {
			println!("{}", keys::address(&key.keypair()?));
			Ok(())
		},
		Command::Evaluate(args) => submitter::evaluate(&access, args).await,
		Command::Solve(args) => {
			let Role { chain, store, network, stop } =
				Role::open(&access, &data_dir, &args.network, "the current unit keeps its last checkpoint").await?;
			settled(&chain, solver::Solver::new(chain.clone(), network, store, data_dir, args, stop)?.run()).await
		},
		Command::Verify(args) => {
			let Role { chain, store, network, stop } =
				Role::open(&access, &data_dir, &args.network, "committed verdicts stay on disk").await?;
			settled(&chain, verifier::Verifier::new(chain.clone(), network, store, data_dir, args, stop)?.run()).await
		},
		Command::Challenge(args) => {
			let Role { chain, store, network, stop } =
				Role::open(&access, &data_dir, &args.network, "an open dispute goes on when the command runs again").await?;
			let (job, unit, watch, request) = (args.job, args.unit, args.watch, args.request_chunk);
			// The bond is the challenger bond here.
			let settings = verifier::VerifyArgs {
				key: args.key,
				bond: args.bond,
				region: "local".into(),
				network: args.network,
				backend: args.backend,
				metrics: args.metrics,
				#[cfg(feature = "test-equipment")]
				attest_without_checking: false,
			};
			let challenger = verifier::Verifier::new(chain.clone(), network, store, data_dir, settings, stop)?;
			let role = async {
				match (job, unit) {
					(Some(job), Some(unit)) if !watch => match request {
						Some(chunk) => challenger.request_chunk(job, unit, chunk).await,
						None => challenger.challenge(job, unit).await,
					},
					_ => challenger.watch().await,
				}
			};
			settled(&chain, role).await
		},
		Command::Submit(args) => submitter::submit(&access, &data_dir, args).await,
		Command::Train(args) => submitter::train_locally(&data_dir, args),
		Command::Status { job } => submitter::status(&access, job).await,
		Command::Fetch { job, out, network } => submitter::fetch(&access, &data_dir, job, &out, &network).await,
		Command::Relay { mut network } => {
			network.relay_service = true;
			let relay = p2p::Network::start(&network, Store::open(&data_dir)?, &data_dir).await?;
			for address in relay.listening().await? {
				println!("relay listening at {address}");
			}
			touchstone_worker::shutdown_signal().await;
			Ok(())
		},
	}
}

/// What a long-running role (solver, verifier, challenger) runs on.
struct Role {
	/// The chain.
	chain: Chain,
	/// The artifact store in the data directory.
	store: Store,
	/// The artifact network, joined through the endpoints advertised on-chain.
	network: p2p::Network,
	/// Set on Ctrl-C or SIGTERM.
	stop: Arc<AtomicBool>,
}

impl Role {
	/// Opens the chain through `access`, the store in `data_dir` and the artifact network
	/// with `network`, and joins it; the stop flag logs `kept` (what survives a restart).
	async fn open(access: &chain::ChainAccess, data_dir: &std::path::Path, network: &p2p::NetworkArgs, kept: &'static str) -> Result<Self> {
		let (chain, store, stop) = (Chain::open(access).await?, Store::open(data_dir)?, stop_on_signal(kept));
		let network = p2p::Network::start(network, store.clone(), data_dir).await?;
		inputs::join_network(&chain, &network).await;
		Ok(Self { chain, store, network, stop })
	}
}

/// Runs a role to its end, then waits for the node to answer the submissions it left in
/// flight ([`Chain::settle`]).
async fn settled(chain: &Chain, role: impl std::future::Future<Output = Result<()>>) -> Result<()> {
	let outcome = role.await;
	chain.settle().await;
	outcome
}

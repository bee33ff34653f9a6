//! Artifact transfer throughput: one artifact (1 GiB by default) fetched by one worker
//! from 1, 2 and 4 providers on loopback, each answer delayed by a round trip's worth
//! of latency, against a single stream (one request in flight, the protocol before
//! groups were verified on arrival). Prints one Markdown table row a run: seconds,
//! MiB/s, the ratio to the single stream, and the process's memory high-water mark
//! over the run (every node of the run lives in this process: providers and fetcher).
//!
//! `scripts/bench-transfer.sh` builds and runs it. `--latency-ms` is what the serving
//! nodes add to every answer (`Network::delay_serving`), where the kernel offers no
//! `tc netem` to add it to the loopback interface; `--size-mib` and `--providers 1,2,4`
//! set the rest.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use touchstone_worker::p2p::{Network, NetworkArgs, FETCH_WINDOW, PEER_WINDOW};
use touchstone_worker::store::Store;

fn args(peers: Vec<libp2p::Multiaddr>) -> NetworkArgs {
	NetworkArgs { p2p_listen: Some("/ip4/127.0.0.1/tcp/0".parse().expect("an address")), peers, no_mdns: true, ..NetworkArgs::default() }
}

/// Bytes nobody would compress away, from a 64-bit xorshift.
fn artifact(len: usize) -> Vec<u8> {
	let mut state = 0x9e37_79b9_7f4a_7c15u64;
	let mut bytes = Vec::with_capacity(len);
	while bytes.len() < len {
		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		bytes.extend_from_slice(&state.to_le_bytes());
	}
	bytes.truncate(len);
	bytes
}

/// This process's resident memory high-water mark in MiB, and resets it (Linux).
fn high_water_mib(reset: bool) -> f64 {
	let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
	let kib: f64 = status
		.lines()
		.find_map(|line| line.strip_prefix("VmHWM:"))
		.and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
		.unwrap_or(0.0);
	if reset {
		// "5" resets the high-water mark to the current resident size.
		let _ = std::fs::write("/proc/self/clear_refs", "5");
	}
	kib / 1024.0
}

struct Options {
	size_mib: usize,
	latency: Duration,
	runs: Vec<(usize, bool)>,
	dir: std::path::PathBuf,
}

fn options() -> Result<Options> {
	let mut options = Options {
		size_mib: 1024,
		latency: Duration::from_millis(50),
		runs: vec![(1, true), (1, false), (2, false), (4, false)],
		dir: std::env::temp_dir().join(format!("touchstone-bench-transfer-{}", std::process::id())),
	};
	let mut argv = std::env::args().skip(1);
	while let Some(flag) = argv.next() {
		let mut value = || argv.next().with_context(|| format!("{flag} needs a value"));
		match flag.as_str() {
			"--size-mib" => options.size_mib = value()?.parse().context("--size-mib takes a number of MiB")?,
			"--latency-ms" => options.latency = Duration::from_millis(value()?.parse().context("--latency-ms takes milliseconds")?),
			"--dir" => options.dir = value()?.into(),
			"--providers" => {
				options.runs = vec![(1, true)];
				for count in value()?.split(',') {
					options.runs.push((count.parse().context("--providers takes counts such as 1,2,4")?, false));
				}
			},
			other => anyhow::bail!("unknown flag {other}: use --size-mib N, --latency-ms MS, --providers 1,2,4, --dir DIR"),
		}
	}
	Ok(options)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
	let options = options()?;
	let _ = std::fs::remove_dir_all(&options.dir);
	let bytes = artifact(options.size_mib << 20);
	let source = Store::open(&options.dir.join("source"))?;
	let hash = source.put(&bytes)?;
	drop(bytes);
	// Computed once here, as a serving node does on the first request, and kept beside
	// every provider's copy.
	let (len, outline) = source.outline(&hash)?;
	println!("| providers | requests in flight | latency added (ms) | seconds | MiB/s | × single stream | memory high-water (MiB) |");
	println!("| --- | --- | --- | --- | --- | --- | --- |");
	let mut single_stream = None;
	for (run, (providers, single)) in options.runs.iter().copied().enumerate() {
		let run_dir = options.dir.join(format!("run-{run}"));
		let mut nodes = Vec::new();
		let mut addresses = Vec::new();
		for provider in 0..providers {
			let dir = run_dir.join(format!("provider-{provider}"));
			let store = Store::open(&dir)?;
			std::fs::hard_link(source.path(&hash), store.path(&hash))?;
			store.save_outline(&hash, len, &outline);
			let node = Network::start(&args(vec![]), store, &dir).await?;
			node.delay_serving(options.latency);
			addresses.push(node.listening().await?.remove(0));
			nodes.push(node);
		}
		let dir = run_dir.join("fetcher");
		let store = Store::open(&dir)?;
		let mut fetcher = Network::start(&args(addresses), store.clone(), &dir).await?;
		let window = if single { (1, 1) } else { (FETCH_WINDOW, PEER_WINDOW) };
		fetcher.set_window(window.0, window.1);
		for _ in 0..400 {
			if fetcher.peers().await.len() == providers {
				break;
			}
			tokio::time::sleep(Duration::from_millis(25)).await;
		}
		ensure!(fetcher.peers().await.len() == providers, "the fetcher did not reach its {providers} providers");
		high_water_mib(true);
		let before = high_water_mib(false);
		let start = Instant::now();
		fetcher.fetch_to_store(hash, Duration::from_secs(600), u64::MAX).await?;
		let seconds = start.elapsed().as_secs_f64();
		let peak = high_water_mib(false);
		ensure!(store.contains(&hash), "the artifact is not in the fetcher's store");
		let throughput = options.size_mib as f64 / seconds;
		let ratio = single_stream.map_or("1.00".to_string(), |base: f64| format!("{:.2}", throughput / base));
		if single {
			single_stream = Some(throughput);
		}
		println!(
			"| {providers} | {} | {} | {seconds:.1} | {throughput:.0} | {ratio} | +{:.0} (peak {peak:.0}) |",
			if single { "1 (single stream)".to_string() } else { format!("{} ({} a provider)", window.0.min(window.1 * providers), window.1) },
			options.latency.as_millis(),
			peak - before,
		);
		drop((nodes, fetcher));
		tokio::time::sleep(Duration::from_millis(200)).await;
		std::fs::remove_dir_all(&run_dir)?;
	}
	std::fs::remove_dir_all(&options.dir)?;
	Ok(())
}

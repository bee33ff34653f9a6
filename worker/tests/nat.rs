//! A worker behind NAT serves an artifact through a relay. Three network namespaces made
//! by the test: a public network (10.77.0.0/24) holding a relay and a fetcher, a home
//! network (10.77.1.0/24) holding the worker, and a router between them that masquerades
//! the home network behind its public address, as a home router does. Nothing on the
//! public side can reach the home network (checked); the worker reserves a slot at the
//! relay (`--p2p-relay`), its advertised address is the one through the relay, and the
//! fetcher, given only that address, fetches the artifact from it, whole and verified.
//! The log says whether hole punching replaced the relayed connection with a direct one.
//! Then AutoNAT: the worker finds out it is behind NAT (the relay cannot dial it back),
//! and the relay that it is public (the worker can).
//!
//! It needs root, `ip` (iproute2) and `iptables`, which `scripts/setup.sh` installs; CI
//! runs as root. Without them it says plainly that it skipped, and passes.

use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

use touchstone_worker::p2p::{Network, NetworkArgs, Reachability};
use touchstone_worker::store::Store;

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
	// SAFETY: geteuid has no preconditions and cannot fail.
	if unsafe { libc::geteuid() } != 0 {
		return Some("not root: network namespaces and NAT rules need root".into());
	}
	for tool in ["ip", "iptables"] {
		if Command::new(tool).arg("--version").output().is_err() {
			return Some(format!("`{tool}` is not installed (scripts/setup.sh installs it)"));
		}
	}
	None
}

/// Runs a command; panics with its output if it fails.
fn run(command: &str) {
	let words: Vec<&str> = command.split_whitespace().collect();
	let output = Command::new(words[0]).args(&words[1..]).output().unwrap_or_else(|error| panic!("{command}: {error}"));
	assert!(output.status.success(), "{command}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Joins two namespaces by a veth pair, each end (namespace, interface, address) up.
fn cable(a: (&str, &str, &str), b: (&str, &str, &str)) {
	run(&format!("ip link add {} type veth peer name {}", a.1, b.1));
	for (namespace, link, address) in [a, b] {
		run(&format!("ip link set {link} netns {namespace}"));
		run(&format!("ip -n {namespace} addr add {address} dev {link}"));
		run(&format!("ip -n {namespace} link set {link} up"));
	}
}

/// The three namespaces, deleted (with their interfaces) when dropped.
struct Hosts {
	public: String,
	router: String,
	home: String,
}

impl Hosts {
	fn new() -> Self {
		let id = std::process::id() % 100_000;
		let hosts = Self { public: format!("tsp{id}"), router: format!("tsr{id}"), home: format!("tsh{id}") };
		let (public, router, home) = (&hosts.public, &hosts.router, &hosts.home);
		for namespace in [public, router, home] {
			run(&format!("ip netns add {namespace}"));
			run(&format!("ip -n {namespace} link set lo up"));
		}
		// Public side: 10.77.0.2 (public host) - 10.77.0.1 (router's public address).
		cable((public, &format!("tsvp{id}"), "10.77.0.2/24"), (router, &format!("tsvr{id}"), "10.77.0.1/24"));
		// Home side: 10.77.1.2 (the worker) - 10.77.1.1 (router), its default route.
		cable((home, &format!("tsvh{id}"), "10.77.1.2/24"), (router, &format!("tsvq{id}"), "10.77.1.1/24"));
		run(&format!("ip -n {home} route add default via 10.77.1.1"));
		// The router forwards, and rewrites the home network's packets to its own address.
		run(&format!("ip netns exec {router} sysctl -qw net.ipv4.ip_forward=1"));
		run(&format!("ip netns exec {router} iptables -t nat -A POSTROUTING -o tsvr{id} -j MASQUERADE"));
		hosts
	}
}

impl Drop for Hosts {
	fn drop(&mut self) {
		for namespace in [&self.public, &self.router, &self.home] {
			let _ = Command::new("ip").args(["netns", "del", namespace]).status();
		}
	}
}

/// A runtime whose every thread (workers and blocking ones) lives in `namespace`: the
/// sockets of the nodes it runs are that host's.
fn runtime_in(namespace: &str) -> tokio::runtime::Runtime {
	let path = format!("/run/netns/{namespace}");
	tokio::runtime::Builder::new_multi_thread()
		.worker_threads(2)
		.enable_all()
		.on_thread_start(move || {
			let file = std::fs::File::open(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
			// SAFETY: a valid namespace file descriptor, held open for the call.
			let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
			assert_eq!(entered, 0, "cannot enter {path}: {}", std::io::Error::last_os_error());
		})
		.build()
		.expect("a runtime")
}

/// Runs `future` on `runtime`'s threads (in its namespace) and waits for it.
fn on<T: Send + 'static>(runtime: &tokio::runtime::Runtime, future: impl std::future::Future<Output = T> + Send + 'static) -> T {
	runtime.block_on(runtime.spawn(future)).expect("the task finished")
}

/// What AutoNAT finds for `network` once `done` accepts it, or after 90 s (a first probe
/// without a server is tried again 30 s later).
async fn settled(network: &Network, done: impl Fn(&Reachability) -> bool) -> Reachability {
	for _ in 0..360 {
		let found = network.reachability();
		if done(&found) {
			return found;
		}
		tokio::time::sleep(Duration::from_millis(250)).await;
	}
	network.reachability()
}

fn args(listen: &str) -> NetworkArgs {
	NetworkArgs { p2p_listen: Some(listen.parse().unwrap()), no_mdns: true, ..NetworkArgs::default() }
}

#[test]
fn a_worker_behind_nat_serves_an_artifact_through_a_relay() {
	if let Some(reason) = skip_reason() {
		eprintln!("SKIPPED a_worker_behind_nat_serves_an_artifact_through_a_relay: {reason}");
		return;
	}
	let _ = tracing_subscriber::fmt().with_env_filter("info,libp2p_dcutr=debug").with_test_writer().try_init();
	let hosts = Hosts::new();
	let (public, home) = (runtime_in(&hosts.public), runtime_in(&hosts.home));
	let base = std::env::temp_dir().join(format!("touchstone-nat-{}", std::process::id()));
	let _ = std::fs::remove_dir_all(&base);

	// The relay, on the public network.
	let relay_dir = base.join("relay");
	let relay = on(&public, async move {
		let mut relay_args = args("/ip4/10.77.0.2/tcp/0");
		relay_args.relay_service = true;
		Network::start(&relay_args, Store::open(&relay_dir).unwrap(), &relay_dir).await.unwrap()
	});
	let relay_for_address = relay.clone();
	let relay_address = on(&public, async move { relay_for_address.listening().await.unwrap().remove(0) });

	// The worker at home holds three and a half groups, and accepts peers through the relay.
	let artifact: Vec<u8> = (0..(7 << 19) as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
	let home_dir = base.join("home");
	let store = Store::open(&home_dir).unwrap();
	let hash = store.put(&artifact).unwrap();
	let mut home_args = args("/ip4/10.77.1.2/tcp/0");
	home_args.p2p_relay = Some(relay_address.clone());
	let worker = on(&home, async move { Network::start(&home_args, store, &home_dir).await.unwrap() });
	let (for_addresses, for_advertised) = (worker.clone(), worker.clone());
	let direct = on(&home, async move { for_addresses.listening().await.unwrap().remove(0) });
	let advertised = on(&home, async move { for_advertised.advertised(None, false).await.unwrap().unwrap() });
	assert_eq!(advertised.to_string(), format!("{relay_address}/p2p-circuit/p2p/{}", worker.peer_id()));

	// Behind the NAT: the public side cannot reach the worker's own address.
	let port = direct.iter().find_map(|part| match part {
		libp2p::multiaddr::Protocol::Tcp(port) => Some(port),
		_ => None,
	});
	let unreachable = on(&public, async move {
		tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(("10.77.1.2", port.unwrap()))).await
	});
	assert!(!matches!(unreachable, Ok(Ok(_))), "the home network is reachable from the public one: no NAT");

	// A fetcher on the public network, given only the advertised address.
	let fetcher_dir = base.join("fetcher");
	let fetched = on(&public, async move {
		let mut fetcher_args = args("/ip4/10.77.0.2/tcp/0");
		fetcher_args.peers = vec![advertised];
		let fetcher = Network::start(&fetcher_args, Store::open(&fetcher_dir).unwrap(), &fetcher_dir).await.unwrap();
		fetcher.fetch(hash, Duration::from_secs(60), u64::MAX).await
	});
	assert_eq!(fetched.expect("the artifact crossed the NAT"), artifact);

	// AutoNAT: the relay could not dial the worker back, so the worker knows it is behind
	// NAT; the worker could dial the relay back, so the relay knows it is public.
	let (for_worker, for_relay) = (worker.clone(), relay.clone());
	let behind = on(&home, async move { settled(&for_worker, |found| found == &Reachability::Private).await });
	assert_eq!(behind, Reachability::Private, "the worker behind NAT did not find out");
	let public_found = on(&public, async move { settled(&for_relay, |found| matches!(found, Reachability::Public(_))).await });
	assert!(
		matches!(&public_found, Reachability::Public(address) if address.to_string().starts_with("/ip4/10.77.0.2/tcp/")),
		"the public relay found {public_found:?}"
	);

	drop((relay, worker));
	public.shutdown_timeout(Duration::from_secs(1));
	home.shutdown_timeout(Duration::from_secs(1));
	let _ = std::fs::remove_dir_all(&base);
	drop(hosts);
}

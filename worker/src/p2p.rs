//! Artifacts between workers over libp2p: datasets, checkpoints and models, fetched by
//! their content hash.
//!
//! - **Transport**: TCP with Noise and Yamux (the libp2p the node's networking compiles).
//! - **Discovery**: peers given with `--peer`, peers found by mDNS on the LAN, and
//!   Kademlia: every worker announces itself as a provider of the artifacts others look
//!   up (datasets, initial weights, trace manifests, final models; not checkpoints, which
//!   those who need them ask the solver for directly), and a fetch asks the DHT who
//!   provides the hash, and every connected peer.
//! - **Exchange**: request-response on `/touchstone/artifact/2`. An artifact is cut into
//!   1 MiB groups; a peer answers with an artifact's **outline** (its length and each
//!   group's BLAKE3 chaining value, [`touchstone_kernels::proof::content`]) or with one
//!   group. A fetch asks every candidate for the outline, settles on one whose BLAKE3 tree
//!   gives the name asked for, then asks the peers that gave it for groups, up to
//!   [`FETCH_WINDOW`] in flight in all and [`PEER_WINDOW`] per peer, and writes each at its
//!   place in a partial file in the store.
//! - **Integrity**: every group is checked against its chaining value on arrival, before
//!   it is written: a wrong byte costs one group, blamed on the peer that sent it. The
//!   length is the outline's, which the name proves, and may not pass the caller's bound
//!   (from what the chain commits): a peer's word is never taken for it. An artifact
//!   named otherwise (a unit's trace manifest, by its trace root) is checked group by group
//!   against the first peer's outline and as a whole once complete.
//! - **Resumption**: a transfer cut by a dropped connection, a slow peer or a restart
//!   resumes from every group of the partial file that verifies, whoever sent it.
//! - **Bad peers**: a peer that sends a group or an outline that does not verify, an
//!   outline longer than the caller's bound, or a malformed one, is banned for [`BAN`]:
//!   no fetch asks it again meanwhile. A peer that fails or stalls is asked no more in
//!   that transfer; while it stalls, its groups are asked of another peer too.
//! - **Serving** reads outlines and groups from disk on blocking threads, at most
//!   [`SERVING_READS`] at a time, never on the event loop, which goes on answering other
//!   peers meanwhile. An outline is computed once and kept beside the artifact.
//! - **Memory**: a fetch holds at most [`FETCH_WINDOW`] groups, a server
//!   [`SERVING_READS`]; nothing is held whole in memory while it is sent or received
//!   (`fetch` reads the finished artifact from the store for its caller).

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use codec::{Decode, Encode};
use futures::prelude::*;
use libp2p::identity::Keypair;
use libp2p::kad::{self, store::MemoryStore, store::MemoryStoreConfig, GetProvidersOk, QueryResult, RecordKey};
use libp2p::request_response::{self, OutboundRequestId, ProtocolSupport};
use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
use libp2p::swarm::{behaviour::toggle::Toggle, NetworkBehaviour, SwarmEvent};
use libp2p::{autonat, dcutr, identify, mdns, noise, relay, tcp, upnp, yamux, Multiaddr, PeerId, StreamProtocol, Swarm};
use tokio::sync::{mpsc, oneshot};
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::content::{group_count, group_len, group_matches, outline_root};
use touchstone_kernels::proof::hash::Digest;
use touchstone_primitives::JobId;

use crate::store::{Check, Kind, Store};

/// The exchange protocol.
pub const PROTOCOL: StreamProtocol = StreamProtocol::new("/touchstone/artifact/2");
/// Bytes per group: the unit a request asks for and a transfer verifies.
pub use touchstone_kernels::proof::content::GROUP;
/// The largest message the codec reads: a group and its framing, or an outline of
/// [`MAX_GROUPS`] values.
const MAX_MESSAGE: usize = GROUP + 1024;
/// The most groups an artifact may have: as many chaining values as one message holds,
/// so artifacts up to about 31.9 GiB.
pub const MAX_GROUPS: u64 = (GROUP / 32 - 32) as u64;
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fetch waits for more peers' outlines once one has answered: peers that
/// answer later are not asked for groups in this transfer.
const OUTLINE_GRACE: Duration = Duration::from_secs(2);
/// Group requests one fetch keeps in flight, across every provider: each holds a group in
/// memory, so a fetch holds at most this many MiB.
pub const FETCH_WINDOW: usize = 16;
/// Group requests one fetch keeps in flight to one provider.
pub const PEER_WINDOW: usize = 8;
/// How long a peer that sent bad bytes is not asked again.
pub const BAN: Duration = Duration::from_secs(3600);
/// Where a worker accepts peers unless `--p2p-listen` says otherwise: every interface, on
/// a port that stays the same across restarts.
pub const DEFAULT_LISTEN: &str = "/ip4/0.0.0.0/tcp/30555";
/// Where a worker accepts peers over QUIC unless `--p2p-listen` says otherwise: the same
/// port as TCP, over UDP, where NATs let hole punching through more often.
pub const DEFAULT_LISTEN_QUIC: &str = "/ip4/0.0.0.0/udp/30555/quic-v1";
/// How many reads from disk a node serves at once: each holds a group in memory.
pub const SERVING_READS: usize = 8;
/// How long a circuit through a relay lasts before the relay closes it (libp2p's default
/// is 2 minutes, too short for a checkpoint over a slow link; a fetch that loses one
/// resumes over the next).
pub const RELAY_CIRCUIT_DURATION: Duration = Duration::from_secs(30 * 60);
/// How long a worker behind a relay waits for it to accept a reservation before it gives
/// up advertising an address through it.
pub const RELAY_PATIENCE: Duration = Duration::from_secs(30);
/// How many bytes a circuit through a relay carries before the relay closes it (libp2p's
/// default is 128 KiB, less than one group).
pub const RELAY_CIRCUIT_BYTES: u64 = 4 << 30;
/// How many keys the DHT's memory store holds provider records for, this node's and
/// others' (libp2p's default is 1,024, which a solver that announces every checkpoint
/// passes within a few jobs, after which announcements fail). A record is about a hundred
/// bytes, so this is a few megabytes at most.
const PROVIDER_KEYS: usize = 65_536;

/// A request about an artifact.
#[derive(Clone, Debug, Encode, Decode)]
pub enum ArtifactRequest {
	/// Its length and outline.
	Outline {
		/// The artifact.
		hash: Digest,
	},
	/// One group of its bytes.
	Group {
		/// The artifact.
		hash: Digest,
		/// The group, from 0: bytes `index × GROUP` on.
		index: u64,
	},
}

/// The answer to an [`ArtifactRequest`].
#[derive(Clone, Debug, Encode, Decode)]
pub enum ArtifactResponse {
	/// The artifact's length in bytes and the chaining value of each group
	/// ([`touchstone_kernels::proof::content`]; none for an artifact of one group).
	Outline {
		/// Its length in bytes.
		len: u64,
		/// Its outline.
		values: Vec<Digest>,
	},
	/// The group's bytes.
	Group(Vec<u8>),
	/// The peer does not hold the artifact.
	NotFound,
}

/// SCALE messages, each behind a 4-byte big-endian length.
#[derive(Clone, Default)]
pub struct ArtifactCodec;

async fn read_message<T: AsyncRead + Unpin + Send, M: Decode>(io: &mut T) -> std::io::Result<M> {
	let mut length = [0u8; 4];
	io.read_exact(&mut length).await?;
	let length = u32::from_be_bytes(length) as usize;
	if length > MAX_MESSAGE {
		return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "artifact message too large"));
	}
	let mut buffer = vec![0u8; length];
	io.read_exact(&mut buffer).await?;
	M::decode(&mut buffer.as_slice()).map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error.to_string()))
}

async fn write_message<T: AsyncWrite + Unpin + Send, M: Encode>(io: &mut T, message: M) -> std::io::Result<()> {
	let bytes = message.encode();
	io.write_all(&(bytes.len() as u32).to_be_bytes()).await?;
	io.write_all(&bytes).await?;
	io.close().await
}

#[async_trait::async_trait]
impl request_response::Codec for ArtifactCodec {
	type Protocol = StreamProtocol;
	type Request = ArtifactRequest;
	type Response = ArtifactResponse;

	async fn read_request<T: AsyncRead + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T) -> std::io::Result<ArtifactRequest> {
		read_message(io).await
	}
	async fn read_response<T: AsyncRead + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T) -> std::io::Result<ArtifactResponse> {
		read_message(io).await
	}
	async fn write_request<T: AsyncWrite + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T, request: ArtifactRequest) -> std::io::Result<()> {
		write_message(io, request).await
	}
	async fn write_response<T: AsyncWrite + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T, response: ArtifactResponse) -> std::io::Result<()> {
		write_message(io, response).await
	}
}

#[derive(NetworkBehaviour)]
struct Behaviour {
	artifacts: request_response::Behaviour<ArtifactCodec>,
	kademlia: kad::Behaviour<MemoryStore>,
	identify: identify::Behaviour,
	mdns: Toggle<mdns::tokio::Behaviour>,
	/// Reservations at a relay (`--p2p-relay`), and dials through one.
	relay_client: relay::client::Behaviour,
	/// Hole punching: a connection that came through a relay is upgraded to a direct one
	/// where both sides' NATs allow it.
	dcutr: dcutr::Behaviour,
	/// The relay service, on `touchstone-worker relay` only.
	relay: Toggle<relay::Behaviour>,
	/// Port mappings on the router, with `--p2p-upnp` only: searching for a router sends
	/// multicast to the local network.
	upnp: Toggle<upnp::tokio::Behaviour>,
	/// AutoNAT: asks connected peers to dial this node back, to learn whether it is
	/// reachable ([`Reachability`]), and dials back the peers that ask it.
	autonat: autonat::Behaviour,
}

/// How AutoNAT probes. The first probe goes out a few seconds after start (a worker is
/// connected to the chain's endpoints by then), and one without an answer is tried again
/// every 30 s. Peers at private addresses count as probes' servers, and are dialled back:
/// a server dials only the IP address it saw the request come from, so a probe cannot aim
/// it at another host, and workers on one LAN (a local chain) learn where they stand
/// among themselves.
fn autonat_config() -> autonat::Config {
	autonat::Config { boot_delay: Duration::from_secs(5), retry_interval: Duration::from_secs(30), only_global_ips: false, ..Default::default() }
}

/// Whether peers can dial this node, as AutoNAT's probes through other peers find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reachability {
	/// No probe has been answered yet.
	Unknown,
	/// A peer dialled this node back at this address.
	Public(Multiaddr),
	/// Peers could not dial this node back: it is behind NAT or a firewall, and serves
	/// others only through a relay (`--p2p-relay`) or a port its router forwards.
	Private,
}

impl From<autonat::NatStatus> for Reachability {
	fn from(status: autonat::NatStatus) -> Self {
		match status {
			autonat::NatStatus::Public(address) => Self::Public(address),
			autonat::NatStatus::Private => Self::Private,
			autonat::NatStatus::Unknown => Self::Unknown,
		}
	}
}

/// What a relay (`touchstone-worker relay`) allows: circuits long and large enough to
/// carry a unit's checkpoints and final model, a bounded number of them.
fn relay_config() -> relay::Config {
	relay::Config {
		max_reservations: 512,
		max_reservations_per_peer: 4,
		max_circuits: 64,
		max_circuits_per_peer: 8,
		max_circuit_duration: RELAY_CIRCUIT_DURATION,
		max_circuit_bytes: RELAY_CIRCUIT_BYTES,
		..relay::Config::default()
	}
}

/// How a worker joins the network.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct NetworkArgs {
	/// The address to accept peers on [default: every interface, port 30555, the same
	/// across restarts, so the endpoint advertised on-chain and a router's port forward
	/// stay right; a random port if another process holds it, with a warning].
	#[arg(long)]
	pub p2p_listen: Option<Multiaddr>,
	/// A relay to accept peers through, for a worker behind NAT that no router forwards a
	/// port to: a multiaddr ending in /p2p/<relay peer id>, of a node running
	/// `touchstone-worker relay`. The worker reserves a slot there, advertises its address
	/// through the relay on-chain (unless --p2p-external is given), and upgrades
	/// connections that arrive through it to direct ones by hole punching where the NATs
	/// allow.
	#[arg(long)]
	pub p2p_relay: Option<Multiaddr>,
	/// Ask the router to forward the listening ports to this host (UPnP IGD), where it
	/// offers that: the mapped public address is then advertised on-chain, unless
	/// --p2p-external is given. Off by default: the search is multicast on the local
	/// network.
	#[arg(long)]
	pub p2p_upnp: bool,
	/// Offer relay service to other workers (`touchstone-worker relay` sets it).
	#[arg(skip)]
	pub relay_service: bool,
	/// A peer to connect to, as a multiaddr ending in /p2p/<peer id>; repeatable.
	#[arg(long = "peer")]
	pub peers: Vec<Multiaddr>,
	/// Do not look for peers on the local network with mDNS.
	#[arg(long)]
	pub no_mdns: bool,
	/// The address other workers reach this one at, when it differs from --p2p-listen (a
	/// public IP or DNS name behind NAT or port forwarding), for example
	/// /dns4/solver.example.org/tcp/30555. A solver advertises it on-chain.
	#[arg(long)]
	pub p2p_external: Option<Multiaddr>,
}

enum Command {
	Provide(Digest),
	Providers(Digest, oneshot::Sender<Vec<PeerId>>),
	Request(PeerId, ArtifactRequest, oneshot::Sender<Result<ArtifactResponse>>),
	Peers(oneshot::Sender<Vec<PeerId>>),
	Listening(oneshot::Sender<Vec<Multiaddr>>),
	External(oneshot::Sender<Vec<Multiaddr>>),
	Dial(Multiaddr),
	Join(Vec<Multiaddr>),
}

/// A handle on a running network node; dropping every handle stops it.
#[derive(Clone)]
pub struct Network {
	commands: mpsc::UnboundedSender<Command>,
	peer_id: PeerId,
	store: Store,
	/// The peers that sent bad bytes, with when their ban ends.
	banned: Arc<Mutex<HashMap<PeerId, Instant>>>,
	/// The artifacts [`Network::keep`] noted, each once.
	kept: Arc<Mutex<HashSet<(JobId, Kind, Digest)>>>,
	/// Group requests a fetch keeps in flight: in all, and to one provider.
	window: (usize, usize),
	/// Milliseconds each answer to a peer waits before it is sent (test equipment).
	serving_delay: Arc<AtomicU64>,
	/// The relay this node accepts peers through (`--p2p-relay`).
	relay: Option<Multiaddr>,
	/// Whether peers can dial this node, as AutoNAT last found.
	reachability: tokio::sync::watch::Receiver<Reachability>,
}

/// What the event loop keeps beside the swarm.
struct Events {
	/// Milliseconds each answer to a peer waits before it is sent (test equipment).
	serving_delay: Arc<AtomicU64>,
	/// Whether this node is a relay (`touchstone-worker relay`).
	relay_service: bool,
	/// Whether this node listens through a relay (`--p2p-relay`).
	relayed: bool,
	/// Where AutoNAT's findings go.
	reachable: tokio::sync::watch::Sender<Reachability>,
}

/// Why a transfer from one peer failed.
enum Failure {
	/// The peer sent bad bytes: it is banned.
	Bad(anyhow::Error),
	/// The peer is away, slow or without the artifact: another may be asked.
	Unavailable(anyhow::Error),
}

/// Loads the worker's network identity from `path`, creating it on first use, so its
/// peer id survives restarts.
fn identity(path: &Path) -> Result<Keypair> {
	if let Ok(bytes) = std::fs::read(path) {
		return Keypair::from_protobuf_encoding(&bytes).with_context(|| format!("{} is not a network key", path.display()));
	}
	let keypair = Keypair::generate_ed25519();
	let bytes = keypair.to_protobuf_encoding().map_err(|error| anyhow!("{error}"))?;
	// Atomically: a torn key file would stop every later start.
	crate::store::write_atomically(path, &bytes)?;
	Ok(keypair)
}

impl Network {
	/// Starts a network node serving `store`, with its identity in `data_dir`.
	pub async fn start(args: &NetworkArgs, store: Store, data_dir: &Path) -> Result<Self> {
		std::fs::create_dir_all(data_dir)?;
		let keypair = identity(&data_dir.join("network-key"))?;
		let peer_id = keypair.public().to_peer_id();
		let mdns_enabled = !args.no_mdns;
		let relay_service = args.relay_service;
		let upnp_enabled = args.p2p_upnp;
		let mut swarm = libp2p::SwarmBuilder::with_existing_identity(keypair)
			.with_tokio()
			// Nagle off: libp2p-tcp 0.42 leaves it on, and each window update of a 1 MiB
			// answer then waits out a delayed ACK (a single stream ran at 9 MiB/s on loopback).
			.with_tcp(tcp::Config::default().nodelay(true), noise::Config::new, yamux::Config::default)
			.map_err(|error| anyhow!("cannot set up the network transport: {error}"))?
			.with_quic()
			.with_relay_client(noise::Config::new, yamux::Config::default)
			.map_err(|error| anyhow!("cannot set up the relay transport: {error}"))?
			.with_behaviour(|key, relay_client| {
				let peer_id = key.public().to_peer_id();
				let config = MemoryStoreConfig { max_records: PROVIDER_KEYS, max_provided_keys: PROVIDER_KEYS, ..Default::default() };
				let mut kademlia = kad::Behaviour::new(peer_id, MemoryStore::with_config(peer_id, config));
				kademlia.set_mode(Some(kad::Mode::Server));
				let mdns = if mdns_enabled { mdns::tokio::Behaviour::new(mdns::Config::default(), peer_id).ok() } else { None };
				Behaviour {
					artifacts: request_response::Behaviour::new(
						[(PROTOCOL, ProtocolSupport::Full)],
						request_response::Config::default().with_request_timeout(REQUEST_TIMEOUT),
					),
					kademlia,
					identify: identify::Behaviour::new(identify::Config::new("/touchstone/1".into(), key.public())),
					mdns: mdns.into(),
					relay_client,
					dcutr: dcutr::Behaviour::new(peer_id),
					relay: relay_service.then(|| relay::Behaviour::new(peer_id, relay_config())).into(),
					upnp: upnp_enabled.then(upnp::tokio::Behaviour::default).into(),
					autonat: autonat::Behaviour::new(peer_id, autonat_config()),
				}
			})
			.map_err(|error| anyhow!("cannot set up the network: {error}"))?
			.with_swarm_config(|config| config.with_idle_connection_timeout(Duration::from_secs(120)))
			.build();
		match &args.p2p_listen {
			Some(address) => {
				swarm.listen_on(address.clone()).with_context(|| format!("cannot listen on {address}"))?;
			},
			None => {
				for (stable, random) in [(DEFAULT_LISTEN, "/ip4/0.0.0.0/tcp/0"), (DEFAULT_LISTEN_QUIC, "/ip4/0.0.0.0/udp/0/quic-v1")] {
					let stable: Multiaddr = stable.parse().context("the default listening address")?;
					if let Err(error) = swarm.listen_on(stable.clone()) {
						// A second worker on the host (a submitter beside a solver) takes any port.
						tracing::warn!("cannot listen on {stable} ({error}): listening on a random port; pass --p2p-listen to choose one");
						let random: Multiaddr = random.parse().context("the fallback listening address")?;
						swarm.listen_on(random).context("cannot listen on any port")?;
					}
				}
			},
		}
		for peer in &args.peers {
			swarm.dial(peer.clone()).with_context(|| format!("cannot dial {peer}"))?;
		}
		if let (true, Some(external)) = (relay_service, &args.p2p_external) {
			swarm.add_external_address(external.clone());
		}
		if let Some(relay) = &args.p2p_relay {
			ensure!(
				matches!(relay.iter().last(), Some(libp2p::multiaddr::Protocol::P2p(_))),
				"--p2p-relay {relay} must end in /p2p/<the relay's peer id> (the relay prints its addresses when it starts)"
			);
			// Listening through the relay dials it and reserves a slot; the address appears
			// among the listening ones once the relay accepts.
			swarm
				.listen_on(relay.clone().with(libp2p::multiaddr::Protocol::P2pCircuit))
				.with_context(|| format!("cannot listen through the relay {relay}"))?;
		}
		let (commands, receiver) = mpsc::unbounded_channel();
		let serving_delay = Arc::new(AtomicU64::new(0));
		let (reachable, reachability) = tokio::sync::watch::channel(Reachability::Unknown);
		let events = Events { serving_delay: serving_delay.clone(), relay_service, relayed: args.p2p_relay.is_some(), reachable };
		tokio::spawn(event_loop(swarm, receiver, store.clone(), events));
		let network = Self {
			commands,
			peer_id,
			store,
			banned: Arc::default(),
			kept: Arc::default(),
			window: (FETCH_WINDOW, PEER_WINDOW),
			serving_delay,
			relay: args.p2p_relay.clone(),
			reachability,
		};
		for hash in network.store.announced() {
			network.provide(hash);
		}
		Ok(network)
	}

	/// Sets how many group requests a fetch keeps in flight, in all and to one provider
	/// (at least one each; [`FETCH_WINDOW`] and [`PEER_WINDOW`] unless set): one and one is
	/// a single stream, the baseline `scripts/bench-transfer.sh` measures against.
	pub fn set_window(&mut self, in_all: usize, per_provider: usize) {
		self.window = (in_all.max(1), per_provider.max(1));
	}

	/// Delays every answer this node sends a peer by `delay`: a network's latency where the
	/// kernel offers no `tc netem` (test equipment).
	#[cfg(feature = "test-equipment")]
	pub fn delay_serving(&self, delay: Duration) {
		self.serving_delay.store(delay.as_millis() as u64, Ordering::Relaxed);
	}

	/// Whether peers can dial this node, as AutoNAT last found.
	pub fn reachability(&self) -> Reachability {
		self.reachability.borrow().clone()
	}

	/// This node's peer id.
	pub fn peer_id(&self) -> PeerId {
		self.peer_id
	}

	/// The addresses this node listens on, each ending in its peer id (waits for at least one).
	pub async fn listening(&self) -> Result<Vec<Multiaddr>> {
		for _ in 0..100 {
			let (reply, answer) = oneshot::channel();
			self.send(Command::Listening(reply))?;
			let addresses = answer.await?;
			if !addresses.is_empty() {
				return Ok(addresses.into_iter().map(|address| ending_in_peer(address, self.peer_id)).collect());
			}
			tokio::time::sleep(Duration::from_millis(50)).await;
		}
		bail!("the network is not listening on any address")
	}

	/// Connects to the peer at `address` (a multiaddr ending in /p2p/<peer id>), for
	/// example one a node advertises on-chain. Connecting happens in the background; a
	/// fetch asks every connected peer.
	pub fn dial(&self, address: Multiaddr) {
		let _ = self.send(Command::Dial(address));
	}

	/// Joins the network through `addresses` (each ending in /p2p/<peer id>, as endpoints
	/// advertised on-chain do): dials those not connected, adds them to the DHT's routing
	/// table, and bootstraps the DHT from them.
	pub fn join(&self, addresses: Vec<Multiaddr>) {
		let _ = self.send(Command::Join(addresses));
	}

	/// The address to advertise on-chain: `--p2p-external` with this node's peer id; else,
	/// behind a relay (`--p2p-relay`), the address through it, once the relay has accepted
	/// a reservation (waiting up to [`RELAY_PATIENCE`]); else a public address the router
	/// forwards a port from (`--p2p-upnp`, once it has answered); else the first listening
	/// address that others could reach (not unspecified). On a public chain (`public`) only a
	/// publicly routable address will do ([`routable`]): `--p2p-external` or a relay with a
	/// loopback or private one is an error, and without them none of the listening
	/// addresses may qualify (then `None`).
	pub async fn advertised(&self, external: Option<&Multiaddr>, public: bool) -> Result<Option<Multiaddr>> {
		use libp2p::multiaddr::Protocol;
		if let Some(external) = external {
			if public && !routable(external) {
				bail!(
					"--p2p-external {external} is a loopback, private or link-local address, which peers on a public chain cannot reach: give the host's public address or DNS name"
				);
			}
			return Ok(Some(ending_in_peer(external.clone(), self.peer_id)));
		}
		if let Some(relay) = &self.relay {
			if public && !routable(relay) {
				bail!("--p2p-relay {relay} is a loopback, private or link-local address, which peers on a public chain cannot reach");
			}
			let deadline = Instant::now() + RELAY_PATIENCE;
			while Instant::now() < deadline {
				let relayed = self.listening().await?.into_iter().find(|address| address.iter().any(|part| part == Protocol::P2pCircuit));
				if relayed.is_some() {
					return Ok(relayed);
				}
				tokio::time::sleep(Duration::from_millis(250)).await;
			}
			bail!(
				"the relay {relay} accepted no reservation within {} s: is `touchstone-worker relay` running there, and reachable from this host?",
				RELAY_PATIENCE.as_secs()
			);
		}
		let reachable = |address: &Multiaddr| {
			!address.iter().any(|part| match part {
				Protocol::Ip4(ip) => ip.is_unspecified(),
				Protocol::Ip6(ip) => ip.is_unspecified(),
				_ => false,
			}) && (!public || routable(address))
		};
		// A port the router forwards (`--p2p-upnp`), then the listening addresses.
		let (reply, answer) = oneshot::channel();
		self.send(Command::External(reply))?;
		let forwarded = answer.await.unwrap_or_default().into_iter().map(|address| ending_in_peer(address, self.peer_id));
		let listening = self.listening().await?;
		Ok(forwarded.chain(listening).find(reachable))
	}

	fn send(&self, command: Command) -> Result<()> {
		self.commands.send(command).map_err(|_| anyhow!("the network node stopped"))
	}

	/// Announces that this node holds `hash`.
	pub fn provide(&self, hash: Digest) {
		let _ = self.send(Command::Provide(hash));
	}

	/// Notes the artifact `hash` in the store as a `kind` of job `job`, which says how
	/// long it is kept ([`crate::retention`]), and announces it if others find that kind
	/// through the DHT ([`Kind::announced`]). Once a process for each: passes call it
	/// again and again. An artifact not in the store is not noted.
	pub fn keep(&self, job: JobId, kind: Kind, hash: Digest) {
		let mut kept = self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		// Looked up before the disk is: passes call this for the same inputs every block.
		if kept.contains(&(job, kind, hash)) || !self.store.contains(&hash) {
			return;
		}
		kept.insert((job, kind, hash));
		drop(kept);
		self.store.note(job, kind, &hash);
		if kind.announced() {
			self.provide(hash);
		}
	}

	async fn providers(&self, hash: Digest) -> Vec<PeerId> {
		let (reply, answer) = oneshot::channel();
		if self.send(Command::Providers(hash, reply)).is_err() {
			return Vec::new();
		}
		tokio::time::timeout(Duration::from_secs(10), answer).await.ok().and_then(Result::ok).unwrap_or_default()
	}

	/// Whether `peer` is banned now, for having sent bad bytes.
	pub fn is_banned(&self, peer: &PeerId) -> bool {
		let mut banned = self.banned.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
		banned.retain(|_, until| *until > Instant::now());
		banned.contains_key(peer)
	}

	/// Bans `peer` for [`BAN`], for `error`.
	fn ban(&self, peer: PeerId, error: &anyhow::Error) {
		tracing::warn!(%peer, "banned for {} s: {error:#}", BAN.as_secs());
		crate::metrics::get().fetch_failures.inc();
		self.banned.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(peer, Instant::now() + BAN);
	}

	/// The peers connected now.
	pub async fn peers(&self) -> Vec<PeerId> {
		let (reply, answer) = oneshot::channel();
		if self.send(Command::Peers(reply)).is_err() {
			return Vec::new();
		}
		answer.await.unwrap_or_default()
	}

	async fn request(&self, peer: PeerId, request: ArtifactRequest) -> Result<ArtifactResponse> {
		let (reply, answer) = oneshot::channel();
		self.send(Command::Request(peer, request, reply))?;
		answer.await.map_err(|_| anyhow!("the network node stopped"))?
	}

	/// The artifact `hash`: from the local store, or else fetched ([`Network::fetch_to_store`]).
	pub async fn fetch(&self, hash: Digest, patience: Duration, max_len: u64) -> Result<Vec<u8>> {
		self.fetch_to_store(hash, patience, max_len).await?;
		self.store.get(&hash)
	}

	/// Makes sure the local store holds the artifact `hash`: if it does not, fetches it from
	/// the peers that provide it, verified group by group as it arrives, never whole in
	/// memory. Waits up to `patience` for a provider to appear. `max_len` is the most bytes
	/// the artifact can hold, known from what the chain commits (the job's dataset and model
	/// shapes): a peer that declares more is banned, and the disk never holds more than that
	/// of it.
	pub async fn fetch_to_store(&self, hash: Digest, patience: Duration, max_len: u64) -> Result<()> {
		if self.store.contains(&hash) {
			return Ok(());
		}
		self.obtain(hash, patience, None, max_len).await
	}

	/// As [`Network::fetch`], for an artifact named by something other than its content
	/// hash (a unit's trace manifest, by its trace root): `check` decides whether the
	/// bytes are it. Its groups are checked against the outline of the peer that gave it,
	/// and the whole against `check` once complete: a failure bans that peer.
	pub async fn fetch_with(&self, hash: Digest, patience: Duration, check: &Check<'_>, max_len: u64) -> Result<Vec<u8>> {
		if !self.store.contains(&hash) {
			self.obtain(hash, patience, Some(check), max_len).await?;
		}
		self.store.get_with(&hash, check)
	}

	/// Fetches `hash`, which the store does not hold, from whoever provides it, until a
	/// transfer succeeds or `patience` runs out.
	async fn obtain(&self, hash: Digest, patience: Duration, check: Option<&Check<'_>>, max_len: u64) -> Result<()> {
		let deadline = tokio::time::Instant::now() + patience;
		let mut last_error = None;
		loop {
			let mut candidates = self.providers(hash).await;
			for peer in self.peers().await {
				if !candidates.contains(&peer) {
					candidates.push(peer);
				}
			}
			candidates.retain(|peer| *peer != self.peer_id && !self.is_banned(peer));
			if !candidates.is_empty() {
				match self.transfer(hash, &candidates, check, max_len, None).await {
					Ok(()) => return Ok(()),
					Err(error) => {
						crate::metrics::get().fetch_failures.inc();
						tracing::warn!("fetching {} failed: {error:#}", hex(&hash));
						last_error = Some(error);
					},
				}
			}
			if tokio::time::Instant::now() >= deadline {
				return Err(last_error.unwrap_or_else(|| {
					anyhow!(
						"artifact {} is not in the local store and no peer offers it: is a worker that holds it running and reachable? (pass --peer MULTIADDR)",
						hex(&hash)
					)
				}));
			}
			tokio::time::sleep(Duration::from_secs(1)).await;
		}
	}

	/// Fetches at most `groups` groups of `hash` from the connected peers and stops,
	/// leaving the partial file a later fetch resumes from: what a worker stopped in the
	/// middle of a transfer leaves behind. Returns the verified bytes held so far.
	pub async fn fetch_partially(&self, hash: Digest, groups: u64) -> Result<u64> {
		let peers = self.peers().await;
		ensure!(!peers.is_empty(), "no peer connected");
		self.transfer(hash, &peers, None, u64::MAX, Some(groups)).await?;
		let len = std::fs::metadata(self.store.partial_path(&hash)).map(|meta| meta.len()).unwrap_or(0);
		Ok(len.min(groups.saturating_mul(GROUP as u64)))
	}

	/// One transfer of `hash` from `candidates`: asks each for its outline, then asks the
	/// providers whose outline is the proven one (or, for a `check`ed artifact, the first
	/// one's) for groups, several at once ([`FETCH_WINDOW`], [`PEER_WINDOW`]), into the
	/// partial file, where each verified group stays until the transfer completes: a
	/// transfer cut short resumes from every group already verified. A peer that sends a
	/// bad outline or group is banned and the group asked of another; one that fails or
	/// does not hold it is asked no more in this transfer; a group outstanding at a slow
	/// peer while others idle is asked of another too, and the first verified answer wins.
	/// With `limit`, stops once the first `limit` groups are held.
	async fn transfer(&self, hash: Digest, candidates: &[PeerId], check: Option<&Check<'_>>, max_len: u64, limit: Option<u64>) -> Result<()> {
		let plan = self.outline(hash, candidates, check.is_none(), max_len).await?;
		let Plan { len, values, source, mut providers } = plan;
		let groups = group_count(len);
		let partial = self.store.partial_path(&hash);
		let io = |error: std::io::Error| anyhow!("cannot write {}: {error}", partial.display());
		let file = std::fs::OpenOptions::new().create(true).read(true).write(true).truncate(false).open(&partial).map_err(io)?;
		let resumed = file.metadata().map_err(io)?.len();
		let mut done = vec![false; groups as usize];
		if resumed > 0 {
			// Only what verifies is kept from before: a torn or foreign partial file costs a
			// re-fetch of its groups, never a wrong byte.
			file.set_len(len).map_err(io)?;
			for index in 0..groups {
				let mut bytes = vec![0u8; group_len(len, index) as usize];
				if file.read_exact_at(&mut bytes, index * GROUP as u64).is_ok() {
					done[index as usize] = group_matches(&hash, len, &values, index, &bytes);
				}
			}
			tracing::info!("resuming artifact {}: {} of {groups} groups already held", hex(&hash), done.iter().filter(|held| **held).count());
		} else {
			file.set_len(len).map_err(io)?;
		}
		let wanted = limit.unwrap_or(groups).min(groups);
		let mut pending: VecDeque<u64> = (0..wanted).filter(|index| !done[*index as usize]).collect();
		let mut remaining = pending.len();
		let mut asked: HashMap<u64, Vec<PeerId>> = HashMap::new();
		let mut load: HashMap<PeerId, usize> = HashMap::new();
		let mut in_flight = futures::stream::FuturesUnordered::new();
		while remaining > 0 {
			while in_flight.len() < self.window.0 {
				// A pending group, else a second ask for one outstanding at a single peer.
				let next = pending.front().copied().or_else(|| {
					asked.iter().filter(|(index, peers)| peers.len() == 1 && !done[**index as usize]).map(|(index, _)| *index).min()
				});
				let Some(index) = next else { break };
				let already = asked.get(&index).cloned().unwrap_or_default();
				let Some(peer) = providers
					.iter()
					.filter(|peer| !already.contains(peer) && load.get(*peer).copied().unwrap_or(0) < self.window.1)
					.min_by_key(|peer| load.get(*peer).copied().unwrap_or(0))
					.copied()
				else {
					break;
				};
				if pending.front() == Some(&index) {
					pending.pop_front();
				}
				asked.entry(index).or_default().push(peer);
				*load.entry(peer).or_default() += 1;
				let network = self.clone();
				in_flight.push(async move { (peer, index, network.request(peer, ArtifactRequest::Group { hash, index }).await) });
			}
			let Some((peer, index, answer)) = in_flight.next().await else {
				if !done.iter().any(|held| *held) {
					// Nothing verified to resume from: no partial file is left behind.
					let _ = std::fs::remove_file(&partial);
				}
				bail!("no provider of artifact {} is left to ask for its {remaining} missing groups", hex(&hash));
			};
			if let Some(load) = load.get_mut(&peer) {
				*load = load.saturating_sub(1);
			}
			let others_asked = asked.get_mut(&index).map(|peers| {
				peers.retain(|asked| *asked != peer);
				!peers.is_empty()
			});
			if done[index as usize] {
				continue;
			}
			let failure = match answer {
				Ok(ArtifactResponse::Group(bytes)) => {
					// A `check`ed artifact of one group has no outline to check its group against:
					// the check of the whole does, below.
					let fits = if check.is_some() && groups == 1 { bytes.len() as u64 == len } else { group_matches(&hash, len, &values, index, &bytes) };
					if fits {
						file.write_all_at(&bytes, index * GROUP as u64).map_err(io)?;
						done[index as usize] = true;
						asked.remove(&index);
						remaining -= 1;
						None
					} else {
						Some(Failure::Bad(anyhow!("group {index} of artifact {} does not match its outline", hex(&hash))))
					}
				},
				Ok(ArtifactResponse::NotFound) => Some(Failure::Unavailable(anyhow!("the peer does not hold it"))),
				Ok(ArtifactResponse::Outline { .. }) => Some(Failure::Bad(anyhow!("the peer answered a group request with an outline"))),
				Err(error) => Some(Failure::Unavailable(error)),
			};
			if let Some(failure) = failure {
				match &failure {
					Failure::Bad(error) => self.ban(peer, error),
					Failure::Unavailable(error) => tracing::info!(%peer, "not asking this peer for artifact {} again in this transfer: {error:#}", hex(&hash)),
				}
				providers.retain(|provider| *provider != peer);
				if others_asked != Some(true) && !pending.contains(&index) {
					pending.push_front(index);
				}
			}
		}
		if limit.is_some_and(|limit| limit < groups) {
			return Ok(());
		}
		file.sync_all().map_err(io)?;
		drop(file);
		if let Some(check) = check {
			let bytes = std::fs::read(&partial).map_err(io)?;
			if let Err(error) = check(&bytes) {
				let _ = std::fs::remove_file(&partial);
				let error = anyhow!("corrupt artifact {} from peer {source}: {error:#}; discarded", hex(&hash));
				self.ban(source, &error);
				return Err(error);
			}
		}
		std::fs::rename(&partial, self.store.path(&hash)).map_err(io)?;
		self.store.save_outline(&hash, len, &values);
		Ok(())
	}

	/// Asks every candidate for the outline of `hash` at once and settles on one: for an
	/// artifact named by its content (`proven`), one whose tree gives `hash` (an artifact of
	/// one group has no tree: its group is checked against `hash` on arrival); otherwise the
	/// first answer's. Waits for every answer, or [`OUTLINE_GRACE`] past the first usable
	/// one. A peer whose outline is longer than `max_len`, malformed or, when `proven`, does
	/// not give `hash`, is banned.
	async fn outline(&self, hash: Digest, candidates: &[PeerId], proven: bool, max_len: u64) -> Result<Plan> {
		let mut asking: futures::stream::FuturesUnordered<_> = candidates
			.iter()
			.map(|&peer| {
				let network = self.clone();
				async move { (peer, network.request(peer, ArtifactRequest::Outline { hash }).await) }
			})
			.collect();
		let mut plan: Option<Plan> = None;
		let mut last_error = anyhow!("the peer does not hold it");
		let mut grace_ends = None;
		loop {
			let next = match grace_ends {
				Some(end) => match tokio::time::timeout_at(end, asking.next()).await {
					Ok(next) => next,
					Err(_) => break,
				},
				None => asking.next().await,
			};
			let Some((peer, answer)) = next else { break };
			let (len, values) = match answer {
				Ok(ArtifactResponse::Outline { len, values }) => (len, values),
				Ok(_) => continue,
				Err(error) => {
					last_error = error;
					continue;
				},
			};
			let groups = group_count(len);
			let fault = if len > max_len {
				Some(anyhow!("the peer declares artifact {} {len} bytes long, more than the {max_len} it can hold", hex(&hash)))
			} else if groups > MAX_GROUPS || values.len() as u64 != if groups > 1 { groups } else { 0 } {
				Some(anyhow!("the peer sent a malformed outline of artifact {}", hex(&hash)))
			} else if proven && groups > 1 && outline_root(&values) != Some(hash) {
				Some(anyhow!("the peer's outline of artifact {} does not give its hash", hex(&hash)))
			} else {
				None
			};
			if let Some(fault) = fault {
				self.ban(peer, &fault);
				last_error = fault;
				continue;
			}
			match &mut plan {
				None => {
					plan = Some(Plan { len, values, source: peer, providers: vec![peer] });
					grace_ends = Some(tokio::time::Instant::now() + OUTLINE_GRACE);
				},
				Some(plan) if plan.len == len && plan.values == values => plan.providers.push(peer),
				// Two one-group outlines of different lengths: the group that arrives says which was right.
				Some(_) => tracing::info!(%peer, "its outline of artifact {} differs from the first one's: not asked in this transfer", hex(&hash)),
			}
		}
		plan.ok_or(last_error)
	}
}

/// The outline a transfer follows, and the peers that gave it.
struct Plan {
	len: u64,
	values: Vec<Digest>,
	/// The first peer to give it: blamed if a `check`ed artifact built from it fails.
	source: PeerId,
	providers: Vec<PeerId>,
}

/// `address` ending in `peer`'s id, as peers dial it: unchanged when it ends in a peer id
/// already (an address through a relay, or one an operator gave whole).
fn ending_in_peer(address: Multiaddr, peer: PeerId) -> Multiaddr {
	match address.iter().last() {
		Some(libp2p::multiaddr::Protocol::P2p(_)) => address,
		_ => address.with(libp2p::multiaddr::Protocol::P2p(peer)),
	}
}

/// Whether peers anywhere on the internet could reach `address`: a DNS name, or an IP
/// address that is not loopback, private (RFC 1918, IPv6 unique local), shared (RFC 6598,
/// carrier-grade NAT), link-local or unspecified.
pub fn routable(address: &Multiaddr) -> bool {
	use libp2p::multiaddr::Protocol;
	address.iter().all(|part| match part {
		Protocol::Ip4(ip) => {
			let [a, b, ..] = ip.octets();
			let shared = a == 100 && (64..128).contains(&b);
			!(ip.is_loopback() || ip.is_private() || ip.is_link_local() || ip.is_unspecified() || shared)
		},
		Protocol::Ip6(ip) => {
			let first = ip.segments()[0];
			let unique_local = first & 0xfe00 == 0xfc00;
			let link_local = first & 0xffc0 == 0xfe80;
			!(ip.is_loopback() || ip.is_unspecified() || unique_local || link_local)
		},
		_ => true,
	})
}

/// The answer to `request` from `store`, read from disk (on a blocking thread).
fn serve(store: &Store, request: ArtifactRequest) -> ArtifactResponse {
	match request {
		ArtifactRequest::Outline { hash } => match store.outline(&hash) {
			Ok((len, values)) => ArtifactResponse::Outline { len, values },
			Err(_) => ArtifactResponse::NotFound,
		},
		ArtifactRequest::Group { hash, index } => {
			let read = || -> std::io::Result<Option<Vec<u8>>> {
				let file = std::fs::File::open(store.path(&hash))?;
				let len = file.metadata()?.len();
				if index >= group_count(len) {
					return Ok(None);
				}
				let mut bytes = vec![0u8; group_len(len, index) as usize];
				file.read_exact_at(&mut bytes, index * GROUP as u64)?;
				Ok(Some(bytes))
			};
			match read() {
				Ok(Some(bytes)) => ArtifactResponse::Group(bytes),
				_ => ArtifactResponse::NotFound,
			}
		},
	}
}

async fn event_loop(
	mut swarm: Swarm<Behaviour>,
	mut commands: mpsc::UnboundedReceiver<Command>,
	store: Store,
	events: Events,
) {
	let Events { serving_delay, relay_service, relayed, reachable } = events;
	let mut requests: HashMap<OutboundRequestId, oneshot::Sender<Result<ArtifactResponse>>> = HashMap::new();
	let mut provider_queries: HashMap<kad::QueryId, (oneshot::Sender<Vec<PeerId>>, HashSet<PeerId>)> = HashMap::new();
	// Answers read off the loop come back here to be sent.
	let (served_sender, mut served) = mpsc::channel::<(request_response::ResponseChannel<ArtifactResponse>, ArtifactResponse)>(SERVING_READS);
	let reads = Arc::new(tokio::sync::Semaphore::new(SERVING_READS));
	loop {
		tokio::select! {
			Some((channel, response)) = served.recv() => {
				let _ = swarm.behaviour_mut().artifacts.send_response(channel, response);
			},
			command = commands.recv() => match command {
				None => return,
				Some(Command::Provide(hash)) => {
					if let Err(error) = swarm.behaviour_mut().kademlia.start_providing(RecordKey::new(&hash)) {
						tracing::warn!("cannot announce artifact {}: {error:?}; peers connected to this node still fetch it", hex(&hash));
					}
				},
				Some(Command::Providers(hash, reply)) => {
					let id = swarm.behaviour_mut().kademlia.get_providers(RecordKey::new(&hash));
					provider_queries.insert(id, (reply, HashSet::new()));
				},
				Some(Command::Request(peer, request, reply)) => {
					let id = swarm.behaviour_mut().artifacts.send_request(&peer, request);
					requests.insert(id, reply);
				},
				Some(Command::Peers(reply)) => {
					let _ = reply.send(swarm.connected_peers().copied().collect());
				},
				Some(Command::External(reply)) => {
					let _ = reply.send(swarm.external_addresses().cloned().collect());
				},
				Some(Command::Listening(reply)) => {
					let _ = reply.send(swarm.listeners().cloned().collect());
				},
				Some(Command::Dial(address)) => {
					if let Err(error) = swarm.dial(address.clone()) {
						tracing::warn!(%address, "cannot dial: {error}");
					}
				},
				Some(Command::Join(addresses)) => {
					let local = *swarm.local_peer_id();
					for address in addresses {
						let Some(libp2p::multiaddr::Protocol::P2p(peer)) = address.iter().last() else { continue };
						if peer == local {
							continue;
						}
						swarm.behaviour_mut().kademlia.add_address(&peer, address.clone());
						let dial = DialOpts::peer_id(peer).addresses(vec![address]).condition(PeerCondition::DisconnectedAndNotDialing).build();
						let _ = swarm.dial(dial);
					}
					// No known peer is the only error, and then there is nothing to do.
					let _ = swarm.behaviour_mut().kademlia.bootstrap();
				},
			},
			event = swarm.select_next_some() => match event {
				SwarmEvent::Behaviour(BehaviourEvent::Artifacts(request_response::Event::Message { message, .. })) => match message {
					request_response::Message::Request { request, channel, .. } => {
						let (store, served, reads) = (store.clone(), served_sender.clone(), reads.clone());
						let delay = Duration::from_millis(serving_delay.load(Ordering::Relaxed));
						tokio::spawn(async move {
							let Ok(_read) = reads.acquire_owned().await else { return };
							if let Ok(response) = tokio::task::spawn_blocking(move || serve(&store, request)).await {
								if !delay.is_zero() {
									tokio::time::sleep(delay).await;
								}
								let _ = served.send((channel, response)).await;
							}
						});
					},
					request_response::Message::Response { request_id, response } => {
						if let Some(reply) = requests.remove(&request_id) {
							let _ = reply.send(Ok(response));
						}
					},
				},
				SwarmEvent::Behaviour(BehaviourEvent::Artifacts(request_response::Event::OutboundFailure { request_id, error, .. })) => {
					if let Some(reply) = requests.remove(&request_id) {
						let _ = reply.send(Err(anyhow!("request failed: {error}")));
					}
				},
				SwarmEvent::Behaviour(BehaviourEvent::Kademlia(kad::Event::OutboundQueryProgressed { id, result, step, .. })) => {
					if let QueryResult::GetProviders(result) = result {
						if let Some((_, found)) = provider_queries.get_mut(&id) {
							if let Ok(GetProvidersOk::FoundProviders { providers, .. }) = result {
								found.extend(providers);
							}
						}
						if step.last {
							if let Some((reply, found)) = provider_queries.remove(&id) {
								let _ = reply.send(found.into_iter().collect());
							}
						}
					}
				},
				SwarmEvent::Behaviour(BehaviourEvent::Identify(identify::Event::Received { peer_id, info, .. })) => {
					for address in info.listen_addrs {
						swarm.behaviour_mut().kademlia.add_address(&peer_id, address);
					}
				},
				SwarmEvent::Behaviour(BehaviourEvent::Mdns(mdns::Event::Discovered(found))) => {
					for (peer_id, address) in found {
						swarm.behaviour_mut().kademlia.add_address(&peer_id, address.clone());
						let _ = swarm.dial(address);
					}
				},
				SwarmEvent::OutgoingConnectionError { peer_id, error, .. } => {
					tracing::debug!(peer = ?peer_id, "cannot connect: {error}");
				},
				SwarmEvent::NewListenAddr { address, .. } => {
					tracing::info!(%address, "artifact network listening");
					// A relay hands its addresses to the peers that reserve a slot at it, and
					// they refuse a reservation without one.
					if relay_service && !address.iter().any(|part| part == libp2p::multiaddr::Protocol::P2pCircuit) {
						swarm.add_external_address(address);
					}
				},
				SwarmEvent::Behaviour(BehaviourEvent::RelayClient(relay::client::Event::ReservationReqAccepted { relay_peer_id, renewal, .. })) => {
					if !renewal {
						tracing::info!(relay = %relay_peer_id, "the relay accepted a reservation: peers reach this node through it");
					}
				},
				SwarmEvent::Behaviour(BehaviourEvent::RelayClient(relay::client::Event::InboundCircuitEstablished { src_peer_id, .. })) => {
					tracing::info!(peer = %src_peer_id, "a peer connected through the relay");
				},
				SwarmEvent::Behaviour(BehaviourEvent::Dcutr(dcutr::Event { remote_peer_id, result })) => match result {
					Ok(_) => tracing::info!(peer = %remote_peer_id, "hole punched: a direct connection replaces the relayed one"),
					Err(error) => tracing::info!(peer = %remote_peer_id, "no direct connection through the NATs ({error}): the relay carries the traffic"),
				},
				SwarmEvent::Behaviour(BehaviourEvent::Upnp(event)) => match event {
					upnp::Event::NewExternalAddr(address) => tracing::info!(%address, "the router forwards a port to this node (UPnP)"),
					upnp::Event::ExpiredExternalAddr(address) => tracing::warn!(%address, "the router's port forward expired (UPnP)"),
					upnp::Event::GatewayNotFound => tracing::warn!("--p2p-upnp: no router on the local network offers UPnP port forwarding"),
					upnp::Event::NonRoutableGateway => tracing::warn!("--p2p-upnp: the router is itself behind NAT: its forwarded port is not public"),
				},
				SwarmEvent::Behaviour(BehaviourEvent::Relay(relay::Event::CircuitReqAccepted { src_peer_id, dst_peer_id })) => {
					tracing::info!(from = %src_peer_id, to = %dst_peer_id, "relaying a circuit");
				},
				SwarmEvent::Behaviour(BehaviourEvent::Autonat(autonat::Event::StatusChanged { new, .. })) => {
					let found = Reachability::from(new);
					crate::metrics::get().reachability.set(match found {
						Reachability::Unknown => 0,
						Reachability::Private => 1,
						Reachability::Public(_) => 2,
					});
					match (&found, relayed) {
						(Reachability::Public(address), _) => tracing::info!(%address, "peers can dial this node (AutoNAT)"),
						(Reachability::Private, true) => tracing::info!("peers cannot dial this node directly (AutoNAT): they reach it through its relay"),
						(Reachability::Private, false) => tracing::warn!(
							"peers cannot dial this node (AutoNAT: it is behind NAT or a firewall), so verifiers and challengers cannot fetch what it serves: forward port 30555 (TCP and UDP) to it, pass --p2p-upnp, or serve through a relay with --p2p-relay"
						),
						(Reachability::Unknown, _) => tracing::info!("no peer answers AutoNAT's probes any more: reachability unknown"),
					}
					let _ = reachable.send(found);
				},
				_ => {},
			},
		}
	}
}

#[cfg(test)]
mod tests {
	use super::routable;

	/// Only addresses peers on the internet can reach are advertised on a live chain.
	#[test]
	fn loopback_private_shared_and_link_local_addresses_are_not_routable() {
		let routable = |text: &str| routable(&text.parse().unwrap());
		for address in [
			"/ip4/127.0.0.1/tcp/30555",
			"/ip4/10.1.2.3/tcp/30555",
			"/ip4/172.16.0.9/tcp/30555",
			"/ip4/192.168.1.20/tcp/30555",
			"/ip4/100.64.0.1/tcp/30555",
			"/ip4/169.254.3.4/tcp/30555",
			"/ip4/0.0.0.0/tcp/30555",
			"/ip6/::1/tcp/30555",
			"/ip6/fd00::1/tcp/30555",
			"/ip6/fe80::1/tcp/30555",
		] {
			assert!(!routable(address), "{address}");
		}
		for address in [
			"/ip4/203.0.113.7/tcp/30555",
			"/ip4/100.128.0.1/tcp/30555",
			"/ip4/172.32.0.1/tcp/30555",
			"/ip6/2001:db8::7/tcp/30555",
			"/dns4/solver.example.org/tcp/30555",
		] {
			assert!(routable(address), "{address}");
		}
	}
}

//! Artifacts between workers over libp2p: datasets, checkpoints and models, fetched by
//! their content hash.
//!
//! - **Transport**: TCP with Noise and Yamux (the libp2p the node's networking compiles).
//! - **Discovery**: peers given with `--peer`, peers found by mDNS on the LAN, and
//!   Kademlia: every worker announces itself as a provider of the artifacts others look
//!   up (datasets, initial weights, trace manifests, final models; not checkpoints, which
//!   those who need them ask the solver for directly), and a fetch asks the DHT who
//!   provides the hash, and every connected peer.
//! - **Exchange**: request-response on `/touchstone/artifact/1`; a request names a hash and
//!   an offset, a response carries the artifact's length and up to one chunk (1 MiB).
//!   Chunks are appended to a partial file in the store, so a transfer cut by a dropped
//!   connection or a restart resumes where it stopped.
//! - **Integrity**: nothing received is used before the whole artifact hashes to the name
//!   it was asked for (a unit's trace manifest, named by its trace root, must rebuild
//!   it); a mismatch discards the partial file and is an error naming the peer that sent
//!   it.
//! - **Bad peers**: a peer that sent an artifact that fails its check, a malformed chunk,
//!   a length that changes within a transfer, or one longer than the artifact can be (the
//!   caller's bound, from what the chain commits) is banned for [`BAN`]: no fetch asks it
//!   again meanwhile. Bytes a transfer resumed from are not blamed on the peer that
//!   finished it: the whole artifact is fetched once more from that peer alone, and only a
//!   second failure bans it.
//! - **Serving** reads chunks from disk on blocking threads, at most [`SERVING_READS`] at a
//!   time, never on the event loop, which goes on answering other peers meanwhile.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use codec::{Decode, Encode};
use futures::prelude::*;
use libp2p::identity::Keypair;
use libp2p::kad::{self, store::MemoryStore, store::MemoryStoreConfig, GetProvidersOk, QueryResult, RecordKey};
use libp2p::request_response::{self, OutboundRequestId, ProtocolSupport};
use libp2p::swarm::{behaviour::toggle::Toggle, NetworkBehaviour, SwarmEvent};
use libp2p::{identify, mdns, noise, tcp, yamux, Multiaddr, PeerId, StreamProtocol, Swarm};
use tokio::sync::{mpsc, oneshot};
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::hash::Digest;
use touchstone_primitives::JobId;

use crate::store::{hashes_to, Check, Kind, Store};

/// The exchange protocol.
const PROTOCOL: StreamProtocol = StreamProtocol::new("/touchstone/artifact/1");
/// Bytes per chunk.
pub const CHUNK: usize = 1 << 20;
/// The largest message the codec reads: a chunk and its framing.
const MAX_MESSAGE: usize = CHUNK + 1024;
/// How long one chunk request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a peer that sent bad bytes is not asked again.
pub const BAN: Duration = Duration::from_secs(3600);
/// Where a worker accepts peers unless `--p2p-listen` says otherwise: every interface, on
/// a port that stays the same across restarts.
pub const DEFAULT_LISTEN: &str = "/ip4/0.0.0.0/tcp/30555";
/// How many chunk reads from disk a node serves at once: each holds a chunk in memory.
pub const SERVING_READS: usize = 8;
/// How many keys the DHT's memory store holds provider records for, this node's and
/// others' (libp2p's default is 1,024, which a solver that announces every checkpoint
/// passes within a few jobs, after which announcements fail). A record is about a hundred
/// bytes, so this is a few megabytes at most.
const PROVIDER_KEYS: usize = 65_536;

/// A request for part of an artifact.
#[derive(Clone, Debug, Encode, Decode)]
pub struct ChunkRequest {
	/// The artifact.
	pub hash: Digest,
	/// The first byte wanted.
	pub offset: u64,
}

/// The answer to a [`ChunkRequest`].
#[derive(Clone, Debug, Encode, Decode)]
pub enum ChunkResponse {
	/// Up to [`CHUNK`] bytes from the offset asked for, and the artifact's whole length.
	Chunk {
		/// The artifact's length in bytes.
		total: u64,
		/// The bytes.
		data: Vec<u8>,
	},
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
	type Request = ChunkRequest;
	type Response = ChunkResponse;

	async fn read_request<T: AsyncRead + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T) -> std::io::Result<ChunkRequest> {
		read_message(io).await
	}
	async fn read_response<T: AsyncRead + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T) -> std::io::Result<ChunkResponse> {
		read_message(io).await
	}
	async fn write_request<T: AsyncWrite + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T, request: ChunkRequest) -> std::io::Result<()> {
		write_message(io, request).await
	}
	async fn write_response<T: AsyncWrite + Unpin + Send>(&mut self, _: &StreamProtocol, io: &mut T, response: ChunkResponse) -> std::io::Result<()> {
		write_message(io, response).await
	}
}

#[derive(NetworkBehaviour)]
struct Behaviour {
	artifacts: request_response::Behaviour<ArtifactCodec>,
	kademlia: kad::Behaviour<MemoryStore>,
	identify: identify::Behaviour,
	mdns: Toggle<mdns::tokio::Behaviour>,
}

/// How a worker joins the network.
#[derive(Clone, Debug, clap::Args)]
pub struct NetworkArgs {
	/// The address to accept peers on [default: every interface, port 30555, the same
	/// across restarts, so the endpoint advertised on-chain and a router's port forward
	/// stay right; a random port if another process holds it, with a warning].
	#[arg(long)]
	pub p2p_listen: Option<Multiaddr>,
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
	Request(PeerId, ChunkRequest, oneshot::Sender<Result<ChunkResponse>>),
	Peers(oneshot::Sender<Vec<PeerId>>),
	Listening(oneshot::Sender<Vec<Multiaddr>>),
	Dial(Multiaddr),
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
		let mut swarm = libp2p::SwarmBuilder::with_existing_identity(keypair)
			.with_tokio()
			.with_tcp(tcp::Config::default(), noise::Config::new, yamux::Config::default)
			.map_err(|error| anyhow!("cannot set up the network transport: {error}"))?
			.with_behaviour(|key| {
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
				let stable: Multiaddr = DEFAULT_LISTEN.parse().context("the default listening address")?;
				if let Err(error) = swarm.listen_on(stable) {
					// A second worker on the host (a submitter beside a solver) takes any port.
					tracing::warn!("cannot listen on {DEFAULT_LISTEN} ({error}): listening on a random port; pass --p2p-listen to choose one");
					let random: Multiaddr = "/ip4/0.0.0.0/tcp/0".parse().context("the fallback listening address")?;
					swarm.listen_on(random).context("cannot listen on any port")?;
				}
			},
		}
		for peer in &args.peers {
			swarm.dial(peer.clone()).with_context(|| format!("cannot dial {peer}"))?;
		}
		let (commands, receiver) = mpsc::unbounded_channel();
		tokio::spawn(event_loop(swarm, receiver, store.clone()));
		let network = Self { commands, peer_id, store, banned: Arc::default(), kept: Arc::default() };
		for hash in network.store.announced() {
			network.provide(hash);
		}
		Ok(network)
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
				return Ok(addresses.into_iter().map(|address| address.with(libp2p::multiaddr::Protocol::P2p(self.peer_id))).collect());
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

	/// The address to advertise on-chain: `--p2p-external` with this node's peer id, or
	/// else the first listening address that others could reach (not unspecified). On a
	/// public chain (`public`) only a publicly routable address will do ([`routable`]):
	/// `--p2p-external` with a loopback or private one is an error, and without it none of
	/// the listening addresses may qualify (then `None`).
	pub async fn advertised(&self, external: Option<&Multiaddr>, public: bool) -> Result<Option<Multiaddr>> {
		use libp2p::multiaddr::Protocol;
		if let Some(external) = external {
			if public && !routable(external) {
				bail!(
					"--p2p-external {external} is a loopback, private or link-local address, which peers on a public chain cannot reach: give the host's public address or DNS name"
				);
			}
			let address = match external.iter().last() {
				Some(Protocol::P2p(_)) => external.clone(),
				_ => external.clone().with(Protocol::P2p(self.peer_id)),
			};
			return Ok(Some(address));
		}
		let reachable = |address: &Multiaddr| {
			!address.iter().any(|part| match part {
				Protocol::Ip4(ip) => ip.is_unspecified(),
				Protocol::Ip6(ip) => ip.is_unspecified(),
				_ => false,
			}) && (!public || routable(address))
		};
		Ok(self.listening().await?.into_iter().find(reachable))
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

	async fn request(&self, peer: PeerId, request: ChunkRequest) -> Result<ChunkResponse> {
		let (reply, answer) = oneshot::channel();
		self.send(Command::Request(peer, request, reply))?;
		answer.await.map_err(|_| anyhow!("the network node stopped"))?
	}

	/// The artifact `hash`: from the local store, or else fetched from a peer that
	/// provides it, checked, and stored. Waits up to `patience` for a provider to appear.
	/// `max_len` is the most bytes the artifact can hold, known from what the chain
	/// commits (the job's dataset and model shapes): a peer that declares more is banned,
	/// and the disk never holds more than that of it.
	pub async fn fetch(&self, hash: Digest, patience: Duration, max_len: u64) -> Result<Vec<u8>> {
		self.fetch_with(hash, patience, &hashes_to(hash), max_len).await
	}

	/// As [`Network::fetch`], for an artifact named by something other than its hash (a
	/// unit's trace manifest, by its trace root): `check` decides whether bytes are it.
	pub async fn fetch_with(&self, hash: Digest, patience: Duration, check: &Check<'_>, max_len: u64) -> Result<Vec<u8>> {
		if self.store.contains(&hash) {
			return self.store.get_with(&hash, check);
		}
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
			for peer in candidates {
				match self.fetch_checked(peer, hash, check, max_len).await {
					Ok(bytes) => return Ok(bytes),
					Err(Failure::Bad(error)) => {
						self.ban(peer, &error);
						last_error = Some(error);
					},
					Err(Failure::Unavailable(error)) => {
						crate::metrics::get().fetch_failures.inc();
						tracing::warn!(%peer, "fetching {} failed: {error:#}", hex(&hash));
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

	/// Fetches at most `chunks` chunks of `hash` from the first connected peer and stops,
	/// leaving the partial file a later fetch resumes from: what a worker stopped in the
	/// middle of a transfer leaves behind. Returns the bytes held so far.
	pub async fn fetch_partially(&self, hash: Digest, chunks: usize) -> Result<u64> {
		let peer = *self.peers().await.first().context("no peer connected")?;
		self.fetch_from(peer, hash, u64::MAX, Some(chunks)).await.map_err(|(Failure::Bad(error) | Failure::Unavailable(error))| error)?;
		Ok(std::fs::metadata(self.store.partial_path(&hash)).map(|meta| meta.len()).unwrap_or(0))
	}

	/// Fetches `hash` from `peer` ([`Self::fetch_from`]) and stores it once `check`
	/// accepts it. Bytes that fail the check are the peer's fault only if it sent them all:
	/// a transfer that resumed from a partial file (another peer's bytes, or a crash's) is
	/// fetched once more from the start before the peer is blamed.
	async fn fetch_checked(&self, peer: PeerId, hash: Digest, check: &Check<'_>, max_len: u64) -> Result<Vec<u8>, Failure> {
		let partial = self.store.partial_path(&hash);
		for attempt in 0..2 {
			let resumed = std::fs::metadata(&partial).map(|meta| meta.len() > 0).unwrap_or(false);
			self.fetch_from(peer, hash, max_len, None).await?;
			let bytes = std::fs::read(&partial).map_err(|error| Failure::Unavailable(error.into()))?;
			let _ = std::fs::remove_file(&partial);
			match check(&bytes) {
				Ok(()) => {
					self.store.put_as(&hash, &bytes).map_err(Failure::Unavailable)?;
					return Ok(bytes);
				},
				Err(error) if resumed && attempt == 0 => {
					tracing::info!(%peer, "artifact {} resumed from a partial file fails its check ({error:#}): fetching it whole from this peer", hex(&hash));
				},
				Err(error) => {
					return Err(Failure::Bad(anyhow!("corrupt artifact {} from peer {peer}: {error:#}; discarded", hex(&hash))));
				},
			}
		}
		Err(Failure::Unavailable(anyhow!("artifact {} failed its check twice", hex(&hash))))
	}

	/// Fetches `hash` from `peer` chunk by chunk into its partial file, resuming from what
	/// the file holds. The peer's first answer fixes the artifact's length, which must not
	/// pass `max_len`: a longer one, a later answer that names another, or a chunk that
	/// does not fit it, is bad bytes. With `limit`, stops after that many chunks.
	async fn fetch_from(&self, peer: PeerId, hash: Digest, max_len: u64, limit: Option<usize>) -> Result<(), Failure> {
		let io = |error: std::io::Error| Failure::Unavailable(error.into());
		let partial = self.store.partial_path(&hash);
		// Created once the peer answers with the artifact: one that does not hold it
		// leaves nothing behind.
		let open = || std::fs::OpenOptions::new().create(true).append(true).open(&partial).map_err(io);
		let mut file = None;
		let mut offset = std::fs::metadata(&partial).map_or(0, |meta| meta.len());
		let mut declared = None;
		let mut fetched = 0usize;
		loop {
			if limit.is_some_and(|limit| fetched >= limit) {
				return Ok(());
			}
			fetched += 1;
			let response = self.request(peer, ChunkRequest { hash, offset }).await.map_err(Failure::Unavailable)?;
			let (total, data) = match response {
				ChunkResponse::NotFound => return Err(Failure::Unavailable(anyhow!("the peer does not hold it"))),
				ChunkResponse::Chunk { total, data } => (total, data),
			};
			if total > max_len {
				return Err(Failure::Bad(anyhow!(
					"the peer declares artifact {} {total} bytes long, more than the {max_len} it can hold",
					hex(&hash)
				)));
			}
			if *declared.get_or_insert(total) != total {
				return Err(Failure::Bad(anyhow!("the peer changed the length of artifact {} within a transfer", hex(&hash))));
			}
			let end = offset.saturating_add(data.len() as u64);
			if end > total || (data.is_empty() && offset < total) {
				// A partial file longer than the artifact is not this peer's doing.
				if offset > total && data.is_empty() {
					let _ = std::fs::remove_file(&partial);
					return Err(Failure::Unavailable(anyhow!("the partial file was longer than the artifact: discarded")));
				}
				return Err(Failure::Bad(anyhow!("the peer sent a malformed chunk of artifact {}", hex(&hash))));
			}
			let file = match &mut file {
				Some(file) => file,
				None => file.insert(open()?),
			};
			file.write_all(&data).map_err(io)?;
			offset = end;
			if offset == total {
				return file.flush().map_err(io);
			}
		}
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

/// Reads the chunk at `offset` of the artifact at `path`.
fn read_chunk(path: &Path, offset: u64) -> ChunkResponse {
	let read = || -> std::io::Result<ChunkResponse> {
		let mut file = std::fs::File::open(path)?;
		let total = file.metadata()?.len();
		file.seek(SeekFrom::Start(offset.min(total)))?;
		let mut data = Vec::with_capacity(CHUNK);
		file.take(CHUNK as u64).read_to_end(&mut data)?;
		Ok(ChunkResponse::Chunk { total, data })
	};
	read().unwrap_or(ChunkResponse::NotFound)
}

async fn event_loop(mut swarm: Swarm<Behaviour>, mut commands: mpsc::UnboundedReceiver<Command>, store: Store) {
	let mut requests: HashMap<OutboundRequestId, oneshot::Sender<Result<ChunkResponse>>> = HashMap::new();
	let mut provider_queries: HashMap<kad::QueryId, (oneshot::Sender<Vec<PeerId>>, HashSet<PeerId>)> = HashMap::new();
	// Chunks read off the loop come back here to be sent.
	let (served_sender, mut served) = mpsc::channel::<(request_response::ResponseChannel<ChunkResponse>, ChunkResponse)>(SERVING_READS);
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
				Some(Command::Listening(reply)) => {
					let _ = reply.send(swarm.listeners().cloned().collect());
				},
				Some(Command::Dial(address)) => {
					if let Err(error) = swarm.dial(address.clone()) {
						tracing::warn!(%address, "cannot dial: {error}");
					}
				},
			},
			event = swarm.select_next_some() => match event {
				SwarmEvent::Behaviour(BehaviourEvent::Artifacts(request_response::Event::Message { message, .. })) => match message {
					request_response::Message::Request { request, channel, .. } => {
						let (path, served, reads) = (store.path(&request.hash), served_sender.clone(), reads.clone());
						tokio::spawn(async move {
							let Ok(_read) = reads.acquire_owned().await else { return };
							if let Ok(response) = tokio::task::spawn_blocking(move || read_chunk(&path, request.offset)).await {
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
				SwarmEvent::NewListenAddr { address, .. } => tracing::info!(%address, "artifact network listening"),
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

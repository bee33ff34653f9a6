//! Workers exchange artifacts over libp2p on loopback: the fetcher is restarted in the
//! middle of a transfer and resumes where it stopped; a partial file of bytes no peer sent
//! costs a re-fetch of its groups and is not blamed on anyone; a peer that serves bytes that do
//! not match their name is refused and banned, and the artifact comes from an honest peer;
//! a unit's trace manifest crosses under its trace root, and one that does not rebuild the
//! root is refused; a hash nobody holds is a clear error, not a hang; a peer that declares
//! an artifact longer than the fetcher's bound is refused before a byte is written, and
//! banned. Against peers that speak the protocol and lie: a peer that serves a wrong group,
//! one that declares a huge artifact and one that stalls, beside an honest one, the
//! download finishes from the honest one, the liars are banned, the staller is not, and the
//! disk holds the artifact and its outline only.

use std::time::Duration;

use futures::StreamExt;
use libp2p::request_response::{self, ProtocolSupport};
use libp2p::swarm::SwarmEvent;
use libp2p::{noise, tcp, yamux, Multiaddr, PeerId};
use touchstone_kernels::proof::content::outline;
use touchstone_worker::p2p::{ArtifactCodec, ArtifactRequest, ArtifactResponse, PROTOCOL};

use touchstone_kernels::proof::content::content_hash;
use codec::Encode;
use touchstone_worker::p2p::{Network, NetworkArgs, GROUP};
use touchstone_worker::samples::TraceManifest;
use touchstone_worker::store::Store;

fn args(peers: Vec<libp2p::Multiaddr>) -> NetworkArgs {
	NetworkArgs { p2p_listen: Some("/ip4/127.0.0.1/tcp/0".parse().unwrap()), peers, no_mdns: true, ..NetworkArgs::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_crosses_resumes_after_a_restart_and_corruption_is_refused() {
	let base = std::env::temp_dir().join(format!("touchstone-p2p-{}", std::process::id()));
	let _ = std::fs::remove_dir_all(&base);
	let (dir_a, dir_b) = (base.join("a"), base.join("b"));

	// Three and a half groups of bytes nobody would compress away.
	let artifact: Vec<u8> = (0..(7 * GROUP / 2) as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
	let store_a = Store::open(&dir_a).unwrap();
	let hash = store_a.put(&artifact).unwrap();
	let a = Network::start(&args(vec![]), store_a.clone(), &dir_a).await.unwrap();
	let address = a.listening().await.unwrap().remove(0);

	// The fetcher takes one group, then stops as a crash would stop it.
	let store_b = Store::open(&dir_b).unwrap();
	{
		let b = Network::start(&args(vec![address.clone()]), store_b.clone(), &dir_b).await.unwrap();
		let mut held = Err(anyhow::anyhow!("never connected"));
		for _ in 0..100 {
			held = b.fetch_partially(hash, 1).await;
			if held.is_ok() {
				break;
			}
			tokio::time::sleep(Duration::from_millis(50)).await;
		}
		assert_eq!(held.unwrap(), GROUP as u64);
	}
	assert!(!store_b.contains(&hash));

	// Restarted with the same store and identity, it resumes from the partial file.
	let b = Network::start(&args(vec![address.clone()]), store_b.clone(), &dir_b).await.unwrap();
	let fetched = b.fetch(hash, Duration::from_secs(20), u64::MAX).await.unwrap();
	assert_eq!(content_hash(&fetched), hash);
	assert_eq!(fetched, artifact);
	assert_eq!(store_b.get(&hash).unwrap(), artifact);
	assert!(!store_b.partial_path(&hash).exists());

	// A partial file of bytes nobody sent (a torn write): its group does not verify, is
	// fetched again from A, and nobody is blamed.
	let reversed: Vec<u8> = artifact.iter().rev().copied().collect();
	let reversed_hash = store_a.put(&reversed).unwrap();
	a.provide(reversed_hash);
	std::fs::write(store_b.partial_path(&reversed_hash), vec![0u8; GROUP]).unwrap();
	assert_eq!(b.fetch(reversed_hash, Duration::from_secs(20), u64::MAX).await.unwrap(), reversed);
	assert!(!b.is_banned(&a.peer_id()));

	// C holds bytes under a name they do not hash to: B refuses them, keeps nothing and
	// bans C. The artifact then comes from A, and C is not asked again, even for an
	// artifact it holds.
	let dir_c = base.join("c");
	let store_c = Store::open(&dir_c).unwrap();
	let forged = content_hash(b"the real model");
	std::fs::write(store_c.path(&forged), b"a different model").unwrap();
	let c = Network::start(&args(vec![]), store_c.clone(), &dir_c).await.unwrap();
	b.dial(c.listening().await.unwrap().remove(0));
	for _ in 0..100 {
		if b.peers().await.contains(&c.peer_id()) {
			break;
		}
		tokio::time::sleep(Duration::from_millis(50)).await;
	}
	assert!(b.fetch(forged, Duration::from_secs(3), u64::MAX).await.is_err());
	assert!(b.is_banned(&c.peer_id()), "the peer that sent a corrupt artifact is banned");
	assert!(!b.is_banned(&a.peer_id()), "the peer that did not hold it is not");
	assert!(!store_b.contains(&forged));
	assert!(!store_b.partial_path(&forged).exists());
	assert_eq!(store_a.put(b"the real model").unwrap(), forged);
	a.provide(forged);
	assert_eq!(b.fetch(forged, Duration::from_secs(20), u64::MAX).await.unwrap(), b"the real model");
	let only_c = store_c.put(b"only C holds this").unwrap();
	c.provide(only_c);
	let error = b.fetch(only_c, Duration::from_secs(2), u64::MAX).await.unwrap_err().to_string();
	assert!(error.contains("does not hold it") || error.contains("no peer offers it"), "{error}");

	// A trace manifest is named by the root its boundaries build, not by its bytes' hash.
	let manifest =
		TraceManifest { boundaries: vec![(2, [1; 32], [2; 32]), (3, [3; 32], [5; 32])], checkpoints: vec![(2, [4; 32])] };
	let root = manifest.trace_root().unwrap();
	store_a.put_as(&root, &manifest.encode()).unwrap();
	a.provide(root);
	let check = |bytes: &[u8]| TraceManifest::checked(bytes, &root).map(|_| ());
	let fetched = b.fetch_with(root, Duration::from_secs(20), &check, u64::MAX).await.unwrap();
	assert_eq!(TraceManifest::checked(&fetched, &root).unwrap(), manifest);
	assert!(store_b.get_with(&root, &check).is_ok());
	// One whose boundaries build another root is refused under that root.
	let other = TraceManifest { boundaries: vec![(1, [9; 32], [9; 32])], checkpoints: vec![] };
	let claimed = content_hash(b"a trace root");
	store_a.put_as(&claimed, &other.encode()).unwrap();
	a.provide(claimed);
	let check = |bytes: &[u8]| TraceManifest::checked(bytes, &claimed).map(|_| ());
	let error = b.fetch_with(claimed, Duration::from_secs(5), &check, u64::MAX).await.unwrap_err().to_string();
	assert!(error.contains("corrupt artifact") && error.contains("build the segment root"), "{error}");
	assert!(!store_b.contains(&claimed));
	assert!(b.is_banned(&a.peer_id()));

	// Nobody holds this one: a clear error once the patience runs out.
	let absent = content_hash(b"nobody has this");
	let error = b.fetch(absent, Duration::from_secs(2), u64::MAX).await.unwrap_err().to_string();
	assert!(error.contains("does not hold it") || error.contains("no peer offers it"), "{error}");

	// D declares an artifact longer than the fetcher's bound (what the chain's commitments
	// allow it): refused before a byte is written, and D is banned.
	let dir_d = base.join("d");
	let store_d = Store::open(&dir_d).unwrap();
	let long = store_d.put(&artifact[..2 * GROUP]).unwrap();
	let d = Network::start(&args(vec![]), store_d, &dir_d).await.unwrap();
	b.dial(d.listening().await.unwrap().remove(0));
	for _ in 0..100 {
		if b.peers().await.contains(&d.peer_id()) {
			break;
		}
		tokio::time::sleep(Duration::from_millis(50)).await;
	}
	let error = b.fetch(long, Duration::from_secs(2), GROUP as u64).await.unwrap_err().to_string();
	assert!(error.contains("more than the"), "{error}");
	assert!(b.is_banned(&d.peer_id()));
	assert!(!store_b.partial_path(&long).exists());

	drop((a, b, c, d));
	let _ = std::fs::remove_dir_all(&base);
}

/// How a lying peer answers.
#[derive(Clone, Copy)]
enum Lie {
	/// Every group with one byte flipped, under the true outline.
	WrongGroup,
	/// An outline of a terabyte.
	HugeSize,
	/// The true outline, and never a group.
	Stall,
}

/// A peer that speaks the artifact protocol and answers for `artifact` as `lie` says,
/// on loopback. Returns its address.
async fn liar(lie: Lie, artifact: Vec<u8>) -> Multiaddr {
	let mut swarm = libp2p::SwarmBuilder::with_new_identity()
		.with_tokio()
		.with_tcp(tcp::Config::default(), noise::Config::new, yamux::Config::default)
		.unwrap()
		.with_behaviour(|_| {
			request_response::Behaviour::<ArtifactCodec>::new([(PROTOCOL, ProtocolSupport::Full)], request_response::Config::default())
		})
		.unwrap()
		.with_swarm_config(|config| config.with_idle_connection_timeout(Duration::from_secs(120)))
		.build();
	swarm.listen_on("/ip4/127.0.0.1/tcp/0".parse().unwrap()).unwrap();
	let address = loop {
		if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
			break address;
		}
	};
	let peer: PeerId = *swarm.local_peer_id();
	tokio::spawn(async move {
		let values = outline(&artifact);
		// A staller holds its answers' channels, so the requests neither succeed nor fail.
		let mut held = Vec::new();
		loop {
			let SwarmEvent::Behaviour(request_response::Event::Message { message: request_response::Message::Request { request, channel, .. }, .. }) =
				swarm.select_next_some().await
			else {
				continue;
			};
			let answer = match (lie, request) {
				(Lie::HugeSize, _) => Some(ArtifactResponse::Outline { len: 1 << 40, values: vec![[0; 32]; 1 << 10] }),
				(_, ArtifactRequest::Outline { .. }) => Some(ArtifactResponse::Outline { len: artifact.len() as u64, values: values.clone() }),
				(Lie::WrongGroup, ArtifactRequest::Group { index, .. }) => {
					let start = index as usize * GROUP;
					let mut group = artifact[start..(start + GROUP).min(artifact.len())].to_vec();
					group[0] ^= 0xff;
					Some(ArtifactResponse::Group(group))
				},
				(Lie::Stall, ArtifactRequest::Group { .. }) => None,
			};
			match answer {
				Some(answer) => {
					let _ = swarm.behaviour_mut().send_response(channel, answer);
				},
				None => held.push(channel),
			}
		}
	});
	address.with(libp2p::multiaddr::Protocol::P2p(peer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_finishes_from_honest_peers_past_a_wrong_group_a_huge_size_and_a_stall() {
	let base = std::env::temp_dir().join(format!("touchstone-p2p-liars-{}", std::process::id()));
	let _ = std::fs::remove_dir_all(&base);
	let artifact: Vec<u8> = (0..(13 * GROUP / 2) as u32).map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8).collect();

	let dir_honest = base.join("honest");
	let store_honest = Store::open(&dir_honest).unwrap();
	let hash = store_honest.put(&artifact).unwrap();
	let honest = Network::start(&args(vec![]), store_honest, &dir_honest).await.unwrap();
	let mut peers = vec![honest.listening().await.unwrap().remove(0)];
	for lie in [Lie::WrongGroup, Lie::HugeSize, Lie::Stall] {
		peers.push(liar(lie, artifact.clone()).await);
	}
	let peer_id = |address: &Multiaddr| match address.iter().last() {
		Some(libp2p::multiaddr::Protocol::P2p(peer)) => peer,
		_ => unreachable!(),
	};
	let (wrong, huge, stall) = (peer_id(&peers[1]), peer_id(&peers[2]), peer_id(&peers[3]));

	let dir = base.join("fetcher");
	let store = Store::open(&dir).unwrap();
	let fetcher = Network::start(&args(peers.clone()), store.clone(), &dir).await.unwrap();
	for _ in 0..200 {
		if fetcher.peers().await.len() == peers.len() {
			break;
		}
		tokio::time::sleep(Duration::from_millis(50)).await;
	}
	assert_eq!(fetcher.peers().await.len(), peers.len(), "the fetcher reaches all four peers");

	// The bound is what the chain's commitments would allow: 8 MiB.
	let fetched = fetcher.fetch(hash, Duration::from_secs(60), 8 * GROUP as u64).await.unwrap();
	assert_eq!(fetched, artifact);
	assert!(fetcher.is_banned(&wrong), "the peer that sent a wrong group is banned");
	assert!(fetcher.is_banned(&huge), "the peer that declared a terabyte is banned");
	assert!(!fetcher.is_banned(&stall), "a slow peer is not banned");
	assert!(!fetcher.is_banned(&honest.peer_id()));

	// The disk holds the artifact and its outline, nothing more: no partial file, nothing of
	// the terabyte.
	let mut held: Vec<(String, u64)> = std::fs::read_dir(dir.join("artifacts"))
		.unwrap()
		.map(|entry| entry.unwrap())
		.filter(|entry| entry.file_type().unwrap().is_file())
		.map(|entry| (entry.file_name().into_string().unwrap(), entry.metadata().unwrap().len()))
		.collect();
	held.sort();
	let name = store.path(&hash).file_name().unwrap().to_str().unwrap().to_string();
	assert_eq!(held, vec![(name.clone(), artifact.len() as u64), (format!("{name}.outline"), 7 * 32)]);
	assert_eq!(store.outline(&hash).unwrap(), (artifact.len() as u64, outline(&artifact)));

	drop((honest, fetcher));
	let _ = std::fs::remove_dir_all(&base);
}

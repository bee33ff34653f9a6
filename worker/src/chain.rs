//! The chain, as the worker sees it: calls and storage generated from the runtime's metadata.

/// Calls, storage and events generated from `worker/metadata.scale`, the runtime's
/// metadata (a test fails when it is stale). The protocol's own types are not generated
/// again: they are the ones in `touchstone-primitives`, which the runtime encodes.
#[subxt::subxt(
	runtime_metadata_path = "metadata.scale",
	substitute_type(path = "touchstone_primitives::JobSpec<B>", with = "::subxt::utils::Static<::touchstone_primitives::JobSpec<::core::primitive::u128>>"),
	substitute_type(path = "touchstone_primitives::LearningProof", with = "::subxt::utils::Static<::touchstone_primitives::LearningProof>"),
	substitute_type(path = "touchstone_primitives::HardwareProfile", with = "::subxt::utils::Static<::touchstone_primitives::HardwareProfile>"),
	substitute_type(path = "touchstone_primitives::Checkpoint", with = "::subxt::utils::Static<::touchstone_primitives::Checkpoint>"),
	substitute_type(path = "touchstone_kernels::referee::StateOpening", with = "::subxt::utils::Static<::touchstone_primitives::referee::StateOpening>"),
	substitute_type(path = "touchstone_kernels::referee::Openings", with = "::subxt::utils::Static<::touchstone_primitives::referee::Openings>"),
	substitute_type(path = "touchstone_kernels::referee::aggregate::AggregateOpenings", with = "::subxt::utils::Static<::touchstone_primitives::referee::AggregateOpenings>"),
	substitute_type(path = "touchstone_kernels::referee::binding::StepBinding", with = "::subxt::utils::Static<::touchstone_primitives::referee::StepBinding>"),
	substitute_type(path = "touchstone_kernels::referee::boundary::BoundaryOpening", with = "::subxt::utils::Static<::touchstone_primitives::referee::BoundaryOpening>"),
	substitute_type(path = "touchstone_kernels::referee::boundary::SegmentBinding", with = "::subxt::utils::Static<::touchstone_primitives::referee::SegmentBinding>"),
	substitute_type(path = "touchstone_kernels::referee::binding::StateChunk", with = "::subxt::utils::Static<::touchstone_primitives::referee::StateChunk>"),
	substitute_type(path = "touchstone_kernels::proof::bisection::Reveal", with = "::subxt::utils::Static<::touchstone_primitives::referee::Reveal>"),
	substitute_type(path = "pallet_touchstone_verification::types::Verdict", with = "::subxt::utils::Static<::pallet_touchstone_verification::Verdict>"),
	substitute_type(path = "touchstone_kernels::proof::merkle::MerkleProof", with = "::subxt::utils::Static<::touchstone_primitives::referee::MerkleProof>"),
)]
pub mod runtime {}

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use subxt::rpcs::client::reconnecting_rpc_client::ExponentialBackoff;
use subxt::rpcs::client::ReconnectingRpcClient;
use subxt::config::{DefaultExtrinsicParamsBuilder, RpcConfigFor};
use subxt::rpcs::LegacyRpcMethods;
use subxt::{OnlineClient, PolkadotConfig};
use subxt_signer::sr25519::Keypair;
use touchstone_primitives::{JobId, Role};

use crate::jobfile::UNIT;
use crate::state::Transactions;

/// The chain's configuration: Polkadot's account, address, signature and hashing types.
pub type Config = PolkadotConfig;
/// An account on the chain.
pub type AccountId = subxt::utils::AccountId32;
/// The chain's state at one block (finalized, or the best one where said).
pub type AtBlock = subxt::client::OnlineClientAtBlock<Config>;
/// A work unit as stored.
pub type WorkUnit = touchstone_primitives::WorkUnit<AccountId, u32>;
/// A job as stored.
pub type Job = touchstone_primitives::Job<AccountId, u128, u32>;
/// A verification round as stored.
pub type Round = pallet_touchstone_verification::Round<
	AccountId,
	u32,
	polkadot_sdk::sp_core::ConstU32<1024>,
	polkadot_sdk::sp_core::ConstU32<1024>,
>;
/// A solver's forced-error secret commitment as stored.
pub type SecretCommitment = pallet_touchstone_verification::SecretCommitment<AccountId, u32>;
/// The events a transaction emitted.
pub type Events = subxt::extrinsics::ExtrinsicEvents<Config>;
/// A submitted transaction's progress.
type Progress = subxt::transactions::TransactionProgress<Config, subxt::client::OnlineClientAtBlockImpl<Config>>;

/// Decodes a stored protocol type with its own codec (the runtime's encoding of it).
pub fn decode<T: codec::Decode>(mut bytes: &[u8]) -> Result<T> {
	T::decode(&mut bytes).map_err(|error| anyhow!("cannot decode a stored value: {error}"))
}

/// How long to wait for a node before saying it is unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a light client may take to find a peer and sync to a finalized block from
/// its spec's checkpoint (warp sync makes that seconds even for a long chain).
const LIGHT_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// The chain, reached through a node's RPC or a light client in this process
/// ([`ChainAccess`]).
#[derive(Clone)]
pub struct Chain {
	api: OnlineClient<Config>,
	rpc: LegacyRpcMethods<RpcConfigFor<Config>>,
	/// The next nonce of each account this process signs for: transactions follow one
	/// another faster than blocks finalize, so the finalized state's nonce is stale. The
	/// lock also keeps this process's transactions in order.
	nonces: Arc<tokio::sync::Mutex<HashMap<[u8; 32], u64>>>,
	/// Held (shared) by every submission the node has not yet answered; [`Chain::settle`]
	/// takes it whole, so the process waits for them before it exits.
	in_flight: Arc<tokio::sync::RwLock<()>>,
	/// The duties whose transactions were handed over ([`Chain::send_in_background`]).
	background: Background,
	/// The light client the chain is read through, if it is ([`Chain::connect_light`]):
	/// kept alive as long as the chain is.
	_light: Option<Arc<subxt::lightclient::LightClient>>,
}

/// How the worker reaches the chain.
#[derive(Clone, Debug)]
pub enum ChainAccess {
	/// A node's WebSocket RPC endpoint. The worker believes what the node says: a lying
	/// or stale node can hide proofs, rounds and disputes from it.
	Node(String),
	/// A light client in this process ([`Chain::connect_light`]).
	LightClient {
		/// The chain spec file (`sync_state_genSyncSpec`'s answer).
		chain_spec: std::path::PathBuf,
		/// Peers to sync from instead of the spec's boot nodes (multiaddrs ending in /p2p/<peer id>).
		boot_nodes: Vec<String>,
	},
}

/// The duties whose transactions were handed over, by key ([`Chain::send_in_background`]).
#[derive(Clone, Default)]
struct Background(Arc<std::sync::Mutex<HashMap<String, Duty>>>);

/// Where a duty handed over stands.
#[derive(Clone, Copy, Debug)]
enum Duty {
	/// Its transaction is in flight, after `failures` failed tries.
	InFlight { failures: u32 },
	/// Its transaction is in this block.
	Included(u64),
	/// Its last `failures` tries failed (refused by the node or the runtime, or never
	/// included); the next waits until `retry_after` ([`retry_delay`]).
	Failed { failures: u32, retry_after: std::time::Instant },
}

/// How a duty's transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
	/// Included, in this best block.
	InBlock(u64),
	/// Included in a block whose number could not be read: counted as read by every pass
	/// from now on.
	Settled,
	/// Refused by the node or the runtime, or never included.
	Failed,
}

/// How long a duty whose transaction failed `failures` times in a row waits before the
/// next try: the first failure is tried again at the next pass (a node briefly away, a
/// nonce taken meanwhile), then 3 s doubling to at most 48 s, so a call the runtime
/// refuses, which would be refused again until the chain changes, does not cost a fee
/// every block. A deadline-bound duty still gets several tries inside its window.
fn retry_delay(failures: u32) -> Duration {
	match failures {
		0 | 1 => Duration::ZERO,
		more => Duration::from_secs(3u64.saturating_mul(1 << (more - 2).min(4))),
	}
}

/// How long a failed duty is remembered past its backoff with no pass asking for it (its
/// unit gone), so the map stays as small as the work in hand.
const FAILED_MEMORY: Duration = Duration::from_secs(600);

/// How many blocks an included duty is remembered with no pass asking for it.
const INCLUDED_MEMORY_BLOCKS: u64 = 200;

impl Background {
	fn duties(&self) -> std::sync::MutexGuard<'_, HashMap<String, Duty>> {
		self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}

	/// Whether a pass reading the chain at block `now`, at `clock`, must not send the duty
	/// `key` now: its transaction is in flight, in a block after `now` (the pass reads a
	/// state without it), or failed and waits out its backoff.
	fn holds(&self, key: &str, now: u64, clock: std::time::Instant) -> bool {
		let mut duties = self.duties();
		match duties.get(key) {
			Some(Duty::InFlight { .. }) => true,
			Some(Duty::Included(included)) if now < *included => true,
			Some(Duty::Included(_)) => {
				duties.remove(key);
				false
			},
			Some(Duty::Failed { retry_after, .. }) => clock < *retry_after,
			None => false,
		}
	}

	/// Takes the duty `key` for a pass at block `now`, unless [`Self::holds`] it.
	fn take(&self, key: &str, now: u64, clock: std::time::Instant) -> bool {
		if self.holds(key, now, clock) {
			return false;
		}
		let mut duties = self.duties();
		let failures = match duties.get(key) {
			Some(Duty::Failed { failures, .. }) => *failures,
			_ => 0,
		};
		// Failures long past belong to duties no pass asks for any more.
		duties.retain(|_, duty| match duty {
			Duty::Failed { retry_after, .. } => clock.saturating_duration_since(*retry_after) < FAILED_MEMORY,
			Duty::Included(block) => now.saturating_sub(*block) < INCLUDED_MEMORY_BLOCKS,
			Duty::InFlight { .. } => true,
		});
		duties.insert(key.to_owned(), Duty::InFlight { failures });
		true
	}

	/// The duty `key`'s transaction ended at `clock` ([`Ended`]): a failed one is tried
	/// again after its backoff ([`retry_delay`]).
	fn settle(&self, key: String, ended: Ended, clock: std::time::Instant) {
		let mut duties = self.duties();
		let duty = match ended {
			Ended::InBlock(number) => Duty::Included(number),
			// Every best block a pass reads from now on holds it.
			Ended::Settled => {
				duties.remove(&key);
				return;
			},
			Ended::Failed => {
				let failures = match duties.get(&key) {
					Some(Duty::InFlight { failures } | Duty::Failed { failures, .. }) => failures.saturating_add(1),
					_ => 1,
				};
				Duty::Failed { failures, retry_after: clock + retry_delay(failures) }
			},
		};
		duties.insert(key, duty);
	}
}

/// What a transaction handed over is awaited for before its duty counts as done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
	/// Inclusion in a best block: for calls that move no money.
	InBlock,
	/// Finality: for calls that move money (a ruling, a timeout).
	Finalized,
}

/// How long a stopping worker waits for the node to answer the submissions in flight.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a transaction may take to reach a block before it counts as lost.
const INCLUSION_TIMEOUT: Duration = Duration::from_secs(120);

/// The node's best block as it changes: a background task follows the node's best-block
/// stream (and follows it again after a reconnection).
#[derive(Clone)]
pub struct BestBlocks {
	chain: Chain,
	latest: tokio::sync::watch::Receiver<Option<subxt::client::Block<Config>>>,
	/// The slashes (of any account) in the best blocks followed, with their blocks' numbers,
	/// until a look takes them ([`Self::take_slashes`]); the oldest go past [`SLASH_LOG`].
	slashes: Arc<std::sync::Mutex<std::collections::VecDeque<(u64, runtime::staking::events::Slashed)>>>,
	/// Set while the role's account was last found short of fees ([`LOW_FUNDS`]).
	low_funds: Arc<std::sync::atomic::AtomicBool>,
}

/// Below this free balance an account can hardly pay the fees of what it owes the chain
/// (reveals, dispute moves): a solver takes no new work, offered or from the pool (a
/// range it trains ahead of its own proof goes on) ([`BestBlocks::low_funds`]).
const LOW_FUNDS: u128 = UNIT / 10;

/// How many slashes the best-block follower keeps for the next look at them.
const SLASH_LOG: usize = 256;

impl BestBlocks {
	/// The state at the latest best block; [`Self::next`] then waits for a newer one.
	pub async fn at(&mut self) -> Result<AtBlock> {
		let block = self.latest.borrow_and_update().clone();
		match block {
			Some(block) => block.at().await.context("cannot read the best block from the node"),
			// Not one best block seen yet: the finalized state is the best known.
			None => self.chain.at().await,
		}
	}

	/// Waits until a best block newer than the last one read arrives, at most `patience`.
	pub async fn next(&mut self, patience: Duration) {
		let _ = tokio::time::timeout(patience, self.latest.changed()).await;
	}

	/// Set while the role's account was short of fees when last checked (every
	/// [`ACCOUNT_CHECK_BLOCKS`] blocks): what it owes for work taken must come first.
	pub fn low_funds_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
		self.low_funds.clone()
	}

	/// The slashes found in the best blocks followed since the last call.
	fn take_slashes(&self) -> Vec<(u64, runtime::staking::events::Slashed)> {
		self.slashes.lock().map(|mut slashes| slashes.drain(..).collect()).unwrap_or_default()
	}
}

/// A worker role that makes one pass over the chain at every new best block.
pub trait EveryBlock {
	/// One pass. An error is logged, and the next block tries again.
	fn pass(&mut self) -> impl std::future::Future<Output = Result<()>>;
	/// The best blocks the passes follow.
	fn best_blocks(&mut self) -> &mut BestBlocks;
	/// The account the role acts for, whose slashes it reports.
	fn account(&self) -> &AccountId;
}

/// How often (in blocks) a role checks that its account is still registered and can pay
/// its fees.
const ACCOUNT_CHECK_BLOCKS: u64 = 20;

/// What the operator sees of the chain between passes: the lag of finality behind the
/// best block, and each slash of the role's account, counted in the metrics and logged
/// as an error with its reason. Each best block is looked at once, as the follower read
/// it (a light client cannot look a block up by its number). It also finds what no
/// retry cures: a runtime this worker was not built for, an account no longer registered.
#[derive(Default)]
struct ChainWatch {
	/// The runtime's spec version this worker last found it can talk to.
	spec_version: Option<u32>,
	/// The block of the last check of the account.
	account_checked: Option<u64>,
}

impl ChainWatch {
	/// Looks at the blocks since the last look. `Ok(Some(reason))` when the role must stop;
	/// an error is passing (the node away, a block not yet readable).
	async fn look(&mut self, chain: &Chain, best: &mut BestBlocks, me: &AccountId) -> Result<Option<anyhow::Error>> {
		let metrics = crate::metrics::get();
		let at = best.at().await?;
		let now = at.block_number();
		// A runtime upgrade changes calls and storage under the worker's feet: one it was
		// generated for goes on, any other stops it before it signs something malformed.
		if self.spec_version != Some(at.spec_version()) {
			if !runtime::is_codegen_valid_for(&at.metadata_ref()) {
				return Ok(Some(anyhow!(
					"the chain upgraded its runtime to spec version {}, which this worker was not built for: update touchstone-worker and start it again",
					at.spec_version()
				)));
			}
			self.spec_version = Some(at.spec_version());
		}
		let finalized_at = chain.at().await?;
		let finalized = finalized_at.block_number();
		// A stop for good is decided on the finalized state: a best block can be stale (a
		// new follow starts with old finalized blocks) or on a fork.
		if self.account_checked.is_none_or(|last| now >= last.saturating_add(ACCOUNT_CHECK_BLOCKS)) {
			self.account_checked = Some(now);
			if finalized_at.storage().try_fetch(runtime::storage().staking().nodes(), (me.clone(),)).await?.is_none() {
				return Ok(Some(anyhow!(
					"the account {me} is no longer registered (it unbonded, or slashes took its bond): start the worker again to register and bond"
				)));
			}
			let free = chain.free_balance(&finalized_at, me).await?;
			let low = free < LOW_FUNDS;
			best.low_funds.store(low, std::sync::atomic::Ordering::Relaxed);
			if low {
				tracing::error!(
					free_tst = free as f64 / UNIT as f64,
					"the account can hardly pay transaction fees: fund it, or its reveals and dispute moves will fail and be slashed; a solver takes no new work meanwhile"
				);
			}
		}
		metrics.chain_lag_blocks.set(now.saturating_sub(finalized));
		metrics.best_block.set(now);
		for (number, slashed) in best.take_slashes() {
			if slashed.who == *me {
				metrics.slashes.inc();
				metrics.slashed.inc_by(u64::try_from(slashed.amount).unwrap_or(u64::MAX));
				tracing::error!(block = number, role = ?slashed.role, reason = ?slashed.reason, tst = slashed.amount as f64 / UNIT as f64, "slashed");
			}
		}
		Ok(None)
	}
}

/// Runs `role`'s passes, each as soon as the chain moves on, until `stop` is set or the
/// chain shows a condition no retry cures (the error says which and what to do). A stop
/// interrupts a pass even when the node is gone and a call would retry for ever.
pub async fn run_every_block(role: &mut impl EveryBlock, stop: &std::sync::atomic::AtomicBool) -> Result<()> {
	let stopped = || async {
		while !stop.load(std::sync::atomic::Ordering::Relaxed) {
			tokio::time::sleep(Duration::from_millis(200)).await;
		}
	};
	let mut watch = ChainWatch::default();
	while !stop.load(std::sync::atomic::Ordering::Relaxed) {
		tokio::select! {
			result = role.pass() => if let Err(error) = result {
				tracing::warn!("{error:#}");
			},
			_ = stopped() => break,
		}
		let (chain, me) = (role.best_blocks().chain.clone(), role.account().clone());
		tokio::select! {
			looked = watch.look(&chain, role.best_blocks(), &me) => match looked {
				Ok(None) => {},
				Ok(Some(fatal)) => return Err(fatal),
				Err(error) => tracing::debug!("cannot look at the latest blocks: {error:#}"),
			},
			_ = stopped() => break,
		}
		tokio::select! {
			_ = role.best_blocks().next(Duration::from_secs(6)) => {},
			_ = stopped() => break,
		}
	}
	Ok(())
}

impl Chain {
	/// Whether the node runs a live (public) chain, as its chain spec says
	/// (`system_chainType`), rather than a development or local one.
	pub async fn is_live(&self) -> Result<bool> {
		let chain_type = self.rpc.system_chain_type().await.context("cannot read the chain's type")?;
		Ok(chain_type == "Live")
	}

	/// Reaches the chain as `access` says: through a node, or through a light client.
	pub async fn open(access: &ChainAccess) -> Result<Self> {
		match access {
			ChainAccess::Node(url) => Self::connect(url).await,
			ChainAccess::LightClient { chain_spec, boot_nodes } => Self::connect_light(chain_spec, boot_nodes).await,
		}
	}

	/// Connects to the node at `url`. The connection reconnects by itself, with
	/// exponential backoff up to ten seconds, whenever the node goes away.
	pub async fn connect(url: &str) -> Result<Self> {
		let unreachable = || {
			format!("node unreachable at {url}: is touchstone-node running there? (start one with scripts/run.sh, or pass --node)")
		};
		let rpc = tokio::time::timeout(
			CONNECT_TIMEOUT,
			ReconnectingRpcClient::builder()
				.retry_policy(ExponentialBackoff::from_millis(250).max_delay(Duration::from_secs(10)))
				.connection_timeout(Duration::from_secs(10))
				.build(url),
		)
		.await
		.map_err(|_| anyhow!(unreachable()))?
		.with_context(unreachable)?;
		Self::over(subxt::rpcs::RpcClient::new(rpc), None, &format!("the node at {url}")).await
	}

	/// Starts a light client (smoldot, in this process) from the chain spec in `chain_spec`
	/// (the JSON `sync_state_genSyncSpec` gives), dialling `boot_nodes` when any are given
	/// instead of the spec's own. It syncs from the spec's checkpoint over the chain's
	/// peer-to-peer network and checks every header, storage value and runtime call it is
	/// given against the finalized chain: no node is trusted with what the worker reads.
	pub async fn connect_light(chain_spec: &std::path::Path, boot_nodes: &[String]) -> Result<Self> {
		use subxt::lightclient::{ChainConfig, LightClient};
		let spec = std::fs::read_to_string(chain_spec).with_context(|| format!("cannot read the chain spec {}", chain_spec.display()))?;
		let mut config = ChainConfig::chain_spec(spec);
		if !boot_nodes.is_empty() {
			config = config
				.set_bootnodes(boot_nodes)
				.map_err(|_| anyhow!("the chain spec {} is not a JSON object: give the file sync_state_genSyncSpec returns", chain_spec.display()))?;
		}
		let (light, rpc) = LightClient::relay_chain(config).map_err(|error| {
			anyhow!("the chain spec {} cannot start a light client: {error} (give the file sync_state_genSyncSpec returns, with boot nodes)", chain_spec.display())
		})?;
		let rpc = subxt::rpcs::RpcClient::new(rpc);
		let source = format!("the chain of {}", chain_spec.display());
		// Reaching the first finalized block means finding a peer and syncing from the
		// spec's checkpoint: a spec with no reachable boot node never gets there.
		let chain = tokio::time::timeout(LIGHT_SYNC_TIMEOUT, Self::over(rpc, Some(Arc::new(light)), &source))
			.await
			.map_err(|_| {
				anyhow!(
					"the light client reached no finalized block of {source} within {} s: are its boot nodes (--boot-node, or bootNodes in the spec) reachable?",
					LIGHT_SYNC_TIMEOUT.as_secs()
				)
			})??;
		tracing::info!(spec = %chain_spec.display(), "following the chain through a light client");
		Ok(chain)
	}

	/// The chain through `rpc`, once its runtime is one this worker was generated for.
	async fn over(rpc: subxt::rpcs::RpcClient, light: Option<Arc<subxt::lightclient::LightClient>>, source: &str) -> Result<Self> {
		let api = OnlineClient::<Config>::from_rpc_client(rpc.clone()).await.with_context(|| format!("cannot reach {source}"))?;
		let chain = Self {
			api,
			rpc: LegacyRpcMethods::new(rpc),
			nonces: Arc::default(),
			in_flight: Arc::default(),
			background: Background::default(),
			_light: light,
		};
		// Refuse a runtime this worker was not generated for, before any transaction is
		// signed against it.
		let at = chain.at().await?;
		runtime::is_codegen_valid_for(&at.metadata_ref())
			.then_some(())
			.ok_or_else(|| anyhow!("{source} runs a runtime (spec version {}) this worker was not built for: update touchstone-worker", at.spec_version()))?;
		Ok(chain)
	}

	/// The latest finalized state.
	pub async fn at(&self) -> Result<AtBlock> {
		self.api.at_current_block().await.context("cannot read the finalized block from the node")
	}

	/// Follows the node's best block from now on, keeping the slashes each one holds.
	pub fn follow_best(&self) -> BestBlocks {
		let (sender, latest) = tokio::sync::watch::channel(None);
		let slashes: Arc<std::sync::Mutex<std::collections::VecDeque<_>>> = Arc::default();
		// The events are read on a task of their own: a stream waiting on them would leave
		// the passes on a stale block (a new follow starts with a burst of old finalized ones).
		let (to_read, mut unread) = tokio::sync::mpsc::channel::<subxt::client::Block<Config>>(SLASH_LOG);
		let (api, log) = (self.api.clone(), slashes.clone());
		tokio::spawn(async move {
			// Slashes before this worker started were not its business (nor reported twice
			// after a restart).
			let started = match api.at_current_block().await {
				Ok(at) => at.block_number(),
				Err(_) => 0,
			};
			while let Some(block) = unread.recv().await {
				let number = block.number();
				if number <= started {
					continue;
				}
				let events = match block.at().await {
					Ok(at) => at.events().fetch().await.map_err(|error| anyhow!("{error}")),
					Err(error) => Err(anyhow!("{error}")),
				};
				match events {
					Ok(events) => {
						if let Ok(mut log) = log.lock() {
							for slashed in events.find::<runtime::staking::events::Slashed>().flatten() {
								if log.len() == SLASH_LOG {
									log.pop_front();
								}
								log.push_back((number, slashed));
							}
						}
					},
					Err(error) => tracing::debug!(block = number, "cannot read the events of a best block: {error:#}"),
				}
			}
		});
		let api = self.api.clone();
		tokio::spawn(async move {
			// Ends when every receiver is gone.
			while !sender.is_closed() {
				match api.stream_best_blocks().await {
					Ok(mut blocks) => {
						while let Some(block) = blocks.next().await {
							let block = match block {
								Ok(block) => block,
								Err(error) => {
									tracing::debug!("best-block stream: {error}");
									break;
								},
							};
							if to_read.try_send(block.clone()).is_err() {
								tracing::debug!(block = block.number(), "the events of a best block are not read: too many are waiting");
							}
							if sender.send(Some(block)).is_err() {
								return;
							}
						}
					},
					Err(error) => tracing::debug!("cannot follow best blocks: {error}"),
				}
				tokio::time::sleep(Duration::from_secs(1)).await;
			}
		});
		BestBlocks { chain: self.clone(), latest, slashes, low_funds: Arc::default() }
	}

	/// Signs `call` with `signer`, submits it and waits until it is finalized: for calls
	/// that move money (bonds, escrow, payouts). A transaction the runtime refuses is an
	/// error naming the runtime's error.
	pub async fn send<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<Events> {
		let outcome = self.send_finalized(call, signer).await;
		count_transaction(call, outcome.is_ok());
		outcome
	}

	async fn send_finalized<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<Events> {
		let progress = self.submit(call, signer).await?;
		let finalized = progress.wait_for_finalized_success().await.map_err(|error| anyhow!("{error}"));
		if finalized.is_err() {
			self.forget_nonce(signer).await;
		}
		finalized
	}

	/// Signs `call` with the signer's next nonce (the node's count, which includes its
	/// pool, or one past this process's last transaction if that is higher) and submits it.
	///
	/// The submission runs on a task of its own, holding the nonce lock until the node has
	/// answered. A caller dropped meanwhile (a pass cut short by a stop) does not cut the
	/// submission short: the node imports a transaction whose request reached it whether
	/// or not anyone waits, and a process that exited first would leave the pool taking,
	/// after the fact, a nonce that its operator's next transaction from another client
	/// has just been given (the pool refuses that one: `1014: Priority is too low`).
	async fn submit<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<Progress> {
		let at = self.at().await?;
		let account = signer.public_key().to_account_id();
		let key = account.0;
		let mut nonces = self.nonces.clone().lock_owned().await;
		let pooled = self.rpc.system_account_next_index(&account).await.context("cannot read the account's nonce")?;
		let nonce = nonces.get(&key).map_or(pooled, |&tracked| tracked.max(pooled));
		let params = DefaultExtrinsicParamsBuilder::<Config>::new().nonce(nonce).build();
		let signed = at.tx().create_signed(call, signer, params).await.map_err(|error| anyhow!("cannot sign the transaction: {error}"))?;
		let in_flight = self.in_flight.clone().read_owned().await;
		let submission = tokio::spawn(async move {
			let _in_flight = in_flight;
			match signed.submit_and_watch().await {
				Ok(progress) => {
					nonces.insert(key, nonce.saturating_add(1));
					Ok(progress)
				},
				Err(error) => {
					nonces.remove(&key);
					Err(anyhow!("the node refused the transaction: {error}"))
				},
			}
		});
		submission.await.context("the submission's task failed")?
	}

	/// Waits (up to ten seconds) until the node has answered every submission this
	/// process handed it, so nothing reaches the pool after the process is gone. Called
	/// once a role stops.
	pub async fn settle(&self) {
		if tokio::time::timeout(SETTLE_TIMEOUT, self.in_flight.write()).await.is_err() {
			tracing::warn!("the node did not answer a submission within {} s of stopping", SETTLE_TIMEOUT.as_secs());
		}
	}

	/// Drops the tracked nonce of `signer` after a transaction that may not have been
	/// included, so the next one asks the node again.
	async fn forget_nonce(&self, signer: &Keypair) {
		self.nonces.lock().await.remove(&signer.public_key().to_account_id().0);
	}

	/// Signs `call` with `signer`, submits it and waits until it is in a best block, with
	/// its events: for calls that move no money (accepting, checkpoints, proofs,
	/// heartbeats), so the protocol does not wait for finality between steps. A block that
	/// leaves the best chain puts its transactions back in the pool, so a call included
	/// once is included again; the nonce comes from the node, which counts the pool.
	pub async fn send_in_block<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<Events> {
		self.send_in_block_at(call, signer).await.map(|(events, _)| events)
	}

	/// As [`Chain::send_in_block`], with the hash of the block that included it.
	async fn send_in_block_at<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<(Events, subxt::utils::H256)> {
		let outcome = self.include_in_block(call, signer).await;
		count_transaction(call, outcome.is_ok());
		outcome
	}

	async fn include_in_block<Call: subxt::tx::Payload>(&self, call: &Call, signer: &Keypair) -> Result<(Events, subxt::utils::H256)> {
		use subxt::transactions::TransactionStatus;
		let mut progress = self.submit(call, signer).await?;
		// Ok(the dispatch's outcome) once in a block; Err when it never got there.
		let included = tokio::time::timeout(INCLUSION_TIMEOUT, async {
			while let Some(status) = progress.next().await {
				match status.map_err(|error| anyhow!("{error}"))? {
					TransactionStatus::InBestBlock(block) | TransactionStatus::InFinalizedBlock(block) => {
						let hash = block.block_hash();
						return Ok(block.wait_for_success().await.map(|events| (events, hash)).map_err(|error| anyhow!("{error}")));
					},
					TransactionStatus::Error { message } => bail!("the transaction failed: {message}"),
					TransactionStatus::Invalid { message } => bail!("the transaction is invalid: {message}"),
					TransactionStatus::Dropped { message } => bail!("the transaction was dropped: {message}"),
					_ => continue,
				}
			}
			bail!("the node stopped reporting on the transaction")
		})
		.await
		.unwrap_or_else(|_| Err(anyhow!("the transaction was not included within {} s", INCLUSION_TIMEOUT.as_secs())));
		match included {
			Ok(outcome) => outcome,
			Err(error) => {
				// Not in a block: its nonce may be free again.
				self.forget_nonce(signer).await;
				Err(error)
			},
		}
	}

	/// The endpoints nodes advertise on-chain (`staking.endpoints`), at most `limit`: where
	/// a worker joins the artifact network ([`crate::inputs::join_network`]).
	pub async fn endpoints(&self, at: &AtBlock, limit: usize) -> Result<Vec<String>> {
		let mut entries = at.storage().iter(runtime::storage().staking().endpoints(), ()).await?;
		let mut endpoints = Vec::new();
		while let Some(entry) = entries.next().await {
			if endpoints.len() >= limit {
				break;
			}
			let bytes = entry?.value().decode()?.0;
			endpoints.push(String::from_utf8_lossy(&bytes).into_owned());
		}
		Ok(endpoints)
	}

	/// The next job id (the number of jobs ever submitted).
	pub async fn next_job_id(&self, at: &AtBlock) -> Result<JobId> {
		let value = at.storage().fetch(runtime::storage().tasks().next_job_id(), ()).await?;
		Ok(value.decode()?)
	}

	/// The free balance of `who`.
	pub async fn free_balance(&self, at: &AtBlock, who: &AccountId) -> Result<u128> {
		let value = at.storage().fetch(runtime::storage().system().account(), (who.clone(),)).await?;
		Ok(value.decode()?.data.free)
	}

	/// Registers `signer` for `role` with a bond of `bond_tst` TST, unless it is registered
	/// already; a node registered without that role is an error that says what to do.
	pub async fn ensure_registered(
		&self,
		signer: &Keypair,
		role: Role,
		bond_tst: f64,
		profile: touchstone_primitives::HardwareProfile,
		min_price: u128,
	) -> Result<()> {
		use runtime::runtime_types::touchstone_primitives::Role as ChainRole;
		let me = signer.public_key().to_account_id();
		let (name, chain_role) = match role {
			Role::Solver => ("solver", ChainRole::Solver),
			Role::Verifier => ("verifier", ChainRole::Verifier),
			Role::Challenger => ("challenger", ChainRole::Challenger),
		};
		let at = self.at().await?;
		if let Some(node) = at.storage().try_fetch(runtime::storage().staking().nodes(), (me.clone(),)).await? {
			let node = node.decode()?;
			let has = match role {
				Role::Solver => node.roles.solver,
				Role::Verifier => node.roles.verifier,
				Role::Challenger => node.roles.challenger,
			};
			if !has {
				bail!("{me} is registered, but not as a {name}: bond for the {name} role (staking.bondMore) or use another key");
			}
			tracing::info!("already registered as a {name}");
			self.update_registration(signer, &node, profile, min_price).await;
			return Ok(());
		}
		let bond = (bond_tst * UNIT as f64) as u128;
		let constants = runtime::constants().staking();
		let min_bond: u128 = match role {
			Role::Solver => at.constants().entry(constants.min_solver_bond())?,
			Role::Verifier => at.constants().entry(constants.min_verifier_bond())?,
			Role::Challenger => at.constants().entry(constants.min_challenger_bond())?,
		};
		if bond < min_bond {
			bail!("--bond {bond_tst} TST is below the chain's minimum {name} bond of {} TST", min_bond / UNIT);
		}
		let free = self.free_balance(&at, &me).await?;
		// The bond plus a margin for transaction fees.
		if free < bond.saturating_add(UNIT) {
			bail!(
				"balance too low for the bond: {me} holds {:.3} TST, the bond is {bond_tst} TST plus fees. Fund the account or pass a smaller --bond",
				free as f64 / UNIT as f64,
			);
		}
		let bonds = runtime::runtime_types::bounded_collections::bounded_vec::BoundedVec(vec![(chain_role, bond)]);
		let call = runtime::transactions().staking().register(subxt::utils::Static(profile), bonds, min_price);
		self.send(&call, signer).await.with_context(|| format!("registering as a {name}"))?;
		tracing::info!(bond_tst, "registered as a {name}");
		Ok(())
	}

	/// Brings a registered node's declared hardware and minimum price up to date, when
	/// they changed since it registered (another backend or GPU, another `--min-price`),
	/// so the scheduler matches it by what it is now. The measured throughput moves from
	/// run to run, and falls while other work shares the machine: on the same device only
	/// a rise of more than a quarter counts (the hardware was undersold), never a fall
	/// (it was measured under load, which a restart under load would declare). The chain
	/// refuses a new profile while the node holds units, so none is sent then; that, like
	/// any failure here, is logged and registration goes on with the profile declared
	/// before.
	async fn update_registration(
		&self,
		signer: &Keypair,
		node: &runtime::runtime_types::pallet_touchstone_staking::types::NodeInfo<u32, u128>,
		profile: touchstone_primitives::HardwareProfile,
		min_price: u128,
	) {
		use codec::{Decode, Encode};
		let declared = touchstone_primitives::HardwareProfile::decode(&mut &node.profile.encode()[..]);
		let changed = match &declared {
			Ok(declared) => profile_changed(declared, &profile),
			Err(_) => true,
		};
		// The chain refuses a new profile while the node holds units: a restarted
		// solver that still holds some keeps its declared profile rather than pay for
		// a refusal.
		let holds_units = || async {
			let at = self.at().await?;
			Ok::<_, anyhow::Error>(crate::state::ChainState::solver_units(&at, &signer.public_key().to_account_id()).await?.len())
		};
		let held = if changed { holds_units().await.unwrap_or(0) } else { 0 };
		if changed && held > 0 {
			tracing::info!(
				held,
				"the declared hardware changed, but the node holds units, which the chain matched to the profile declared before: the profile is kept until a restart without units"
			);
		} else if changed {
			let call = runtime::transactions().staking().update_profile(subxt::utils::Static(profile.clone()));
			match self.send_in_block(&call, signer).await {
				Ok(_) => tracing::info!(device = %String::from_utf8_lossy(&profile.model), "the declared hardware changed: profile updated on-chain"),
				Err(error) => tracing::warn!("the declared hardware changed, but the profile was not updated: {error:#}"),
			}
		}
		if node.min_price != min_price {
			match self.send_in_block(&runtime::transactions().staking().set_min_price(min_price), signer).await {
				Ok(_) => tracing::info!(min_price, "minimum price updated on-chain"),
				Err(error) => tracing::warn!("the minimum price was not updated: {error:#}"),
			}
		}
	}
}

impl Transactions for Chain {
	/// Hands `call` over for the duty `key` and returns at once: it is signed, sent and
	/// awaited (`settled`) on a task of its own, so the pass that found the duty goes on
	/// with its others (a dispute move, a reveal and a finalization due together go out in
	/// one block, not three). While it is in flight, or included in a block after `now`
	/// (the pass read a state without it), the duty is not sent again: returns `false`,
	/// sending nothing. A failed one is tried again when a pass asks after its backoff
	/// (the next pass after one failure, then 3 s doubling to 48 s). `done` gets the
	/// outcome.
	fn send_in_background<Call>(
		&self,
		key: String,
		now: u64,
		call: Call,
		signer: &Keypair,
		settled: Settled,
		done: impl FnOnce(Result<crate::state::Included>) + Send + 'static,
	) -> bool
	where
		Call: subxt::tx::Payload + Send + Sync + 'static,
	{
		if !self.background.take(&key, now, std::time::Instant::now()) {
			return false;
		}
		let (chain, signer) = (self.clone(), signer.clone());
		tokio::spawn(async move {
			let (outcome, ended) = match settled {
				Settled::InBlock => match chain.send_in_block_at(&call, &signer).await {
					Ok((events, block)) => {
						let ended = match chain.api.at_block(block).await {
							Ok(at) => Ended::InBlock(at.block_number()),
							Err(_) => Ended::Settled,
						};
						(Ok(events), ended)
					},
					Err(error) => (Err(error), Ended::Failed),
				},
				Settled::Finalized => {
					let outcome = chain.send(&call, &signer).await;
					// Held until a pass reads the finalized block it is known in, as an
					// inclusion is: a pass that read an older block would send it again.
					let ended = match (&outcome, chain.at().await) {
						(Ok(_), Ok(at)) => Ended::InBlock(at.block_number()),
						(Ok(_), Err(_)) => Ended::Settled,
						(Err(_), _) => Ended::Failed,
					};
					(outcome, ended)
				},
			};
			// The outcome is taken before the duty is released, so a pass that may send it
			// again already sees what the last try came to.
			done(outcome.map(|events| crate::state::Included(Some(events))));
			chain.background.settle(key, ended, std::time::Instant::now());
		});
		true
	}

	/// Whether a pass reading the chain at block `now` must leave the duty `key` alone: its
	/// transaction is in flight, in a block after `now`, or failed and waits out its backoff
	/// ([`Self::send_in_background`] would send nothing).
	fn is_handed_over(&self, key: &str, now: u64) -> bool {
		self.background.holds(key, now, std::time::Instant::now())
	}
}

/// Whether the hardware `measured` now differs from what the chain holds as `declared`
/// enough to send a new profile: another device, memory or region, or a throughput more
/// than a quarter above the declared one ([`Chain::update_registration`] says why a fall
/// does not count).
fn profile_changed(declared: &touchstone_primitives::HardwareProfile, measured: &touchstone_primitives::HardwareProfile) -> bool {
	let throughput = |p: &touchstone_primitives::HardwareProfile| f64::from(p.throughput_gflops.max(1));
	let faster = throughput(measured) > throughput(declared) * 1.25;
	faster || touchstone_primitives::HardwareProfile { throughput_gflops: declared.throughput_gflops, ..measured.clone() } != *declared
}

/// A call's name, as `Pallet.call`.
pub(crate) fn call_name<Call: subxt::tx::Payload>(call: &Call) -> String {
	call.validation_details().map_or_else(|| "unknown".to_owned(), |call| format!("{}.{}", call.pallet_name, call.call_name))
}

/// Counts a transaction's outcome under its call's name (`Pallet.call`).
fn count_transaction<Call: subxt::tx::Payload>(call: &Call, included: bool) {
	let name = call_name(call);
	let outcome = if included { "included" } else { "failed" };
	crate::metrics::get().transactions.with_label_values(&[name.as_str(), outcome]).inc();
}

/// How often a node tells the chain it is online.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(60);

/// When a node last told the chain it is online: it does so about once a minute, so the
/// scheduler offers it work and the verifier draw counts it. Shared with the background
/// task that sends it, which clears it when the heartbeat is refused.
#[derive(Clone, Default)]
pub struct Heartbeat(Arc<std::sync::Mutex<Option<std::time::Instant>>>);

impl Heartbeat {
	fn last(&self) -> std::sync::MutexGuard<'_, Option<std::time::Instant>> {
		self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}

	/// Marks a heartbeat as just sent (registration counts as one).
	pub fn sent(&self) {
		*self.last() = Some(std::time::Instant::now());
	}

	/// Hands a heartbeat over ([`Chain::send_in_background`]) unless one went out within
	/// the last minute, and returns at once. A refused one (a node briefly away) is logged
	/// and sent again at the next pass: the chain waits minutes for a heartbeat, and a pass
	/// must not wait for one at all.
	pub fn send_if_due(&self, chain: &impl Transactions, now: u64, signer: &Keypair) {
		if self.last().is_some_and(|last| last.elapsed() < HEARTBEAT_EVERY) {
			return;
		}
		let heartbeat = self.clone();
		let done = move |outcome: Result<crate::state::Included>| {
			if let Err(error) = outcome {
				*heartbeat.last() = None;
				tracing::warn!("heartbeat not sent, tried again next block: {error:#}");
			}
		};
		if chain.send_in_background("heartbeat".to_owned(), now, runtime::transactions().staking().heartbeat(), signer, Settled::InBlock, done) {
			self.sent();
		}
	}
}

#[cfg(test)]
mod tests {
	use super::{profile_changed, retry_delay, Background, Ended};
	use std::time::{Duration, Instant};
	use touchstone_primitives::{DeviceKind, HardwareProfile};

	/// A duty handed over is not sent again while its transaction is in flight, nor by a
	/// pass that reads a block older than the one that included it; a failed one is sent
	/// again at the next pass, and after repeated failures only once its backoff is over.
	#[test]
	fn a_duty_handed_over_is_sent_once_until_a_pass_reads_the_block_that_holds_it() {
		let background = Background::default();
		let clock = Instant::now();
		assert!(background.take("reveal", 10, clock));
		assert!(!background.take("reveal", 11, clock), "in flight");
		assert!(background.take("time_out", 11, clock), "another duty goes meanwhile");
		background.settle("reveal".into(), Ended::InBlock(13), clock);
		assert!(!background.take("reveal", 12, clock), "a pass that read a block before its inclusion");
		assert!(background.take("reveal", 13, clock), "a pass that reads its block sees it: due again only if the chain says so");
		background.settle("time_out".into(), Ended::Failed, clock);
		assert!(background.take("time_out", 11, clock), "failed once: sent again at the next pass");
		background.settle("time_out".into(), Ended::Failed, clock);
		assert!(!background.take("time_out", 12, clock), "failed twice: waits");
		assert!(background.take("time_out", 12, clock + Duration::from_secs(3)), "its backoff over");
		background.settle("time_out".into(), Ended::Failed, clock + Duration::from_secs(3));
		assert!(!background.take("time_out", 13, clock + Duration::from_secs(8)), "the backoff doubles");
		assert!(background.take("time_out", 13, clock + Duration::from_secs(9)));
		background.settle("time_out".into(), Ended::InBlock(14), clock + Duration::from_secs(9));
		assert!(background.take("time_out", 15, clock + Duration::from_secs(9)), "due again once its block is read");
		background.settle("time_out".into(), Ended::Failed, clock + Duration::from_secs(9));
		assert!(background.take("time_out", 16, clock + Duration::from_secs(9)), "an inclusion starts the count again");
		background.settle("time_out".into(), Ended::Settled, clock + Duration::from_secs(9));
		assert!(background.take("time_out", 16, clock + Duration::from_secs(9)), "finalized: due again only if the chain says so");
		background.settle("time_out".into(), Ended::Failed, clock + Duration::from_secs(9));
		assert!(background.take("time_out", 16, clock + Duration::from_secs(9)), "and its count started again");
	}

	/// The backoff after a failure starts at the next pass and doubles from 3 s to 48 s.
	#[test]
	fn a_failing_duty_backs_off_from_the_next_pass_to_48_seconds() {
		let delays: Vec<u64> = (1..=8).map(|failures| retry_delay(failures).as_secs()).collect();
		assert_eq!(delays, [0, 3, 6, 12, 24, 48, 48, 48]);
	}

	fn profile(model: &str, throughput_gflops: u32) -> HardwareProfile {
		HardwareProfile {
			device: DeviceKind::Cpu,
			model: polkadot_sdk::sp_runtime::BoundedVec::truncate_from(model.as_bytes().to_vec()),
			memory_mib: 24_000,
			throughput_gflops,
			bandwidth_mbps: 1000,
			region: polkadot_sdk::sp_runtime::BoundedVec::truncate_from(b"eu-west".to_vec()),
		}
	}

	/// A restart under load measures the same CPU slower: that sends no new profile (a
	/// transaction, and one the chain refuses while the node holds work), where a faster
	/// measurement or another device does.
	#[test]
	fn a_profile_is_sent_again_for_other_hardware_or_a_real_speed_up_never_for_a_machine_under_load() {
		let declared = profile("EPYC", 40);
		assert!(!profile_changed(&declared, &profile("EPYC", 40)));
		assert!(!profile_changed(&declared, &profile("EPYC", 12)), "a fall is load, not hardware");
		assert!(!profile_changed(&declared, &profile("EPYC", 49)), "a rise within a quarter is noise");
		assert!(profile_changed(&declared, &profile("EPYC", 51)));
		assert!(profile_changed(&declared, &profile("H100", 12)), "another device counts whatever it measures");
	}
}

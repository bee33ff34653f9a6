//! Assembles the node: client and ParityDb backend, transaction pool, BABE import queue
//! and authoring, GRANDPA voting, networking, RPC and Prometheus.

use crate::rpc;
use futures::FutureExt;
use polkadot_sdk::{
	sc_basic_authorship, sc_client_api::BlockBackend, sc_consensus, sc_consensus_babe,
	sc_consensus_grandpa as grandpa, sc_consensus_slots, sc_network, sc_network_sync::WarpSyncConfig,
	sc_offchain, sc_service::{self, error::Error as ServiceError, Configuration, TaskManager},
	sc_telemetry::{Telemetry, TelemetryWorker}, sc_transaction_pool,
	sc_transaction_pool_api::OffchainTransactionPoolFactory, sp_consensus_babe, sp_io, sp_timestamp,
	sp_runtime::traits::Block as BlockT,
};
use std::sync::Arc;
use touchstone_runtime::{self, apis::RuntimeApi, opaque::Block};

/// Host functions the runtime may call.
#[cfg(not(feature = "runtime-benchmarks"))]
pub type HostFunctions = sp_io::SubstrateHostFunctions;

/// Host functions the runtime may call, with the benchmarking ones.
#[cfg(feature = "runtime-benchmarks")]
pub type HostFunctions = (
	sp_io::SubstrateHostFunctions,
	polkadot_sdk::frame_benchmarking::benchmarking::HostFunctions,
);

/// The client.
pub type FullClient = sc_service::TFullClient<Block, RuntimeApi, sc_executor::WasmExecutor<HostFunctions>>;
type FullBackend = sc_service::TFullBackend<Block>;
type FullSelectChain = sc_consensus::LongestChain<FullBackend, Block>;
type FullGrandpaBlockImport = grandpa::GrandpaBlockImport<FullBackend, Block, FullClient, FullSelectChain>;
type FullBabeBlockImport = sc_consensus_babe::BabeBlockImport<
	Block,
	FullClient,
	FullGrandpaBlockImport,
	InherentProviders,
	FullSelectChain,
>;
type InherentProviders = fn(
	<Block as BlockT>::Hash,
	(),
) -> futures::future::Ready<
	Result<
		(sp_consensus_babe::inherents::InherentDataProvider, sp_timestamp::InherentDataProvider),
		Box<dyn std::error::Error + Send + Sync>,
	>,
>;

use polkadot_sdk::sc_executor;

/// Blocks between GRANDPA justifications kept for sync and light clients.
const GRANDPA_JUSTIFICATION_PERIOD: u32 = 512;

/// The slot inherent and timestamp a BABE block carries, from the wall clock.
fn inherent_providers(
	_parent: <Block as BlockT>::Hash,
	_: (),
) -> futures::future::Ready<
	Result<
		(sp_consensus_babe::inherents::InherentDataProvider, sp_timestamp::InherentDataProvider),
		Box<dyn std::error::Error + Send + Sync>,
	>,
> {
	let timestamp = sp_timestamp::InherentDataProvider::from_system_time();
	let slot = sp_consensus_babe::inherents::InherentDataProvider::from_timestamp_and_slot_duration(
		*timestamp,
		sp_consensus_babe::SlotDuration::from_millis(touchstone_runtime::SLOT_DURATION),
	);
	futures::future::ready(Ok((slot, timestamp)))
}

/// The parts of the node built before networking.
pub type Service = sc_service::PartialComponents<
	FullClient,
	FullBackend,
	FullSelectChain,
	sc_consensus::DefaultImportQueue<Block>,
	sc_transaction_pool::TransactionPoolHandle<Block, FullClient>,
	(
		FullBabeBlockImport,
		sc_consensus_babe::BabeLink<Block>,
		sc_consensus_babe::BabeWorkerHandle<Block>,
		grandpa::LinkHalf<Block, FullClient, FullSelectChain>,
		Option<Telemetry>,
	),
>;

/// Builds the client, backend, pool and import queue.
pub fn new_partial(config: &Configuration) -> Result<Service, ServiceError> {
	let telemetry = config
		.telemetry_endpoints
		.clone()
		.filter(|endpoints| !endpoints.is_empty())
		.map(|endpoints| -> Result<_, polkadot_sdk::sc_telemetry::Error> {
			let worker = TelemetryWorker::new(16)?;
			let telemetry = worker.handle().new_telemetry(endpoints);
			Ok((worker, telemetry))
		})
		.transpose()?;

	let executor = sc_service::new_wasm_executor::<HostFunctions>(&config.executor);
	let (client, backend, keystore_container, task_manager) =
		sc_service::new_full_parts::<Block, RuntimeApi, _>(
			config,
			telemetry.as_ref().map(|(_, telemetry)| telemetry.handle()),
			executor,
			Vec::new(),
		)?;
	let client = Arc::new(client);

	let telemetry = telemetry.map(|(worker, telemetry)| {
		task_manager.spawn_handle().spawn("telemetry", None, worker.run());
		telemetry
	});

	let select_chain = sc_consensus::LongestChain::new(backend.clone());

	let transaction_pool = Arc::from(
		sc_transaction_pool::Builder::new(
			task_manager.spawn_essential_handle(),
			client.clone(),
			config.role.is_authority().into(),
		)
		.with_options(config.transaction_pool.clone())
		.with_prometheus(config.prometheus_registry())
		.build(),
	);

	let (grandpa_block_import, grandpa_link) = grandpa::block_import(
		client.clone(),
		GRANDPA_JUSTIFICATION_PERIOD,
		&(client.clone() as Arc<_>),
		select_chain.clone(),
		telemetry.as_ref().map(|x| x.handle()),
	)?;
	let justification_import = grandpa_block_import.clone();

	let (block_import, babe_link) = sc_consensus_babe::block_import(
		sc_consensus_babe::configuration(&*client)?,
		grandpa_block_import,
		client.clone(),
		inherent_providers as InherentProviders,
		select_chain.clone(),
		OffchainTransactionPoolFactory::new(transaction_pool.clone()),
	)?;

	let slot_duration = babe_link.config().slot_duration();
	let (import_queue, babe_worker_handle) =
		sc_consensus_babe::import_queue(sc_consensus_babe::ImportQueueParams {
			link: babe_link.clone(),
			block_import: block_import.clone(),
			justification_import: Some(Box::new(justification_import)),
			client: client.clone(),
			slot_duration,
			spawner: &task_manager.spawn_essential_handle(),
			registry: config.prometheus_registry(),
			telemetry: telemetry.as_ref().map(|x| x.handle()),
		})?;

	Ok(sc_service::PartialComponents {
		client,
		backend,
		task_manager,
		import_queue,
		keystore_container,
		select_chain,
		transaction_pool,
		other: (block_import, babe_link, babe_worker_handle, grandpa_link, telemetry),
	})
}

/// Builds and starts a full node (and, with keys, a validator).
pub fn new_full<N: sc_network::NetworkBackend<Block, <Block as BlockT>::Hash>>(
	config: Configuration,
) -> Result<TaskManager, ServiceError> {
	let sc_service::PartialComponents {
		client,
		backend,
		mut task_manager,
		import_queue,
		keystore_container,
		select_chain,
		transaction_pool,
		other: (block_import, babe_link, babe_worker_handle, grandpa_link, mut telemetry),
	} = new_partial(&config)?;

	let metrics = N::register_notification_metrics(config.prometheus_registry());
	let mut net_config = sc_network::config::FullNetworkConfiguration::<
		Block,
		<Block as BlockT>::Hash,
		N,
	>::new(&config.network, config.prometheus_registry().cloned());
	let peer_store_handle = net_config.peer_store_handle();

	let genesis_hash = client
		.block_hash(0)
		.ok()
		.flatten()
		.ok_or_else(|| ServiceError::Other("the genesis block is missing".into()))?;
	let grandpa_protocol_name = grandpa::protocol_standard_name(&genesis_hash, &config.chain_spec);
	let (grandpa_protocol_config, grandpa_notification_service) =
		grandpa::grandpa_peers_set_config::<_, N>(
			grandpa_protocol_name.clone(),
			metrics.clone(),
			peer_store_handle,
		);
	net_config.add_notification_protocol(grandpa_protocol_config);

	// Warp sync lets new nodes jump to the finalized head through GRANDPA proofs.
	let warp_sync = Arc::new(grandpa::warp_proof::NetworkProvider::new(
		backend.clone(),
		grandpa_link.shared_authority_set().clone(),
		Vec::default(),
	));

	let (network, system_rpc_tx, tx_handler_controller, sync_service, _bitswap) =
		sc_service::build_network(sc_service::BuildNetworkParams {
			config: &config,
			net_config,
			client: client.clone(),
			transaction_pool: transaction_pool.clone(),
			spawn_handle: task_manager.spawn_handle(),
			spawn_essential_handle: task_manager.spawn_essential_handle(),
			import_queue,
			block_announce_validator_builder: None,
			warp_sync_config: Some(WarpSyncConfig::WithProvider(warp_sync)),
			block_relay: None,
			metrics,
			gap_sync_body_policy: None,
		})?;

	if config.offchain_worker.enabled {
		let offchain_workers =
			sc_offchain::OffchainWorkers::new(sc_offchain::OffchainWorkerOptions {
				runtime_api_provider: client.clone(),
				is_validator: config.role.is_authority(),
				keystore: Some(keystore_container.keystore()),
				offchain_db: polkadot_sdk::sc_client_api::Backend::offchain_storage(&*backend),
				transaction_pool: Some(OffchainTransactionPoolFactory::new(transaction_pool.clone())),
				network_provider: Arc::new(network.clone()),
				enable_http_requests: true,
				custom_extensions: |_| vec![],
			})?;
		task_manager.spawn_handle().spawn(
			"offchain-workers-runner",
			"offchain-worker",
			offchain_workers.run(client.clone(), task_manager.spawn_handle()).boxed(),
		);
	}

	let role = config.role;
	let force_authoring = config.force_authoring;
	let name = config.network.node_name.clone();
	let enable_grandpa = !config.disable_grandpa;
	let prometheus_registry = config.prometheus_registry().cloned();
	let shared_voter_state = grandpa::SharedVoterState::empty();

	let rpc_builder = {
		let client = client.clone();
		let pool = transaction_pool.clone();
		let chain_spec = config.chain_spec.cloned_box();
		let shared_voter_state = shared_voter_state.clone();
		let shared_authority_set = grandpa_link.shared_authority_set().clone();
		let justification_stream = grandpa_link.justification_stream();
		let finality_provider =
			grandpa::FinalityProofProvider::new_for_service(backend.clone(), Some(shared_authority_set.clone()));
		Box::new(move |subscription_executor| {
			let deps = rpc::FullDeps {
				client: client.clone(),
				pool: pool.clone(),
				chain_spec: chain_spec.cloned_box(),
				babe_worker_handle: babe_worker_handle.clone(),
				grandpa: rpc::GrandpaDeps {
					shared_voter_state: shared_voter_state.clone(),
					shared_authority_set: shared_authority_set.clone(),
					justification_stream: justification_stream.clone(),
					subscription_executor,
					finality_provider: finality_provider.clone(),
				},
			};
			rpc::create_full(deps).map_err(|e| ServiceError::Other(e.to_string()))
		})
	};

	sc_service::spawn_tasks(sc_service::SpawnTasksParams {
		network: network.clone(),
		client: client.clone(),
		keystore: keystore_container.keystore(),
		task_manager: &mut task_manager,
		transaction_pool: transaction_pool.clone(),
		rpc_builder,
		backend,
		system_rpc_tx,
		tx_handler_controller,
		sync_service: sync_service.clone(),
		config,
		telemetry: telemetry.as_mut(),
		tracing_execute_block: None,
	})?;

	if role.is_authority() {
		let proposer = sc_basic_authorship::ProposerFactory::new(
			task_manager.spawn_handle(),
			client.clone(),
			transaction_pool.clone(),
			prometheus_registry.as_ref(),
			telemetry.as_ref().map(|x| x.handle()),
		);
		let babe = sc_consensus_babe::start_babe(sc_consensus_babe::BabeParams {
			keystore: keystore_container.keystore(),
			client: client.clone(),
			select_chain,
			env: proposer,
			block_import,
			sync_oracle: sync_service.clone(),
			justification_sync_link: sync_service.clone(),
			create_inherent_data_providers: inherent_providers as InherentProviders,
			force_authoring,
			backoff_authoring_blocks: Some(
				sc_consensus_slots::BackoffAuthoringOnFinalizedHeadLagging::<u32>::default(),
			),
			babe_link,
			block_proposal_slot_portion: sc_consensus_babe::SlotProportion::new(0.5),
			max_block_proposal_slot_portion: None,
			telemetry: telemetry.as_ref().map(|x| x.handle()),
		})?;
		// BABE is essential: if it stops, the node stops.
		task_manager
			.spawn_essential_handle()
			.spawn_blocking("babe-proposer", Some("block-authoring"), babe);
	}

	if enable_grandpa {
		// A node without keys runs the voter as an observer of the votes it sees.
		let keystore = if role.is_authority() { Some(keystore_container.keystore()) } else { None };
		let grandpa_config = grandpa::Config {
			gossip_duration: std::time::Duration::from_millis(333),
			justification_generation_period: GRANDPA_JUSTIFICATION_PERIOD,
			name: Some(name),
			observer_enabled: false,
			keystore,
			local_role: role,
			telemetry: telemetry.as_ref().map(|x| x.handle()),
			protocol_name: grandpa_protocol_name,
		};
		let voter = grandpa::run_grandpa_voter(grandpa::GrandpaParams {
			config: grandpa_config,
			link: grandpa_link,
			network,
			sync: Arc::new(sync_service),
			notification_service: grandpa_notification_service,
			voting_rule: grandpa::VotingRulesBuilder::default().build(),
			prometheus_registry,
			shared_voter_state,
			telemetry: telemetry.as_ref().map(|x| x.handle()),
			offchain_tx_pool_factory: OffchainTransactionPoolFactory::new(transaction_pool),
		})?;
		// GRANDPA is essential too.
		task_manager.spawn_essential_handle().spawn_blocking("grandpa-voter", None, voter);
	}

	Ok(task_manager)
}

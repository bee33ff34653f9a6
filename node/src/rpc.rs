//! The node's JSON-RPC methods beyond the standard set: account nonces, fee queries,
//! GRANDPA finality proofs, and `sync_state_genSyncSpec` for light clients.

use jsonrpsee::RpcModule;
use polkadot_sdk::{
	pallet_transaction_payment_rpc::{TransactionPayment, TransactionPaymentApiServer},
	sc_consensus_babe::BabeWorkerHandle,
	sc_consensus_grandpa::{
		FinalityProofProvider, GrandpaJustificationStream, SharedAuthoritySet, SharedVoterState,
	},
	sc_consensus_grandpa_rpc::{Grandpa, GrandpaApiServer},
	sc_rpc::SubscriptionTaskExecutor,
	sc_service::TFullBackend,
	sc_sync_state_rpc::{SyncState, SyncStateApiServer},
	sc_transaction_pool_api::TransactionPool,
	sp_api::ProvideRuntimeApi,
	sp_block_builder::BlockBuilder,
	sp_blockchain::{Error as BlockChainError, HeaderBackend, HeaderMetadata},
	substrate_frame_rpc_system::{System, SystemApiServer},
};
use std::sync::Arc;
use touchstone_runtime::{opaque::Block, AccountId, Balance, BlockNumber, Hash, Nonce};

/// What the GRANDPA RPC needs.
pub struct GrandpaDeps {
	/// The voter's state.
	pub shared_voter_state: SharedVoterState,
	/// The authority set.
	pub shared_authority_set: SharedAuthoritySet<Hash, BlockNumber>,
	/// Justifications as they are produced.
	pub justification_stream: GrandpaJustificationStream<Block>,
	/// Runs subscriptions.
	pub subscription_executor: SubscriptionTaskExecutor,
	/// Builds finality proofs.
	pub finality_provider: Arc<FinalityProofProvider<TFullBackend<Block>, Block>>,
}

/// Everything the RPC extensions need.
pub struct FullDeps<C, P> {
	/// The client.
	pub client: Arc<C>,
	/// The transaction pool.
	pub pool: Arc<P>,
	/// The chain spec, the base of generated sync specs.
	pub chain_spec: Box<dyn polkadot_sdk::sc_chain_spec::ChainSpec>,
	/// BABE's worker, for the epoch data in sync specs.
	pub babe_worker_handle: BabeWorkerHandle<Block>,
	/// GRANDPA.
	pub grandpa: GrandpaDeps,
}

/// Builds the node's RPC extensions.
pub fn create_full<C, P>(
	deps: FullDeps<C, P>,
) -> Result<RpcModule<()>, Box<dyn std::error::Error + Send + Sync>>
where
	C: ProvideRuntimeApi<Block>
		+ HeaderBackend<Block>
		+ HeaderMetadata<Block, Error = BlockChainError>
		+ polkadot_sdk::sc_client_api::AuxStore
		+ Send
		+ Sync
		+ 'static,
	C::Api: polkadot_sdk::substrate_frame_rpc_system::AccountNonceApi<Block, AccountId, Nonce>
		+ polkadot_sdk::pallet_transaction_payment_rpc::TransactionPaymentRuntimeApi<Block, Balance>
		+ BlockBuilder<Block>,
	P: TransactionPool + 'static,
{
	let FullDeps { client, pool, chain_spec, babe_worker_handle, grandpa } = deps;
	let mut module = RpcModule::new(());
	module.merge(System::new(client.clone(), pool).into_rpc())?;
	module.merge(TransactionPayment::new(client.clone()).into_rpc())?;
	module.merge(
		Grandpa::new(
			grandpa.subscription_executor,
			grandpa.shared_authority_set.clone(),
			grandpa.shared_voter_state,
			grandpa.justification_stream,
			grandpa.finality_provider,
		)
		.into_rpc(),
	)?;
	module.merge(
		SyncState::new(chain_spec, client, grandpa.shared_authority_set, babe_worker_handle)?
			.into_rpc(),
	)?;
	Ok(module)
}

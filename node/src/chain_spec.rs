//! Chain specifications: `dev` (one validator), `local` (three) and `local4` (four),
//! runtime's genesis presets.

use polkadot_sdk::{
	sc_chain_spec::ChainSpecExtension,
	sc_service::{self, ChainType, Properties},
	sc_sync_state_rpc::LightSyncStateExtension,
	sp_genesis_builder::{DEV_RUNTIME_PRESET, LOCAL_TESTNET_RUNTIME_PRESET},
};
use serde::{Deserialize, Serialize};

/// Chain-spec extensions. `lightSyncState` lets `sync_state_genSyncSpec` hand light
/// clients (smoldot) a recent finalized checkpoint to start from.
#[derive(Default, Clone, Serialize, Deserialize, ChainSpecExtension)]
#[serde(rename_all = "camelCase")]
pub struct Extensions {
	/// A finalized checkpoint for light clients, filled in by `sync_state_genSyncSpec`.
	pub light_sync_state: LightSyncStateExtension,
}

/// Touchstone's chain spec type.
pub type ChainSpec = sc_service::GenericChainSpec<Extensions>;

fn wasm() -> Result<&'static [u8], String> {
	touchstone_runtime::WASM_BINARY.ok_or_else(|| {
		"The runtime's wasm was not built; rebuild without SKIP_WASM_BUILD".to_string()
	})
}

fn token_properties() -> Properties {
	let mut properties = Properties::new();
	properties.insert("tokenSymbol".into(), "TST".into());
	properties.insert("tokenDecimals".into(), 12.into());
	properties.insert("ss58Format".into(), 42.into());
	properties
}

/// One validator (Alice), for development.
pub fn development_config() -> Result<ChainSpec, String> {
	Ok(ChainSpec::builder(wasm()?, Extensions::default())
		.with_name("Touchstone Development")
		.with_id("touchstone_dev")
		.with_chain_type(ChainType::Development)
		.with_genesis_config_preset_name(DEV_RUNTIME_PRESET)
		.with_properties(token_properties())
		.build())
}

/// Four validators (Alice, Bob, Charlie, Dave) on one machine: the smallest network
/// whose finality survives any one validator being down.
pub fn local_four_config() -> Result<ChainSpec, String> {
	Ok(ChainSpec::builder(wasm()?, Extensions::default())
		.with_name("Touchstone Local Testnet (four validators)")
		.with_id("touchstone_local4")
		.with_chain_type(ChainType::Local)
		.with_genesis_config_preset_name(touchstone_runtime::genesis_config_presets::LOCAL_TESTNET_FOUR_PRESET)
		.with_properties(token_properties())
		.build())
}

/// Three validators (Alice, Bob, Charlie) on one machine.
pub fn local_config() -> Result<ChainSpec, String> {
	Ok(ChainSpec::builder(wasm()?, Extensions::default())
		.with_name("Touchstone Local Testnet")
		.with_id("touchstone_local")
		.with_chain_type(ChainType::Local)
		.with_genesis_config_preset_name(LOCAL_TESTNET_RUNTIME_PRESET)
		.with_properties(token_properties())
		.build())
}

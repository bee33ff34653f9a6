//! Genesis presets: `development` (one validator, Alice), `local_testnet` (Alice, Bob
//! and Charlie) and `local_testnet_four` (Alice, Bob, Charlie and Dave). All fund the
//! well-known development accounts and make Alice sudo.

use crate::{
	configs::JackpotAccount, AccountId, BalancesConfig, BabeConfig, GrandpaConfig,
	RuntimeGenesisConfig, SudoConfig, BABE_GENESIS_EPOCH_CONFIG, EXISTENTIAL_DEPOSIT, UNIT,
};
use alloc::{vec, vec::Vec};
use polkadot_sdk::{
	frame_support::build_struct_json_patch,
	sp_consensus_babe::AuthorityId as BabeId,
	sp_consensus_grandpa::AuthorityId as GrandpaId,
	sp_genesis_builder::{self, PresetId},
	sp_keyring::{Ed25519Keyring, Sr25519Keyring},
};
use serde_json::Value;

/// What each development account starts with: a million TST.
pub const DEV_ENDOWMENT: u128 = 1_000_000 * UNIT;

/// The consensus keys of a development validator.
fn authority(sr: Sr25519Keyring, ed: Ed25519Keyring) -> (BabeId, GrandpaId) {
	(sr.public().into(), ed.public().into())
}

fn testnet_genesis(authorities: Vec<(BabeId, GrandpaId)>, endowed: Vec<AccountId>, root: AccountId) -> Value {
	let mut balances: Vec<(AccountId, u128)> =
		endowed.into_iter().map(|account| (account, DEV_ENDOWMENT)).collect();
	// The jackpot account must exist to receive slashed funds.
	balances.push((JackpotAccount::get(), EXISTENTIAL_DEPOSIT));
	build_struct_json_patch!(RuntimeGenesisConfig {
		balances: BalancesConfig { balances },
		babe: BabeConfig {
			authorities: authorities.iter().map(|(babe, _)| (babe.clone(), 1)).collect::<Vec<_>>(),
			epoch_config: BABE_GENESIS_EPOCH_CONFIG,
		},
		grandpa: GrandpaConfig {
			authorities: authorities.iter().map(|(_, grandpa)| (grandpa.clone(), 1)).collect::<Vec<_>>(),
		},
		sudo: SudoConfig { key: Some(root) },
	})
}

fn dev_accounts() -> Vec<AccountId> {
	Sr25519Keyring::iter().map(|key| key.to_account_id()).collect()
}

/// One validator, Alice.
pub fn development_genesis() -> Value {
	testnet_genesis(
		vec![authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice)],
		dev_accounts(),
		Sr25519Keyring::Alice.to_account_id(),
	)
}

/// Three validators: Alice, Bob and Charlie.
pub fn local_testnet_genesis() -> Value {
	testnet_genesis(
		vec![
			authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice),
			authority(Sr25519Keyring::Bob, Ed25519Keyring::Bob),
			authority(Sr25519Keyring::Charlie, Ed25519Keyring::Charlie),
		],
		dev_accounts(),
		Sr25519Keyring::Alice.to_account_id(),
	)
}

/// The id of the four-validator preset.
pub const LOCAL_TESTNET_FOUR_PRESET: &str = "local_testnet_four";

/// Four validators: Alice, Bob, Charlie and Dave. GRANDPA finalises with more than two
/// thirds of the voters, so this is the smallest set that keeps finalising with any one
/// of them stopped; three validators need all three.
pub fn local_testnet_four_genesis() -> Value {
	testnet_genesis(
		vec![
			authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice),
			authority(Sr25519Keyring::Bob, Ed25519Keyring::Bob),
			authority(Sr25519Keyring::Charlie, Ed25519Keyring::Charlie),
			authority(Sr25519Keyring::Dave, Ed25519Keyring::Dave),
		],
		dev_accounts(),
		Sr25519Keyring::Alice.to_account_id(),
	)
}

/// The preset with the given id, as JSON bytes.
pub fn get_preset(id: &PresetId) -> Option<Vec<u8>> {
	let patch = match id.as_ref() {
		sp_genesis_builder::DEV_RUNTIME_PRESET => development_genesis(),
		sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET => local_testnet_genesis(),
		LOCAL_TESTNET_FOUR_PRESET => local_testnet_four_genesis(),
		_ => return None,
	};
	serde_json::to_string(&patch).ok().map(|json| json.into_bytes())
}

/// The ids of the presets.
pub fn preset_names() -> Vec<PresetId> {
	vec![
		PresetId::from(sp_genesis_builder::DEV_RUNTIME_PRESET),
		PresetId::from(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET),
		PresetId::from(LOCAL_TESTNET_FOUR_PRESET),
	]
}

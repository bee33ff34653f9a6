//! The Touchstone runtime.
//!
//! BABE produces blocks and GRANDPA finalises them. Balances, transaction payment and
//! sudo come from FRAME; `Staking` and `Tasks` are Touchstone's own pallets, so clients
//! write `api.tx.staking.register(..)` and `api.tx.tasks.submitJob(..)`.
#![cfg_attr(not(feature = "std"), no_std)]
#![recursion_limit = "256"]

// The wasm blob substrate-wasm-builder produced, for the node to embed.
#[cfg(feature = "std")]
include!(concat!(env!("OUT_DIR"), "/wasm_binary.rs"));

extern crate alloc;

pub mod apis;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarks;
pub mod configs;
pub mod genesis_config_presets;

use alloc::{borrow::Cow, vec::Vec};
use polkadot_sdk::{
	frame_support, frame_system, pallet_babe, pallet_balances, pallet_grandpa, pallet_sudo,
	pallet_timestamp, pallet_transaction_payment,
	sp_runtime::{
		generic, impl_opaque_keys,
		traits::{BlakeTwo256, IdentifyAccount, Verify},
		MultiAddress, MultiSignature,
	},
	sp_version::RuntimeVersion,
};

pub use touchstone_primitives as primitives;

/// Opaque types, for the CLI to know the block format without the runtime's calls.
pub mod opaque {
	use super::*;
	use polkadot_sdk::sp_runtime::OpaqueExtrinsic;

	/// An opaque extrinsic.
	pub type UncheckedExtrinsic = OpaqueExtrinsic;
	/// The header.
	pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
	/// An opaque block.
	pub type Block = generic::Block<Header, UncheckedExtrinsic>;
	/// An opaque block id.
	pub type BlockId = generic::BlockId<Block>;

	impl_opaque_keys! {
		/// The keys a validator holds: one for BABE, one for GRANDPA.
		pub struct SessionKeys {
			/// Block production.
			pub babe: Babe,
			/// Finality.
			pub grandpa: Grandpa,
		}
	}
}

/// The runtime's version. `spec_version` goes up with every change of logic.
#[polkadot_sdk::sp_version::runtime_version]
pub const VERSION: RuntimeVersion = RuntimeVersion {
	spec_name: Cow::Borrowed("touchstone"),
	impl_name: Cow::Borrowed("touchstone-node"),
	authoring_version: 1,
	spec_version: 136,
	impl_version: 1,
	apis: apis::RUNTIME_API_VERSIONS,
	transaction_version: 3,
	system_version: 1,
};

/// Milliseconds between blocks. Short blocks keep workers' round trips short.
pub const MILLI_SECS_PER_BLOCK: u64 = 3000;
/// BABE's slot is one block.
pub const SLOT_DURATION: u64 = MILLI_SECS_PER_BLOCK;
/// Blocks per minute.
pub const MINUTES: BlockNumber = 60_000 / (MILLI_SECS_PER_BLOCK as BlockNumber);
/// Blocks per hour.
pub const HOURS: BlockNumber = MINUTES * 60;
/// Blocks per day.
pub const DAYS: BlockNumber = HOURS * 24;
/// Blocks per BABE epoch.
pub const EPOCH_DURATION_IN_BLOCKS: BlockNumber = 10 * MINUTES;
/// BABE's primary-slot probability: a quarter of slots have a primary author, the rest
/// fall to the secondary (round-robin) author, so every slot gets a block.
pub const PRIMARY_PROBABILITY: (u64, u64) = (1, 4);
/// BABE's configuration at genesis.
pub const BABE_GENESIS_EPOCH_CONFIG: polkadot_sdk::sp_consensus_babe::BabeEpochConfiguration =
	polkadot_sdk::sp_consensus_babe::BabeEpochConfiguration {
		c: PRIMARY_PROBABILITY,
		// Secondary slots carry a VRF output too, so every block brings fresh randomness:
		// the verification pallet draws verifiers from the output of the first block after
		// a proof (see `ParentVrfRandomness`).
		allowed_slots: polkadot_sdk::sp_consensus_babe::AllowedSlots::PrimaryAndSecondaryVRFSlots,
	};

/// One TST, the native token, with 12 decimals.
pub const UNIT: Balance = 1_000_000_000_000;
/// A thousandth of a TST.
pub const MILLI_UNIT: Balance = 1_000_000_000;
/// The least balance an account may hold.
pub const EXISTENTIAL_DEPOSIT: Balance = MILLI_UNIT;

/// A block number.
pub type BlockNumber = u32;
/// A transaction signature.
pub type Signature = MultiSignature;
/// An account id: the public key behind a signature.
pub type AccountId = <<Signature as Verify>::Signer as IdentifyAccount>::AccountId;
/// A balance.
pub type Balance = u128;
/// A transaction index.
pub type Nonce = u32;
/// A hash.
pub type Hash = polkadot_sdk::sp_core::H256;
/// A block header.
pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
/// The address format for naming accounts in calls.
pub type Address = MultiAddress<AccountId, ()>;
/// A block.
pub type Block = generic::Block<Header, UncheckedExtrinsic>;
/// A block id.
pub type BlockId = generic::BlockId<Block>;

/// The standard transaction extensions, so every client handles them from metadata.
pub type TxExtension = (
	frame_system::CheckNonZeroSender<Runtime>,
	frame_system::CheckSpecVersion<Runtime>,
	frame_system::CheckTxVersion<Runtime>,
	frame_system::CheckGenesis<Runtime>,
	frame_system::CheckEra<Runtime>,
	frame_system::CheckNonce<Runtime>,
	frame_system::CheckWeight<Runtime>,
	pallet_transaction_payment::ChargeTransactionPayment<Runtime>,
);

/// An extrinsic as received.
pub type UncheckedExtrinsic =
	generic::UncheckedExtrinsic<Address, RuntimeCall, Signature, TxExtension>;
/// The payload signed by a transaction.
pub type SignedPayload = generic::SignedPayload<RuntimeCall, TxExtension>;

/// Migrations to run on upgrade, in order.
type Migrations = (
	pallet_touchstone_staking::migrations::ScheduleLapses<Runtime>,
	pallet_touchstone_staking::migrations::ResizeDrawTree<Runtime>,
	pallet_touchstone_tasks::migrations::DropUnprovenModelHashes<Runtime>,
	pallet_touchstone_tasks::migrations::IndexProvenUnits<Runtime>,
	pallet_touchstone_verification::migrations::DropUnprovenModelHashes<Runtime>,
	pallet_touchstone_verification::migrations::ResetBeacon<Runtime>,
	pallet_touchstone_verification::migrations::IndexVerifierRounds<Runtime>,
	pallet_touchstone_disputes::migrations::AddSummons<Runtime>,
	pallet_touchstone_disputes::migrations::IndexPartyDisputes<Runtime>,
);

/// Dispatches blocks to the pallets.
pub type Executive = polkadot_sdk::frame_executive::Executive<
	Runtime,
	Block,
	frame_system::ChainContext<Runtime>,
	Runtime,
	AllPalletsWithSystem,
	Migrations,
>;

#[frame_support::runtime]
mod runtime {
	#[runtime::runtime]
	#[runtime::derive(
		RuntimeCall,
		RuntimeEvent,
		RuntimeError,
		RuntimeOrigin,
		RuntimeFreezeReason,
		RuntimeHoldReason,
		RuntimeSlashReason,
		RuntimeLockId,
		RuntimeTask,
		RuntimeViewFunction
	)]
	pub struct Runtime;

	#[runtime::pallet_index(0)]
	pub type System = frame_system;

	#[runtime::pallet_index(1)]
	pub type Timestamp = pallet_timestamp;

	#[runtime::pallet_index(2)]
	pub type Babe = pallet_babe;

	#[runtime::pallet_index(3)]
	pub type Grandpa = pallet_grandpa;

	#[runtime::pallet_index(4)]
	pub type Balances = pallet_balances;

	#[runtime::pallet_index(5)]
	pub type TransactionPayment = pallet_transaction_payment;

	#[runtime::pallet_index(6)]
	pub type Sudo = pallet_sudo;

	#[runtime::pallet_index(10)]
	pub type Staking = pallet_touchstone_staking;

	#[runtime::pallet_index(11)]
	pub type Tasks = pallet_touchstone_tasks;

	#[runtime::pallet_index(12)]
	pub type Disputes = pallet_touchstone_disputes;

	#[runtime::pallet_index(13)]
	pub type Verification = pallet_touchstone_verification;
}

//! The runtime APIs: the standard set a BABE/GRANDPA chain needs, plus `TasksApi` for
//! workers, `VerificationApi` for verifiers and `DisputesApi` for the parties to disputes.

use crate::{
	configs::EpochDuration,
	opaque, AccountId, Babe, Balance, Block, BlockNumber, Executive, Grandpa, InherentDataExt,
	Nonce, Runtime, RuntimeCall, RuntimeGenesisConfig, System, Tasks, TransactionPayment,
	BABE_GENESIS_EPOCH_CONFIG, VERSION,
};
use alloc::vec::Vec;
use polkadot_sdk::{
	frame_support::{
		genesis_builder_helper::{build_state, get_preset},
		weights::Weight,
	},
	frame_system_rpc_runtime_api, pallet_transaction_payment, pallet_transaction_payment_rpc_runtime_api,
	sp_api::{self, impl_runtime_apis},
	sp_block_builder, sp_consensus_babe,
	sp_consensus_grandpa::{self, AuthorityId as GrandpaId},
	sp_core::{crypto::KeyTypeId, OpaqueMetadata},
	sp_genesis_builder, sp_inherents, sp_offchain,
	sp_runtime::{
		traits::{Block as BlockT, NumberFor},
		transaction_validity::{TransactionSource, TransactionValidity},
		ApplyExtrinsicResult, ExtrinsicInclusionMode,
	},
	sp_session, sp_transaction_pool,
	sp_version::RuntimeVersion,
};
use touchstone_primitives::{JobId, JobState, SolverUnit, UnitIndex};

impl_runtime_apis! {
	impl sp_api::Core<Block> for Runtime {
		fn version() -> RuntimeVersion {
			VERSION
		}

		fn execute_block(block: <Block as BlockT>::LazyBlock) {
			Executive::execute_block(block);
		}

		fn initialize_block(header: &<Block as BlockT>::Header) -> ExtrinsicInclusionMode {
			Executive::initialize_block(header)
		}
	}

	impl sp_api::Metadata<Block> for Runtime {
		fn metadata() -> OpaqueMetadata {
			OpaqueMetadata::new(Runtime::metadata().into())
		}

		fn metadata_at_version(version: u32) -> Option<OpaqueMetadata> {
			Runtime::metadata_at_version(version)
		}

		fn metadata_versions() -> Vec<u32> {
			Runtime::metadata_versions()
		}
	}

	impl sp_block_builder::BlockBuilder<Block> for Runtime {
		fn apply_extrinsic(extrinsic: <Block as BlockT>::Extrinsic) -> ApplyExtrinsicResult {
			Executive::apply_extrinsic(extrinsic)
		}

		fn finalize_block() -> <Block as BlockT>::Header {
			Executive::finalize_block()
		}

		fn inherent_extrinsics(data: sp_inherents::InherentData) -> Vec<<Block as BlockT>::Extrinsic> {
			data.create_extrinsics()
		}

		fn check_inherents(
			block: <Block as BlockT>::LazyBlock,
			data: sp_inherents::InherentData,
		) -> sp_inherents::CheckInherentsResult {
			data.check_extrinsics(&block)
		}
	}

	impl sp_transaction_pool::runtime_api::TaggedTransactionQueue<Block> for Runtime {
		fn validate_transaction(
			source: TransactionSource,
			tx: <Block as BlockT>::Extrinsic,
			block_hash: <Block as BlockT>::Hash,
		) -> TransactionValidity {
			Executive::validate_transaction(source, tx, block_hash)
		}
	}

	impl sp_offchain::OffchainWorkerApi<Block> for Runtime {
		fn offchain_worker(header: &<Block as BlockT>::Header) {
			Executive::offchain_worker(header)
		}
	}

	impl sp_consensus_babe::BabeApi<Block> for Runtime {
		fn configuration() -> sp_consensus_babe::BabeConfiguration {
			let epoch_config = Babe::epoch_config().unwrap_or(BABE_GENESIS_EPOCH_CONFIG);
			sp_consensus_babe::BabeConfiguration {
				slot_duration: Babe::slot_duration(),
				epoch_length: EpochDuration::get(),
				c: epoch_config.c,
				authorities: Babe::authorities().to_vec(),
				randomness: Babe::randomness(),
				allowed_slots: epoch_config.allowed_slots,
			}
		}

		fn current_epoch_start() -> sp_consensus_babe::Slot {
			Babe::current_epoch_start()
		}

		fn current_epoch() -> sp_consensus_babe::Epoch {
			Babe::current_epoch()
		}

		fn next_epoch() -> sp_consensus_babe::Epoch {
			Babe::next_epoch()
		}

		fn generate_key_ownership_proof(
			_slot: sp_consensus_babe::Slot,
			_authority_id: sp_consensus_babe::AuthorityId,
		) -> Option<sp_consensus_babe::OpaqueKeyOwnershipProof> {
			// No session pallet, so no membership proofs: equivocations are not reported.
			None
		}

		fn submit_report_equivocation_unsigned_extrinsic(
			_equivocation_proof: sp_consensus_babe::EquivocationProof<<Block as BlockT>::Header>,
			_key_owner_proof: sp_consensus_babe::OpaqueKeyOwnershipProof,
		) -> Option<()> {
			None
		}
	}

	impl sp_consensus_grandpa::GrandpaApi<Block> for Runtime {
		fn grandpa_authorities() -> sp_consensus_grandpa::AuthorityList {
			Grandpa::grandpa_authorities()
		}

		fn current_set_id() -> sp_consensus_grandpa::SetId {
			Grandpa::current_set_id()
		}

		fn submit_report_equivocation_unsigned_extrinsic(
			_equivocation_proof: sp_consensus_grandpa::EquivocationProof<
				<Block as BlockT>::Hash,
				NumberFor<Block>,
			>,
			_key_owner_proof: sp_consensus_grandpa::OpaqueKeyOwnershipProof,
		) -> Option<()> {
			None
		}

		fn generate_key_ownership_proof(
			_set_id: sp_consensus_grandpa::SetId,
			_authority_id: GrandpaId,
		) -> Option<sp_consensus_grandpa::OpaqueKeyOwnershipProof> {
			None
		}
	}

	impl sp_session::SessionKeys<Block> for Runtime {
		fn generate_session_keys(
			owner: Vec<u8>,
			seed: Option<Vec<u8>>,
		) -> sp_session::OpaqueGeneratedSessionKeys {
			opaque::SessionKeys::generate(&owner, seed).into()
		}

		fn decode_session_keys(encoded: Vec<u8>) -> Option<Vec<(Vec<u8>, KeyTypeId)>> {
			opaque::SessionKeys::decode_into_raw_public_keys(&encoded)
		}
	}

	impl frame_system_rpc_runtime_api::AccountNonceApi<Block, AccountId, Nonce> for Runtime {
		fn account_nonce(account: AccountId) -> Nonce {
			System::account_nonce(account)
		}
	}

	impl pallet_transaction_payment_rpc_runtime_api::TransactionPaymentApi<Block, Balance> for Runtime {
		fn query_info(
			uxt: <Block as BlockT>::Extrinsic,
			len: u32,
		) -> pallet_transaction_payment_rpc_runtime_api::RuntimeDispatchInfo<Balance> {
			TransactionPayment::query_info(uxt, len)
		}

		fn query_fee_details(
			uxt: <Block as BlockT>::Extrinsic,
			len: u32,
		) -> pallet_transaction_payment::FeeDetails<Balance> {
			TransactionPayment::query_fee_details(uxt, len)
		}

		fn query_weight_to_fee(weight: Weight) -> Balance {
			TransactionPayment::weight_to_fee(weight)
		}

		fn query_length_to_fee(length: u32) -> Balance {
			TransactionPayment::length_to_fee(length)
		}
	}

	impl pallet_transaction_payment_rpc_runtime_api::TransactionPaymentCallApi<Block, Balance, RuntimeCall>
		for Runtime
	{
		fn query_call_info(
			call: RuntimeCall,
			len: u32,
		) -> pallet_transaction_payment::RuntimeDispatchInfo<Balance> {
			TransactionPayment::query_call_info(call, len)
		}

		fn query_call_fee_details(
			call: RuntimeCall,
			len: u32,
		) -> pallet_transaction_payment::FeeDetails<Balance> {
			TransactionPayment::query_call_fee_details(call, len)
		}

		fn query_weight_to_fee(weight: Weight) -> Balance {
			TransactionPayment::weight_to_fee(weight)
		}

		fn query_length_to_fee(length: u32) -> Balance {
			TransactionPayment::length_to_fee(length)
		}
	}

	impl sp_genesis_builder::GenesisBuilder<Block> for Runtime {
		fn build_state(config: Vec<u8>) -> sp_genesis_builder::Result {
			build_state::<RuntimeGenesisConfig>(config)
		}

		fn get_preset(id: &Option<sp_genesis_builder::PresetId>) -> Option<Vec<u8>> {
			get_preset::<RuntimeGenesisConfig>(id, crate::genesis_config_presets::get_preset)
		}

		fn preset_names() -> Vec<sp_genesis_builder::PresetId> {
			crate::genesis_config_presets::preset_names()
		}
	}

	impl touchstone_primitives::TasksApi<Block, AccountId, Balance, BlockNumber> for Runtime {
		fn units_for_solver(solver: AccountId, max: u32) -> Vec<SolverUnit<AccountId, BlockNumber>> {
			Tasks::units_for_solver(&solver, max)
		}

		fn job_state(job: JobId) -> Option<JobState<AccountId, Balance, BlockNumber>> {
			Tasks::job_state(job)
		}

		fn proofs_since(from: BlockNumber) -> Vec<touchstone_primitives::OpenProof<AccountId, BlockNumber>> {
			Tasks::proofs_since(from)
		}
	}

	impl touchstone_primitives::VerificationApi<Block, AccountId> for Runtime {
		fn samples(job: JobId, unit: UnitIndex, verifier: AccountId) -> Option<Vec<u32>> {
			crate::Verification::samples(job, unit, &verifier)
		}

		fn rounds_of(verifier: AccountId) -> Vec<(JobId, UnitIndex)> {
			crate::Verification::rounds_of(&verifier)
		}

		fn forced_error_rate() -> polkadot_sdk::sp_runtime::Perbill {
			crate::configs::ForcedErrorRate::get()
		}
	}

	impl touchstone_primitives::DisputesApi<Block, AccountId, BlockNumber> for Runtime {
		fn dispute(id: u64) -> Option<touchstone_primitives::DisputeStatus<AccountId, BlockNumber>> {
			crate::Disputes::status(id)
		}

		fn unit_disputes(job: JobId, unit: UnitIndex) -> Vec<u64> {
			crate::Disputes::unit_disputes(job, unit)
		}

		fn disputes_of(account: AccountId) -> Vec<u64> {
			crate::Disputes::disputes_of(&account)
		}
	}

	impl touchstone_primitives::referee::RefereeApi<Block> for Runtime {
		fn judge(
			model: touchstone_primitives::ModelArch,
			hyper: touchstone_primitives::HyperParams,
			dispute: touchstone_primitives::referee::Dispute,
			openings: touchstone_primitives::referee::Openings,
		) -> Result<touchstone_primitives::referee::Verdict, touchstone_primitives::referee::RefereeError> {
			touchstone_primitives::referee::judge(&model, &hyper, &dispute, &openings)
		}
	}

	#[cfg(feature = "runtime-benchmarks")]
	impl polkadot_sdk::frame_benchmarking::Benchmark<Block> for Runtime {
		fn benchmark_metadata(extra: bool) -> (
			Vec<polkadot_sdk::frame_benchmarking::BenchmarkList>,
			Vec<polkadot_sdk::frame_support::traits::StorageInfo>,
		) {
			crate::benchmarks::metadata(extra)
		}

		fn dispatch_benchmark(
			config: polkadot_sdk::frame_benchmarking::BenchmarkConfig,
		) -> Result<Vec<polkadot_sdk::frame_benchmarking::BenchmarkBatch>, alloc::string::String> {
			crate::benchmarks::dispatch(config)
		}
	}

	#[cfg(feature = "try-runtime")]
	impl polkadot_sdk::frame_try_runtime::TryRuntime<Block> for Runtime {
		#[allow(clippy::expect_used)]
		fn on_runtime_upgrade(checks: polkadot_sdk::frame_try_runtime::UpgradeCheckSelect) -> (Weight, Weight) {
			// try-runtime runs off chain: a failed check must abort it loudly.
			let weight = Executive::try_runtime_upgrade(checks).expect("runtime upgrade checks pass");
			(weight, crate::configs::RuntimeBlockWeights::get().max_block)
		}

		#[allow(clippy::expect_used)]
		fn execute_block(
			block: <Block as BlockT>::LazyBlock,
			state_root_check: bool,
			signature_check: bool,
			select: polkadot_sdk::frame_try_runtime::TryStateSelect,
		) -> Weight {
			Executive::try_execute_block(block, state_root_check, signature_check, select)
				.expect("block executes with its checks")
		}
	}
}

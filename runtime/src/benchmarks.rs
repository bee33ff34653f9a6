//! The runtime's benchmark registry: what `touchstone-node benchmark pallet` measures.

use crate::{AllPalletsWithSystem, Disputes, Runtime, Staking, Tasks, Verification};
use alloc::{string::String, vec::Vec};
use polkadot_sdk::{
	frame_benchmarking::{BenchmarkBatch, BenchmarkConfig, BenchmarkList},
	frame_support::traits::{StorageInfo, StorageInfoTrait, WhitelistedStorageKeys},
	frame_system::RawOrigin,
	sp_runtime::BoundedVec,
};
use touchstone_primitives::{HardwareProfile, Role};

polkadot_sdk::frame_benchmarking::define_benchmarks!(
	[pallet_touchstone_staking, Staking]
	[pallet_touchstone_tasks, Tasks]
	[pallet_touchstone_disputes, Disputes]
	[pallet_touchstone_verification, Verification]
);

/// Lists the benchmarks and the storage they touch.
pub fn metadata(extra: bool) -> (Vec<BenchmarkList>, Vec<StorageInfo>) {
	let mut list = Vec::<BenchmarkList>::new();
	list_benchmarks!(list, extra);
	(list, AllPalletsWithSystem::storage_info())
}

/// Runs the benchmarks `config` selects.
pub fn dispatch(config: BenchmarkConfig) -> Result<Vec<BenchmarkBatch>, String> {
	let whitelist = AllPalletsWithSystem::whitelisted_storage_keys();
	let mut batches = Vec::<BenchmarkBatch>::new();
	let params = (&config, &whitelist);
	add_benchmarks!(params, batches);
	Ok(batches)
}

/// Registers solvers through the real staking pallet for the tasks benchmarks.
pub struct StakingHelper;

impl pallet_touchstone_tasks::BenchmarkHelper<crate::AccountId> for StakingHelper {
	fn register_solver(who: &crate::AccountId, profile: HardwareProfile) {
		use polkadot_sdk::frame_support::traits::{fungible::Mutate, Get};
		let bond: crate::Balance = <Runtime as pallet_touchstone_staking::Config>::MinSolverBond::get();
		let _ = crate::Balances::set_balance(who, bond.saturating_mul(1_000));
		let bonds = BoundedVec::truncate_from(alloc::vec![(Role::Solver, bond)]);
		let _ = Staking::register(RawOrigin::Signed(who.clone()).into(), profile, bonds, 0);
	}

	fn register_unfit_solver(who: &crate::AccountId) {
		// A CPU node with the least hardware: it meets no GPU requirement.
		let profile = HardwareProfile {
			device: touchstone_primitives::DeviceKind::Cpu,
			model: BoundedVec::truncate_from(b"unfit".to_vec()),
			memory_mib: 1,
			throughput_gflops: 1,
			bandwidth_mbps: 0,
			region: BoundedVec::truncate_from(b"nowhere".to_vec()),
		};
		Self::register_solver(who, profile);
	}

	fn ready_proof(job: touchstone_primitives::JobId, unit: touchstone_primitives::UnitIndex, solver: &crate::AccountId) {
		commit_secret(job, unit, solver);
	}

	fn ready_finalize(job: touchstone_primitives::JobId, unit: touchstone_primitives::UnitIndex) {
		// The round its hooks would have drawn and concluded: the benchmarks cannot wait
		// for BABE.
		settle_round(job, unit, |round| round.concluded = true);
	}
}

/// Marks the solver's forced-error secret of a unit's round revealed (the unit was not
/// forced), then applies `change` to the round.
fn settle_round(
	job: touchstone_primitives::JobId,
	unit: touchstone_primitives::UnitIndex,
	change: impl FnOnce(&mut pallet_touchstone_verification::RoundOf<Runtime>),
) {
	pallet_touchstone_verification::Rounds::<Runtime>::mutate((job, unit), |round| {
		if let Some(round) = round {
			round.secret = pallet_touchstone_verification::SolverSecret::Revealed;
			change(round);
		}
	});
}

/// Stores `solver`'s forced-error secret commitment for a unit, with its randomness
/// recorded as the hook would a block later: the benchmarks cannot wait for BABE.
fn commit_secret(job: touchstone_primitives::JobId, unit: touchstone_primitives::UnitIndex, solver: &crate::AccountId) {
	pallet_touchstone_verification::Secrets::<Runtime>::insert(
		(job, unit),
		pallet_touchstone_verification::SecretCommitment {
			solver: solver.clone(),
			hash: polkadot_sdk::sp_core::H256([0; 32]),
			committed_at: 0,
			rate: polkadot_sdk::sp_runtime::Perbill::zero(),
			random: Some([0; 32]),
		},
	);
}

impl pallet_touchstone_disputes::BenchmarkHelper<crate::AccountId, crate::Balance> for StakingHelper {
	fn register(who: &crate::AccountId, role: Role) {
		use polkadot_sdk::frame_support::traits::{fungible::Mutate, Get};
		let bond: crate::Balance = match role {
			Role::Solver => <Runtime as pallet_touchstone_staking::Config>::MinSolverBond::get(),
			Role::Verifier => <Runtime as pallet_touchstone_staking::Config>::MinVerifierBond::get(),
			Role::Challenger => <Runtime as pallet_touchstone_staking::Config>::MinChallengerBond::get(),
		};
		let _ = crate::Balances::set_balance(who, bond.saturating_mul(1_000));
		let bonds = BoundedVec::truncate_from(alloc::vec![(role, bond)]);
		let profile = HardwareProfile {
			device: touchstone_primitives::DeviceKind::Cpu,
			model: BoundedVec::truncate_from(b"bench".to_vec()),
			memory_mib: 65_536,
			throughput_gflops: 1_000,
			bandwidth_mbps: 1_000,
			region: BoundedVec::truncate_from(b"eu".to_vec()),
		};
		let _ = Staking::register(RawOrigin::Signed(who.clone()).into(), profile, bonds, 0);
	}

	fn prove(
		owner: &crate::AccountId,
		spec: touchstone_primitives::JobSpec<crate::Balance>,
		solver: &crate::AccountId,
		proof: touchstone_primitives::LearningProof,
		final_state: touchstone_primitives::referee::BoundaryOpening,
	) -> Option<touchstone_primitives::JobId> {
		let job = Self::take(owner, spec, solver)?;
		commit_secret(job, 0, solver);
		Tasks::submit_proof(RawOrigin::Signed(solver.clone()).into(), job, 0, proof, final_state, None).ok()?;
		// A ruling waits for the solver's secret: revealed, the unit was not forced.
		settle_round(job, 0, |_| {});
		Some(job)
	}

	fn take(
		owner: &crate::AccountId,
		mut spec: touchstone_primitives::JobSpec<crate::Balance>,
		solver: &crate::AccountId,
	) -> Option<touchstone_primitives::JobId> {
		use polkadot_sdk::frame_support::traits::{fungible::Mutate, Get};
		let price: crate::Balance = <Runtime as pallet_touchstone_tasks::Config>::MinPricePerUnit::get();
		spec.price_per_unit = price;
		spec.budget = price.saturating_mul(64);
		let _ = crate::Balances::set_balance(owner, crate::UNIT.saturating_mul(1_000));
		let job = pallet_touchstone_tasks::NextJobId::<Runtime>::get();
		Tasks::submit_job(RawOrigin::Signed(owner.clone()).into(), spec).ok()?;
		Tasks::claim_unit(RawOrigin::Signed(solver.clone()).into(), job, 0).ok()?;
		Some(job)
	}
}

//! Benchmarks of every call of the staking pallet, at their worst case.

use super::*;
use crate::Pallet as Staking;
use alloc::vec;
use polkadot_sdk::{
	frame_benchmarking::v2::*,
	frame_support::traits::{
		fungible::{Inspect, Mutate},
		Get,
	},
	frame_system::RawOrigin,
	sp_runtime::{traits::{Bounded, Saturating}, BoundedVec},
};
use touchstone_primitives::{DeviceKind, HardwareProfile, Role};

/// The largest profile the runtime accepts: worst case for encoding and storage.
fn largest_profile<T: Config>() -> HardwareProfile {
	HardwareProfile {
		device: DeviceKind::Gpu,
		model: BoundedVec::truncate_from(vec![b'm'; touchstone_primitives::MAX_DEVICE_MODEL_LEN as usize]),
		memory_mib: 81_920,
		throughput_gflops: 900_000,
		bandwidth_mbps: 100_000,
		region: BoundedVec::truncate_from(vec![b'r'; touchstone_primitives::MAX_REGION_LEN as usize]),
	}
}

fn funded<T: Config>(name: &'static str) -> T::AccountId {
	let who: T::AccountId = account(name, 0, 0);
	let plenty = BalanceOf::<T>::max_value() / 4u32.into();
	T::Currency::set_balance(&who, plenty);
	who
}

fn every_role<T: Config>() -> RoleBonds<BalanceOf<T>> {
	BoundedVec::truncate_from(Role::ALL.iter().map(|role| (*role, Staking::<T>::min_bond(*role))).collect())
}

fn registered<T: Config>(name: &'static str) -> T::AccountId {
	let who = funded::<T>(name);
	let origin = RawOrigin::Signed(who.clone()).into();
	let _ = Staking::<T>::register(origin, largest_profile::<T>(), every_role::<T>(), 0u32.into());
	who
}

#[benchmarks]
mod benchmarks {
	use super::*;

	#[benchmark]
	fn register() {
		let caller = funded::<T>("caller");
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), largest_profile::<T>(), every_role::<T>(), 0u32.into());
		assert!(Nodes::<T>::contains_key(&caller));
	}

	#[benchmark]
	fn update_profile() {
		let caller = registered::<T>("caller");
		let mut profile = largest_profile::<T>();
		profile.memory_mib = 1;
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), profile);
		assert_eq!(Nodes::<T>::get(&caller).map(|node| node.profile.memory_mib), Some(1));
	}

	#[benchmark]
	fn bond_more() -> Result<(), BenchmarkError> {
		let caller = funded::<T>("caller");
		let origin = RawOrigin::Signed(caller.clone()).into();
		let solver_only = BoundedVec::truncate_from(vec![(Role::Solver, T::MinSolverBond::get())]);
		Staking::<T>::register(origin, largest_profile::<T>(), solver_only, 0u32.into())
			.map_err(|_| BenchmarkError::Stop("register failed"))?;
		// Worst case: taking up a new role.
		let amount = T::MinVerifierBond::get();
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), Role::Verifier, amount);
		assert_eq!(Staking::<T>::bonded(&caller, Role::Verifier), amount);
		Ok(())
	}

	#[benchmark]
	fn unbond() {
		let caller = registered::<T>("caller");
		let amount = T::MinSolverBond::get();
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), Role::Solver, amount);
		assert_eq!(Unbonding::<T>::get(&caller).len(), 1);
	}

	#[benchmark]
	fn withdraw_unbonded(c: Linear<1, { T::MaxUnbondingChunks::get() }>) -> Result<(), BenchmarkError> {
		let caller = registered::<T>("caller");
		let extra = T::MinSolverBond::get().saturating_mul(c.into());
		Staking::<T>::bond_more(RawOrigin::Signed(caller.clone()).into(), Role::Solver, extra)
			.map_err(|_| BenchmarkError::Stop("bond_more failed"))?;
		for _ in 0..c {
			Staking::<T>::unbond(RawOrigin::Signed(caller.clone()).into(), Role::Solver, T::MinSolverBond::get())
				.map_err(|_| BenchmarkError::Stop("unbond failed"))?;
		}
		let later = frame_system::Pallet::<T>::block_number().saturating_add(T::UnbondingPeriod::get());
		frame_system::Pallet::<T>::set_block_number(later);
		let before = T::Currency::balance(&caller);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()));
		assert!(T::Currency::balance(&caller) > before);
		Ok(())
	}

	#[benchmark]
	fn heartbeat() {
		let caller = registered::<T>("caller");
		#[extrinsic_call]
		_(RawOrigin::Signed(caller));
	}

	#[benchmark]
	fn deregister() -> Result<(), BenchmarkError> {
		let caller = funded::<T>("caller");
		let solver_only = BoundedVec::truncate_from(vec![(Role::Solver, T::MinSolverBond::get())]);
		Staking::<T>::register(RawOrigin::Signed(caller.clone()).into(), largest_profile::<T>(), solver_only, 0u32.into())
			.map_err(|_| BenchmarkError::Stop("register failed"))?;
		Staking::<T>::unbond(RawOrigin::Signed(caller.clone()).into(), Role::Solver, T::MinSolverBond::get())
			.map_err(|_| BenchmarkError::Stop("unbond failed"))?;
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()));
		assert!(!Nodes::<T>::contains_key(&caller));
		Ok(())
	}

	#[benchmark]
	fn set_min_price() {
		let caller = registered::<T>("caller");
		let price: BalanceOf<T> = 1_000u32.into();
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), price);
		assert_eq!(Nodes::<T>::get(&caller).map(|node| node.min_price), Some(price));
	}

	#[benchmark]
	fn set_endpoint() {
		// Worst case: the longest endpoint the runtime accepts, all checked as UTF-8.
		let caller = registered::<T>("caller");
		let mut address = b"/dns/".to_vec();
		address.resize(T::MaxEndpointLength::get() as usize, b'a');
		let endpoint = BoundedVec::truncate_from(address);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), Some(endpoint.clone()));
		assert_eq!(Endpoints::<T>::get(&caller), Some(endpoint));
	}

	#[benchmark]
	fn reap() -> Result<(), BenchmarkError> {
		// Worst case: every role bonded, so every bond moves to unbonding, and a full set
		// of matured chunks to release first.
		let idle = registered::<T>("idle");
		let chunks = T::MaxUnbondingChunks::get();
		let extra = T::MinSolverBond::get().saturating_mul(chunks.into());
		Staking::<T>::bond_more(RawOrigin::Signed(idle.clone()).into(), Role::Solver, extra)
			.map_err(|_| BenchmarkError::Stop("bond_more failed"))?;
		for _ in 0..chunks {
			Staking::<T>::unbond(RawOrigin::Signed(idle.clone()).into(), Role::Solver, T::MinSolverBond::get())
				.map_err(|_| BenchmarkError::Stop("unbond failed"))?;
		}
		let caller = funded::<T>("caller");
		let later = frame_system::Pallet::<T>::block_number()
			.saturating_add(T::ReapDelay::get())
			.saturating_add(T::UnbondingPeriod::get())
			.saturating_add(1u32.into());
		frame_system::Pallet::<T>::set_block_number(later);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), idle.clone());
		assert!(!Nodes::<T>::contains_key(&idle));
		assert_eq!(Unbonding::<T>::get(&idle).len(), Role::ALL.len());
		Ok(())
	}

	impl_benchmark_test_suite!(Staking, crate::mock::ExtBuilder::default().build(), crate::mock::Test);
}

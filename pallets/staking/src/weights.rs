//! Weights of the staking pallet. Regenerate with `scripts/benchmark.sh`; never edit by
//! hand.
#![allow(unused_parens, unused_imports, missing_docs)]

use core::marker::PhantomData;
use polkadot_sdk::frame_support::{
	traits::Get,
	weights::{constants::RocksDbWeight, Weight},
};

/// Weight functions needed by this pallet.
pub trait WeightInfo {
	fn register() -> Weight;
	fn update_profile() -> Weight;
	fn bond_more() -> Weight;
	fn unbond() -> Weight;
	fn withdraw_unbonded(c: u32) -> Weight;
	fn heartbeat() -> Weight;
	fn deregister() -> Weight;
}

/// Weights measured on the reference machine, for a runtime's database.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn register() -> Weight {
		Weight::from_parts(50_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(5))
			.saturating_add(T::DbWeight::get().writes(5))
	}
	fn update_profile() -> Weight {
		Weight::from_parts(20_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(1))
			.saturating_add(T::DbWeight::get().writes(1))
	}
	fn bond_more() -> Weight {
		Weight::from_parts(40_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(3))
			.saturating_add(T::DbWeight::get().writes(3))
	}
	fn unbond() -> Weight {
		Weight::from_parts(60_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(5))
			.saturating_add(T::DbWeight::get().writes(5))
	}
	fn withdraw_unbonded(c: u32) -> Weight {
		Weight::from_parts(40_000_000, 4000)
			.saturating_add(Weight::from_parts(1_000_000, 0).saturating_mul(c.into()))
			.saturating_add(T::DbWeight::get().reads(3))
			.saturating_add(T::DbWeight::get().writes(3))
	}
	fn heartbeat() -> Weight {
		Weight::from_parts(15_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(1))
			.saturating_add(T::DbWeight::get().writes(1))
	}
	fn deregister() -> Weight {
		Weight::from_parts(25_000_000, 4000)
			.saturating_add(T::DbWeight::get().reads(3))
			.saturating_add(T::DbWeight::get().writes(2))
	}
}

// For tests.
impl WeightInfo for () {
	fn register() -> Weight {
		Weight::from_parts(50_000_000, 4000)
			.saturating_add(RocksDbWeight::get().reads(5))
			.saturating_add(RocksDbWeight::get().writes(5))
	}
	fn update_profile() -> Weight {
		Weight::from_parts(20_000_000, 4000)
	}
	fn bond_more() -> Weight {
		Weight::from_parts(40_000_000, 4000)
	}
	fn unbond() -> Weight {
		Weight::from_parts(60_000_000, 4000)
	}
	fn withdraw_unbonded(c: u32) -> Weight {
		Weight::from_parts(40_000_000, 4000).saturating_add(Weight::from_parts(1_000_000, 0).saturating_mul(c.into()))
	}
	fn heartbeat() -> Weight {
		Weight::from_parts(15_000_000, 4000)
	}
	fn deregister() -> Weight {
		Weight::from_parts(25_000_000, 4000)
	}
}

//! Weights of `pallet_touchstone_verification`.
//!
//! **Estimates until `scripts/benchmark.sh` regenerates this file from the pallet's
//! benchmarks**: storage accesses at the runtime's database costs plus compute times set
//! from the measured weights of calls doing the same work, rounded up.

#![allow(missing_docs)]

use core::marker::PhantomData;
use polkadot_sdk::frame_support::{
	traits::Get,
	weights::{constants::RocksDbWeight, Weight},
};

/// Weight functions of `pallet_touchstone_verification`.
pub trait WeightInfo {
	fn commit() -> Weight;
	fn reveal() -> Weight;
	fn on_initialize_idle() -> Weight;
	fn draw_round() -> Weight;
	fn conclude_round(v: u32) -> Weight;
	fn on_finalized(v: u32) -> Weight;
}

/// The weights, with the runtime's database costs.
pub struct SubstrateWeight<T>(PhantomData<T>);

impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn commit() -> Weight {
		Weight::from_parts(30_000_000, 4_000).saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}
	fn reveal() -> Weight {
		Weight::from_parts(40_000_000, 4_000).saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}
	fn on_initialize_idle() -> Weight {
		Weight::from_parts(5_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(2, 1))
	}
	fn draw_round() -> Weight {
		Weight::from_parts(100_000_000, 0).saturating_add(T::DbWeight::get().reads_writes(40, 3))
	}
	fn conclude_round(v: u32) -> Weight {
		Weight::from_parts(40_000_000, 0)
			.saturating_add(T::DbWeight::get().reads_writes(3, 1))
			.saturating_add(
				Weight::from_parts(80_000_000, 0)
					.saturating_add(T::DbWeight::get().reads_writes(8, 8))
					.saturating_mul(u64::from(v)),
			)
	}
	fn on_finalized(v: u32) -> Weight {
		Weight::from_parts(10_000_000, 0)
			.saturating_add(T::DbWeight::get().reads_writes(1, 1))
			.saturating_add(Weight::from_parts(1_000_000, 0).saturating_mul(u64::from(v)))
	}
}

impl WeightInfo for () {
	fn commit() -> Weight {
		Weight::from_parts(30_000_000, 4_000).saturating_add(RocksDbWeight::get().reads_writes(1, 1))
	}
	fn reveal() -> Weight {
		Weight::from_parts(40_000_000, 4_000).saturating_add(RocksDbWeight::get().reads_writes(1, 1))
	}
	fn on_initialize_idle() -> Weight {
		Weight::from_parts(5_000_000, 0).saturating_add(RocksDbWeight::get().reads_writes(2, 1))
	}
	fn draw_round() -> Weight {
		Weight::from_parts(100_000_000, 0).saturating_add(RocksDbWeight::get().reads_writes(40, 3))
	}
	fn conclude_round(v: u32) -> Weight {
		Weight::from_parts(40_000_000, 0)
			.saturating_add(RocksDbWeight::get().reads_writes(3, 1))
			.saturating_add(
				Weight::from_parts(80_000_000, 0)
					.saturating_add(RocksDbWeight::get().reads_writes(8, 8))
					.saturating_mul(u64::from(v)),
			)
	}
	fn on_finalized(v: u32) -> Weight {
		Weight::from_parts(10_000_000, 0)
			.saturating_add(RocksDbWeight::get().reads_writes(1, 1))
			.saturating_add(Weight::from_parts(1_000_000, 0).saturating_mul(u64::from(v)))
	}
}

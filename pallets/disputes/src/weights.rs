//! Weights of the disputes pallet's calls.
//!
//! Placeholder figures until the benchmarks run; see `benchmarking.rs`.
#![allow(unused_parens, unused_imports, missing_docs)]

use polkadot_sdk::frame_support::{traits::Get, weights::{constants::RocksDbWeight, Weight}};
use core::marker::PhantomData;

/// The weight functions of the disputes pallet.
pub trait WeightInfo {
	fn challenge() -> Weight;
	fn reveal() -> Weight;
	fn bind_step() -> Weight;
	fn bind_operator() -> Weight;
	fn resolve() -> Weight;
	fn time_out() -> Weight;
}

/// Weights for the runtime.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn challenge() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(T::DbWeight::get().reads_writes(8, 6))
	}
	fn reveal() -> Weight {
		Weight::from_parts(50_000_000, 10_000).saturating_add(T::DbWeight::get().reads_writes(4, 2))
	}
	fn bind_step() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(T::DbWeight::get().reads_writes(4, 2))
	}
	fn bind_operator() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(T::DbWeight::get().reads_writes(4, 2))
	}
	fn resolve() -> Weight {
		Weight::from_parts(100_000_000_000, 400_000).saturating_add(T::DbWeight::get().reads_writes(20, 20))
	}
	fn time_out() -> Weight {
		Weight::from_parts(200_000_000, 10_000).saturating_add(T::DbWeight::get().reads_writes(20, 20))
	}
}

impl WeightInfo for () {
	fn challenge() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(RocksDbWeight::get().reads_writes(8, 6))
	}
	fn reveal() -> Weight {
		Weight::from_parts(50_000_000, 10_000).saturating_add(RocksDbWeight::get().reads_writes(4, 2))
	}
	fn bind_step() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(RocksDbWeight::get().reads_writes(4, 2))
	}
	fn bind_operator() -> Weight {
		Weight::from_parts(100_000_000, 10_000).saturating_add(RocksDbWeight::get().reads_writes(4, 2))
	}
	fn resolve() -> Weight {
		Weight::from_parts(100_000_000_000, 400_000).saturating_add(RocksDbWeight::get().reads_writes(20, 20))
	}
	fn time_out() -> Weight {
		Weight::from_parts(200_000_000, 10_000).saturating_add(RocksDbWeight::get().reads_writes(20, 20))
	}
}

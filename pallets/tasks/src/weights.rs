//! Weights of the tasks pallet. Regenerate with `scripts/benchmark.sh`; never edit by
//! hand.
#![allow(unused_parens, unused_imports, missing_docs)]

use core::marker::PhantomData;
use polkadot_sdk::frame_support::{
	traits::Get,
	weights::{constants::RocksDbWeight, Weight},
};

/// Weight functions needed by this pallet.
pub trait WeightInfo {
	fn submit_job(u: u32, n: u32) -> Weight;
	fn cancel_job(u: u32) -> Weight;
	fn claim_unit() -> Weight;
	fn accept_unit() -> Weight;
	fn commit_checkpoint() -> Weight;
	fn submit_proof() -> Weight;
	fn finalize_unit(u: u32) -> Weight;
	fn sweep_deadlines(t: u32) -> Weight;
	fn schedule(a: u32, n: u32) -> Weight;
}

/// Weights measured on the reference machine, for a runtime's database.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn submit_job(u: u32, n: u32) -> Weight {
		Weight::from_parts(80_000_000, 8000)
			.saturating_add(Weight::from_parts(5_000_000, 500).saturating_mul(u.into()))
			.saturating_add(T::DbWeight::get().reads(n.into()))
			.saturating_add(T::DbWeight::get().reads(6))
			.saturating_add(T::DbWeight::get().writes(5))
			.saturating_add(T::DbWeight::get().writes(u.into()))
	}
	fn cancel_job(u: u32) -> Weight {
		Weight::from_parts(60_000_000, 8000)
			.saturating_add(Weight::from_parts(10_000_000, 500).saturating_mul(u.into()))
			.saturating_add(T::DbWeight::get().reads(4))
			.saturating_add(T::DbWeight::get().reads(u.into()))
			.saturating_add(T::DbWeight::get().writes(4))
			.saturating_add(T::DbWeight::get().writes(u.into()))
	}
	fn claim_unit() -> Weight {
		Weight::from_parts(60_000_000, 8000)
			.saturating_add(T::DbWeight::get().reads(8))
			.saturating_add(T::DbWeight::get().writes(4))
	}
	fn accept_unit() -> Weight {
		Weight::from_parts(40_000_000, 8000)
			.saturating_add(T::DbWeight::get().reads(2))
			.saturating_add(T::DbWeight::get().writes(3))
	}
	fn commit_checkpoint() -> Weight {
		Weight::from_parts(40_000_000, 8000)
			.saturating_add(T::DbWeight::get().reads(2))
			.saturating_add(T::DbWeight::get().writes(3))
	}
	fn submit_proof() -> Weight {
		Weight::from_parts(50_000_000, 8000)
			.saturating_add(T::DbWeight::get().reads(4))
			.saturating_add(T::DbWeight::get().writes(5))
	}
	fn finalize_unit(u: u32) -> Weight {
		Weight::from_parts(90_000_000, 8000)
			.saturating_add(Weight::from_parts(5_000_000, 500).saturating_mul(u.into()))
			.saturating_add(T::DbWeight::get().reads(8))
			.saturating_add(T::DbWeight::get().reads(u.into()))
			.saturating_add(T::DbWeight::get().writes(7))
	}
	fn sweep_deadlines(t: u32) -> Weight {
		Weight::from_parts(5_000_000, 1000)
			.saturating_add(Weight::from_parts(40_000_000, 4000).saturating_mul(t.into()))
			.saturating_add(T::DbWeight::get().reads(1))
			.saturating_add(T::DbWeight::get().reads((5u64).saturating_mul(t.into())))
			.saturating_add(T::DbWeight::get().writes((5u64).saturating_mul(t.into())))
	}
	fn schedule(a: u32, n: u32) -> Weight {
		Weight::from_parts(5_000_000, 1000)
			.saturating_add(Weight::from_parts(40_000_000, 4000).saturating_mul(a.into()))
			.saturating_add(Weight::from_parts(10_000_000, 500).saturating_mul(n.into()))
			.saturating_add(T::DbWeight::get().reads(2))
			.saturating_add(T::DbWeight::get().reads((3u64).saturating_mul(a.into())))
			.saturating_add(T::DbWeight::get().reads((4u64).saturating_mul(n.into())))
			.saturating_add(T::DbWeight::get().writes((3u64).saturating_mul(a.into())))
	}
}

// For tests.
impl WeightInfo for () {
	fn submit_job(u: u32, n: u32) -> Weight {
		Weight::from_parts(80_000_000, 8000)
			.saturating_add(RocksDbWeight::get().writes(u.into()))
			.saturating_add(RocksDbWeight::get().reads(n.into()))
	}
	fn cancel_job(u: u32) -> Weight {
		Weight::from_parts(60_000_000, 8000).saturating_add(RocksDbWeight::get().writes(u.into()))
	}
	fn claim_unit() -> Weight {
		Weight::from_parts(60_000_000, 8000)
	}
	fn accept_unit() -> Weight {
		Weight::from_parts(40_000_000, 8000)
	}
	fn commit_checkpoint() -> Weight {
		Weight::from_parts(40_000_000, 8000)
	}
	fn submit_proof() -> Weight {
		Weight::from_parts(50_000_000, 8000)
	}
	fn finalize_unit(u: u32) -> Weight {
		Weight::from_parts(90_000_000, 8000).saturating_add(RocksDbWeight::get().reads(u.into()))
	}
	fn sweep_deadlines(t: u32) -> Weight {
		Weight::from_parts(40_000_000, 4000).saturating_mul(t.into())
	}
	fn schedule(a: u32, n: u32) -> Weight {
		Weight::from_parts(40_000_000, 4000)
			.saturating_mul(a.into())
			.saturating_add(Weight::from_parts(10_000_000, 500).saturating_mul(n.into()))
	}
}

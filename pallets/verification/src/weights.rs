//! Weights of `pallet_touchstone_verification`.
//!
//! **Estimates, not yet measured**: this pallet has no benchmarks yet. Each figure is
//! its storage accesses at the runtime's `RocksDbWeight`-style costs plus a compute time
//! set from the measured weights of calls that do the same work (`staking.slash` inside
//! `disputes.time_out`, `tasks.finalize_unit`'s escrow transfers), rounded up.
//! `scripts/benchmark.sh` will replace this file once the benchmarks exist.

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
	/// `on_initialize` concluding `concluded` rounds of `verifiers` verifiers each (a
	/// missed reveal is slashed for each) and making `drawn` draws, less the draws' own
	/// picks, which the staking pallet's `draw_weight` adds.
	fn on_initialize(concluded: u32, drawn: u32, verifiers: u32) -> Weight;
	/// `on_finalized` and paying `verifiers` verifiers from escrow.
	fn on_finalized(verifiers: u32) -> Weight;
}

/// The weights, with the runtime's database costs.
pub struct SubstrateWeight<T>(PhantomData<T>);

fn estimate(db: Weight, concluded: u32, drawn: u32, verifiers: u32) -> Weight {
	// Per concluded round: the round, the unit and its job read, the round written, and
	// per verifier a slash (bond, unbonding, reputation, draw weight: 8 reads, 8 writes).
	let per_round = Weight::from_parts(40_000_000, 0)
		.saturating_add(db.saturating_mul(3))
		.saturating_add(
			Weight::from_parts(80_000_000, 0).saturating_add(db.saturating_mul(8)).saturating_mul(u64::from(verifiers)),
		);
	// Per draw: the queue entry's round, the randomness, the unit and its job read, and
	// the round and its closing list written.
	let per_draw = Weight::from_parts(40_000_000, 0).saturating_add(db.saturating_mul(6));
	Weight::from_parts(10_000_000, 0)
		.saturating_add(db.saturating_mul(2))
		.saturating_add(per_round.saturating_mul(u64::from(concluded)))
		.saturating_add(per_draw.saturating_mul(u64::from(drawn)))
}

impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	fn commit() -> Weight {
		Weight::from_parts(30_000_000, 4_000).saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}
	fn reveal() -> Weight {
		Weight::from_parts(40_000_000, 4_000).saturating_add(T::DbWeight::get().reads_writes(1, 1))
	}
	fn on_initialize(concluded: u32, drawn: u32, verifiers: u32) -> Weight {
		let db = T::DbWeight::get().reads_writes(1, 1);
		estimate(db, concluded, drawn, verifiers)
	}
	fn on_finalized(verifiers: u32) -> Weight {
		// The round taken, and per verifier an escrow transfer (3 reads, 3 writes).
		Weight::from_parts(10_000_000, 0)
			.saturating_add(T::DbWeight::get().reads_writes(1, 1))
			.saturating_add(
				Weight::from_parts(50_000_000, 0)
					.saturating_add(T::DbWeight::get().reads_writes(3, 3))
					.saturating_mul(u64::from(verifiers)),
			)
	}
}

/// The same estimates at RocksDB costs, for tests.
impl WeightInfo for () {
	fn commit() -> Weight {
		Weight::from_parts(30_000_000, 4_000).saturating_add(RocksDbWeight::get().reads_writes(1, 1))
	}
	fn reveal() -> Weight {
		Weight::from_parts(40_000_000, 4_000).saturating_add(RocksDbWeight::get().reads_writes(1, 1))
	}
	fn on_initialize(concluded: u32, drawn: u32, verifiers: u32) -> Weight {
		estimate(RocksDbWeight::get().reads_writes(1, 1), concluded, drawn, verifiers)
	}
	fn on_finalized(verifiers: u32) -> Weight {
		Weight::from_parts(10_000_000, 0).saturating_add(
			Weight::from_parts(50_000_000, 0)
				.saturating_add(RocksDbWeight::get().reads_writes(3, 3))
				.saturating_mul(u64::from(verifiers)),
		)
	}
}

//! The runtime's parameters agree with each other where the pallets cannot check it.
#![allow(clippy::arithmetic_side_effects)]

use polkadot_sdk::frame_support::traits::Get;
use touchstone_runtime::{
	configs::{DISPUTE_RESPONSE_WINDOW, MAX_DISPUTE_PHASES},
	Runtime,
};

/// A solver whose proof is disputed cannot unbond out of reach of the slash: its funds
/// stay slashable while unbonding, for longer than a challenge window and the longest
/// dispute that can follow it.
#[test]
fn unbonding_outlasts_the_longest_dispute() {
	let unbonding: u32 = <Runtime as pallet_touchstone_staking::Config>::UnbondingPeriod::get();
	let window: u32 = <Runtime as pallet_touchstone_tasks::Config>::ChallengeWindow::get();
	let response: u32 = <Runtime as pallet_touchstone_disputes::Config>::ResponseWindow::get();
	assert_eq!(response, DISPUTE_RESPONSE_WINDOW);
	let longest_dispute = MAX_DISPUTE_PHASES * response;
	assert!(unbonding > window + longest_dispute, "unbonding {unbonding} ≤ {window} + {longest_dispute}");
}

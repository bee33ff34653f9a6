//! Tests of every call of the staking pallet: each success path with its event, each
//! error path with `assert_noop!`, and the traits other pallets use.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate::{mock::*, Endpoints, Error, Event, HoldReason, Nodes, Reputation, RoleSet, Unbonding, UnbondingChunk};
use polkadot_sdk::{
	frame_support::{
		assert_noop, assert_ok,
		traits::fungible::{Inspect, InspectHold},
	},
	sp_runtime::{BoundedVec, Perbill},
};
use touchstone_primitives::{
	traits::{ComputeNodes, Slash},
	DeviceKind, HardwareRequirements, Role, SlashReason,
};

fn register_solver(who: u64) {
	assert_ok!(Staking::register(RuntimeOrigin::signed(who), gpu_profile(), min_bonds(&[Role::Solver]), 0));
}

fn held(who: u64, reason: HoldReason) -> u64 {
	Balances::balance_on_hold(&RuntimeHoldReason::Staking(reason), &who)
}

fn requirements(memory: u32) -> HardwareRequirements {
	HardwareRequirements {
		device: Some(DeviceKind::Gpu),
		min_memory_mib: memory,
		min_throughput_gflops: 1,
		min_bandwidth_mbps: 0,
		region: None,
	}
}

mod register {
	use super::*;

	#[test]
	fn registers_and_holds_each_bond() {
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver, Role::Verifier]);
			assert_ok!(Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds, 0));
			let node = Nodes::<Test>::get(1).unwrap();
			assert!(node.roles.contains(Role::Solver) && node.roles.contains(Role::Verifier));
			assert!(!node.roles.contains(Role::Challenger));
			assert_eq!(node.reputation, Reputation::default());
			assert_eq!(held(1, HoldReason::SolverBond), MIN_SOLVER_BOND);
			assert_eq!(held(1, HoldReason::VerifierBond), MIN_VERIFIER_BOND);
			assert_eq!(
				staking_events(),
				vec![
					Event::NodeRegistered {
						who: 1,
						roles: vec![Role::Solver, Role::Verifier],
						profile: gpu_profile(),
						min_price: 0,
					},
					Event::Bonded { who: 1, role: Role::Solver, amount: MIN_SOLVER_BOND },
					Event::Bonded { who: 1, role: Role::Verifier, amount: MIN_VERIFIER_BOND },
				]
			);
		});
	}

	#[test]
	fn rejects_a_second_registration() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), min_bonds(&[Role::Verifier]), 0),
				Error::<Test>::AlreadyRegistered
			);
		});
	}

	#[test]
	fn rejects_more_than_max_nodes() {
		let nodes = u64::from(MAX_NODES);
		let funded = (1..=nodes + 1).fold(ExtBuilder::default(), |builder, who| builder.balance(who, 10_000));
		funded.build_and_execute(|| {
			(1..=nodes).for_each(register_solver);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(nodes + 1), gpu_profile(), min_bonds(&[Role::Solver]), 0),
				Error::<Test>::TooManyNodes
			);
		});
	}

	#[test]
	fn rejects_no_roles_and_duplicates() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), BoundedVec::new(), 0),
				Error::<Test>::NoRoles
			);
			let twice = BoundedVec::truncate_from(vec![(Role::Solver, 100), (Role::Solver, 100)]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), twice, 0),
				Error::<Test>::DuplicateRole
			);
		});
	}

	#[test]
	fn rejects_a_bond_below_the_minimum() {
		ExtBuilder::default().build_and_execute(|| {
			let low = BoundedVec::truncate_from(vec![(Role::Solver, MIN_SOLVER_BOND - 1)]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), low, 0),
				Error::<Test>::BondBelowMinimum
			);
		});
	}

	#[test]
	fn rejects_bonds_the_account_cannot_cover_and_changes_nothing() {
		ExtBuilder::default().balance(1, MIN_SOLVER_BOND + 10).build_and_execute(|| {
			// The first hold succeeds, the second fails: the whole call must roll back.
			let bonds = min_bonds(&[Role::Solver, Role::Verifier]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds, 0),
				Error::<Test>::InsufficientBalance
			);
			assert_eq!(held(1, HoldReason::SolverBond), 0);
		});
	}

	#[test]
	fn rejects_empty_profiles() {
		// Over-long strings do not decode: the types' bounds are the protocol's.
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver]);
			let mut empty = gpu_profile();
			empty.memory_mib = 0;
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), empty, bonds, 0),
				Error::<Test>::EmptyProfile
			);
		});
	}
}

mod update_profile {
	use super::*;

	#[test]
	fn updates_the_profile() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			staking_events();
			let mut profile = gpu_profile();
			profile.memory_mib = 81_920;
			assert_ok!(Staking::update_profile(RuntimeOrigin::signed(1), profile.clone()));
			assert_eq!(Nodes::<Test>::get(1).unwrap().profile, profile);
			System::assert_last_event(Event::ProfileUpdated { who: 1, profile }.into());
		});
	}

	#[test]
	fn rejects_unregistered_and_invalid() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::update_profile(RuntimeOrigin::signed(1), gpu_profile()),
				Error::<Test>::NotRegistered
			);
			register_solver(1);
			let mut empty = gpu_profile();
			empty.throughput_gflops = 0;
			assert_noop!(
				Staking::update_profile(RuntimeOrigin::signed(1), empty),
				Error::<Test>::EmptyProfile
			);
		});
	}
}

mod bond_more {
	use super::*;

	#[test]
	fn tops_up_a_role_and_takes_up_a_new_one() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 5));
			System::assert_last_event(Event::Bonded { who: 1, role: Role::Solver, amount: 5 }.into());
			assert_eq!(held(1, HoldReason::SolverBond), MIN_SOLVER_BOND + 5);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Challenger, MIN_CHALLENGER_BOND));
			assert!(Nodes::<Test>::get(1).unwrap().roles.contains(Role::Challenger));
			System::assert_last_event(
				Event::Bonded { who: 1, role: Role::Challenger, amount: MIN_CHALLENGER_BOND }.into(),
			);
		});
	}

	#[test]
	fn rejects_bad_bonds() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 5),
				Error::<Test>::NotRegistered
			);
			register_solver(1);
			assert_noop!(
				Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 0),
				Error::<Test>::ZeroAmount
			);
			assert_noop!(
				Staking::bond_more(RuntimeOrigin::signed(1), Role::Verifier, MIN_VERIFIER_BOND - 1),
				Error::<Test>::BondBelowMinimum
			);
			assert_noop!(
				Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 1_000_000),
				Error::<Test>::InsufficientBalance
			);
		});
	}
}

mod unbond_and_withdraw {
	use super::*;

	#[test]
	fn unbonding_moves_funds_to_the_unbonding_hold_then_releases_them() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 50));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 50));
			let unlock_at = 1 + UNBONDING_PERIOD;
			System::assert_last_event(
				Event::Unbonded { who: 1, role: Role::Solver, amount: 50, unlock_at }.into(),
			);
			assert_eq!(held(1, HoldReason::SolverBond), MIN_SOLVER_BOND);
			assert_eq!(held(1, HoldReason::Unbonding), 50);
			assert_eq!(
				Unbonding::<Test>::get(1).into_inner(),
				vec![UnbondingChunk { role: Role::Solver, amount: 50, unlock_at }]
			);

			assert_noop!(Staking::withdraw_unbonded(RuntimeOrigin::signed(1)), Error::<Test>::NothingToWithdraw);
			run_to_block(unlock_at);
			let free_before = Balances::balance(&1);
			assert_ok!(Staking::withdraw_unbonded(RuntimeOrigin::signed(1)));
			System::assert_last_event(Event::Withdrawn { who: 1, amount: 50 }.into());
			assert_eq!(Balances::balance(&1), free_before + 50);
			assert!(!Unbonding::<Test>::contains_key(1));
		});
	}

	#[test]
	fn unbonding_everything_drops_the_role() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, MIN_SOLVER_BOND));
			assert_eq!(Nodes::<Test>::get(1).unwrap().roles, RoleSet::default());
			assert!(!Staking::is_bonded_for(&1, Role::Solver));
		});
	}

	#[test]
	fn work_in_one_role_holds_only_that_roles_bond() {
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver, Role::Verifier]);
			assert_ok!(Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds, 0));
			// Drawn in a verification round: the verifier bond stays until the unit is final.
			BusyNodes::set(vec![(1, Role::Verifier)]);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, MIN_VERIFIER_BOND),
				Error::<Test>::HasActiveWork
			);
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::StillBonded);
			// Its solver role holds no unit: that bond may go, and the hardware may change.
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, MIN_SOLVER_BOND));
			assert_ok!(Staking::update_profile(RuntimeOrigin::signed(1), gpu_profile()));
			BusyNodes::set(vec![]);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, MIN_VERIFIER_BOND));
			// With no role left but a round still open, it may not leave either.
			BusyNodes::set(vec![(1, Role::Verifier)]);
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::HasActiveWork);
			BusyNodes::set(vec![]);
			assert_ok!(Staking::deregister(RuntimeOrigin::signed(1)));
		});
	}

	#[test]
	fn rejects_bad_unbonds() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 1),
				Error::<Test>::NotRegistered
			);
			register_solver(1);
			assert_noop!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 0), Error::<Test>::ZeroAmount);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, 1),
				Error::<Test>::RoleNotBonded
			);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 1),
				Error::<Test>::RemainderBelowMinimum
			);
			BusyNodes::set(vec![(1, Role::Solver)]);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, MIN_SOLVER_BOND),
				Error::<Test>::HasActiveWork
			);
		});
	}

	#[test]
	fn rejects_more_chunks_than_allowed() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 40));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 10));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 10));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 10));
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 10),
				Error::<Test>::TooManyUnbondingChunks
			);
		});
	}
}

mod heartbeat {
	use super::*;

	#[test]
	fn keeps_a_node_online() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert!(Staking::is_online(&1));
			run_to_block(1 + HEARTBEAT_TIMEOUT + 1);
			assert!(!Staking::is_online(&1));
			assert!(Staking::solver_candidates(10).is_empty());
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(1)));
			System::assert_last_event(Event::Heartbeat { who: 1 }.into());
			assert!(Staking::is_online(&1));
			assert_eq!(Staking::solver_candidates(10).len(), 1);
		});
	}

	#[test]
	fn rejects_unregistered() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(Staking::heartbeat(RuntimeOrigin::signed(1)), Error::<Test>::NotRegistered);
		});
	}
}

mod deregister {
	use super::*;

	#[test]
	fn leaves_once_unbonded() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::StillBonded);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, MIN_SOLVER_BOND));
			BusyNodes::set(vec![(1, Role::Solver)]);
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::HasActiveWork);
			BusyNodes::set(vec![]);
			assert_ok!(Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(SOLVER_ADDRESS))));
			assert_ok!(Staking::deregister(RuntimeOrigin::signed(1)));
			System::assert_last_event(Event::NodeDeregistered { who: 1 }.into());
			assert!(!Staking::is_registered(&1));
			// Its endpoint leaves with it.
			assert_eq!(Endpoints::<Test>::get(1), None);
		});
	}

	#[test]
	fn rejects_unregistered() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::NotRegistered);
		});
	}
}

const SOLVER_ADDRESS: &[u8] = b"/ip4/203.0.113.7/tcp/30555/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";

fn endpoint(text: &[u8]) -> BoundedVec<u8, polkadot_sdk::frame_support::traits::ConstU32<128>> {
	BoundedVec::truncate_from(text.to_vec())
}

mod endpoint {
	use super::*;

	#[test]
	fn a_node_advertises_and_withdraws_its_endpoint() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(SOLVER_ADDRESS))));
			System::assert_last_event(Event::EndpointSet { who: 1, endpoint: Some(SOLVER_ADDRESS.to_vec()) }.into());
			assert_eq!(Endpoints::<Test>::get(1).map(|e| e.into_inner()), Some(SOLVER_ADDRESS.to_vec()));
			// A new address replaces the old one.
			let moved = b"/dns4/solver.example/tcp/30555";
			assert_ok!(Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(moved))));
			assert_eq!(Endpoints::<Test>::get(1).map(|e| e.into_inner()), Some(moved.to_vec()));
			assert_ok!(Staking::set_endpoint(RuntimeOrigin::signed(1), None));
			System::assert_last_event(Event::EndpointSet { who: 1, endpoint: None }.into());
			assert_eq!(Endpoints::<Test>::get(1), None);
		});
	}

	#[test]
	fn rejects_an_unregistered_account() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(SOLVER_ADDRESS))),
				Error::<Test>::NotRegistered
			);
		});
	}

	#[test]
	fn rejects_what_is_not_a_multiaddr() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			for bad in [&b""[..], b"/", b"203.0.113.7:30555", &[b'/', 0xff, 0xfe]] {
				assert_noop!(
					Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(bad))),
					Error::<Test>::InvalidEndpoint
				);
			}
		});
	}
}

mod reap {
	use super::*;

	#[test]
	fn anyone_removes_an_idle_node_whose_bonds_start_unbonding() {
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver, Role::Verifier]);
			assert_ok!(Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds, 0));
			System::set_block_number(1 + REAP_DELAY);
			assert_noop!(Staking::reap(RuntimeOrigin::signed(2), 1), Error::<Test>::NodeNotIdle);
			System::set_block_number(2 + REAP_DELAY);
			BusyNodes::set(vec![(1, Role::Solver)]);
			assert_noop!(Staking::reap(RuntimeOrigin::signed(2), 1), Error::<Test>::HasActiveWork);
			BusyNodes::set(vec![]);
			assert_ok!(Staking::set_endpoint(RuntimeOrigin::signed(1), Some(endpoint(SOLVER_ADDRESS))));
			let result = Staking::reap(RuntimeOrigin::signed(2), 1).unwrap();
			assert_eq!(Endpoints::<Test>::get(1), None);
			assert_eq!(result.pays_fee, polkadot_sdk::frame_support::dispatch::Pays::No);
			let unbonding = MIN_SOLVER_BOND + MIN_VERIFIER_BOND;
			System::assert_last_event(Event::NodeReaped { who: 1, by: 2, unbonding }.into());
			assert!(!Staking::is_registered(&1));
			assert_eq!(held(1, HoldReason::SolverBond) + held(1, HoldReason::VerifierBond), 0);
			assert_eq!(held(1, HoldReason::Unbonding), unbonding);
			// The funds stay slashable through the unbonding period, then come back.
			System::set_block_number(2 + REAP_DELAY + UNBONDING_PERIOD);
			assert_ok!(Staking::withdraw_unbonded(RuntimeOrigin::signed(1)));
			assert_eq!(held(1, HoldReason::Unbonding), 0);
		});
	}

	#[test]
	fn a_node_with_full_unbonding_chunks_is_still_reaped() {
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver, Role::Verifier]);
			assert_ok!(Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds, 0));
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Verifier, 40));
			for _ in 0..3 {
				assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, 10));
			}
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, 10),
				Error::<Test>::TooManyUnbondingChunks
			);
			// The three verifier chunks matured; reaping releases them, then unbonds both roles.
			System::set_block_number(2 + REAP_DELAY);
			let free = Balances::balance(&1);
			assert_ok!(Staking::reap(RuntimeOrigin::signed(2), 1));
			assert_eq!(Balances::balance(&1), free + 30);
			let roles: Vec<Role> = Unbonding::<Test>::get(1).iter().map(|chunk| chunk.role).collect();
			assert_eq!(roles, vec![Role::Solver, Role::Verifier]);
			assert_eq!(held(1, HoldReason::Unbonding), MIN_SOLVER_BOND + MIN_VERIFIER_BOND + 10);
		});
	}

	#[test]
	fn rejects_an_unknown_node() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(Staking::reap(RuntimeOrigin::signed(2), 1), Error::<Test>::NotRegistered);
		});
	}
}

mod price_and_collateral {
	use super::*;

	#[test]
	fn a_solver_sets_its_minimum_price_and_is_matched_by_it() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::set_min_price(RuntimeOrigin::signed(1), 40));
			System::assert_last_event(Event::MinPriceSet { who: 1, min_price: 40 }.into());
			assert_eq!(Staking::min_price(&1), Some(40));
			assert!(!Staking::any_solver_meets(&requirements(1), 39));
			assert!(Staking::any_solver_meets(&requirements(1), 40));
			assert_eq!(Staking::solver_candidates(1)[0].min_price, 40);
			assert_noop!(Staking::set_min_price(RuntimeOrigin::signed(2), 1), Error::<Test>::NotRegistered);
		});
	}

	#[test]
	fn an_unbonded_solver_meets_no_requirements() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, MIN_SOLVER_BOND));
			assert!(!Staking::any_solver_meets(&requirements(1), 0));
		});
	}

	#[test]
	fn the_bond_cannot_drop_below_the_collateral_of_held_units() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 100));
			Collateral::set(vec![(1, 150)]);
			assert_noop!(
				Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 60),
				Error::<Test>::BelowCollateral
			);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 50));
			Collateral::set(vec![]);
		});
	}

	#[test]
	fn hardware_cannot_change_while_units_are_held() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			BusyNodes::set(vec![(1, Role::Solver)]);
			let mut smaller = gpu_profile();
			smaller.memory_mib = 1;
			assert_noop!(
				Staking::update_profile(RuntimeOrigin::signed(1), smaller.clone()),
				Error::<Test>::HasActiveWork
			);
			BusyNodes::set(vec![]);
			assert_ok!(Staking::update_profile(RuntimeOrigin::signed(1), smaller));
		});
	}
}

mod registry {
	use super::*;

	#[test]
	fn matches_requirements_against_registered_profiles() {
		ExtBuilder::default().build_and_execute(|| {
			assert!(!Staking::any_solver_meets(&requirements(1), 0));
			register_solver(1);
			assert!(Staking::any_solver_meets(&requirements(24_576), 0));
			assert!(!Staking::any_solver_meets(&requirements(24_577), 0));
			let mut cpu_only = requirements(1);
			cpu_only.device = Some(DeviceKind::Cpu);
			assert!(!Staking::any_solver_meets(&cpu_only, 0));
		});
	}

	#[test]
	fn ranks_candidates_by_stake_reputation_and_liveness() {
		ExtBuilder::default().build_and_execute(|| {
			(1..=3).for_each(register_solver);
			// More stake ranks higher.
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(2), Role::Solver, 500));
			let order: Vec<_> = Staking::solver_candidates(10).into_iter().map(|c| c.account).collect();
			assert_eq!(order[0], 2);
			// Failures cost reputation.
			Staking::note_completed(&2, 100);
			Staking::note_failed(&2, 100);
			Staking::note_failed(&2, 100);
			Staking::note_completed(&3, REPUTATION_SATURATION);
			let order: Vec<_> = Staking::solver_candidates(10).into_iter().map(|c| c.account).collect();
			assert_eq!(order, vec![3, 2, 1]);
			assert_eq!(Staking::solver_candidates(2).len(), 2);
			let reputation = Nodes::<Test>::get(2).unwrap().reputation;
			assert_eq!((reputation.completed, reputation.failed, reputation.failed_value), (1, 2, 200));
			assert_eq!(Nodes::<Test>::get(3).unwrap().reputation.completed_value, REPUTATION_SATURATION as u128);
		});
	}

	#[test]
	fn reputation_weighs_work_by_value_and_starts_at_nothing() {
		ExtBuilder::default().build_and_execute(|| {
			(1..=3).for_each(register_solver);
			let score = |who: u64| Staking::solver_score(&who, &Nodes::<Test>::get(who).unwrap());
			let fresh = score(1);
			// An honest node with a history ranks above a fresh account…
			Staking::note_completed(&2, REPUTATION_SATURATION);
			assert!(score(2) > fresh);
			// …and a thousand one-planck units earn what one unit of their total value does.
			for _ in 0..1_000 {
				Staking::note_completed(&3, 1);
			}
			let farmed = score(3);
			assert!(farmed > fresh && farmed < score(2));
			Staking::note_completed(&1, 1_000);
			assert_eq!(score(1), farmed);
		});
	}

	#[test]
	fn equal_scores_rotate_from_block_to_block() {
		ExtBuilder::default().build_and_execute(|| {
			(1..=4).for_each(register_solver);
			let first = |parent: u8| {
				System::set_parent_hash([parent; 32].into());
				Staking::solver_candidates(1)[0].account
			};
			let winners: std::collections::BTreeSet<u64> = (1..40).map(first).collect();
			// No account id wins every tie: over 39 parent blocks, every one of the four led.
			assert_eq!(winners.len(), 4);
		});
	}
}

mod slash {
	use super::*;

	#[test]
	fn splits_the_slash_between_beneficiary_and_destination() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			let jackpot_before = Balances::balance(&JACKPOT);
			let winner_before = Balances::balance(&2);
			let slashed =
				Staking::slash(&1, Role::Solver, 60, SlashReason::InvalidProof, Some((&[2], Perbill::from_percent(50))));
			assert_eq!(slashed, Ok(60));
			assert_eq!(held(1, HoldReason::SolverBond), MIN_SOLVER_BOND - 60);
			assert_eq!(Balances::balance(&2), winner_before + 30);
			assert_eq!(Balances::balance(&JACKPOT), jackpot_before + 30);
			assert_eq!(Nodes::<Test>::get(1).unwrap().reputation.slashed, 1);
			System::assert_last_event(
				Event::Slashed { who: 1, role: Role::Solver, amount: 60, reason: SlashReason::InvalidProof }.into(),
			);
			// Below the minimum, the node is no longer eligible.
			assert!(!Staking::is_bonded_for(&1, Role::Solver));
		});
	}

	#[test]
	fn splits_the_reward_equally_and_sends_the_remainder_to_the_destination() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			let jackpot_before = Balances::balance(&JACKPOT);
			let before = [2, 3, 4].map(|who| Balances::balance(&who));
			// 40 % of 50 is 20, 6 to each of three; the 2 left over and the other 30 go to
			// the destination.
			let slashed =
				Staking::slash(&1, Role::Solver, 50, SlashReason::InvalidProof, Some((&[2, 3, 4], Perbill::from_percent(40))));
			assert_eq!(slashed, Ok(50));
			for (who, before) in [2, 3, 4].into_iter().zip(before) {
				assert_eq!(Balances::balance(&who), before + 6);
			}
			assert_eq!(Balances::balance(&JACKPOT), jackpot_before + 32);
		});
	}

	#[test]
	fn reaches_into_unbonding_funds() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 50));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 50));
			let issuance = Balances::total_issuance();
			let slashed = Staking::slash(&1, Role::Solver, MIN_SOLVER_BOND + 20, SlashReason::InvalidProof, None);
			assert_eq!(slashed, Ok(MIN_SOLVER_BOND + 20));
			assert_eq!(held(1, HoldReason::Unbonding), 30);
			assert_eq!(Unbonding::<Test>::get(1)[0].amount, 30);
			// The slash moved funds to the jackpot; none were created or destroyed.
			assert_eq!(Balances::total_issuance(), issuance);
		});
	}

	#[test]
	fn withdrawal_after_a_partial_slash_of_unbonding_funds_reports_what_it_released() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 50));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 50));
			// Takes the whole bond and 20 of the 50 unbonding.
			assert_eq!(
				Staking::slash(&1, Role::Solver, MIN_SOLVER_BOND + 20, SlashReason::InvalidProof, None),
				Ok(MIN_SOLVER_BOND + 20)
			);
			System::set_block_number(1 + UNBONDING_PERIOD);
			let free = Balances::balance(&1);
			assert_ok!(Staking::withdraw_unbonded(RuntimeOrigin::signed(1)));
			System::assert_last_event(Event::Withdrawn { who: 1, amount: 30 }.into());
			assert_eq!(Balances::balance(&1), free + 30);
			assert!(Unbonding::<Test>::get(1).is_empty());
		});
	}

	#[test]
	fn a_reward_below_the_existential_deposit_goes_to_the_destination() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			let jackpot = Balances::balance(&JACKPOT);
			// Account 42 does not exist; a 1-planck share is below the existential deposit.
			assert_eq!(
				Staking::slash(&1, Role::Solver, 2, SlashReason::InvalidProof, Some((&[42], Perbill::from_percent(50)))),
				Ok(2)
			);
			assert_eq!(Balances::balance(&42), 0);
			assert_eq!(Balances::balance(&JACKPOT), jackpot + 2);
		});
	}

	#[test]
	fn refuses_to_reward_the_slashed_account() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_noop!(
				Staking::slash(&1, Role::Solver, 10, SlashReason::FailedChallenge, Some((&[2, 1], Perbill::from_percent(50)))),
				Error::<Test>::RewardToSlashed
			);
		});
	}

	#[test]
	fn slashing_nothing_changes_nothing() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			staking_events();
			assert_eq!(Staking::slash(&1, Role::Verifier, 10, SlashReason::FalseAttestation, None), Ok(0));
			assert!(staking_events().is_empty());
			assert_eq!(Nodes::<Test>::get(1).unwrap().reputation.slashed, 0);
		});
	}
}

mod verifier_draw {
	use super::*;
	use crate::{DrawSlotOf, DrawSlots};
	use touchstone_primitives::traits::VerifierDraw;

	fn register_verifier(who: u64, bond: u64) {
		let bonds = BoundedVec::truncate_from(vec![(Role::Verifier, bond)]);
		assert_ok!(Staking::register(RuntimeOrigin::signed(who), gpu_profile(), bonds, 0));
	}

	fn seed(n: u32) -> [u8; 32] {
		polkadot_sdk::sp_io::hashing::blake2_256(&n.to_le_bytes())
	}

	#[test]
	fn picks_in_proportion_to_stake() {
		ExtBuilder::default().build_and_execute(|| {
			// Bonds of 1, 1 and 2 units of 50: an expected 25 %, 25 % and 50 % of first picks.
			register_verifier(1, 50);
			register_verifier(2, 50);
			register_verifier(3, 100);
			assert_eq!(Staking::draw_total(), 200);
			let mut firsts = [0u32; 4];
			for n in 0..800 {
				let drawn = Staking::draw_verifiers(&seed(n), 1, &[]);
				firsts[drawn[0] as usize] += 1;
			}
			// Binomial standard deviations at n = 800 are 12 and 14: these bounds are over
			// six of them wide, and the seeds are fixed, so the outcome is too.
			assert!((120..=280).contains(&firsts[1]), "{firsts:?}");
			assert!((120..=280).contains(&firsts[2]), "{firsts:?}");
			assert!((320..=480).contains(&firsts[3]), "{firsts:?}");
		});
	}

	#[test]
	fn draws_distinct_online_verifiers_and_never_an_excluded_one() {
		ExtBuilder::default().build_and_execute(|| {
			for who in 1..=4 {
				register_verifier(who, 50);
			}
			let drawn = Staking::draw_verifiers(&seed(7), 3, &[2]);
			assert_eq!(drawn.len(), 3);
			assert!(!drawn.contains(&2));
			let mut sorted = drawn.clone();
			sorted.sort();
			sorted.dedup();
			assert_eq!(sorted.len(), 3, "distinct");
			// The same seed and registry draw the same verifiers, in the same order.
			assert_eq!(Staking::draw_verifiers(&seed(7), 3, &[2]), drawn);

			// Everyone but 4 goes offline: only 4 can be drawn.
			run_to_block(HEARTBEAT_TIMEOUT + 2);
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(4)));
			assert_eq!(Staking::draw_verifiers(&seed(7), 3, &[]), vec![4]);
			// Nobody bonded: nobody drawn.
			assert_eq!(Staking::draw_verifiers(&seed(7), 3, &[4]), Vec::<u64>::new());
		});
	}

	/// Attack 5: stake that cannot be drawn (the solver's own verifier bond, excluded from
	/// its draws, and an offline verifier's) kept its weight, and the pick budget counted
	/// the wasted picks: a round could draw nobody and the proof stood on its window alone.
	/// Now every draw over at least `count` eligible verifiers fills.
	#[test]
	fn attack_undrawable_stake_cannot_empty_the_draw() {
		ExtBuilder::default().build_and_execute(|| {
			// Three eligible verifiers, and the solver's own account bonded as a verifier
			// with fifteen times their stake, excluded from its own draws.
			for who in 1..=3 {
				register_verifier(who, 50);
			}
			register_verifier(5, 2_250);
			let short = (0..10_000u32).filter(|n| Staking::draw_verifiers(&seed(*n), 3, &[5]).len() < 3).count();
			assert_eq!(short, 0, "draws of fewer than three among 10,000");
		});
	}

	/// The draw over 100,000 seeds: excluded and lapsed stake, however large, never wastes
	/// a pick, every draw over enough eligible verifiers fills with distinct ones, and the
	/// first pick follows eligible stake alone.
	#[test]
	fn the_draw_fills_from_eligible_stake_alone_in_proportion_to_it() {
		ExtBuilder::default().build_and_execute(|| {
			let stakes = [(1u64, 50u64), (2, 100), (3, 150), (4, 200)];
			for (who, bond) in stakes {
				register_verifier(who, bond);
			}
			// The solver's own verifier bond (excluded) and a verifier that goes offline.
			register_verifier(5, 7_500);
			register_verifier(6, 7_500);
			run_to_block(HEARTBEAT_TIMEOUT + 2);
			for who in 1..=5 {
				assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(who)));
			}
			// The lapsed verifier left the tree in the block it lapsed in.
			assert_eq!(Staking::draw_total(), 500 + 7_500);
			let mut firsts = [0i64; 7];
			for n in 0..100_000u32 {
				let drawn = Staking::draw_verifiers(&seed(n), 3, &[5]);
				let mut distinct = drawn.clone();
				distinct.sort();
				distinct.dedup();
				assert_eq!(distinct.len(), 3, "seed {n}: {drawn:?}");
				assert!(drawn.iter().all(|who| (1..=4).contains(who)), "seed {n}: {drawn:?}");
				firsts[drawn[0] as usize] += 1;
			}
			// Expected 10, 20, 30 and 40 %: binomial standard deviations at most 155, so
			// 1,000 is over six of them; the seeds are fixed, so the outcome is too.
			for (who, bond) in stakes {
				let expected = 100_000 * bond as i64 / 500;
				assert!((firsts[who as usize] - expected).abs() <= 1_000, "{firsts:?}");
			}
			// Asked for every eligible verifier, a draw takes them all.
			for n in 0..1_000u32 {
				let mut drawn = Staking::draw_verifiers(&seed(n), 4, &[5]);
				drawn.sort();
				assert_eq!(drawn, vec![1, 2, 3, 4]);
			}
			// The lapsed verifier's next heartbeat brings it back.
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(6)));
			assert_eq!(Staking::draw_total(), 500 + 15_000);
		});
	}

	/// The upgrade to storage version 1 schedules every node's lapse from its last
	/// heartbeat and takes an already lapsed verifier out of the draw.
	#[test]
	fn the_lapse_migration_schedules_every_node_and_drops_the_lapsed() {
		use crate::{migrations::ScheduleLapses, Lapses};
		use polkadot_sdk::frame_support::traits::{GetStorageVersion, OnRuntimeUpgrade, StorageVersion};
		ExtBuilder::default().build_and_execute(|| {
			register_verifier(1, 50);
			register_verifier(2, 50);
			// As a chain before the upgrade: no lapse listed, and 1 goes offline in the tree.
			let _ = Lapses::<Test>::clear(u32::MAX, None);
			StorageVersion::new(0).put::<Staking>();
			System::set_block_number(HEARTBEAT_TIMEOUT + 5);
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(2)));
			let _ = Lapses::<Test>::clear(u32::MAX, None);
			ScheduleLapses::<Test>::on_runtime_upgrade();
			assert_eq!(Staking::on_chain_storage_version(), StorageVersion::new(1));
			assert_eq!(Staking::draw_total(), 50, "the lapsed verifier left the draw");
			assert!(Lapses::<Test>::get(HEARTBEAT_TIMEOUT + 5 + HEARTBEAT_TIMEOUT + 1).contains(&2));
			// Run again, it changes nothing.
			ScheduleLapses::<Test>::on_runtime_upgrade();
			assert_eq!(Staking::draw_total(), 50);
		});
	}

	/// A tree built for another `MaxNodes` (its root, the total, at another node) is caught
	/// by the invariants and rebuilt by the upgrade for the capacity `MaxNodes` gives now,
	/// with every drawable verifier's weight; with the capacity unchanged the upgrade
	/// changes nothing.
	#[test]
	fn an_upgrade_that_changes_max_nodes_rebuilds_the_draw_tree() {
		use crate::{migrations::ResizeDrawTree, DrawCapacity, DrawSlotOf};
		use polkadot_sdk::frame_support::traits::{GetStorageVersion, OnRuntimeUpgrade, StorageVersion};
		ExtBuilder::default().build_and_execute(|| {
			register_verifier(1, 50);
			register_verifier(2, 70);
			register_verifier(3, 90);
			let capacity = Staking::draw_capacity();
			assert_eq!(DrawCapacity::<Test>::get(), Some(capacity));
			// As a chain whose tree was built when `MaxNodes` was four times as large.
			DrawCapacity::<Test>::put(capacity * 4);
			StorageVersion::new(1).put::<Staking>();
			assert!(Staking::do_try_state().is_err());
			assert_eq!(Staking::draw_total(), 0, "the old root is not where the total is");
			ResizeDrawTree::<Test>::on_runtime_upgrade();
			assert_eq!(Staking::on_chain_storage_version(), StorageVersion::new(2));
			assert_eq!(DrawCapacity::<Test>::get(), Some(capacity));
			assert_eq!(Staking::draw_total(), 50 + 70 + 90);
			let slots: Vec<Option<u32>> = [1, 2, 3].iter().map(DrawSlotOf::<Test>::get).collect();
			assert!(slots.iter().all(|slot| slot.is_some_and(|slot| slot >= 1 && slot <= capacity)));
			// Unchanged, it is a read and nothing else.
			ResizeDrawTree::<Test>::on_runtime_upgrade();
			assert_eq!([1, 2, 3].iter().map(DrawSlotOf::<Test>::get).collect::<Vec<_>>(), slots);
			assert_eq!(
				<Staking as touchstone_primitives::traits::VerifierDraw<u64>>::draw_verifiers(&[5; 32], 3, &[]).len(),
				3
			);
		});
	}

	/// A block checks at most `MAX_LAPSES_PER_BLOCK` lapses; the rest wait for the next.
	#[test]
	fn lapses_beyond_a_blocks_share_are_checked_in_the_next() {
		use crate::{Lapses, MAX_LAPSES_PER_BLOCK};
		ExtBuilder::default().build_and_execute(|| {
			register_verifier(1, 50);
			let at = 1 + HEARTBEAT_TIMEOUT + 1;
			// As if many nodes lapsed at once: the verifier last, past the block's share.
			let filler: Vec<u64> = (100..100 + u64::from(MAX_LAPSES_PER_BLOCK)).collect();
			Lapses::<Test>::mutate(at, |due| {
				*due = BoundedVec::truncate_from(filler.iter().copied().chain([1]).collect::<Vec<_>>())
			});
			run_to_block(at);
			assert_eq!(Staking::draw_total(), 50, "past this block's share");
			assert_eq!(Lapses::<Test>::get(at + 1).into_inner(), vec![1]);
			run_to_block(at + 1);
			assert_eq!(Staking::draw_total(), 0);
		});
	}

	#[test]
	fn bond_changes_slashes_and_leaving_move_the_weights() {
		ExtBuilder::default().build_and_execute(|| {
			register_verifier(1, 50);
			register_solver(2);
			assert_eq!(Staking::draw_total(), 50, "solvers are not drawn");
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(2), Role::Verifier, 60));
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Verifier, 25));
			assert_eq!(Staking::draw_total(), 135);
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(2), Role::Verifier, 10));
			assert_eq!(Staking::draw_total(), 125);
			// A slash below the minimum takes the verifier out of the draw.
			assert_ok!(<Staking as Slash<_, _>>::slash(&2, Role::Verifier, 1, SlashReason::MissedReveal, None));
			assert_eq!(Staking::draw_total(), 75);
			assert!(DrawSlotOf::<Test>::get(2).is_none());
			// Its slot is reused by the next verifier, and topping up brings 2 back.
			register_verifier(3, 50);
			assert_eq!(DrawSlots::<Test>::get(2).map(|(who, _)| who), Some(3));
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(2), Role::Verifier, 1));
			assert_eq!(Staking::draw_total(), 175);
			// Unbonding the whole role and being reaped leave the draw.
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Verifier, 75));
			assert_eq!(Staking::draw_total(), 100);
			run_to_block(REAP_DELAY + 3);
			// Both lapsed long ago and left the draw; 2 beats again and is back.
			assert_eq!(Staking::draw_total(), 0);
			assert_ok!(Staking::heartbeat(RuntimeOrigin::signed(2)));
			assert_eq!(Staking::draw_total(), 50);
			assert_ok!(Staking::reap(RuntimeOrigin::signed(4), 3));
			assert_eq!(Staking::draw_total(), 50);
			assert!(DrawSlotOf::<Test>::get(3).is_none());
		});
	}
}

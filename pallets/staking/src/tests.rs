//! Tests of every call of the staking pallet: each success path with its event, each
//! error path with `assert_noop!`, and the traits other pallets use.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::arithmetic_side_effects)]

use crate::{mock::*, Error, Event, HoldReason, Nodes, Reputation, RoleSet, Unbonding, UnbondingChunk};
use polkadot_sdk::{
	frame_support::{
		assert_noop, assert_ok,
		traits::fungible::{Inspect, InspectHold},
	},
	sp_runtime::{BoundedVec, Perbill},
};
use touchstone_primitives::{
	traits::{ComputeNodes, Slash},
	DeviceKind, HardwareRequirements, Role,
};

fn register_solver(who: u64) {
	assert_ok!(Staking::register(RuntimeOrigin::signed(who), gpu_profile(), min_bonds(&[Role::Solver])));
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
			assert_ok!(Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds));
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
						profile: gpu_profile()
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
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), min_bonds(&[Role::Verifier])),
				Error::<Test>::AlreadyRegistered
			);
		});
	}

	#[test]
	fn rejects_more_than_max_nodes() {
		ExtBuilder::default().build_and_execute(|| {
			(1..=4).for_each(register_solver);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(5), gpu_profile(), min_bonds(&[Role::Solver])),
				Error::<Test>::TooManyNodes
			);
		});
	}

	#[test]
	fn rejects_no_roles_and_duplicates() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), BoundedVec::new()),
				Error::<Test>::NoRoles
			);
			let twice = BoundedVec::truncate_from(vec![(Role::Solver, 100), (Role::Solver, 100)]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), twice),
				Error::<Test>::DuplicateRole
			);
		});
	}

	#[test]
	fn rejects_a_bond_below_the_minimum() {
		ExtBuilder::default().build_and_execute(|| {
			let low = BoundedVec::truncate_from(vec![(Role::Solver, MIN_SOLVER_BOND - 1)]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), low),
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
				Staking::register(RuntimeOrigin::signed(1), gpu_profile(), bonds),
				Error::<Test>::InsufficientBalance
			);
			assert_eq!(held(1, HoldReason::SolverBond), 0);
		});
	}

	#[test]
	fn rejects_oversized_or_empty_profiles() {
		ExtBuilder::default().build_and_execute(|| {
			let bonds = min_bonds(&[Role::Solver]);
			let mut long_model = gpu_profile();
			long_model.model = BoundedVec::truncate_from(vec![b'x'; 17]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), long_model, bonds.clone()),
				Error::<Test>::DeviceModelTooLong
			);
			let mut long_region = gpu_profile();
			long_region.region = BoundedVec::truncate_from(vec![b'r'; 9]);
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), long_region, bonds.clone()),
				Error::<Test>::RegionTooLong
			);
			let mut empty = gpu_profile();
			empty.memory_mib = 0;
			assert_noop!(
				Staking::register(RuntimeOrigin::signed(1), empty, bonds),
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
			BusyNodes::set(vec![1]);
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
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 30));
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
			BusyNodes::set(vec![1]);
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::HasActiveWork);
			BusyNodes::set(vec![]);
			assert_ok!(Staking::deregister(RuntimeOrigin::signed(1)));
			System::assert_last_event(Event::NodeDeregistered { who: 1 }.into());
			assert!(!Staking::is_registered(&1));
		});
	}

	#[test]
	fn rejects_unregistered() {
		ExtBuilder::default().build_and_execute(|| {
			assert_noop!(Staking::deregister(RuntimeOrigin::signed(1)), Error::<Test>::NotRegistered);
		});
	}
}

mod registry {
	use super::*;

	#[test]
	fn matches_requirements_against_registered_profiles() {
		ExtBuilder::default().build_and_execute(|| {
			assert!(!Staking::any_solver_meets(&requirements(1)));
			register_solver(1);
			assert!(Staking::any_solver_meets(&requirements(24_576)));
			assert!(!Staking::any_solver_meets(&requirements(24_577)));
			let mut cpu_only = requirements(1);
			cpu_only.device = Some(DeviceKind::Cpu);
			assert!(!Staking::any_solver_meets(&cpu_only));
		});
	}

	#[test]
	fn ranks_candidates_by_stake_reputation_and_liveness() {
		ExtBuilder::default().build_and_execute(|| {
			(1..=3).for_each(register_solver);
			// More stake ranks higher.
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(2), Role::Solver, 500));
			let order: Vec<_> = Staking::solver_candidates(10).into_iter().map(|c| c.account).collect();
			assert_eq!(order, vec![2, 1, 3]);
			// Failures cost reputation.
			Staking::note_failed(&2);
			Staking::note_failed(&2);
			Staking::note_completed(&3);
			let order: Vec<_> = Staking::solver_candidates(10).into_iter().map(|c| c.account).collect();
			assert_eq!(order, vec![3, 1, 2]);
			assert_eq!(Staking::solver_candidates(2).len(), 2);
			assert_eq!(Nodes::<Test>::get(2).unwrap().reputation.failed, 2);
			assert_eq!(Nodes::<Test>::get(3).unwrap().reputation.completed, 1);
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
			let slashed = Staking::slash(&1, Role::Solver, 60, Some((&2, Perbill::from_percent(50))));
			assert_eq!(slashed, 60);
			assert_eq!(held(1, HoldReason::SolverBond), MIN_SOLVER_BOND - 60);
			assert_eq!(Balances::balance(&2), winner_before + 30);
			assert_eq!(Balances::balance(&JACKPOT), jackpot_before + 30);
			assert_eq!(Nodes::<Test>::get(1).unwrap().reputation.slashed, 1);
			System::assert_last_event(Event::Slashed { who: 1, role: Role::Solver, amount: 60 }.into());
			// Below the minimum, the node is no longer eligible.
			assert!(!Staking::is_bonded_for(&1, Role::Solver));
		});
	}

	#[test]
	fn reaches_into_unbonding_funds() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			assert_ok!(Staking::bond_more(RuntimeOrigin::signed(1), Role::Solver, 50));
			assert_ok!(Staking::unbond(RuntimeOrigin::signed(1), Role::Solver, 50));
			let issuance = Balances::total_issuance();
			let slashed = Staking::slash(&1, Role::Solver, MIN_SOLVER_BOND + 20, None);
			assert_eq!(slashed, MIN_SOLVER_BOND + 20);
			assert_eq!(held(1, HoldReason::Unbonding), 30);
			assert_eq!(Unbonding::<Test>::get(1)[0].amount, 30);
			// The slash moved funds to the jackpot; none were created or destroyed.
			assert_eq!(Balances::total_issuance(), issuance);
		});
	}

	#[test]
	fn slashing_nothing_changes_nothing() {
		ExtBuilder::default().build_and_execute(|| {
			register_solver(1);
			staking_events();
			assert_eq!(Staking::slash(&1, Role::Verifier, 10, None), 0);
			assert!(staking_events().is_empty());
			assert_eq!(Nodes::<Test>::get(1).unwrap().reputation.slashed, 0);
		});
	}
}

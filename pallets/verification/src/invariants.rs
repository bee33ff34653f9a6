//! The pallet's invariants, checked after every test and by `try_state`.

use crate::pallet::*;
use crate::types::*;
use polkadot_sdk::frame_support::pallet_prelude::*;
use touchstone_primitives::traits::UnitProofs;

impl<T: Config> Pallet<T> {
	/// Checks the pallet's invariants:
	/// - every undrawn round is queued (a queued unit whose proof was dropped has no
	///   round, and its entry is skipped);
	/// - a drawn round has at most `VerifiersPerUnit` distinct verifiers, at least one
	///   unless it stays only to take its solver's secret, and closes after it opened;
	/// - a round still open is listed to close at its reveal end; a concluded one has
	///   no attestation left unrevealed and owes no secret;
	/// - every secret commitment waiting for randomness is queued;
	/// - every frozen threshold belongs to a round;
	/// - the beacon holds its blocks' randomness oldest first.
	#[cfg(any(feature = "try-runtime", feature = "std"))]
	pub fn do_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
		let beacon = Beacon::<T>::get();
		ensure!(beacon.windows(2).all(|pair| pair[0].known_since < pair[1].known_since), "the beacon is out of order");
		for (key, round) in Rounds::<T>::iter() {
			let escalation = matches!(round.kind, RoundKind::Escalation { .. });
			let Some(drawn) = round.drawn.as_ref() else {
				// An escalation no committee could be drawn for is decided undrawn.
				if round.concluded {
					ensure!(escalation, "a round concluded before its draw");
					continue;
				}
				ensure!(PendingDraws::<T>::get().contains(&key), "an undrawn round not queued");
				continue;
			};
			let count = round.attestations.len() as u32;
			// A round drawn empty stays only to take its solver's secret.
			let owes_secret = matches!(round.secret, SolverSecret::Awaited { .. } | SolverSecret::Forced { .. });
			ensure!(count >= 1 || owes_secret || round.concluded, "drawn round of a wrong size");
			let size = if escalation { T::EscalationCommittee::get() } else { T::VerifiersPerUnit::get() };
			ensure!(count <= size, "drawn round of a wrong size");
			for (i, attestation) in round.attestations.iter().enumerate() {
				ensure!(
					!round.attestations.iter().skip(i.saturating_add(1)).any(|a| a.verifier == attestation.verifier),
					"a verifier drawn twice"
				);
			}
			ensure!(drawn.commit_ends < drawn.reveal_ends, "a round closes before its reveals open");
			if round.concluded {
				ensure!(
					round.attestations.iter().all(|a| matches!(
						a.state,
						AttestationState::Revealed(_) | AttestationState::Missed
					)),
					"a concluded round with an attestation pending"
				);
				ensure!(
					!matches!(round.secret, SolverSecret::Awaited { .. } | SolverSecret::Forced { .. }),
					"a concluded round owes a secret"
				);
			} else {
				ensure!(Closing::<T>::get(drawn.reveal_ends).contains(&key), "an open round not set to close");
			}
		}
		// Every verifier's index of rounds is the rounds it is drawn in.
		let mut drawn_in = alloc::collections::BTreeSet::new();
		for (key, round) in Rounds::<T>::iter() {
			for attestation in Self::drawn_in(&round) {
				drawn_in.insert((attestation.verifier.clone(), key));
			}
		}
		ensure!(
			VerifierRounds::<T>::iter_keys().collect::<alloc::collections::BTreeSet<_>>() == drawn_in,
			"a verifier's index of rounds is not the rounds it is drawn in"
		);
		let queued = PendingSecrets::<T>::get();
		for (key, commitment) in Secrets::<T>::iter() {
			ensure!(commitment.random.is_some() || queued.contains(&key), "a secret waiting for randomness not queued");
			// A proof takes its secret; work dropped before one drops it.
			ensure!(
				T::Units::assignment(key.0, key.1).is_some_and(|(solver, _)| solver == commitment.solver),
				"a secret of a unit its solver no longer works on"
			);
		}
		for (key, _) in RoundThresholds::<T>::iter() {
			ensure!(Rounds::<T>::contains_key(key), "frozen thresholds of no round");
		}
		Ok(())
	}
}

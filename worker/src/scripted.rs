//! A scripted chain for the roles' unit tests: the state a pass reads is what the test
//! wrote ([`Script`]), and every transaction a pass hands over is recorded by its duty's
//! key and its call's name, and lands (or is refused) as the test says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::{bail, Result};
use polkadot_sdk::sp_runtime::Perbill;
use subxt_signer::sr25519::Keypair;
use touchstone_primitives::{JobId, UnitIndex};

use crate::chain::{call_name, AccountId, Job, Round, SecretCommitment, Settled, WorkUnit};
use crate::dispute::{Dispute, OverturnedProof};
use crate::state::{ChainState, Transactions};

/// The chain's state at the block a test's next pass reads.
#[derive(Clone, Default)]
pub struct Script {
	pub number: u32,
	pub challenge_window: u32,
	pub block_seconds: f64,
	pub forced_error_rate: Perbill,
	pub jobs: BTreeMap<JobId, Job>,
	pub units: BTreeMap<(JobId, UnitIndex), WorkUnit>,
	pub rounds: BTreeMap<(JobId, UnitIndex), Round>,
	pub secrets: BTreeMap<(JobId, UnitIndex), SecretCommitment>,
	pub pool: Vec<(JobId, UnitIndex)>,
	/// The segments every verifier drawn for a unit's proof re-executes.
	pub samples: BTreeMap<(JobId, UnitIndex), Vec<u32>>,
	pub disputes: BTreeMap<u64, Dispute>,
	pub unit_disputes: BTreeMap<(JobId, UnitIndex), Vec<u64>>,
}

/// A transaction a pass handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
	/// The duty's key (`unit 1 0 accepted`, `heartbeat`, …).
	pub key: String,
	/// The call, as `Pallet.call`.
	pub call: String,
}

#[derive(Default)]
struct Ledger {
	script: Script,
	sent: Vec<Sent>,
	/// Duties whose transactions are in flight: not sent again until they land.
	in_flight: BTreeSet<String>,
	/// Calls (`Pallet.call`) the chain refuses.
	refused: BTreeSet<String>,
}

/// The scripted chain: one [`Script`], the transactions sent against it, and their outcomes.
#[derive(Clone, Default)]
pub struct ScriptedChain(Arc<Mutex<Ledger>>);

impl ScriptedChain {
	fn ledger(&self) -> MutexGuard<'_, Ledger> {
		self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
	}

	/// Changes the state the next pass reads.
	pub fn script(&self, change: impl FnOnce(&mut Script)) {
		change(&mut self.ledger().script);
	}

	/// The state at the current block, as a pass reads it.
	pub fn at(&self) -> Script {
		self.ledger().script.clone()
	}

	/// Makes the chain refuse every `call` (`Pallet.call`) from now on.
	pub fn refuse(&self, call: &str) {
		self.ledger().refused.insert(call.to_owned());
	}

	/// The transactions handed over since the last call, in order.
	pub fn take_sent(&self) -> Vec<Sent> {
		std::mem::take(&mut self.ledger().sent)
	}

	/// Lands every transaction in flight: their duties may be sent again once the chain
	/// asks for them again.
	pub fn land_all(&self) {
		self.ledger().in_flight.clear();
	}
}

impl Transactions for ScriptedChain {
	fn send_in_background<Call>(
		&self,
		key: String,
		_now: u64,
		call: Call,
		_signer: &Keypair,
		_settled: Settled,
		done: impl FnOnce(Result<crate::state::Included>) + Send + 'static,
	) -> bool
	where
		Call: subxt::tx::Payload + Send + Sync + 'static,
	{
		let name = call_name(&call);
		let refused = {
			let mut ledger = self.ledger();
			if !ledger.in_flight.insert(key.clone()) {
				return false;
			}
			ledger.sent.push(Sent { key, call: name.clone() });
			ledger.refused.contains(&name)
		};
		done(if refused { Err(anyhow::anyhow!("{name} refused by the script")) } else { Ok(crate::state::Included(None)) });
		true
	}

	fn is_handed_over(&self, key: &str, _now: u64) -> bool {
		self.ledger().in_flight.contains(key)
	}
}

impl ChainState for Script {
	fn number(&self) -> u32 {
		self.number
	}

	fn challenge_window(&self) -> Result<u32> {
		Ok(self.challenge_window)
	}

	fn block_seconds(&self) -> Result<f64> {
		Ok(self.block_seconds)
	}

	async fn job(&self, job: JobId) -> Result<Option<Job>> {
		Ok(self.jobs.get(&job).cloned())
	}

	async fn unit(&self, job: JobId, unit: UnitIndex) -> Result<Option<WorkUnit>> {
		Ok(self.units.get(&(job, unit)).cloned())
	}

	async fn round(&self, job: JobId, unit: UnitIndex) -> Result<Option<Round>> {
		Ok(self.rounds.get(&(job, unit)).cloned())
	}

	async fn secret(&self, job: JobId, unit: UnitIndex) -> Result<Option<SecretCommitment>> {
		Ok(self.secrets.get(&(job, unit)).cloned())
	}

	async fn forced_error_rate(&self) -> Result<Perbill> {
		Ok(self.forced_error_rate)
	}

	async fn solver_units(&self, solver: &AccountId) -> Result<Vec<(JobId, UnitIndex)>> {
		Ok(self.units.iter().filter(|(_, unit)| unit.solver.as_ref() == Some(solver) && held(unit)).map(|(key, _)| *key).collect())
	}

	async fn pool(&self) -> Result<Vec<(JobId, UnitIndex)>> {
		Ok(self.pool.clone())
	}

	async fn endpoint(&self, _node: &AccountId) -> Result<Option<String>> {
		Ok(None)
	}

	async fn rounds_of(&self, verifier: &AccountId) -> Result<Vec<(JobId, UnitIndex)>> {
		Ok(self.rounds.iter().filter(|(_, round)| drawn(round, verifier)).map(|(key, _)| *key).collect())
	}

	async fn samples(&self, job: JobId, index: UnitIndex, verifier: &AccountId) -> Result<Option<Vec<u32>>> {
		let drawn = self.rounds.get(&(job, index)).is_some_and(|round| drawn(round, verifier));
		Ok(drawn.then(|| self.samples.get(&(job, index)).cloned().unwrap_or_default()))
	}

	async fn dispute(&self, id: u64) -> Result<Option<Dispute>> {
		Ok(self.disputes.get(&id).cloned())
	}

	async fn unit_dispute_ids(&self, job: JobId, index: UnitIndex) -> Result<Vec<u64>> {
		Ok(self.unit_disputes.get(&(job, index)).cloned().unwrap_or_default())
	}

	async fn overturned(&self, _id: u64) -> Result<Option<OverturnedProof>> {
		bail!("the scripted chain keeps no overturned proofs")
	}
}

/// Whether `verifier` is drawn for `round`.
fn drawn(round: &Round, verifier: &AccountId) -> bool {
	round.attestations.iter().any(|attestation| attestation.verifier == *verifier)
}

/// Whether the chain lists `unit` under its solver (`tasks.SolverUnits`): from its
/// assignment until it is finalized or leaves the solver.
fn held(unit: &WorkUnit) -> bool {
	use touchstone_primitives::UnitState;
	matches!(unit.state, UnitState::Assigned | UnitState::Proven | UnitState::Verifying | UnitState::Challenged)
}

//! The chain behind two traits: [`ChainState`], what a role's pass reads at one block, and
//! [`Transactions`], how it hands its transactions over. The worker runs on a node's (or a
//! light client's) state ([`AtBlock`]) and on [`Chain`]; the roles' passes are written
//! against the traits, so their decisions are tested against a scripted chain
//! (`crate::scripted`, in tests only) in milliseconds, where the end-to-end tests take
//! minutes of blocks.

use std::future::Future;

use anyhow::{Context, Result};
use polkadot_sdk::sp_runtime::Perbill;
use subxt_signer::sr25519::Keypair;
use touchstone_primitives::{JobId, UnitIndex};

use crate::chain::{decode, runtime, AccountId, AtBlock, Job, Round, SecretCommitment, Settled, WorkUnit};
use crate::dispute::{Dispute, OverturnedProof};

/// The chain's state at one block, as a role's pass reads it.
pub trait ChainState: Sync {
	/// The block's number.
	fn number(&self) -> u32;
	/// Blocks a proven unit waits for challenges before it may be finalized
	/// (`tasks.ChallengeWindow`).
	fn challenge_window(&self) -> Result<u32>;
	/// Seconds a block takes: a slot, twice the timestamp pallet's minimum period.
	fn block_seconds(&self) -> Result<f64>;
	/// A job, if it exists.
	fn job(&self, job: JobId) -> impl Future<Output = Result<Option<Job>>> + Send;
	/// A work unit, if it exists.
	fn unit(&self, job: JobId, unit: UnitIndex) -> impl Future<Output = Result<Option<WorkUnit>>> + Send;
	/// The verification round of a unit's proof, if one is open.
	fn round(&self, job: JobId, unit: UnitIndex) -> impl Future<Output = Result<Option<Round>>> + Send;
	/// The forced-error secret commitment of a unit's solver, until its proof is committed.
	fn secret(&self, job: JobId, unit: UnitIndex) -> impl Future<Output = Result<Option<SecretCommitment>>> + Send;
	/// The chance that a unit must carry a forced error.
	fn forced_error_rate(&self) -> impl Future<Output = Result<Perbill>> + Send;
	/// The units `solver` holds.
	fn solver_units(&self, solver: &AccountId) -> impl Future<Output = Result<Vec<(JobId, UnitIndex)>>> + Send;
	/// The units in the open pool.
	fn pool(&self) -> impl Future<Output = Result<Vec<(JobId, UnitIndex)>>> + Send;
	/// The endpoint (a multiaddr) where `node`'s worker accepts peers, if it advertises one.
	fn endpoint(&self, node: &AccountId) -> impl Future<Output = Result<Option<String>>> + Send;
	/// The rounds `verifier` is drawn for (the runtime reads its own keys, so a light client
	/// asks for a few keys, not every round).
	fn rounds_of(&self, verifier: &AccountId) -> impl Future<Output = Result<Vec<(JobId, UnitIndex)>>> + Send;
	/// The segments `verifier` re-executes of unit `index` of `job`, if it is drawn for its
	/// proof.
	fn samples(&self, job: JobId, index: UnitIndex, verifier: &AccountId) -> impl Future<Output = Result<Option<Vec<u32>>>> + Send;
	/// A dispute, while it is open.
	fn dispute(&self, id: u64) -> impl Future<Output = Result<Option<Dispute>>> + Send;
	/// The ids of the disputes over unit `index` of `job`.
	fn unit_dispute_ids(&self, job: JobId, index: UnitIndex) -> impl Future<Output = Result<Vec<u64>>> + Send;
	/// The proof dispute `id` overturned, if the chain still keeps it for summonses.
	fn overturned(&self, id: u64) -> impl Future<Output = Result<Option<OverturnedProof>>> + Send;

	/// The disputes among `ids` still open, with their ids.
	fn open_disputes(&self, ids: Vec<u64>) -> impl Future<Output = Result<Vec<(u64, Dispute)>>> + Send {
		async move {
			let mut disputes = Vec::new();
			for id in ids {
				if let Some(dispute) = self.dispute(id).await? {
					disputes.push((id, dispute));
				}
			}
			Ok(disputes)
		}
	}

	/// The disputes open over unit `index` of `job`, with their ids.
	fn unit_disputes(&self, job: JobId, index: UnitIndex) -> impl Future<Output = Result<Vec<(u64, Dispute)>>> + Send {
		async move { self.open_disputes(self.unit_dispute_ids(job, index).await?).await }
	}

	/// The endpoints advertised by the solvers of a job's units (at most `limit`, without
	/// `except`): the peers that hold its dataset and the models its ranges proved.
	fn job_endpoints(
		&self,
		job: JobId,
		units: UnitIndex,
		except: Option<&AccountId>,
		limit: usize,
	) -> impl Future<Output = Result<Vec<String>>> + Send {
		async move {
			let mut solvers: Vec<AccountId> = Vec::new();
			// Latest units first: they hold the newest models.
			for index in (0..units).rev() {
				if let Some(solver) = self.unit(job, index).await?.and_then(|unit| unit.solver) {
					if Some(&solver) != except && !solvers.contains(&solver) {
						solvers.push(solver);
					}
				}
				if solvers.len() >= limit {
					break;
				}
			}
			let mut endpoints = Vec::new();
			for solver in solvers {
				endpoints.extend(self.endpoint(&solver).await?);
			}
			Ok(endpoints)
		}
	}
}

/// What an included transaction emitted: its events, on a chain that has them to give (a
/// scripted one has none).
pub struct Included(pub Option<crate::chain::Events>);

impl Included {
	/// The first event of type `E` the transaction emitted, if it emitted one.
	pub fn find_first<E: subxt::events::DecodeAsEvent>(&self) -> Option<E> {
		self.0.as_ref()?.find_first::<E>()?.ok()
	}
}

/// How a role hands its transactions over: each is sent on a task of its own, keyed by the
/// duty it fulfils, so a pass never waits for one ([`Chain`]'s implementation says how a
/// duty is kept from being sent twice and how a failed one is tried again).
pub trait Transactions: Clone + Send + Sync + 'static {
	/// Hands `call` over for the duty `key`, read at block `now`, and returns at once:
	/// `false`, sending nothing, while the duty is in flight, in a block after `now`, or
	/// waiting out its backoff. `done` gets the outcome once it is `settled`.
	fn send_in_background<Call>(
		&self,
		key: String,
		now: u64,
		call: Call,
		signer: &Keypair,
		settled: Settled,
		done: impl FnOnce(Result<Included>) + Send + 'static,
	) -> bool
	where
		Call: subxt::tx::Payload + Send + Sync + 'static;

	/// Whether a pass reading the chain at block `now` must leave the duty `key` alone
	/// ([`Self::send_in_background`] would send nothing).
	fn is_handed_over(&self, key: &str, now: u64) -> bool;
}

impl ChainState for AtBlock {
	fn number(&self) -> u32 {
		self.block_number() as u32
	}

	fn challenge_window(&self) -> Result<u32> {
		Ok(self.constants().entry(runtime::constants().tasks().challenge_window())?)
	}

	fn block_seconds(&self) -> Result<f64> {
		let period: u64 = self.constants().entry(runtime::constants().timestamp().minimum_period())?;
		Ok(2.0 * period as f64 / 1000.0)
	}

	async fn job(&self, job: JobId) -> Result<Option<Job>> {
		let value = self.storage().try_fetch(runtime::storage().tasks().jobs(), (job,)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}

	async fn unit(&self, job: JobId, unit: UnitIndex) -> Result<Option<WorkUnit>> {
		let value = self.storage().try_fetch(runtime::storage().tasks().units(), (job, unit)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}

	async fn round(&self, job: JobId, unit: UnitIndex) -> Result<Option<Round>> {
		let value = self.storage().try_fetch(runtime::storage().verification().rounds(), ((job, unit),)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}

	async fn secret(&self, job: JobId, unit: UnitIndex) -> Result<Option<SecretCommitment>> {
		let value = self.storage().try_fetch(runtime::storage().verification().secrets(), ((job, unit),)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}

	async fn forced_error_rate(&self) -> Result<Perbill> {
		let rate = self.runtime_apis().call(runtime::runtime_apis().verification_api().forced_error_rate()).await?;
		Ok(Perbill::from_parts(rate.0))
	}

	async fn solver_units(&self, solver: &AccountId) -> Result<Vec<(JobId, UnitIndex)>> {
		let value = self.storage().fetch(runtime::storage().tasks().solver_units(), (solver.clone(),)).await?;
		Ok(value.decode()?.0.into_iter().collect())
	}

	async fn pool(&self) -> Result<Vec<(JobId, UnitIndex)>> {
		let value = self.storage().fetch(runtime::storage().tasks().pool(), ()).await?;
		Ok(value.decode()?.0.into_iter().collect())
	}

	async fn endpoint(&self, node: &AccountId) -> Result<Option<String>> {
		let value = self.storage().try_fetch(runtime::storage().staking().endpoints(), (node.clone(),)).await?;
		Ok(value.map(|value| value.decode()).transpose()?.map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned()))
	}

	async fn rounds_of(&self, verifier: &AccountId) -> Result<Vec<(JobId, UnitIndex)>> {
		let call = runtime::runtime_apis().verification_api().rounds_of(verifier.clone());
		self.runtime_apis().call(call).await.context("asking the chain for this verifier's rounds")
	}

	async fn samples(&self, job: JobId, index: UnitIndex, verifier: &AccountId) -> Result<Option<Vec<u32>>> {
		let call = runtime::runtime_apis().verification_api().samples(job, index, verifier.clone());
		self.runtime_apis().call(call).await.context("asking the chain for this verifier's samples")
	}

	async fn dispute(&self, id: u64) -> Result<Option<Dispute>> {
		let value = self.storage().try_fetch(runtime::storage().disputes().disputes(), (id,)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}

	async fn unit_dispute_ids(&self, job: JobId, index: UnitIndex) -> Result<Vec<u64>> {
		Ok(self.storage().fetch(runtime::storage().disputes().unit_disputes(), ((job, index),)).await?.decode()?.0)
	}

	async fn overturned(&self, id: u64) -> Result<Option<OverturnedProof>> {
		let value = self.storage().try_fetch(runtime::storage().disputes().overturned(), (id,)).await?;
		value.map(|value| decode(value.bytes())).transpose()
	}
}

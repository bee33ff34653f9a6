//! The verifier role: register and bond as a verifier; in every round the chain draws this
//! node for, re-execute the unit from its anchor, commit the verdict (`Match`, or
//! `Mismatch` with this node's own trace root), reveal it once reveals open, and play to
//! its end the dispute a mismatch opens. The challenger role (`challenge`) is the same
//! re-execution without a draw: it disputes one proof that does not reproduce, and plays
//! the dispute to its end.
//!
//! The chain names a few checkpoint segments for each verifier to check
//! (`VerificationApi::samples`). The chain commits only the unit's anchor and its end, not
//! the state at each checkpoint, so a segment in the middle of a unit cannot be started
//! from a committed state: this verifier re-executes the whole unit, which covers its
//! samples, and compares trace roots. The cost is one training run of the unit on the CPU
//! reference, the bit-exact backend every exact-mode job is judged by.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use codec::{Decode, Encode};
use pallet_touchstone_verification::{AttestationState, Verdict};
use polkadot_sdk::sp_core::ConstU32;
use subxt_signer::sr25519::Keypair;
use touchstone_kernels::job::data::hex;
use touchstone_kernels::proof::hash::digest_bytes;
use touchstone_primitives::{JobId, Role, UnitIndex, UnitState, VerificationMode};

use crate::chain::{decode, runtime, AccountId, AtBlock, BestBlocks, Chain, Heartbeat};
use crate::dispute::Party;
use crate::hardware::{self, Detected};
use crate::inputs::Inputs;
use crate::p2p::{Network, NetworkArgs};
use crate::store::Store;
use crate::train::run_unit;

/// What `verify` is told (and, built from [`ChallengeArgs`], what `challenge` is).
#[derive(Clone, Debug, clap::Args)]
pub struct VerifyArgs {
	#[command(flatten)]
	pub key: crate::keys::KeyArgs,
	/// The verifier bond to post when registering, in TST (at least the chain's minimum).
	/// A missed reveal is slashed from it.
	#[arg(long, default_value_t = 100.0)]
	pub bond: f64,
	/// Region tag declared on registration.
	#[arg(long, default_value = "local")]
	pub region: String,
	#[command(flatten)]
	pub network: NetworkArgs,
}

/// What `challenge` is told.
#[derive(Clone, Debug, clap::Args)]
pub struct ChallengeArgs {
	#[command(flatten)]
	pub key: crate::keys::KeyArgs,
	/// The job.
	#[arg(long)]
	pub job: JobId,
	/// The unit whose standing proof to check.
	#[arg(long)]
	pub unit: UnitIndex,
	/// The challenger bond to post when registering, in TST (at least the chain's
	/// minimum). A challenge also holds the disputes pallet's challenge bond.
	#[arg(long, default_value_t = 20.0)]
	pub bond: f64,
	#[command(flatten)]
	pub network: NetworkArgs,
}

/// A verification round as the chain stores it (the bound only limits decoding).
type Round = pallet_touchstone_verification::Round<AccountId, u32, ConstU32<1024>>;

/// A running verifier.
pub struct Verifier {
	chain: Chain,
	best: BestBlocks,
	signer: Keypair,
	me: AccountId,
	inputs: Inputs,
	args: VerifyArgs,
	detected: Detected,
	stop: Arc<AtomicBool>,
	heartbeat: Heartbeat,
	/// One file per committed verdict, with its salt: a restarted verifier still reveals.
	verdicts_dir: PathBuf,
}

impl crate::chain::EveryBlock for Verifier {
	fn pass(&mut self) -> impl std::future::Future<Output = Result<()>> {
		self.tick()
	}

	fn best_blocks(&mut self) -> &mut BestBlocks {
		&mut self.best
	}
}

impl Verifier {
	/// Detects the hardware and prepares a verifier; nothing is sent yet.
	pub fn new(chain: Chain, network: Network, store: Store, data_dir: PathBuf, args: VerifyArgs, stop: Arc<AtomicBool>) -> Result<Self> {
		let signer = args.key.keypair()?;
		let me = signer.public_key().to_account_id();
		let detected = hardware::detect(None, &args.region)?;
		let verdicts_dir = data_dir.join("verdicts");
		std::fs::create_dir_all(&verdicts_dir).with_context(|| format!("cannot create {}", verdicts_dir.display()))?;
		// Kept apart from a solver's units: this folder holds this node's own runs.
		let inputs = Inputs { store, network, units_dir: data_dir.join("verified"), me: me.clone() };
		Ok(Self { best: chain.follow_best(), chain, signer, me, inputs, args, detected, stop, heartbeat: Heartbeat::default(), verdicts_dir })
	}

	/// Runs until `stop` is set.
	pub async fn run(mut self) -> Result<()> {
		tracing::info!(account = %self.me, "verifier starting");
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Verifier, self.args.bond, profile, 0).await?;
		self.heartbeat.sent();
		// A re-execution stops at the step it is in; committed verdicts stay on disk.
		let stop = self.stop.clone();
		crate::chain::run_every_block(&mut self, &stop).await;
		tracing::info!("verifier stopped");
		Ok(())
	}

	/// One pass over the chain: the next move in each dispute this verifier opened, then
	/// every commit and reveal due in the rounds it was drawn for. Both in every pass: a
	/// dispute can outlast a commit period, and a verifier busy with one must not miss
	/// its next round.
	async fn tick(&mut self) -> Result<()> {
		self.heartbeat.send_if_due(&self.chain, &self.signer).await?;
		let at = self.best.at().await?;
		if let Err(error) = self.play_disputes(&at).await {
			tracing::warn!("dispute: {error:#}");
		}
		// Moves wait for their blocks: the rounds are read at the newest one.
		let at = self.best.at().await?;
		let now = at.block_number() as u32;
		let mut rounds = at.storage().iter(runtime::storage().verification().rounds(), ()).await?;
		let mut due = Vec::new();
		while let Some(entry) = rounds.next().await {
			let entry = entry?;
			let ((job, unit),) = entry.key()?.decode()?;
			let round: Round = decode(entry.value().bytes())?;
			let Some(drawn) = &round.drawn else { continue };
			let Some(mine) = round.attestations.iter().find(|a| a.verifier == self.me) else { continue };
			match mine.state {
				AttestationState::Drawn if now < drawn.commit_ends => due.push((job, unit, round.trace_root, false)),
				AttestationState::Committed(_) if now >= drawn.commit_ends && now < drawn.reveal_ends => {
					due.push((job, unit, round.trace_root, true))
				},
				_ => {},
			}
		}
		for (job, unit, trace_root, reveal) in due {
			let result = if reveal { self.reveal(job, unit, &trace_root).await } else { self.commit(&at, job, unit, &trace_root).await };
			if let Err(error) = result {
				tracing::warn!(job, unit, "verification: {error:#}");
			}
		}
		Ok(())
	}

	/// Re-executes the unit, then commits the verdict on it.
	async fn commit(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> Result<()> {
		let path = self.verdict_path(job_id, index, trace_root);
		let (verdict, salt) = match std::fs::read(&path) {
			Ok(bytes) => <(Verdict, [u8; 32])>::decode(&mut &bytes[..]).context("damaged verdict file")?,
			Err(_) => {
				let verdict = self.verdict(at, job_id, index, trace_root).await?;
				let mut salt = [0u8; 32];
				getrandom::getrandom(&mut salt).context("no randomness for the commitment's salt")?;
				// Saved before the commitment goes out: without the salt it cannot be revealed.
				std::fs::write(&path, (verdict.clone(), salt).encode()).with_context(|| format!("cannot write {}", path.display()))?;
				(verdict, salt)
			},
		};
		let commitment = digest_bytes(&(&verdict, &salt, &self.me).encode());
		let call = runtime::transactions().verification().commit(job_id, index, subxt::utils::H256(commitment));
		self.chain.send_in_block(&call, &self.signer).await.context("committing the verdict")?;
		tracing::info!(job = job_id, unit = index, verdict = verdict_name(&verdict), "verification: committed");
		Ok(())
	}

	/// Reveals the verdict committed on the unit.
	async fn reveal(&mut self, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> Result<()> {
		use runtime::runtime_types::pallet_touchstone_verification::types::Verdict as ChainVerdict;
		let path = self.verdict_path(job_id, index, trace_root);
		let bytes = std::fs::read(&path).with_context(|| format!("the committed verdict {} is gone: it cannot be revealed", path.display()))?;
		let (verdict, salt) = <(Verdict, [u8; 32])>::decode(&mut &bytes[..]).context("damaged verdict file")?;
		let chain_verdict = match verdict {
			Verdict::Match => ChainVerdict::Match,
			Verdict::Mismatch { trace_root } => ChainVerdict::Mismatch { trace_root },
		};
		let call = runtime::transactions().verification().reveal(job_id, index, chain_verdict, salt);
		self.chain.send_in_block(&call, &self.signer).await.context("revealing the verdict")?;
		tracing::info!(job = job_id, unit = index, verdict = verdict_name(&verdict), "verification: revealed");
		Ok(())
	}

	/// Re-executes the unit whose proof has `trace_root` and compares: `Match` when this
	/// node's trace root is the solver's, else `Mismatch` with its own.
	async fn verdict(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> Result<Verdict> {
		let samples = at
			.runtime_apis()
			.call(runtime::runtime_apis().verification_api().samples(job_id, index, self.me.clone()))
			.await
			.context("asking the chain for this verifier's samples")?
			.context("this verifier is not drawn for the unit's proof")?;
		tracing::info!(job = job_id, unit = index, ?samples, "verification: drawn; re-executing the unit");
		let mine = self.reexecute(at, job_id, index, trace_root).await?;
		Ok(if mine == *trace_root {
			Verdict::Match
		} else {
			tracing::warn!(job = job_id, unit = index, solver = %hex(trace_root), mine = %hex(&mine), "verification: the unit's trace does not reproduce");
			Verdict::Mismatch { trace_root: mine }
		})
	}

	/// Re-executes the unit, which must still stand on the proof with `trace_root`, on the
	/// CPU reference; returns this node's trace root.
	async fn reexecute(&mut self, at: &AtBlock, job_id: JobId, index: UnitIndex, trace_root: &[u8; 32]) -> Result<[u8; 32]> {
		let job = self.chain.job(at, job_id).await?.context("the job is gone")?;
		let unit = self.chain.unit(at, job_id, index).await?.context("the unit is gone")?;
		if !matches!(unit.state, UnitState::Proven | UnitState::Challenged) || unit.proof.map(|p| p.trace_root.0) != Some(*trace_root) {
			bail!("the unit no longer stands on the proof with trace root {}", hex(trace_root));
		}
		if job.spec.verification != VerificationMode::Exact {
			bail!("tolerance-mode jobs cannot be re-executed bit for bit, and this worker does not verify them yet");
		}
		self.inputs.fetch(&self.chain, at, job_id, index, &job, &unit).await?;
		let work = self.inputs.prepare(job_id, index, &job, &unit, self.detected.available_mib)?;
		let stop = self.stop.clone();
		let result = tokio::task::spawn_blocking(move || run_unit(touchstone_kernels::CpuBackend, &work, &stop, |_| {}))
			.await
			.context("the re-execution thread failed")??
			.context("stopped before the re-execution finished")?;
		Ok(result.proof.trace_root.0)
	}

	/// `challenge`: re-executes unit `index` of `job_id` and, if its standing proof does
	/// not reproduce, disputes it and plays the dispute to its end. Returns once the
	/// proof reproduces (nothing to dispute) or the dispute has ended.
	pub async fn challenge(mut self, job_id: JobId, index: UnitIndex) -> Result<()> {
		let profile = self.detected.profile.clone();
		self.chain.ensure_registered(&self.signer, Role::Challenger, self.args.bond, profile, 0).await?;
		let at = self.best.at().await?;
		let unit = self.chain.unit(&at, job_id, index).await?.with_context(|| format!("job {job_id} has no unit {index}"))?;
		let theirs = unit.proof.map(|proof| proof.trace_root.0).context("the unit has no proof to challenge")?;
		let mine = crate::dispute::disputes_of(&at, job_id, index).await?.into_iter().find(|(_, d)| d.challenger == self.me);
		let id = match mine {
			// A restart goes on with the dispute it opened.
			Some((id, _)) => id,
			None => {
				if unit.state != UnitState::Proven {
					bail!("unit {index} of job {job_id} has no proof open to challenge (it is {:?})", unit.state);
				}
				println!("re-executing unit {index} of job {job_id} on the CPU reference");
				let root = self.reexecute(&at, job_id, index, &theirs).await?;
				if root == theirs {
					println!("the proof reproduces bit for bit (trace root {}): nothing to challenge", hex(&theirs));
					return Ok(());
				}
				println!("the proof does not reproduce: its trace root is {}, this run's is {}", hex(&theirs), hex(&root));
				let events = self
					.chain
					.send(&runtime::transactions().disputes().challenge(job_id, index, root), &self.signer)
					.await
					.context("opening the dispute")?;
				events
					.find_first::<runtime::disputes::events::DisputeOpened>()
					.transpose()?
					.context("the challenge was included but opened no dispute")?
					.dispute
			},
		};
		println!("dispute {id} open; answering every round until it ends");
		while !self.stop.load(Ordering::Relaxed) {
			let at = self.best.at().await?;
			if at.storage().try_fetch(runtime::storage().disputes().disputes(), (id,)).await?.is_none() {
				let after = self.chain.unit(&at, job_id, index).await?.and_then(|unit| unit.proof).map(|proof| proof.trace_root.0);
				if after == Some(theirs) {
					println!("dispute {id} ended and the proof stands: the challenge lost");
				} else {
					println!("dispute {id} ended and the proof is overturned: the challenge won");
				}
				return Ok(());
			}
			if let Err(error) = self.play_disputes(&at).await {
				tracing::warn!("{error:#}");
			}
			self.best.next(Duration::from_secs(6)).await;
		}
		println!("stopped with dispute {id} open: run the same command again to go on playing it");
		Ok(())
	}

	/// Plays the next move in each dispute this verifier opened, answering from its own
	/// run of the unit.
	async fn play_disputes(&mut self, at: &AtBlock) -> Result<()> {
		let mut disputes = at.storage().iter(runtime::storage().disputes().disputes(), ()).await?;
		let mut units = BTreeSet::new();
		while let Some(entry) = disputes.next().await {
			let dispute: crate::dispute::Dispute = decode(entry?.value().bytes())?;
			if dispute.challenger == self.me {
				units.insert((dispute.job, dispute.unit));
			}
		}
		for (job_id, index) in units {
			let (Some(job), Some(unit)) = (self.chain.job(at, job_id).await?, self.chain.unit(at, job_id, index).await?) else {
				continue;
			};
			let prepare = || self.inputs.prepare(job_id, index, &job, &unit, self.detected.available_mib);
			crate::dispute::play(&self.chain, &self.signer, at, (job_id, index), Party::Challenger, prepare).await?;
		}
		Ok(())
	}

	fn verdict_path(&self, job: JobId, unit: UnitIndex, trace_root: &[u8; 32]) -> PathBuf {
		self.verdicts_dir.join(format!("{job}-{unit}-{}", hex(trace_root)))
	}
}

/// A verdict's name in the log.
fn verdict_name(verdict: &Verdict) -> &'static str {
	match verdict {
		Verdict::Match => "match",
		Verdict::Mismatch { .. } => "mismatch",
	}
}

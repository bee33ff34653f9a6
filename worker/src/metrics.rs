//! Prometheus metrics of a worker, whatever its role, served at `/metrics` on the
//! `--metrics` address. One set per process ([`get`]): the chain connection, the artifact
//! network and each role count into it where the event happens.

use std::net::SocketAddr;
use std::sync::OnceLock;

use anyhow::Result;
use prometheus_endpoint::{register, Counter, CounterVec, Gauge, Opts, Registry, F64, U64};

/// A worker's metrics.
pub struct Metrics {
	/// Units by outcome: accepted, claimed, declined, proven, finalized, failed.
	pub units: CounterVec<U64>,
	/// Training speed over the last checkpoint interval.
	pub steps_per_second: Gauge<F64>,
	/// Training steps run.
	pub steps: Counter<U64>,
	/// Learning proofs committed.
	pub proofs: Counter<U64>,
	/// Checkpoints committed.
	pub checkpoints: Counter<U64>,
	/// Plancks earned from finalized units.
	pub earnings: Counter<U64>,
	/// Artifact bytes written to the local store.
	pub artifact_bytes: Counter<U64>,
	/// Artifact-network peers connected.
	pub peers: Gauge<U64>,
	/// Whether peers can dial this node, as AutoNAT found: 0 unknown, 1 not (behind NAT or
	/// a firewall), 2 yes.
	pub reachability: Gauge<U64>,
	/// Transactions by call (`pallet.call`) and outcome: `included`, or `failed` (refused,
	/// dropped, not included in time, or dispatched with an error).
	pub transactions: CounterVec<U64>,
	/// Blocks between the node's best block and its finalized one, at the last pass.
	pub chain_lag_blocks: Gauge<U64>,
	/// The best block's number at the last pass: one that stops rising while the chain
	/// moves on means the node or the light client's peers have gone silent.
	pub best_block: Gauge<U64>,
	/// Times this account was slashed, in any role.
	pub slashes: Counter<U64>,
	/// Plancks this account was slashed, in all.
	pub slashed: Counter<U64>,
	/// Reveals sent by kind: `secret` (a solver's forced-error secret), `verdict` (a
	/// verifier's).
	pub reveals: CounterVec<U64>,
	/// Verification rounds by what this verifier did: `drawn`, `match`, `mismatch`,
	/// `unchecked` (the samples could not be re-executed), `committed`.
	pub rounds: CounterVec<U64>,
	/// Seconds the last round's re-execution took.
	pub reexecution_seconds: Gauge<F64>,
	/// Dispute moves sent, by party: `defender`, `challenger`.
	pub dispute_moves: CounterVec<U64>,
	/// Artifact fetches from a peer that failed (the peer lacked it, was unreachable, or
	/// sent bytes that did not check).
	pub fetch_failures: Counter<U64>,
}

impl Metrics {
	/// Registers the metrics in `registry`.
	fn register(registry: &Registry) -> Result<Self> {
		let counters = |name: &str, help: &str, labels: &[&str]| register(CounterVec::new(Opts::new(name, help), labels)?, registry);
		let counter = |name: &str, help: &str| register(Counter::new(name, help)?, registry);
		Ok(Self {
			units: counters("touchstone_worker_units_total", "Work units by what happened to them", &["outcome"])?,
			steps_per_second: register(Gauge::new("touchstone_worker_steps_per_second", "Training steps per second, last interval")?, registry)?,
			steps: counter("touchstone_worker_steps_total", "Training steps run")?,
			proofs: counter("touchstone_worker_proofs_total", "Learning proofs committed")?,
			checkpoints: counter("touchstone_worker_checkpoints_total", "Checkpoints committed")?,
			earnings: counter("touchstone_worker_earnings_planck_total", "Plancks paid for finalized units")?,
			artifact_bytes: counter("touchstone_worker_artifact_bytes_total", "Artifact bytes written to the local store")?,
			peers: register(Gauge::new("touchstone_worker_peers", "Artifact-network peers connected")?, registry)?,
			reachability: register(Gauge::new("touchstone_worker_reachability", "AutoNAT: 0 unknown, 1 behind NAT or a firewall, 2 reachable")?, registry)?,
			transactions: counters("touchstone_worker_transactions_total", "Transactions by call and outcome", &["call", "outcome"])?,
			chain_lag_blocks: register(Gauge::new("touchstone_worker_chain_lag_blocks", "Best block minus finalized block")?, registry)?,
			best_block: register(Gauge::new("touchstone_worker_best_block", "Best block number at the last pass")?, registry)?,
			slashes: counter("touchstone_worker_slashes_total", "Times this account was slashed")?,
			slashed: counter("touchstone_worker_slashed_planck_total", "Plancks this account was slashed")?,
			reveals: counters("touchstone_worker_reveals_total", "Reveals sent, by kind", &["kind"])?,
			rounds: counters("touchstone_worker_rounds_total", "Verification rounds by what this verifier did", &["outcome"])?,
			reexecution_seconds: register(
				Gauge::new("touchstone_worker_reexecution_seconds", "Seconds the last round's re-execution took")?,
				registry,
			)?,
			dispute_moves: counters("touchstone_worker_dispute_moves_total", "Dispute moves sent, by party", &["party"])?,
			fetch_failures: counter("touchstone_worker_fetch_failures_total", "Artifact fetches from a peer that failed")?,
		})
	}

	/// Counts one unit `outcome`.
	pub fn unit(&self, outcome: &str) {
		self.units.with_label_values(&[outcome]).inc();
	}

	/// Counts one verification round `outcome`.
	pub fn round(&self, outcome: &str) {
		self.rounds.with_label_values(&[outcome]).inc();
	}
}

/// The registry and the metrics in it, made on first use.
fn registered() -> &'static (Registry, Metrics) {
	static REGISTERED: OnceLock<(Registry, Metrics)> = OnceLock::new();
	REGISTERED.get_or_init(|| {
		let registry = Registry::new_custom(None, None).unwrap_or_default();
		// Each name is registered once, in a fresh registry: a failure is a programming
		// error, found by the tests below.
		let metrics = Metrics::register(&registry).expect("the worker's metric names are valid and distinct");
		(registry, metrics)
	})
}

/// This process's metrics.
pub fn get() -> &'static Metrics {
	&registered().1
}

/// Serves this process's metrics on `address` in the background (`/metrics`).
pub fn serve(address: SocketAddr) {
	let registry = registered().0.clone();
	tokio::spawn(async move {
		if let Err(error) = prometheus_endpoint::init_prometheus(address, registry).await {
			tracing::error!(%address, "the metrics endpoint stopped: {error}");
		}
	});
}

#[cfg(test)]
mod tests {
	#[test]
	fn every_metric_registers_and_counts() {
		let metrics = super::get();
		metrics.unit("accepted");
		metrics.round("drawn");
		metrics.transactions.with_label_values(&["Tasks.submit_proof", "included"]).inc();
		assert_eq!(metrics.units.with_label_values(&["accepted"]).get(), 1);
		let names: Vec<String> = super::registered().0.gather().iter().map(|family| family.get_name().to_string()).collect();
		for name in ["touchstone_worker_units_total", "touchstone_worker_rounds_total", "touchstone_worker_transactions_total"] {
			assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
		}
	}
}

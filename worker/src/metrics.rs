//! Prometheus metrics of a worker, served at `/metrics` on the `--metrics` address.

use std::net::SocketAddr;

use anyhow::Result;
use prometheus_endpoint::{register, Counter, CounterVec, Gauge, Opts, Registry, F64, U64};

/// A worker's metrics.
#[derive(Clone)]
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
}

impl Metrics {
	/// Registers the metrics in `registry`.
	pub fn register(registry: &Registry) -> Result<Self> {
		Ok(Self {
			units: register(
				CounterVec::new(Opts::new("touchstone_worker_units_total", "Work units by what happened to them"), &["outcome"])?,
				registry,
			)?,
			steps_per_second: register(Gauge::new("touchstone_worker_steps_per_second", "Training steps per second, last interval")?, registry)?,
			steps: register(Counter::new("touchstone_worker_steps_total", "Training steps run")?, registry)?,
			proofs: register(Counter::new("touchstone_worker_proofs_total", "Learning proofs committed")?, registry)?,
			checkpoints: register(Counter::new("touchstone_worker_checkpoints_total", "Checkpoints committed")?, registry)?,
			earnings: register(Counter::new("touchstone_worker_earnings_planck_total", "Plancks paid for finalized units")?, registry)?,
			artifact_bytes: register(Counter::new("touchstone_worker_artifact_bytes_total", "Artifact bytes written to the local store")?, registry)?,
			peers: register(Gauge::new("touchstone_worker_peers", "Artifact-network peers connected")?, registry)?,
		})
	}

	/// Metrics kept but not served.
	pub fn unserved() -> Result<Self> {
		Self::register(&Registry::new())
	}

	/// Registers the metrics and serves them on `address` in the background.
	pub fn serve(address: SocketAddr) -> Result<Self> {
		let registry = Registry::new_custom(None, None)?;
		let metrics = Self::register(&registry)?;
		tokio::spawn(async move {
			if let Err(error) = prometheus_endpoint::init_prometheus(address, registry).await {
				tracing::error!(%address, "the metrics endpoint stopped: {error}");
			}
		});
		Ok(metrics)
	}

	/// Counts one unit `outcome`.
	pub fn unit(&self, outcome: &str) {
		self.units.with_label_values(&[outcome]).inc();
	}
}

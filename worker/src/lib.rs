//! The Touchstone worker's parts, shared by the `touchstone-worker` binary and its tests.
//!
//! - [`chain`]: the node connection, with calls and storage generated from the runtime's
//!   metadata;
//! - [`state`]: the chain behind two traits, what a pass reads and how it sends;
//! - [`config`]: settings from the environment and a config file;
//! - [`keys`]: identities;
//! - [`store`]: the content-addressed artifact store;
//! - [`dataset`] and [`jobfile`]: datasets as artifacts, and job descriptions;
//! - [`train`]: training one unit, checkpointed and resumable, and its learning proof;
//! - [`hardware`]: the declared hardware profile and the memory check;
//! - [`inputs`]: what a unit starts from, fetched and checked;
//! - [`submitter`]: the submitter's commands, from a job description to a tested model;
//! - [`solver`]: the solver role;
//! - [`verifier`]: the verifier role;
//! - [`samples`]: trace manifests, and re-executing one checkpoint segment against one;
//! - [`forced`]: forced errors, the secret a solver commits and the proof it gets wrong;
//! - [`dispute`]: playing disputes, as the defender or as the challenger;
//! - [`aggregate`]: a round's aggregate, computed by the solver that holds it;
//! - [`p2p`]: artifacts between workers over libp2p;
//! - [`metrics`]: Prometheus metrics.

pub mod aggregate;
pub mod chain;
pub mod config;
pub mod dataset;
pub mod dispute;
pub mod forced;
pub mod hardware;
pub mod inputs;
pub mod jobfile;
pub mod keys;
pub mod metrics;
pub mod p2p;
pub mod retention;
pub mod samples;
pub mod solver;
pub mod state;
pub mod store;
pub mod submitter;
pub mod train;
pub mod verifier;

#[cfg(test)]
mod scripted;

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
	let terminate = async {
		match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
			Ok(mut signal) => {
				signal.recv().await;
			},
			Err(_) => std::future::pending::<()>().await,
		}
	};
	tokio::select! {
		_ = tokio::signal::ctrl_c() => {},
		_ = terminate => {},
	}
}

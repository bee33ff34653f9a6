//! Settings from the environment and from a config file, beneath the command line.
//!
//! Every flag takes its value, in order, from the command line, from an environment
//! variable, from the config file (`--config FILE` or `TOUCHSTONE_CONFIG`), and last from
//! its built-in default. A flag of the whole program reads `TOUCHSTONE_<FLAG>`; a flag of a
//! subcommand reads `TOUCHSTONE_<SUBCOMMAND>_<FLAG>` (`--min-price` of `solve` reads
//! `TOUCHSTONE_SOLVE_MIN_PRICE`), so one environment can hold several roles' settings.
//! The few flags that name their own variable (`TOUCHSTONE_NODE_URL`, `TOUCHSTONE_KEY`)
//! keep it.
//!
//! The config file is TOML: the program's flags at the top, each subcommand's in a table
//! named after it, every key a flag's long name, as on the command line:
//!
//! ```toml
//! node = "ws://127.0.0.1:9944"
//! data-dir = "/var/lib/touchstone-worker"
//!
//! [solve]
//! key-file = "/etc/touchstone/solver.secret"
//! backend = "wgpu"
//! min-price = 0.05
//! p2p-listen = "/ip4/0.0.0.0/tcp/30555"
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Arg, Command};

/// The environment variable that names the config file, when `--config` does not.
pub const CONFIG_VARIABLE: &str = "TOUCHSTONE_CONFIG";

/// `command` with every flag that names no environment variable reading the one its place
/// gives it (`TOUCHSTONE_<SUBCOMMAND>_<FLAG>`), through every level of subcommands.
pub fn with_environment(command: Command) -> Command {
	scope_environment(command, "TOUCHSTONE")
}

fn scope_environment(command: Command, prefix: &str) -> Command {
	let command = command.mut_args(|arg| match (arg.get_env(), arg.get_long().map(str::to_owned)) {
		(None, Some(long)) if !matches!(long.as_str(), "help" | "version") => arg.env(variable(prefix, &long)),
		_ => arg,
	});
	let names: Vec<String> = command.get_subcommands().map(|sub| sub.get_name().to_owned()).collect();
	names.into_iter().fold(command, |command, name| {
		let prefix = variable(prefix, &name);
		command.mut_subcommand(name, |sub| scope_environment(sub, &prefix))
	})
}

/// `PREFIX_NAME` in upper case, with dashes as underscores.
fn variable(prefix: &str, name: &str) -> String {
	format!("{prefix}_{}", name.to_uppercase().replace('-', "_"))
}

/// The config file the command line (`--config FILE` or `--config=FILE`) or the
/// environment names, if any.
pub fn config_path(args: &[std::ffi::OsString]) -> Option<PathBuf> {
	let mut args = args.iter().skip(1);
	while let Some(arg) = args.next() {
		let text = arg.to_string_lossy();
		if text == "--" {
			break;
		}
		if text == "--config" {
			return args.next().map(PathBuf::from);
		}
		if let Some(path) = text.strip_prefix("--config=") {
			return Some(PathBuf::from(path));
		}
	}
	std::env::var_os(CONFIG_VARIABLE).map(PathBuf::from)
}

/// `command` with the settings of the config file at `path` as its flags' defaults.
pub fn with_file(command: Command, path: &Path) -> Result<Command> {
	let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the config file {}", path.display()))?;
	with_settings(command, &text).with_context(|| format!("in the config file {}", path.display()))
}

/// `command` with the settings of the TOML `text` as its flags' defaults: the program's
/// flags at the top level, each subcommand's in its table.
pub fn with_settings(command: Command, text: &str) -> Result<Command> {
	let table: toml::Table = text.parse().context("not valid TOML")?;
	apply(command, &table, "")
}

fn apply(mut command: Command, table: &toml::Table, place: &str) -> Result<Command> {
	for (key, value) in table {
		let here = if place.is_empty() { key.clone() } else { format!("{place}.{key}") };
		if let toml::Value::Table(inner) = value {
			if command.find_subcommand(key).is_none() {
				bail!("[{here}] is not a subcommand; the subcommands are {}", names(command.get_subcommands().map(Command::get_name)));
			}
			let mut result = Ok(());
			command = command.mut_subcommand(key, |sub| match apply(sub.clone(), inner, &here) {
				Ok(sub) => sub,
				Err(error) => {
					result = Err(error);
					sub
				},
			});
			result?;
			continue;
		}
		let Some(id) = command.get_arguments().find(|arg| arg.get_long() == Some(key.as_str())).map(|arg| arg.get_id().to_string()) else {
			let flags = command.get_arguments().filter_map(Arg::get_long).filter(|long| !matches!(*long, "help" | "version"));
			bail!("`{here}` is not a flag here; the flags are {}", names(flags));
		};
		let values = match value {
			toml::Value::Array(items) => items.iter().map(|item| text_of(item, &here)).collect::<Result<Vec<_>>>()?,
			other => vec![text_of(other, &here)?],
		};
		command = command.mut_arg(id, |arg| arg.default_values(values));
	}
	Ok(command)
}

/// A setting's value as the command line would spell it.
fn text_of(value: &toml::Value, key: &str) -> Result<String> {
	Ok(match value {
		toml::Value::String(text) => text.clone(),
		toml::Value::Integer(number) => number.to_string(),
		toml::Value::Float(number) => number.to_string(),
		toml::Value::Boolean(flag) => flag.to_string(),
		_ => bail!("`{key}` must be a string, a number, a boolean or an array of them"),
	})
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
	names.map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
	use super::*;
	use clap::{Args, FromArgMatches, Parser, Subcommand};

	#[derive(Parser, Debug)]
	struct Program {
		#[arg(long, env = "TOUCHSTONE_NODE_URL", default_value = "ws://127.0.0.1:9944")]
		node: String,
		#[command(subcommand)]
		command: Sub,
	}

	#[derive(Subcommand, Debug)]
	enum Sub {
		Solve(SolveFlags),
	}

	#[derive(Args, Debug)]
	struct SolveFlags {
		#[arg(long, default_value_t = 0.01)]
		min_price: f64,
		#[arg(long)]
		no_mdns: bool,
		#[arg(long = "peer")]
		peers: Vec<String>,
	}

	fn parse(command: Command, args: &[&str]) -> Result<Program> {
		Ok(Program::from_arg_matches(&command.try_get_matches_from(args)?)?)
	}

	#[test]
	fn the_command_line_beats_the_file_which_beats_the_default() {
		use clap::CommandFactory;
		let file = "node = \"ws://node:9944\"\n[solve]\nmin-price = 0.5\nno-mdns = true\npeer = [\"/ip4/10.0.0.1/tcp/1\", \"/ip4/10.0.0.2/tcp/2\"]\n";
		let command = with_settings(Program::command(), file).unwrap();
		let program = parse(command.clone(), &["worker", "solve"]).unwrap();
		assert_eq!(program.node, "ws://node:9944");
		let Sub::Solve(flags) = program.command;
		assert_eq!((flags.min_price, flags.no_mdns, flags.peers.len()), (0.5, true, 2));
		let program = parse(command, &["worker", "--node", "ws://other:1", "solve", "--min-price", "2"]).unwrap();
		assert_eq!(program.node, "ws://other:1");
		let Sub::Solve(flags) = program.command;
		assert_eq!(flags.min_price, 2.0);
		let program = parse(Program::command(), &["worker", "solve"]).unwrap();
		let Sub::Solve(flags) = program.command;
		assert_eq!((flags.min_price, flags.no_mdns, flags.peers.len()), (0.01, false, 0));
	}

	#[test]
	fn unknown_settings_say_what_is_known() {
		use clap::CommandFactory;
		let error = with_settings(Program::command(), "[solve]\nmin-prise = 1\n").unwrap_err().to_string();
		assert!(error.contains("`solve.min-prise` is not a flag here") && error.contains("`min-price`"), "{error}");
		let error = with_settings(Program::command(), "[solver]\n").unwrap_err().to_string();
		assert!(error.contains("[solver] is not a subcommand") && error.contains("`solve`"), "{error}");
		assert!(with_settings(Program::command(), "node = [").is_err());
	}

	#[test]
	fn every_flag_reads_a_variable_named_by_its_place() {
		use clap::CommandFactory;
		let command = with_environment(Program::command());
		let solve = command.find_subcommand("solve").unwrap();
		let env = |command: &Command, long: &str| {
			command.get_arguments().find(|arg| arg.get_long() == Some(long)).and_then(|arg| arg.get_env()).map(|v| v.to_string_lossy().into_owned())
		};
		assert_eq!(env(solve, "min-price").as_deref(), Some("TOUCHSTONE_SOLVE_MIN_PRICE"));
		assert_eq!(env(solve, "peer").as_deref(), Some("TOUCHSTONE_SOLVE_PEER"));
		assert_eq!(env(&command, "node").as_deref(), Some("TOUCHSTONE_NODE_URL"));
	}

	#[test]
	fn the_config_flag_is_found_before_parsing() {
		let args = |list: &[&str]| list.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
		assert_eq!(config_path(&args(&["w", "--config", "a.toml", "solve"])), Some(PathBuf::from("a.toml")));
		assert_eq!(config_path(&args(&["w", "solve", "--config=b.toml"])), Some(PathBuf::from("b.toml")));
	}
}

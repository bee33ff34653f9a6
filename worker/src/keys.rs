//! Identities: sr25519 keys from a secret URI (`//Bob`, a mnemonic, a `0x` seed, with
//! derivation paths) or from a polkadot.js account file.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use subxt_signer::sr25519::Keypair;
use subxt_signer::{bip39, SecretUri};

/// Where a key comes from.
#[derive(Clone, Debug, clap::Args)]
pub struct KeyArgs {
	/// The account's secret: a dev name (`//Alice`, `//Bob`), a mnemonic phrase, or a
	/// `0x`-prefixed 32-byte seed, each optionally followed by derivation paths.
	#[arg(long, env = "TOUCHSTONE_KEY", conflicts_with = "keystore", hide_env_values = true)]
	pub key: Option<String>,
	/// A polkadot.js account file (the JSON polkadot.js apps exports); its password comes
	/// from `TOUCHSTONE_KEY_PASSWORD`.
	#[arg(long)]
	pub keystore: Option<std::path::PathBuf>,
}

impl KeyArgs {
	/// The keypair these arguments name.
	pub fn keypair(&self) -> Result<Keypair> {
		match (&self.key, &self.keystore) {
			(Some(secret), _) => from_secret(secret),
			(None, Some(path)) => from_keystore(path),
			(None, None) => anyhow::bail!("no key given: pass --key (for example --key //Bob) or --keystore FILE"),
		}
	}
}

/// The keypair of a secret URI.
pub fn from_secret(secret: &str) -> Result<Keypair> {
	let uri: SecretUri = secret.parse().context("the key is not a valid secret URI (a dev name such as //Bob, a mnemonic or a 0x seed)")?;
	Keypair::from_uri(&uri).map_err(|error| anyhow::anyhow!("cannot derive a key from that secret: {error}"))
}

/// The keypair in a polkadot.js account file.
pub fn from_keystore(path: &Path) -> Result<Keypair> {
	let json = std::fs::read_to_string(path).with_context(|| format!("cannot read the keystore {}", path.display()))?;
	let password = std::env::var("TOUCHSTONE_KEY_PASSWORD").unwrap_or_default();
	subxt_signer::polkadot_js_compat::decrypt_json(&json, &password)
		.map_err(|error| anyhow::anyhow!("cannot open the keystore {} (is TOUCHSTONE_KEY_PASSWORD right?): {error}", path.display()))
}

/// The SS58 address of `keypair`.
pub fn address(keypair: &Keypair) -> String {
	keypair.public_key().to_account_id().to_string()
}

/// A new random mnemonic (12 words, from the operating system's random source).
pub fn generate() -> Result<bip39::Mnemonic> {
	let mut entropy = [0u8; 16];
	std::fs::File::open("/dev/urandom")
		.and_then(|mut random| random.read_exact(&mut entropy))
		.context("cannot read the operating system's random source")?;
	bip39::Mnemonic::from_entropy(&entropy).context("cannot build a mnemonic")
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn dev_names_mnemonics_and_bad_secrets() {
		// Bob's well-known dev address.
		assert_eq!(address(&from_secret("//Bob").unwrap()), "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty");
		let phrase = generate().unwrap().to_string();
		assert_eq!(phrase.split(' ').count(), 12);
		assert_eq!(address(&from_secret(&phrase).unwrap()), address(&from_secret(&phrase).unwrap()));
		assert!(from_secret("not a key").is_err());
	}
}

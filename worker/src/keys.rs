//! Identities: sr25519 keys from a secret URI (`//Bob`, a mnemonic, a `0x` seed, with
//! derivation paths), read from a file or given inline, or from a polkadot.js account file.
//! A real account's secret belongs in a file only its owner reads (`--key-file`) or in a
//! keystore, never on the command line, where every user of the host sees it in the
//! process list.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use subxt_signer::sr25519::Keypair;
use subxt_signer::{bip39, SecretUri};

/// Where a key comes from.
#[derive(Clone, Debug, clap::Args)]
pub struct KeyArgs {
	/// The account's secret: a dev name (`//Alice`, `//Bob`), a mnemonic phrase, or a
	/// `0x`-prefixed 32-byte seed, each optionally followed by derivation paths. Visible in
	/// the process list: for a real account use --key-file or --keystore.
	#[arg(long, env = "TOUCHSTONE_KEY", conflicts_with_all = ["keystore", "key_file"], hide_env_values = true)]
	pub key: Option<String>,
	/// A file holding the account's secret (as --key takes it, on one line); it should be
	/// readable by its owner only.
	#[arg(long, conflicts_with = "keystore", value_name = "FILE")]
	pub key_file: Option<std::path::PathBuf>,
	/// A polkadot.js account file (the JSON polkadot.js apps exports); its password comes
	/// from `TOUCHSTONE_KEY_PASSWORD`.
	#[arg(long)]
	pub keystore: Option<std::path::PathBuf>,
}

impl KeyArgs {
	/// The keypair these arguments name.
	pub fn keypair(&self) -> Result<Keypair> {
		match (&self.key, &self.key_file, &self.keystore) {
			(Some(secret), _, _) => from_secret(secret),
			(None, Some(path), _) => from_file(path),
			(None, None, Some(path)) => from_keystore(path),
			(None, None, None) => anyhow::bail!("no key given: pass --key-file FILE, --keystore FILE, or for a dev account --key //Bob"),
		}
	}
}

/// The keypair of a secret URI.
pub fn from_secret(secret: &str) -> Result<Keypair> {
	let uri: SecretUri = secret.parse().context("the key is not a valid secret URI (a dev name such as //Bob, a mnemonic or a 0x seed)")?;
	Keypair::from_uri(&uri).map_err(|error| anyhow::anyhow!("cannot derive a key from that secret: {error}"))
}

/// The keypair of the secret URI in the file at `path`. A file others can read is used, with
/// a warning: its secret may already be known.
pub fn from_file(path: &Path) -> Result<Keypair> {
	let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the key file {}", path.display()))?;
	use std::os::unix::fs::PermissionsExt;
	if std::fs::metadata(path).map(|meta| meta.permissions().mode() & 0o077 != 0).unwrap_or(false) {
		tracing::warn!(file = %path.display(), "the key file is readable by others: `chmod 600` it, and consider the account's secret exposed");
	}
	from_secret(text.trim()).with_context(|| format!("in the key file {}", path.display()))
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

	#[test]
	fn a_key_file_holds_the_secret_on_a_line() {
		let dir = std::env::temp_dir().join(format!("touchstone-key-file-{}", std::process::id()));
		std::fs::create_dir_all(&dir).unwrap();
		let file = dir.join("secret");
		std::fs::write(&file, "//Bob\n").unwrap();
		assert_eq!(address(&from_file(&file).unwrap()), address(&from_secret("//Bob").unwrap()));
		std::fs::write(&file, "not a key\n").unwrap();
		let error = format!("{:#}", from_file(&file).unwrap_err());
		assert!(error.contains("in the key file"), "{error}");
		assert!(from_file(&dir.join("missing")).is_err());
		std::fs::remove_dir_all(&dir).unwrap();
	}
}

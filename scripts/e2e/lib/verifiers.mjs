// Verifiers for the end-to-end tests: accounts that register as verifiers and play every
// round the chain draws them for, through real extrinsics, block by block. They attest
// `Match` without re-executing anything (the worker has no `verify` role yet), so they
// exercise the chain's side of verification (the draw from BABE's randomness on a real
// node, commit-reveal, pay and slashing), not the checking itself. A `silent` verifier
// registers and never answers, to be slashed for each missed reveal.
import { blake2AsU8a, randomAsU8a } from '@polkadot/util-crypto';
import { u8aConcat } from '@polkadot/util';
import { send } from './node.mjs';

const PROFILE = {
  device: 'Cpu',
  model: 'e2e verifier',
  memoryMib: 4096,
  throughputGflops: 10,
  bandwidthMbps: 100,
  region: 'eu-west',
};

/** SCALE of `Verdict::Match`: the enum's first variant, no fields. */
const MATCH = new Uint8Array([0]);

/** What a verifier commits for `Match`: blake2_256(SCALE((verdict, salt, account))). */
export function matchCommitment(salt, publicKey) {
  return blake2AsU8a(u8aConcat(MATCH, salt, publicKey), 256);
}

async function sendOk(tx, signer, what) {
  const { dispatchError } = await send(tx, signer);
  if (dispatchError) throw new Error(`${what} failed: ${dispatchError.toString()}`);
}

/**
 * Registers `attesting` and `silent` keyring pairs as verifiers with `bond` each, then
 * follows best blocks: each attesting verifier commits `Match` in every round it is drawn
 * for and reveals it once reveals open; every verifier sends a heartbeat every 20 blocks
 * so it stays online. Records the pallet's events, `tasks.UnitFinalized`, and the segments
 * `VerificationApi::samples` gives each verifier. Returns `{ events, samples, failure, stop }`.
 */
export async function startVerifiers(api, { attesting, silent = [], bond }) {
  for (const pair of [...attesting, ...silent]) {
    await sendOk(api.tx.staking.register(PROFILE, [['Verifier', bond]], 0), pair, 'verifier registration');
  }
  const salts = new Map();
  const events = [];
  const samples = [];
  let busy = false;
  let lastHeartbeat = 0;
  let failure = null;
  const unsubscribe = await api.rpc.chain.subscribeNewHeads(async (header) => {
    const now = header.number.toNumber();
    const at = await api.at(header.hash);
    for (const { event } of await at.query.system.events()) {
      if (event.section === 'verification' || (event.section === 'tasks' && event.method === 'UnitFinalized')) {
        const data = Object.fromEntries(event.data.names.map((name, i) => [name, event.data[i].toJSON()]));
        events.push({ block: now, section: event.section, method: event.method, data });
      }
    }
    // One pass at a time: each transaction waits for its block, so nonces never collide.
    if (busy) return;
    busy = true;
    try {
      if (now - lastHeartbeat >= 20) {
        lastHeartbeat = now;
        for (const pair of [...attesting, ...silent]) await sendOk(api.tx.staking.heartbeat(), pair, 'heartbeat');
      }
      for (const [key, value] of await api.query.verification.rounds.entries()) {
        const round = value.unwrap();
        if (round.drawn.isNone) continue;
        const { commitEnds, revealEnds } = round.drawn.unwrap();
        const [job, unit] = key.args[0];
        for (const attestation of round.attestations) {
          const pair = attesting.find((p) => p.address === attestation.verifier.toString());
          if (!pair) continue;
          const id = `${job}/${unit}/${pair.address}/${round.traceRoot.toHex()}`;
          if (attestation.state.isDrawn && now < commitEnds.toNumber()) {
            // The segments this verifier would re-execute, from the runtime API.
            const segments = await api.call.verificationApi.samples(job, unit, pair.address);
            samples.push({ job: job.toNumber(), unit: unit.toNumber(), verifier: pair.address, segments: segments.toJSON() });
            const salt = randomAsU8a(32);
            salts.set(id, salt);
            await sendOk(api.tx.verification.commit(job, unit, matchCommitment(salt, pair.publicKey)), pair, 'commit');
          } else if (attestation.state.isCommitted && now >= commitEnds.toNumber() && now < revealEnds.toNumber() && salts.has(id)) {
            await sendOk(api.tx.verification.reveal(job, unit, 'Match', salts.get(id)), pair, 'reveal');
          }
        }
      }
    } catch (error) {
      failure ??= error;
    } finally {
      busy = false;
    }
  });
  return {
    events,
    /** The segments each attesting verifier was told to re-execute, per round. */
    samples,
    /** The first error a verifier met, if any. */
    failure: () => failure,
    stop: () => unsubscribe(),
  };
}

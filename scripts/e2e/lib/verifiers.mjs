// Verification on a dev node, watched from the test: accounts that register as verifiers
// and never answer (`silent`), so the chain draws them and slashes each missed reveal, and
// a record of every verification and dispute event, `tasks.UnitFinalized` and
// `staking.Slashed`. The verifiers that do
// answer are real workers (`touchstone-worker verify`), started by the test.
import { send } from './node.mjs';

const PROFILE = {
  device: 'Cpu',
  model: 'e2e verifier',
  memoryMib: 4096,
  throughputGflops: 10,
  bandwidthMbps: 100,
  region: 'eu-west',
};

/** The events recorded: `[section, method]`, every method of the section when absent. */
const WATCHED = [['verification'], ['disputes'], ['tasks', 'UnitFinalized'], ['staking', 'Slashed']];

async function sendOk(tx, signer, what) {
  const { dispatchError } = await send(tx, signer);
  if (dispatchError) throw new Error(`${what} failed: ${dispatchError.toString()}`);
}

/**
 * Registers the `silent` keyring pairs as verifiers with `bond` each; they send a heartbeat
 * every 20 blocks, so they stay online and are drawn, and never commit. Records the
 * events `WATCHED` names from every best block. Returns
 * `{ events, failure, stop }`.
 */
export async function watchVerification(api, { silent, bond }) {
  for (const pair of silent) {
    await sendOk(api.tx.staking.register(PROFILE, [['Verifier', bond]], 0), pair, 'verifier registration');
  }
  const events = [];
  let busy = false;
  let lastHeartbeat = 0;
  let failure = null;
  const unsubscribe = await api.rpc.chain.subscribeNewHeads(async (header) => {
    const now = header.number.toNumber();
    const at = await api.at(header.hash);
    for (const { event } of await at.query.system.events()) {
      if (WATCHED.some(([section, method]) => event.section === section && (!method || event.method === method))) {
        const data = Object.fromEntries(event.data.names.map((name, i) => [name, event.data[i].toJSON()]));
        events.push({ block: now, section: event.section, method: event.method, data });
      }
    }
    // One pass at a time: each transaction waits for its block, so nonces never collide.
    if (busy || now - lastHeartbeat < 20) return;
    busy = true;
    try {
      lastHeartbeat = now;
      for (const pair of silent) await sendOk(api.tx.staking.heartbeat(), pair, 'heartbeat');
    } catch (error) {
      failure ??= error;
    } finally {
      busy = false;
    }
  });
  return {
    events,
    /** The first error met, if any. */
    failure: () => failure,
    stop: () => unsubscribe(),
  };
}

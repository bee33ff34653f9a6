// Background `touchstone-worker` processes for the end-to-end tests, each with its own data
// directory and accumulated log, and a record of the chain's protocol events at every best
// block.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { freePort, setForcedErrorRate, startNode, waitFor, workerBinary } from './node.mjs';

/**
 * The workers of one test against the node at `wsUrl`, each named, with its data directory
 * `dataDir/name`. A worker can be killed and started again with the same arguments and
 * directory, the way an operator's service manager restarts it.
 */
export class Workers {
  constructor(wsUrl, dataDir) {
    this.wsUrl = wsUrl;
    this.dataDir = dataDir;
    /** Workers by name: `{ args, process, log, exited }`. */
    this.running = new Map();
  }

  /**
   * Starts worker `name` with subcommand arguments `args`; its output accumulates in its
   * `log`. With `netns`, it runs in that network namespace (`ip netns exec`), reaching the
   * node at `wsUrl` (by default the one the workers were made with).
   */
  start(name, args, options = {}) {
    const { netns, wsUrl = this.wsUrl } = options;
    const entry = this.running.get(name) ?? { args, log: '' };
    entry.args = args;
    entry.options = options;
    entry.exited = null;
    const command = [workerBinary(), '--node', wsUrl, '--data-dir', join(this.dataDir, name), ...args];
    const [program, ...programArgs] = netns ? ['ip', 'netns', 'exec', netns, ...command] : command;
    entry.process = spawn(program, programArgs, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RUST_LOG: 'info' },
    });
    entry.process.on('exit', (code, signal) => { entry.exited = { code, signal }; });
    const keep = (chunk) => {
      entry.log += chunk.toString();
      if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
    };
    entry.process.stdout.on('data', keep);
    entry.process.stderr.on('data', keep);
    this.running.set(name, entry);
    return entry;
  }

  /** Worker `name`'s output so far ('' if it never ran). */
  log(name) {
    return this.running.get(name)?.log ?? '';
  }

  /** Sends `signal` to worker `name` and resolves once it has exited. */
  async kill(name, signal) {
    const entry = this.running.get(name);
    if (!entry || entry.exited) return;
    const exited = new Promise((resolve) => entry.process.once('exit', resolve));
    entry.process.kill(signal);
    await exited;
  }

  /** Starts worker `name` again, with the arguments and data directory it had. */
  restart(name) {
    const { args, options } = this.running.get(name);
    return this.start(name, args, options);
  }

  /** Every worker's log, for a failure's message. */
  logs() {
    return [...this.running].map(([name, { log }]) => `\n${name} log:\n${log}`).join('');
  }

  /** Rethrows `error` with every worker's log appended: they say why. */
  withLogs = (error) => {
    throw new Error(`${error.message}${this.logs()}`);
  };

  /** Asks every worker still running to stop, as Ctrl-C does. */
  stopAll() {
    for (const { process: child, exited } of this.running.values()) if (!exited) child.kill('SIGINT');
  }
}

/**
 * Records every event of the pallets `sections` in every best block, in order, as
 * `{ block, section, method, data }` with `data` by field name. Returns `{ events, of, stop }`:
 * `of(section, method, job, unit)` filters them by job and unit when given.
 *
 * With `finalized`, only finalized blocks are recorded, each once, in order (every block
 * between two finalized heads, found through the parent hashes): on a network of several
 * validators, best blocks of competing forks carry the same events twice.
 */
export async function recordEvents(api, sections = ['tasks', 'verification', 'disputes', 'staking'], { finalized = false } = {}) {
  const events = [];
  const record = async (hash, block) => {
    const at = await api.at(hash);
    for (const { event } of await at.query.system.events()) {
      if (sections.includes(event.section)) {
        const data = Object.fromEntries(event.data.names.map((name, i) => [name, event.data[i].toJSON()]));
        events.push({ block, section: event.section, method: event.method, data });
      }
    }
  };
  let unsubscribe;
  if (finalized) {
    let recorded = null;
    let queue = Promise.resolve();
    unsubscribe = await api.rpc.chain.subscribeFinalizedHeads((header) => {
      queue = queue.then(async () => {
        const newest = header.number.toNumber();
        const from = recorded === null ? newest : recorded + 1;
        const hashes = [header.hash];
        for (let number = newest; number > from; number--) {
          hashes.unshift((await api.rpc.chain.getHeader(hashes[0])).parentHash);
        }
        for (const [i, hash] of hashes.entries()) await record(hash, from + i);
        recorded = newest;
      }).catch(() => {});
    });
  } else {
    unsubscribe = await api.rpc.chain.subscribeNewHeads((header) => record(header.hash, header.number.toNumber()));
  }
  const of = (section, method, job, unit) => events.filter((e) => e.section === section && e.method === method &&
    (job === undefined || Number(e.data.job) === job) && (unit === undefined || Number(e.data.unit) === unit));
  return { events, of, stop: () => unsubscribe() };
}

/**
 * A dev node (`name` in its logs) with Bob's solver on it, listening for artifacts on a
 * fixed port (`solverPeer`, which submitters dial for their datasets), every protocol event
 * recorded, and the forced-error rate at one in a billion, so the solver commits and reveals
 * a secret for every unit, as on a real chain, and no unit is forced. Resolves once Bob is
 * registered. `stop()` ends the workers, the recording and the node and removes the data.
 * `solverArgs` are added to Bob's `solve` command.
 */
export async function devChainWithSolver(name, { solverArgs = [] } = {}) {
  const node = await startNode(['--dev', '--tmp'], { name });
  const api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
  const dataDir = mkdtempSync(join(tmpdir(), `touchstone-${name}-`));
  const solverPeer = `/ip4/127.0.0.1/tcp/${await freePort()}`;
  const workers = new Workers(node.wsUrl, dataDir);
  const recorded = await recordEvents(api);
  const keyring = new Keyring({ type: 'sr25519' });
  const chain = {
    node, api, dataDir, solverPeer, workers, recorded, keyring,
    /** Resolves once every account of `uris` is registered on chain. */
    registered: (uris, what) => waitFor(what, async () => {
      for (const uri of uris) if ((await api.query.staking.nodes(keyring.addFromUri(uri).address)).isNone) return false;
      return true;
    }, { timeoutMs: 180_000 }).catch(workers.withLogs),
    /**
     * Submits the job file `fixtures/<fixture>.toml` as `key` (Alice by default), serving its
     * dataset while the job runs; resolves with its id. Jobs submitted at once need keys of
     * their own: one account's transactions at once would share a nonce.
     */
    async submit(fixture, { key = '//Alice' } = {}) {
      const job = join(dataDir, `${fixture}.toml`);
      writeFileSync(job, readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', `${fixture}.toml`), 'utf8'));
      const submitter = workers.start(`${fixture}-submitter`, ['submit', '--key', key, '--job', job, '--wait', '--peer', solverPeer, '--no-mdns']);
      const submitted = await waitFor(`${fixture} to be submitted`, () => /job (\d+) submitted/.exec(submitter.log), { timeoutMs: 120_000 })
        .catch(workers.withLogs);
      return Number(submitted[1]);
    },
    async stop() {
      recorded.stop();
      workers.stopAll();
      await api.disconnect();
      await node.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  await setForcedErrorRate(api, keyring.addFromUri('//Alice'), 1);
  workers.start('solver', ['solve', '--key', '//Bob', '--p2p-listen', solverPeer, '--no-mdns', ...solverArgs]);
  await chain.registered(['//Bob'], 'the solver to register');
  return chain;
}

// Starts and stops real touchstone-node processes for the end-to-end tests.
import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { u8aToHex } from '@polkadot/util';
import { xxhashAsHex } from '@polkadot/util-crypto';

/** The node binary: $TOUCHSTONE_NODE, else the debug build in the shared target dir. */
export function nodeBinary() {
  const explicit = process.env.TOUCHSTONE_NODE;
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'touchstone', 'target');
  const binary = explicit ?? join(targetDir, 'debug', 'touchstone-node');
  if (!existsSync(binary)) {
    throw new Error(`touchstone-node not found at ${binary}: build it first (scripts/build.sh) or set TOUCHSTONE_NODE`);
  }
  return binary;
}

/** The worker binary: $TOUCHSTONE_WORKER, else the debug build in the shared target dir. */
export function workerBinary() {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'touchstone', 'target');
  const binary = process.env.TOUCHSTONE_WORKER ?? join(targetDir, 'debug', 'touchstone-worker');
  if (!existsSync(binary)) throw new Error(`touchstone-worker not found at ${binary}: build the workspace first`);
  return binary;
}

/** A TCP port nothing listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function rpc(port, method, params = []) {
  const response = await fetch(`http://127.0.0.1:${port}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result;
}

/**
 * Starts `touchstone-node` with `args` plus fresh RPC, P2P and Prometheus ports, and
 * resolves once its RPC answers. The returned handle's `stop()` ends it.
 *
 * A node whose log stops growing for `stallMs` before its RPC answers is stuck in startup
 * (seen once in CI: a restarted validator printed its network identity and then nothing
 * for three minutes, and not reproduced in ten local restarts). Its thread stacks are
 * saved for diagnosis, it is killed, and it is started once more on fresh ports; the
 * retry is reported on stderr, never hidden.
 */
export async function startNode(args, { name = 'node', timeoutMs = 180_000, stallMs = 60_000 } = {}) {
  try {
    return await launch(args, { name, timeoutMs, stallMs });
  } catch (error) {
    if (!error.stalled) throw error;
    process.stderr.write(`# ${name} stalled in startup; stacks in ${error.stacks}; starting it again\n`);
    return launch(args, { name, timeoutMs, stallMs: timeoutMs });
  }
}

/** Saves every thread's stack of a stuck process with gdb, when gdb is installed. */
function saveStacks(pid) {
  const file = join(tmpdir(), `touchstone-node-stall-${pid}.txt`);
  try {
    const stacks = execFileSync('gdb', ['-p', String(pid), '-batch', '-ex', 'thread apply all bt'], {
      timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024,
    });
    writeFileSync(file, stacks);
  } catch (error) {
    writeFileSync(file, `no stacks: ${error.message}\n`);
  }
  return file;
}

async function launch(args, { name, timeoutMs, stallMs }) {
  const rpcPort = await freePort();
  const p2pPort = await freePort();
  const prometheusPort = await freePort();
  // An explicit --listen-addr sets the P2P port itself.
  const p2pArgs = args.includes('--listen-addr') ? [] : ['--port', String(p2pPort)];
  const fullArgs = [
    ...args,
    ...p2pArgs,
    '--rpc-port', String(rpcPort),
    '--prometheus-port', String(prometheusPort),
    '--no-telemetry',
    '--no-mdns',
  ];
  const child = spawn(nodeBinary(), fullArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  let lastOutput = Date.now();
  const keep = (chunk) => {
    lastOutput = Date.now();
    log.push(chunk.toString());
    if (log.length > 400) log.splice(0, log.length - 400);
    if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; });

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited) throw new Error(`${name} exited early (${JSON.stringify(exited)}):\n${log.join('')}`);
    try {
      await rpc(rpcPort, 'system_health');
      break;
    } catch {
      const stalled = Date.now() - lastOutput > stallMs;
      if (stalled || Date.now() > deadline) {
        const stacks = stalled ? saveStacks(child.pid) : null;
        child.kill('SIGKILL');
        const why = stalled ? `printed nothing for ${stallMs} ms` : `did not answer RPC within ${timeoutMs} ms`;
        const error = new Error(`${name} ${why}:\n${log.join('')}`);
        Object.assign(error, { stalled, stacks });
        throw error;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  return {
    name,
    rpcPort,
    p2pPort,
    prometheusPort,
    wsUrl: `ws://127.0.0.1:${rpcPort}`,
    log: () => log.join(''),
    rpc: (method, params) => rpc(rpcPort, method, params),
    async stop() {
      if (exited) return;
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await done;
      clearTimeout(timer);
    },
  };
}

/**
 * The chain spec a light client starts from: `node`'s sync spec (raw, with a finalized
 * block as its checkpoint), with `node` as its only boot node.
 */
export async function syncSpec(node) {
  const spec = await node.rpc('sync_state_genSyncSpec', [true]);
  const peerId = await node.rpc('system_localPeerId');
  spec.bootNodes = [`/ip4/127.0.0.1/tcp/${node.p2pPort}/p2p/${peerId}`];
  return spec;
}

/** Polls `check` every `intervalMs` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor(what, check, { timeoutMs = 120_000, intervalMs = 1000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Signs and sends `tx`; resolves once it is in a block with its block hash, events and
 * dispatch error (if any), or rejects if the pool refuses it. */
export function send(tx, signer) {
  return new Promise((resolve, reject) => {
    let unsubscribe;
    tx.signAndSend(signer, (result) => {
      if (result.status.isInBlock) {
        unsubscribe?.();
        resolve({
          blockHash: result.status.asInBlock,
          events: result.events.map(({ event }) => event),
          dispatchError: result.dispatchError,
        });
      } else if (result.isError) {
        unsubscribe?.();
        reject(new Error(`transaction failed: ${result.status.type}`));
      }
    }).then((u) => { unsubscribe = u; }, (error) => refused(tx, signer, error).then(reject, reject));
  });
}

/** The connection `refused` reads the pool through, if a test file named one. */
let poolReader;

/** Makes every refusal `send` reports name what the pool held from the same account, read
 * through `api`: a nonce clash then names the other transaction. */
export function explainRefusalsWith(api) {
  poolReader = api;
}

/** Explains a transaction the pool refused: who sent it, what, with which nonce, and what
 * the pool holds from the same account. */
async function refused(tx, signer, error) {
  const lines = [`${tx.method.section}.${tx.method.method} nonce ${tx.nonce?.toNumber()} from ${signer.address}: ${error.message}`];
  try {
    const api = poolReader;
    lines.push(`  next index ${(await api?.rpc.system.accountNextIndex(signer.address))?.toNumber()}`);
    for (const waiting of api ? await pendingFrom(api, signer.address) : []) lines.push(`  pending: ${waiting}`);
  } catch (inner) {
    lines.push(`  (the pool is unreadable: ${inner.message})`);
  }
  return new Error(lines.join('\n'));
}

/** The transactions `address` signed that the pool's view holds, as `nonce N section.method`. */
async function pendingFrom(api, address) {
  return (await api.rpc.author.pendingExtrinsics())
    .filter((x) => x.signer.toString() === address)
    .map((x) => `nonce ${x.nonce.toNumber()} ${x.method.section}.${x.method.method}`);
}

/**
 * Waits until the pool holds nothing `address` signed, seen twice two blocks apart, and
 * resolves with the transactions it saw waiting. The node's pool (fork-aware) answers
 * `system_accountNextIndex` and `author_pendingExtrinsics` from its view of the best
 * block; a transaction submitted while that view is being built (a worker reacts to each
 * new block exactly then) can be in the pool and missing from it until the next block's
 * view. Meanwhile a client signing with the same key is given its nonce and refused
 * (`1014: Priority is too low`); a stopped worker's last heartbeat did this to the
 * tolerance test.
 */
export async function waitForPoolToClear(api, address, { timeoutMs = 60_000 } = {}) {
  const seen = new Set();
  const clear = async () => {
    const pending = await pendingFrom(api, address);
    for (const waiting of pending) seen.add(waiting);
    return pending.length === 0;
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await waitFor(`the pool to hold nothing from ${address}`, clear, { timeoutMs: Math.max(deadline - Date.now(), 1000) });
    const block = (await api.rpc.chain.getHeader()).number.toNumber();
    await waitFor('two new blocks', async () => (await api.rpc.chain.getHeader()).number.toNumber() >= block + 2, { timeoutMs: 30_000 });
    if (await clear()) return [...seen];
  }
}

/** Sends `tx` as `send` does; resolves with its events, or rejects with the runtime's error
 * name (`section.Name`). */
export async function sendOk(tx, signer) {
  const { events, dispatchError } = await send(tx, signer);
  if (dispatchError?.isModule) {
    const { section, name } = tx.registry.findMetaError(dispatchError.asModule);
    throw new Error(`${section}.${name}`);
  }
  if (dispatchError) throw new Error(dispatchError.toString());
  return events;
}

/** Sets the runtime's forced-error rate to `partsPerBillion` through sudo as `sudoer`, and
 * waits until the best block reads it. */
export async function setForcedErrorRate(api, sudoer, partsPerBillion) {
  const key = xxhashAsHex(':ForcedErrorRate:', 128);
  // SCALE, little-endian (`toHex` of a number type is big-endian).
  const value = u8aToHex(api.createType('Perbill', partsPerBillion).toU8a());
  await sendOk(api.tx.sudo.sudo(api.tx.system.setStorage([[key, value]])), sudoer);
  // Several validators can author competing blocks: the block that took the write may not
  // be the best one yet when the call returns, so wait for the best chain to hold it.
  let now;
  await waitFor(`the forced-error rate to read ${partsPerBillion}`, async () => {
    now = (await api.call.verificationApi.forcedErrorRate()).toNumber();
    return now === partsPerBillion;
  }, { timeoutMs: 60_000, intervalMs: 500 }).catch((error) => {
    throw new Error(`the forced-error rate is ${now}, not ${partsPerBillion}: ${error.message}`);
  });
}

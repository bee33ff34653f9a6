// The worker end to end: a dev node, one solver (`touchstone-worker solve`), and the digits
// job submitted through `touchstone-worker submit`. The job trains through the chain, the
// solver is paid from escrow, the final model on-chain is the file the worker wrote, and
// that model reaches the reference's pinned test accuracy.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiPromise, WsProvider, Keyring } from '@polkadot/api';
import { blake2AsHex } from '@polkadot/util-crypto';
import { startNode, waitFor } from './lib/node.mjs';

const run = promisify(execFile);
const UNIT = 10n ** 12n;

function workerBinary() {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'touchstone', 'target');
  const binary = process.env.TOUCHSTONE_WORKER ?? join(targetDir, 'debug', 'touchstone-worker');
  if (!existsSync(binary)) throw new Error(`touchstone-worker not found at ${binary}: build the workspace first`);
  return binary;
}

let node;
let api;
let solver;
let solverLog = '';
let dataDir;
const keyring = new Keyring({ type: 'sr25519' });

/** Runs a worker subcommand to completion; resolves with its stdout. */
async function worker(args, timeout = 120_000) {
  const { stdout } = await run(workerBinary(), ['--node', node.wsUrl, '--data-dir', dataDir, ...args], {
    timeout,
    maxBuffer: 16 << 20,
  });
  return stdout;
}

before(async () => {
  node = await startNode(['--dev', '--tmp'], { name: 'dev' });
  api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
  dataDir = mkdtempSync(join(tmpdir(), 'touchstone-worker-e2e-'));
  solver = spawn(workerBinary(), ['--node', node.wsUrl, '--data-dir', dataDir, 'solve', '--key', '//Bob'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: 'info' },
  });
  const keep = (chunk) => {
    solverLog += chunk.toString();
    if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`[solver] ${chunk}`);
  };
  solver.stdout.on('data', keep);
  solver.stderr.on('data', keep);
});

after(async () => {
  solver?.kill('SIGINT');
  await api?.disconnect();
  await node?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test('a solver worker trains the digits job through the chain and is paid', { timeout: 900_000 }, async () => {
  const bob = keyring.addFromUri('//Bob');
  await waitFor('the solver to register', async () => (await api.query.staking.nodes(bob.address)).isSome, {
    timeoutMs: 120_000,
  }).catch((error) => { throw new Error(`${error.message}\nsolver log:\n${solverLog}`); });
  const freeBefore = (await api.query.system.account(bob.address)).data.free.toBigInt();

  const submitted = await worker(['submit', '--key', '//Alice', '--example', 'digits', '--wait'], 840_000)
    .catch((error) => { throw new Error(`${error.message}\nsolver log:\n${solverLog}`); });
  const jobId = Number(/job (\d+) submitted/.exec(submitted)?.[1]);
  assert.ok(Number.isInteger(jobId), submitted);
  assert.match(submitted, /completed: 4 units finalized, 0 failed/);

  const job = (await api.query.tasks.jobs(jobId)).unwrap();
  assert.equal(job.status.toString(), 'Completed');
  assert.equal(job.escrow.toBigInt(), 0n, 'the escrow was paid out');
  const result = job.result.unwrap();

  // Four units at 1 TST, less the jackpot's 2 %, less Bob's transaction fees.
  const freeAfter = (await api.query.system.account(bob.address)).data.free.toBigInt();
  assert.ok(freeAfter - freeBefore > 3n * UNIT, `Bob earned ${(freeAfter - freeBefore) / 10n ** 9n} mTST`);

  const modelPath = join(dataDir, 'model.safetensors');
  const fetched = await worker(['fetch', '--job', String(jobId), '--out', modelPath]);
  assert.match(fetched, /wrote/);
  const onChain = result.modelHash.toHex();
  const written = blake2AsHex(readFileSync(modelPath), 256);
  assert.equal(written, onChain, 'the final model hash on-chain is the hash of the file the worker wrote');

  const evaluated = await worker(['evaluate', '--example', 'digits', '--model', modelPath]);
  // The reference's accuracy on this run is pinned (kernels/tests/digits.rs): 352/360.
  assert.match(evaluated, /test accuracy 97\.8 % \(352\/360\)/);
});

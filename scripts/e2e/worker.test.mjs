// The worker end to end, against a dev node: a solver (`touchstone-worker solve`) killed in
// the middle of a unit resumes from its checkpoint after a restart and finishes the unit
// (a job that starts from uploaded initial weights); then the digits job, submitted through
// `touchstone-worker submit`, trains through the chain with every one of its proofs
// verified in a round of verifiers the chain draws: two verifier workers
// (`touchstone-worker verify`) re-execute their samples of each unit and attest. While its
// challenge windows run, one unit of another job is forced to carry an error: the solver
// commits a proof wrong at one step on purpose, the verifiers catch it and are paid from the
// jackpot, the solver reveals its secret and the honest trace, whose proof replaces the
// forced one, and nobody is slashed. A tolerance-mode job trained on libtorch is profiled by its
// verifiers, who reveal distances within the thresholds the chain sets from their profiles;
// a gross lie in its second unit is measured beyond them, and an escalation committee drawn
// afresh overturns the proof and the solver is slashed.
// Then the solver is restarted as a liar (one corrupted value at
// one step): the verifiers and a watching challenger that runs on a light client of its
// own (smoldot in the worker, no node's RPC) catch it, one plays the dispute its mismatch
// opens through all three levels, the runtime's referee rules against the liar and its
// bond is slashed. A transformer job on the Shakespeare corpus's token stream gets the same
// treatment, its lie in the first block's attention, judged at a causal-softmax piece. Last,
// the digits job completes: the solver is paid from escrow, the final model on-chain is the
// file the worker wrote, and that model reaches the reference's pinned test accuracy. The
// submitters and the solver keep separate artifact stores: the dataset, the initial weights
// and the model cross over libp2p, and `fetch` finds the solver from the endpoint it
// advertised on-chain.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ApiPromise, WsProvider, Keyring } from '@polkadot/api';
import { blake3 } from '@noble/hashes/blake3';
import { bytesToHex } from '@noble/hashes/utils';
import { startNode, syncSpec, waitFor, freePort, sendOk, workerBinary, explainRefusalsWith, waitForPoolToClear, setForcedErrorRate as setForcedErrorRateAs } from './lib/node.mjs';
import { watchVerification } from './lib/verifiers.mjs';

const run = promisify(execFile);
const UNIT = 10n ** 12n;


let node;
let api;
/** The verification watcher the digits test starts; the liar test reads its events too. */
let verification;
let solver;
let solverLog = '';
let dataDir;
let solverPeer;
/** The verifier workers and the watching challenger, by key, with their logs. */
const verifierWorkers = new Map();
const keyring = new Keyring({ type: 'sr25519' });

/** Runs a worker subcommand as the submitter (its own data directory); resolves with its stdout. */
async function worker(args, timeout = 120_000) {
  const { stdout } = await run(workerBinary(), ['--node', node.wsUrl, '--data-dir', join(dataDir, 'submitter'), ...args], {
    timeout,
    maxBuffer: 16 << 20,
  });
  return stdout;
}

/** Starts the solver (Bob) with its own data directory; its output accumulates in `solverLog`. */
function startSolver(extra = []) {
  const solverArgs = ['solve', '--key', '//Bob', '--p2p-listen', solverPeer, '--no-mdns', ...extra];
  solver = spawn(workerBinary(), ['--node', node.wsUrl, '--data-dir', join(dataDir, 'solver'), ...solverArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: 'info' },
  });
  const keep = (chunk) => {
    solverLog += chunk.toString();
    if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`[solver] ${chunk}`);
  };
  solver.stdout.on('data', keep);
  solver.stderr.on('data', keep);
}

/**
 * Starts a verifier worker for `uri` (or, with `command`, another checking subcommand) with
 * its own data directory and log; through the node's RPC, or with `chainSpec` (a file)
 * through a light client of its own that trusts no node.
 */
function startVerifierWorker(uri, command = ['verify'], { chainSpec } = {}) {
  const name = uri.replace(/^\/\//, '').replaceAll('//', '-').toLowerCase();
  const chain = chainSpec ? ['--chain-spec', chainSpec] : ['--node', node.wsUrl];
  const args = [...chain, '--data-dir', join(dataDir, name), ...command, '--key', uri,
    '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns'];
  const entry = { log: '', process: spawn(workerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'info' } }) };
  const keep = (chunk) => {
    entry.log += chunk.toString();
    if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
  };
  entry.process.stdout.on('data', keep);
  entry.process.stderr.on('data', keep);
  verifierWorkers.set(uri, entry);
  return entry;
}

/** A rejection that carries the workers' logs, which say why. */
const withSolverLog = (error) => {
  throw new Error(`${error.message}${workerLogs()}`);
};

/** The solver's and the verifier workers' logs, for a failure's message. */
const workerLogs = () => {
  const verifiers = [...verifierWorkers].map(([uri, { log }]) => `\nverifier ${uri} log:\n${log}`).join('');
  return `\nsolver log:\n${solverLog}${verifiers}`;
};

before(async () => {
  node = await startNode(['--dev', '--tmp'], { name: 'dev' });
  api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
  explainRefusalsWith(api);
  dataDir = mkdtempSync(join(tmpdir(), 'touchstone-worker-e2e-'));
  solverPeer = `/ip4/127.0.0.1/tcp/${await freePort()}`;
  // One unit in a billion is forced: the solver commits and reveals a secret for every
  // unit, as on a real chain, and no unit here is forced unless a test says so.
  await setForcedErrorRate(1);
  startSolver();
  const bob = keyring.addFromUri('//Bob');
  await waitFor('the solver to register', async () => (await api.query.staking.nodes(bob.address)).isSome, {
    timeoutMs: 120_000,
  }).catch(withSolverLog);
});

after(async () => {
  verification?.stop();
  digits?.process.kill('SIGINT');
  solver?.kill('SIGINT');
  for (const { process: verifier } of verifierWorkers.values()) verifier.kill('SIGINT');
  await api?.disconnect();
  await node?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test('the solver advertises its endpoint on-chain', async () => {
  const bob = keyring.addFromUri('//Bob');
  await waitFor('the endpoint', async () => (await api.query.staking.endpoints(bob.address)).isSome, { timeoutMs: 60_000 })
    .catch(withSolverLog);
  const endpoint = new TextDecoder().decode((await api.query.staking.endpoints(bob.address)).unwrap().toU8a(true));
  assert.match(endpoint, new RegExp(`^${solverPeer}/p2p/12D3Koo[1-9A-HJ-NP-Za-km-z]+$`));
});

test('a solver killed mid-unit resumes from its checkpoint and finishes the unit', { timeout: 600_000 }, async () => {
  // Job 0 on this fresh chain: one 600-step unit, starting from initial weights that the
  // submitter trains for two steps first (`train --out`) and uploads with the job. The
  // submitter waits (serving the dataset and the weights over libp2p) in the background.
  const fixture = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'resume-job.toml'), 'utf8');
  const basePath = join(dataDir, 'base.safetensors');
  const baseJob = join(dataDir, 'base.toml');
  writeFileSync(baseJob, fixture.replace('steps = 600', 'steps = 2').replace('steps_per_unit = 600', 'steps_per_unit = 2'));
  await worker(['train', '--job', baseJob, '--out', basePath]);
  const job = join(dataDir, 'resume-job.toml');
  writeFileSync(job, `initial_weights = ${JSON.stringify(basePath)}\n${fixture}`);
  const submitter = spawn(workerBinary(), ['--node', node.wsUrl, '--data-dir', join(dataDir, 'submitter'),
    'submit', '--key', '//Alice', '--job', job, '--wait', '--peer', solverPeer, '--no-mdns'], { stdio: 'ignore' });
  try {
    // Kill the solver (no chance to clean up) after its first checkpoint, before the unit ends.
    await waitFor('the first checkpoint', () => /checkpoint [0-9a-f]{64} job=0 unit=0 step=100/.test(solverLog), {
      timeoutMs: 300_000,
      intervalMs: 100,
    }).catch(withSolverLog);
    assert.match(solverLog, /fetching the job's initial weights/, 'the solver fetched the weights from the submitter');
    solver.kill('SIGKILL');
    await new Promise((resolve) => solver.once('exit', resolve));
    assert.doesNotMatch(solverLog, /learning proof committed[^\n]*job=0 unit=0/, 'killed before the unit ended');
    solverLog = '';
    startSolver();
    await waitFor('the unit to be proven', async () => {
      const unit = await api.query.tasks.units(0, 0);
      return unit.isSome && unit.unwrap().state.toString() === 'Proven';
    }, { timeoutMs: 300_000 }).catch(withSolverLog);
    assert.match(solverLog, /resuming from the last local checkpoint step=\d+/);
    const spec = (await api.query.tasks.jobs(0)).unwrap().spec;
    // A ContentRef encodes its 32-byte hash first (`.hash` on a codec is its own digest).
    const weightsHash = `0x${Buffer.from(spec.initialWeights.unwrap().toU8a().subarray(0, 32)).toString('hex')}`;
    // The content hash of an artifact is BLAKE3 of its bytes.
    assert.equal(weightsHash, `0x${bytesToHex(blake3(readFileSync(basePath)))}`);
    assert.doesNotMatch(solverLog, /job=0 unit=0 step=100\b/, 'the resumed run starts after step 100');
  } finally {
    submitter.kill('SIGINT');
  }
});

test('a solver on two devices trains two units at once under one account', { timeout: 300_000 }, async () => {
  // Bob restarts with `--devices 2` (two CPU trainers here) and stays so until a later test
  // restarts him. Two one-unit jobs are submitted together; the scheduler offers both to
  // him, and each device takes one: their checkpoints interleave.
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  solverLog = '';
  startSolver(['--devices', '2']);
  await waitFor('the solver to start on two devices', () => /solver starting[^\n]*devices=2/.test(solverLog), { timeoutMs: 60_000 })
    .catch(withSolverLog);
  // Each submitter serves the digits dataset to Bob, who does not hold it yet, until killed.
  const job = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'two-devices-job.toml');
  const submitters = ['a', 'b'].map((name) => backgroundWorker(`two-devices-${name}`,
    ['submit', '--key', name === 'a' ? '//Alice' : '//Ferdie', '--job', job, '--wait', '--peer', solverPeer, '--no-mdns']));
  try {
    await waitFor('both jobs to be submitted', () => submitters.every((s) => /job (\d+) submitted/.test(s.output())), { timeoutMs: 120_000 })
      .catch(withSolverLog);
    const ids = submitters.map((s) => Number(/job (\d+) submitted/.exec(s.output())[1]));
    await waitFor('both units to be proven', async () => {
      const units = await Promise.all(ids.map((id) => api.query.tasks.units(id, 0)));
      return units.every((unit) => unit.isSome && /Proven|Verifying|Finalized/.test(unit.unwrap().state.toString()));
    }, { timeoutMs: 240_000 }).catch(withSolverLog);
    const lines = solverLog.split('\n');
    const checkpoints = (id) => lines.flatMap((line, at) => (new RegExp(`checkpoint [0-9a-f]{64} job=${id} unit=0\\b`).test(line) ? [at] : []));
    const [first, second] = ids.map(checkpoints);
    assert.ok(first.length >= 2 && second.length >= 2, `checkpoints: ${first.length} and ${second.length}${workerLogs()}`);
    // Whichever started first, the other wrote a checkpoint before it wrote its last.
    assert.ok(Math.max(first[0], second[0]) < Math.min(first.at(-1), second.at(-1)), `not side by side:${workerLogs()}`);
    assert.doesNotMatch(solverLog, /declining the unit/, 'neither offer was declined');
  } finally {
    for (const submitter of submitters) submitter.process.kill('SIGINT');
  }
});

/**
 * Sets the runtime's forced-error rate, in parts per billion, as the sudo key (Alice): the
 * rate is a runtime parameter kept in storage under `twox_128(":ForcedErrorRate:")`.
 */
const setForcedErrorRate = (partsPerBillion) => setForcedErrorRateAs(api, keyring.addFromUri('//Alice'), partsPerBillion);

/**
 * Dry-runs `tx` signed by `signer` at the best block (nothing is sent, no nonce is spent);
 * resolves with the runtime's error name, or null if it would succeed.
 */
async function dryRunError(tx, signer) {
  const signed = await tx.signAsync(signer);
  const applied = await api.rpc.system.dryRun(signed.toHex());
  assert.ok(applied.isOk, `the pool would refuse it: ${applied}`);
  const outcome = applied.asOk;
  if (outcome.isOk) return null;
  const error = outcome.asErr;
  if (!error.isModule) return error.toString();
  const { section, name } = api.registry.findMetaError(error.asModule);
  return `${section}.${name}`;
}


test('the solver defends its proof in a dispute and wins when the challenger falls silent', { timeout: 420_000 }, async () => {
  // Charlie challenges the unit the resume test proved (job 0, unit 0, in its challenge
  // window) with a trace root of its own, then never plays. The solver must answer each
  // phase in time (or it loses by timeout), and ends the dispute once Charlie misses its
  // deadline.
  const charlie = keyring.addFromUri('//Charlie');
  const profile = { device: 'Cpu', model: 'challenger', memoryMib: 1024, throughputGflops: 1, bandwidthMbps: 100, region: 'local' };
  await sendOk(api.tx.staking.register(profile, [['Challenger', 20n * UNIT]], 0), charlie);
  const unit = (await api.query.tasks.units(0, 0)).unwrap();
  assert.equal(unit.state.toString(), 'Proven');
  const events = await sendOk(api.tx.disputes.challenge(0, 0, '0x' + '42'.repeat(32)), charlie);
  const opened = events.find((event) => event.section === 'disputes' && event.method === 'DisputeOpened');
  assert.ok(opened, 'DisputeOpened was emitted');
  const id = opened.data.dispute.toNumber();
  const rulings = [];
  const unsubscribe = await api.query.system.events((records) => {
    for (const { event } of records) {
      if (event.section === 'disputes' && event.method === 'DisputeResolved' && event.data.dispute.toNumber() === id) {
        rulings.push(`${event.data.ruling.toString()} ${event.data.grounds.toString()}`);
      }
    }
  });
  try {
    await waitFor('the dispute to end', () => rulings.length > 0, { timeoutMs: 360_000 }).catch(withSolverLog);
  } finally {
    unsubscribe();
  }
  assert.deepEqual(rulings, ['DefenderWins Timeout']);
  assert.match(solverLog, new RegExp(`dispute: sent reveal[^\\n]*dispute=${id}`), 'the solver answered the first round');
  // The solver logs its timeout call once it is finalized, a few blocks after the event.
  await waitFor('the solver to log its timeout call', () => new RegExp(`dispute: sent time_out[^\\n]*dispute=${id}`).test(solverLog), {
    timeoutMs: 60_000,
  }).catch(withSolverLog);
  assert.equal((await api.query.disputes.unitDisputes([0, 0])).length, 0);
  // The proof stands: the unit is still proven (and is finalized once its window passes).
  assert.match((await api.query.tasks.units(0, 0)).unwrap().state.toString(), /Proven|Finalized/);
});

test('asked for a chunk of a checkpoint, the solver posts it with its proofs and keeps its proof', { timeout: 300_000 }, async () => {
  // Charlie, a challenger since the dispute test, demands chunk 7 of the state the resume
  // test's proof commits before step 300 (a checkpoint of its 600-step unit) through the
  // worker's CLI. The solver must post it, proven against its trace, within the response
  // window, or lose the proof; the request's bond then goes to it and the jackpot.
  const unit = (await api.query.tasks.units(0, 0)).unwrap();
  assert.equal(unit.state.toString(), 'Proven', 'the dispute test reopened the window');
  const resolved = [];
  const unsubscribe = await api.query.system.events((records) => {
    for (const { event } of records) {
      if (event.section === 'disputes' && event.method === 'DisputeResolved') resolved.push(event.data);
    }
  });
  let requested;
  try {
    requested = await worker(['challenge', '--key', '//Charlie', '--job', '0', '--unit', '0', '--request-chunk', '300:7', '--no-mdns'], 240_000)
      .catch(withSolverLog);
  } finally {
    unsubscribe();
  }
  const id = Number(requested.match(/chunk 7 of the state before step 300 requested \(dispute (\d+)\)/)?.[1]);
  assert.ok(Number.isInteger(id), requested);
  assert.match(requested, /the solver posted the chunk: the proof stands/);
  assert.match(solverLog, new RegExp(`dispute: sent provide_chunk[^\\n]*dispute=${id}`));
  assert.equal((await api.query.tasks.units(0, 0)).unwrap().state.toString(), 'Proven');
  // The request's 1 TST bond: half (`WinnerShare`) to the solver, for the transaction it sent.
  const ruling = resolved.find((data) => data.dispute.toNumber() === id);
  assert.ok(ruling, 'the request was resolved');
  assert.equal(`${ruling.ruling} ${ruling.grounds}`, 'DefenderWins Provided');
  assert.equal(ruling.toWinners.toBigInt(), UNIT / 2n);
});

/**
 * The digits job's submitter (`submit --wait`, its own data directory), which serves the
 * dataset and waits in the background while the forced-error and liar tests run inside the
 * job's challenge window; the last test reads its output.
 */
let digits;

/** Starts a worker subcommand in the background; `output()` is what it printed so far, `done` its whole stdout. */
function backgroundWorker(dir, args) {
  const child = spawn(workerBinary(), ['--node', node.wsUrl, '--data-dir', join(dataDir, dir), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => { stdout += chunk.toString(); });
  child.stderr.on('data', (chunk) => { stderr += chunk.toString(); });
  const done = new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => (code === 0 ? resolve(stdout) : reject(new Error(`${args[0]} exited ${code ?? signal}:\n${stdout}${stderr}`))));
  });
  // Read in the last test; until then a failure must not go unhandled.
  done.catch(() => {});
  return { process: child, done, output: () => stdout };
}

test('a solver worker trains the digits job through the chain and each proof is verified', { timeout: 600_000 }, async (t) => {
  // Every proof of this job is verified: Dave and Eve run verifier workers that re-execute
  // the segments they are drawn for, from Bob's checkpoints, and attest (Dave on the CPU
  // reference, Eve on wgpu, lavapipe here, bit-identical to it); Ferdie is drawn too and
  // never answers.
  const [dave, eve, ferdie] = ['//Dave', '//Eve', '//Ferdie'].map((uri) => keyring.addFromUri(uri));
  startVerifierWorker('//Dave');
  startVerifierWorker('//Eve', ['verify', '--backend', 'wgpu']);
  // Charlie, a challenger since the dispute test, watches every proof open to challenge
  // with segments of his own choosing; he runs on into the liar test. He trusts no node:
  // his worker reads the chain and sends his moves through a light client of its own,
  // started from the node's sync spec.
  const chainSpec = join(dataDir, 'chain-spec.json');
  writeFileSync(chainSpec, JSON.stringify(await syncSpec(node)));
  startVerifierWorker('//Charlie', ['challenge', '--watch'], { chainSpec });
  await waitFor('the verifier workers to register', async () =>
    (await api.query.staking.nodes(dave.address)).isSome && (await api.query.staking.nodes(eve.address)).isSome, {
    timeoutMs: 120_000,
  }).catch(withSolverLog);
  const verifiers = await watchVerification(api, { silent: [ferdie], bond: 100n * UNIT });
  verification = verifiers;

  // The solver fetches the dataset from the submitter over libp2p, and the final model
  // comes back the same way: the two keep separate artifact stores. No --peer: the
  // submitter dials the endpoint the solver advertises on-chain.
  digits = backgroundWorker('digits-submitter', ['submit', '--key', '//Alice', '--example', 'digits', '--wait', '--no-mdns']);
  await waitFor('the digits job to be submitted', () => /job (\d+) submitted/.test(digits.output()), { timeoutMs: 120_000 })
    .catch(withSolverLog);
  digits.jobId = Number(/job (\d+) submitted/.exec(digits.output())[1]);
  const jobId = digits.jobId;

  // Each unit's proof has a round: the three verifiers drawn (never Alice, the submitter,
  // nor Bob, the solver), two attestations, Ferdie slashed for his missed reveal.
  const mine = (method) => verifiers.events.filter((e) => e.method === method && Number(e.data.job) === jobId);
  await waitFor("every unit's round to conclude", () => mine('RoundConcluded').length >= 4, { timeoutMs: 480_000 })
    .catch(withSolverLog);
  assert.equal(verifiers.failure(), null, `a verifier failed: ${verifiers.failure()}`);
  const drawn = mine('VerifiersDrawn');
  assert.equal(drawn.length, 4, JSON.stringify(verifiers.events));
  for (const round of drawn) {
    assert.deepEqual(new Set(round.data.verifiers), new Set([dave.address, eve.address, ferdie.address]));
  }
  const concluded = mine('RoundConcluded').map((e) => [e.data.matched, e.data.mismatched, e.data.missed]);
  assert.deepEqual(concluded, [[2, 0, 1], [2, 0, 1], [2, 0, 1], [2, 0, 1]]);
  const missed = mine('RevealMissed');
  assert.ok(missed.every((e) => e.data.verifier === ferdie.address && BigInt(e.data.slashed) === UNIT), JSON.stringify(missed));
  assert.equal(missed.length, 4);
  // Drawn in four rounds whose units are not final yet, Ferdie cannot take his verifier
  // bond back: a `Match` can be proven false until then.
  assert.equal((await api.query.verification.verifierRounds.keys(ferdie.address)).length, 4);
  // The runtime API a verifier finds its rounds by, reading only its own keys.
  assert.equal((await api.call.verificationApi.roundsOf(ferdie.address)).length, 4);
  assert.equal(await dryRunError(api.tx.staking.unbond('Verifier', 100n * UNIT), ferdie), 'staking.HasActiveWork');
  // Each verifier worker asked the runtime API for its samples (two distinct segments of
  // the five in a unit), re-executed just those from Bob's checkpoints, checked against
  // the trace manifest Bob serves, and revealed a match without running any unit whole.
  for (const uri of ['//Dave', '//Eve']) {
    const { log } = verifierWorkers.get(uri);
    for (let unit = 0; unit < 4; unit += 1) {
      assert.match(log, new RegExp(`verification: drawn; re-executing the sampled segments job=${jobId} unit=${unit} samples=\\[\\d, \\d\\]`), `${uri} unit ${unit}`);
      assert.match(log, new RegExp(`verification: every sampled segment reproduces job=${jobId} unit=${unit}\\b`), `${uri} unit ${unit}`);
      assert.match(log, new RegExp(`verification: revealed job=${jobId} unit=${unit} verdict="?match`), `${uri} unit ${unit}`);
    }
    assert.doesNotMatch(log, /re-executing the whole unit/, `${uri} re-executed a whole unit`);
  }
  // Charlie's watcher checks each unit by two random segments and disputes nothing.
  await waitFor('the watcher to check every unit', () => {
    const watcherLog = verifierWorkers.get('//Charlie').log;
    return [0, 1, 2, 3].every((unit) => new RegExp(`watch: every sampled segment reproduces job=${jobId} unit=${unit}\\b`).test(watcherLog));
  }, { timeoutMs: 120_000 }).catch(withSolverLog);
  assert.doesNotMatch(verifierWorkers.get('//Charlie').log, /dispute opened/);
  assert.match(solverLog, /fetching the job's dataset/, 'the solver fetched the dataset from the submitter');
  // Ranges of 250 steps train in a second or two, long before the range before them has
  // its randomness: their secrets ride on the proofs before them, which take them.
  assert.match(solverLog, new RegExp(`trained ahead: its forced-error secret goes with the proof of the range before job=${jobId} unit=[123]\\b`),
    'a range trained ahead was taken with the proof before it');
  t.diagnostic(`rounds drawn at blocks ${drawn.map((e) => e.block).join(', ')}; concluded at ${mine('RoundConcluded').map((e) => e.block).join(', ')}`);
});

test('a forced error is caught by the verifiers and paid from the jackpot, and the honest proof replaces it', { timeout: 600_000 }, async (t) => {
  // Every unit is forced while the rate is one; a unit is judged by the rate in force when
  // its solver committed its secret (once it has trained the unit, bound to its honest and
  // its forced trace), so the rate goes back down once Bob has. The job has one segment,
  // so both verifier workers sample the step Bob's secret fixed.
  const [bob, dave, eve] = ['//Bob', '//Dave', '//Eve'].map((uri) => keyring.addFromUri(uri));
  await setForcedErrorRate(1_000_000_000);
  const forcedJob = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'forced-job.toml');
  const submitted = await worker(['submit', '--key', '//Alice', '--job', forcedJob, '--no-mdns']);
  const jobId = Number(/job (\d+) submitted/.exec(submitted)?.[1]);
  assert.ok(Number.isInteger(jobId), submitted);
  const mine = (method) => verification.events.filter((e) => e.section === 'verification' && e.method === method && Number(e.data.job) === jobId);
  try {
    await waitFor('Bob to commit his secret', () => mine('SecretCommitted').length > 0, { timeoutMs: 180_000 }).catch(withSolverLog);
  } finally {
    await setForcedErrorRate(1);
  }
  await waitFor('the forced round to pay its catchers', () => mine('ForcedErrorPaid').length > 0, { timeoutMs: 300_000 })
    .catch(withSolverLog);
  const [revealed] = mine('ForcedErrorRevealed');
  assert.ok(revealed, JSON.stringify(mine('SecretRevealed')));
  assert.match(solverLog, new RegExp(`the unit is forced: committing a proof wrong at this step on purpose[^\\n]*job=${jobId} unit=0 step=${revealed.data.step}\\b`));
  // Every verifier worker drawn for the forced round (Dave and Eve, as a rule; the draw
  // is by stake, so a round may miss one) re-executed the segment and revealed a
  // mismatch; Ferdie, drawn, missed.
  const workers = new Set([dave.address, eve.address]);
  const drawnWorkers = (round) => round.data.verifiers.filter((who) => workers.has(who));
  const [forcedDraw] = mine('VerifiersDrawn');
  const [paid] = mine('ForcedErrorPaid');
  const context = () => `${JSON.stringify(verification.events.filter((e) => Number(e.data.job) === jobId))}${workerLogs()}`;
  assert.ok(drawnWorkers(forcedDraw).length > 0, context());
  assert.deepEqual(new Set(paid.data.caught), new Set(drawnWorkers(forcedDraw)), context());
  // What the unit pays the jackpot (a tenth of its 1 TST) over a rate of one, shared.
  assert.equal(BigInt(paid.data.each), UNIT / 10n / BigInt(paid.data.caught.length));
  // The honest proof replaced the forced one and is verified in a round of its own.
  await waitFor("the honest proof's round to conclude", () => mine('RoundConcluded').length >= 2, { timeoutMs: 240_000 })
    .catch(withSolverLog);
  const draws = mine('VerifiersDrawn');
  const concluded = mine('RoundConcluded').map((e) => [e.data.matched, e.data.mismatched, e.data.missed]);
  const silent = (round) => round.data.verifiers.length - drawnWorkers(round).length;
  assert.deepEqual(concluded, [[0, drawnWorkers(draws[0]).length, silent(draws[0])], [drawnWorkers(draws[1]).length, 0, silent(draws[1])]],
    context());
  t.diagnostic(`drawn: ${JSON.stringify(draws.map((round) => round.data.verifiers))}`);
  const unit = (await api.query.tasks.units(jobId, 0)).unwrap();
  assert.match(unit.state.toString(), /Proven|Finalized/);
  assert.match(solverLog, new RegExp(`the honest proof replaced the forced one job=${jobId} unit=0`));
  // Nobody lied: Bob's bond is whole, and every dispute over the forced proof (a verifier's
  // mismatch revealed before Bob's secret, Charlie's watcher) was dismissed.
  const slashedBob = verification.events.filter((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === bob.address);
  assert.deepEqual(slashedBob, []);
  assert.equal(verification.events.filter((e) => e.section === 'disputes' && e.method === 'DisputeResolved' && Number(e.data.job) === jobId).length, 0);
  assert.equal((await api.query.disputes.unitDisputes([jobId, 0])).length, 0);
  t.diagnostic(`forced at step ${revealed.data.step}: revealed at block ${revealed.block}, paid at ${paid.block}`);
});

test('a tolerance-mode job trained on libtorch is profiled and judged by distance, and a gross lie in it is overturned by an escalation committee', { timeout: 600_000 }, async (t) => {
  // Bob restarts on libtorch (`--backend tch`): it trains tolerance-mode jobs, which are
  // not bit-reproducible, and exact-mode ones on the reference. Dave and Eve each
  // re-execute their samples of Bob's segments on the reference from his checkpoints and
  // reveal the largest distance to his weights. The job's first rounds profile it: each
  // also runs its segments on libtorch from the same checkpoints and reveals how far that
  // lands from the reference; the chain sets the job's thresholds to twice the median.
  // Bob also lies, grossly, at step 499, the second unit's last (`--inject-fault`: the top
  // exponent bit of a weight as the step's update writes it): its round measures that
  // segment far beyond the thresholds, and a committee drawn afresh, none of the round's
  // own verifiers among it, re-measures it and overturns the proof. The committee's three
  // verifier workers (One, Two and Ferdie's stash, endowed at genesis) start once the
  // lying unit's round is drawn, and leave the draw when the escalation is decided.
  const [bob, dave, eve] = ['//Bob', '//Dave', '//Eve'].map((uri) => keyring.addFromUri(uri));
  const committeeUris = ['//One', '//Two', '//Ferdie//stash'];
  const committee = committeeUris.map((uri) => keyring.addFromUri(uri));
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  solverLog = '';
  // It also asks a higher least price, which a registered worker updates on-chain.
  startSolver(['--backend', 'tch', '--inject-fault', '499', '--min-price', '0.02']);
  await waitFor("the solver's new least price on-chain", async () =>
    (await api.query.staking.nodes(bob.address)).unwrap().minPrice.toBigInt() === UNIT / 50n, { timeoutMs: 60_000 })
    .catch(withSolverLog);
  // The node shows the price as soon as the block is imported; the worker logs it once its
  // own watch of the transaction reports the block, a moment later.
  await waitFor('the solver to log its new least price', () => /minimum price updated on-chain/.test(solverLog), { timeoutMs: 30_000 })
    .catch(withSolverLog);
  const toleranceJob = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'tolerance-job.toml');
  const submitted = await worker(['submit', '--key', '//Alice', '--job', toleranceJob, '--no-mdns']);
  const jobId = Number(/job (\d+) submitted/.exec(submitted)?.[1]);
  assert.ok(Number.isInteger(jobId), submitted);
  const mine = (method, unit) => verification.events.filter((e) => e.section === 'verification' && e.method === method &&
    Number(e.data.job) === jobId && (unit === undefined || Number(e.data.unit) === unit));
  const jobEvents = () => JSON.stringify(verification.events.filter((e) => Number(e.data.job) === jobId));
  await waitFor("the second unit's round to be drawn", () => mine('VerifiersDrawn', 1).length > 0, { timeoutMs: 420_000 })
    .catch(withSolverLog);
  for (const uri of committeeUris) startVerifierWorker(uri);
  await waitFor('the committee workers to register', async () =>
    (await Promise.all(committee.map((pair) => api.query.staking.nodes(pair.address)))).every((node) => node.isSome), {
    timeoutMs: 60_000,
  }).catch(withSolverLog);
  await waitFor("the first unit's round to conclude and the second's to escalate", () =>
    mine('RoundConcluded', 0).length > 0 && mine('EscalationOpened', 1).length > 0, { timeoutMs: 420_000 })
    .catch(withSolverLog);
  // The lie is settled by the committee; the submitter stops the job meanwhile, so the
  // overturned unit fails instead of going back to the pool for the liar.
  await sendOk(api.tx.tasks.cancelJob(jobId), keyring.addFromUri('//Alice'));
  assert.match(solverLog, new RegExp(`libtorch sees no CUDA device`));
  // No secret is owed in tolerance mode: forced errors are exact mode's.
  assert.equal(mine('SecretRevealed').length + mine('ForcedErrorRevealed').length, 0);
  const [profiled] = mine('ThresholdsProfiled');
  assert.ok(profiled, jobEvents());
  assert.equal(profiled.data.profiles, 2);
  // The thresholds are stored with the job, below the submitter's ceilings.
  const thresholds = (await api.query.tasks.jobs(jobId)).unwrap().tolerance.thresholds.unwrap();
  const fixed = (value) => Number(value.toBigInt()) / 1e9;
  const bound = { l2: fixed(thresholds.l2), linf: fixed(thresholds.linf), cosine: fixed(thresholds.cosine) };
  assert.ok(bound.l2 > 0 && bound.l2 <= 5 && bound.linf > 0 && bound.linf <= 1 && bound.cosine <= 0.01, JSON.stringify(bound));
  const measured = ({ data }) => {
    const { distance } = data.verdict.measured;
    return { l2: Number(distance.l2) / 1e9, linf: Number(distance.linf) / 1e9, cosine: Number(distance.cosine) / 1e9 };
  };
  const within = (d) => d.l2 <= bound.l2 && d.linf <= bound.linf && d.cosine <= bound.cosine;
  // The honest unit: both verifier workers measured (libtorch's rounding: above zero)
  // within the thresholds; Ferdie missed.
  const honest = mine('Revealed', 0);
  assert.deepEqual(new Set(honest.map((e) => e.data.verifier)), new Set([dave.address, eve.address]));
  for (const reveal of honest) {
    assert.ok(reveal.data.verdict.measured.profile, JSON.stringify(reveal.data.verdict));
    assert.ok(measured(reveal).l2 > 0 && within(measured(reveal)), `${JSON.stringify(measured(reveal))} within ${JSON.stringify(bound)}`);
  }
  const [concluded] = mine('RoundConcluded', 0);
  assert.deepEqual([concluded.data.matched, concluded.data.mismatched, concluded.data.missed], [2, 0, 1]);
  assert.equal(mine('EscalationOpened', 0).length, 0);
  // The lying unit: both measured its second segment (steps 375 to 500) beyond them.
  const [opened] = mine('EscalationOpened', 1);
  assert.deepEqual(opened.data.segments, [1]);
  const accused = mine('Revealed', 1).filter((e) => e.block < opened.block);
  assert.deepEqual(new Set(accused.map((e) => e.data.verifier)), new Set([dave.address, eve.address]));
  for (const reveal of accused) {
    assert.equal(reveal.data.verdict.measured.segment, 1, JSON.stringify(reveal.data.verdict));
    assert.ok(!within(measured(reveal)), `${JSON.stringify(measured(reveal))} beyond ${JSON.stringify(bound)}`);
  }
  // The committee (every verifier but the solver, the submitter and the round's own three:
  // the three committee workers) re-measures the flagged segment; its majority overturns
  // the proof.
  await waitFor('the escalation to be decided', () => mine('EscalationDecided', 1).length > 0, { timeoutMs: 180_000 })
    .catch(withSolverLog);
  const [decided] = mine('EscalationDecided', 1);
  assert.equal(decided.data.outcome, 'Overturned', jobEvents());
  // A member that missed says why in its log (its draw, its fetch of Bob's checkpoint, its
  // commit and reveal): the failure carries them with the job's events.
  assert.deepEqual([decided.data.beyond, decided.data.within, decided.data.missed], [3, 0, 0], `${jobEvents()}${workerLogs()}`);
  const members = mine('Revealed', 1).filter((e) => e.block > opened.block);
  assert.deepEqual(new Set(members.map((e) => e.data.verifier)), new Set(committee.map((pair) => pair.address)));
  assert.ok(members.every((e) => e.data.verdict.measured.segment === 1 && !within(measured(e))), JSON.stringify(members));
  // Bob paid the invalid proof's slash from his solver bond; the unit failed with the job
  // cancelled. Nobody endorsed the flagged segment, so no verifier is slashed for a distance.
  const slashed = verification.events.filter((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === bob.address && e.block >= decided.block);
  assert.deepEqual(slashed.map((e) => [e.data.role, BigInt(e.data.amount)]), [['Solver', 100n * UNIT]]);
  assert.equal(mine('FalseAttestation').length, 0);
  assert.equal((await api.query.tasks.units(jobId, 1)).unwrap().state.type, 'Failed');
  for (const uri of ['//Dave', '//Eve']) {
    const { log } = verifierWorkers.get(uri);
    assert.match(log, new RegExp(`verification: drawn; measuring the sampled segments' distances job=${jobId} unit=0 samples=\\[\\d, \\d\\] profiling=true`), uri);
    assert.match(log, new RegExp(`verification: segment profiled job=${jobId} unit=0 sample=\\d`), uri);
    assert.match(log, new RegExp(`verification: revealed job=${jobId} unit=0 verdict="?distance`), uri);
  }
  // The committee's members measured the flagged segment alone.
  for (const uri of committeeUris) {
    const { log } = verifierWorkers.get(uri);
    assert.match(log, new RegExp(`verification: drawn; measuring the sampled segments' distances job=${jobId} unit=1 samples=\\[1\\] profiling=false`), uri);
  }
  // The committee workers stop and unbond, so later rounds draw from Dave, Eve and Ferdie
  // as before.
  for (const [index, uri] of committeeUris.entries()) {
    const { process: member } = verifierWorkers.get(uri);
    member.kill('SIGINT');
    await new Promise((resolve) => member.once('exit', resolve));
    verifierWorkers.delete(uri);
    const waited = await waitForPoolToClear(api, committee[index].address);
    if (waited.length > 0) t.diagnostic(`${uri} stopped with ${waited.join(', ')} in the pool`);
    await sendOk(api.tx.staking.unbond('Verifier', 1_000_000n * UNIT), committee[index]);
  }
  // Bob stops lying, and tops his bond back up (above the solver minimum) while his worker,
  // which signs with the same key, is stopped.
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  const waited = await waitForPoolToClear(api, bob.address);
  if (waited.length > 0) {
    t.diagnostic(`the solver stopped with ${waited.join(', ')} in the pool; its last lines:\n${solverLog.trim().split('\n').slice(-6).join('\n')}`);
  }
  await sendOk(api.tx.staking.bondMore('Solver', 100n * UNIT), bob);
  solverLog = '';
  startSolver();
  t.diagnostic(`thresholds ${JSON.stringify(bound)}; honest ${JSON.stringify(honest.map(measured))}; lie ${JSON.stringify(accused.map(measured))}; escalation opened at block ${opened.block}, decided at ${decided.block}`);
});

test('a solver that lies at one step is caught, loses at the referee and is slashed, with the verifier that attested it', { timeout: 600_000 }, async (t) => {
  // Bob restarts as a liar: one value of the forward pass at global step 100 is corrupted
  // (`--inject-fault`, test equipment), so the first unit of the next digits job proves a
  // trace no honest run reproduces. This job's units have two segments (0..100, 100..200),
  // and every verifier samples both, so its samples cover the lie. Charlie's watcher and
  // Dave's verifier worker find that the second segment, re-executed from Bob's own
  // checkpoint at 100, does not reach his boundary, and dispute the proof with his
  // boundaries and the one they reached in its place (Dave by revealing a mismatch): no
  // more than the samples is re-executed. Each plays its dispute from that run while Bob
  // defends his, step by step, operator by operator, piece by piece, until the runtime's
  // referee recomputes the disputed piece. Eve, now lazy, attests a match without looking
  // and pays for it when the proof falls.
  const bob = keyring.addFromUri('//Bob');
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  solverLog = '';
  startSolver(['--inject-fault', '100']);
  // Eve restarts as a lazy verifier (`--attest-without-checking`, test equipment): she
  // attests a match to whatever she is drawn for, without re-executing anything.
  const lazy = verifierWorkers.get('//Eve').process;
  lazy.kill('SIGINT');
  await new Promise((resolve) => lazy.once('exit', resolve));
  startVerifierWorker('//Eve', ['verify', '--attest-without-checking']);
  // Bob and the verifiers hold the digits dataset already: the submitter need not stay.
  const liarJob = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'liar-job.toml');
  const submitted = await worker(['submit', '--key', '//Alice', '--job', liarJob, '--no-mdns']);
  const jobId = Number(/job (\d+) submitted/.exec(submitted)?.[1]);
  assert.ok(Number.isInteger(jobId), submitted);
  const mine = (section, method) => verification.events.filter((e) => e.section === section && e.method === method && Number(e.data.job) === jobId);
  // While a dispute is played, storage and the runtime API tell the same story about it,
  // read at one block.
  await waitFor('a dispute over the lie to open', () => mine('disputes', 'DisputeOpened').length > 0, {
    timeoutMs: 300_000,
  }).catch(withSolverLog);
  const firstId = mine('disputes', 'DisputeOpened')[0].data.dispute;
  const at = await api.at(await api.rpc.chain.getBlockHash());
  const [stored, status, listed] = await Promise.all([
    at.query.disputes.disputes(firstId),
    at.call.disputesApi.dispute(firstId),
    at.call.disputesApi.unitDisputes(jobId, 0),
  ]);
  assert.ok(stored.isSome && status.isSome, `dispute ${firstId} is open: ${stored} / ${status}`);
  const [record, view] = [stored.unwrap(), status.unwrap()];
  assert.equal(view.job.toNumber(), jobId);
  assert.equal(view.unit.toNumber(), 0);
  assert.equal(view.defender.toString(), bob.address);
  assert.equal(view.challenger.toString(), record.challenger.toString());
  assert.equal(view.deadline.toNumber(), record.deadline.toNumber());
  assert.equal(view.rounds.toNumber(), record.rounds.toNumber());
  assert.ok(listed.map((id) => id.toNumber()).includes(firstId), listed.toString());
  t.diagnostic(`dispute ${firstId} at block ${(await at.query.system.number()).toNumber()}: ${JSON.stringify(view.toHuman())}`);

  await waitFor('a dispute over the lie to be resolved', () => mine('disputes', 'DisputeResolved').length > 0, {
    timeoutMs: 540_000,
  }).catch(withSolverLog);

  // Each verifier's mismatch opened a dispute; the first one the referee decides overturns
  // the proof, and the other is dismissed or decided the same way.
  const resolutions = mine('disputes', 'DisputeResolved');
  const resolved = resolutions.find((e) => e.data.grounds === 'Referee') ?? resolutions[0];
  const opened = mine('disputes', 'DisputeOpened').find((e) => e.data.dispute === resolved.data.dispute);
  assert.ok(opened, JSON.stringify(verification.events.filter((e) => e.section === 'disputes')));
  assert.equal(resolved.data.unit, 0);
  assert.equal(resolved.data.ruling, 'ChallengerWins');
  assert.equal(resolved.data.grounds, 'Referee', 'the referee decided, not a timeout');
  assert.equal(opened.data.defender, bob.address);
  const winner = [...verifierWorkers.keys()].find((uri) => keyring.addFromUri(uri).address === opened.data.challenger);
  assert.ok(winner, `the challenger ${opened.data.challenger} is a verifier worker`);
  assert.ok(BigInt(resolved.data.toWinners) > 0n && BigInt(resolved.data.forfeited) > 0n, JSON.stringify(resolved.data));
  // The verifiers both revealed a mismatch; the winner played every level of the game.
  assert.ok(mine('verification', 'Revealed').length >= 1, JSON.stringify(mine('verification', 'Revealed')));
  const winnerLog = verifierWorkers.get(winner).log;
  // Charlie's watcher found the lie in its own sample (this job's only segment of the
  // unit's second segment) and disputed it too, and played its dispute, all through its
  // light client.
  const charlieLog = verifierWorkers.get('//Charlie').log;
  assert.match(charlieLog, new RegExp(`watch: the proof does not reproduce; dispute opened job=${jobId} unit=0\\b`));
  const charlie = keyring.addFromUri('//Charlie');
  const charlieOpened = mine('disputes', 'DisputeOpened').find((e) => e.data.challenger === charlie.address);
  assert.ok(charlieOpened, JSON.stringify(mine('disputes', 'DisputeOpened')));
  assert.match(charlieLog, new RegExp(`dispute: sent bind_segment[^\\n]*dispute=${charlieOpened.data.dispute}\\b`));
  t.diagnostic(`the light-client challenger's dispute ${charlieOpened.data.dispute} ${charlieOpened.data.dispute === resolved.data.dispute ? 'was the one the referee decided' : 'ended with the proof overturned by the other'}`);
  assert.match(winnerLog, new RegExp(`a sampled segment does not reproduce from the solver's checkpoint before it job=${jobId} unit=0 segment=1 from=100\\b`));
  assert.doesNotMatch(winnerLog, /re-executing the whole unit/, `${winner} re-executed no more than its samples`);
  for (const move of ['reveal', 'bind_segment', 'bind_step', 'bind_operator']) {
    assert.match(winnerLog, new RegExp(`dispute: sent ${move}[^\\n]*dispute=${resolved.data.dispute}`), `${winner} sent ${move}`);
  }
  // Bob opened his claim to the referee; he logs the call once it is finalized, a few
  // blocks after the event.
  await waitFor('the solver to log its resolve call', () => new RegExp(`dispute: sent resolve[^\\n]*dispute=${resolved.data.dispute}`).test(solverLog), {
    timeoutMs: 60_000,
  }).catch(withSolverLog);
  // Eve's lazy match covered the lie: she sampled both segments of the unit, so her samples
  // held the disputed step, and the overturn slashed her the false attestation's 50 TST.
  const eve = keyring.addFromUri('//Eve');
  const verdictName = (verdict) => (typeof verdict === 'string' ? verdict : Object.keys(verdict)[0]).toLowerCase();
  const eveRevealed = mine('verification', 'Revealed').filter((e) => e.data.verifier === eve.address && e.data.unit === 0);
  assert.deepEqual(eveRevealed.map((e) => verdictName(e.data.verdict)), ['match'], JSON.stringify(mine('verification', 'Revealed')));
  const falseAttestations = mine('verification', 'FalseAttestation').map((e) => [e.data.verifier, Number(e.data.step), BigInt(e.data.slashed)]);
  assert.deepEqual(falseAttestations, [[eve.address, 100, 50n * UNIT]]);
  const eveSlashed = verification.events.filter((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === eve.address);
  assert.ok(eveSlashed.some((e) => e.data.role === 'Verifier' && BigInt(e.data.amount) === 50n * UNIT), JSON.stringify(eveSlashed));
  // Bob's solver bond paid for the lie.
  const slashed = verification.events.filter((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === bob.address);
  assert.ok(slashed.length >= 1 && slashed.every((e) => e.data.role === 'Solver' && BigInt(e.data.amount) > 0n), JSON.stringify(slashed));
  // The unit's lying proof is gone: it went back to be trained again.
  const unit = (await api.query.tasks.units(jobId, 0)).unwrap();
  assert.ok(unit.proof.isNone || unit.proof.unwrap().traceRoot.toHex() !== opened.data.traceRoot, unit.toString());
  t.diagnostic(`dispute ${resolved.data.dispute}: opened at block ${opened.block}, resolved at ${resolved.block}`);
});

/**
 * Stops Bob's solver, tops up his solver bond by 1,000 TST (with his worker stopped, so
 * that its transactions do not race his) and starts it again with `extra` arguments:
 * a liar's convictions take his bond below the minimum.
 */
async function restartSolverToppedUp(extra) {
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  solverLog = '';
  const bob = keyring.addFromUri('//Bob');
  await waitForPoolToClear(api, bob.address);
  await sendOk(api.tx.staking.bondMore('Solver', 1000n * UNIT), bob);
  startSolver(extra);
}

test('a liar silent in its disputes is convicted by timeout, and the verifier that attested it is summoned and slashed', { timeout: 600_000 }, async (t) => {
  // Bob lies at step 100 again, and now answers no dispute (`--abandon-disputes`, test
  // equipment), as a liar letting its own sybil convict it would: the conviction comes by
  // timeout before any step is found, so by itself it shows no attestation false. The chain
  // keeps the overturned proof for summonses; a challenger that re-executed the unit
  // summons Eve, whose lazy match covered the segment where the proof leaves its run. Eve's
  // worker re-executes that segment from the proof's start to defend her attestation,
  // cannot reach the proof's boundary, binds nothing, and loses.
  // The liar test's convictions took Bob's solver bond below the minimum.
  await restartSolverToppedUp(['--inject-fault', '100', '--abandon-disputes']);
  const liarJob = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'liar-job.toml');
  const submitted = await worker(['submit', '--key', '//Alice', '--job', liarJob, '--no-mdns']);
  const jobId = Number(/job (\d+) submitted/.exec(submitted)?.[1]);
  assert.ok(Number.isInteger(jobId), submitted);
  const events = (section, method) => verification.events.filter((e) => e.section === section && e.method === method);
  const mine = (section, method) => events(section, method).filter((e) => Number(e.data.job) === jobId);
  await waitFor('the lie to be overturned by a timeout', () => mine('disputes', 'AttestersSummonable').length > 0, {
    timeoutMs: 420_000,
  }).catch(withSolverLog);
  const kept = mine('disputes', 'AttestersSummonable')[0];
  const overturned = kept.data.overturned;
  const conviction = events('disputes', 'DisputeResolved').find((e) => e.data.dispute === overturned);
  assert.equal(conviction.data.ruling, 'ChallengerWins');
  assert.equal(conviction.data.grounds, 'Timeout', 'the silent liar lost by timeout');
  assert.equal(kept.data.unit, 0);

  const eve = keyring.addFromUri('//Eve');
  const summonses = () => events('disputes', 'Summoned').filter((e) => e.data.overturned === overturned);
  await waitFor('a challenger to summon Eve', () => summonses().length > 0, { timeoutMs: 120_000 }).catch(withSolverLog);
  const summoned = summonses()[0];
  assert.equal(summoned.data.attester, eve.address);
  assert.equal(summoned.data.segment, 1, 'the lie is in the unit\'s second segment');
  const summoner = [...verifierWorkers.keys()].find((uri) => keyring.addFromUri(uri).address === summoned.data.summoner);
  assert.ok(summoner, `the summoner ${summoned.data.summoner} is a worker`);
  const ended = () => events('disputes', 'DisputeResolved').find((e) => summonses().some((s) => s.data.dispute === e.data.dispute));
  await waitFor("Eve's summons to end", () => ended() !== undefined, { timeoutMs: 300_000 }).catch(withSolverLog);
  assert.equal(ended().data.ruling, 'ChallengerWins', JSON.stringify(ended().data));
  const falseAttestations = mine('verification', 'FalseAttestation')
    .filter((e) => e.block >= kept.block)
    .map((e) => [e.data.verifier, Number(e.data.step), BigInt(e.data.slashed)]);
  assert.deepEqual(falseAttestations, [[eve.address, 100, 50n * UNIT]]);
  // The summoner bound its run of the segment. Eve's worker tried to answer and had
  // nothing to answer with: lazy, she never fetched the proof's manifest or re-executed
  // anything, and no honest trace reaches the proof's boundary anyway (an honest attester's
  // defence is `dispute::tests::a_summoned_verifier_defends_a_true_segment_…`).
  assert.match(verifierWorkers.get(summoner).log, new RegExp(`dispute: sent bind_segment[^\\n]*dispute=${summoned.data.dispute}`));
  assert.match(verifierWorkers.get('//Eve').log, /summons: [^\n]*side=Defender/);
  t.diagnostic(`conviction ${overturned} at block ${conviction.block}; summons ${summoned.data.dispute} opened at ${summoned.block}, ended at ${ended().block}`);
});

test('a transformer solver that lies in its attention is caught, the referee recomputes the causal-softmax piece, and the liar is slashed', { timeout: 600_000 }, async (t) => {
  // A character transformer trains on the Shakespeare corpus's token stream, which the
  // submitter serves (18 MB, cut to the windows of the model's context) and the solver and
  // the verifiers fetch. Bob lies at step 100 again, now in the first block's attention: a
  // mantissa bit of the first query's weight on itself. Dave's re-execution of the segment
  // does not reach Bob's boundary; the dispute descends to that step, to the causal
  // softmax, and to the piece holding the corrupted row, which Bob opens and the runtime's
  // referee recomputes from the tokens, proven against the job's root, and the scores.
  await restartSolverToppedUp(['--inject-fault', '100']);
  const bob = keyring.addFromUri('//Bob');
  const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'transformer-liar-job.toml');
  const submitter = backgroundWorker('transformer-submitter', ['submit', '--key', '//Alice', '--job', fixture, '--wait', '--no-mdns']);
  try {
    await waitFor('the transformer job to be submitted', () => /job (\d+) submitted/.test(submitter.output()), { timeoutMs: 180_000 })
      .catch((error) => withSolverLog(new Error(`${error.message}\nsubmitter:\n${submitter.output()}`)));
    const jobId = Number(/job (\d+) submitted/.exec(submitter.output())[1]);
    const spec = (await api.query.tasks.jobs(jobId)).unwrap().spec;
    assert.ok(spec.model.isTransformer, spec.model.toString());
    assert.equal(spec.dataset.samples.toNumber(), 284_842, 'the training stream\'s windows of 16 tokens');
    const mine = (section, method) => verification.events.filter((e) => e.section === section && e.method === method && Number(e.data.job) === jobId);
    await waitFor('a dispute over the lie to be resolved', () => mine('disputes', 'DisputeResolved').length > 0, {
      timeoutMs: 540_000,
    }).catch(withSolverLog);
    const resolutions = mine('disputes', 'DisputeResolved');
    const resolved = resolutions.find((e) => e.data.grounds === 'Referee') ?? resolutions[0];
    assert.equal(resolved.data.ruling, 'ChallengerWins', JSON.stringify(resolved.data));
    assert.equal(resolved.data.grounds, 'Referee', 'the referee decided, not a timeout');
    // Bob opened the disputed piece: a piece of the first block's causal softmax, at step 100.
    await waitFor('the solver to open the disputed piece', () => /dispute: opening the disputed piece to the referee/.test(solverLog), {
      timeoutMs: 60_000,
    }).catch(withSolverLog);
    const opened = solverLog.split('\n').find((line) => /dispute: opening the disputed piece to the referee/.test(line));
    assert.match(opened, /step=Some\(100\)|step=100/, opened);
    assert.match(opened, /kind="?causal_softmax/, opened);
    const slashed = verification.events.filter((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === bob.address && e.block >= resolved.block);
    assert.ok(slashed.some((e) => e.data.role === 'Solver' && BigInt(e.data.amount) > 0n), JSON.stringify(slashed));
    t.diagnostic(`job ${jobId}: dispute ${resolved.data.dispute} resolved at block ${resolved.block}; ${opened.replace(/^.*dispute: /, '')}`);
  } finally {
    submitter.process.kill('SIGINT');
  }
  // Bob goes back to honest work for the tests after this one.
  solver.kill('SIGINT');
  await new Promise((resolve) => solver.once('exit', resolve));
  solverLog = '';
  startSolver();
});

test('the digits job completes after its window: the solver is paid, and the model fetched holds the proven state and reaches the pinned accuracy', { timeout: 600_000 }, async () => {
  // The job's challenge windows ran while the forced-error and liar tests played.
  const submitted = await digits.done.catch(withSolverLog);
  const jobId = digits.jobId;
  assert.match(submitted, /completed: 4 units finalized, 0 failed/);
  const job = (await api.query.tasks.jobs(jobId)).unwrap();
  assert.equal(job.status.toString(), 'Completed');
  assert.equal(job.escrow.toBigInt(), 0n, 'the escrow was paid out');
  const result = job.result.unwrap();

  // Each unit's 1 TST went to Bob, less the jackpot's 10 % and the attesting verifiers' 10 %.
  const bob = keyring.addFromUri('//Bob');
  const finalized = verification.events.filter((e) => e.method === 'UnitFinalized' && Number(e.data.job) === jobId);
  assert.equal(finalized.length, 4);
  for (const { data } of finalized) {
    assert.equal(data.solver, bob.address);
    assert.equal(BigInt(data.toVerifiers), UNIT / 10n, JSON.stringify(data));
    assert.equal(BigInt(data.toJackpot), UNIT / 10n, JSON.stringify(data));
    assert.equal(BigInt(data.paid), UNIT - UNIT / 10n - UNIT / 10n, JSON.stringify(data));
  }

  const modelPath = join(dataDir, 'model.safetensors');
  // No --peer: the solver is found from the endpoint it advertised on-chain.
  const fetched = await worker(['fetch', '--job', String(jobId), '--out', modelPath, '--no-mdns']);
  // The model is named by its proven state root; the worker checked the file's state against it.
  const onChain = result.stateRoot.toHex();
  assert.ok(fetched.includes(`state root ${onChain.slice(2)}`), `the written model holds the proven state ${onChain}: ${fetched}`);

  const evaluated = await worker(['evaluate', '--example', 'digits', '--model', modelPath]);
  // The reference's accuracy on this run is pinned (kernels/tests/digits.rs): 352/360.
  assert.match(evaluated, /test accuracy 97\.8 % \(352\/360\)/);

  // Every unit final and nothing naming the job: the solver's sweep deletes the job's
  // unit folders, checkpoints and manifests, and keeps the final models, the job's result.
  const solverDir = join(dataDir, 'solver');
  const jobFolders = () => readdirSync(join(solverDir, 'units')).filter((name) => name.startsWith(`${jobId}-`));
  await waitFor('the solver to sweep the finished job', async () => jobFolders().length === 0, { timeoutMs: 180_000 }).catch(withSolverLog);
  // (The sweep's log line may be in an earlier run's log: the solver is restarted by earlier tests.)
  const ledger = readFileSync(join(solverDir, 'artifacts', 'ledger', String(jobId)), 'utf8').trim().split('\n');
  assert.equal(ledger.length, 4, `one final model a unit: ${ledger.join(', ')}`);
  assert.ok(ledger.every((line) => line.startsWith('model ')), ledger.join(', '));
  assert.ok(existsSync(join(solverDir, 'artifacts', onChain.slice(2))), 'the job\'s result stays');
});

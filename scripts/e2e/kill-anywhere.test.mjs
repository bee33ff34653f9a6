// Kill anywhere, against a dev node: a job of four step ranges (`fixtures/kill-job.toml`,
// about half a minute of training each) runs while the solver (Bob) and one of its two
// verifiers (Dave) are killed with SIGKILL at random moments of the job's life, at least
// eight times in all, and each time started again a few seconds later on the same data
// directory, the way a service manager restarts a crashed worker. Eve verifies and is never
// killed. Whatever a worker owes the chain when it dies (a checkpoint, a forced-error
// secret, a proof, a verdict, its salt, a reveal, a finalization) it must owe again when it
// comes back, and do in time. The job completes with every range proven by Bob and
// attested by both verifiers, nobody is slashed or misses a reveal, and each unit is
// paid exactly once.
//
// The moments are drawn from a seeded generator: `TOUCHSTONE_E2E_SEED` replays a run, and
// the test prints its seed and every kill point (the time, the worker, what it last
// logged and the units' states on chain).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from './lib/node.mjs';
import { devChainWithSolver } from './lib/workers.mjs';

const UNIT = 10n ** 12n;
/** The solver's and verifiers' bonds: the worker's defaults. */
const BONDS = { solver: 150n * UNIT, dave: 100n * UNIT };
/** Kills over the job, at least. */
const MIN_KILLS = 8;

/** The dev node, Bob's solver and the events recorded (`lib/workers.mjs`). */
let chain;
let api;
let workers;
let recorded;
let keyring;

/** A small seeded generator (mulberry32): the same seed gives the same kill moments. */
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The last line worker `name` logged of its own (not its libraries'), without its timestamp. */
const lastLine = (name) => workers.log(name).trimEnd().split('\n').findLast((line) => line.includes('touchstone_worker'))
  ?.replace(/^\S+\s+/, '').slice(0, 160) ?? '';

before(async () => {
  chain = await devChainWithSolver('kill-anywhere');
  ({ api, workers, recorded, keyring } = chain);
  for (const name of ['dave', 'eve']) {
    workers.start(name, ['verify', '--key', `//${name[0].toUpperCase()}${name.slice(1)}`, '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns']);
  }
  await chain.registered(['//Dave', '//Eve'], 'the verifiers to register');
});

after(async () => {
  await chain?.stop();
});

test('the solver and a verifier killed at random points of a job, again and again, lose nothing: the job completes, nobody is slashed, nothing is paid twice', { timeout: 2_400_000 }, async (t) => {
  const seed = Number(process.env.TOUCHSTONE_E2E_SEED ?? Date.now() % 2 ** 32);
  const random = generator(seed);
  t.diagnostic(`seed ${seed} (TOUCHSTONE_E2E_SEED=${seed} replays these kill moments)`);

  const job = await chain.submit('kill-job');
  const units = (await api.query.tasks.jobs(job)).unwrap().units.toNumber();
  const started = Date.now();
  const finalized = () => recorded.of('tasks', 'UnitFinalized', job).length;

  // The killer: every 15 to 45 s, the solver or Dave in turn (which first is drawn),
  // SIGKILLed and started again 1 to 6 s later, until every unit is finalized.
  const kills = [];
  let done = false;
  const killer = (async () => {
    const order = random() < 0.5 ? ['solver', 'dave'] : ['dave', 'solver'];
    while (!done) {
      await sleep(15_000 + random() * 30_000);
      if (done) break;
      const name = order[kills.length % 2];
      const states = [];
      for (let unit = 0; unit < units; unit++) states.push((await api.query.tasks.units(job, unit)).unwrap().state.type);
      const block = (await api.rpc.chain.getHeader()).number.toNumber();
      const last = lastLine(name);
      await workers.kill(name, 'SIGKILL');
      const down = 1000 + random() * 5000;
      kills.push({ seconds: (Date.now() - started) / 1000, block, name, last, states, down });
      if (process.env.TOUCHSTONE_E2E_VERBOSE) process.stderr.write(`# killed ${name} at block ${block}: ${JSON.stringify(kills.at(-1))}\n`);
      await sleep(down);
      workers.restart(name);
    }
  })();

  try {
    await waitFor('every unit to be finalized', () => finalized() === units, { timeoutMs: 1_800_000, intervalMs: 3000 });
  } catch (error) {
    done = true;
    workers.withLogs(error);
  } finally {
    done = true;
    await killer;
  }
  try {
    await checkOutcomeOf(t, job, units, kills, started);
  } catch (error) {
    // Every worker's whole log, with the kill points above it, says what went wrong.
    workers.withLogs(error);
  }
});

/** Prints the kill points and checks that the job ended as if nothing had been killed. */
async function checkOutcomeOf(t, job, units, kills, started) {
  for (const [i, kill] of kills.entries()) {
    t.diagnostic(`kill ${i + 1} at +${kill.seconds.toFixed(0)} s (block ${kill.block}): ${kill.name}, down ${(kill.down / 1000).toFixed(1)} s;` +
      ` units ${kill.states.join(' ')}; it last logged: ${kill.last}`);
  }
  assert.ok(kills.length >= MIN_KILLS, `only ${kills.length} kills over the job`);
  for (const name of ['solver', 'dave']) assert.ok(kills.filter((kill) => kill.name === name).length >= 3, `${name} killed at least three times`);

  // Every range proven by Bob, attested by both verifiers, paid once, in full.
  const bob = keyring.addFromUri('//Bob');
  const dave = keyring.addFromUri('//Dave');
  const eve = keyring.addFromUri('//Eve');
  const price = UNIT; // `price_per_unit = 1.0`
  for (let unit = 0; unit < units; unit++) {
    const paid = recorded.of('tasks', 'UnitFinalized', job, unit);
    assert.equal(paid.length, 1, `unit ${unit} finalized once: ${JSON.stringify(paid)}`);
    const { solver, paid: toSolver, toJackpot, toVerifiers } = paid[0].data;
    assert.equal(solver, bob.address);
    assert.equal(BigInt(toSolver) + BigInt(toJackpot) + BigInt(toVerifiers), price, `unit ${unit}'s price split once: ${JSON.stringify(paid[0].data)}`);
    const concluded = recorded.of('verification', 'RoundConcluded', job, unit);
    assert.deepEqual(concluded.map((e) => [e.data.matched, e.data.mismatched, e.data.missed]), [[2, 0, 0]],
      `unit ${unit}: one round, both verifiers matched`);
    const revealed = recorded.of('verification', 'Revealed', job, unit).map((e) => e.data.verifier).sort();
    assert.deepEqual(revealed, [dave.address, eve.address].sort());
    assert.equal(recorded.of('verification', 'SecretRevealed', job, unit).length, 1, `unit ${unit}'s secret revealed once`);
  }
  const failures = recorded.events.filter((e) => (e.section === 'staking' && e.method === 'Slashed') ||
    (e.section === 'verification' && ['RevealMissed', 'SecretRevealMissed', 'FalseAttestation'].includes(e.method)) ||
    (e.section === 'tasks' && e.method === 'UnitTimedOut') || (e.section === 'disputes' && e.method === 'DisputeOpened'));
  assert.deepEqual(failures, [], 'no slash, missed reveal, timeout or dispute');
  const bond = async (account, reason) => (await api.query.balances.holds(account.address))
    .filter((hold) => hold.id.isStaking && hold.id.asStaking[`is${reason}`])
    .reduce((sum, hold) => sum + hold.amount.toBigInt(), 0n);
  assert.equal(await bond(bob, 'SolverBond'), BONDS.solver, "Bob's solver bond is whole");
  assert.equal(await bond(dave, 'VerifierBond'), BONDS.dave, "Dave's verifier bond is whole");

  t.diagnostic(`${kills.length} kills (solver ${kills.filter((k) => k.name === 'solver').length}, Dave ${kills.filter((k) => k.name === 'dave').length});` +
    ` the job's ${units} units finalized ${((Date.now() - started) / 1000).toFixed(0)} s after submission`);
}

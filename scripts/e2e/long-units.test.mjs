// Long units under fire, against a dev node: a job of two step ranges that each train for
// minutes (`fixtures/long-job.toml`), and while the second range trains, everything the
// solver owes the chain falls due at once. Charlie challenges the first range's honest
// proof and then falls silent, so the solver must answer the dispute in time or lose its
// proof and bond; the first range's forced-error secret falls due for its reveal; and
// another job's unit is offered to the solver, which must answer the offer. The solver's
// duties run every block on their own while its device trains: it answers the dispute
// (and wins it once Charlie's deadline passes), reveals in time, declines the offer (its device is busy) and takes that unit from the
// pool once the range is proven, and ends with its bond whole and every unit paid. A
// verifier that joins after the first range's round is drawn for the second, whose
// segments take more than 30 s each to re-execute here, and commits and reveals in time.
// The test prints how long each range trained and how long the verifier re-executed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sendOk, waitFor } from './lib/node.mjs';
import { devChainWithSolver } from './lib/workers.mjs';

const UNIT = 10n ** 12n;
/** The solver's bond: the worker's default. */
const SOLVER_BOND = 150n * UNIT;

/** The dev node, Bob's solver and the events recorded (`lib/workers.mjs`). */
let chain;
let api;
let workers;
let keyring;
const events = () => chain.recorded.events;
const eventsOf = (...args) => chain.recorded.of(...args);
const solverLog = () => workers.log('solver');
const withLogs = (error) => workers.withLogs(error);
const submit = (fixture) => chain.submit(fixture);

/** A unit's state at the best block. */
const unitState = async (job, unit) => (await api.query.tasks.units(job, unit)).unwrap().state.toString();

before(async () => {
  chain = await devChainWithSolver('long-units');
  ({ api, workers, keyring } = chain);
});

after(async () => {
  await chain?.stop();
});

test('while a long range trains, the solver wins a dispute, reveals its secret, answers an offer, and every unit is paid', { timeout: 1_800_000 }, async (t) => {
  const bob = keyring.addFromUri('//Bob');
  const charlie = keyring.addFromUri('//Charlie');
  const long = await submit('long-job');

  // Range 1 trains and is proven; range 2 goes to the same solver and trains.
  await waitFor('the first range to be proven', async () => (await unitState(long, 0)) === 'Proven', { timeoutMs: 900_000, intervalMs: 3000 })
    .catch(withLogs);
  await waitFor('the second range to train', () => new RegExp(`training job=${long} unit=1\\b`).test(solverLog()), { timeoutMs: 300_000 })
    .catch(withLogs);
  const trainingFrom = events().at(-1)?.block ?? 0;
  // Dave's verifier joins once range 1's round is drawn (with nobody to draw, so its
  // secret falls due while range 2 trains): he is drawn for range 2.
  await waitFor("range 1's round to be drawn", () => eventsOf('verification', 'NoVerifiers', long, 0).length > 0, { timeoutMs: 120_000 })
    .catch(withLogs);
  const dave = keyring.addFromUri('//Dave');
  workers.start('verifier', ['verify', '--key', '//Dave', '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns']);

  // While it trains: Charlie disputes range 1's honest proof with a made-up trace root,
  // then never plays; and another job's unit is offered to the solver, the only one.
  const profile = { device: 'Cpu', model: 'challenger', memoryMib: 1024, throughputGflops: 1, bandwidthMbps: 100, region: 'local' };
  await sendOk(api.tx.staking.register(profile, [['Challenger', 20n * UNIT]], 0), charlie);
  const challenged = await sendOk(api.tx.disputes.challenge(long, 0, `0x${'42'.repeat(32)}`), charlie);
  const dispute = challenged.find((e) => e.section === 'disputes' && e.method === 'DisputeOpened').data.dispute.toNumber();
  const small = await submit('small-job');

  // Each duty is done while range 2 is still training (its proof not yet committed).
  const range2Proven = () => eventsOf('tasks', 'ProofSubmitted', long, 1)[0]?.block ?? Infinity;
  await waitFor('the offer to be answered', () => eventsOf('tasks', 'UnitDeclined', small, 0).length > 0 ||
    eventsOf('tasks', 'UnitAccepted', small, 0).length > 0, { timeoutMs: 120_000 }).catch(withLogs);
  await waitFor('the dispute to end', () => events().some((e) => e.section === 'disputes' && e.method === 'DisputeResolved' &&
    Number(e.data.dispute) === dispute), { timeoutMs: 600_000, intervalMs: 3000 }).catch(withLogs);
  await waitFor("range 1's secret to be revealed", () => eventsOf('verification', 'SecretRevealed', long, 0).length > 0,
    { timeoutMs: 600_000, intervalMs: 3000 }).catch(withLogs);
  const resolved = events().find((e) => e.section === 'disputes' && e.method === 'DisputeResolved' && Number(e.data.dispute) === dispute);
  assert.equal(`${resolved.data.ruling} ${resolved.data.grounds}`, 'DefenderWins Timeout');
  const declined = eventsOf('tasks', 'UnitDeclined', small, 0);
  assert.equal(declined.length, 1, 'the busy solver declined the offer rather than let it lapse');
  assert.match(solverLog(), new RegExp(`declining the unit: the device is training another unit job=${small} unit=0`));
  const revealed = eventsOf('verification', 'SecretRevealed', long, 0)[0];
  // The solver's answer to the dispute: Charlie's deadline (a minute plus a segment's
  // re-execution time) may outlast the range, and the ruling with it.
  const answered = events().find((e) => e.section === 'disputes' && e.method === 'Answered' && Number(e.data.dispute) === dispute &&
    e.data.party === 'Defender');
  assert.ok(answered, 'the solver answered the dispute');
  for (const [what, block] of [['the dispute was answered', answered.block], ['the secret was revealed', revealed.block], ['the offer was declined', declined[0].block]]) {
    assert.ok(block < range2Proven(), `${what} at block ${block}, while range 2 trained (proven at ${range2Proven()})`);
  }

  // Dave re-executed his two samples of range 2 and committed a match within the commit
  // period sized to them, and revealed it.
  await waitFor("Dave's reveal on range 2", () => eventsOf('verification', 'Revealed', long, 1).length > 0,
    { timeoutMs: 900_000, intervalMs: 3000 }).catch(withLogs);
  const committed = eventsOf('verification', 'Committed', long, 1);
  assert.deepEqual(committed.map((e) => e.data.verifier), [dave.address]);
  const verdictName = (verdict) => (typeof verdict === 'string' ? verdict : Object.keys(verdict)[0]).toLowerCase();
  const verdicts = eventsOf('verification', 'Revealed', long, 1).map((e) => [e.data.verifier, verdictName(e.data.verdict)]);
  assert.deepEqual(verdicts, [[dave.address, 'match']]);
  const verifierLog = workers.log('verifier');
  const stamp = (pattern) => Date.parse(verifierLog.split('\n').find((line) => pattern.test(line))?.match(/^\S+/)?.[0]);
  const reexecution = (stamp(new RegExp(`every sampled segment reproduces job=${long} unit=1\\b`)) -
    stamp(new RegExp(`drawn; re-executing the sampled segments job=${long} unit=1\\b`))) / 1000;

  // Both jobs end: every unit finalized and paid, nobody slashed, Bob's bond whole.
  await waitFor('every unit to be finalized', () => eventsOf('tasks', 'UnitFinalized', long).length === 2 &&
    eventsOf('tasks', 'UnitFinalized', small).length === 1, { timeoutMs: 900_000, intervalMs: 3000 }).catch(withLogs);
  for (const finalized of [...eventsOf('tasks', 'UnitFinalized', long), ...eventsOf('tasks', 'UnitFinalized', small)]) {
    assert.equal(finalized.data.solver, bob.address);
    assert.ok(BigInt(finalized.data.paid) > 0n, JSON.stringify(finalized.data));
  }
  assert.deepEqual(events().filter((e) => e.section === 'staking' && e.method === 'Slashed'), []);
  assert.deepEqual(events().filter((e) => e.section === 'verification' && ['SecretRevealMissed', 'RevealMissed'].includes(e.method)), []);
  const solverBond = (await api.query.balances.holds(bob.address))
    .filter((hold) => hold.id.isStaking && hold.id.asStaking.isSolverBond)
    .reduce((sum, hold) => sum + hold.amount.toBigInt(), 0n);
  assert.equal(solverBond, SOLVER_BOND, "Bob's solver bond is whole");

  // How long each range trained, from the blocks its training started and was proven in.
  const accepted = (unit) => [...eventsOf('tasks', 'UnitAccepted', long, unit), ...eventsOf('tasks', 'UnitClaimed', long, unit)][0]?.block;
  const proven = (unit) => eventsOf('tasks', 'ProofSubmitted', long, unit)[0]?.block;
  t.diagnostic(`range 1: taken at block ${accepted(0)}, proven at ${proven(0)}; range 2: taken at ${accepted(1)}, proven at ${proven(1)}` +
    ` (3 s blocks); the dispute opened after block ${trainingFrom}, was answered at ${answered.block} and ended at ${resolved.block}, the secret was revealed at` +
    ` ${revealed.block}, the offer declined at ${declined[0].block}; Dave re-executed two segments of range 2 in ${reexecution} s` +
    ` and committed at block ${committed[0].block}`);
});

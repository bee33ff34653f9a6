// Data-parallel rounds against a dev node, two jobs at once. The first is the digits job as
// a rounds job (`fixtures/rounds-job.toml`: four shards, four rounds of 250 local steps,
// plain averaging), trained by two solver workers in parallel (Bob and Dave, each on one
// thread) and checked by drawn verifiers (Ferdie and Eve). In each round the shards train
// side by side from the round's model, the round's aggregate is computed by whichever
// solver takes it from the shards' proven end states (fetched from the solvers that trained
// them) and committed, and the next round's shards start from it (fetched from the
// aggregator). The job's model is the last aggregate: fetched by its root, it reaches test
// accuracy within one point of the same steps trained in one run (the digits job, 97.8 %).
// The test prints the blocks each round took, who trained what, and the accuracy.
// The second, a tolerance-mode rounds job (`fixtures/tolerance-rounds-job.toml`), trains
// meanwhile on libtorch (the solvers run `--backend tch`, which trains exact-mode jobs on
// the reference): its shards are judged by distance, its aggregates are exact.
// A lying aggregator is rehearsed in rounds-lie.test.mjs.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { freePort, waitFor, workerBinary } from './lib/node.mjs';
import { devChainWithSolver } from './lib/workers.mjs';

const run = promisify(execFile);
const SHARDS = 4;
const ROUNDS = 4;

let chain;
let api;
let workers;
let keyring;
const eventsOf = (...args) => chain.recorded.of(...args);
const withLogs = (error) => workers.withLogs(error);

/**
 * Runs the worker binary with `args` against the dev node, with data directory `dir` (one per
 * test: the two tests' commands may run at once); resolves with its output.
 */
async function worker(args, dir, timeout = 180_000) {
  const { stdout } = await run(workerBinary(), ['--node', chain.node.wsUrl, '--data-dir', join(chain.dataDir, dir), ...args], {
    timeout,
    maxBuffer: 16 << 20,
  });
  return stdout;
}

/**
 * Waits for rounds job `job` of `units` units to complete at the finalized block (which the
 * worker's commands read too), checks that every unit was finalized and that its model is
 * the last aggregate, unit `lastAggregate`; resolves with the job's result.
 */
async function completed(job, units, lastAggregate, timeoutMs) {
  const finalizedJob = async () => (await (await api.at(await api.rpc.chain.getFinalizedHead())).query.tasks.jobs(job)).unwrap();
  await waitFor(`job ${job} to complete`, async () => (await finalizedJob()).status.toString() === 'Completed',
    { timeoutMs, intervalMs: 3000 }).catch(withLogs);
  const result = (await finalizedJob()).result.unwrap();
  assert.equal(result.unitsFinalized.toNumber(), units);
  assert.equal(result.stateRoot.toString(), eventsOf('tasks', 'ProofSubmitted', job, lastAggregate)[0].data.proof.finalStateRoot.toString());
  return result;
}

/**
 * Fetches job `job`'s model by its result root with data directory `dir` and evaluates it on
 * the digits' test split; resolves with `fetch`'s output and the test accuracy in percent.
 */
async function fetchAndEvaluate(job, dir) {
  const modelPath = join(chain.dataDir, `job-${job}-model.safetensors`);
  const fetched = await worker(['fetch', '--job', String(job), '--out', modelPath, '--no-mdns'], dir).catch(withLogs);
  const evaluated = await worker(['evaluate', '--example', 'digits', '--model', modelPath], dir);
  return { fetched, accuracy: Number(/test accuracy ([\d.]+) %/.exec(evaluated)[1]) };
}

before(async () => {
  chain = await devChainWithSolver('rounds', { solverArgs: ['--backend', 'tch', '--cpu-threads', '1'] });
  ({ api, workers, keyring } = chain);
  const davePeer = `/ip4/127.0.0.1/tcp/${await freePort()}`;
  workers.start('solver-dave', ['solve', '--key', '//Dave', '--p2p-listen', davePeer, '--no-mdns', '--peer', chain.solverPeer,
    '--backend', 'tch', '--cpu-threads', '1']);
  for (const uri of ['//Ferdie', '//Eve']) {
    workers.start(`verifier-${uri.slice(2).toLowerCase()}`, ['verify', '--key', uri, '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns',
      '--peer', chain.solverPeer]);
  }
  await chain.registered(['//Dave', '//Ferdie', '//Eve'], 'the second solver and the verifiers to register');
});

after(async () => {
  await chain?.stop();
});

// The two jobs run side by side: the chain's rhythm, not the two cores, paces them.
describe('rounds jobs', { concurrency: true }, () => {
  test('two solvers train a rounds job in parallel; each round is aggregated and the next starts from it; the model reaches one run\'s accuracy', { timeout: 1_800_000 }, async (t) => {
    const job = await chain.submit('rounds-job');
    const units = (await api.query.tasks.jobs(job)).unwrap().units.toNumber();
    assert.equal(units, ROUNDS * (SHARDS + 1));
    const aggregateIndex = (round) => round * (SHARDS + 1) + SHARDS;

    // Every aggregate is committed, each after its round's shards and before the next
    // round's shards are ready.
    await waitFor('every round to be aggregated', () => eventsOf('tasks', 'ProofSubmitted', job, aggregateIndex(ROUNDS - 1)).length > 0,
      { timeoutMs: 1_200_000, intervalMs: 3000 }).catch(withLogs);
    const bob = keyring.addFromUri('//Bob').address;
    const dave = keyring.addFromUri('//Dave').address;
    const lines = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const shards = Array.from({ length: SHARDS }, (_, shard) => round * (SHARDS + 1) + shard);
      const proofs = shards.map((unit) => eventsOf('tasks', 'ProofSubmitted', job, unit)[0]);
      assert.ok(proofs.every(Boolean), `every shard of round ${round} was proven`);
      const aggregate = eventsOf('tasks', 'ProofSubmitted', job, aggregateIndex(round))[0];
      const ready = eventsOf('tasks', 'UnitReady', job, aggregateIndex(round))[0];
      assert.ok(ready.block >= Math.max(...proofs.map((p) => p.block)), `round ${round}'s aggregate was ready only once its shards were proven`);
      assert.equal(Number(aggregate.data.proof.steps), 0);
      // The shards started from the round's model: the job's initial state, then the aggregate before.
      const start = round === 0 ? (await api.query.tasks.jobs(job)).unwrap().spec.initialStateRoot.toHex()
        : eventsOf('tasks', 'ProofSubmitted', job, aggregateIndex(round - 1))[0].data.proof.finalStateRoot.toString();
      for (const proof of proofs) assert.equal(proof.data.proof.startStateRoot.toString(), start, `round ${round} starts from its model`);
      const solvers = proofs.map((p) => (p.data.solver === bob ? 'Bob' : p.data.solver === dave ? 'Dave' : p.data.solver));
      const aggregator = aggregate.data.solver === bob ? 'Bob' : 'Dave';
      lines.push(`round ${round}: shards proven at blocks ${proofs.map((p) => p.block).join(', ')} by ${solvers.join(', ')};` +
        ` aggregated by ${aggregator} at ${aggregate.block}`);
    }
    const solvedBy = new Set(Array.from({ length: units }, (_, unit) => eventsOf('tasks', 'ProofSubmitted', job, unit)[0]?.data.solver));
    assert.deepEqual([...solvedBy].sort(), [bob, dave].sort(), 'both solvers trained units of the job');

    // The verifier was drawn for shards and re-executed their samples from the rounds' models.
    await waitFor("a verifier's reveal on a shard after round 0", () => Array.from({ length: units }, (_, unit) => unit)
      .filter((unit) => unit > SHARDS && unit % (SHARDS + 1) !== SHARDS)
      .some((unit) => eventsOf('verification', 'Revealed', job, unit).length > 0), { timeoutMs: 600_000, intervalMs: 3000 }).catch(withLogs);

    // Every unit is finalized after its window, and the job's model is the last aggregate.
    const result = await completed(job, units, aggregateIndex(ROUNDS - 1), 900_000);
    assert.deepEqual(chain.recorded.events.filter((e) => e.section === 'staking' && e.method === 'Slashed'), []);

    const { fetched, accuracy } = await fetchAndEvaluate(job, 'cli');
    assert.ok(fetched.includes(`state root ${result.stateRoot.toHex().slice(2)}`), fetched);
    // One run of the same 1,000 steps (the digits job) reaches 97.8 % (kernels/tests/digits.rs).
    assert.ok(accuracy >= 96.8, `the rounds job's model reaches ${accuracy} %, within one point of one run's 97.8 %`);
    t.diagnostic(`${lines.join('; ')}; the job completed with test accuracy ${accuracy} % (one run: 97.8 %)`);
  });

  test('a tolerance-mode rounds job trains on libtorch: its shards are judged by distance from their rounds\' models, and its aggregates are exact', { timeout: 1_500_000 }, async (t) => {
    // Bob and Dave train tolerance-mode jobs on libtorch. Ferdie and Eve measure each sampled
    // segment of a shard on the reference from the solver's checkpoint before it (the round's
    // model for the first) and reveal its distance to the solver's checkpoint after it; a
    // round's two profiles set the job's thresholds.
    const shards = 2;
    const rounds = 2;
    // Charlie submits it: Alice submits the other job meanwhile.
    const job = await chain.submit('tolerance-rounds-job', { key: '//Charlie' });
    const units = rounds * (shards + 1);
    assert.equal((await api.query.tasks.jobs(job)).unwrap().units.toNumber(), units);
    const aggregateIndex = (round) => round * (shards + 1) + shards;
    const shardUnits = Array.from({ length: units }, (_, unit) => unit).filter((unit) => unit % (shards + 1) !== shards);
    await completed(job, units, aggregateIndex(rounds - 1), 720_000);

    // Every shard trained on libtorch, round 1's from round 0's aggregate.
    const solverLogs = workers.log('solver') + workers.log('solver-dave');
    assert.match(solverLogs, /libtorch sees no CUDA device/);
    for (const unit of shardUnits) {
      assert.match(solverLogs, new RegExp(`training job=${job} unit=${unit} [^\\n]*backend=Tch`), `shard unit ${unit} trained on libtorch`);
    }
    const roundZero = eventsOf('tasks', 'ProofSubmitted', job, aggregateIndex(0))[0].data.proof.finalStateRoot.toString();
    for (const unit of shardUnits.filter((unit) => unit > shards)) {
      assert.equal(eventsOf('tasks', 'ProofSubmitted', job, unit)[0].data.proof.startStateRoot.toString(), roundZero);
    }

    // The shards were judged by distance: every reveal a measurement, none beyond the
    // thresholds (no escalation), the thresholds profiled; aggregates are not drawn.
    const reveals = shardUnits.flatMap((unit) => eventsOf('verification', 'Revealed', job, unit));
    assert.ok(reveals.length > 0 && reveals.every((e) => e.data.verdict.measured), JSON.stringify(reveals));
    assert.ok(reveals.some((e) => Number(e.data.unit) > shards), 'a shard of round 1 was measured from the round\'s model');
    for (let round = 0; round < rounds; round += 1) {
      assert.deepEqual(eventsOf('verification', 'VerifiersDrawn', job, aggregateIndex(round)), []);
    }
    assert.deepEqual(eventsOf('verification', 'EscalationOpened', job), []);
    const profiled = eventsOf('verification', 'ThresholdsProfiled', job);
    assert.equal(profiled.length, 1, 'a round of the shards profiled the thresholds');
    assert.deepEqual(chain.recorded.events.filter((e) => e.section === 'staking' && e.method === 'Slashed'), []);

    const { accuracy } = await fetchAndEvaluate(job, 'cli-tolerance');
    const distances = reveals.map((e) => `unit ${e.data.unit}: l2 ${(Number(e.data.verdict.measured.distance.l2) / 1e9).toExponential(2)}`);
    t.diagnostic(`${reveals.length} reveals (${distances.join(', ')}); thresholds ${JSON.stringify(profiled.map((e) => e.data))};` +
      ` test accuracy ${accuracy} %`);
  });
});

// A lying aggregator against a dev node, with `fixtures/rounds-lie-job.toml`: the digits
// classifier as two shards and two rounds of 100 local steps, with Nesterov's outer step, so
// each aggregate commits a next model and a next outer momentum. Bob is the only solver at
// first and is told to lie once (`solve --lie-in-aggregate`, test equipment): the first
// aggregate he computes has one wrong word, which he commits and serves as if honest.
// Charlie watches (`challenge --watch`): he recomputes every committed aggregate from the
// round's proven shard states, finds the first chunk that differs from the committed one and
// calls `challenge_aggregate` with that chunk's openings; the referee convicts at once. Bob
// is slashed below the solver minimum, the aggregate goes back to the pool, and Dave, started
// then, aggregates the round again from the same shards; the job completes from that
// aggregate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, waitFor } from './lib/node.mjs';
import { devChainWithSolver } from './lib/workers.mjs';

let chain;
let api;
let workers;
let keyring;
const eventsOf = (...args) => chain.recorded.of(...args);
const withLogs = (error) => workers.withLogs(error);

before(async () => {
  chain = await devChainWithSolver('rounds-lie', { solverArgs: ['--lie-in-aggregate', '--cpu-threads', '1'] });
  ({ api, workers, keyring } = chain);
  workers.start('watcher', ['challenge', '--watch', '--key', '//Charlie', '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns',
    '--peer', chain.solverPeer]);
  await chain.registered(['//Charlie'], 'the watcher to register');
});

after(async () => {
  await chain?.stop();
});

test('a lying aggregator is caught by a watcher, convicted at one chunk by the referee and slashed; an honest solver aggregates the round again', { timeout: 900_000 }, async (t) => {
  const job = await chain.submit('rounds-lie-job');
  const shards = 2;
  const aggregate = shards;

  // The watcher recomputes the committed aggregate, finds the chunk holding the lie and
  // wins `challenge_aggregate` at the referee at once: Bob is slashed, the aggregate goes
  // back to the pool.
  const overturned = await waitFor('the lying aggregate to be overturned',
    () => eventsOf('disputes', 'AggregateOverturned', job, aggregate)[0], { timeoutMs: 480_000, intervalMs: 3000 }).catch(withLogs);
  const bob = keyring.addFromUri('//Bob').address;
  const charlie = keyring.addFromUri('//Charlie').address;
  assert.equal(overturned.data.solver, bob);
  assert.equal(overturned.data.challenger, charlie);
  const lie = eventsOf('tasks', 'ProofSubmitted', job, aggregate)[0];
  assert.ok(lie.block <= overturned.block);
  assert.ok(chain.recorded.events.some((e) => e.section === 'staking' && e.method === 'Slashed' && e.data.who === bob && e.block === overturned.block),
    'the aggregator was slashed in the block of the conviction');
  assert.match(workers.log('solver'), /test equipment: the aggregate lies at word/);

  // Bob's bond is below the minimum now; Dave, honest, comes back and the round is
  // aggregated again from the same proven shards; the job completes from that aggregate.
  workers.start('solver-dave', ['solve', '--key', '//Dave', '--p2p-listen', `/ip4/127.0.0.1/tcp/${await freePort()}`, '--no-mdns',
    '--peer', chain.solverPeer, '--cpu-threads', '1']);
  const finalizedJob = async () => (await (await api.at(await api.rpc.chain.getFinalizedHead())).query.tasks.jobs(job)).unwrap();
  await waitFor('the job to complete', async () => (await finalizedJob()).status.toString() === 'Completed',
    { timeoutMs: 480_000, intervalMs: 3000 }).catch(withLogs);
  const commitments = eventsOf('tasks', 'ProofSubmitted', job, aggregate);
  const honest = commitments[commitments.length - 1];
  assert.ok(honest.block > overturned.block);
  assert.notEqual(honest.data.proof.finalStateRoot.toString(), lie.data.proof.finalStateRoot.toString());
  const nextRound = eventsOf('tasks', 'ProofSubmitted', job, shards + 1);
  assert.equal(nextRound[nextRound.length - 1].data.proof.startStateRoot.toString(), honest.data.proof.finalStateRoot.toString(),
    'the next round trained from the honest aggregate');
  assert.equal((await finalizedJob()).result.unwrap().unitsFinalized.toNumber(), 2 * (shards + 1));
  t.diagnostic(`the lie committed at block ${lie.block} was overturned at block ${overturned.block} at chunk ${overturned.data.chunk}` +
    ` (${overturned.data.slashed} slashed); the honest aggregate was committed at block ${honest.block}` +
    ` by ${honest.data.solver === bob ? 'Bob' : 'Dave'}`);
});

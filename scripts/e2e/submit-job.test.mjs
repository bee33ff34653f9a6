// A submitter's path through polkadot.js, against a real `touchstone-node --dev --tmp`,
// with nothing but the chain's metadata: no custom type definitions anywhere.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ApiPromise, WsProvider, Keyring } from '@polkadot/api';
import { startNode, waitFor, send } from './lib/node.mjs';

const UNIT = 10n ** 12n;
/** FixedU64 holds the value times 10^9. */
const fixed = (value) => BigInt(Math.round(value * 1e9));

let node;
let api;
let alice;
let bob;

/** Signs and sends `tx`, resolving with the block hash and events once it is in a block. */
function findEvent(events, section, method) {
  return events.find((event) => event.section === section && event.method === method);
}

/** The named module error of a failed dispatch, decoded from metadata. */
function moduleError(dispatchError) {
  assert.ok(dispatchError, 'the call should have failed');
  assert.ok(dispatchError.isModule, `expected a module error, got ${dispatchError.toString()}`);
  const { section, name } = api.registry.findMetaError(dispatchError.asModule);
  return `${section}.${name}`;
}

/** A valid job: an MLP on the digits set, 200 steps in four step ranges of 50. */
function jobSpec(overrides = {}) {
  return {
    model: { Mlp: { inputs: 64, hidden: [64], classes: 10, activation: 'Relu' } },
    initialWeights: null,
    // The state root of its seeded weights and zero momentum (kernels/tests/digits.rs pins it).
    initialStateRoot: '0x52862fab0f5fcf7dfb21df079f7f0f936de5397492460b35db14755eb9369534',
    dataset: {
      content: {
        hash: '0x' + 'ab'.repeat(32),
        location: 'file:///var/lib/touchstone/datasets/digits.csv.gz',
      },
      samples: 1437,
      // The digits training split's root (kernels/tests/digits.rs pins it).
      root: '0x9c2f80c80813dd840e0045b0046cb69dbdea8d7fcadf1ee1654619379805f30a',
    },
    hyper: {
      steps: 200,
      batchSize: 32,
      learningRate: fixed(0.1),
      optimizer: { Sgd: { momentum: fixed(0.9) } },
      gradClipNorm: null,
      seed: 42,
      checkpointInterval: 50,
    },
    decomposition: { StepRanges: { stepsPerUnit: 50 } },
    verification: 'Exact',
    requirements: {
      device: 'Gpu',
      minMemoryMib: 8192,
      minThroughputGflops: 1,
      minBandwidthMbps: 0,
      region: null,
    },
    pricePerUnit: 10n * UNIT,
    budget: 50n * UNIT,
    unitTimeout: 100,
    poolTimeout: 600,
    ...overrides,
  };
}

async function escrowHeld(account, at) {
  const query = at ? (await api.at(at)).query : api.query;
  const holds = await query.balances.holds(account);
  return holds
    .filter((hold) => hold.id.isTasks && hold.id.asTasks.isJobEscrow)
    .reduce((sum, hold) => sum + hold.amount.toBigInt(), 0n);
}

before(async () => {
  node = await startNode(['--dev', '--tmp'], { name: 'dev' });
  api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
  const keyring = new Keyring({ type: 'sr25519' });
  alice = keyring.addFromUri('//Alice');
  bob = keyring.addFromUri('//Bob');
});

after(async () => {
  await api?.disconnect();
  await node?.stop();
});

test('the dev chain produces and finalises blocks', async () => {
  const finalized = await waitFor('a finalized block', async () => {
    const head = await api.rpc.chain.getFinalizedHead();
    const header = await api.rpc.chain.getHeader(head);
    return header.number.toNumber() >= 2 ? header.number.toNumber() : null;
  });
  assert.ok(finalized >= 2);
});

test('Bob registers as a solver with a bond and a minimum price', async () => {
  const profile = {
    device: 'Gpu',
    model: 'NVIDIA RTX 4090',
    memoryMib: 24576,
    throughputGflops: 82000,
    bandwidthMbps: 1000,
    region: 'eu-west',
  };
  const bond = 150n * UNIT;
  const minPrice = 1n * UNIT;
  const { events, dispatchError } = await send(api.tx.staking.register(profile, [['Solver', bond]], minPrice), bob);
  assert.equal(dispatchError, undefined, `register failed: ${dispatchError?.toString()}`);
  const registered = findEvent(events, 'staking', 'NodeRegistered');
  assert.ok(registered, 'NodeRegistered was emitted');
  assert.equal(registered.data.who.toString(), bob.address);
  assert.equal(registered.data.minPrice.toBigInt(), minPrice);
  const bonded = findEvent(events, 'staking', 'Bonded');
  assert.equal(bonded.data.amount.toBigInt(), bond);

  const node = (await api.query.staking.nodes(bob.address)).unwrap();
  assert.equal(node.roles.solver.isTrue, true);
  assert.equal(node.profile.memoryMib.toNumber(), 24576);
  assert.equal(node.profile.model.toUtf8(), 'NVIDIA RTX 4090');
});

test('Alice submits a job: escrow, units, events, storage and runtime API', async () => {
  const spec = jobSpec();
  const { blockHash, events, dispatchError } = await send(api.tx.tasks.submitJob(spec), alice);
  assert.equal(dispatchError, undefined, `submitJob failed: ${dispatchError?.toString()}`);

  const submitted = findEvent(events, 'tasks', 'JobSubmitted');
  assert.ok(submitted, 'JobSubmitted was emitted');
  const jobId = submitted.data.job.toNumber();
  assert.equal(submitted.data.owner.toString(), alice.address);
  assert.equal(submitted.data.units.toNumber(), 4);
  assert.equal(submitted.data.escrow.toBigInt(), spec.budget);

  // The state of the block the job landed in.
  const at = await api.at(blockHash);
  const job = (await at.query.tasks.jobs(jobId)).unwrap();
  assert.equal(job.owner.toString(), alice.address);
  assert.equal(job.status.isActive, true);
  assert.equal(job.units.toNumber(), 4);
  assert.equal(job.escrow.toBigInt(), spec.budget);
  assert.equal(job.spec.hyper.steps.toNumber(), 200);
  assert.equal(job.spec.dataset.content.location.toUtf8(), spec.dataset.content.location);

  const units = await at.query.tasks.units.entries(jobId);
  assert.equal(units.length, 4);
  const byIndex = new Map(units.map(([key, unit]) => [key.args[1].toNumber(), unit.unwrap()]));
  assert.equal(byIndex.get(0).state.isPending, true);
  for (const index of [1, 2, 3]) assert.equal(byIndex.get(index).state.isWaiting, true);
  const scope = byIndex.get(2).scope.asSteps;
  assert.deepEqual([scope.firstStep.toNumber(), scope.steps.toNumber()], [100, 50]);

  assert.equal(await escrowHeld(alice.address, blockHash), spec.budget);

  // The scheduler assigns the first unit to Bob, the only eligible solver.
  await waitFor('unit 0 assigned to Bob', async () => {
    const unit = (await api.query.tasks.units(jobId, 0)).unwrap();
    return unit.state.isAssigned && unit.solver.unwrap().toString() === bob.address;
  });

  // The worker's runtime API sees it too.
  const forBob = await api.call.tasksApi.unitsForSolver(bob.address, 10);
  const mine = forBob.find((entry) => entry.job.toNumber() === jobId && entry.unit.toNumber() === 0);
  assert.ok(mine, 'unitsForSolver lists the assigned unit');
  assert.equal(mine.claimable.isFalse, true);
  const state = (await api.call.tasksApi.jobState(jobId)).unwrap();
  assert.equal(state.units.length, 4);

  // Bob declines the offer: the unit goes back to the pool, no attempt counted, and it
  // is not offered to him again; he may still claim it himself.
  const declined = await send(api.tx.tasks.declineUnit(jobId, 0), bob);
  assert.equal(declined.dispatchError, undefined, `declineUnit failed: ${declined.dispatchError?.toString()}`);
  const event = findEvent(declined.events, 'tasks', 'UnitDeclined');
  assert.ok(event, 'UnitDeclined was emitted');
  assert.equal(event.data.solver.toString(), bob.address);
  const back = (await (await api.at(declined.blockHash)).query.tasks.units(jobId, 0)).unwrap();
  assert.equal(back.state.isPending, true);
  assert.equal(back.attempts.toNumber(), 0);
  assert.equal(back.passedBy.unwrap().toString(), bob.address);
  const pool = await (await api.at(declined.blockHash)).query.tasks.pool();
  assert.ok(pool.some(([job, unit]) => job.toNumber() === jobId && unit.toNumber() === 0), 'the unit is back in the pool');
  const claimed = await send(api.tx.tasks.claimUnit(jobId, 0), bob);
  assert.equal(claimed.dispatchError, undefined, `claimUnit failed: ${claimed.dispatchError?.toString()}`);
  assert.ok(findEvent(claimed.events, 'tasks', 'UnitClaimed'));
});

test('invalid jobs fail with named errors that decode on the client and change nothing', async () => {
  const nextJob = (await api.query.tasks.nextJobId()).toNumber();
  const escrowBefore = await escrowHeld(alice.address);

  const cases = [
    [jobSpec({ hyper: { ...jobSpec().hyper, steps: 0 } }), 'tasks.ZeroSteps'],
    [jobSpec({ budget: 1n * UNIT }), 'tasks.BudgetBelowCost'],
    // Below the runtime's minimum price per unit (10 mTST).
    [jobSpec({ pricePerUnit: 1n, budget: 4n }), 'tasks.PriceBelowMinimum'],
    // Below Bob's own minimum price: no bonded solver would take it.
    [jobSpec({ pricePerUnit: UNIT / 2n, budget: 2n * UNIT }), 'tasks.UnsatisfiableRequirements'],
    [jobSpec({ model: { Mlp: { inputs: 64, hidden: [32], classes: 2000, activation: 'Relu' } } }), 'tasks.TooManyClasses'],
    [
      jobSpec({ requirements: { ...jobSpec().requirements, minMemoryMib: 10_000_000 } }),
      'tasks.UnsatisfiableRequirements',
    ],
  ];
  for (const [spec, expected] of cases) {
    const { events, dispatchError } = await send(api.tx.tasks.submitJob(spec), alice);
    assert.equal(moduleError(dispatchError), expected);
    assert.ok(findEvent(events, 'system', 'ExtrinsicFailed'));
    assert.equal(findEvent(events, 'tasks', 'JobSubmitted'), undefined);
  }

  assert.equal((await api.query.tasks.nextJobId()).toNumber(), nextJob);
  assert.equal(await escrowHeld(alice.address), escrowBefore);
});

test('a challenge of a unit without a standing proof fails with a named error', async () => {
  // The disputes pallet's calls come from metadata like any other.
  const nextDispute = (await api.query.disputes.nextDisputeId()).toNumber();
  const { dispatchError } = await send(api.tx.disputes.challenge(0, 0, '0x' + '11'.repeat(32)), bob);
  assert.equal(moduleError(dispatchError), 'disputes.NotDisputable');
  assert.equal((await api.query.disputes.nextDisputeId()).toNumber(), nextDispute);
});

test('light clients can get a sync spec and operators a Prometheus endpoint', async () => {
  const spec = (await api.rpc.syncstate.genSyncSpec(true)).toJSON();
  assert.equal(spec.id, 'touchstone_dev');
  assert.ok(spec.lightSyncState?.finalizedBlockHeader, 'the sync spec carries a finalized checkpoint');
  assert.ok(spec.genesis?.raw, 'the sync spec is raw');

  const metrics = await (await fetch(`http://127.0.0.1:${node.prometheusPort}/metrics`)).text();
  assert.match(metrics, /substrate_block_height\{status="finalized"/);
});

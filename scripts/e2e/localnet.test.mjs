// Local testnets over real libp2p on loopback, started from a raw chain spec with a boot
// node, the way operators start a network: three validators (`--chain local`) and four
// (`--chain local4`). On the four, a solver and two verifiers work a job through Alice's
// node while Dave's validator is stopped for a minute; the job completes with every proof
// verified.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiPromise, WsProvider, Keyring } from '@polkadot/api';
import { freePort, nodeBinary, startNode, waitFor, setForcedErrorRate } from './lib/node.mjs';
import { Workers, recordEvents } from './lib/workers.mjs';

const workDir = mkdtempSync(join(tmpdir(), 'touchstone-localnet-'));
const running = new Map();

after(async () => {
  await Promise.all([...running.values()].map((node) => node.stop()));
  rmSync(workDir, { recursive: true, force: true });
});

async function heads(node) {
  const best = await node.rpc('chain_getHeader');
  const finalizedHash = await node.rpc('chain_getFinalizedHead');
  const finalized = await node.rpc('chain_getHeader', [finalizedHash]);
  return { best: parseInt(best.number, 16), finalized: parseInt(finalized.number, 16) };
}

const seconds = (since) => ((Date.now() - since) / 1000).toFixed(0);

// Builds the raw spec of `chain` with Alice as boot node, starts one validator per name,
// and waits until they are all peers and finality has passed block 3.
async function startNetwork(chain, specId, names) {
  const binary = nodeBinary();
  // Alice's fixed node key makes her peer id, and so the boot node address, known ahead.
  const aliceKey = join(workDir, `${chain}-alice.key`);
  execFileSync(binary, ['key', 'generate-node-key', '--file', aliceKey], { stdio: 'pipe' });
  const aliceId = execFileSync(binary, ['key', 'inspect-node-key', '--file', aliceKey]).toString().trim();
  const aliceP2p = await freePort();

  // `build-spec --raw` with a node key adds that node as the boot node.
  const raw = JSON.parse(
    execFileSync(binary, ['build-spec', '--chain', chain, '--raw', '--node-key-file', aliceKey], {
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    }).toString(),
  );
  assert.equal(raw.id, specId);
  assert.ok(raw.genesis.raw, 'the spec is raw');
  assert.equal(raw.bootNodes.length, 1);
  assert.ok(raw.bootNodes[0].endsWith(`/p2p/${aliceId}`), `boot node ${raw.bootNodes[0]} is Alice`);
  // Point the boot node at the port Alice will listen on in this run.
  raw.bootNodes = [`/ip4/127.0.0.1/tcp/${aliceP2p}/p2p/${aliceId}`];
  const specPath = join(workDir, `${chain}-raw.json`);
  writeFileSync(specPath, JSON.stringify(raw));

  const start = async (name) => {
    const identity = name === 'alice'
      ? ['--node-key-file', aliceKey, '--listen-addr', `/ip4/127.0.0.1/tcp/${aliceP2p}`]
      // Validators refuse to invent a network key; the others may, for the test.
      : ['--unsafe-force-node-key-generation'];
    const node = await startNode(['--chain', specPath, '--tmp', '--allow-private-ip', `--${name}`, ...identity], { name: `${chain}-${name}` });
    running.set(`${chain}-${name}`, node);
    return node;
  };
  const stop = async (name, node) => {
    await node.stop();
    running.delete(`${chain}-${name}`);
  };
  // Stops every validator of this network still running, to free the machine for the next test.
  const stopAll = async () => {
    const mine = [...running.keys()].filter((key) => key.startsWith(`${chain}-`));
    await Promise.all(mine.map(async (key) => { await running.get(key).stop(); running.delete(key); }));
  };
  const nodes = {};
  for (const name of names) nodes[name] = await start(name);

  const started = Date.now();
  await waitFor(`${names.length} peers and finality`, async () => {
    const health = await nodes.alice.rpc('system_health');
    const { finalized } = await heads(nodes[names[1]]);
    return health.peers >= names.length - 1 && finalized >= 3;
  }, { timeoutMs: 240_000 });
  return { nodes, start, stop, stopAll, started };
}

test('three validators finalise; with one stopped, blocks go on and finality resumes on its return', async (t) => {
  const { nodes, start, stop, stopAll, started } = await startNetwork('local', 'touchstone_local', ['alice', 'bob', 'charlie']);
  const healthy = await heads(nodes.alice);
  t.diagnostic(`all three up: best #${healthy.best}, finalized #${healthy.finalized}, ${seconds(started)} s after start`);

  // Stop Charlie. BABE's remaining validators keep producing blocks. GRANDPA needs more
  // than two thirds of the voters, which for three equal voters means all three: no
  // BFT finality gadget can finalise with one of three down, so finality waits.
  await stop('charlie', nodes.charlie);
  const stopped = await heads(nodes.alice);
  const stoppedAt = Date.now();
  const during = await waitFor('three more blocks without Charlie', async () => {
    const now = await heads(nodes.alice);
    return now.best >= stopped.best + 3 ? now : null;
  }, { timeoutMs: 120_000 });
  assert.ok(during.best - during.finalized >= 3, `blocks kept coming past the finalized head: ${JSON.stringify(during)}`);
  const outage = (Date.now() - stoppedAt) / 1000;
  t.diagnostic(`Charlie down: ${during.best - stopped.best} blocks in ${outage.toFixed(0)} s (${(outage / (during.best - stopped.best)).toFixed(1)} s a block), finalized stuck at #${during.finalized}`);

  // Charlie comes back (fresh database): finality catches up past everything produced meanwhile.
  const restartedAt = Date.now();
  await start('charlie');
  const resumed = await waitFor('finality past the blocks made without Charlie', async () => {
    const now = await heads(nodes.alice);
    return now.finalized >= during.best ? now : null;
  }, { timeoutMs: 240_000 });
  assert.ok(resumed.finalized >= during.best);
  t.diagnostic(`Charlie back: finalized #${resumed.finalized} (best #${resumed.best}) ${seconds(restartedAt)} s after his restart`);
  await stopAll();
});

test('four validators keep finalising with any one of them stopped, and a job run through a minute without one completes with every proof verified', { timeout: 1_800_000 }, async (t) => {
  const names = ['alice', 'bob', 'charlie', 'dave'];
  const { nodes, start, stop, stopAll, started } = await startNetwork('local4', 'touchstone_local4', names);
  const healthy = await heads(nodes.alice);
  t.diagnostic(`all four up: best #${healthy.best}, finalized #${healthy.finalized}, ${seconds(started)} s after start`);

  // The verification pallet's beacon names each block's author, a BABE authority of the
  // epoch, so a draw's seed can wait for a second author: over the last blocks of four
  // validators, several authors appear (one making sixteen in a row: about 4⁻¹⁵).
  const api = await ApiPromise.create({ provider: new WsProvider(nodes.alice.wsUrl), noInitWarn: true });
  const workers = new Workers(nodes.alice.wsUrl, mkdtempSync(join(workDir, 'workers-')));
  let recorded;
  try {
    await waitFor('a full beacon', async () => (await api.query.verification.beacon()).length >= 16, { timeoutMs: 120_000 });
    const beacon = await api.query.verification.beacon();
    const authorities = new Set((await api.query.babe.authorities()).map(([key]) => key.toHex()));
    assert.equal(authorities.size, 4);
    const authors = beacon.map((entry) => entry.author.unwrapOr(null)?.toHex());
    assert.ok(authors.every((author) => authorities.has(author)), `beacon authors ${authors} among ${[...authorities]}`);
    const blocks = beacon.map((entry) => entry.knownSince.toNumber());
    assert.ok(blocks.every((block, i) => i === 0 || block === blocks[i - 1] + 1), `consecutive blocks ${blocks}`);
    t.diagnostic(`beacon of blocks #${blocks[0]} to #${blocks.at(-1)}: ${new Set(authors).size} distinct authors`);
    assert.ok(new Set(authors).size >= 2, `one author made every block: ${authors}`);

    // A solver (Eve) and two verifiers (Ferdie, and Charlie's account) work through
    // Alice's node; Alice submits the digits job. No unit is forced (one in a billion).
    const keyring = new Keyring({ type: 'sr25519' });
    // Finalized blocks only: competing forks of best blocks carry the same events twice.
    recorded = await recordEvents(api, undefined, { finalized: true });
    await setForcedErrorRate(api, keyring.addFromUri('//Alice'), 1);
    const solverPeer = `/ip4/127.0.0.1/tcp/${await freePort()}`;
    workers.start('solver', ['solve', '--key', '//Eve', '--p2p-listen', solverPeer, '--no-mdns']);
    for (const name of ['Ferdie', 'Charlie']) workers.start(name, ['verify', '--key', `//${name}`, '--p2p-listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns']);
    const registered = async (uri) => (await api.query.staking.nodes(keyring.addFromUri(uri).address)).isSome;
    await waitFor('the workers to register', async () => (await registered('//Eve')) && (await registered('//Ferdie')) &&
      (await registered('//Charlie')), { timeoutMs: 180_000 }).catch(workers.withLogs);
    const submitter = workers.start('submitter', ['submit', '--key', '//Alice', '--example', 'digits', '--wait', '--peer', solverPeer, '--no-mdns']);
    const job = Number((await waitFor('the job to be submitted', () => /job (\d+) submitted/.exec(submitter.log), { timeoutMs: 120_000 })
      .catch(workers.withLogs))[1]);
    const units = (await api.query.tasks.jobs(job)).unwrap().units.toNumber();
    await waitFor('the first proof', () => recorded.of('tasks', 'ProofSubmitted', job).length > 0, { timeoutMs: 300_000 })
      .catch(workers.withLogs);

    // Dave stops for a minute in the middle of the job. Three of four voters are more than
    // two thirds: finality goes on without him, and so does the job.
    await stop('dave', nodes.dave);
    const stopped = await heads(nodes.alice);
    const stoppedAt = Date.now();
    const during = await waitFor('finality to advance three blocks without Dave', async () => {
      const now = await heads(nodes.alice);
      return now.finalized >= stopped.finalized + 3 && now.finalized > stopped.best ? now : null;
    }, { timeoutMs: 120_000 });
    const outage = (Date.now() - stoppedAt) / 1000;
    t.diagnostic(`Dave down: best #${stopped.best} -> #${during.best}, finalized #${stopped.finalized} -> #${during.finalized} in ${outage.toFixed(0)} s (${(outage / (during.best - stopped.best)).toFixed(1)} s a block), finality lag ${during.best - during.finalized} blocks`);
    const eventsBefore = recorded.events.length;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 60_000 - (Date.now() - stoppedAt))));
    const down = await heads(nodes.alice);
    const duringOutage = recorded.events.slice(eventsBefore).filter((e) => ['ProofSubmitted', 'Revealed', 'Committed'].includes(e.method));
    t.diagnostic(`after a minute without Dave: best #${down.best}, finalized #${down.finalized}; ${duringOutage.length} proofs, commits and reveals meanwhile`);
    assert.ok(duringOutage.length > 0, 'the job went on while Dave was down');
    const daveAgain = await start('dave');

    // The job completes: every unit proven by Eve, attested by both verifiers, paid once;
    // nobody slashed, nothing missed.
    await waitFor('every unit to be finalized', () => recorded.of('tasks', 'UnitFinalized', job).length === units,
      { timeoutMs: 900_000, intervalMs: 3000 }).catch(workers.withLogs);
    for (let unit = 0; unit < units; unit++) {
      const concluded = recorded.of('verification', 'RoundConcluded', job, unit);
      assert.deepEqual(concluded.map((e) => [e.data.matched, e.data.mismatched, e.data.missed]), [[2, 0, 0]], `unit ${unit}'s proof verified`);
      const finalized = recorded.of('tasks', 'UnitFinalized', job, unit);
      assert.equal(finalized.length, 1);
      assert.equal(finalized[0].data.solver, keyring.addFromUri('//Eve').address);
    }
    const failures = recorded.events.filter((e) => e.method === 'Slashed' || ['RevealMissed', 'SecretRevealMissed', 'UnitTimedOut'].includes(e.method));
    assert.deepEqual(failures, []);
    const back = await heads(daveAgain);
    t.diagnostic(`the job's ${units} units finalized; Dave back at best #${back.best}, finalized #${back.finalized}`);
  } finally {
    recorded?.stop();
    workers.stopAll();
    await api.disconnect();
  }
  await stopAll();
});

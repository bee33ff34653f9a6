// Local testnets over real libp2p on loopback, started from a raw chain spec with a boot
// node, the way operators start a network: three validators (`--chain local`) and four
// (`--chain local4`).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiPromise, WsProvider } from '@polkadot/api';
import { freePort, nodeBinary, startNode, waitFor } from './lib/node.mjs';

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

test('four validators keep finalising with any one of them stopped', async (t) => {
  const names = ['alice', 'bob', 'charlie', 'dave'];
  const { nodes, stop, stopAll, started } = await startNetwork('local4', 'touchstone_local4', names);
  const healthy = await heads(nodes.alice);
  t.diagnostic(`all four up: best #${healthy.best}, finalized #${healthy.finalized}, ${seconds(started)} s after start`);

  // The verification pallet's beacon names each block's author, a BABE authority of the
  // epoch, so a draw's seed can wait for a second author: over the last blocks of four
  // validators, several authors appear (one making sixteen in a row: about 4⁻¹⁵).
  const api = await ApiPromise.create({ provider: new WsProvider(nodes.alice.wsUrl), noInitWarn: true });
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
  } finally {
    await api.disconnect();
  }

  // Three of four voters are more than two thirds: finality goes on without Dave.
  await stop('dave', nodes.dave);
  const stopped = await heads(nodes.alice);
  const stoppedAt = Date.now();
  const during = await waitFor('finality to advance three blocks without Dave', async () => {
    const now = await heads(nodes.alice);
    return now.finalized >= stopped.finalized + 3 && now.finalized > stopped.best ? now : null;
  }, { timeoutMs: 120_000 });
  const outage = (Date.now() - stoppedAt) / 1000;
  t.diagnostic(`Dave down: best #${stopped.best} -> #${during.best}, finalized #${stopped.finalized} -> #${during.finalized} in ${outage.toFixed(0)} s (${(outage / (during.best - stopped.best)).toFixed(1)} s a block), finality lag ${during.best - during.finalized} blocks`);
  await stopAll();
});

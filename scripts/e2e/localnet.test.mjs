// The three-validator local testnet over real libp2p on loopback, started from a raw chain
// spec with a boot node, the way operators start a network.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

test('three validators finalise; with one stopped, blocks go on and finality resumes on its return', async (t) => {
  const binary = nodeBinary();
  // Alice's fixed node key makes her peer id, and so the boot node address, known ahead.
  const aliceKey = join(workDir, 'alice.key');
  execFileSync(binary, ['key', 'generate-node-key', '--file', aliceKey], { stdio: 'pipe' });
  const aliceId = execFileSync(binary, ['key', 'inspect-node-key', '--file', aliceKey]).toString().trim();
  const aliceP2p = await freePort();

  // `build-spec --raw` with a node key adds that node as the boot node.
  const raw = JSON.parse(
    execFileSync(binary, ['build-spec', '--chain', 'local', '--raw', '--node-key-file', aliceKey], {
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    }).toString(),
  );
  assert.equal(raw.id, 'touchstone_local');
  assert.ok(raw.genesis.raw, 'the spec is raw');
  assert.equal(raw.bootNodes.length, 1);
  assert.ok(raw.bootNodes[0].endsWith(`/p2p/${aliceId}`), `boot node ${raw.bootNodes[0]} is Alice`);
  // Point the boot node at the port Alice will listen on in this run.
  raw.bootNodes = [`/ip4/127.0.0.1/tcp/${aliceP2p}/p2p/${aliceId}`];
  const specPath = join(workDir, 'local-raw.json');
  writeFileSync(specPath, JSON.stringify(raw));

  const common = ['--chain', specPath, '--tmp', '--allow-private-ip'];
  const startValidator = async (name, extra = []) => {
    const node = await startNode([...common, `--${name}`, ...extra], { name });
    running.set(name, node);
    return node;
  };
  const alice = await startValidator('alice', ['--node-key-file', aliceKey, '--listen-addr', `/ip4/127.0.0.1/tcp/${aliceP2p}`]);
  // Validators refuse to invent a network key; these two may, for the test.
  const ephemeralKey = ['--unsafe-force-node-key-generation'];
  const bob = await startValidator('bob', ephemeralKey);
  let charlie = await startValidator('charlie', ephemeralKey);

  const started = Date.now();
  await waitFor('three peers and finality', async () => {
    const health = await alice.rpc('system_health');
    const { finalized } = await heads(bob);
    return health.peers >= 2 && finalized >= 3;
  }, { timeoutMs: 240_000 });

  const healthy = await heads(alice);
  t.diagnostic(`all three up: best #${healthy.best}, finalized #${healthy.finalized}, ${((Date.now() - started) / 1000).toFixed(0)} s after start`);

  // Stop Charlie. BABE's remaining validators keep producing blocks. GRANDPA needs more
  // than two thirds of the voters, which for three equal voters means all three: no
  // BFT finality gadget can finalise with one of three down, so finality waits.
  await charlie.stop();
  running.delete('charlie');
  const stopped = await heads(alice);
  const stoppedAt = Date.now();
  const during = await waitFor('three more blocks without Charlie', async () => {
    const now = await heads(alice);
    return now.best >= stopped.best + 3 ? now : null;
  }, { timeoutMs: 120_000 });
  assert.ok(during.best - during.finalized >= 3, `blocks kept coming past the finalized head: ${JSON.stringify(during)}`);
  const outage = (Date.now() - stoppedAt) / 1000;
  t.diagnostic(`Charlie down: ${during.best - stopped.best} blocks in ${outage.toFixed(0)} s (${(outage / (during.best - stopped.best)).toFixed(1)} s a block), finalized stuck at #${during.finalized}`);
  const restartedAt = Date.now();

  // Charlie comes back (fresh database): finality catches up past everything produced meanwhile.
  charlie = await startValidator('charlie', ephemeralKey);
  const resumed = await waitFor('finality past the blocks made without Charlie', async () => {
    const now = await heads(alice);
    return now.finalized >= during.best ? now : null;
  }, { timeoutMs: 240_000 });
  assert.ok(resumed.finalized >= during.best);
  t.diagnostic(`Charlie back: finalized #${resumed.finalized} (best #${resumed.best}) ${((Date.now() - restartedAt) / 1000).toFixed(0)} s after his restart`);
});

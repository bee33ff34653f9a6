// A challenger's path with no full node of its own: smoldot, the light client, syncs from
// the chain's sync spec over libp2p, follows finalized blocks, reads the protocol's state,
// and submits a dispute call that fails with a named error decoded from the metadata it
// fetched itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ApiPromise, Keyring, ScProvider } from '@polkadot/api';
import { start } from 'smoldot';
import { startNode, syncSpec, waitFor } from './lib/node.mjs';

let node;
let light;
let smoldot;

/**
 * The `Sc` interface polkadot.js's `ScProvider` expects, over smoldot started with TCP
 * allowed. (`@substrate/connect` starts smoldot for browsers, WebSocket only; a desktop
 * or server light client dials the validators' TCP addresses.)
 */
const smoldotSc = {
  WellKnownChain: {},
  createScClient() {
    smoldot = start({ maxLogLevel: 1 });
    return {
      async addChain(chainSpec, onResponse) {
        const chain = await smoldot.addChain({ chainSpec });
        let alive = true;
        (async () => {
          while (alive) {
            try {
              onResponse(await chain.nextJsonRpcResponse());
            } catch {
              break;
            }
          }
        })();
        return {
          sendJsonRpc: (request) => chain.sendJsonRpc(request),
          remove() {
            alive = false;
            chain.remove();
          },
        };
      },
      async addWellKnownChain() {
        throw new Error('no well-known chains: pass a chain spec');
      },
    };
  },
};

before(async () => {
  node = await startNode(['--dev', '--tmp'], { name: 'dev' });
  // A finalized block beyond genesis, for the sync spec's checkpoint.
  await waitFor('a finalized block', async () => {
    const hash = await node.rpc('chain_getFinalizedHead');
    const header = await node.rpc('chain_getHeader', [hash]);
    return parseInt(header.number, 16) >= 2;
  });
  // What a light client starts from: the node's sync spec, with the node as its boot node.
  const spec = await syncSpec(node);
  const provider = new ScProvider(smoldotSc, JSON.stringify(spec));
  await provider.connect();
  light = await ApiPromise.create({ provider, noInitWarn: true });
});

after(async () => {
  await light?.disconnect();
  smoldot?.terminate();
  await node?.stop();
});

test('the light client follows finalized blocks and reads the protocol state', async () => {
  const finalized = await new Promise((resolve, reject) => {
    let unsubscribe;
    light.rpc.chain
      .subscribeFinalizedHeads((header) => {
        if (header.number.toNumber() >= 3) {
          unsubscribe?.();
          resolve(header.number.toNumber());
        }
      })
      .then((u) => { unsubscribe = u; }, reject);
  });
  assert.ok(finalized >= 3);
  // Storage proofs from the full node, checked by the light client against finalized state.
  assert.equal((await light.query.disputes.nextDisputeId()).toNumber(), 0);
  assert.equal((await light.query.tasks.nextJobId()).toNumber(), 0);
  assert.ok(light.tx.disputes.challenge, 'the disputes calls come from the metadata');
  assert.equal(light.consts.disputes.maxDisputesPerUnit.toNumber(), 8);
});

test('a challenge sent through the light client reaches the chain and its error decodes', async () => {
  const bob = new Keyring({ type: 'sr25519' }).addFromUri('//Bob');
  const outcome = await new Promise((resolve, reject) => {
    let unsubscribe;
    light.tx.disputes
      .challenge(0, 0, '0x' + '11'.repeat(32))
      .signAndSend(bob, (result) => {
        if (result.status.isInBlock) {
          unsubscribe?.();
          resolve(result);
        } else if (result.isError) {
          unsubscribe?.();
          reject(new Error(`transaction failed: ${result.status.type}`));
        }
      })
      .then((u) => { unsubscribe = u; }, reject);
  });
  assert.ok(outcome.dispatchError?.isModule, 'the challenge failed in the runtime');
  const { section, name } = light.registry.findMetaError(outcome.dispatchError.asModule);
  assert.equal(`${section}.${name}`, 'disputes.NotDisputable');
  assert.ok(outcome.events.some(({ event }) => event.section === 'system' && event.method === 'ExtrinsicFailed'));
});

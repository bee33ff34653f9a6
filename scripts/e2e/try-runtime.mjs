// Runs the runtime's try-runtime checks over a live dev chain's real storage.
//
//   node try-runtime.mjs <runtime.wasm>
//
// <runtime.wasm> is the runtime built with its `try-runtime` feature (scripts/try-runtime.sh
// builds it). The script starts a dev chain whose genesis code is that runtime, puts the
// protocol through its paces with polkadot.js (a solver registers; jobs are submitted,
// offered, declined, claimed, checkpointed, proven, finalized and cancelled), then asks
// the node, through the standard `TryRuntime` runtime API, to re-execute every block with
// its state-root and signature checks and every pallet's `try_state` invariants, and to
// run the upgrade hooks with all checks. A failed invariant fails the script.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiPromise, WsProvider, Keyring } from '@polkadot/api';
import { u8aConcat, u8aToHex } from '@polkadot/util';
import { nodeBinary, startNode, waitFor } from './lib/node.mjs';

const UNIT = 10n ** 12n;
const fixed = (value) => BigInt(Math.round(value * 1e9));
// `TryStateSelect::All` and `UpgradeCheckSelect::All` in SCALE.
const ALL = new Uint8Array([1]);
const YES = new Uint8Array([1]);

const wasmPath = process.argv[2];
if (!wasmPath) {
  console.error('usage: node try-runtime.mjs <runtime.wasm built with --features try-runtime>');
  process.exit(2);
}

/** A raw dev chain spec whose genesis code is the try-runtime build. */
function chainSpec() {
  const built = spawnSync(nodeBinary(), ['build-spec', '--chain', 'dev', '--raw', '--disable-default-bootnode'], {
    maxBuffer: 256 * 1024 * 1024,
  });
  if (built.status !== 0) throw new Error(`build-spec failed: ${built.stderr}`);
  const spec = JSON.parse(built.stdout.toString());
  spec.genesis.raw.top['0x3a636f6465'] = u8aToHex(readFileSync(wasmPath));
  const path = join(mkdtempSync(join(tmpdir(), 'touchstone-try-runtime-')), 'spec.json');
  writeFileSync(path, JSON.stringify(spec));
  return path;
}

function send(api, tx, signer) {
  return new Promise((resolve, reject) => {
    let unsubscribe;
    tx.signAndSend(signer, (result) => {
      if (result.status.isInBlock) {
        unsubscribe?.();
        if (result.dispatchError) {
          const error = result.dispatchError.isModule
            ? api.registry.findMetaError(result.dispatchError.asModule)
            : { section: 'dispatch', name: result.dispatchError.toString() };
          reject(new Error(`${tx.method.section}.${tx.method.method} failed: ${error.section}.${error.name}`));
        } else {
          resolve(result);
        }
      } else if (result.isError) {
        unsubscribe?.();
        reject(new Error(`transaction failed: ${result.status.type}`));
      }
    }).then((u) => { unsubscribe = u; }, reject);
  });
}

function jobSpec(overrides = {}) {
  return {
    model: { Mlp: { inputs: 64, hidden: [32], classes: 10, activation: 'Relu' } },
    initialWeights: null,
    dataset: {
      content: { hash: '0x' + 'ab'.repeat(32), location: 'file:///var/lib/touchstone/datasets/digits.csv.gz' },
      samples: 1437,
      root: '0x9c2f80c80813dd840e0045b0046cb69dbdea8d7fcadf1ee1654619379805f30a',
    },
    hyper: {
      steps: 100, batchSize: 32, learningRate: fixed(0.1), optimizer: { Sgd: { momentum: fixed(0.9) } },
      gradClipNorm: null, seed: 42, checkpointInterval: 20,
    },
    decomposition: { StepRanges: { stepsPerUnit: 50 } },
    verification: 'Exact',
    requirements: { device: 'Gpu', minMemoryMib: 8192, minThroughputGflops: 1, minBandwidthMbps: 0, region: null },
    pricePerUnit: 2n * UNIT,
    budget: 4n * UNIT,
    unitTimeout: 100,
    poolTimeout: 600,
    ...overrides,
  };
}

const node = await startNode(
  ['--chain', chainSpec(), '--alice', '--validator', '--force-authoring', '--tmp', '--node-key', '0'.repeat(63) + '1'],
  { name: 'try-runtime' },
);
const api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
try {
  const keyring = new Keyring({ type: 'sr25519' });
  const [alice, bob] = ['//Alice', '//Bob'].map((uri) => keyring.addFromUri(uri));
  const profile = { device: 'Gpu', model: 'NVIDIA RTX 4090', memoryMib: 24576, throughputGflops: 82000, bandwidthMbps: 1000, region: 'eu' };

  console.log('seeding state: a solver, two jobs, a unit through its whole path');
  await send(api, api.tx.staking.register(profile, [['Solver', 150n * UNIT]], UNIT), bob);
  const first = (await api.query.tasks.nextJobId()).toNumber();
  await send(api, api.tx.tasks.submitJob(jobSpec()), alice);
  await waitFor('unit 0 offered to Bob', async () => (await api.query.tasks.units(first, 0)).unwrap().state.isAssigned);
  await send(api, api.tx.tasks.declineUnit(first, 0), bob);
  await send(api, api.tx.tasks.claimUnit(first, 0), bob);
  await send(api, api.tx.tasks.commitCheckpoint(first, 0, { step: 20, hash: '0x' + '11'.repeat(32) }), bob);
  await send(api, api.tx.tasks.commitCheckpoint(first, 0, { step: 40, hash: '0x' + '22'.repeat(32) }), bob);
  const proof = {
    traceRoot: '0x' + '33'.repeat(32), steps: 50,
    metrics: { loss: fixed(0.5), accuracy: 900_000_000 },
  };
  const proven = await send(api, api.tx.tasks.submitProof(first, 0, proof), bob);
  const second = (await api.query.tasks.nextJobId()).toNumber();
  await send(api, api.tx.tasks.submitJob(jobSpec({ decomposition: { DataShards: { shards: 2, aggregation: 'Uniform' } } })), alice);
  await send(api, api.tx.tasks.cancelJob(second), alice);
  const provenAt = (await api.rpc.chain.getHeader(proven.status.asInBlock)).number.toNumber();
  const window = api.consts.tasks.challengeWindow.toNumber();
  await waitFor('the challenge window to pass', async () =>
    (await api.rpc.chain.getHeader()).number.toNumber() >= provenAt + window);
  await send(api, api.tx.tasks.finalizeUnit(first, 0), alice);
  await waitFor('two more blocks', async () =>
    (await api.rpc.chain.getHeader()).number.toNumber() >= provenAt + window + 3);

  const head = await api.rpc.chain.getHeader();
  console.log(`re-executing blocks #1..#${head.number.toNumber()} with every try_state check`);
  let hash = head.hash;
  for (;;) {
    const { block } = await api.rpc.chain.getBlock(hash);
    const number = block.header.number.toNumber();
    if (number === 0) break;
    const parent = block.header.parentHash;
    // execute_block(block, state_root_check, signature_check, TryStateSelect::All), on the
    // state the block was built on.
    const weight = await api.rpc.state.call('TryRuntime_execute_block', u8aToHex(u8aConcat(block.toU8a(), YES, YES, ALL)), parent);
    console.log(`  #${number}: ok (${block.extrinsics.length} extrinsics, weight ${weight.toHex()})`);
    hash = parent;
  }
  console.log('running the upgrade hooks with all checks on the head state');
  await api.rpc.state.call('TryRuntime_on_runtime_upgrade', u8aToHex(ALL), head.hash);
  console.log('try-runtime: every block re-executed and every invariant held');
} finally {
  await api.disconnect();
  await node.stop();
}

// A solver behind NAT, end to end, in network namespaces the test makes itself. The dev
// node, a relay (`touchstone-worker relay`), the submitter and a verifier run on this host
// at 10.78.0.1. The solver runs in a "home" namespace (10.78.1.2) behind a "router"
// namespace that masquerades it behind its own address (10.78.0.2), as a home router does:
// it reaches the node's RPC and the submitter through the NAT, and nothing on this host can
// dial it (this host routes the home network to a blackhole, so nothing leaks to another
// network either). The solver is told the relay (`--p2p-relay`) and advertises its address
// through it on-chain. The submitter runs with no `--peer`: the solver finds it from the
// endpoint it advertises on-chain. The verifier the chain draws fetches the solver's trace
// manifest through the relay (or a hole DCUtR punches), and the proof is verified. AutoNAT
// tells the solver it is behind NAT.
//
// It needs root, `ip` (iproute2) and `iptables`, which `scripts/setup.sh` installs; CI runs
// as root. Without them it says plainly that it skipped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiPromise, Keyring, WsProvider } from '@polkadot/api';
import { freePort, setForcedErrorRate, startNode, waitFor } from './lib/node.mjs';
import { recordEvents, Workers } from './lib/workers.mjs';

const HOST = '10.78.0.1';
const HOME = '10.78.1.2';
const id = process.pid % 100_000;
const router = `tsnr${id}`;
const home = `tsnh${id}`;

/** Why this test cannot run here, or null. */
function skipReason() {
  if (process.getuid?.() !== 0) return 'not root: network namespaces need root';
  for (const [tool, flag] of [['ip', '-V'], ['iptables', '--version']]) {
    try {
      execFileSync(tool, [flag], { stdio: 'ignore' });
    } catch {
      return `\`${tool}\` is not installed (scripts/setup.sh installs it)`;
    }
  }
  return null;
}

const sh = (command) => execFileSync(command.split(' ')[0], command.split(' ').slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });

/**
 * A veth pair between two places (a namespace, or `null` for this host): each end, named
 * and addressed as given (a /24), is moved to its place and brought up.
 */
function cable(...ends) {
  sh(`ip link add ${ends[0].name} type veth peer name ${ends[1].name}`);
  for (const { name, place, address } of ends) {
    const where = place ? `-n ${place} ` : '';
    if (place) sh(`ip link set ${name} netns ${place}`);
    sh(`ip ${where}addr add ${address}/24 dev ${name}`);
    sh(`ip ${where}link set ${name} up`);
  }
}

/** This host - router - home, the router masquerading home; removed by `unplug`. */
function plug() {
  for (const namespace of [router, home]) {
    sh(`ip netns add ${namespace}`);
    sh(`ip -n ${namespace} link set lo up`);
  }
  // This host's side: 10.78.0.1 here, 10.78.0.2 the router's public address.
  cable({ name: `tsnx${id}`, place: null, address: HOST }, { name: `tsnr${id}`, place: router, address: '10.78.0.2' });
  // Home: 10.78.1.2, its default route the router's 10.78.1.1.
  cable({ name: `tsnh${id}`, place: home, address: HOME }, { name: `tsnq${id}`, place: router, address: '10.78.1.1' });
  sh(`ip -n ${home} route add default via 10.78.1.1`);
  sh(`ip netns exec ${router} sysctl -qw net.ipv4.ip_forward=1`);
  sh(`ip netns exec ${router} iptables -t nat -A POSTROUTING -o tsnr${id} -j MASQUERADE`);
  // Dials to the home network from here (its addresses, learnt from the solver's
  // identify) go nowhere, rather than out of this host's default route.
  sh('ip route add blackhole 10.78.1.0/24');
}

/**
 * Removes the network `plug` made, and whatever a run killed before its `after` left (a
 * leftover link on 10.78.0.1 would take this run's traffic to namespaces nothing serves):
 * every `tsnx…` link and `tsnr…`/`tsnh…` namespace, which only this test makes.
 */
function unplug() {
  const names = (command, pattern) => [...execFileSync(command.split(' ')[0], command.split(' ').slice(1)).toString().matchAll(pattern)].map((m) => m[1]);
  const links = names('ip -o link show', /^\d+: (tsnx\d+)[@:]/gm);
  const namespaces = names('ip netns list', /^(tsn[rh]\d+)\b/gm);
  const commands = ['ip route del blackhole 10.78.1.0/24', ...links.map((link) => `ip link del ${link}`), ...namespaces.map((ns) => `ip netns del ${ns}`)];
  for (const command of commands) {
    try {
      sh(command);
    } catch {
      // Not made: plug failed before it.
    }
  }
}

const skip = skipReason();
let node;
let api;
let workers;
let recorded;
let dataDir;

before(async () => {
  if (skip) return;
  unplug();
  plug();
  // The node's RPC on every interface, so the solver reaches it through the NAT.
  node = await startNode(['--dev', '--tmp', '--rpc-external'], { name: 'nat' });
  api = await ApiPromise.create({ provider: new WsProvider(node.wsUrl), noInitWarn: true });
  recorded = await recordEvents(api);
  dataDir = mkdtempSync(join(tmpdir(), 'touchstone-nat-'));
  workers = new Workers(node.wsUrl, dataDir);
  await setForcedErrorRate(api, new Keyring({ type: 'sr25519' }).addFromUri('//Alice'), 1);
});

after(async () => {
  recorded?.stop();
  workers?.stopAll();
  await api?.disconnect();
  await node?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (!skip) unplug();
});

test('a solver behind NAT trains a unit: its dataset comes through the NAT with no --peer, and the verifier fetches from it through a relay', { skip: skip ?? false, timeout: 600_000 }, async (t) => {
  const keyring = new Keyring({ type: 'sr25519' });
  const withLogs = (error) => workers.withLogs(error);
  const relayPort = await freePort();
  const relay = workers.start('relay', ['relay', '--p2p-listen', `/ip4/${HOST}/tcp/${relayPort}`, '--no-mdns']);
  const relayAddress = (await waitFor('the relay to listen', () => new RegExp(`relay listening at (/ip4/${HOST}/tcp/${relayPort}/p2p/\\w+)`).exec(relay.log), { timeoutMs: 60_000 })
    .catch(withLogs))[1];

  // The solver at home: the node and the relay only through the NAT.
  workers.start('solver', ['solve', '--key', '//Bob', '--p2p-listen', `/ip4/${HOME}/tcp/0`, '--p2p-relay', relayAddress, '--no-mdns'],
    { netns: home, wsUrl: `ws://${HOST}:${node.rpcPort}` });
  workers.start('verifier', ['verify', '--key', '//Dave', '--p2p-listen', `/ip4/${HOST}/tcp/0`, '--no-mdns']);
  const bob = keyring.addFromUri('//Bob');
  const dave = keyring.addFromUri('//Dave');
  await waitFor('the solver and the verifier to register', async () =>
    (await api.query.staking.nodes(bob.address)).isSome && (await api.query.staking.nodes(dave.address)).isSome, { timeoutMs: 180_000 })
    .catch(withLogs);
  await waitFor('the solver to advertise its endpoint', async () => (await api.query.staking.endpoints(bob.address)).isSome, { timeoutMs: 60_000 })
    .catch(withLogs);
  const endpoint = new TextDecoder().decode((await api.query.staking.endpoints(bob.address)).unwrap().toU8a(true));
  assert.match(endpoint, new RegExp(`^${relayAddress}/p2p-circuit/p2p/12D3Koo\\w+$`), 'the solver advertises its address through the relay');

  // The submitter here, with no --peer: the solver dials the endpoint it advertises.
  const job = join(dataDir, 'small-job.toml');
  writeFileSync(job, readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'small-job.toml'), 'utf8'));
  const submitter = workers.start('submitter', ['submit', '--key', '//Alice', '--job', job, '--wait', '--p2p-listen', `/ip4/${HOST}/tcp/0`, '--no-mdns']);
  const jobId = Number((await waitFor('the job to be submitted', () => /job (\d+) submitted/.exec(submitter.log), { timeoutMs: 120_000 })
    .catch(withLogs))[1]);

  await waitFor("the unit's round to conclude", () => recorded.of('verification', 'RoundConcluded', jobId, 0).length > 0, { timeoutMs: 480_000 })
    .catch(withLogs);
  const [concluded] = recorded.of('verification', 'RoundConcluded', jobId, 0);
  assert.deepEqual([concluded.data.matched, concluded.data.mismatched, concluded.data.missed], [1, 0, 0], JSON.stringify(concluded.data));
  const solverLog = workers.log('solver');
  assert.match(solverLog, new RegExp(`fetching the job's dataset [0-9a-f]{64} from peers`), 'the solver fetched the dataset');
  assert.match(solverLog, /the relay accepted a reservation/);
  // The verifier reached the solver through the relay: the circuit reached the solver,
  // and hole punching either replaced it or left the relay carrying the bytes.
  assert.match(solverLog, /a peer connected through the relay/);
  assert.match(workers.log('relay'), /relaying a circuit/);
  assert.match(workers.log('verifier'), new RegExp(`verification: revealed job=${jobId} unit=0 verdict="?match`));
  await waitFor('AutoNAT to find the solver behind NAT', () => /peers cannot dial this node directly \(AutoNAT\)/.test(workers.log('solver')), { timeoutMs: 120_000 })
    .catch(withLogs);
  const punched = /hole punched/.test(solverLog) || /hole punched/.test(workers.log('verifier'));
  t.diagnostic(`round concluded at block ${concluded.block}; ${punched ? 'a hole was punched' : 'the relay carried the traffic'}`);
});

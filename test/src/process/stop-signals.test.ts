/**
 * No stop loses usage. A node told to stop right after answering metered requests, by any signal an
 * operator, a terminal, npm or systemd sends — SIGINT or SIGTERM to its whole process group, once or
 * twice (a terminal's Ctrl-C reaches every process of the group, and npm relays it to its child a
 * second time), or SIGTERM to the primary alone — exits 0, logs no warning, error or stack trace,
 * removes its pid file, and a restart on the same data finds the event of every answered request. On
 * one process and on a node of two workers, with LevelDB (every delivery) and PostgreSQL (the repeated
 * ones); and under `npm start`, with Ctrl-C pressed twice as a terminal sends it. A SIGHUP to the
 * whole group reloads and stops nothing; a SIGTERM to a worker alone retires it gracefully (its events
 * kept) and the node serves on with a replacement.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { PID_FILE_NAME } from '../../../src/process/pid-file.ts';
import { request, spawnGateway, startUpstream, tempDir, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { waitFor } from '../../helpers/support.ts';

/** Metered requests answered before each stop: the events of the last second are still in memory then. */
const REQUESTS = 300;
const CONCURRENCY = 10;
const METER = 'api_requests';
/** Whom a request is metered for: its `x-customer` header. */
const CUSTOMER_HEADER = { look_up_value_in: 'header', field: 'x-customer' };

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
  // The upstream must not keep the file's process alive once the tests are done.
  upstream.server.unref();
});

/**
 * `/api` meters each request under the caller's `x-customer` header into the node's own metering store
 * (default queue: batches handed to the writer a second after their first event); the meter counts them,
 * read on the admin API (which needs a route running the metering plugin).
 */
function meteredConfig(gateway: Record<string, unknown>): Record<string, any> {
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'warn', access_log: false, ...gateway },
    services: [
      {
        name: 'api',
        url: upstream.url,
        routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'metering-and-billing', config: { subject: CUSTOMER_HEADER } }] }],
      },
    ],
    routes: [{ name: 'metering', paths: ['/metering'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
    meters: [{ key: METER, name: 'API requests', event_type: 'kong.api_request', aggregation: 'count' }],
  };
}

/** Sends `count` metered requests, `CONCURRENCY` at a time, and insists that each is answered 200. */
async function sendMetered(proxy: string, count: number): Promise<void> {
  let left = count;
  const client = async () => {
    // Taken before the request: the other clients must not send it too.
    while (left-- > 0) {
      const res = await request(`${proxy}/api/things`, { headers: { 'x-customer': 'acme' } });
      assert.equal(res.status, 200, res.text);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, client));
}

/** The requests the meter has counted, as the node's admin API reports them. */
async function meteredCount(admin: string): Promise<number> {
  const res = await request(`${admin}/metering/meters/${METER}/query`, { method: 'POST', body: {} });
  assert.equal(res.status, 200, res.text);
  return Number(res.json().data[0]?.value ?? 0);
}

/** A signal to every process of the node at once: what a terminal's Ctrl-C and systemd's KillMode=control-group do. */
function signalGroup(gw: SpawnedGateway, signal: NodeJS.Signals): void {
  process.kill(-gw.child.pid!, signal);
}

/** Waits until the primary (or the only process) has taken the stop in hand: a signal after this one arrives mid-stop. */
async function shuttingDown(output: () => string): Promise<void> {
  await waitFor(() => output().includes('"msg":"shutting down"'), 'the node to start shutting down', 10_000);
}

interface Delivery {
  name: string;
  deliver(gw: SpawnedGateway): Promise<void>;
}

/** Twice: the second while the first stop is under way, as npm's relay of a Ctrl-C or an impatient operator sends it. */
const twice = (signal: NodeJS.Signals): Delivery['deliver'] => async (gw) => {
  signalGroup(gw, signal);
  await shuttingDown(gw.output);
  gw.kill(signal);
};

/** Those that signal the process group twice: on PostgreSQL, only these (the signals take the same paths on either store). */
const REPEATED: Delivery[] = [
  { name: "SIGINT to the process group, then again (a terminal's Ctrl-C, then npm's relay of it)", deliver: twice('SIGINT') },
  { name: 'SIGTERM to the process group, then again', deliver: twice('SIGTERM') },
];
const DELIVERIES: Delivery[] = [
  ...REPEATED,
  { name: "SIGTERM to the process group (systemd's KillMode=control-group)", deliver: async (gw) => signalGroup(gw, 'SIGTERM') },
  { name: 'SIGTERM to the primary alone', deliver: async (gw) => gw.kill('SIGTERM') },
];

/** What a clean stop leaves: exit code 0, no warning, error or stack trace in the output, no pid file. */
function assertCleanStop(code: number | null, output: string, dataDir: string, what: string): void {
  assert.equal(code, 0, `${what}: exit code 0\n${output}`);
  assert.doesNotMatch(output, /"level":"(?:warn|error|fatal)"|Error|\n\s+at /, `${what}: nothing went wrong on the way\n${output}`);
  assert.equal(existsSync(join(dataDir, PID_FILE_NAME)), false, `${what}: the pid file is removed`);
}

/**
 * For each delivery in turn, on one data directory: requests, the signal, a clean exit, and a restart
 * that finds every answered request counted (the restarted node is the next delivery's).
 */
function deliveriesKeepUsage(deliveries: Delivery[], gateway: () => Record<string, unknown>): void {
  let config: Record<string, any>;
  let dataDir: string;
  let gw: SpawnedGateway | undefined;
  before(() => {
    config = meteredConfig(gateway());
    dataDir = tempDir();
  });
  // A failed test leaves its node running: it goes before the database it may use.
  after(() => gw?.kill('SIGKILL'));
  for (const delivery of deliveries) {
    test(delivery.name, async () => {
      gw ??= await spawnGateway(config, { dataDir });
      const counted = await meteredCount(gw.admin);
      await sendMetered(gw.http, REQUESTS);
      const stopping = gw;
      gw = undefined;
      await delivery.deliver(stopping);
      assertCleanStop(await stopping.exited, stopping.output(), dataDir, delivery.name);
      gw = await spawnGateway(config, { dataDir });
      assert.equal(await meteredCount(gw.admin), counted + REQUESTS, `${delivery.name}: every answered request's event is stored`);
    });
  }
  test('the last restart stops cleanly too', async () => {
    if (!gw) return;
    gw.kill('SIGTERM');
    assertCleanStop(await gw.exited, gw.output(), dataDir, 'SIGTERM');
  });
}

describe('one process, LevelDB', () => deliveriesKeepUsage(DELIVERIES, () => ({ worker_processes: 1 })));
describe('two workers, LevelDB', () => deliveriesKeepUsage(DELIVERIES, () => ({ worker_processes: 2 })));

const skip = postgresSkipReason();
describe('PostgreSQL', { skip }, () => {
  const suite = postgresForSuite();
  describe('one process', () => deliveriesKeepUsage(REPEATED, () => ({ worker_processes: 1, ...suite.pg.settings({ pg_schema: suite.schema('one') }) })));
  describe('two workers', () => deliveriesKeepUsage(REPEATED, () => ({ worker_processes: 2, ...suite.pg.settings({ pg_schema: suite.schema('two') }) })));
});

test('under npm start, Ctrl-C twice (each one reaching the primary from the terminal and from npm): npm exits 0, every event stored', async () => {
  const dataDir = tempDir();
  const config = meteredConfig({ worker_processes: 2, data_dir: dataDir });
  const configFile = join(tempDir(), 'gateway.yaml');
  writeFileSync(configFile, stringify({ _format_version: '3.0', ...config }));
  // Its own process group, as a terminal's foreground job: npm, the primary and its workers.
  const repository = resolve(import.meta.dirname, '../../..');
  const npm = spawn('npm', ['start', '--', '--config', configFile], { cwd: repository, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  npm.stdout.on('data', (chunk) => (output += chunk));
  npm.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => npm.once('exit', (code) => done(code)));
  try {
    const listening = () => [...output.matchAll(/(proxy|admin) listening on (\S+)/g)].map((m) => m[2]);
    await waitFor(() => listening().length === 2 || npm.exitCode !== null, 'the gateway under npm to listen', 60_000);
    assert.equal(listening().length, 2, `the gateway under npm listens\n${output}`);
    const [proxy] = listening();
    await sendMetered(proxy, REQUESTS);
    process.kill(-npm.pid!, 'SIGINT');
    await shuttingDown(() => output);
    process.kill(-npm.pid!, 'SIGINT');
    assertCleanStop(await exited, output, dataDir, 'Ctrl-C twice under npm start');
  } finally {
    if (npm.exitCode === null && npm.signalCode === null) process.kill(-npm.pid!, 'SIGKILL');
  }
  const again = await spawnGateway(config, { dataDir });
  try {
    assert.equal(await meteredCount(again.admin), REQUESTS, "every answered request's event is stored");
  } finally {
    again.kill('SIGTERM');
    await again.exited;
  }
});

test('SIGHUP to the process group reloads, stops nothing; SIGTERM to one worker alone replaces it gracefully, its events kept', async () => {
  // The primary's reload outcome is an info line.
  const config = meteredConfig({ worker_processes: 2, log_level: 'info' });
  const gw = await spawnGateway(config);
  try {
    const workersNow = async (): Promise<number[]> => (await request(`${gw.admin}/`)).json().pids.workers;
    const [retired, kept] = await workersNow();
    await sendMetered(gw.http, REQUESTS);
    signalGroup(gw, 'SIGHUP');
    await waitFor(() => gw.output().includes('configuration reloaded on every worker'), 'the node to reload', 10_000);
    assert.deepEqual(new Set(await workersNow()), new Set([retired, kept]), 'the same workers serve after SIGHUP');
    process.kill(retired, 'SIGTERM');
    let replacement: number | undefined;
    await waitFor(async () => {
      const workers = await workersNow();
      replacement = workers.find((pid) => pid !== kept);
      return workers.length === 2 && replacement !== retired;
    }, 'a replacement for the retired worker', 20_000);
    await sendMetered(gw.http, REQUESTS);
    assert.deepEqual(new Set(await workersNow()), new Set([kept, replacement]), 'the other worker serves on');
    gw.kill('SIGTERM');
    assertCleanStop(await gw.exited, gw.output(), gw.dataDir, 'the node');
  } finally {
    gw.kill('SIGKILL');
  }
  const again = await spawnGateway(config, { dataDir: gw.dataDir });
  try {
    assert.equal(await meteredCount(again.admin), 2 * REQUESTS, "every answered request's event is stored, the retired worker's too");
  } finally {
    again.kill('SIGTERM');
    await again.exited;
  }
});

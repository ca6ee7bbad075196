/**
 * The gateway process and its signals: SIGHUP swaps a valid config atomically (in-flight requests finish
 * on the old one) and ignores an invalid one; SIGTERM/SIGINT stop accepting, drain (bounded), close the
 * store and exit 0; one access-log line per request.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { LevelStore } from '../../src/store/level.ts';
import { request, spawnGateway, startUpstream, type SpawnedGateway, type Upstream } from '../helpers/gateway.ts';
import { isListening, portOf, waitFor } from '../helpers/support.ts';

const LISTENERS = { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'] };

/** An upstream that holds every response until `release()`. */
async function holdingUpstream(): Promise<{ upstream: Upstream; held(): number; release(): void }> {
  const waiting: http.ServerResponse[] = [];
  const upstream = await startUpstream((req, res) => {
    req.resume();
    waiting.push(res);
  });
  return {
    upstream,
    held: () => waiting.length,
    release() {
      for (const res of waiting.splice(0)) res.end('released');
    },
  };
}

/** Ends a gateway a failed test left running (SIGTERM, so it closes its store), and waits for it. */
async function ensureStopped(gw: SpawnedGateway | undefined): Promise<void> {
  if (!gw) return;
  gw.kill('SIGTERM');
  await gw.exited;
}

function rewrite(gw: SpawnedGateway, config: Record<string, any>): void {
  writeFileSync(gw.configFile, stringify({ _format_version: '3.0', ...config, gateway: { ...LISTENERS, data_dir: gw.dataDir, ...config.gateway } }));
}

async function signalAndWait(gw: SpawnedGateway, signal: NodeJS.Signals, text: string): Promise<void> {
  const before = gw.output().split(text).length;
  gw.kill(signal);
  await waitFor(() => gw.output().split(text).length > before, `"${text}" after ${signal}`, 15_000);
}

test('SIGHUP reloads atomically, ignores an invalid file; SIGTERM drains in-flight requests and exits 0', async () => {
  const echo = await startUpstream();
  const hold = await holdingUpstream();
  // One process: its own "configuration reloaded" line is the node's (with workers, the first worker's
  // line comes before the others have reloaded; test/src/cluster/workers.test.ts covers SIGHUP there).
  const first = {
    gateway: { log_level: 'info', worker_processes: 1 },
    services: [
      { name: 'echo', url: echo.url, routes: [{ name: 'ra', paths: ['/a'] }] },
      { name: 'hold', url: hold.upstream.url, routes: [{ name: 'slow-old', paths: ['/slow'] }] },
    ],
  };
  const second = {
    gateway: { log_level: 'info', worker_processes: 1 },
    services: [
      { name: 'echo', url: echo.url, routes: [{ name: 'rb', paths: ['/b'] }] },
      { name: 'hold', url: hold.upstream.url, routes: [{ name: 'slow-new', paths: ['/slow2'] }] },
    ],
  };
  const gw = await spawnGateway({ ...first, gateway: { ...LISTENERS, ...first.gateway } });
  try {
    assert.equal((await request(`${gw.http}/a/1`)).status, 200);

    // A request in flight while the config changes under it.
    const inFlight = request(`${gw.http}/slow/x`);
    await waitFor(() => hold.held() === 1, 'the in-flight request to reach the upstream');
    rewrite(gw, second);
    await signalAndWait(gw, 'SIGHUP', 'configuration reloaded');
    assert.equal((await request(`${gw.http}/b/1`)).status, 200, 'the new route serves');
    assert.equal((await request(`${gw.http}/a/1`)).status, 404, 'the old route is gone');
    assert.equal((await request(`${gw.http}/slow/y`)).status, 404);
    hold.release();
    const finished = await inFlight;
    assert.equal(finished.status, 200, 'the in-flight request finished on the old config');
    assert.equal(finished.text, 'released');

    // An invalid file: logged, ignored, the current config keeps serving.
    writeFileSync(gw.configFile, '_format_version: "3.0"\nservices:\n  - name: broken\n    port: 99999\n');
    await signalAndWait(gw, 'SIGHUP', 'configuration invalid');
    assert.equal((await request(`${gw.http}/b/2`)).status, 200);

    // SIGTERM with a request in flight: no new connections, the request completes, exit 0.
    const draining = request(`${gw.http}/slow2/z`);
    await waitFor(() => hold.held() === 1, 'the second in-flight request to reach the upstream');
    gw.kill('SIGTERM');
    await waitFor(async () => !(await isListening(portOf(gw.http))), 'the proxy port to stop accepting');
    hold.release();
    const drained = await draining;
    assert.equal(drained.status, 200);
    assert.equal(drained.text, 'released');
    assert.equal(await gw.exited, 0);

    const output = gw.output();
    const lines = output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const access = lines.filter((l) => l.type === 'access');
    for (const [path, status] of [['/a/1', 200], ['/a/1', 404], ['/slow/x', 200], ['/b/2', 200], ['/slow2/z', 200]] as const) {
      assert.ok(access.some((l) => l.path === path && l.status === status), `an access-log line for ${path} ${status}\n${output}`);
    }
    assert.equal(access.filter((l) => l.path === '/b/2').length, 1, 'one line per request');
    const slow = access.find((l) => l.path === '/slow/x');
    assert.equal(slow.route, 'slow-old');
    assert.equal(slow.service, 'hold');
    assert.match(slow.request_id, /^[0-9a-f-]{36}$/);
    assert.ok(
      lines.some((l) => typeof l.error === 'string' && l.error.includes(`${gw.configFile}:4:11: services[0].port: value should be between 0 and 65535`)),
      `the invalid reload logged its errors with FILE:LINE:COL\n${output}`,
    );

    // The store was closed: another process can open the data directory now.
    const store = new LevelStore(join(gw.dataDir, 'store'));
    await store.open();
    await store.close();
  } finally {
    hold.release();
    await ensureStopped(gw);
    await echo.close();
    await hold.upstream.close();
  }
});

test('SIGINT on an idle gateway with an open keep-alive connection exits 0', async () => {
  const echo = await startUpstream();
  const gw = await spawnGateway({ gateway: { ...LISTENERS, log_level: 'silent' }, services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/'] }] }] });
  const agent = new http.Agent({ keepAlive: true });
  try {
    await new Promise<void>((resolve, reject) => {
      http.get(`${gw.http}/k`, { agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
    });
    gw.kill('SIGINT');
    assert.equal(await gw.exited, 0);
  } finally {
    agent.destroy();
    await ensureStopped(gw);
    await echo.close();
  }
});

test('SIGTERM waits for in-flight requests only up to shutdown_timeout, then closes them and exits 0', async () => {
  const hold = await holdingUpstream();
  const gw = await spawnGateway({
    gateway: { ...LISTENERS, log_level: 'silent', shutdown_timeout: 300 },
    services: [{ name: 'hold', url: hold.upstream.url, routes: [{ paths: ['/'] }] }],
  });
  try {
    const stuck = request(`${gw.http}/forever`).then(
      (r) => `status ${r.status}`,
      (err: NodeJS.ErrnoException) => `error ${err.code ?? err.message}`,
    );
    await waitFor(() => hold.held() === 1, 'the request to reach the upstream');
    gw.kill('SIGTERM');
    assert.equal(await gw.exited, 0);
    assert.match(await stuck, /^error /, 'the client sees its connection closed, not a made-up answer');
  } finally {
    hold.release();
    await ensureStopped(gw);
    await hold.upstream.close();
  }
});

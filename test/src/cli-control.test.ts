/**
 * Driving a running gateway from the command line, as Kong's `kong stop|reload|health` do: `tollgate
 * status` (and `health`), `reload`, `stop` on a real `tollgate start` child; `check`'s warnings about
 * this machine; the example upstream stopping on SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { request, runTollgate, spawnGateway, startUpstream, tempDir, writeConfig } from '../helpers/gateway.ts';
import { closedPort, isListening, waitFor } from '../helpers/support.ts';

const ROOT = resolve(import.meta.dirname, '../..');

function routes(upstream: string, paths: string[]) {
  return [{ name: 'echo', url: upstream, routes: paths.map((p) => ({ paths: [p] })) }];
}

test('status, reload and stop drive a running gateway through its pid file and admin API', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const gatewaySettings = { proxy_listen: ['127.0.0.1:0'], admin_listen: [`127.0.0.1:${await closedPort()}`], worker_processes: 1 };
  const node = await spawnGateway({ gateway: gatewaySettings, services: routes(upstream.url, ['/a']) });
  t.after(() => node.kill('SIGKILL'));
  const config = ['--config', node.configFile];

  for (const command of ['status', 'health']) {
    const status = await runTollgate([command, ...config]);
    assert.equal(status.code, 0, status.output);
    assert.match(status.output, new RegExp(`^running \\(pid ${node.child.pid}\\)$`, 'm'));
    assert.match(status.output, /^ready: http:\/\/127\.0\.0\.1:\d+\/status\/ready answered 200$/m);
  }

  assert.equal((await request(`${node.http}/b`)).status, 404);
  writeConfig({ gateway: gatewaySettings, services: routes(upstream.url, ['/a', '/b']) }, node.dataDir, node.configFile);
  const reload = await runTollgate(['reload', ...config]);
  assert.equal(reload.code, 0, reload.output);
  assert.match(reload.output, /^reloaded .*gateway\.yaml \(pid \d+, configuration_hash [0-9a-f]{32}\)$/m);
  assert.equal((await request(`${node.http}/b`)).status, 200, 'the route of the reloaded file answers');

  const stop = await runTollgate(['stop', ...config]);
  assert.equal(stop.code, 0, stop.output);
  assert.match(stop.output, new RegExp(`^stopped \\(pid ${node.child.pid}\\)$`, 'm'));
  // stop returns once the process is gone: its exit code is there already.
  assert.notEqual(node.child.exitCode ?? node.child.signalCode, null, 'the gateway is gone when stop returns');
  assert.equal(await node.exited, 0, node.output());
  assert.equal(existsSync(join(node.dataDir, 'tollgate.pid')), false, 'the pid file is removed');

  const after = await runTollgate(['status', ...config]);
  assert.equal(after.code, 1);
  assert.match(after.output, /^tollgate status: not running: no pid file .*tollgate\.pid$/m);
});

test('reload refuses an invalid file with its errors; stop finds the node by --pid-file then', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const node = await spawnGateway({ gateway: { proxy_listen: ['127.0.0.1:0'], worker_processes: 1 }, services: routes(upstream.url, ['/a']) });
  t.after(() => node.kill('SIGKILL'));
  writeFileSync(node.configFile, '_format_version: "3.0"\nservices:\n  - name: echo\n    url: http://127.0.0.1:1\n     routes: []\n');
  const reload = await runTollgate(['reload', '--config', node.configFile]);
  assert.equal(reload.code, 1);
  assert.match(reload.output, /gateway\.yaml:5:6: services\[0\]\.url: YAML: 'routes:' is indented/);
  assert.match(reload.output, /^tollgate reload: .*gateway\.yaml is invalid \(1 error above\); --pid-file finds the node without it$/m);
  assert.equal((await request(`${node.http}/a`)).status, 200);
  // The file being invalid, stop finds the node by its pid file alone.
  const pidFile = join(node.dataDir, 'tollgate.pid');
  const stop = await runTollgate(['stop', '--pid-file', pidFile]);
  assert.equal(stop.code, 0, stop.output);
  assert.equal(await node.exited, 0);
});

test('stop and status without a running gateway: exit 1 saying why; a stale pid file is removed', async () => {
  const dir = tempDir();
  const file = writeConfig({ gateway: { admin_listen: ['off'] } }, join(dir, 'data'));
  const none = await runTollgate(['stop', '--config', file]);
  assert.equal(none.code, 1);
  assert.match(none.output, /^tollgate stop: not running: no pid file .*data\/tollgate\.pid$/m);

  const stale = join(dir, 'stale.pid');
  // A pid no process has: the kernel's pid_max is at most 2^22.
  writeFileSync(stale, `${2 ** 22 + 1}\n`);
  const stopped = await runTollgate(['stop', '--pid-file', stale]);
  assert.equal(stopped.code, 1);
  assert.match(stopped.output, /^tollgate stop: not running: process 4194305 of .*stale\.pid is gone \(a crash or kill -9\); the stale pid file is removed$/m);
  assert.equal(existsSync(stale), false);

  writeFileSync(stale, 'garbage\n');
  const garbage = await runTollgate(['status', '--pid-file', stale, '--config', file]);
  assert.equal(garbage.code, 1);
  assert.match(garbage.output, /holds no pid: 'garbage'/);
});

test('check warns (exit 0) about more worker processes than this machine has cores', async () => {
  const file = writeConfig({ gateway: { worker_processes: 256 } }, tempDir());
  const result = await runTollgate(['check', '--config', file]);
  assert.equal(result.code, 0, result.output);
  assert.match(result.output, /configuration is valid/);
  const cores = availableParallelism();
  assert.match(result.output, new RegExp(`^warning: .*gateway\\.yaml: gateway\\.worker_processes: 256 processes on a machine with ${cores} cores`, 'm'));
});

test('the example upstream (npm run example:upstream) closes and exits 0 on SIGTERM and SIGINT', async (t) => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const port = await closedPort();
    const npm = spawn('npm', ['run', 'example:upstream'], { cwd: ROOT, env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    // Whatever npm leaves running must not outlive the test (on a failure: the upstream it started).
    t.after(() => {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // Gone.
      }
    });
    const exited = new Promise<number | null>((r) => npm.once('exit', (code) => r(code)));
    await waitFor(() => isListening(port), 'the example upstream to listen', 20_000);
    npm.kill(signal);
    assert.equal(await exited, 0, `npm run example:upstream exits 0 on ${signal}`);
    assert.equal(await isListening(port), false, `nothing listens on ${port} after ${signal}`);
  }
});

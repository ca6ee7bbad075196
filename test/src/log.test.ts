/** The access log: one line per request, in pino's shape, showing up promptly even on a quiet gateway. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request, spawnGateway, startUpstream } from '../helpers/gateway.ts';
import { portOf, rawRequest, waitFor } from './support.ts';

test('a lone request’s access line is written within moments, not held back until more traffic comes', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const gw = await spawnGateway({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info' },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
  });
  t.after(() => gw.kill('SIGKILL'));

  assert.equal((await request(`${gw.http}/echo/quiet?x="q"`)).status, 200);
  const line = () => gw.output().split('\n').find((l) => l.includes('"type":"access"'));
  await waitFor(() => line() !== undefined, 'the access-log line of the only request');
  const entry = JSON.parse(line()!);
  assert.equal(entry.level, 30);
  assert.equal(typeof entry.time, 'number');
  assert.equal(entry.pid, Number(/pid (\d+)/.exec(gw.output())?.[1]));
  assert.equal(entry.msg, 'request');
  assert.equal(entry.method, 'GET');
  assert.equal(entry.path, '/echo/quiet');
  assert.equal(entry.status, 200);
  assert.equal(entry.route, 'echo');
  assert.equal(entry.service, 'echo');
  assert.equal(entry.client_ip, '127.0.0.1');
  assert.match(entry.request_id, /^[0-9a-f-]{36}$/);
  assert.equal(typeof entry.latency_ms, 'number');
  assert.equal(typeof entry.upstream_latency_ms, 'number');
});

test('a path with quotes and backslashes still makes one valid JSON line', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const gw = await spawnGateway({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info' },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
  });
  t.after(() => gw.kill('SIGKILL'));
  await request(`${gw.http}/echo/%22quoted%22%5C`);
  await rawRequest(portOf(gw.http), ['GET /nowhere"\\ HTTP/1.1', 'Host: x']);
  const lines = () => gw.output().split('\n').filter((l) => l.includes('"type":"access"'));
  await waitFor(() => lines().length === 2, 'two access-log lines');
  const paths = lines().map((l) => JSON.parse(l).path);
  assert.deepEqual(paths.sort(), ['/echo/%22quoted%22%5C', '/nowhere"\\'].sort());
});

/**
 * Logs: one format per run. Off a terminal every stdout line is a JSON object (ISO 8601 `time`, level
 * names): the access log (one line per request, with consumer, credential, user agent and body bytes,
 * showing up promptly on a quiet gateway), the start lines, reload outcomes (once each) and shutdown.
 * On a terminal (a real pty, through `script`) the lines are pino-pretty's, with no JSON among them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test, type TestContext } from 'node:test';
import { stringify } from 'yaml';
import WebSocket from 'ws';
import { issueToken, oauth2Plugin, tokenIssuerConfig } from '../fixtures/oauth2-setup.ts';
import { startWsEcho } from '../fixtures/ws-echo.ts';
import { request, spawnGateway, startUpstream, tempDir, tollgateArgs } from '../helpers/gateway.ts';
import { portOf, rawRequest, waitFor } from '../helpers/support.ts';

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function jsonLines(output: string): Record<string, any>[] {
  return output.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
}

/** A gateway process (log level info) whose service and route `echo` send `/echo` to an echo upstream; both end after test `t`. */
async function spawnGatewayOnEcho(t: TestContext) {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const gw = await spawnGateway({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info' },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
  });
  t.after(() => gw.kill('SIGKILL'));
  return gw;
}

test('a lone request’s access line is written within moments, not held back until more traffic comes', async (t) => {
  const gw = await spawnGatewayOnEcho(t);

  const reply = await request(`${gw.http}/echo/quiet?x="q"`, { method: 'POST', body: 'x'.repeat(1000), headers: { 'user-agent': 'log-test/1.0' } });
  assert.equal(reply.status, 200);
  const line = () => gw.output().split('\n').find((l) => l.includes('"type":"access"'));
  await waitFor(() => line() !== undefined, 'the access-log line of the only request');
  const entry = JSON.parse(line()!);
  assert.equal(entry.level, 'info');
  assert.match(entry.time, ISO_TIME);
  assert.ok((await request(`${gw.admin}/`)).json().pids.workers.includes(entry.pid), 'the pid of the process that served it');
  assert.equal(entry.msg, 'request');
  assert.equal(entry.method, 'POST');
  assert.equal(entry.path, '/echo/quiet');
  assert.equal(entry.status, 200);
  assert.equal(entry.route, 'echo');
  assert.equal(entry.service, 'echo');
  assert.equal(entry.client_ip, '127.0.0.1');
  assert.equal(entry.user_agent, 'log-test/1.0');
  assert.equal(entry.request_body_bytes, 1000);
  assert.equal(entry.response_body_bytes, reply.body.length);
  assert.equal('consumer' in entry, false, 'no consumer on an open route');
  assert.match(entry.request_id, /^[0-9a-f-]{36}$/);
  assert.equal(typeof entry.latency_ms, 'number');
  assert.equal(typeof entry.upstream_latency_ms, 'number');
});

test('a path with quotes and backslashes still makes one valid JSON line', async (t) => {
  const gw = await spawnGatewayOnEcho(t);
  await request(`${gw.http}/echo/%22quoted%22%5C`);
  await rawRequest(portOf(gw.http), ['GET /nowhere"\\ HTTP/1.1', 'Host: x', 'User-Agent: a"b\\c']);
  const lines = () => gw.output().split('\n').filter((l) => l.includes('"type":"access"'));
  await waitFor(() => lines().length === 2, 'two access-log lines');
  const entries = lines().map((l) => JSON.parse(l));
  assert.deepEqual(entries.map((e) => e.path).sort(), ['/echo/%22quoted%22%5C', '/nowhere"\\'].sort());
  const miss = entries.find((e) => e.status === 404)!;
  assert.equal(miss.user_agent, 'a"b\\c');
  assert.equal(miss.response_body_bytes, Buffer.byteLength(JSON.stringify({ message: 'no Route matched with those values', request_id: miss.request_id })));
});

test('a WebSocket tunnel’s access line counts the frames each way as body bytes', async (t) => {
  const echo = await startWsEcho();
  t.after(() => echo.close());
  const gw = await spawnGateway({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info' },
    services: [{ name: 'ws', url: `ws://127.0.0.1:${echo.port}`, routes: [{ name: 'ws', paths: ['/ws'], protocols: ['ws'] }] }],
  });
  t.after(() => gw.kill('SIGKILL'));
  const client = new WebSocket(`${gw.http.replace('http', 'ws')}/ws`);
  await new Promise((r, j) => client.once('open', r).once('error', j));
  const payload = 'x'.repeat(1000);
  client.send(payload);
  await new Promise((r) => client.once('message', r));
  client.close();
  const line = () => gw.output().split('\n').find((l) => l.includes('"type":"access"'));
  await waitFor(() => line() !== undefined, 'the tunnel’s access line');
  const entry = JSON.parse(line()!);
  assert.equal(entry.status, 101);
  // A 1000-byte message is a frame of at least that much each way (plus headers, masks and close frames).
  assert.ok(entry.request_body_bytes >= 1000 && entry.request_body_bytes < 1100, String(entry.request_body_bytes));
  assert.ok(entry.response_body_bytes >= 1000 && entry.response_body_bytes < 1100, String(entry.response_body_bytes));
});

test('an authenticated request names its consumer and credential in the access log and counts in /metrics per consumer', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const issuer = tokenIssuerConfig();
  const gw = await spawnGateway({
    ...issuer,
    // Workers as the default makes them: /metrics counts the consumer's requests whichever one served them.
    gateway: { log_level: 'info', worker_processes: 2 },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'private', paths: ['/private'], plugins: [oauth2Plugin()] }] }],
  });
  t.after(() => gw.kill('SIGKILL'));
  const token = await issueToken(gw.https);
  for (let i = 0; i < 3; i++) assert.equal((await request(`${gw.http}/private/x`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  assert.equal((await request(`${gw.http}/private/x`)).status, 401);

  const admin = await request(`${gw.admin}/oauth2?client_id=acme-app`);
  const credentialId = admin.json().data[0].id;
  const access = () => jsonLines(gw.output()).filter((l) => l.type === 'access' && l.route === 'private');
  await waitFor(() => access().length === 4, 'four access lines');
  const authenticated = access().filter((l) => l.status === 200);
  assert.equal(authenticated.length, 3);
  for (const line of authenticated) {
    assert.equal(line.consumer, 'acme');
    assert.equal(line.credential, credentialId);
  }
  assert.equal(access().find((l) => l.status === 401)!.consumer, undefined);

  const metrics = (await request(`${gw.admin}/metrics`)).text;
  assert.match(metrics, /^# TYPE tollgate_consumer_requests_total counter$/m);
  assert.match(metrics, /^tollgate_consumer_requests_total\{consumer="acme",code="200"\} 3$/m);
  assert.doesNotMatch(metrics, /tollgate_consumer_requests_total\{consumer="acme",code="401"\}/);
});

test('off a terminal, stdout is JSON lines only; a reload is logged once, an invalid one with its error count', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  // One process: with several, each worker also logs its own reload beside the node's line.
  const config = {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', worker_processes: 1 },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
  };
  const gw = await spawnGateway(config);
  t.after(() => gw.kill('SIGKILL'));
  const stdout = () => {
    let out = '';
    gw.child.stdout!.on('data', (c) => (out += c));
    return () => out;
  };
  // spawnGateway's output() mixes stderr in: stdout alone is checked here, from the start.
  const startLines = gw.output();
  const later = stdout();
  assert.equal((await request(`${gw.http}/echo/1`)).status, 200);

  gw.kill('SIGHUP');
  await waitFor(() => later().includes('configuration reloaded'), 'the reload');
  writeFileSync(gw.configFile, stringify({ _format_version: '3.0', gateway: config.gateway, services: [{ name: 'broken', host: 'example.com', port: 99999 }] }));
  gw.kill('SIGHUP');
  await waitFor(() => later().includes('configuration invalid'), 'the refused reload');
  gw.kill('SIGTERM');
  assert.equal(await gw.exited, 0);

  const lines = jsonLines(startLines + later());
  for (const line of lines) {
    assert.match(line.time, ISO_TIME);
    assert.ok(['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(line.level), `level ${line.level}`);
  }
  const messages = lines.map((l) => l.msg as string);
  assert.equal(messages.filter((m) => m.startsWith('proxy listening on http://127.0.0.1:')).length, 1);
  assert.equal(messages.filter((m) => m.startsWith('admin listening on http://127.0.0.1:')).length, 1);
  assert.equal(messages.filter((m) => m === 'configuration reloaded').length, 1, 'the reload, once');
  assert.deepEqual(messages.filter((m) => m.startsWith('configuration invalid')), ['configuration invalid (1 error): keeping the current one']);
  assert.equal(lines.filter((l) => l.msg === 'invalid configuration').length, 1, 'each error on a line of its own');
  assert.ok(messages.includes('shutting down'));
  assert.ok(!messages.some((m) => m.includes('dedupe filter')), 'no metering line without metering');
});

test('a node of two workers reports an invalid reload once, not once per worker', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const config = {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', access_log: false, worker_processes: 2 },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
  };
  const gw = await spawnGateway(config);
  t.after(() => gw.kill('SIGKILL'));
  const broken = [
    { name: 'broken', host: 'example.com', port: 99999 },
    { name: 'also-broken', host: 'example.com', port: -1 },
  ];
  writeFileSync(gw.configFile, stringify({ _format_version: '3.0', gateway: config.gateway, services: broken }));
  gw.kill('SIGHUP');
  await waitFor(() => gw.output().includes('configuration invalid'), 'the refused reload');
  // A valid reload after it: whatever a worker said of the invalid one would come before the node's line of this one.
  writeFileSync(gw.configFile, stringify({ _format_version: '3.0', ...config }));
  gw.kill('SIGHUP');
  await waitFor(() => gw.output().includes('configuration reloaded on every worker'), 'the reload');
  assert.equal((await request(`${gw.http}/echo/1`)).status, 200);
  gw.kill('SIGTERM');
  assert.equal(await gw.exited, 0);

  const lines = jsonLines(gw.output()).filter((l) => /invalid/.test(l.msg));
  assert.deepEqual(
    lines.map((l) => [l.process, l.msg]),
    [
      ['primary', 'invalid configuration'],
      ['primary', 'invalid configuration'],
      ['primary', 'configuration invalid (2 errors): keeping the current one'],
    ],
  );
});

/** Runs the command under a pseudo-terminal (util-linux `script`), so its stdout is a TTY. */
function onTerminal(command: string, cwd: string, until: (output: string) => boolean): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TERM: 'dumb' } });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      if (until(out)) child.kill('SIGTERM');
    });
    child.on('error', reject);
    child.on('exit', () => resolvePromise(out));
  });
}

test('on a terminal the lines are pino-pretty’s: a time, a level name, the message; no JSON', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const dir = tempDir();
  const file = resolve(dir, 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      _format_version: '3.0',
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['off'], data_dir: resolve(dir, 'data') },
      services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
    }),
  );
  let requested = false;
  const raw = await onTerminal(`exec ${process.execPath} ${tollgateArgs('start', '--config', file).join(' ')}`, resolve(import.meta.dirname, '../..'), (out) => {
    const url = /proxy listening on (\S+)/.exec(out)?.[1];
    if (url && !requested) {
      requested = true;
      void request(`${url}/echo/pretty`, { headers: { 'user-agent': 'tty-test' } });
    }
    return /GET \/echo\/pretty 200/.test(out);
  });
  // eslint-disable-next-line no-control-regex
  const lines = raw.replace(/\x1b\[[0-9;]*m/g, '').split(/\r?\n/).filter((l) => l.trim() !== '');
  assert.ok(lines.length >= 2, raw);
  assert.ok(!lines.some((l) => l.trimStart().startsWith('{')), `no JSON line:\n${raw}`);
  assert.ok(lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: proxy listening on http:\/\/127\.0\.0\.1:\d+/.test(l)), raw);
  const access = lines.find((l) => l.includes('GET /echo/pretty'));
  assert.match(access ?? '', /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/echo\/pretty 200 \d+ms route=echo in=0B out=\d+B 127\.0\.0\.1$/, raw);
});

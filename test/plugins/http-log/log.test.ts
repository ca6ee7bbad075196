/**
 * Kong's http-log (spec/03-plugins/03-http-log/01-log_spec.lua, 02-schema_spec.lua) against a real local
 * log server: one entry per request as Kong's serializer object, both content types, Basic auth from
 * the endpoint's userinfo beside the configured headers, batches as JSON arrays, retries after a 5xx and
 * after a refused connection, a full queue dropping its oldest entries, a batch given up after
 * max_retry_time, a changed endpoint taking effect on reload, and the schema's refusals.
 */
import assert from 'node:assert/strict';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

interface LogServer {
  url: string;
  port: number;
  received: Received[];
  /** Statuses to answer with, in turn; 200 once they are used up. */
  answers: number[];
  close(): Promise<void>;
}

async function startLogServer(port = 0): Promise<LogServer> {
  const received: Received[] = [];
  const answers: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const status = answers.shift() ?? 200;
      if (status < 300) received.push({ method: req.method!, path: req.url!, headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      res.writeHead(status).end(status < 300 ? 'ok' : 'try later');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    port: bound,
    received,
    answers,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const FAST_RETRIES = { initial_retry_delay: 0.05, max_retry_delay: 0.1 };

describe('http-log', () => {
  let upstream: Upstream;
  let logs: LogServer;
  let gw: TestGateway;
  const routes = (endpoint: string) => [
    { name: 'plain', paths: ['/plain'], plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/plain` } }] },
    {
      name: 'charset', paths: ['/charset'],
      plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/charset`, method: 'PUT', content_type: 'application/json; charset=utf-8' } }],
    },
    {
      name: 'auth', paths: ['/auth'],
      plugins: [{ name: 'http-log', config: { http_endpoint: endpoint.replace('http://', 'http://testuser:testpassword@') + '/auth', headers: { 'hello-world': 'hi there' } } }],
    },
    {
      name: 'batched', paths: ['/batched'],
      plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/batched`, queue: { max_batch_size: 3, max_coalescing_delay: 60 } } }],
    },
    {
      name: 'legacy', paths: ['/legacy'],
      plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/legacy`, queue_size: 2, flush_timeout: 60, retry_count: 5 } }],
    },
    { name: 'retried', paths: ['/retried'], plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/retried`, queue: FAST_RETRIES } }] },
    // Kong's 04-legacy_queue_sharing_spec: instances with the same endpoint and parameters share one queue.
    ...['shared-a', 'shared-b'].map((name) => ({
      name, paths: [`/${name}`], plugins: [{ name: 'http-log', config: { http_endpoint: `${endpoint}/shared`, queue: { max_batch_size: 2, max_coalescing_delay: 60 } } }],
    })),
  ];
  const config = (endpoint: string) => ({ services: [{ name: 'echo', url: upstream.url, routes: routes(endpoint) }] });

  before(async () => {
    upstream = await startUpstream();
    logs = await startLogServer();
    gw = await startGateway(config(logs.url));
  });
  after(async () => {
    await gw?.stop();
    await logs?.close();
    await upstream?.close();
  });

  const at = (path: string) => logs.received.filter((r) => r.path === path);

  test("logs each request as Kong's serializer object, POSTed as application/json", async () => {
    const res = await request(`${gw.http}/plain/x?a=1`, { headers: { authorization: 'Bearer secret' } });
    assert.equal(res.status, 200);
    const [entry] = await waitFor(() => at('/plain').length >= 1 && at('/plain'), 'the log entry');
    assert.equal(entry.method, 'POST');
    assert.equal(entry.headers['content-type'], 'application/json');
    assert.equal(entry.headers.host, `127.0.0.1:${logs.port}`);
    assert.equal(entry.body.client_ip, '127.0.0.1');
    assert.equal(entry.body.request.uri, '/plain/x?a=1');
    assert.deepEqual(entry.body.request.querystring, { a: '1' });
    assert.equal(entry.body.request.headers.authorization, 'REDACTED');
    assert.equal(entry.body.response.status, 200);
    assert.equal(entry.body.route.name, 'plain');
    assert.equal(entry.body.service.name, 'echo');
    assert.equal(entry.body.source, 'upstream');
  });

  test("the method and content type 'application/json; charset=utf-8' from the config", async () => {
    await request(`${gw.http}/charset`);
    const [entry] = await waitFor(() => at('/charset').length >= 1 && at('/charset'), 'the log entry');
    assert.equal(entry.method, 'PUT');
    assert.equal(entry.headers['content-type'], 'application/json; charset=utf-8');
  });

  test("adds Basic authorization from the endpoint's userinfo, and the configured headers", async () => {
    await request(`${gw.http}/auth`);
    const [entry] = await waitFor(() => at('/auth').length >= 1 && at('/auth'), 'the log entry');
    assert.equal(entry.headers.authorization, 'Basic dGVzdHVzZXI6dGVzdHBhc3N3b3Jk');
    assert.equal(entry.headers['hello-world'], 'hi there');
  });

  test('batches go as one JSON array once max_batch_size entries are queued', async () => {
    for (const n of [1, 2, 3]) assert.equal((await request(`${gw.http}/batched/${n}`)).status, 200);
    const [batch] = await waitFor(() => at('/batched').length >= 1 && at('/batched'), 'the batch');
    assert.ok(Array.isArray(batch.body));
    assert.deepEqual(batch.body.map((e: any) => e.request.uri).sort(), ['/batched/1', '/batched/2', '/batched/3']);
  });

  test("the legacy queue_size and flush_timeout act as Kong 3.x's queue.max_batch_size and max_coalescing_delay", async () => {
    for (const n of [1, 2]) await request(`${gw.http}/legacy/${n}`);
    const [batch] = await waitFor(() => at('/legacy').length >= 1 && at('/legacy'), 'the batch');
    assert.equal(batch.body.length, 2);
  });

  test('instances with the same endpoint and parameters share one queue (one batch from two routes)', async () => {
    await request(`${gw.http}/shared-a`);
    await request(`${gw.http}/shared-b`);
    const [batch] = await waitFor(() => at('/shared').length >= 1 && at('/shared'), 'the shared batch');
    assert.deepEqual(batch.body.map((e: any) => e.route.name).sort(), ['shared-a', 'shared-b']);
  });

  test('a batch the log server answers with a 5xx is sent again', async () => {
    logs.answers.push(500, 503);
    await request(`${gw.http}/retried/once`);
    const [entry] = await waitFor(() => at('/retried').length >= 1 && at('/retried'), 'the retried entry');
    assert.equal(entry.body.request.uri, '/retried/once');
    assert.equal(logs.answers.length, 0, 'both failures were met first');
    assert.equal(at('/retried').length, 1);
  });

  test('a changed endpoint takes effect on reload', async () => {
    const other = await startLogServer();
    try {
      assert.equal(await gw.reload(config(other.url)), true);
      await request(`${gw.http}/plain/after-reload`);
      const [entry] = await waitFor(() => other.received.find((r) => r.body.request?.uri === '/plain/after-reload') && other.received, 'the entry at the new endpoint');
      assert.equal(entry.path, '/plain');
    } finally {
      assert.equal(await gw.reload(config(logs.url)), true);
      await other.close();
    }
  });
});

describe('http-log without a log server', () => {
  test('entries wait while the connection is refused, and are sent once the server is up', async () => {
    const port = await closedPort();
    const upstream = await startUpstream();
    const gw = await startGateway({
      services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'r', paths: ['/'] }] }],
      plugins: [{ name: 'http-log', config: { http_endpoint: `http://127.0.0.1:${port}/logs`, queue: FAST_RETRIES } }],
    });
    try {
      assert.equal((await request(`${gw.http}/while-down`)).status, 200, 'the request is served whatever becomes of its log entry');
      await waitFor(async () => /tollgate_http_log_retries_total\{[^}]*\} [1-9]/.test((await request(`${gw.admin}/metrics`)).text), 'a failed send');
      const logs = await startLogServer(port);
      try {
        const [entry] = await waitFor(() => logs.received.length >= 1 && logs.received, 'the entry', 10_000);
        assert.equal(entry.body.request.uri, '/while-down');
      } finally {
        await logs.close();
      }
    } finally {
      await gw.stop();
      await upstream.close();
    }
  });

  test('a full queue drops its oldest entries; a batch past max_retry_time is given up', async () => {
    const port = await closedPort();
    const upstream = await startUpstream();
    const gw = await startGateway({
      services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'r', paths: ['/'] }] }],
      plugins: [{ name: 'http-log', config: { http_endpoint: `http://127.0.0.1:${port}/logs`, queue: { max_entries: 2, max_retry_time: 0.3, ...FAST_RETRIES } } }],
    });
    try {
      for (let n = 1; n <= 12; n++) {
        await request(`${gw.http}/r${n}`);
        // Each its own write to the disk queue: the limit applies to what is queued already.
        await new Promise((r) => setTimeout(r, 30));
      }
      const metrics = await waitFor(async () => {
        const text = (await request(`${gw.admin}/metrics`)).text;
        return /reason="queue_full"\} [1-9]/.test(text) && /reason="retry_time"\} [1-9]/.test(text) && text;
      }, 'entries dropped for a full queue and given up after max_retry_time', 10_000);
      assert.match(metrics, /tollgate_http_log_dropped_entries_total\{queue="http-log-[0-9a-f]{16}",reason="queue_full"\}/);
    } finally {
      await gw.stop();
      await upstream.close();
    }
  });
});

describe('http-log config (02-schema_spec.lua)', () => {
  const endpoint = 'http://myservice.test/path';

  test('accepts a minimal config, userinfo without headers, allowed headers and the legacy queue fields', async () => {
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint }), []);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: 'http://bob:password@myservice.test/path' }), []);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint, headers: { 'X-My-Header': '123', 'X-Your-Header': 'abc' } }), []);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint, retry_count: 23, queue_size: 46, flush_timeout: 92, custom_fields_by_lua: {} }), []);
  });

  test("refuses Kong's forbidden headers, empty values, userinfo with an Authorization header, and Lua", async () => {
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint, headers: { Host: 'MyHost' } }), ["config.headers.Host: cannot contain 'Host' header"]);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint, headers: { 'coNTEnt-Length': '123' } }), ["config.headers.coNTEnt-Length: cannot contain 'Content-Length' header"]);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: endpoint, headers: { 'coNTEnt-Type': 'bad' } }), ["config.headers.coNTEnt-Type: cannot contain 'Content-Type' header"]);
    assert.equal((await pluginConfigErrors('http-log', { http_endpoint: endpoint, headers: { 'X-My-Header': '' } })).length, 1);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: 'http://hi:there@myservice.test/path', headers: { AuthoRIZATion: 'bad' } }), [
      "config: specifying both an 'Authorization' header and user info in 'http_endpoint' is not allowed",
    ]);
    const [lua] = await pluginConfigErrors('http-log', { http_endpoint: endpoint, custom_fields_by_lua: { foo: "return 'bar'" } });
    assert.match(lua, /^config\.custom_fields_by_lua: Tollgate does not run Lua/);
    assert.deepEqual(await pluginConfigErrors('http-log', { http_endpoint: 'myservice.test/path' }), ['config.http_endpoint: missing scheme in url']);
    assert.deepEqual(await pluginConfigErrors('http-log', {}), ['config.http_endpoint: required field missing']);
  });
});

/**
 * A failure anywhere in the request path ends that request, never the process: it is answered (the
 * right status, or a 500 JSON) or its connection is closed, and the process's uncaughtException and
 * unhandledRejection handlers never hear of it. Failures come from HTTP versions the listener does not
 * speak and from plugins failing in every phase, on HTTP/1.1, HTTP/2 and WebSocket handshakes.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, test } from 'node:test';
import type { PluginDefinition } from '../../src/pdk/types.ts';
import { echoClient, grpc, startGrpcEcho, unary, type GrpcEcho } from '../fixtures/grpc-echo.ts';
import { request, startUpstream, type Upstream } from '../helpers/gateway.ts';
import { parseRaw, portOf, rawExchange, startWithRegistry, type RegistryGateway } from '../helpers/support.ts';

const escaped: unknown[] = [];
const onEscape = (err: unknown) => escaped.push(err);

/** A plugin failing the way `x-fail` asks, for whichever request carries it. */
const failing: PluginDefinition = {
  name: 'failing',
  version: '1.0.0',
  priority: 100,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    async access(ctx) {
      const how = ctx.headers['x-fail'];
      await Promise.resolve();
      // An answer Node refuses to write: a header value with a line break.
      if (how === 'bad-answer') ctx.respond(200, 'x', { 'x-bad': 'a\r\nb' });
      if (how === 'later') await new Promise((_, reject) => setImmediate(() => reject(new Error('late failure'))));
    },
    response(ctx, _config, response) {
      if (ctx.headers['x-fail'] === 'response') throw new Error('response phase bug');
      if (ctx.headers['x-fail'] === 'bad-header') response.headers['x-bad'] = 'a\nb';
    },
    log(ctx) {
      if (ctx.headers['x-fail'] === 'log') throw new Error('log phase bug');
    },
    unmatched(req) {
      if (req.headers['x-fail'] === 'unmatched') throw new Error('unmatched hook bug');
      return false;
    },
  }),
};

let gw: RegistryGateway;
let echo: Upstream;
let grpcEcho: GrpcEcho;

before(async () => {
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  echo = await startUpstream();
  grpcEcho = await startGrpcEcho();
  gw = await startWithRegistry(
    {
      gateway: { proxy_listen: ['127.0.0.1:0', '127.0.0.1:0 http2'] },
      services: [
        { name: 'echo', url: echo.url, routes: [{ name: 'echo', paths: ['/echo'] }] },
        { name: 'grpc', url: `grpc://127.0.0.1:${grpcEcho.port}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'] }] },
      ],
      plugins: [{ name: 'failing' }],
    },
    new Map([[failing.name, failing]]),
  );
});

after(async () => {
  await gw?.stop();
  await echo?.close();
  await grpcEcho?.close();
  process.off('uncaughtException', onEscape);
  process.off('unhandledRejection', onEscape);
});

const h2cUrl = () => gw.gateway.proxyListeners[1].url;

test('HTTP versions an HTTP/1 connection does not speak get 505, and the connection closes', { timeout: 60_000 }, async () => {
  for (const url of [gw.http, h2cUrl()]) {
    for (const version of ['HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'HTTP/3.0']) {
      for (const extra of ['', 'Content-Type: application/grpc\r\n', 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n']) {
        const raw = await rawExchange(portOf(url), `GET /echo/x ${version}\r\nHost: a\r\n${extra}\r\n`, 3000);
        const reply = parseRaw(raw);
        assert.equal(reply.status, 505, `${url} ${version} ${extra}: ${raw}`);
        assert.match(reply.body, /"message":"HTTP Version Not Supported"/);
      }
    }
  }
  assert.equal((await request(`${gw.http}/echo/alive`)).status, 200);
  assert.deepEqual(escaped, []);
});

test('a plugin failing in any phase, or in an answer Node refuses to write, gets its request a 500 (HTTP/1.1 and h2)', { timeout: 30_000 }, async () => {
  for (const how of ['bad-answer', 'later', 'response', 'bad-header', 'unmatched']) {
    const path = how === 'unmatched' ? '/nowhere' : '/echo/x';
    const reply = await request(gw.http + path, { headers: { 'x-fail': how } });
    // Response headers Node refuses to write are the gateway's 502, as when an upstream sent them.
    const expected = how === 'bad-header' ? [502, 'An invalid response was received from the upstream server'] : [500, 'An unexpected error occurred'];
    assert.deepEqual([reply.status, reply.json().message], expected, how);
    const session = http2.connect(h2cUrl());
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':method': 'GET', ':path': path, 'x-fail': how }, { endStream: true });
        stream.on('response', (headers) => resolve(Number(headers[':status'])));
        stream.on('error', reject);
        stream.resume();
      });
      // HPACK carries any byte: the line-broken values are no error on h2, where they are answered as given.
      assert.equal(status, how.startsWith('bad-') ? 200 : expected[0], `h2 ${how}`);
    } finally {
      session.close();
    }
  }
  assert.equal((await request(`${gw.http}/echo/x`, { headers: { 'x-fail': 'log' } })).status, 200, 'the log phase runs after the answer');
  assert.deepEqual(escaped, []);
});

test('a WebSocket handshake whose plugin fails gets a 500 on its socket', { timeout: 30_000 }, async () => {
  const handshake = 'GET /echo/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
  for (const how of ['bad-answer', 'later']) {
    const reply = parseRaw(await rawExchange(portOf(gw.http), `${handshake}X-Fail: ${how}\r\n\r\n`, 3000));
    assert.equal(reply.status, 500, how);
  }
  assert.deepEqual(escaped, []);
});

test('a gRPC call whose plugin fails gets INTERNAL, as a gRPC status', { timeout: 30_000 }, async () => {
  const client = echoClient(new URL(h2cUrl()).host);
  try {
    for (const how of ['later', 'response']) {
      await assert.rejects(unary(client, { message: 'x' }, { metadata: { 'x-fail': how } }), (err: grpc.ServiceError) => {
        assert.equal(err.code, grpc.status.INTERNAL, how);
        assert.equal(err.details, 'An unexpected error occurred', how);
        return true;
      });
    }
  } finally {
    client.close();
  }
  assert.deepEqual(escaped, []);
});

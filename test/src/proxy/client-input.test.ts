/**
 * A client's input never counts as an upstream failure. Whatever a client or a plugin puts into the
 * upstream request is checked where it is put: a header value holding CR/LF, NUL or a character above
 * U+00FF (request-transformer copying a query parameter into a header) is the client's 400, over HTTP/1.1,
 * h2, WebSocket handshakes and gRPC; a plugin's query is escaped; a header no plugin may set is refused
 * when the file loads, or is the plugin's 500. And should a request the HTTP client refuses still reach it
 * (a plugin writing the client's headers directly), or a client stall its body, the upstream's targets
 * stay healthy and nothing is retried. Every target here is marked down by its first counted failure.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { requestFrame, startGrpcEcho, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { request, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { parseRaw, portOf, rawExchange, startWithRegistry, type RegistryGateway } from '../../helpers/support.ts';

/** A plugin doing, on the request that asks (`x-meddle`), what no plugin should: it must still cost the upstream nothing. */
const meddling: PluginDefinition = {
  name: 'meddling',
  version: '1.0.0',
  priority: 100,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    access(ctx) {
      const how = ctx.headers['x-meddle'];
      if (how === 'query') ctx.setUpstreamQuery('q=a b#c');
      // Past every check: straight into the client's headers, which go upstream.
      if (how === 'client-header') ctx.headers['x-raw'] = 'a\r\nb';
      if (how === 'framing') ctx.setUpstreamHeader('Transfer-Encoding', 'chunked');
    },
  }),
};

const UPSTREAM = 'targets.test';
const templated = { name: 'request-transformer', config: { add: { headers: ["x-page:$(query_params.page or '1')"] } } };
/** Client input no header can carry: CR LF (a header of the client's own), NUL, a character above U+00FF. */
const UNSENDABLE = { 'CR LF': '1%0d%0aX-Evil:%201', NUL: '%00', 'U+65E5': '%E6%97%A5' };

let gw: RegistryGateway;
let targets: Upstream[];
let grpcEcho: GrpcEcho;

before(async () => {
  targets = [await startUpstream(), await startUpstream()];
  grpcEcho = await startGrpcEcho();
  gw = await startWithRegistry(
    {
      gateway: { proxy_listen: ['127.0.0.1:0', '127.0.0.1:0 http2'], client_timeout: 1000 },
      services: [
        {
          name: 'balanced', host: UPSTREAM, write_timeout: 200,
          routes: [
            { name: 'templated', paths: ['/search'], plugins: [templated] },
            { name: 'ws', protocols: ['ws'], paths: ['/ws'], plugins: [templated] },
            { name: 'meddled', paths: ['/meddled'], plugins: [{ name: 'meddling' }] },
            { name: 'upload', paths: ['/upload'] },
          ],
        },
        { name: 'grpc', url: `grpc://127.0.0.1:${grpcEcho.port}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [templated] }] },
      ],
      upstreams: [
        {
          name: UPSTREAM,
          healthchecks: { passive: { unhealthy: { tcp_failures: 1, timeouts: 1 } } },
          targets: targets.map((t) => ({ target: `127.0.0.1:${t.port}` })),
        },
      ],
    },
    new Map([...bundledPlugins, [meddling.name, meddling]]),
  );
});

after(async () => {
  await gw?.stop();
  for (const target of targets ?? []) await target.close();
  await grpcEcho?.close();
});

const h2cUrl = () => gw.gateway.proxyListeners[1].url;
const received = () => targets.reduce((sum, t) => sum + t.requests.length, 0);

/** Both targets healthy, and a request of another client still answered by one of them. */
async function assertTargetsUp(): Promise<void> {
  const health = (await request(`${gw.admin}/upstreams/${UPSTREAM}/health`)).json();
  assert.deepEqual(health.data.map((d: { health: string }) => d.health), ['HEALTHY', 'HEALTHY']);
  assert.equal((await request(`${gw.http}/search?page=2`)).status, 200);
}

function h2Request(headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<http2.IncomingHttpHeaders> {
  const session = http2.connect(h2cUrl());
  return new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    const stream = session.request(headers);
    stream.on('response', resolve);
    stream.on('error', reject);
    stream.resume();
    stream.end(body);
  }).finally(() => session.close());
}

describe('a value no header can carry, from the client through a template, is the client\'s 400', { timeout: 30_000 }, () => {
  for (const [what, page] of Object.entries(UNSENDABLE)) {
    test(`${what}, over HTTP/1.1 and h2: no request reaches a target, both stay healthy`, async () => {
      const before = received();
      const reply = await request(`${gw.http}/search?page=${page}`);
      assert.equal(reply.status, 400);
      assert.match(reply.json().message, /the upstream header 'x-page' would hold U\+/);
      assert.equal((await h2Request({ ':path': `/search?page=${page}` }))[':status'], 400);
      assert.equal(received(), before, 'nothing was sent, so nothing was retried');
      await assertTargetsUp();
    });
  }

  test('a WebSocket handshake gets the 400 on its socket', async () => {
    const handshake = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const reply = parseRaw(await rawExchange(portOf(gw.http), `GET /ws?page=${UNSENDABLE['CR LF']} HTTP/1.1\r\nHost: a\r\n${handshake}\r\n`, 3000));
    assert.equal(reply.status, 400);
    await assertTargetsUp();
  });

  test('a gRPC call gets INVALID_ARGUMENT', async () => {
    const headers = await h2Request(
      { ':method': 'POST', ':path': `/tollgate.test.Echo/Unary?page=${UNSENDABLE['CR LF']}`, 'content-type': 'application/grpc', te: 'trailers' },
      requestFrame({ message: 'hi' }),
    );
    assert.equal(headers['grpc-status'], '3');
    assert.match(String(headers['grpc-message']), /x-page/);
  });
});

describe('what a plugin puts upstream', { timeout: 30_000 }, () => {
  test('a query a plugin sets is escaped: it neither breaks the request line nor starts a fragment', async () => {
    const reply = await request(`${gw.http}/meddled`, { headers: { 'x-meddle': 'query' } });
    assert.equal(reply.status, 200);
    assert.equal(reply.json().query, 'q=a%20b%23c');
  });

  test('a header the gateway sets itself (Transfer-Encoding) is the plugin\'s 500; the targets stay healthy', async () => {
    const before = received();
    assert.equal((await request(`${gw.http}/meddled`, { headers: { 'x-meddle': 'framing' } })).status, 500);
    assert.equal(received(), before);
    await assertTargetsUp();
  });

  test('request-transformer: a file setting such a header is refused when it loads', async () => {
    for (const config of [{ add: { headers: ['Connection:close'] } }, { rename: { headers: ['x-length:Content-Length'] } }]) {
      const refused = { services: [{ name: 's', url: targets[0].url, routes: [{ paths: ['/'], plugins: [{ name: 'request-transformer', config }] }] }] };
      assert.equal(await gw.reload(refused), false, JSON.stringify(config));
    }
  });

  test('a request the HTTP client refuses to send is a 500 of the gateway\'s: not the upstream\'s failure, not retried', async () => {
    const before = received();
    const reply = await request(`${gw.http}/meddled`, { headers: { 'x-meddle': 'client-header' } });
    assert.deepEqual([reply.status, reply.json().message], [500, 'An unexpected error occurred']);
    assert.equal(received(), before);
    await assertTargetsUp();
  });
});

test('a client that stalls its body gets its own timeout (408), not the upstream\'s write timeout', { timeout: 30_000 }, async () => {
  const socket = connect(portOf(gw.http), '127.0.0.1');
  let answer = '';
  socket.on('data', (chunk) => (answer += chunk));
  // 10 of 100 declared bytes, then nothing, for longer than the service's write_timeout (200 ms).
  socket.write('POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n' + 'x'.repeat(10));
  await new Promise((resolve) => socket.once('close', resolve));
  assert.equal(parseRaw(answer).status, 408);
  await assertTargetsUp();
});

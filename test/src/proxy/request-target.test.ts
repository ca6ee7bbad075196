/**
 * The request target and its host, read one way only. Two Host headers are a 400 (RFC 9112 §3.2), as
 * nginx answers, whatever their values or spelling; over h2 so is a Host naming another authority than
 * `:authority` (RFC 9113 §8.3.1). A `#fragment` in the target is the client's own: it is stripped before
 * routing and never reaches the upstream (path, query, X-Forwarded-Path), over HTTP/1.1 (origin and
 * absolute form), h2 `:path`, WebSocket handshakes and gRPC calls.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, describe, test } from 'node:test';
import { echoClient, requestFrame, startGrpcEcho, unary, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';
import { startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { parseRaw, portOf, rawExchange, rawRequest } from '../../helpers/support.ts';

let gw: TestGateway;
let echo: Upstream;
let wsEcho: WsEcho;
let grpcEcho: GrpcEcho;

before(async () => {
  echo = await startUpstream();
  wsEcho = await startWsEcho();
  grpcEcho = await startGrpcEcho();
  gw = await startGateway({
    services: [
      { name: 'echo', url: echo.url, routes: [{ name: 'echo', paths: ['/echo'] }] },
      { name: 'ws', url: `http://127.0.0.1:${wsEcho.port}`, routes: [{ name: 'ws', protocols: ['ws'], paths: ['/ws'] }] },
      { name: 'grpc', url: `grpc://127.0.0.1:${grpcEcho.port}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], strip_path: false }] },
    ],
  });
});

after(async () => {
  await gw?.stop();
  await echo?.close();
  await wsEcho?.close();
  await grpcEcho?.close();
});

const lastSeen = () => echo.requests.at(-1)!;

function h2Get(headers: http2.OutgoingHttpHeaders): Promise<{ status: number; body: string }> {
  const session = http2.connect(gw.h2c);
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const stream = session.request(headers, { endStream: true });
    let status = 0;
    let body = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (chunk) => (body += chunk));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  }).finally(() => session.close());
}

describe('Host', { timeout: 30_000 }, () => {
  test('two Host headers get 400, same value or not, in any spelling; the upstream sees nothing', async () => {
    const before = echo.requests.length;
    for (const hosts of [['Host: a.example', 'Host: b.example'], ['Host: a.example', 'host: a.example'], ['HOST: a.example', 'Host: b.example']]) {
      const reply = await rawRequest(portOf(gw.http), ['GET /echo/x HTTP/1.1', ...hosts]);
      assert.equal(reply.status, 400, hosts.join(', '));
      assert.equal(JSON.parse(reply.body).message, 'Bad Request: more than one Host header');
    }
    assert.equal(echo.requests.length, before);
    assert.equal((await rawRequest(portOf(gw.http), ['GET /echo/x HTTP/1.1', 'Host: a.example'])).status, 200);
  });

  test('h2: a Host naming another authority than :authority gets 400; the same one (any case) is routed', async () => {
    const other = await h2Get({ ':path': '/echo/x', ':authority': 'a.example', host: 'b.example' });
    assert.deepEqual([other.status, JSON.parse(other.body).message], [400, 'Bad Request: the Host header names another authority than :authority']);
    assert.equal((await h2Get({ ':path': '/echo/x', ':authority': 'a.example', host: 'A.Example' })).status, 200);
  });
});

describe('a #fragment is stripped, never sent upstream', { timeout: 30_000 }, () => {
  test('HTTP/1.1, origin form and absolute form, with and without a query', async () => {
    const cases: [target: string, path: string, query: string][] = [
      ['/echo/x#frag', '/x', ''],
      ['/echo/x?a=1#frag?b=2', '/x', 'a=1'],
      ['/echo/x#', '/x', ''],
      ['http://a.example/echo/y?c=3#frag', '/y', 'c=3'],
    ];
    for (const [target, path, query] of cases) {
      const reply = await rawRequest(portOf(gw.http), [`GET ${target} HTTP/1.1`, 'Host: a.example']);
      assert.equal(reply.status, 200, target);
      const seen = lastSeen();
      assert.deepEqual([seen.path, seen.query, seen.headers['x-forwarded-path']], [path, query, path === '/x' ? '/echo/x' : '/echo/y'], target);
    }
  });

  test('h2 :path', async () => {
    assert.equal((await h2Get({ ':path': '/echo/x?a=1#frag' })).status, 200);
    assert.deepEqual([lastSeen().path, lastSeen().query, lastSeen().headers['x-forwarded-path']], ['/x', 'a=1', '/echo/x']);
  });

  test('a WebSocket handshake', async () => {
    const handshake = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const reply = parseRaw(await rawExchange(portOf(gw.http), `GET /ws/room?u=1#frag HTTP/1.1\r\nHost: a.example\r\n${handshake}\r\n`, 1000));
    assert.equal(reply.status, 101);
    assert.equal(wsEcho.handshakes.at(-1)!.url, '/room?u=1');
  });

  test('a gRPC call', async () => {
    const session = http2.connect(gw.h2c);
    try {
      const status = await new Promise<unknown>((resolve, reject) => {
        const stream = session.request({ ':method': 'POST', ':path': '/tollgate.test.Echo/Unary#frag', 'content-type': 'application/grpc', te: 'trailers' });
        // The status comes in the trailers, or in the headers of a trailers-only answer.
        let grpcStatus: unknown;
        stream.on('response', (headers) => (grpcStatus ??= headers['grpc-status']));
        stream.on('trailers', (trailers) => (grpcStatus ??= trailers['grpc-status']));
        stream.on('close', () => resolve(grpcStatus));
        stream.on('error', reject);
        stream.resume();
        stream.end(requestFrame({ message: 'hi' }));
      });
      // The upstream knows /tollgate.test.Echo/Unary only: with the fragment it would answer UNIMPLEMENTED (12).
      assert.equal(status, '0');
    } finally {
      session.close();
    }
    const client = echoClient(new URL(gw.h2c).host);
    try {
      assert.equal((await unary(client, { message: 'plain' })).reply.message, 'plain');
    } finally {
      client.close();
    }
  });
});

/**
 * HTTP proxying end to end: real clients → a real gateway → real upstream servers. Headers both ways,
 * Host, strip_path, large and chunked bodies, size limits, timeouts, upstream failures and retries,
 * clients and upstreams that go away, https upstreams, protocol checks and the gateway's own errors.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { upstreamHost } from '../../../src/proxy/headers.ts';
import type { Service } from '../../../src/config/types.ts';
import { loadTlsMaterial } from '../../../src/tls.ts';
import { request, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, countingUpstream, portOf, rawExchange, rawRequest, waitFor, type CountingServer } from '../../helpers/support.ts';

const VIA = '1.1 tollgate/0.1.0';
const FIVE_MB = 5 * 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let gw: TestGateway;
let echo: Upstream;
let custom: Upstream;
let hold: CountingServer;
let sink: CountingServer;
let streaming: CountingServer;
let secure: https.Server;
let flakyPort: number;
let flakyPostPort: number;
const bigResponse = randomBytes(FIVE_MB);

/** An upstream with a behaviour per path. */
function customHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/hop') {
    res.writeHead(200, {
      connection: 'X-Up-Secret',
      'x-up-secret': '1',
      'keep-alive': 'timeout=1',
      trailer: 'x-t',
      via: '1.0 upstream-proxy',
      server: 'upstream-server',
      'x-plain': 'yes',
    });
    res.end('ok');
  } else if (path === '/big') {
    const hash = createHash('sha256');
    let length = 0;
    req.on('data', (c: Buffer) => {
      hash.update(c);
      length += c.length;
    });
    req.on('end', () => {
      res.writeHead(200, { 'x-request-sha256': hash.digest('hex'), 'x-request-length': String(length), 'content-type': 'application/octet-stream' });
      // Streamed in pieces, without Content-Length.
      for (let i = 0; i < bigResponse.length; i += 256 * 1024) res.write(bigResponse.subarray(i, i + 256 * 1024));
      res.end();
    });
  } else if (path === '/not-modified') {
    // RFC 9110 §8.6: a 304 may carry the Content-Length of the representation it stands for, with no body.
    res.writeHead(304, { etag: '"v1"', 'content-length': 1234 }).end();
  } else if (path === '/reset-before') {
    req.socket.destroy();
  } else if (path === '/reset-mid') {
    res.writeHead(200, { 'content-length': 100_000 });
    res.write(Buffer.alloc(1000, 'x'), () => setImmediate(() => req.socket.destroy()));
  } else {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5 }).end('hello');
  }
}

before(async () => {
  echo = await startUpstream();
  custom = await startUpstream(customHandler);
  hold = await countingUpstream(() => {
    /* never answers */
  });
  sink = await countingUpstream((req, res) => {
    req.resume();
    req.on('end', () => res.end('done'));
  });
  streaming = await countingUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const timer = setInterval(() => res.write('tick\n'), 5);
    res.on('close', () => clearInterval(timer));
  });
  const tls = await loadTlsMaterial(null, null, tempDir());
  secure = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const body = JSON.stringify({ encrypted: (req.socket as import('node:tls').TLSSocket).encrypted === true, path: req.url, host: req.headers.host });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((r) => secure.listen(0, '127.0.0.1', r));
  flakyPort = await closedPort();
  flakyPostPort = await closedPort();
  const down = await closedPort();

  gw = await startGateway({
    services: [
      {
        name: 'echo',
        url: `${echo.url}/base`,
        routes: [
          { name: 'strip', paths: ['/strip'] },
          { name: 'nostrip', paths: ['/nostrip'], strip_path: false },
          { name: 'preserve', paths: ['/preserve'], preserve_host: true },
          { name: 'secure-only', paths: ['/secure'], protocols: ['https'] },
          { name: 'redirect', paths: ['/redir'], protocols: ['https'], https_redirect_status_code: 308 },
        ],
      },
      { name: 'custom', url: custom.url, routes: [{ name: 'custom', paths: ['/custom'] }] },
      { name: 'slow', url: hold.url, read_timeout: 300, routes: [{ name: 'slow', paths: ['/slow'] }] },
      { name: 'sink', url: sink.url, routes: [{ name: 'sink', paths: ['/sink'] }] },
      { name: 'streaming', url: streaming.url, routes: [{ name: 'streaming', paths: ['/stream'] }] },
      { name: 'down', url: `http://127.0.0.1:${down}`, retries: 0, routes: [{ name: 'down', paths: ['/down'] }] },
      { name: 'flaky', url: `http://127.0.0.1:${flakyPort}`, retries: 32767, routes: [{ name: 'flaky', paths: ['/flaky'] }] },
      { name: 'flaky-post', url: `http://127.0.0.1:${flakyPostPort}`, retries: 32767, routes: [{ name: 'flaky-post', paths: ['/flaky-post'] }] },
      { name: 'tls-upstream', url: `https://127.0.0.1:${(secure.address() as AddressInfo).port}/in`, routes: [{ name: 'tls', paths: ['/tls'] }] },
    ],
    routes: [{ name: 'no-service', paths: ['/nosvc'] }],
  });
});

after(async () => {
  await gw?.stop();
  await Promise.all([echo?.close(), custom?.close(), hold?.close(), sink?.close(), streaming?.close()]);
  secure?.closeAllConnections();
  await new Promise((r) => secure?.close(r));
});

describe('headers', () => {
  test('upstream request: hop-by-hop and Connection-listed headers removed, untrusted X-Forwarded-* replaced, Via appended', async () => {
    const reply = await rawRequest(portOf(gw.http), [
      'GET /strip/headers?q=1 HTTP/1.1',
      'Host: Example.TEST:8123',
      'Connection: close, X-Secret',
      'X-Secret: hidden',
      'Keep-Alive: timeout=5',
      'Proxy-Connection: keep-alive',
      'Proxy: http://evil.example',
      'TE: gzip',
      'Upgrade: h2c',
      'Trailer: x-t',
      'Proxy-Authorization: Basic Zm9vOmJhcg==',
      'X-Forwarded-For: 203.0.113.9',
      'X-Forwarded-Proto: https',
      'X-Forwarded-Host: evil.example',
      'X-Forwarded-Port: 1',
      'X-Forwarded-Path: /evil',
      'X-Forwarded-Prefix: /evil',
      'X-Real-IP: 203.0.113.10',
      'Via: 1.0 client-proxy',
      'X-Custom: kept',
    ]);
    assert.equal(reply.status, 200, reply.raw);
    const seen = JSON.parse(reply.body);
    const h = seen.headers;
    for (const name of ['x-secret', 'keep-alive', 'proxy-connection', 'proxy', 'te', 'upgrade', 'trailer']) assert.equal(h[name], undefined, `${name} must not reach the upstream`);
    assert.equal(h['proxy-authorization'], 'Basic Zm9vOmJhcg==', 'Proxy-Authorization is end to end');
    assert.equal(h['x-custom'], 'kept');
    assert.equal(h['x-forwarded-for'], '203.0.113.9, 127.0.0.1', 'appended to');
    assert.equal(h['x-forwarded-proto'], 'http');
    assert.equal(h['x-forwarded-host'], 'example.test');
    assert.equal(h['x-forwarded-port'], String(portOf(gw.http)));
    assert.equal(h['x-forwarded-path'], '/strip/headers');
    assert.equal(h['x-forwarded-prefix'], '/strip');
    assert.equal(h['x-real-ip'], '127.0.0.1');
    assert.equal(h.via, `1.0 client-proxy, ${VIA}`);
    assert.equal(h.host, `127.0.0.1:${echo.port}`, 'the service host and its non-default port');
    assert.match(h['x-kong-request-id'], /^[0-9a-f-]{36}$/);
    assert.equal(reply.headers['x-kong-request-id'], h['x-kong-request-id'], 'the same request id both ways');
    assert.equal(seen.path, '/base/headers');
    assert.equal(seen.query, 'q=1');
  });

  test('a header the gateway vouches for never comes from the client, in any spelling an upstream may normalise (case, `_` for `-`)', async () => {
    const spoofed = [
      'X_Authenticated_Scope: admin', // WSGI/CGI read it as HTTP_X_AUTHENTICATED_SCOPE
      'x-authenticated_userid: root',
      'X-Authenticated-Groups: admins',
      'X-Consumer-Username: root',
      'X_Consumer_ID: 1',
      'X-Consumer-Groups: admins',
      'X-Credential-Identifier: client',
      'X_Credential_Username: client',
      'X-Anonymous-Consumer: false',
      'X_Forwarded_For: 203.0.113.1',
      'X_Forwarded_Proto: https',
      'x_forwarded_host: evil.example',
      'X-Forwarded-Ssl: on',
      'X-Forwarded-Scheme: https',
      'X_Real_IP: 203.0.113.2',
      'Forwarded: for=203.0.113.3;proto=https;host=evil.example',
      'X_Kong_Request_Id: forged',
    ];
    const reply = await rawRequest(portOf(gw.http), ['GET /strip/spoof HTTP/1.1', 'Host: spoof.test', ...spoofed, 'api_key: kept', 'X-Custom_Thing: kept']);
    assert.equal(reply.status, 200, reply.raw);
    const h = JSON.parse(reply.body).headers;
    for (const line of spoofed) {
      const name = line.slice(0, line.indexOf(':')).toLowerCase();
      const canonical = name.replaceAll('_', '-');
      if (name !== canonical) assert.equal(h[name], undefined, `${name} must not reach the upstream`);
    }
    for (const name of ['x-authenticated-groups', 'x-consumer-username', 'x-consumer-groups', 'x-credential-identifier', 'x-anonymous-consumer', 'x-forwarded-ssl', 'x-forwarded-scheme', 'forwarded']) {
      assert.equal(h[name], undefined, `${name} must not reach the upstream`);
    }
    assert.equal(h['x-forwarded-for'], '127.0.0.1');
    assert.equal(h['x-forwarded-proto'], 'http');
    assert.equal(h['x-forwarded-host'], 'spoof.test');
    assert.equal(h['x-real-ip'], '127.0.0.1');
    assert.notEqual(h['x-kong-request-id'], 'forged');
    assert.equal(h.api_key, 'kept', 'other headers with underscores pass');
    assert.equal(h['x-custom_thing'], 'kept');
  });

  test('TE: trailers is the one TE value forwarded', async () => {
    const reply = await request(`${gw.http}/strip/te`, { headers: { te: 'trailers' } });
    assert.equal(reply.json().headers.te, 'trailers');
  });

  test('no X-Forwarded-Prefix when nothing was stripped', async () => {
    const reply = await request(`${gw.http}/nostrip/a`);
    assert.equal(reply.json().headers['x-forwarded-prefix'], undefined);
    assert.equal(reply.json().path, '/base/nostrip/a');
  });

  test('trusted peers: their X-Forwarded-* and X-Real-IP are believed (and an https-only route accepts them)', async () => {
    const trusting = await startGateway({
      gateway: { proxy_listen: ['127.0.0.1:0'], trusted_ips: ['127.0.0.1/32'] },
      services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/t'], protocols: ['https'] }] }],
    });
    try {
      const reply = await request(`${trusting.http}/t/x`, {
        headers: {
          'x-forwarded-for': '203.0.113.9',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'public.example',
          'x-forwarded-port': '443',
          'x-forwarded-path': '/api/t/x',
          'x-forwarded-prefix': '/api',
          'x-real-ip': '203.0.113.10',
          'x-forwarded-ssl': 'on',
          forwarded: 'for=203.0.113.9;proto=https',
          x_forwarded_host: 'evil.example',
        },
      });
      assert.equal(reply.status, 200, reply.text);
      const h = reply.json().headers;
      assert.equal(h['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
      assert.equal(h['x-forwarded-proto'], 'https');
      assert.equal(h['x-forwarded-host'], 'public.example');
      assert.equal(h['x-forwarded-port'], '443');
      assert.equal(h['x-forwarded-path'], '/api/t/x');
      assert.equal(h['x-forwarded-prefix'], '/api');
      assert.equal(h['x-real-ip'], '203.0.113.10');
      assert.equal(h['x-forwarded-ssl'], 'on', 'the forwarding headers of a trusted proxy pass');
      assert.equal(h.forwarded, 'for=203.0.113.9;proto=https');
      assert.equal(h.x_forwarded_host, undefined, 'but not in a spelling only a normalising upstream reads as one');
    } finally {
      await trusting.stop();
    }
  });

  test('downstream response: upstream hop-by-hop headers removed, Via appended, upstream Server kept', async () => {
    const reply = await rawRequest(portOf(gw.http), ['GET /custom/hop HTTP/1.1', 'Host: x']);
    assert.equal(reply.status, 200);
    assert.equal(reply.body, '2\r\nok\r\n0\r\n\r\n', 'chunked, without trailers');
    assert.equal(reply.headers['x-up-secret'], undefined, 'a header named in Connection');
    assert.equal(reply.headers['keep-alive'], undefined);
    assert.equal(reply.headers.trailer, undefined, 'the client did not ask for trailers');
    assert.equal(reply.headers.via, `1.0 upstream-proxy, ${VIA}`);
    assert.equal(reply.headers.server, 'upstream-server');
    assert.equal(reply.headers['x-plain'], 'yes');
    const plain = await request(`${gw.http}/strip/x`);
    assert.equal(plain.headers.server, 'tollgate/0.1.0', 'added when the upstream sent none');
    assert.equal(plain.headers.via, VIA);
  });

  test('latency headers: upstream and proxy latency on proxied answers, response latency on the gateway’s own', async () => {
    const proxied = await request(`${gw.http}/strip/x`);
    assert.match(String(proxied.headers['x-kong-upstream-latency']), /^\d+$/);
    assert.match(String(proxied.headers['x-kong-proxy-latency']), /^\d+$/);
    assert.equal(proxied.headers['x-kong-response-latency'], undefined);
    const own = await request(`${gw.http}/nothing-here`);
    assert.equal(own.status, 404);
    assert.match(String(own.headers['x-kong-response-latency'] ?? own.headers['x-kong-request-id']), /\S/);
    assert.equal(own.headers['x-kong-upstream-latency'], undefined);
  });
});

describe('host and path', () => {
  test('preserve_host sends the client Host unchanged; otherwise the service host:port', async () => {
    const preserved = await request(`${gw.http}/preserve/a`, { headers: { host: 'Client.Example:8123' } });
    assert.equal(preserved.json().headers.host, 'Client.Example:8123');
    const replaced = await request(`${gw.http}/strip/a`, { headers: { host: 'client.example' } });
    assert.equal(replaced.json().headers.host, `127.0.0.1:${echo.port}`);
  });

  test('an absolute-form request target is routed by its path, and its host stands for Host (RFC 9112 §3.2.2)', async () => {
    const reply = await rawRequest(portOf(gw.http), ['GET http://Absolute.Example:8123/preserve/a?x=1 HTTP/1.1', 'Host: ignored.example']);
    assert.equal(reply.status, 200, reply.raw);
    const seen = JSON.parse(reply.body);
    assert.equal(seen.headers.host, 'Absolute.Example:8123');
    assert.equal(seen.path, '/base/a');
    assert.equal(seen.query, 'x=1');
    assert.equal((await rawRequest(portOf(gw.http), ['GET http://x.example HTTP/1.1', 'Host: x.example'])).status, 404, 'no path is /');
  });

  test('the upstream Host leaves out the default port of the scheme', () => {
    const service = (protocol: Service['protocol'], host: string, port: number) => ({ protocol, host, port }) as Service;
    const client = { preserveHost: false, rawHost: 'x' };
    assert.equal(upstreamHost(service('http', 'a.example', 80), client), 'a.example');
    assert.equal(upstreamHost(service('https', 'a.example', 443), client), 'a.example');
    assert.equal(upstreamHost(service('http', 'a.example', 443), client), 'a.example:443');
    assert.equal(upstreamHost(service('https', 'a.example', 80), client), 'a.example:80');
    assert.equal(upstreamHost(service('http', '::1', 8080), client), '[::1]:8080');
  });

  test('strip_path: the matched prefix is removed and the rest joined to the service path; the query is kept', async () => {
    const cases: [string, string, string][] = [
      ['/strip', '/base', ''],
      ['/strip/', '/base/', ''],
      ['/strip/a/b?x=1&y=%20z', '/base/a/b', 'x=1&y=%20z'],
      ['/stripped', '/base/ped', ''],
      ['/nostrip/a', '/base/nostrip/a', ''],
      ['/strip/a/../b', '/base/b', ''],
    ];
    for (const [path, upstreamPath, query] of cases) {
      const seen = (await request(gw.http + path)).json();
      assert.equal(seen.path, upstreamPath, path);
      assert.equal(seen.query, query, path);
    }
  });
});

describe('bodies', () => {
  test('5 MB both ways, checked by sha256', async () => {
    const body = randomBytes(FIVE_MB);
    const reply = await request(`${gw.http}/custom/big`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['x-request-length'], String(FIVE_MB));
    assert.equal(reply.headers['x-request-sha256'], sha256(body));
    assert.equal(reply.body.length, FIVE_MB);
    assert.equal(sha256(reply.body), sha256(bigResponse));
  });

  test('a chunked request body (no Content-Length) is streamed through intact', async () => {
    const pieces = Array.from({ length: 40 }, () => randomBytes(64 * 1024 + 7));
    const reply = await new Promise<{ status: number; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
      const req = http.request(`${gw.http}/custom/big`, { method: 'PUT', agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
      });
      req.on('error', reject);
      for (const p of pieces) req.write(p);
      req.end();
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['x-request-sha256'], sha256(Buffer.concat(pieces)));
  });

  /** Declares a body of `size` bytes with `Connection: close`, reads the answer and the server's FIN, then writes the body: the status line, and how the writing ended. */
  async function bodyAfterAnswer(base: string, size: number): Promise<{ status: string; body: string }> {
    // Half-open allowed: this client goes on writing after the server's FIN, as clients that stream a body do.
    const socket = net.connect({ port: Number(new URL(base).port), host: '127.0.0.1', allowHalfOpen: true });
    socket.write(`POST /limited HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${size}\r\n\r\n`);
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    // The answer, then the server's end of the connection.
    await new Promise((resolve) => socket.once('end', resolve));
    const body = await new Promise<string>((resolve) => {
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      socket.end(Buffer.alloc(size, 'a'), (err?: NodeJS.ErrnoException | null) => resolve(err ? (err.code ?? err.message) : 'written'));
    });
    socket.destroy();
    return { status: received.split('\r\n')[0], body };
  }

  test('413 over the body limit, by Content-Length (never sent upstream) and by counting a chunked body', async () => {
    const small = await startGateway({
      gateway: { proxy_listen: ['127.0.0.1:0'], client_max_body_size: 1024, max_header_size: 2048 },
      services: [
        { name: 'echo', url: echo.url, routes: [{ paths: ['/'] }] },
        { name: 'sink', url: sink.url, routes: [{ paths: ['/sink'], strip_path: false }] },
      ],
    });
    try {
      const before = echo.requests.length;
      const declared = await request(`${small.http}/limited`, { method: 'POST', body: Buffer.alloc(2000, 'a') });
      assert.equal(declared.status, 413);
      assert.equal(declared.json().message, 'Request size limit exceeded');
      assert.equal(echo.requests.length, before, 'the upstream never saw it');
      // A client still writing a large declared body reads the 413 (the rest is read and dropped), not EPIPE.
      for (let i = 0; i < 3; i++) assert.equal((await request(`${small.http}/limited`, { method: 'POST', body: Buffer.alloc(20 * 1024 * 1024, 'a') })).status, 413);
      // Also when the answer is out before the client writes its body, on a connection it asked to close:
      // the connection lingers (reads and drops the body) instead of resetting under the client.
      assert.deepEqual(await bodyAfterAnswer(small.http, 64 * 1024 * 1024), { status: 'HTTP/1.1 413 Payload Too Large', body: 'written' });

      const fits = await request(`${small.http}/limited`, { method: 'POST', body: Buffer.alloc(1024, 'a') });
      assert.equal(fits.status, 200, 'exactly the limit is allowed');

      const chunked = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${small.http}/limited`, { method: 'POST', agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        for (let i = 0; i < 4; i++) req.write(Buffer.alloc(600, 'b'));
        req.end();
      });
      assert.equal(chunked, 413);

      // A chunked body that goes over the limit once the upstream already gets it: 413, and the
      // upstream request (with its socket) is dropped rather than left waiting for the rest.
      const overflowing = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${small.http}/sink`, { method: 'POST', agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.write(Buffer.alloc(600, 'c'));
        waitFor(() => sink.open > 0, 'the upstream to get the first chunk').then(() => req.end(Buffer.alloc(600, 'c')), reject);
      });
      assert.equal(overflowing, 413);
      await waitFor(() => sink.active === 0, 'the upstream request to be torn down after the 413');
      assert.ok(sink.open <= 1, 'at most one idle pooled connection is left');

      // 431: headers over max_header_size.
      const big = await rawRequest(portOf(small.http), ['GET /limited HTTP/1.1', 'Host: x', `X-Big: ${'h'.repeat(3000)}`]);
      assert.equal(big.status, 431);
      assert.equal(JSON.parse(big.body).message, 'Request header or cookie too large');

      assert.equal((await request(`${small.http}/still-alive`)).status, 200, 'the gateway keeps serving');
    } finally {
      await small.stop();
    }
  });
});

describe('upstream connections', () => {
  test('sequential requests reuse one keep-alive upstream connection', async () => {
    const pooled = await countingUpstream((_req, res) => res.end('pooled'));
    const pooling = await startGateway({ gateway: { proxy_listen: ['127.0.0.1:0'] }, services: [{ name: 'pooled', url: pooled.url, routes: [{ paths: ['/'] }] }] });
    try {
      for (let i = 0; i < 5; i++) assert.equal((await request(`${pooling.http}/r${i}`)).text, 'pooled');
      assert.equal(pooled.accepted, 1);
    } finally {
      await pooling.stop();
      await pooled.close();
    }
  });

  test('write timeout: an upstream that stops reading the body → 504', async () => {
    const deaf = await countingUpstream((req) => req.pause());
    const writing = await startGateway({
      gateway: { proxy_listen: ['127.0.0.1:0'] },
      services: [{ name: 'deaf', url: deaf.url, write_timeout: 200, routes: [{ paths: ['/'] }] }],
    });
    try {
      const reply = await request(`${writing.http}/upload`, { method: 'POST', body: Buffer.alloc(32 * 1024 * 1024) });
      assert.equal(reply.status, 504);
      assert.equal(reply.json().message, 'The upstream server is timing out');
    } finally {
      await writing.stop();
      await deaf.close();
    }
  });
});

describe('upstream failures', () => {
  test('read timeout → 504 and the upstream connection is closed', async () => {
    const reply = await request(`${gw.http}/slow`);
    assert.equal(reply.status, 504);
    assert.equal(reply.json().message, 'The upstream server is timing out');
    assert.match(String(reply.headers['content-type']), /^application\/json/);
    await waitFor(() => hold.open === 0, 'the timed-out upstream connection to close');
  });

  test('upstream down → 502 JSON', async () => {
    const reply = await request(`${gw.http}/down`);
    assert.equal(reply.status, 502);
    assert.equal(reply.json().message, 'An invalid response was received from the upstream server');
  });

  test('a 304 carrying the Content-Length of the full representation reaches the client as a 304', async () => {
    const reply = await rawRequest(portOf(gw.http), ['GET /custom/not-modified HTTP/1.1', 'Host: a', 'If-None-Match: "v1"']);
    assert.equal(reply.status, 304);
    assert.equal(reply.headers.etag, '"v1"');
    assert.equal(reply.body, '');
  });

  test('an upstream that resets before answering → 502', async () => {
    const reply = await request(`${gw.http}/custom/reset-before`);
    assert.equal(reply.status, 502);
  });

  test('retries: an upstream that refuses connections and then accepts gets the request once', async () => {
    let received = 0;
    const late = http.createServer((_req, res) => {
      received++;
      res.end('finally');
    });
    const pending = request(`${gw.http}/flaky`);
    // The gateway is retrying refused connections (up to 32767 times) while the upstream comes up.
    await new Promise((r) => setTimeout(r, 20));
    await new Promise<void>((r) => late.listen(flakyPort, '127.0.0.1', r));
    try {
      const reply = await pending;
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.text, 'finally');
      assert.equal(received, 1);
    } finally {
      late.closeAllConnections();
      await new Promise((r) => late.close(r));
    }
  });

  test('retries with a streamed request body: the body is not read before the connection is up, so it arrives whole', async () => {
    const bodies: string[] = [];
    const late = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        bodies.push(sha256(Buffer.concat(chunks)));
        res.end('stored');
      });
    });
    const body = randomBytes(256 * 1024);
    const pending = request(`${gw.http}/flaky-post`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
    await new Promise((r) => setTimeout(r, 20));
    await new Promise<void>((r) => late.listen(flakyPostPort, '127.0.0.1', r));
    try {
      const reply = await pending;
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(bodies, [sha256(body)]);
    } finally {
      late.closeAllConnections();
      await new Promise((r) => late.close(r));
    }
  });

  test('an upstream that resets mid-response: the client sees a truncated response and the gateway lives on', async () => {
    const outcome = await new Promise<{ status: number; received: number; complete: boolean }>((resolve) => {
      http
        .get(`${gw.http}/custom/reset-mid`, { agent: false }, (res) => {
          let received = 0;
          res.on('data', (c) => (received += c.length));
          const done = () => resolve({ status: res.statusCode!, received, complete: res.complete });
          res.on('end', done);
          res.on('error', done);
          res.on('close', done);
        })
        .on('error', () => resolve({ status: 0, received: 0, complete: false }));
    });
    assert.equal(outcome.status, 200);
    assert.equal(outcome.complete, false, 'never a silently short response');
    assert.ok(outcome.received < 100_000);
    assert.equal((await request(`${gw.http}/strip/after-reset`)).status, 200);
  });

  test('an upstream that resets mid-response: an HTTP/2 client gets its stream reset, never a clean short end', async () => {
    const session = http2.connect(gw.h2c);
    try {
      const outcome = await new Promise<string>((resolve) => {
        const stream = session.request({ ':path': '/custom/reset-mid' });
        let received = 0;
        stream.on('data', (c) => (received += c.length));
        stream.on('end', () => resolve(`clean end after ${received} bytes`));
        stream.on('error', (err) => resolve(`error: ${err.message}`));
      });
      assert.match(outcome, /^error: .*NGHTTP2_INTERNAL_ERROR/);
    } finally {
      session.destroy();
    }
  });

  test('an upstream that stalls mid-body: read timeout cuts the response short and closes the upstream connection', async () => {
    const stalling = await countingUpstream((_req, res) => {
      res.writeHead(200, { 'content-length': 1000 });
      res.write('partial');
    });
    const quick = await startGateway({
      gateway: { proxy_listen: ['127.0.0.1:0'] },
      services: [{ name: 'stalling', url: stalling.url, read_timeout: 200, routes: [{ paths: ['/'] }] }],
    });
    try {
      const outcome = await new Promise<{ status: number; complete: boolean; received: number }>((resolve) => {
        http.get(`${quick.http}/x`, { agent: false }, (res) => {
          let received = 0;
          res.on('data', (c) => (received += c.length));
          res.on('close', () => resolve({ status: res.statusCode!, complete: res.complete, received }));
        });
      });
      assert.deepEqual(outcome, { status: 200, complete: false, received: 7 });
      await waitFor(() => stalling.open === 0, 'the stalled upstream connection to close');
    } finally {
      await quick.stop();
      await stalling.close();
    }
  });
});

describe('clients that go away', () => {
  test('a client aborting mid-body leaves no upstream connection open', async () => {
    const socket = net.connect(portOf(gw.http), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: ${FIVE_MB}\r\n\r\n`);
    socket.write(Buffer.alloc(256 * 1024, 'z'));
    await waitFor(() => sink.active > 0, 'the upstream to get the request');
    socket.destroy();
    // The upstream request is torn down with its connection; undici may open one idle pooled connection in its place.
    await waitFor(() => sink.active === 0, 'the upstream request to be torn down after the client left');
    assert.ok(sink.open <= 1, 'at most one idle pooled connection is left');
  });

  test('a client aborting mid-response leaves no upstream connection open', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = http.get(`${gw.http}/stream`, { agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => (err.message.includes('aborted') || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
    });
    await waitFor(() => streaming.open === 0, 'the streaming upstream connection to close');
    assert.ok(streaming.accepted >= 1);
  });

  test('an HTTP/2 client cancelling its stream mid-response or mid-body leaves no upstream connection open', async () => {
    for (const url of [gw.h2c, gw.https]) {
      const session = http2.connect(url, { rejectUnauthorized: false });
      try {
        const reading = session.request({ ':path': '/stream' });
        await new Promise((r) => reading.once('data', r));
        reading.close(http2.constants.NGHTTP2_CANCEL);
        await waitFor(() => streaming.open === 0, `the streaming upstream connection to close (${url})`);

        const uploading = session.request({ ':path': '/sink', ':method': 'POST' }, { endStream: false });
        uploading.write(Buffer.alloc(64 * 1024, 'u'));
        await waitFor(() => sink.active > 0, 'the upstream to get the request');
        uploading.close(http2.constants.NGHTTP2_CANCEL);
        await waitFor(() => sink.active === 0, `the sink upstream request to be torn down (${url})`);
        assert.ok(sink.open <= 1, 'at most one idle pooled connection is left');
      } finally {
        session.destroy();
      }
    }
  });
});

describe('https upstream', () => {
  test('proxies over TLS to the service (self-signed accepted unless tls_verify)', async () => {
    const reply = await request(`${gw.http}/tls/x`);
    assert.equal(reply.status, 200, reply.text);
    const seen = reply.json();
    assert.equal(seen.encrypted, true);
    assert.equal(seen.path, '/in/x');
    assert.equal(seen.host, `127.0.0.1:${(secure.address() as AddressInfo).port}`);
  });
});

describe("the gateway's own answers", () => {
  test('404 no route, JSON, with a request id', async () => {
    const reply = await request(`${gw.http}/nothing-here`);
    assert.equal(reply.status, 404);
    assert.match(String(reply.headers['content-type']), /^application\/json/);
    const body = reply.json();
    assert.equal(body.message, 'no Route matched with those values');
    assert.equal(body.request_id, reply.headers['x-kong-request-id']);
  });

  test('HEAD: proxied with the upstream headers and no body; a HEAD 404 has no body either', async () => {
    const proxied = await rawRequest(portOf(gw.http), ['HEAD /custom/plain HTTP/1.1', 'Host: x']);
    assert.equal(proxied.status, 200);
    assert.equal(proxied.headers['content-length'], '5');
    assert.equal(proxied.body, '');
    const missing = await rawRequest(portOf(gw.http), ['HEAD /nothing-here HTTP/1.1', 'Host: x']);
    assert.equal(missing.status, 404);
    assert.equal(missing.body, '');
  });

  test('TRACE is refused with 405', async () => {
    const reply = await request(`${gw.http}/strip/x`, { method: 'TRACE' });
    assert.equal(reply.status, 405);
    assert.equal(reply.json().message, 'Method not allowed');
  });

  test('an https-only route over http: 426 with Upgrade, or the configured redirect keeping path and query', async () => {
    const refused = await request(`${gw.http}/secure/a?b=1`);
    assert.equal(refused.status, 426);
    assert.equal(refused.json().message, 'Please use HTTPS protocol');
    assert.equal(refused.headers.upgrade, 'TLS/1.2, HTTP/1.1');
    assert.match(String(refused.headers.connection), /upgrade/i);

    const redirected = await request(`${gw.http}/redir/a?b=1`, { headers: { host: 'api.example:8000' } });
    assert.equal(redirected.status, 308);
    assert.equal(redirected.headers.location, 'https://api.example/redir/a?b=1');
    // nginx's $host, which Kong's Location is built from, is lowercase and without the port.
    const mixedCase = await request(`${gw.http}/redir/a`, { headers: { host: 'API.Example:8000' } });
    assert.equal(mixedCase.headers.location, 'https://api.example/redir/a');

    const overTls = await request(`${gw.https}/secure/a?b=1`);
    assert.equal(overTls.status, 200);
    assert.equal(overTls.json().headers['x-forwarded-proto'], 'https');
  });

  test('a route without a service: 503 no Service found', async () => {
    const reply = await request(`${gw.http}/nosvc`);
    assert.equal(reply.status, 503);
    assert.equal(reply.json().message, 'no Service found with those values');
  });

  test('an Upgrade the gateway does not offer (h2c, as curl --http2 sends) is ignored: the request is served over HTTP/1.1', async () => {
    const reply = await rawRequest(portOf(gw.http), [
      'GET /strip/upgrade HTTP/1.1',
      'Host: x',
      'Connection: Upgrade, HTTP2-Settings',
      'Upgrade: h2c',
      'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA',
    ]);
    assert.equal(reply.status, 200, reply.raw);
    const seen = JSON.parse(reply.body);
    assert.equal(seen.path, '/base/upgrade');
    assert.equal(seen.headers.upgrade, undefined);
    assert.equal(seen.headers['http2-settings'], undefined);
    const withBody = await rawRequest(portOf(gw.http), ['POST /strip/upgrade HTTP/1.1', 'Host: x', 'Connection: Upgrade', 'Upgrade: h2c', 'Content-Length: 3'], 'abc');
    assert.equal(withBody.status, 400, 'one with a body cannot be read after the upgrade: refused');
  });

  test('garbage on the proxy port gets 400 and the gateway keeps serving', async () => {
    const raw = await rawExchange(portOf(gw.http), 'THIS IS NOT HTTP\r\n\r\n');
    assert.match(raw, /^HTTP\/1\.1 400 /);
    assert.equal((await request(`${gw.http}/strip/x`)).status, 200);
  });
});

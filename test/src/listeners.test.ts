/**
 * Listeners: TLS with ALPN h2 + http/1.1 on one port, plaintext h2c prior knowledge + HTTP/1.1 on one
 * port, the self-signed certificate generated once and reused, a configured certificate, and bad bytes
 * that get a 400 without hurting the process.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import selfsigned from 'selfsigned';
import { request, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../helpers/gateway.ts';
import { portOf, rawExchange } from '../helpers/support.ts';

let gw: TestGateway;
let echo: Upstream;
let hasher: Upstream;
const blob = randomBytes(5 * 1024 * 1024);

before(async () => {
  echo = await startUpstream();
  hasher = await startUpstream((req, res) => {
    const hash = createHash('sha256');
    req.on('data', (c) => hash.update(c));
    req.on('end', () => (req.url === '/blob' ? res.end(blob) : res.end(hash.digest('hex'))));
  });
  gw = await startGateway({
    services: [
      { name: 'echo', url: echo.url, routes: [{ name: 'any', paths: ['/echo'] }, { name: 'by-host', hosts: ['api.example'], paths: ['/hosted'] }] },
      { name: 'hasher', url: hasher.url, routes: [{ paths: ['/hash'] }] },
    ],
  });
});

after(async () => {
  await gw?.stop();
  await echo?.close();
  await hasher?.close();
});

interface H2Reply {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
}

function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let responseHeaders: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => (responseHeaders = h));
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, body: Buffer.concat(chunks) }));
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

/** Runs `check` on an h2 session to the h2c port, then on one to the TLS port. */
async function onEachH2Port(check: (session: http2.ClientHttp2Session, url: string) => Promise<void>): Promise<void> {
  for (const url of [gw.h2c, gw.https]) {
    const session = await connectH2(url);
    try {
      await check(session, url);
    } finally {
      session.close();
    }
  }
}

function connectH2(url: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { rejectUnauthorized: false });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

function alpn(port: number, protocols: string[]): Promise<string | false> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ALPNProtocols: protocols, rejectUnauthorized: false }, () => {
      resolve(socket.alpnProtocol ?? false);
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

function peerCertificate(port: number): Promise<{ fingerprint256: string; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerCertificate();
      resolve({ fingerprint256: cert.fingerprint256, raw: cert.raw });
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

test('the TLS port negotiates h2 and http/1.1 by ALPN and serves both', async () => {
  const port = portOf(gw.https);
  assert.equal(await alpn(port, ['h2', 'http/1.1']), 'h2');
  assert.equal(await alpn(port, ['http/1.1']), 'http/1.1');

  const session = await connectH2(gw.https);
  try {
    const reply = await h2Request(session, { ':method': 'GET', ':path': '/echo/a?x=1' });
    assert.equal(reply.status, 200);
    const seen = JSON.parse(reply.body.toString());
    assert.equal(seen.path, '/a');
    assert.equal(seen.query, 'x=1');
    assert.equal(seen.headers['x-forwarded-proto'], 'https');
    assert.equal(seen.headers.via, '2 tollgate/0.1.0', 'Via names the downstream HTTP version');
    assert.equal(seen.headers[':authority'], undefined, 'no pseudo-headers upstream');
  } finally {
    session.close();
  }

  // 5 MB each way over one h2 stream (flow control and backpressure through the proxy).
  const upload = randomBytes(5 * 1024 * 1024);
  const session2 = await connectH2(gw.https);
  try {
    const [up, down] = await Promise.all([
      h2Request(session2, { ':method': 'PUT', ':path': '/hash' }, upload),
      h2Request(session2, { ':method': 'GET', ':path': '/hash/blob' }),
    ]);
    assert.equal(up.body.toString(), createHash('sha256').update(upload).digest('hex'));
    assert.equal(createHash('sha256').update(down.body).digest('hex'), createHash('sha256').update(blob).digest('hex'));
  } finally {
    session2.close();
  }

  const http1 = await request(`${gw.https}/echo/b`);
  assert.equal(http1.status, 200);
  assert.equal(http1.json().headers.via, '1.1 tollgate/0.1.0');
});

test('an `ssl` listener without `http2` serves HTTP/1.1 over TLS and never negotiates h2', async () => {
  const tlsOnly = await startGateway({
    gateway: { proxy_listen: ['127.0.0.1:0 ssl'] },
    services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/echo'] }] }],
  });
  try {
    assert.equal(await alpn(portOf(tlsOnly.http), ['h2', 'http/1.1']), 'http/1.1');
    await assert.rejects(alpn(portOf(tlsOnly.http), ['h2']), /no application protocol/);
    const reply = await request(`${tlsOnly.http}/echo/x`);
    assert.equal(reply.status, 200);
    assert.equal(reply.json().headers['x-forwarded-proto'], 'https');
  } finally {
    await tlsOnly.stop();
  }
});

test('over h2, :authority is the host routes match on', async () => {
  const session = await connectH2(gw.https);
  try {
    const hosted = await h2Request(session, { ':method': 'GET', ':path': '/hosted', ':authority': 'api.example' });
    assert.equal(hosted.status, 200);
    assert.equal(JSON.parse(hosted.body.toString()).headers['x-forwarded-host'], 'api.example');
    const other = await h2Request(session, { ':method': 'GET', ':path': '/hosted', ':authority': 'other.example' });
    assert.equal(other.status, 404);
  } finally {
    session.close();
  }
});

test('the plaintext http2 port speaks h2c with prior knowledge and HTTP/1.1', async () => {
  const session = await connectH2(gw.h2c);
  try {
    const body = randomBytes(1024 * 1024 + 3);
    const [get, post] = await Promise.all([
      h2Request(session, { ':method': 'GET', ':path': '/echo/c' }),
      h2Request(session, { ':method': 'POST', ':path': '/hash', 'content-type': 'application/octet-stream' }, body),
    ]);
    assert.equal(get.status, 200);
    assert.equal(JSON.parse(get.body.toString()).headers['x-forwarded-proto'], 'http');
    assert.equal(post.status, 200);
    assert.equal(post.body.toString(), createHash('sha256').update(body).digest('hex'), 'a request body over h2c arrives intact');
  } finally {
    session.close();
  }
  const http1 = await request(`${gw.h2c}/echo/d`);
  assert.equal(http1.status, 200);
  assert.equal(http1.json().path, '/d');
});

test('bad bytes: 400 on HTTP/1.1 ports (JSON, also without Host), 405 for CONNECT, a closed connection for a broken h2 session, and the process keeps serving', async () => {
  for (const url of [gw.http, gw.h2c]) {
    const raw = await rawExchange(portOf(url), 'GARBAGE\r\n\r\n');
    assert.match(raw, /^HTTP\/1\.1 400 /, url);
    const badHeader = await rawExchange(portOf(url), 'GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    assert.match(badHeader, /^HTTP\/1\.1 400 /, url);
  }
  for (const url of [gw.http, gw.h2c, gw.https]) {
    const open = (bytes: string) => rawExchange(portOf(url), bytes, undefined, { tls: url === gw.https });
    // HTTP/1.1 without Host (RFC 9112 §3.2), as a request and as a WebSocket handshake: a JSON 400, not an empty one.
    const hostless = await open('GET /echo/x HTTP/1.1\r\nConnection: close\r\n\r\n');
    assert.match(hostless, /^HTTP\/1\.1 400 /, url);
    assert.match(hostless, /"message":"Bad Request: HTTP\/1\.1 requests need a Host header"/, url);
    const hostlessUpgrade = await open('GET /echo/x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
    assert.match(hostlessUpgrade, /^HTTP\/1\.1 400 /, url);
    // HTTP/1.0 needs none.
    assert.match(await open('GET /echo/x HTTP/1.0\r\n\r\n'), /^HTTP\/1\.1 200 /, url);
    // CONNECT (a forward-proxy tunnel) is refused with 405 instead of a silently dropped connection.
    const connect = await open('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assert.match(connect, /^HTTP\/1\.1 405 /, url);
    assert.match(connect, /"message":"Method not allowed"/, url);
  }
  // TLS port: a garbage TLS handshake is dropped.
  const tlsGarbage = await rawExchange(portOf(gw.https), 'NOT A TLS HELLO\r\n\r\n');
  assert.doesNotMatch(tlsGarbage, /^HTTP/);
  // h2c: the preface followed by junk frames ends that session only.
  await rawExchange(portOf(gw.h2c), Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), randomBytes(64)]));
  // A connection that closes in the middle of the preface.
  await new Promise<void>((resolve) => {
    const s = net.connect(portOf(gw.h2c), '127.0.0.1', () => s.end('PRI * HT'));
    s.on('close', () => resolve());
    s.on('error', () => resolve());
    s.resume();
  });
  for (const url of [gw.http, gw.https, gw.h2c]) assert.equal((await request(`${url}/echo/alive`)).status, 200, url);
});

test('h2 sessions (h2c and TLS) allow 128 concurrent streams, as Kong, not an unbounded number', async () => {
  await onEachH2Port(async (session, url) => {
    // The server's SETTINGS frame comes before its answer to a PING.
    await new Promise((resolve) => session.ping(resolve));
    assert.equal(session.remoteSettings.maxConcurrentStreams, 128, url);
  });
});

test('over h2 (h2c and TLS), a header list over max_header_size gets 431, as over HTTP/1.1, and the session keeps serving', async () => {
  await onEachH2Port(async (session, url) => {
    // RFC 7541 §4.1 sizes: 40,000 bytes of value is over the default 32 KB; 12,000 fits (and fits the echo upstream's own 16 KB).
    const big = await h2Request(session, { ':method': 'GET', ':path': '/echo/big', 'x-big': 'h'.repeat(40_000) });
    assert.equal(big.status, 431, url);
    assert.equal(JSON.parse(big.body.toString()).message, 'Request header or cookie too large');
    const fits = await h2Request(session, { ':method': 'GET', ':path': '/echo/fits', 'x-big': 'h'.repeat(12_000) });
    assert.equal(fits.status, 200, url);
    assert.equal(JSON.parse(fits.body.toString()).headers['x-big'].length, 12_000);
  });
});

test('over h2, a gRPC call whose metadata is over max_header_size gets its 431 as a gRPC status, not JSON', async () => {
  await onEachH2Port(async (session, url) => {
    const headers = { ':method': 'POST', ':path': '/pkg.Svc/Call', 'content-type': 'application/grpc', te: 'trailers', 'x-big': 'h'.repeat(40_000) };
    const big = await h2Request(session, headers, Buffer.alloc(5));
    assert.equal(big.status, 431, url);
    assert.equal(big.headers['content-type'], 'application/grpc', url);
    assert.equal(big.headers['grpc-status'], '3', url);
    assert.equal(big.headers['grpc-message'], 'Request header or cookie too large', url);
    assert.equal(big.body.length, 0, url);
  });
});

test('over h2 (h2c and TLS), CONNECT is refused with a JSON 405, as over HTTP/1.1', async () => {
  await onEachH2Port(async (session, url) => {
    const connect = await h2Request(session, { ':method': 'CONNECT', ':authority': 'example.com:443' });
    assert.equal(connect.status, 405, url);
    assert.equal(connect.headers['content-type'], 'application/json; charset=utf-8', url);
    assert.equal(JSON.parse(connect.body.toString()).message, 'Method not allowed', url);
  });
});

test('a request waiting on a slow upstream is not an idle connection (h2 streams, HTTP/1.1 on the TLS port); idle sessions still close', async () => {
  const slow = await startUpstream((_req, res) => void setTimeout(() => res.end('late answer'), 1500));
  const patient = await startGateway({
    gateway: { client_timeout: 1000 },
    services: [{ name: 'slow', url: slow.url, routes: [{ paths: ['/slow'] }] }],
  });
  try {
    for (const url of [patient.h2c, patient.https]) {
      const session = await connectH2(url);
      try {
        const reply = await h2Request(session, { ':method': 'GET', ':path': '/slow' });
        assert.equal(reply.status, 200, url);
        assert.equal(reply.body.toString(), 'late answer', url);
        // Now idle: the gateway closes the session.
        await new Promise((r) => (session.closed ? r(undefined) : session.once('close', r)));
      } finally {
        session.destroy();
      }
    }
    const http1 = await request(`${patient.https}/slow`);
    assert.equal(http1.status, 200);
    assert.equal(http1.text, 'late answer', 'HTTP/1.1 over the h2 TLS port');
  } finally {
    await patient.stop();
    await slow.close();
  }
});

test('the h2c and TLS ports do not keep connections that never send a preface or finish a handshake', { timeout: 15_000 }, async () => {
  const strict = await startGateway({ gateway: { proxy_listen: ['127.0.0.1:0 http2', '127.0.0.1:0 ssl http2'], client_timeout: 1000 } });
  const tlsUrl = strict.gateway.proxyListeners[1].url;
  try {
    const closed = (url: string, bytes: string) =>
      new Promise<void>((resolve) => {
        const s = net.connect(portOf(url), '127.0.0.1', () => bytes && s.write(bytes));
        s.on('error', () => undefined);
        s.on('close', () => resolve());
        s.resume();
      });
    // Each resolves only when the gateway closes the connection (the test times out otherwise).
    await Promise.all([closed(strict.http, ''), closed(strict.http, 'PRI * HTTP/2.0\r\n'), closed(tlsUrl, '')]);
    assert.equal((await request(`${strict.http}/alive`)).status, 404, 'and it still serves');
  } finally {
    await strict.stop();
  }
});

test('stopping closes idle keep-alive connections on every kind of listener instead of waiting for them', { timeout: 30_000 }, async () => {
  // shutdown_timeout is far longer than this test may run: a stop that waits for idle clients fails it.
  const draining = await startGateway({
    gateway: { shutdown_timeout: 600_000 },
    services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/echo'] }] }],
  });
  const agents = [new http.Agent({ keepAlive: true }), new https.Agent({ keepAlive: true, rejectUnauthorized: false })];
  const get = (url: string, agent: http.Agent) =>
    new Promise<number>((resolve, reject) => {
      (url.startsWith('https') ? https : http).get(`${url}/echo/k`, { agent }, (res) => res.resume().on('end', () => resolve(res.statusCode!))).on('error', reject);
    });
  const sessions = [await connectH2(draining.h2c), await connectH2(draining.https)];
  try {
    assert.deepEqual(
      await Promise.all([get(draining.http, agents[0]), get(draining.h2c, agents[0]), get(draining.https, agents[1])]),
      [200, 200, 200],
    );
    for (const session of sessions) assert.equal((await h2Request(session, { ':method': 'GET', ':path': '/echo/k' })).status, 200);
    await draining.stop();
  } finally {
    for (const agent of agents) agent.destroy();
    for (const session of sessions) session.destroy();
  }
});

test('without a configured certificate, a self-signed one for localhost/127.0.0.1 is generated once and reused', async () => {
  const dataDir = tempDir();
  const config = { services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/echo'] }] }] };
  const first = await startGateway(config, { dataDir });
  let fingerprint: string;
  try {
    fingerprint = (await peerCertificate(portOf(first.https))).fingerprint256;
  } finally {
    await first.stop();
  }
  const certFile = join(dataDir, 'tls', 'gateway.crt');
  assert.ok(existsSync(certFile));
  assert.ok(existsSync(join(dataDir, 'tls', 'gateway.key')));
  const cert = new X509Certificate(readFileSync(certFile));
  assert.equal(cert.checkHost('localhost'), 'localhost');
  assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(cert.fingerprint256, fingerprint, 'the file is what the listener served');

  const second = await startGateway(config, { dataDir });
  try {
    assert.equal((await peerCertificate(portOf(second.https))).fingerprint256, fingerprint, 'the same certificate after a restart');
  } finally {
    await second.stop();
  }
});

test('a configured PEM pair is served instead', async () => {
  const dir = tempDir();
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'configured.example' }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' } as never);
  writeFileSync(join(dir, 'my.crt'), pems.cert);
  writeFileSync(join(dir, 'my.key'), pems.private);
  const configured = await startGateway({
    gateway: { proxy_listen: ['127.0.0.1:0 ssl http2'], ssl_cert: join(dir, 'my.crt'), ssl_cert_key: join(dir, 'my.key') },
    services: [{ name: 'echo', url: echo.url, routes: [{ paths: ['/echo'] }] }],
  });
  try {
    const served = await peerCertificate(portOf(configured.http));
    assert.equal(served.fingerprint256, new X509Certificate(pems.cert).fingerprint256);
    assert.equal(existsSync(join(configured.dataDir, 'tls')), false, 'nothing generated');
    assert.equal((await request(`${configured.http}/echo/x`)).status, 200);
  } finally {
    await configured.stop();
  }
});

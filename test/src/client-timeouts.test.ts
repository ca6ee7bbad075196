/**
 * A client cannot pin a connection by doing nothing (client_timeout, here 1 s): an idle connection or
 * one that never finishes its headers is closed; a request body the client stops sending gets 408 and
 * the connection closes; an answer the client stops reading is cut off; on every listener kind
 * (plain HTTP/1.1, the h2c port's HTTP/1.1 and h2, the TLS port's HTTP/1.1 and h2) and whoever reads the
 * body (the upstream, or a plugin). What is not the client's doing stays: a long upload that keeps
 * moving, an upstream slow to answer, a stream quiet between its events.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../helpers/gateway.ts';
import { countingUpstream, parseRaw, portOf, waitFor, type CountingServer } from '../helpers/support.ts';

const CLIENT_TIMEOUT = 1000;
let gw: TestGateway;
let echo: Upstream;
let slow: Upstream;
let firehose: CountingServer;

before(async () => {
  echo = await startUpstream();
  // Answers after 1.5 s, or streams a tick every 1.5 s for 4.5 s: longer than client_timeout of silence.
  slow = await startUpstream((req, res) => {
    req.resume();
    if (req.url?.startsWith('/ticks')) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let n = 0;
      const timer = setInterval(() => (++n === 3 ? (clearInterval(timer), res.end('tick\n')) : res.write('tick\n')), 1500);
      res.on('close', () => clearInterval(timer));
    } else setTimeout(() => res.end('late answer'), 1500);
  });
  // Writes as fast as the gateway takes it, for as long as the request lasts.
  firehose = await countingUpstream((_req, res) => {
    const chunk = Buffer.alloc(256 * 1024, 'f');
    const pump = () => {
      while (!res.destroyed && res.write(chunk));
      if (!res.destroyed) res.once('drain', pump);
    };
    pump();
  });
  gw = await startGateway({
    gateway: { client_timeout: CLIENT_TIMEOUT },
    services: [
      { name: 'echo', url: echo.url, routes: [{ name: 'echo', paths: ['/echo'] }, { name: 'token', paths: ['/p'], plugins: [{ name: 'oauth2', config: { enable_client_credentials: true } }] }] },
      { name: 'slow', url: slow.url, routes: [{ name: 'slow', paths: ['/slow'] }] },
      { name: 'firehose', url: firehose.url, routes: [{ name: 'firehose', paths: ['/firehose'] }] },
    ],
  });
});

after(async () => {
  await gw?.stop();
  await Promise.all([echo?.close(), slow?.close(), firehose?.close()]);
});

/** A raw connection (TLS with ALPN http/1.1 for the TLS port) that sends `bytes` and collects what comes back until the gateway closes it. */
function openRaw(url: string, bytes: string): { closed: Promise<string>; socket: net.Socket } {
  const port = portOf(url);
  const socket = url.startsWith('https') ? tls.connect({ host: '127.0.0.1', port, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false }) : net.connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (c) => (received += c.toString('latin1')));
  socket.on('error', () => undefined);
  if (bytes) socket.write(bytes);
  return { socket, closed: new Promise((resolve) => socket.on('close', () => resolve(received))) };
}

const http1Ports = () => [gw.http, gw.h2c, gw.https];

test('an idle connection, and one whose headers never end, is closed', { timeout: 20_000 }, async () => {
  const waits = http1Ports().flatMap((url) => [openRaw(url, '').closed, openRaw(url, 'GET /echo/x HTTP/1.1\r\nHost: a\r\nX-Slow').closed]);
  await Promise.all(waits);
});

test('a request body the client stops sending gets 408 and its connection closes, whoever reads the body', { timeout: 20_000 }, async () => {
  const stalled = [
    'POST /echo/x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc',
    'POST /echo/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n',
    // The oauth2 plugin reads the form itself.
    'POST /p/oauth2/token HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ngrant_type=',
  ];
  const cases = http1Ports().flatMap((url) => stalled.map((bytes) => ({ url, bytes })));
  const replies = await Promise.all(cases.map(({ url, bytes }) => openRaw(url, bytes).closed));
  for (const [i, raw] of replies.entries()) {
    const reply = parseRaw(raw);
    assert.equal(reply.status, 408, `${cases[i].url} ${cases[i].bytes}: ${raw}`);
    assert.match(reply.body, /"message":"Request Timeout"/);
  }
});

test('over h2 (h2c and TLS), a stream whose body stops gets 408; the session and its other streams go on', { timeout: 20_000 }, async () => {
  for (const url of [gw.h2c, gw.https]) {
    const session = http2.connect(url, { rejectUnauthorized: false });
    try {
      const stalled = session.request({ ':method': 'POST', ':path': '/echo/x', 'content-length': '100' });
      stalled.write('abc');
      const status = await new Promise<number>((resolve, reject) => {
        stalled.on('response', (headers) => resolve(Number(headers[':status'])));
        stalled.on('error', reject);
      });
      assert.equal(status, 408, url);
      const fine = session.request({ ':method': 'GET', ':path': '/echo/after' }, { endStream: true });
      const after = await new Promise<number>((resolve) => fine.on('response', (headers) => resolve(Number(headers[':status']))));
      fine.resume();
      assert.equal(after, 200, url);
    } finally {
      session.destroy();
    }
  }
});

test('an answer the client stops reading is cut off, and the upstream request with it', { timeout: 30_000 }, async () => {
  for (const url of [gw.http, gw.https]) {
    const { socket } = openRaw(url, 'GET /firehose/x HTTP/1.1\r\nHost: a\r\n\r\n');
    // Reads the start of the answer, then nothing more (a paused client does not notice its connection closing).
    await new Promise((resolve) => socket.once('data', resolve));
    socket.pause();
    await waitFor(() => firehose.active === 1, 'the upstream request');
    await waitFor(() => firehose.active === 0, 'the upstream request to end', 20_000);
    socket.destroy();
  }
});

test('not the client’s doing: a slow upstream, a quiet stream, a slow upload that keeps moving (HTTP/1.1 and h2)', { timeout: 30_000 }, async () => {
  for (const url of [gw.http, gw.https]) {
    const late = await request(`${url}/slow/x`);
    assert.equal(late.text, 'late answer', url);
    const ticks = await request(`${url}/slow/ticks`);
    assert.equal(ticks.text, 'tick\ntick\ntick\n', url);
  }
  for (const url of [gw.h2c, gw.https]) {
    const session = http2.connect(url, { rejectUnauthorized: false });
    try {
      const stream = session.request({ ':method': 'GET', ':path': '/slow/ticks' }, { endStream: true });
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (c) => (body += c));
      await new Promise((resolve) => stream.on('end', resolve));
      assert.equal(body, 'tick\ntick\ntick\n', url);
    } finally {
      session.close();
    }
  }
  // 2.4 s of upload in pieces 400 ms apart: never a full second of silence.
  const { socket, closed } = openRaw(gw.http, 'POST /echo/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nConnection: close\r\n\r\n');
  for (const piece of 'abcdef') {
    await new Promise((r) => setTimeout(r, 400));
    socket.write(piece);
  }
  const reply = parseRaw(await closed);
  assert.equal(reply.status, 200);
  assert.equal(JSON.parse(reply.body).body, 'abcdef');
});

/**
 * WebSockets through the gateway with real `ws` clients and servers, over ws (plain listener, ws upstream)
 * and wss (TLS listener, wss upstream): frames both ways untouched (text, binary, 1 MB, fragmented,
 * ping/pong), close codes both ways, handshake headers, refusals before the upgrade, and no socket left
 * behind after many connect/disconnect cycles.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { connect as netConnect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { testCertificate } from '../../fixtures/tls.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';

const deadline = () => ({ signal: AbortSignal.timeout(10_000) });
/** How long counts of open sockets may take to settle after a tunnel closes. */
const SETTLE_MS = 15_000;

/** The TCP socket under each client TLS socket, so a test can reset it. */
const tcpUnder = new WeakMap<object, Socket>();

/** Client connections over a TCP socket the test keeps a hold of (TLS on top when `secure`). */
function connectionFactory(secure: boolean) {
  return (options: { host?: string; port?: number | string }) => {
    const tcp = netConnect(Number(options.port), options.host ?? '127.0.0.1');
    if (!secure) return tcp;
    const socket = tlsConnect({ socket: tcp, rejectUnauthorized: false });
    tcpUnder.set(socket, tcp);
    return socket;
  };
}

/** Drops the connection with a TCP RST (no close frame, no FIN), as a crashed client or a network failure does. */
function resetConnection(ws: WebSocket): void {
  const socket = (ws as unknown as { _socket: Socket })._socket;
  (tcpUnder.get(socket) ?? socket).resetAndDestroy();
}

for (const transport of ['ws', 'wss'] as const) {
  describe(`WebSocket proxying over ${transport}`, () => {
    let upstream: WsEcho;
    /** Accepts connections and never answers a handshake. */
    let silent: Server;
    let gw: TestGateway;
    let base: string;
    const tls = transport === 'wss';

    before(async () => {
      upstream = await startWsEcho({ tls: tls ? await testCertificate() : undefined });
      const down = await closedPort();
      silent = createServer((socket) => socket.on('error', () => {}));
      await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
      gw = await startGateway({
        services: [
          { name: 'ws', url: `${transport}://127.0.0.1:${upstream.port}`, routes: [{ name: 'ws', protocols: ['ws', 'wss'], paths: ['/ws'] }] },
          { name: 'http', url: `${tls ? 'https' : 'http'}://127.0.0.1:${upstream.port}`, routes: [{ name: 'plain', protocols: ['http', 'https'], paths: ['/plain'] }] },
          { name: 'down', url: `ws://127.0.0.1:${down}`, routes: [{ name: 'down', protocols: ['ws', 'wss'], paths: ['/down'] }] },
          {
            name: 'silent',
            url: `ws://127.0.0.1:${(silent.address() as AddressInfo).port}`,
            read_timeout: 300,
            routes: [{ name: 'silent', protocols: ['ws', 'wss'], paths: ['/silent'] }],
          },
        ],
      });
      base = (tls ? gw.https : gw.http).replace(/^http/, 'ws');
    });

    after(async () => {
      await gw?.stop();
      await upstream?.close();
      silent?.close();
    });

    async function connect(path: string, protocols?: string[]): Promise<{ ws: WebSocket; response: IncomingMessage }> {
      const ws = new WebSocket(base + path, protocols, { maxPayload: 64 << 20, createConnection: connectionFactory(tls) as never });
      const upgraded = once(ws, 'upgrade', deadline());
      await once(ws, 'open', deadline());
      const [response] = (await upgraded) as [IncomingMessage];
      return { ws, response };
    }

    /** The status the gateway answered a handshake with, when it did not upgrade. */
    async function refusal(path: string, headers: Record<string, string> = {}): Promise<IncomingMessage> {
      const ws = new WebSocket(base + path, { rejectUnauthorized: false, headers });
      ws.on('error', () => {});
      const [, res] = (await once(ws, 'unexpected-response', deadline())) as [unknown, IncomingMessage];
      ws.terminate();
      return res;
    }

    async function echo(ws: WebSocket, data: string | Buffer): Promise<{ data: Buffer; isBinary: boolean }> {
      const reply = once(ws, 'message', deadline());
      ws.send(data);
      const [got, isBinary] = (await reply) as [Buffer, boolean];
      return { data: got, isBinary };
    }

    test('text, binary and 1 MB binary frames echo back untouched', async () => {
      const { ws } = await connect('/ws/echo');
      const text = await echo(ws, 'héllo');
      assert.equal(text.isBinary, false);
      assert.equal(text.data.toString(), 'héllo');
      const bytes = Buffer.from([0, 1, 2, 255]);
      const bin = await echo(ws, bytes);
      assert.equal(bin.isBinary, true);
      assert.ok(bin.data.equals(bytes));
      const big = Buffer.alloc(1 << 20);
      for (let i = 0; i < big.length; i++) big[i] = i % 251;
      const large = await echo(ws, big);
      assert.ok(large.data.equals(big));
      ws.close();
    });

    test('a fragmented message arrives whole; ping/pong both ways', async () => {
      const { ws } = await connect('/ws/echo');
      const reply = once(ws, 'message', deadline());
      ws.send('part one, ', { fin: false });
      ws.send('part two', { fin: true });
      assert.equal(String((await reply)[0]), 'part one, part two');

      const pong = once(ws, 'pong', deadline());
      ws.ping('client-ping');
      assert.equal(String((await pong)[0]), 'client-ping');

      const serverGotPong = once(upstream.events, 'pong', deadline());
      ws.send('ping-me');
      assert.deepEqual(await serverGotPong, ['srv']);
      ws.close();
    });

    test('close codes pass both ways', async () => {
      const { ws } = await connect('/ws/echo');
      const upstreamClosed = once(upstream.events, 'closed', deadline());
      ws.close(4001, 'client bye');
      assert.deepEqual(await upstreamClosed, [4001, 'client bye']);

      const second = (await connect('/ws/echo')).ws;
      const clientClosed = once(second, 'close', deadline());
      second.send('close:4002');
      const [code, reason] = await clientClosed;
      assert.equal(code, 4002);
      assert.equal(String(reason), 'server bye');
    });

    test('either side going away closes the other', async () => {
      const { ws } = await connect('/ws/echo');
      const closed = once(ws, 'close', deadline());
      ws.send('terminate');
      assert.equal((await closed)[0], 1006);

      const other = (await connect('/ws/echo')).ws;
      const upstreamClosed = once(upstream.events, 'closed', deadline());
      other.terminate();
      assert.equal((await upstreamClosed)[0], 1006);

      // A TCP reset (no FIN, no close frame) must end the upstream side as well.
      const reset = (await connect('/ws/echo')).ws;
      const upstreamClosedOnReset = once(upstream.events, 'closed', deadline());
      resetConnection(reset);
      assert.equal((await upstreamClosedOnReset)[0], 1006);
    });

    test('handshake: path, query and proxy headers upstream; subprotocol and Via on the 101', async () => {
      const before = upstream.handshakes.length;
      const { ws, response } = await connect('/ws/room/7?user=ann', ['chat.v2', 'chat.v1']);
      const handshake = upstream.handshakes[before];
      assert.equal(handshake.url, '/room/7?user=ann');
      assert.equal(handshake.headers.upgrade, 'websocket');
      assert.equal(handshake.headers['x-forwarded-proto'], tls ? 'https' : 'http');
      assert.equal(handshake.headers['x-forwarded-prefix'], '/ws');
      assert.equal(handshake.headers['x-real-ip'], '127.0.0.1');
      assert.equal(ws.protocol, 'chat.v2');
      assert.equal(response.headers.via, '1.1 tollgate/0.1.0');
      assert.match(String(response.headers['x-kong-request-id']), /^[0-9a-f-]{36}$/);
      ws.close();
    });

    test('http/https routes pass upgrades through too (Kong)', async () => {
      const { ws } = await connect('/plain/echo');
      assert.equal((await echo(ws, 'via http route')).data.toString(), 'via http route');
      ws.close();
    });

    if (!tls) {
      test('the plaintext http2 (h2c) port still answers HTTP/1.1, upgrades included', async () => {
        const ws = new WebSocket(`${gw.h2c.replace(/^http/, 'ws')}/ws/echo`);
        await once(ws, 'open', deadline());
        assert.equal((await echo(ws, 'via h2c port')).data.toString(), 'via h2c port');
        ws.close();
      });
    }

    test('a ws route answers any other request with 400, plugin endpoints included', async () => {
      const http = tls ? gw.https : gw.http;
      const get = await request(`${http}/ws/echo`);
      assert.equal(get.status, 400);
      assert.match(get.json().message, /Invalid WebSocket handshake/);
      const token = await request(`${http}/ws/oauth2/token`, { method: 'POST', body: { grant_type: 'client_credentials' } });
      assert.equal(token.status, 400);
    });

    test('an upgrade that is not a GET over HTTP/1.1 is no WebSocket handshake: 400, and the upstream never sees it', async () => {
      const before = upstream.handshakes.length;
      const handshakeHeaders = 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';
      for (const requestHead of [
        `HEAD /ws/echo HTTP/1.1\r\nHost: x\r\n${handshakeHeaders}\r\n`,
        `POST /ws/echo HTTP/1.1\r\nHost: x\r\n${handshakeHeaders}Content-Length: 5\r\n\r\nhello`,
        `GET /ws/echo HTTP/1.0\r\nHost: x\r\n${handshakeHeaders}\r\n`,
      ]) {
        const socket = connectionFactory(tls)({ port: new URL(base).port });
        socket.on('error', () => {});
        socket.write(requestHead);
        const [firstChunk] = (await once(socket, 'data', deadline())) as [Buffer];
        socket.destroy();
        const statusLine = firstChunk.toString().split('\r\n')[0];
        assert.match(statusLine, /^HTTP\/1\.1 400 /, requestHead.split('\r\n')[0]);
      }
      assert.equal(upstream.handshakes.length, before);
    });

    test('before the upgrade the client gets HTTP answers: the upstream refusal, 502 when it is down, 504 when it does not answer', async () => {
      const forbidden = await refusal('/ws/forbidden');
      assert.equal(forbidden.statusCode, 403);
      const down = await refusal('/down');
      assert.equal(down.statusCode, 502);
      const silentUpstream = await refusal('/silent');
      assert.equal(silentUpstream.statusCode, 504);
    });

    test('no leaked sockets after 1000 connect/disconnect cycles', async () => {
      const listener = gw.gateway.proxyListeners[tls ? 1 : 0];
      await waitFor(() => listener.openConnections === 0 && upstream.openSockets() === 0, 'earlier tests\' sockets closed', SETTLE_MS);
      let cycle = 0;
      const worker = async () => {
        while (cycle < 1000) {
          const n = cycle++;
          const { ws } = await connect('/ws/echo');
          assert.equal((await echo(ws, `m${n}`)).data.toString(), `m${n}`);
          if (n % 4 === 0) ws.terminate();
          else if (n % 4 === 1) ws.close(1000);
          else if (n % 4 === 2) ws.send('terminate');
          else resetConnection(ws);
        }
      };
      await Promise.all(Array.from({ length: 25 }, worker));
      await waitFor(() => listener.openConnections === 0, 'gateway client sockets closed', SETTLE_MS);
      await waitFor(() => upstream.openSockets() === 0, 'upstream sockets closed', SETTLE_MS);
    });
  });
}

/**
 * Kong's tcp-log (spec/03-plugins/01-tcp-log/01-tcp-log_spec.lua) against real TCP and TLS listeners:
 * one JSON line per request, latencies that add up, TLS towards the log server and the request's own TLS
 * facts, the `tries` array, a refused connection losing its line (counted) without failing the request
 * and the next line getting through once the server is up, and the schema.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { testCertificate } from '../../fixtures/tls.ts';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

interface LineServer {
  port: number;
  lines: any[];
  close(): Promise<void>;
}

/** A TCP (or TLS) listener keeping every JSON line it receives. */
async function startLineServer(options: { tls?: boolean; port?: number } = {}): Promise<LineServer> {
  const lines: any[] = [];
  const sockets = new Set<net.Socket>();
  const onSocket = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk;
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const part of parts) lines.push(JSON.parse(part));
    });
  };
  const server = options.tls ? tls.createServer(await testCertificate(), onSocket) : net.createServer(onSocket);
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    lines,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('tcp-log', () => {
  let upstream: Upstream;
  let plain: LineServer;
  let secure: LineServer;
  let refusedPort: number;
  let gw: TestGateway;

  before(async () => {
    upstream = await startUpstream();
    plain = await startLineServer();
    secure = await startLineServer({ tls: true });
    refusedPort = await closedPort();
    gw = await startGateway({
      services: [
        {
          name: 'echo', url: upstream.url,
          routes: [
            { name: 'plain', paths: ['/plain'], plugins: [{ name: 'tcp-log', config: { host: '127.0.0.1', port: plain.port } }] },
            { name: 'secure', paths: ['/secure'], plugins: [{ name: 'tcp-log', config: { host: '127.0.0.1', port: secure.port, tls: true, tls_sni: 'localhost' } }] },
            { name: 'refused', paths: ['/refused'], plugins: [{ name: 'tcp-log', config: { host: '127.0.0.1', port: refusedPort, timeout: 1000 } }] },
          ],
        },
      ],
    });
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([plain?.close(), secure?.close(), upstream?.close()]);
  });

  test('logs each request as one JSON line, with latencies that add up and tries as an array', async () => {
    assert.equal((await request(`${gw.http}/plain/1`)).status, 200);
    assert.equal((await request(`${gw.http}/plain/2`)).status, 200);
    await waitFor(() => plain.lines.length >= 2, 'two lines');
    // In order on one connection; a node of workers has one per process.
    assert.deepEqual(plain.lines.map((line) => line.request.uri).sort(), ['/plain/1', '/plain/2']);
    const first = plain.lines[0];
    assert.equal(first.client_ip, '127.0.0.1');
    assert.ok(first.latencies.proxy < 3000);
    assert.ok(1 + first.latencies.request >= first.latencies.kong + first.latencies.proxy);
    assert.ok(Array.isArray(first.tries));
  });

  test("a TLS handshake with the log server; a request over TLS logs Kong's TLS facts", async () => {
    assert.equal((await request(`${gw.https}/secure`)).status, 200);
    const [entry] = await waitFor(() => secure.lines.length >= 1 && secure.lines, 'the line over TLS');
    assert.equal(entry.request.tls.version, 'TLSv1.3');
    assert.equal(typeof entry.request.tls.cipher, 'string');
    assert.equal(entry.request.tls.client_verify, 'NONE');
    assert.match(entry.request.url, /^https:\/\//);
  });

  test('a refused connection loses its line, not the request; the next line goes once the server is up', async () => {
    assert.equal((await request(`${gw.http}/refused/lost`)).status, 200);
    await waitFor(async () => /tollgate_tcp_log_lost_lines_total\{[^}]*reason="unsent"\} 1/.test((await request(`${gw.admin}/metrics`)).text), 'the lost line counted');
    const server = await startLineServer({ port: refusedPort });
    try {
      assert.equal((await request(`${gw.http}/refused/sent`)).status, 200);
      const [entry] = await waitFor(() => server.lines.length >= 1 && server.lines, 'the line');
      assert.equal(entry.request.uri, '/refused/sent');
    } finally {
      await server.close();
    }
  });
});

test("tcp-log config: Kong's fields; Lua refused", async () => {
  assert.deepEqual(await pluginConfigErrors('tcp-log', { host: '127.0.0.1', port: 9999 }), []);
  assert.deepEqual(await pluginConfigErrors('tcp-log', { port: 9999 }), ['config.host: required field missing']);
  assert.deepEqual(await pluginConfigErrors('tcp-log', { host: 'logs.example', port: 70000 }), ['config.port: value should be between 0 and 65535']);
  const [lua] = await pluginConfigErrors('tcp-log', { host: 'logs.example', port: 1, custom_fields_by_lua: { a: 'return 1' } });
  assert.match(lua, /Tollgate does not run Lua/);
});

/**
 * The balancer applies to every protocol the gateway proxies: gRPC calls and WebSocket tunnels to a
 * service whose host names an upstream go to its targets, a refused target is retried on the next,
 * each target gets its own :authority / Host, and an upstream with no target answers Kong's 503 in
 * the protocol's own shape.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { echoClient, grpc, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';
import { closedPort } from '../../helpers/support.ts';

const PREFIX = '/tollgate.test.Echo/';

describe('gRPC over a balancer', () => {
  let gw: TestGateway;
  let a: GrpcEcho;
  let b: GrpcEcho;
  let client: EchoClient;
  let refused: number;

  before(async () => {
    [a, b] = await Promise.all([startGrpcEcho({ name: 'a' }), startGrpcEcho({ name: 'b' })]);
    refused = await closedPort();
    gw = await startGateway({
      services: [
        { name: 'echo', protocol: 'grpc', host: 'grpc-pool', port: 80, routes: [{ name: 'echo', protocols: ['grpc'], paths: [PREFIX] }] },
        { name: 'empty', protocol: 'grpc', host: 'empty-pool', port: 80, routes: [{ name: 'empty', protocols: ['grpc'], paths: ['/empty.Echo/'] }] },
      ],
      upstreams: [
        { name: 'grpc-pool', targets: [{ target: a.target }, { target: b.target }, { target: `127.0.0.1:${refused}` }] },
        { name: 'empty-pool' },
      ],
    });
    client = echoClient(new URL(gw.h2c).host);
  });
  after(async () => {
    client?.close();
    await gw?.stop();
    await Promise.all([a?.close(), b?.close()]);
  });

  test('calls spread over the targets, each with its :authority; the refused target is retried elsewhere', async () => {
    const seen: Record<string, number> = {};
    for (let i = 0; i < 12; i++) {
      const { reply } = await unary(client, { message: `m${i}` });
      seen[reply.upstream] = (seen[reply.upstream] ?? 0) + 1;
      assert.equal(reply.authority, reply.upstream === 'a' ? a.target : b.target);
    }
    assert.deepEqual(seen, { a: 6, b: 6 });
  });

  test("no target: Kong's 503 as a gRPC status", async () => {
    const emptyClient = new grpc.Client(new URL(gw.h2c).host, grpc.credentials.createInsecure()) as EchoClient;
    const status = await new Promise<grpc.StatusObject>((resolve) => {
      const call = emptyClient.makeUnaryRequest('/empty.Echo/Unary', (x: Buffer) => x, (x: Buffer) => x, Buffer.alloc(0), () => {});
      call.on('status', resolve);
    });
    emptyClient.close();
    assert.equal(status.code, grpc.status.UNAVAILABLE);
    assert.equal(status.details, 'failure to get a peer from the ring-balancer');
  });
});

describe('WebSocket over a balancer', () => {
  let gw: TestGateway;
  let a: WsEcho;
  let b: WsEcho;

  before(async () => {
    [a, b] = await Promise.all([startWsEcho(), startWsEcho()]);
    gw = await startGateway({
      services: [{ name: 'ws', host: 'ws-pool', port: 80, routes: [{ name: 'ws', paths: ['/ws'] }] }],
      upstreams: [{ name: 'ws-pool', targets: [{ target: `127.0.0.1:${a.port}` }, { target: `127.0.0.1:${await closedPort()}` }, { target: `127.0.0.1:${b.port}` }] }],
    });
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([a?.close(), b?.close()]);
  });

  const exchange = (message: string) =>
    new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(gw.http.replace('http:', 'ws:') + '/ws');
      ws.once('open', () => ws.send(message));
      ws.once('message', (data) => {
        ws.close();
        resolve(String(data));
      });
      ws.once('error', reject);
    });

  test('handshakes spread over the targets with their own Host; the refused target is retried elsewhere', async () => {
    for (let i = 0; i < 6; i++) assert.match(await exchange(`hello ${i}`), new RegExp(`hello ${i}`));
    assert.equal(a.handshakes.length, 3);
    assert.equal(b.handshakes.length, 3);
    assert.equal(a.handshakes[0].headers.host, `127.0.0.1:${a.port}`);
    assert.equal(b.handshakes[0].headers.host, `127.0.0.1:${b.port}`);
    // Plain HTTP on the same route goes through the same balancer.
    assert.equal((await request(gw.http + '/ws')).status, 200);
  });
});

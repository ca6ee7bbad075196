/**
 * gRPC through the gateway with real @grpc/grpc-js clients and servers, over h2c (grpc route, grpc
 * upstream) and TLS (grpcs route, grpcs upstream): the four call kinds, metadata and trailers both
 * ways, large messages, many concurrent streams, deadlines and cancellation, upstream statuses.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { clientStream, echoClient, grpc, serverStream, startGrpcEcho, unary, type EchoClient, type EchoReply, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { testCertificate } from '../../fixtures/tls.ts';

const PREFIX = '/tollgate.test.Echo/';

for (const transport of ['h2c', 'tls'] as const) {
  describe(`gRPC proxying over ${transport}`, () => {
    let upstream: GrpcEcho;
    let gw: TestGateway;
    let client: EchoClient;

    before(async () => {
      const tls = transport === 'tls';
      upstream = await startGrpcEcho({ tls: tls ? await testCertificate() : undefined });
      gw = await startGateway({
        services: [
          {
            name: 'echo',
            url: `${tls ? 'grpcs' : 'grpc'}://127.0.0.1:${upstream.port}`,
            routes: [{ name: 'echo', protocols: [tls ? 'grpcs' : 'grpc'], paths: [PREFIX] }],
          },
        ],
      });
      client = tls
        ? echoClient(new URL(gw.https).host, { ca: readFileSync(join(gw.dataDir, 'tls', 'gateway.crt'), 'utf8') })
        : echoClient(new URL(gw.h2c).host);
    });

    after(async () => {
      client?.close();
      await gw?.stop();
      await upstream?.close();
    });

    test('unary: message, metadata both ways, trailers, :authority and proxy headers upstream', async () => {
      const { reply, headers, trailers } = await unary(client, { message: 'hi', payload: Buffer.from('abc') }, { metadata: { 'x-client-meta': 'm1' } });
      assert.equal(reply.message, 'hi');
      assert.equal(reply.payload.toString(), 'abc');
      assert.equal(reply.metadata['x-client-meta'], 'm1');
      assert.equal(reply.authority, `127.0.0.1:${upstream.port}`);
      assert.equal(reply.metadata.via, '2 tollgate/0.1.0');
      assert.equal(reply.metadata['x-forwarded-for'], '127.0.0.1');
      assert.equal(reply.metadata['x-forwarded-proto'], transport === 'tls' ? 'https' : 'http');
      assert.match(reply.metadata['x-kong-request-id'], /^[0-9a-f-]{36}$/);
      assert.equal(headers['x-upstream-header'], 'hello');
      assert.equal(trailers['x-upstream-trailer'], 'bye');
    });

    test('server streaming: every reply in order, then trailers', async () => {
      const { replies, trailers } = await serverStream(client, { message: 's', count: 50 });
      assert.deepEqual(replies.map((r) => r.index), Array.from({ length: 50 }, (_, i) => i));
      assert.equal(trailers['x-upstream-trailer'], 'bye');
    });

    test('client streaming: every request reaches the upstream', async () => {
      const requests = Array.from({ length: 100 }, (_, i) => ({ message: String(i), payload: Buffer.alloc(1000) }));
      const reply = await clientStream(client, requests);
      assert.equal(reply.message, requests.map((r) => r.message).join(','));
      assert.equal(reply.index, 100_000);
    });

    test('bidirectional: interleaved request/reply', async () => {
      const call = client.Bidi();
      for (let i = 0; i < 20; i++) {
        call.write({ message: `ping ${i}` });
        const [reply] = (await once(call, 'data')) as [EchoReply];
        assert.equal(reply.message, `ping ${i}`);
        assert.equal(reply.index, i);
      }
      const status = once(call, 'status');
      call.end();
      const [s] = (await status) as [grpc.StatusObject];
      assert.equal(s.code, grpc.status.OK);
      assert.equal(s.metadata.get('x-upstream-trailer')[0], 'bye');
    });

    test('large messages both ways (flow control): 8 MB unary, 20 x 1 MB server stream', async () => {
      const big = Buffer.alloc(8 << 20, 3);
      const { reply } = await unary(client, { message: 'big', payload: big });
      assert.equal(reply.payload.length, big.length);
      assert.ok(reply.payload.equals(big));
      const { replies } = await serverStream(client, { message: 'big', payload: Buffer.alloc(1 << 20, 5), count: 20 });
      assert.equal(replies.length, 20);
      assert.ok(replies.every((r) => r.payload.length === 1 << 20));
    });

    test('backpressure: a client that stops reading stops the upstream writing, then gets everything', async () => {
      let written = -1;
      const onWritten = (i: number) => (written = i);
      upstream.events.on('written', onWritten);
      try {
        const call = client.ServerStream({ message: 'flood', payload: Buffer.alloc(1 << 20, 9), count: 200 });
        await once(call, 'data');
        call.pause();
        // Wait until the upstream is blocked: its written count stops moving.
        let last = -2;
        while (written !== last) {
          last = written;
          await new Promise((r) => setTimeout(r, 500));
        }
        assert.ok(written < 100, `the upstream wrote ${written + 1} of 200 MB while the client read 1`);
        let received = 1;
        call.on('data', () => received++);
        call.resume();
        await once(call, 'status');
        assert.equal(received, 200);
      } finally {
        upstream.events.off('written', onWritten);
      }
    });

    test('many concurrent streams: 300 unary calls and 20 bidi streams at once', async () => {
      const calls = Array.from({ length: 300 }, (_, i) => unary(client, { message: `c${i}` }).then((r) => r.reply.message));
      const streams = Array.from({ length: 20 }, async (_, i) => {
        const call = client.Bidi();
        const got: string[] = [];
        call.on('data', (r: EchoReply) => got.push(r.message));
        for (let j = 0; j < 10; j++) call.write({ message: `${i}.${j}` });
        call.end();
        await once(call, 'status');
        return got.join(' ');
      });
      const results = await Promise.all(calls);
      assert.deepEqual(results, Array.from({ length: 300 }, (_, i) => `c${i}`));
      const streamed = await Promise.all(streams);
      streamed.forEach((s, i) => assert.equal(s, Array.from({ length: 10 }, (_, j) => `${i}.${j}`).join(' ')));
    });

    test('an upstream error status reaches the client with its details and trailing metadata', async () => {
      const err = await unary(client, { message: 'no such thing', fail_code: grpc.status.NOT_FOUND }).then(
        () => assert.fail('expected an error'),
        (e) => e,
      );
      assert.equal(err.code, grpc.status.NOT_FOUND);
      assert.equal(err.details, 'no such thing');
      assert.equal(err.metadata.get('x-failure-detail')[0], 'from-upstream');
    });

    test('deadline: the client gets DEADLINE_EXCEEDED and the upstream call is cancelled', async () => {
      const cancelled = once(upstream.events, 'cancelled', { signal: AbortSignal.timeout(10_000) });
      const err = await unary(client, { message: 'slow-deadline', delay_ms: 5000 }, { deadlineMs: 300 }).then(
        () => assert.fail('expected an error'),
        (e) => e,
      );
      assert.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
      assert.deepEqual(await cancelled, ['slow-deadline']);
    });

    test('cancellation: a client cancelling a server stream cancels the upstream call', async () => {
      const cancelled = once(upstream.events, 'cancelled', { signal: AbortSignal.timeout(10_000) });
      const call = client.ServerStream({ message: 'endless', count: 1000, delay_ms: 20 });
      await once(call, 'data');
      call.on('error', () => {});
      call.cancel();
      assert.deepEqual(await cancelled, ['endless']);
    });
  });
}

/**
 * gRPC routing and the gateway's own answers to gRPC clients: routes match on the method path, the
 * authority and metadata; no route, no service, an unreachable or slow upstream and a grpcs-only route
 * reach grpc-js as the mapped status codes with readable messages, as trailers-only responses (never JSON).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { echoClient, grpc, requestFrame, startGrpcEcho, unary, unaryAt, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { closedPort } from '../../helpers/support.ts';

const SVC = '/tollgate.test.Echo';

/** The status headers of a raw HTTP/2 gRPC call: its trailers, or the headers of a trailers-only answer. */
function finalStatus(stream: http2.ClientHttp2Stream): Promise<http2.IncomingHttpHeaders> {
  stream.resume();
  return new Promise((resolve) => {
    stream.once('trailers', resolve);
    stream.once('response', (headers, flags) => {
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) resolve(headers);
    });
  });
}

async function failure(call: Promise<unknown>): Promise<grpc.ServiceError> {
  return call.then(
    () => assert.fail('expected the call to fail'),
    (err) => err,
  );
}

describe('gRPC routing and gateway-produced statuses', () => {
  let a: GrpcEcho;
  let b: GrpcEcho;
  let c: GrpcEcho;
  let gw: TestGateway;
  let client: EchoClient;
  const clients: EchoClient[] = [];

  before(async () => {
    [a, b, c] = await Promise.all([startGrpcEcho({ name: 'a', aliases: ['slow', 'secure'] }), startGrpcEcho({ name: 'b' }), startGrpcEcho({ name: 'c' })]);
    const down = await closedPort();
    gw = await startGateway({
      services: [
        { name: 'a', url: `grpc://127.0.0.1:${a.port}`, routes: [{ name: 'by-path', protocols: ['grpc'], paths: [`${SVC}/Unary`, `${SVC}/Bidi`] }] },
        { name: 'b', url: `grpc://127.0.0.1:${b.port}`, routes: [{ name: 'by-metadata', protocols: ['grpc'], paths: [`${SVC}/Unary`], headers: { 'x-tenant': ['blue'] } }] },
        {
          name: 'c',
          url: `grpc://127.0.0.1:${c.port}`,
          routes: [
            { name: 'by-authority', protocols: ['grpc'], hosts: ['grpc.example.test'] },
            { name: 'preserving', protocols: ['grpc'], hosts: ['grpc.preserve.test'], preserve_host: true },
          ],
        },
        { name: 'down', url: `grpc://127.0.0.1:${down}`, routes: [{ name: 'down', protocols: ['grpc'], paths: ['/down.Echo/'] }] },
        { name: 'slow', url: `grpc://127.0.0.1:${a.port}`, read_timeout: 300, routes: [{ name: 'slow', protocols: ['grpc'], paths: ['/slow.Echo/'] }] },
        { name: 'secure', url: `grpc://127.0.0.1:${a.port}`, routes: [{ name: 'secure-only', protocols: ['grpcs'], paths: ['/secure.Echo/'] }] },
      ],
      routes: [{ name: 'no-service', protocols: ['grpc'], paths: [`${SVC}/ClientStream`] }],
    });
    client = echoClient(new URL(gw.h2c).host);
    clients.push(client);
  });

  after(async () => {
    for (const cl of clients) cl.close();
    await gw?.stop();
    await Promise.all([a, b, c].map((s) => s?.close()));
  });

  test('routes match on the method path, on metadata (headers) and on the authority (hosts)', async () => {
    assert.equal((await unary(client, { message: 'x' })).reply.upstream, 'a');
    assert.equal((await unary(client, { message: 'x' }, { metadata: { 'x-tenant': 'blue' } })).reply.upstream, 'b');
    const byAuthority = echoClient(new URL(gw.h2c).host, { channel: { 'grpc.default_authority': 'grpc.example.test' } });
    clients.push(byAuthority);
    const { reply } = await unary(byAuthority, { message: 'x' });
    assert.equal(reply.upstream, 'c');
    assert.equal(reply.authority, `127.0.0.1:${c.port}`, ':authority is the service host:port (preserve_host off)');
  });

  test('preserve_host: the upstream gets the client\'s :authority', async () => {
    const preserving = echoClient(new URL(gw.h2c).host, { channel: { 'grpc.default_authority': 'grpc.preserve.test' } });
    clients.push(preserving);
    const { reply } = await unary(preserving, { message: 'x' });
    assert.equal(reply.upstream, 'c');
    assert.equal(reply.authority, 'grpc.preserve.test');
  });

  test('no route: NOT_FOUND with Kong\'s message', async () => {
    const call = new Promise((res, rej) => {
      const stream = client.ServerStream({ message: 'x' });
      stream.on('data', () => {});
      stream.on('error', rej);
      stream.on('end', res);
    });
    const err = await failure(call);
    assert.equal(err.code, grpc.status.NOT_FOUND);
    assert.equal(err.details, 'no Route matched with those values');
  });

  test('a route without a service: UNAVAILABLE, "no Service found with those values"', async () => {
    const err = await failure(new Promise((res, rej) => {
      const call = client.ClientStream((e: Error | null, r: unknown) => (e ? rej(e) : res(r)));
      call.end();
    }));
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.equal(err.details, 'no Service found with those values');
  });

  test('an upstream that refuses connections: UNAVAILABLE', async () => {
    const err = await failure(unaryAt(client, '/down.Echo/Unary', { message: 'x' }));
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.equal(err.details, 'An invalid response was received from the upstream server');
  });

  test('an upstream slower than read_timeout: DEADLINE_EXCEEDED, "The upstream server is timing out"', async () => {
    const err = await failure(unaryAt(client, '/slow.Echo/Unary', { message: 'x', delay_ms: 3000 }));
    assert.equal(err.code, grpc.status.DEADLINE_EXCEEDED);
    assert.equal(err.details, 'The upstream server is timing out');
  });

  test('an upstream that dies in the middle of a stream: the client gets UNAVAILABLE, not a hang', async () => {
    const doomed = await startGrpcEcho({ name: 'doomed' });
    const doomedGateway = await startGateway({
      services: [{ name: 'doomed', url: `grpc://127.0.0.1:${doomed.port}`, routes: [{ name: 'doomed', protocols: ['grpc'], paths: [`${SVC}/`] }] }],
    });
    const doomedClient = echoClient(new URL(doomedGateway.h2c).host);
    clients.push(doomedClient);
    try {
      const call = doomedClient.ServerStream({ message: 'long', count: 1000, delay_ms: 20 });
      const status = new Promise<grpc.StatusObject>((r) => call.on('status', r));
      call.on('error', () => {});
      await new Promise((r) => call.once('data', r));
      await doomed.close();
      const s = await status;
      assert.equal(s.code, grpc.status.UNAVAILABLE);
      assert.equal(s.details, 'An invalid response was received from the upstream server');
    } finally {
      await doomedGateway.stop();
    }
  });

  test('an upstream connection lost after the response headers and a message: UNAVAILABLE, not a status-less end', async () => {
    // A bare HTTP/2 upstream that starts answering, then its connection goes away without trailers.
    const dying = http2.createServer();
    dying.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.write(requestFrame({ message: 'first' }), () => stream.session?.destroy());
    });
    await new Promise<void>((r) => dying.listen(0, '127.0.0.1', r));
    const dyingGateway = await startGateway({
      services: [{ name: 'dying', url: `grpc://127.0.0.1:${(dying.address() as AddressInfo).port}`, routes: [{ name: 'r', protocols: ['grpc'], paths: ['/'] }] }],
    });
    const dyingClient = echoClient(new URL(dyingGateway.h2c).host);
    clients.push(dyingClient);
    try {
      const err = await failure(unary(dyingClient, { message: 'x' }));
      assert.equal(err.code, grpc.status.UNAVAILABLE);
      assert.equal(err.details, 'An invalid response was received from the upstream server');
    } finally {
      await dyingGateway.stop();
      dying.close();
    }
  });

  test('an upstream that allows few concurrent streams still gets every call, none refused', async () => {
    const narrow = await startGrpcEcho({ name: 'narrow', maxConcurrentStreams: 4 });
    const narrowGateway = await startGateway({
      services: [{ name: 'narrow', url: `grpc://127.0.0.1:${narrow.port}`, routes: [{ name: 'narrow', protocols: ['grpc'], paths: [`${SVC}/`] }] }],
    });
    const narrowClient = echoClient(new URL(narrowGateway.h2c).host);
    clients.push(narrowClient);
    try {
      const replies = await Promise.all(Array.from({ length: 60 }, (_, i) => unary(narrowClient, { message: `n${i}`, delay_ms: 50 })));
      assert.deepEqual(replies.map((r) => r.reply.message), Array.from({ length: 60 }, (_, i) => `n${i}`));
    } finally {
      await narrowGateway.stop();
      await narrow.close();
    }
  });

  test('plaintext gRPC on a grpcs-only route: CANCELLED, "gRPC request matched gRPCs route"', async () => {
    const err = await failure(unaryAt(client, '/secure.Echo/Unary', { message: 'x' }));
    assert.equal(err.code, grpc.status.CANCELLED);
    assert.equal(err.details, 'gRPC request matched gRPCs route');
  });

  test('the gateway answers gRPC as one HEADERS frame (trailers-only), application/grpc, no body', async () => {
    const session = http2.connect(gw.h2c);
    try {
      const stream = session.request({ ':method': 'POST', ':path': '/nowhere.Svc/Call', 'content-type': 'application/grpc', te: 'trailers' });
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
      const [headers, flags] = await new Promise<[http2.IncomingHttpHeaders, number]>((r) => stream.once('response', (h, f) => r([h, f])));
      assert.ok(flags & http2.constants.NGHTTP2_FLAG_END_STREAM, 'END_STREAM on the HEADERS frame');
      assert.equal(headers['content-type'], 'application/grpc');
      assert.equal(headers['grpc-status'], '5');
      assert.equal(headers['grpc-message'], 'no Route matched with those values');
      const body: Buffer[] = [];
      for await (const chunk of stream) body.push(chunk);
      assert.equal(Buffer.concat(body).length, 0);
    } finally {
      session.close();
    }
  });

  test('a grpc-timeout neither the client nor the upstream enforces is enforced at the gateway, and the upstream call cancelled', async () => {
    // A bare HTTP/2 upstream that answers headers and then never finishes, ignoring deadlines.
    const upstreamStreams: http2.ServerHttp2Stream[] = [];
    const ignoring = http2.createServer();
    ignoring.on('stream', (stream) => {
      upstreamStreams.push(stream);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    });
    await new Promise<void>((r) => ignoring.listen(0, '127.0.0.1', r));
    const deadlineGateway = await startGateway({
      services: [{ name: 'ignoring', url: `grpc://127.0.0.1:${(ignoring.address() as AddressInfo).port}`, routes: [{ name: 'r', protocols: ['grpc'], paths: ['/'] }] }],
    });
    const session = http2.connect(deadlineGateway.h2c);
    try {
      const stream = session.request({ ':method': 'POST', ':path': `${SVC}/Unary`, 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '300m' });
      stream.end(requestFrame({ message: 'lingering client' }));
      const status = await finalStatus(stream);
      assert.equal(status['grpc-status'], String(grpc.status.DEADLINE_EXCEEDED));
      assert.equal(status['grpc-message'], 'Deadline exceeded');
      assert.equal(upstreamStreams.length, 1);
      const upstreamStream = upstreamStreams[0];
      if (!upstreamStream.closed) await once(upstreamStream, 'close', { signal: AbortSignal.timeout(10_000) });
      assert.equal(upstreamStream.rstCode, http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.close();
      await deadlineGateway.stop();
      ignoring.close();
    }
  });

  test('a deadline too far away for a timer (99999999H) is no deadline at the gateway; a malformed grpc-timeout is ignored', async () => {
    // A bare HTTP/2 upstream that answers after 100 ms and knows nothing of deadlines.
    const plain = http2.createServer();
    plain.on('stream', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      setTimeout(() => stream.end(requestFrame({ message: 'late but fine' })), 100);
    });
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    const plainGateway = await startGateway({
      services: [{ name: 'plain', url: `grpc://127.0.0.1:${(plain.address() as AddressInfo).port}`, routes: [{ name: 'r', protocols: ['grpc'], paths: ['/'] }] }],
    });
    const session = http2.connect(plainGateway.h2c);
    try {
      for (const grpcTimeout of ['99999999H', 'soon']) {
        const stream = session.request({ ':method': 'POST', ':path': `${SVC}/Unary`, 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': grpcTimeout });
        stream.end(requestFrame({ message: grpcTimeout }));
        assert.equal((await finalStatus(stream))['grpc-status'], '0', `grpc-timeout: ${grpcTimeout}`);
      }
    } finally {
      session.close();
      await plainGateway.stop();
      plain.close();
    }
  });

  test('HTTP/1.1 on a gRPC route: 415 for a non-gRPC request (Kong)', async () => {
    const res = await request(`${gw.http}${SVC}/Unary`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 415);
    assert.equal(res.json().message, 'Non-gRPC request matched gRPC route');
  });
});

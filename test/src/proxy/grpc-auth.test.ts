/**
 * The oauth2 plugin on gRPC routes, in the recommended setup (tokens issued on an https route with
 * `global_credentials`): the token is read from `authorization: bearer` metadata, failures reach grpc-js
 * as UNAUTHENTICATED with a readable message, and the identity goes upstream as metadata.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { echoClient, grpc, requestFrame, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { CLIENT, issueToken, oauth2Plugin, tokenIssuerConfig } from '../../fixtures/oauth2-setup.ts';

async function failure(call: Promise<unknown>): Promise<grpc.ServiceError> {
  return call.then(
    () => assert.fail('expected the call to fail'),
    (err) => err,
  );
}

describe('oauth2 on gRPC routes', () => {
  let upstream: GrpcEcho;
  let gw: TestGateway;
  let token: string;
  const clients: EchoClient[] = [];

  before(async () => {
    upstream = await startGrpcEcho();
    const issuer = tokenIssuerConfig();
    gw = await startGateway({
      ...issuer,
      services: [
        {
          name: 'echo',
          url: `grpc://127.0.0.1:${upstream.port}`,
          routes: [{ name: 'echo-grpc', protocols: ['grpc', 'grpcs'], paths: ['/tollgate.test.Echo/'], plugins: [oauth2Plugin({ hide_credentials: true })] }],
        },
      ],
    });
    token = await issueToken(gw.https);
    clients.push(echoClient(new URL(gw.h2c).host));
    clients.push(echoClient(new URL(gw.https).host, { ca: readFileSync(join(gw.dataDir, 'tls', 'gateway.crt'), 'utf8') }));
  });

  after(async () => {
    for (const c of clients) c.close();
    await gw?.stop();
    await upstream?.close();
  });

  for (const [index, transport] of ['h2c', 'tls'].entries()) {
    test(`${transport}: no token → UNAUTHENTICATED, "The access token is missing"`, async () => {
      const err = await failure(unary(clients[index], { message: 'x' }));
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      assert.equal(err.details, 'The access token is missing');
    });

    test(`${transport}: a bad token → UNAUTHENTICATED, "The access token is invalid or has expired"`, async () => {
      const err = await failure(unary(clients[index], { message: 'x' }, { metadata: { authorization: 'Bearer not-a-token' } }));
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      assert.equal(err.details, 'The access token is invalid or has expired');
    });

    test(`${transport}: a global token from the https route → the call goes through with the identity as metadata`, async () => {
      const { reply } = await unary(clients[index], { message: 'ok' }, { metadata: { authorization: `Bearer ${token}`, 'x-consumer-username': 'spoofed' } });
      assert.equal(reply.message, 'ok');
      assert.equal(reply.metadata['x-consumer-username'], 'acme');
      assert.equal(reply.metadata['x-consumer-custom-id'], 'cust-42');
      assert.equal(reply.metadata['x-credential-identifier'], CLIENT.client_id);
      assert.equal(reply.metadata.authorization, undefined, 'hide_credentials removes the token upstream');
    });
  }

  test('a gRPC call to a path the plugin answers itself (…/oauth2/token) gets a gRPC status, never JSON', async () => {
    const session = http2.connect(gw.h2c);
    try {
      for (const endpoint of ['token', 'introspect']) {
        const stream = session.request({ ':method': 'POST', ':path': `/tollgate.test.Echo/oauth2/${endpoint}`, 'content-type': 'application/grpc', te: 'trailers' });
        stream.end(requestFrame({ message: 'x' }));
        const [headers, flags] = await new Promise<[http2.IncomingHttpHeaders, number]>((r) => stream.once('response', (h, f) => r([h, f])));
        const body: Buffer[] = [];
        for await (const chunk of stream) body.push(chunk);
        assert.equal(headers['content-type'], 'application/grpc', endpoint);
        assert.ok(flags & http2.constants.NGHTTP2_FLAG_END_STREAM, `${endpoint}: trailers-only`);
        assert.match(String(headers['grpc-status']), /^[1-9]\d*$/, endpoint);
        assert.ok(String(headers['grpc-message'] ?? '').length > 0, endpoint);
        assert.equal(Buffer.concat(body).length, 0, endpoint);
      }
    } finally {
      session.close();
    }
  });
});

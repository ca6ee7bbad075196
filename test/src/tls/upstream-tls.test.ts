/**
 * TLS towards upstreams with real TLS servers (Kong's spec/02-integration/05-proxy/18-upstream_tls_spec.lua
 * in substance): `tls_verify` against `ca_certificates` (and not the system's CAs), the upstream's
 * name checked, `tls_verify_depth` counting intermediates, `client_certificate` presented (mTLS),
 * the upstream's client certificate as a fallback, and the same for gRPC and WebSocket services.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { echoClient, startGrpcEcho, unary, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { testPki, type CertifiedKey, type TestPki } from '../../fixtures/tls.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';

const ROOT = '88888888-8888-4888-8888-888888888888';
const INTERMEDIATE = '99999999-9999-4999-8999-999999999999';
const CLIENT = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';

interface TlsUpstream {
  port: number;
  /** Subject CN of the client certificate of each request ('' when none). */
  clients: string[];
  close(): void;
}

async function tlsUpstream(identity: CertifiedKey, options: https.ServerOptions = {}): Promise<TlsUpstream> {
  const clients: string[] = [];
  const server = https.createServer({ cert: identity.cert + identity.chain.join(''), key: identity.key, ...options }, (req, res) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    clients.push(String(peer?.subject?.CN ?? ''));
    res.writeHead(200, { 'content-type': 'text/plain' }).end('secret');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, clients, close: () => server.close() };
}

let pki: TestPki;
let gw: TestGateway;

before(async () => {
  pki = await testPki();
  gw = await startGateway({});
});
after(async () => {
  await gw?.stop();
});

function tlsEntities() {
  return {
    certificates: [{ id: CLIENT, cert: pki.client.cert, key: pki.client.key }],
    ca_certificates: [{ id: ROOT, cert: pki.root.cert }, { id: INTERMEDIATE, cert: pki.intermediate.cert }],
  };
}

/** Reloads with one https service to `host:port` carrying `fields`; returns the status of a request through it. */
async function statusThrough(host: string, port: number, fields: Record<string, unknown>, upstreams?: Record<string, unknown>[]): Promise<number> {
  assert.ok(await gw.reload({
    ...tlsEntities(),
    services: [{ name: 's', protocol: 'https', host, port, retries: 0, ...fields, routes: [{ name: 'r', paths: ['/'] }] }],
    ...(upstreams ? { upstreams } : {}),
  }));
  return (await request(gw.http + '/')).status;
}

describe('verification', () => {
  let server: TlsUpstream;
  let deep: TlsUpstream;
  let wrongName: TlsUpstream;

  before(async () => {
    server = await tlsUpstream(pki.server);
    deep = await tlsUpstream(pki.deepServer);
    wrongName = await tlsUpstream(await pki.named('not-this-host.test'));
  });
  after(() => {
    for (const s of [server, deep, wrongName]) s?.close();
  });

  test('without tls_verify any certificate is accepted (Kong’s default); with it, only one from ca_certificates', async () => {
    assert.equal(await statusThrough('127.0.0.1', server.port, {}), 200);
    assert.equal(await statusThrough('127.0.0.1', server.port, { tls_verify: true }), 502, 'the system CAs do not know the test root');
    assert.equal(await statusThrough('127.0.0.1', server.port, { tls_verify: true, ca_certificates: [ROOT] }), 200);
    assert.equal(await statusThrough('localhost', server.port, { tls_verify: true, ca_certificates: [ROOT] }), 200);
    assert.equal(await statusThrough('127.0.0.1', server.port, { tls_verify: true, ca_certificates: [INTERMEDIATE] }), 502, 'another CA');
  });

  test("the upstream's name must be the certificate's", async () => {
    assert.equal(await statusThrough('127.0.0.1', wrongName.port, { tls_verify: true, ca_certificates: [ROOT] }), 502);
    assert.equal(await statusThrough('127.0.0.1', wrongName.port, { tls_verify: false, ca_certificates: [ROOT] }), 200);
  });

  test('tls_verify_depth: the number of intermediates allowed', async () => {
    assert.equal(await statusThrough('127.0.0.1', deep.port, { tls_verify: true, ca_certificates: [ROOT] }), 200, 'no depth: no limit');
    assert.equal(await statusThrough('127.0.0.1', deep.port, { tls_verify: true, ca_certificates: [ROOT], tls_verify_depth: 0 }), 502);
    assert.equal(await statusThrough('127.0.0.1', deep.port, { tls_verify: true, ca_certificates: [ROOT], tls_verify_depth: 1 }), 200);
    assert.equal(await statusThrough('127.0.0.1', server.port, { tls_verify: true, ca_certificates: [ROOT], tls_verify_depth: 0 }), 200, 'signed by the root itself');
  });
});

describe('client certificates (mTLS)', () => {
  let mtls: TlsUpstream;

  before(async () => {
    mtls = await tlsUpstream(pki.server, { requestCert: true, rejectUnauthorized: true, ca: [pki.root.cert] });
  });
  after(() => mtls?.close());

  test("the service's client_certificate, else its upstream's", async () => {
    assert.equal(await statusThrough('127.0.0.1', mtls.port, {}), 502, 'no client certificate: refused by the upstream');
    assert.equal(await statusThrough('127.0.0.1', mtls.port, { client_certificate: { id: CLIENT } }), 200);
    assert.equal(mtls.clients.at(-1), 'tollgate-client');
    const status = await statusThrough('mtls-pool', 443, {}, [{ name: 'mtls-pool', client_certificate: CLIENT, targets: [{ target: `127.0.0.1:${mtls.port}` }] }]);
    assert.equal(status, 200, "the upstream's certificate");
  });
});

describe('gRPC and WebSocket services', () => {
  let grpcs: GrpcEcho;
  let wss: WsEcho;

  before(async () => {
    grpcs = await startGrpcEcho({ tls: pki.server });
    wss = await startWsEcho({ tls: pki.server });
  });
  after(async () => {
    await grpcs?.close();
    await wss?.close();
  });

  test('grpcs and wss verify against ca_certificates too', async () => {
    const services = (verifyWith: string[]) => [
      { name: 'g', protocol: 'grpcs', host: '127.0.0.1', port: grpcs.port, tls_verify: true, ca_certificates: verifyWith, routes: [{ name: 'g', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'] }] },
      { name: 'w', protocol: 'wss', host: '127.0.0.1', port: wss.port, tls_verify: true, ca_certificates: verifyWith, retries: 0, routes: [{ name: 'w', paths: ['/ws'] }] },
    ];
    const wsOpens = () =>
      new Promise<boolean>((resolve) => {
        const ws = new WebSocket(gw.http.replace('http:', 'ws:') + '/ws');
        ws.once('open', () => {
          ws.close();
          resolve(true);
        });
        ws.once('unexpected-response', () => resolve(false));
        ws.once('error', () => resolve(false));
      });
    const client = echoClient(new URL(gw.h2c).host);
    try {
      assert.ok(await gw.reload({ ...tlsEntities(), services: services([ROOT]) }));
      assert.equal((await unary(client, { message: 'verified' })).reply.message, 'verified');
      assert.equal(await wsOpens(), true);
      assert.ok(await gw.reload({ ...tlsEntities(), services: services([INTERMEDIATE]) }));
      await assert.rejects(unary(client, { message: 'refused' }), /UNAVAILABLE|Unavailable|14/);
      assert.equal(await wsOpens(), false);
    } finally {
      client.close();
    }
  });
});

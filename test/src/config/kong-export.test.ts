/**
 * A file exported from a Kong database (`kong config db_export`, fixture test/fixtures/kong-db-export.yaml)
 * loads unchanged and serves: the balanced service behind its upstream and targets, the oauth2 plugin
 * and credential, the certificate by SNI, the https service verified against its CA certificate, the
 * stream route accepted with a warning.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { startTargetServer, type TargetServer } from '../../fixtures/target-server.ts';
import { testPki } from '../../fixtures/tls.ts';
import { certificateDigest } from '../../../src/config/certificates.ts';
import { portOf } from '../../helpers/support.ts';

let gw: TestGateway;
let apps: TargetServer[];

before(async () => {
  const pki = await testPki();
  apps = await Promise.all([startTargetServer(), startTargetServer(), startTargetServer({ protocol: 'https', tls: { cert: pki.server.cert, key: pki.server.key } })]);
  const values: Record<string, string> = {
    APP_1: String(apps[0].port),
    APP_2: String(apps[1].port),
    ADMIN_APP: String(apps[2].port),
    CA_CERT: JSON.stringify(pki.root.cert),
    CA_DIGEST: certificateDigest(pki.root.cert),
    SERVER_CERT: JSON.stringify(pki.server.cert),
    SERVER_KEY: JSON.stringify(pki.server.key),
  };
  const text = readFileSync(resolve(import.meta.dirname, '../../fixtures/kong-db-export.yaml'), 'utf8').replace(/\{\{([A-Z_0-9]+)\}\}/g, (_, name: string) => values[name]);
  gw = await startGateway(parse(text));
});
after(async () => {
  await gw?.stop();
  await Promise.all(apps.map((a) => a.stop()));
});

test('the export loads; the stream route is accepted with a warning and not served', () => {
  const { config } = gw.gateway;
  assert.deepEqual(config.routes.map((r) => r.name), ['orders', 'admin']);
  assert.equal(config.warnings.length, 1);
  assert.match(config.warnings[0], /routes\[2\]: a tcp route is accepted but not proxied/);
  assert.deepEqual(config.services.map((s) => s.tags), [['public'], null, null]);
});

test('the balanced service alternates between its two targets', async () => {
  for (let i = 0; i < 10; i++) assert.equal((await request(gw.http + '/orders/1')).status, 200);
  assert.deepEqual([apps[0].ok, apps[1].ok], [5, 5]);
  const targets = (await request(`${gw.admin}/upstreams/orders.upstream/targets`)).json();
  assert.deepEqual(targets.data.map((t: { id: string }) => t.id), ['f6a7b8c9-0d1e-4f2a-9b4c-5d6e7f8a9b13', '1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d15']);
});

test('the oauth2 plugin and credential of the export protect the https service, verified against the CA certificate', async () => {
  assert.equal((await request(gw.https + '/admin/hello')).status, 401);
  const token = await request(gw.https + '/admin/oauth2/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret',
  });
  assert.equal(token.status, 200, token.text);
  const res = await request(gw.https + '/admin/hello', { headers: { authorization: `Bearer ${token.json().access_token}` } });
  assert.equal(res.status, 200, res.text);
  assert.equal(apps[2].requests.at(-1)!.headers['x-consumer-username'], 'acme');
});

test('the certificate is served for its SNI', async () => {
  const cn = await new Promise<string>((resolvePeer, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portOf(gw.https), servername: 'orders.example.com', rejectUnauthorized: false }, () => {
      resolvePeer(new X509Certificate(socket.getPeerX509Certificate()!.raw).issuer);
      socket.destroy();
    });
    socket.once('error', reject);
  });
  assert.match(cn, /Tollgate Test Root CA/);
});

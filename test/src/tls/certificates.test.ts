/**
 * Certificates served by SNI on the TLS listeners, with real TLS clients: Kong's lookup order (the
 * exact name, `*.rest`, `first.*`, the `*` SNI, then the default certificate), HTTP/2 by ALPN with a
 * configured certificate, and certificates replaced by a reload.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { testPki, type CertifiedKey } from '../../fixtures/tls.ts';
import { portOf } from '../../helpers/support.ts';

/** The first DNS name of the certificate the listener presents for `servername` (none: no SNI sent). */
function servedName(gw: TestGateway, servername?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portOf(gw.https), servername, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => {
      const cert = new X509Certificate(socket.getPeerX509Certificate()!.raw);
      socket.destroy();
      resolve(cert.subjectAltName?.split(', ')[0]?.replace('DNS:', '') ?? '');
    });
    socket.once('error', reject);
  });
}

describe('certificates by SNI', () => {
  let gw: TestGateway;
  let exact: CertifiedKey;
  let prefix: CertifiedKey;
  let suffix: CertifiedKey;
  let catchAll: CertifiedKey;

  before(async () => {
    const pki = await testPki();
    [exact, prefix, suffix, catchAll] = await Promise.all([pki.named('exact.test'), pki.named('prefix.test'), pki.named('suffix.test'), pki.named('catch-all.test')]);
    gw = await startGateway({
      certificates: [
        { cert: exact.cert, key: exact.key, snis: [{ name: 'api.example.com' }] },
        { cert: prefix.cert, key: prefix.key, snis: ['*.example.com'] },
        { id: '77777777-7777-4777-8777-777777777777', cert: suffix.cert, key: suffix.key },
      ],
      snis: [{ name: 'example.*', certificate: '77777777-7777-4777-8777-777777777777' }],
    });
  });
  after(async () => {
    await gw?.stop();
  });

  test("Kong's lookup order: exact name, *.rest, first.*, else the default certificate", async () => {
    assert.equal(await servedName(gw, 'api.example.com'), 'exact.test');
    assert.equal(await servedName(gw, 'API.Example.COM'), 'exact.test', 'names compare without case');
    assert.equal(await servedName(gw, 'www.example.com'), 'prefix.test');
    assert.equal(await servedName(gw, 'deep.www.example.com'), 'localhost', 'neither *.www.example.com nor deep.www.example.* exists');
    assert.equal(await servedName(gw, 'example.net'), 'suffix.test');
    assert.equal(await servedName(gw, 'example.com'), 'suffix.test', 'two labels: no *.com lookup, example.* matches');
    assert.equal(await servedName(gw, 'unknown.test'), 'localhost', 'the default (generated) certificate');
    assert.equal(await servedName(gw), 'localhost', 'no SNI: the default certificate');
  });

  test('HTTP/2 by ALPN with a configured certificate', async () => {
    const session = http2.connect(gw.https, { servername: 'api.example.com', rejectUnauthorized: false });
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':path': '/nothing-here' });
        stream.once('response', (headers) => resolve(Number(headers[':status'])));
        stream.once('error', reject);
        stream.resume();
      });
      assert.equal(status, 404);
      assert.equal(session.alpnProtocol, 'h2');
      const peer = new X509Certificate((session.socket as tls.TLSSocket).getPeerX509Certificate()!.raw);
      assert.match(peer.subjectAltName!, /exact\.test/);
    } finally {
      session.close();
    }
  });

  test('a reload replaces the certificates; the `*` SNI catches every name without a better match', async () => {
    assert.ok(await gw.reload({
      certificates: [
        { cert: exact.cert, key: exact.key, snis: ['api.example.com'] },
        { cert: catchAll.cert, key: catchAll.key, snis: ['*'] },
      ],
    }));
    assert.equal(await servedName(gw, 'api.example.com'), 'exact.test');
    assert.equal(await servedName(gw, 'www.example.com'), 'catch-all.test');
    assert.equal(await servedName(gw, 'unknown.test'), 'catch-all.test');
    assert.equal(await servedName(gw), 'localhost', 'a client without SNI still gets the default certificate');
    const res = await request(gw.https + '/', { servername: 'api.example.com' });
    assert.equal(res.status, 404);
  });

  test('the admin API lists certificates and SNIs, never private keys', async () => {
    const certificates = (await request(`${gw.admin}/certificates`)).json();
    assert.equal(certificates.data.length, 2);
    assert.deepEqual(certificates.data[1].snis, ['*']);
    assert.equal('key' in certificates.data[0], false);
    assert.equal(JSON.stringify(certificates).includes('PRIVATE KEY'), false);
    const snis = (await request(`${gw.admin}/snis`)).json();
    assert.deepEqual(snis.data.map((s: { name: string }) => s.name), ['api.example.com', '*']);
    const one = (await request(`${gw.admin}/snis/api.example.com`)).json();
    assert.equal(one.certificate.id, certificates.data[0].id);
    assert.equal((await request(`${gw.admin}/certificates/${certificates.data[0].id}/snis`)).json().data.length, 1);
    assert.equal((await request(`${gw.admin}/certificates`, { method: 'POST', body: {} })).status, 405);
  });
});

/**
 * Loading `upstreams`, `targets`, `certificates`, `snis`, `ca_certificates`, the services' upstream TLS
 * fields, stream routes, a Kong export's extra fields, and the `plugins` setting. The upstream schema
 * cases are Kong's (spec/01-unit/01-db/01-schema/09-upstreams_spec.lua), with Kong's messages.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { loadConfigText } from '../../../src/config/load.ts';
import type { GatewayConfig } from '../../../src/config/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { testPki, type TestPki } from '../../fixtures/tls.ts';

const FILE = 'gw.yaml';

function result(config: Record<string, unknown>) {
  return loadConfigText(stringify({ _format_version: '3.0', ...config }), '/tmp/tollgate-balancing-test/gw.yaml', bundledPlugins, FILE);
}

function load(config: Record<string, unknown>): GatewayConfig {
  const loaded = result(config);
  if (!loaded.ok) assert.fail(`unexpected errors:\n${loaded.errors.map(String).join('\n')}`);
  return loaded.config;
}

/** The errors, without their positions (`path: message`). */
function errors(config: Record<string, unknown>): string[] {
  const loaded = result(config);
  assert.equal(loaded.ok, false, 'expected the config to be refused');
  return loaded.ok ? [] : loaded.errors.map((e) => `${e.path}: ${e.message}`);
}

describe('upstreams (Kong 09-upstreams_spec)', () => {
  const upstreamErrors = (fields: Record<string, unknown>) => errors({ upstreams: [{ name: 'x', ...fields }] });

  test('produces defaults', () => {
    const [u] = load({ upstreams: [{ name: 'www.example.com' }] }).upstreams;
    assert.equal(u.algorithm, 'round-robin');
    assert.equal(u.hash_on, 'none');
    assert.equal(u.hash_fallback, 'none');
    assert.equal(u.hash_on_cookie_path, '/');
    assert.equal(u.slots, 10000);
    assert.equal(u.use_srv_name, false);
    assert.deepEqual(u.healthchecks, {
      active: {
        type: 'http', timeout: 1, concurrency: 10, http_path: '/', https_sni: null, https_verify_certificate: true, headers: null,
        healthy: { interval: 0, http_statuses: [200, 302], successes: 0 },
        unhealthy: { interval: 0, http_statuses: [429, 404, 500, 501, 502, 503, 504, 505], tcp_failures: 0, timeouts: 0, http_failures: 0 },
      },
      passive: {
        type: 'http',
        healthy: { http_statuses: [200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308], successes: 0 },
        unhealthy: { http_statuses: [429, 500, 503], tcp_failures: 0, timeouts: 0, http_failures: 0 },
      },
      threshold: 0,
    });
  });

  test('requires a valid name with no port', () => {
    assert.deepEqual(errors({ upstreams: [{}] }), ['upstreams[0].name: required field missing']);
    assert.deepEqual(errors({ upstreams: [{ name: '123.123.123.123' }] }), ["upstreams[0].name: Invalid name ('123.123.123.123'); no ip addresses allowed"]);
    assert.deepEqual(errors({ upstreams: [{ name: '\\\\bad\\\\////name////' }] }), ["upstreams[0].name: Invalid name ('\\\\bad\\\\////name////'); must be a valid hostname"]);
    assert.deepEqual(errors({ upstreams: [{ name: 'name:80' }] }), ["upstreams[0].name: Invalid name ('name:80'); no port allowed"]);
    for (const name of ['1234', 'fafa fafa', '192.168.0.1', 'myserver:8000']) assert.equal(upstreamErrors({ name }).length > 0, true, name);
    load({ upstreams: [{ name: 'valid.host.name' }, { name: 'my_service' }] });
  });

  test('host_header must be a host with an optional port', () => {
    assert.deepEqual(upstreamErrors({ host_header: 'http://ahostname.test' }), ['upstreams[0].host_header: invalid hostname: http://ahostname.test']);
    assert.deepEqual(upstreamErrors({ host_header: 'ahostname-' }), ['upstreams[0].host_header: invalid hostname: ahostname-']);
    assert.deepEqual(upstreamErrors({ host_header: 'a hostname' }), ['upstreams[0].host_header: invalid hostname: a hostname']);
    load({ upstreams: [{ name: 'a', host_header: 'ahostname.test' }, { name: 'b', host_header: 'ahostname.test:8080' }] });
  });

  test('rejects invalid health check configurations', () => {
    const seconds = 'value should be between 0 and 65535';
    const posInteger = 'value should be between 1 and 2147483648';
    const zeroInteger = 'value should be between 0 and 255';
    const statusCode = 'value should be between 100 and 999';
    const threshold = 'value should be between 0 and 100';
    const cases: [Record<string, unknown>, string][] = [
      [{ active: { timeout: -1 } }, seconds],
      [{ active: { timeout: 1e42 } }, seconds],
      [{ active: { concurrency: 0.5 } }, 'expected an integer'],
      [{ active: { concurrency: 0 } }, posInteger],
      [{ active: { concurrency: -10 } }, posInteger],
      [{ active: { http_path: '' } }, 'length must be at least 1'],
      [{ active: { http_path: 'ovo' } }, 'should start with: /'],
      [{ active: { https_sni: '127.0.0.1' } }, 'must not be an IP'],
      [{ active: { https_sni: '127.0.0.1:8080' } }, 'must not be an IP'],
      [{ active: { https_sni: '/example' } }, 'invalid value: '],
      [{ active: { https_sni: '.example' } }, 'invalid value: '],
      [{ active: { https_sni: 'example:' } }, 'invalid value: '],
      [{ active: { https_sni: 'mock;bin' } }, 'invalid value: '],
      [{ active: { https_sni: 'example.com/org' } }, 'invalid value: '],
      [{ active: { https_sni: 'example-.org' } }, 'invalid value: '],
      [{ active: { https_sni: 'example.org-' } }, 'invalid value: '],
      [{ active: { https_sni: 'hello..example.com' } }, 'invalid value: '],
      [{ active: { https_sni: 'hello-.example.com' } }, 'invalid value: '],
      [{ active: { https_sni: 'example.com:1234' } }, 'must not have a port'],
      [{ active: { https_verify_certificate: 'ovo' } }, 'expected a boolean'],
      [{ active: { headers: 0 } }, 'expected a map'],
      // Kong: "expected a string" for the Lua array `{ "" }`, which YAML writes as a list: a list is not a map.
      [{ active: { headers: [''] } }, 'expected a map'],
      [{ active: { headers: { 'x-header': 123 } } }, 'expected an array'],
      [{ active: { headers: { 'x header': ['v'] } } }, "bad header name 'x header', allowed characters are A-Z, a-z, 0-9, '_', and '-'"],
      [{ active: { headers: { 'x-header': ['a\r\nb'] } } }, 'must not contain line breaks'],
      [{ active: { healthy: { interval: -1 } } }, seconds],
      [{ active: { healthy: { interval: 1e42 } } }, seconds],
      [{ active: { healthy: { http_statuses: 404 } } }, 'expected an array'],
      [{ active: { healthy: { http_statuses: ['ovo'] } } }, 'expected an integer'],
      [{ active: { healthy: { http_statuses: [-1] } } }, statusCode],
      [{ active: { healthy: { http_statuses: [99] } } }, statusCode],
      [{ active: { healthy: { http_statuses: [1000] } } }, statusCode],
      [{ active: { healthy: { http_statuses: [111.314] } } }, 'expected an integer'],
      [{ active: { healthy: { successes: 0.5 } } }, 'expected an integer'],
      [{ active: { unhealthy: { timeouts: 1 } }, threshold: -1 }, threshold],
      [{ active: { unhealthy: { timeouts: 1 } }, threshold: 101 }, threshold],
      [{ active: { unhealthy: { timeouts: 1 } }, threshold: '50' }, 'expected a number'],
      [{ active: { unhealthy: { timeouts: 1 } }, threshold: true }, 'expected a number'],
      [{ active: { healthy: { successes: -1 } } }, zeroInteger],
      [{ active: { healthy: { successes: 256 } } }, zeroInteger],
      [{ active: { unhealthy: { interval: -1 } } }, seconds],
      [{ active: { unhealthy: { interval: 1e42 } } }, seconds],
      [{ active: { unhealthy: { http_statuses: 404 } } }, 'expected an array'],
      [{ active: { unhealthy: { http_statuses: ['ovo'] } } }, 'expected an integer'],
      [{ active: { unhealthy: { http_statuses: [-1] } } }, statusCode],
      [{ active: { unhealthy: { http_statuses: [99] } } }, statusCode],
      [{ active: { unhealthy: { http_statuses: [1000] } } }, statusCode],
      [{ active: { unhealthy: { tcp_failures: 0.5 } } }, 'expected an integer'],
      [{ active: { unhealthy: { tcp_failures: 256 } } }, zeroInteger],
      [{ active: { unhealthy: { tcp_failures: -1 } } }, zeroInteger],
      [{ active: { unhealthy: { timeouts: 0.5 } } }, 'expected an integer'],
      [{ active: { unhealthy: { timeouts: 256 } } }, zeroInteger],
      [{ active: { unhealthy: { timeouts: -1 } } }, zeroInteger],
      [{ active: { unhealthy: { http_failures: 0.5 } } }, 'expected an integer'],
      [{ active: { unhealthy: { http_failures: -1 } } }, zeroInteger],
      [{ active: { unhealthy: { http_failures: 256 } } }, zeroInteger],
      [{ passive: { healthy: { http_statuses: 404 } } }, 'expected an array'],
      [{ passive: { healthy: { http_statuses: ['ovo'] } } }, 'expected an integer'],
      [{ passive: { healthy: { http_statuses: [-1] } } }, statusCode],
      [{ passive: { healthy: { http_statuses: [99] } } }, statusCode],
      [{ passive: { healthy: { http_statuses: [1000] } } }, statusCode],
      [{ passive: { healthy: { successes: 0.5 } } }, 'expected an integer'],
      [{ passive: { healthy: { successes: -1 } } }, zeroInteger],
      [{ passive: { unhealthy: { http_statuses: 404 } } }, 'expected an array'],
      [{ passive: { unhealthy: { http_statuses: ['ovo'] } } }, 'expected an integer'],
      [{ passive: { unhealthy: { http_statuses: [-1] } } }, statusCode],
      [{ passive: { unhealthy: { http_statuses: [99] } } }, statusCode],
      [{ passive: { unhealthy: { http_statuses: [1000] } } }, statusCode],
      [{ passive: { unhealthy: { tcp_failures: 0.5 } } }, 'expected an integer'],
      [{ passive: { unhealthy: { tcp_failures: -1 } } }, zeroInteger],
      [{ passive: { unhealthy: { tcp_failures: 256 } } }, zeroInteger],
      [{ passive: { unhealthy: { timeouts: 0.5 } } }, 'expected an integer'],
      [{ passive: { unhealthy: { timeouts: 256 } } }, zeroInteger],
      [{ passive: { unhealthy: { timeouts: -1 } } }, zeroInteger],
      [{ passive: { unhealthy: { http_failures: 0.5 } } }, 'expected an integer'],
      [{ passive: { unhealthy: { http_failures: -1 } } }, zeroInteger],
      [{ passive: { unhealthy: { http_failures: 256 } } }, zeroInteger],
      [{ passive: { unhealthy: { timeouts: 1 } }, threshold: -1 }, threshold],
      [{ passive: { unhealthy: { timeouts: 1 } }, threshold: 101 }, threshold],
      [{ passive: { unhealthy: { timeouts: 1 } }, threshold: '50' }, 'expected a number'],
      [{ passive: { unhealthy: { timeouts: 1 } }, threshold: true }, 'expected a number'],
    ];
    for (const [healthchecks, message] of cases) {
      const found = upstreamErrors({ healthchecks });
      assert.equal(found.length, 1, JSON.stringify(healthchecks) + ' → ' + found.join(' | '));
      assert.ok(found[0].includes(message), `${JSON.stringify(healthchecks)}: expected "${message}", got "${found[0]}"`);
      assert.ok(found[0].startsWith('upstreams[0].healthchecks.'), found[0]);
    }
  });

  test('accepts inputs with the correct values', () => {
    const cases: Record<string, unknown>[] = [
      { active: { timeout: 0.5 } }, { active: { timeout: 1 } }, { active: { concurrency: 2 } }, { active: { http_path: '/' } },
      { active: { http_path: '/test' } }, { active: { https_sni: 'example.com' } }, { active: { https_sni: 'example.test.' } },
      { active: { https_verify_certificate: false } }, { active: { healthy: { interval: 0 } } },
      { active: { healthy: { http_statuses: [200, 300] } } }, { active: { healthy: { successes: 2 } } }, { active: { healthy: { successes: 255 } } },
      { active: { unhealthy: { interval: 0 } } }, { active: { unhealthy: { http_statuses: [404] } } }, { active: { unhealthy: { tcp_failures: 3 } } },
      { active: { unhealthy: { tcp_failures: 255 } } }, { active: { unhealthy: { timeouts: 9 } } }, { active: { unhealthy: { timeouts: 255 } } },
      { active: { unhealthy: { http_failures: 2 } } }, { active: { unhealthy: { http_failures: 2 } }, threshold: 0 },
      { active: { unhealthy: { http_failures: 2 } }, threshold: 50.5 }, { active: { unhealthy: { http_failures: 2 } }, threshold: 100 },
      { passive: { healthy: { http_statuses: [200, 201] } } }, { passive: { healthy: { successes: 2 } } }, { passive: { healthy: { successes: 255 } } },
      { passive: { unhealthy: { http_statuses: [400, 500] } } }, { passive: { unhealthy: { tcp_failures: 8 } } },
      { passive: { unhealthy: { tcp_failures: 255 } } }, { passive: { unhealthy: { timeouts: 1 } } }, { passive: { unhealthy: { timeouts: 255 } } },
      { passive: { unhealthy: { http_failures: 2 } } }, { passive: { unhealthy: { http_failures: 255 } } },
      { passive: { unhealthy: { http_failures: 2 } }, threshold: 0 }, { passive: { unhealthy: { http_failures: 2 } }, threshold: 50.5 },
      { passive: { unhealthy: { http_failures: 2 } }, threshold: 100 },
    ];
    load({ upstreams: cases.map((healthchecks, i) => ({ name: `u${i}`, healthchecks })) });
  });

  test('hash_on and hash_fallback: what each requires, what they exclude', () => {
    const conditional = (field: string) => `upstreams[0]: failed conditional validation given value of field '${field}'`;
    assert.deepEqual(upstreamErrors({ hash_on: 'header' }), ['upstreams[0].hash_on_header: required field missing', conditional('hash_on')]);
    assert.deepEqual(upstreamErrors({ hash_on: 'ip', hash_fallback: 'header' }), ['upstreams[0].hash_fallback_header: required field missing', conditional('hash_fallback')]);
    assert.deepEqual(upstreamErrors({ hash_on: 'cookie' }), ['upstreams[0].hash_on_cookie: required field missing', conditional('hash_on')]);
    assert.ok(upstreamErrors({ hash_on: 'ip', hash_fallback: 'cookie' }).includes('upstreams[0].hash_on_cookie: required field missing'));
    assert.ok(upstreamErrors({ hash_on: 'cookie', hash_on_cookie: 'c', hash_fallback: 'header', hash_fallback_header: 'h' }).includes('upstreams[0].hash_fallback: expected one of: none'));
    for (const input of ['consumer', 'ip', 'path']) {
      assert.ok(upstreamErrors({ hash_on: input, hash_fallback: input }).some((e) => e.startsWith('upstreams[0].hash_fallback: expected one of:')), input);
    }
    assert.ok(upstreamErrors({ hash_on: 'query_arg' }).includes('upstreams[0].hash_on_query_arg: required field missing'));
    assert.ok(upstreamErrors({ hash_on: 'ip', hash_fallback: 'query_arg' }).includes('upstreams[0].hash_fallback_query_arg: required field missing'));
    assert.deepEqual(upstreamErrors({ hash_on: 'query_arg', hash_on_query_arg: 'same', hash_fallback: 'query_arg', hash_fallback_query_arg: 'same' }), [
      "upstreams[0]: values of these fields must be distinct: 'hash_on_query_arg', 'hash_fallback_query_arg'",
    ]);
    assert.deepEqual(upstreamErrors({ hash_on: 'uri_capture', hash_on_uri_capture: 'same', hash_fallback: 'uri_capture', hash_fallback_uri_capture: 'same' }), [
      "upstreams[0]: values of these fields must be distinct: 'hash_on_uri_capture', 'hash_fallback_uri_capture'",
    ]);
    assert.deepEqual(upstreamErrors({ hash_on: 'query_arg', hash_on_query_arg: '' }), ['upstreams[0].hash_on_query_arg: length must be at least 1']);
    assert.deepEqual(upstreamErrors({ hash_on: 'uri_capture', hash_on_uri_capture: '' }), ['upstreams[0].hash_on_uri_capture: length must be at least 1']);
    assert.ok(upstreamErrors({ hash_on_cookie: 'a cookie' })[0].startsWith('upstreams[0].hash_on_cookie: contains one or more invalid characters'));
    load({ upstreams: [{ name: 'my_service', hash_on: 'header', hash_on_header: 'X-Balance', hash_fallback: 'cookie', hash_on_cookie: 'a_cookie' }] });
  });

  test("Kong's shorthands between algorithm and hash_on", () => {
    const [a, b, c, d] = load({
      upstreams: [
        { name: 'a', hash_on: 'header', hash_on_header: 'x' },
        { name: 'b', algorithm: 'consistent-hashing', hash_on: 'none' },
        { name: 'c', algorithm: 'least-connections', hash_on: 'none' },
        { name: 'd', algorithm: 'latency' },
      ],
    }).upstreams;
    assert.equal(a.algorithm, 'consistent-hashing');
    assert.equal(b.algorithm, 'round-robin');
    assert.deepEqual([c.algorithm, c.hash_on], ['least-connections', 'none']);
    assert.deepEqual([d.algorithm, d.hash_on], ['latency', 'none']);
  });
});

describe('targets', () => {
  test('nested or top-level by upstream name or id; Kong normal form, port 8000 by default', () => {
    const config = load({
      upstreams: [{ name: 'orders', targets: [{ target: '10.0.0.1:9000' }, { target: 'orders-1.internal', weight: 5 }] }],
      targets: [{ upstream: 'orders', target: '::1' }, { upstream: { name: 'orders' }, target: '[::1]:9000', tags: ['t'] }],
    });
    const [upstream] = config.upstreams;
    assert.deepEqual(
      config.targets.map((t) => [t.target, t.weight, t.upstream.id]),
      [
        ['10.0.0.1:9000', 100, upstream.id],
        ['orders-1.internal:8000', 5, upstream.id],
        ['[0000:0000:0000:0000:0000:0000:0000:0001]:8000', 100, upstream.id],
        ['[0000:0000:0000:0000:0000:0000:0000:0001]:9000', 100, upstream.id],
      ],
    );
    // Ids derive from the upstream and the address: the same after a reload.
    assert.deepEqual(load({ upstreams: [{ name: 'orders', targets: [{ target: '10.0.0.1:9000' }] }] }).targets[0].id, config.targets[0].id);
  });

  test('bad targets, weights, references and duplicates', () => {
    assert.deepEqual(errors({ upstreams: [{ name: 'u', targets: [{ target: 'not a host' }, { target: 'a:99999' }, { target: 'b', weight: 70000 }, {}] }] }), [
      "upstreams[0].targets[0].target: Invalid target ('not a host'); not a valid hostname or ip address",
      "upstreams[0].targets[1].target: Invalid target ('a:99999'); not a valid hostname or ip address",
      'upstreams[0].targets[2].weight: value should be between 0 and 65535',
      'upstreams[0].targets[3].target: required field missing',
    ]);
    assert.deepEqual(errors({ targets: [{ upstream: 'nope', target: 'a' }, { target: 'b' }] }), [
      "targets[0].upstream: invalid reference 'upstream: nope' (no such entry in 'upstreams')",
      'targets[1].upstream: required field missing',
    ]);
    assert.deepEqual(errors({ upstreams: [{ name: 'u', targets: [{ target: 'a' }, { target: 'a:8000' }] }] }), [
      "upstreams[0].targets[1]: uniqueness violation: 'targets' entity with target set to 'a:8000' already declared",
    ]);
    // The same address in two upstreams is two targets.
    load({ upstreams: [{ name: 'u', targets: [{ target: 'a' }] }, { name: 'v', targets: [{ target: 'a' }] }] });
  });
});

describe('certificates, snis, ca_certificates and upstream TLS', () => {
  let pki: TestPki;
  before(async () => {
    pki = await testPki();
  });

  test('certificates with nested SNIs (names or records) and top-level SNIs', async () => {
    const other = await pki.named('other.test');
    const config = load({
      certificates: [
        { cert: pki.server.cert, key: pki.server.key, snis: ['example.com', { name: '*.example.org', tags: ['x'] }] },
        { id: '11111111-1111-4111-8111-111111111111', cert: other.cert, key: other.key, tags: ['other'] },
      ],
      snis: [{ name: 'example.*', certificate: '11111111-1111-4111-8111-111111111111' }],
    });
    assert.deepEqual(config.certificates.map((c) => c.snis), [['example.com', '*.example.org'], ['example.*']]);
    assert.deepEqual(config.snis.map((s) => [s.name, s.certificate.id]), [
      ['example.com', config.certificates[0].id],
      ['*.example.org', config.certificates[0].id],
      ['example.*', '11111111-1111-4111-8111-111111111111'],
    ]);
  });

  test('a key that does not match, an alternative pair of the same type, bad PEM, bad or repeated SNIs', async () => {
    const other = await pki.named('other.test');
    assert.deepEqual(
      errors({
        certificates: [
          { cert: pki.server.cert, key: other.key },
          { cert: pki.server.cert.replace('MII', 'XXX'), key: 'nope' },
          { cert: other.cert, key: other.key, cert_alt: pki.client.cert, key_alt: pki.client.key, snis: ['a.test', 'a.test', '*.*.test', '1.2.3.4'] },
          { cert: pki.client.cert, key: pki.client.key, cert_alt: other.cert },
        ],
        snis: [{ name: 'b.test', certificate: '00000000-0000-4000-8000-000000000000' }],
      }).map((e) => e.replace(/invalid (certificate|key): .*/, 'invalid $1: …')),
      [
        'certificates[0]: certificate does not match key',
        'certificates[1].cert: invalid certificate: …',
        'certificates[1].key: invalid key: …',
        'certificates[2]: certificate and alternative certificate need to have different type (e.g. RSA and ECDSA), the provided certificates were both of the same type',
        "certificates[2].snis[1]: uniqueness violation: 'snis' entity with name set to 'a.test' already declared",
        'certificates[2].snis[2].name: only one wildcard must be specified',
        'certificates[2].snis[3].name: must not be an IP',
        "certificates[3]: all or none of these fields must be set: 'cert_alt', 'key_alt'",
        "snis[0].certificate: invalid reference 'certificate: 00000000-0000-4000-8000-000000000000' (no such entry in 'certificates')",
      ],
    );
  });

  test('ca_certificates: one unexpired CA certificate each, digest computed', () => {
    const config = load({ ca_certificates: [{ cert: pki.root.cert, tags: ['root'] }, { cert: pki.intermediate.cert }] });
    assert.match(config.ca_certificates[0].cert_digest, /^[0-9a-f]{64}$/);
    assert.deepEqual(errors({ ca_certificates: [{ cert: pki.server.cert }, { cert: pki.root.cert + pki.intermediate.cert }, { cert: pki.intermediate.cert, cert_digest: 'ab' }] }), [
      'ca_certificates[0].cert: certificate does not appear to be a CA because it is missing the "CA" basic constraint',
      'ca_certificates[1].cert: please submit only one certificate at a time',
      `ca_certificates[2].cert_digest: does not match the certificate (its SHA-256 digest is ${config.ca_certificates[1].cert_digest})`,
    ]);
  });

  test('services refer to their client certificate and CA certificates; TLS fields only for TLS services', () => {
    const base = {
      certificates: [{ id: '22222222-2222-4222-8222-222222222222', cert: pki.client.cert, key: pki.client.key }],
      ca_certificates: [{ id: '33333333-3333-4333-8333-333333333333', cert: pki.root.cert }],
    };
    const config = load({
      ...base,
      services: [{
        name: 's', url: 'https://backend.test', tls_verify: true, tls_verify_depth: 1,
        client_certificate: { id: '22222222-2222-4222-8222-222222222222' }, ca_certificates: ['33333333-3333-4333-8333-333333333333'],
      }],
    });
    const [service] = config.services;
    assert.deepEqual([service.tls_verify, service.tls_verify_depth, service.client_certificate, service.ca_certificates], [
      true, 1, { id: '22222222-2222-4222-8222-222222222222' }, ['33333333-3333-4333-8333-333333333333'],
    ]);
    assert.deepEqual(errors({
      ...base,
      services: [
        { name: 'a', url: 'https://backend.test', client_certificate: '44444444-4444-4444-8444-444444444444', ca_certificates: ['55555555-5555-4555-8555-555555555555'] },
        { name: 'b', url: 'http://backend.test', client_certificate: '22222222-2222-4222-8222-222222222222', ca_certificates: ['33333333-3333-4333-8333-333333333333'] },
        { name: 'c', url: 'https://backend.test', tls_verify_depth: 65 },
      ],
      upstreams: [{ name: 'u', client_certificate: '66666666-6666-4666-8666-666666666666' }],
    }), [
      "services[0].client_certificate: invalid reference 'client_certificate: 44444444-4444-4444-8444-444444444444' (no such entry in 'certificates')",
      "services[0].ca_certificates[0]: invalid reference 'ca_certificates: 55555555-5555-4555-8555-555555555555' (no such entry in 'ca_certificates')",
      'services[1].client_certificate: value must be null',
      'services[1].ca_certificates: value must be null',
      'services[2].tls_verify_depth: value should be between 0 and 64',
      "upstreams[0].client_certificate: invalid reference 'client_certificate: 66666666-6666-4666-8666-666666666666' (no such entry in 'certificates')",
    ]);
  });
});

describe('a Kong export: stream routes, timestamps, tags', () => {
  test('stream routes are accepted with a warning and not routed; sources/destinations are refused on HTTP routes', () => {
    const loaded = result({
      services: [{ name: 'tcp-svc', protocol: 'tcp', host: 'db.internal', port: 5432, created_at: 1700000000, updated_at: 1700000001, tags: ['db'] }],
      routes: [
        { name: 'tcp-route', protocols: ['tcp'], service: 'tcp-svc', sources: [{ ip: '10.0.0.0/8' }], destinations: [{ port: 5432 }] },
        { name: 'web', paths: ['/'], sources: null, destinations: null, created_at: 1700000000, updated_at: 1700000000 },
      ],
    });
    assert.ok(loaded.ok);
    assert.deepEqual(loaded.config.routes.map((r) => r.name), ['web']);
    assert.equal(loaded.config.warnings.length, 1);
    assert.match(loaded.config.warnings[0], /^gw\.yaml:\d+:\d+: routes\[0\]: a tcp route is accepted but not proxied/);
    assert.deepEqual(errors({ routes: [{ name: 'web', paths: ['/'], sources: [{ ip: '10.0.0.1' }] }, { name: 't', protocols: ['tcp'] }] }), [
      "routes[0].sources: cannot set 'sources' when 'protocols' is 'http', 'https'",
      "routes[1]: must set one of 'sources', 'destinations', 'snis' when 'protocols' is 'tcp', 'tls' or 'udp'",
    ]);
  });
});

describe("the 'plugins' setting", () => {
  test('bundled by default; a list enables only those; off enables none; unknown names are refused', () => {
    const oauth2 = { name: 'oauth2', config: { enable_client_credentials: true } };
    const route = { name: 'r', paths: ['/'], plugins: [oauth2] };
    load({ routes: [route] });
    load({ gateway: { plugins: ['bundled'] }, routes: [route] });
    load({ gateway: { plugins: ['oauth2'] }, routes: [route] });
    const notEnabled = "routes[0].plugins[0].name: plugin 'oauth2' not enabled; add it to the 'plugins' configuration property";
    assert.deepEqual(errors({ gateway: { plugins: ['off'] }, routes: [route] }), [notEnabled]);
    assert.deepEqual(errors({ gateway: { plugins: ['metering'] }, routes: [route] }), [notEnabled]);
    // A disabled plugin's entities are unknown too, as Kong's DAOs are not loaded.
    assert.deepEqual(errors({ gateway: { plugins: ['metering'] }, oauth2_credentials: [] }), ['oauth2_credentials: unknown field']);
    assert.deepEqual(errors({ gateway: { plugins: ['bundled', 'zipkin', 'off'] } }), [
      "gateway.plugins[1]: plugin 'zipkin' is enabled but not installed",
      "gateway.plugins[2]: 'off' cannot be combined with other plugins",
    ]);
  });
});

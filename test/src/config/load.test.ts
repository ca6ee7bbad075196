/**
 * The gateway.yaml loader: every error class reported at once as FILE:LINE:COL: path: message, Kong's
 * defaults, the `url` shorthand, nested and top-level references, deterministic ids, plugin configs.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { v5 as uuidv5 } from 'uuid';
import { loadConfigFile, loadConfigText } from '../../../src/config/load.ts';
import type { GatewayConfig } from '../../../src/config/types.ts';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { tempDir } from '../../helpers/gateway.ts';

const FILE = 'gw.yaml';
const KONG_NAMESPACE = 'fd02801f-0957-4a15-a55a-c8d9606f30b5';

function yaml(...lines: string[]): string {
  return lines.join('\n') + '\n';
}

function errorsOf(text: string): string[] {
  const result = loadConfigText(text, '/tmp/tollgate-load-test/gw.yaml', bundledPlugins, FILE);
  assert.equal(result.ok, false, 'expected the config to be refused');
  return result.ok ? [] : result.errors.map(String);
}

function load(text: string): GatewayConfig {
  const result = loadConfigText(text, '/tmp/tollgate-load-test/gw.yaml', bundledPlugins, FILE);
  if (!result.ok) assert.fail(`unexpected errors:\n${result.errors.map(String).join('\n')}`);
  return result.config;
}

test('every mistake in the file is reported at once, each at its exact line and column', () => {
  const text = yaml(
    '_format_version: "3.0"', //                         1
    'bogus: 1', //                                        2
    'gateway:', //                                        3
    '  proxy_listen: ["127.0.0.1:8000 sssl"]', //         4
    '  trusted_ips: ["nope"]', //                         5
    '  colour: red', //                                   6
    'services:', //                                       7
    '  - name: a', //                                     8
    '    url: http://127.0.0.1:3000/api', //              9
    '    retries: -1', //                                 10
    '    routes:', //                                     11
    '      - name: r1', //                                12
    '        paths: [/x]', //                             13
    '        colour: blue', //                            14
    '      - name: r2', //                                15
    '        protocols: [https]', //                      16
    '  - name: b', //                                     17
    '    host: example.com', //                           18
    '    port: 70000', //                                 19
    '  - name: nohost', //                                20
    'routes:', //                                         21
    '  - name: top', //                                   22
    '    service: missing', //                            23
    '    paths: [/y]', //                                 24
    'consumers:', //                                      25
    '  - tags: [x]', //                                   26
    '  - username: bob', //                               27
    'plugins:', //                                        28
    '  - name: nope', //                                  29
    '  - name: oauth2', //                                30
    '    config: {}', //                                  31
    '  - name: oauth2', //                                32
    '    consumer: bob', //                               33
    '    config: { enable_client_credentials: true, scopes: 5 }', // 34
  );
  assert.deepEqual(errorsOf(text), [
    "gw.yaml:2:1: bogus: unknown field",
    "gw.yaml:4:18: gateway.proxy_listen[0]: unknown flag 'sssl' (supported: ssl, http2)",
    "gw.yaml:5:17: gateway.trusted_ips[0]: invalid ip or cidr range: 'nope'",
    'gw.yaml:6:3: gateway.colour: unknown field',
    'gw.yaml:10:14: services[0].retries: value should be between 0 and 32767',
    'gw.yaml:14:9: services[0].routes[0].colour: unknown field',
    "gw.yaml:15:9: services[0].routes[1]: must set one of 'methods', 'hosts', 'headers', 'paths', 'snis' when 'protocols' is 'https'",
    'gw.yaml:19:11: services[1].port: value should be between 0 and 65535',
    'gw.yaml:20:5: services[2].host: required field missing',
    "gw.yaml:23:14: routes[0].service: invalid reference 'service: missing' (no such entry in 'services')",
    "gw.yaml:26:5: consumers[0]: at least one of these fields must be non-empty: 'custom_id', 'username'",
    "gw.yaml:29:11: plugins[0].name: plugin 'nope' not enabled; add it to the 'plugins' configuration property",
    'gw.yaml:31:13: plugins[1].config: at least one of these fields must be true: enable_authorization_code, enable_implicit_grant, enable_client_credentials, enable_password_grant',
    'gw.yaml:33:15: plugins[2].consumer: value must be null',
    'gw.yaml:34:56: plugins[2].config.scopes: expected an array',
  ]);
});

test('YAML syntax errors and duplicate keys point at their position; a duplicate key names its path', () => {
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - name: a', '    host: x', '    host: y')), [
    'gw.yaml:5:5: services[0].host: YAML: Map keys must be unique',
  ]);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - name: a', '    routes:', '      - paths: [/a]', '        paths: [/b]')), [
    'gw.yaml:6:9: services[0].routes[0].paths: YAML: Map keys must be unique',
  ]);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', '_format_version: "3.0"')), ['gw.yaml:2:1: _format_version: YAML: Map keys must be unique']);
  const [indent] = errorsOf(yaml('_format_version: "3.0"', 'services:', '  - name: a', '    host: x', '  host: y'));
  assert.match(indent, /^gw\.yaml:5:1: \(root\): YAML: /);
});

test('a key indented too far is one error on its own line, not a cascade at the line above', () => {
  const text = yaml(
    '_format_version: "3.0"', //            1
    'services:', //                         2
    '  - name: echo', //                    3
    '    url: http://127.0.0.1:3000', //    4
    '     routes:', //                      5
    '      - paths: [/echo]', //            6
    '  - name: other', //                   7
    '    url: http://127.0.0.1:3001', //    8
    '     routes: []', //                   9
  );
  assert.deepEqual(errorsOf(text), [
    "gw.yaml:5:6: services[0].url: YAML: 'routes:' is indented as if it continued the value of line 4 (a key cannot span lines): check its indentation",
    "gw.yaml:9:6: services[1].url: YAML: 'routes:' is indented as if it continued the value of line 8 (a key cannot span lines): check its indentation",
  ]);
});

test('an unknown field or plugin name that looks like a typo gets a suggestion', () => {
  const text = yaml(
    '_format_version: "3.0"', //                                                        1
    'gateway:', //                                                                      2
    '  admin_listn: ["127.0.0.1:8001"]', //                                             3
    'service:', //                                                                      4
    '  - name: a', //                                                                   5
    'routes:', //                                                                       6
    '  - paths: [/a]', //                                                               7
    '    plugins:', //                                                                  8
    '      - name: oauth2', //                                                          9
    '        config: { enable_client_credentials: true, enable_client_credential: 1 }', // 10
    '      - name: metring', //                                                         11
    '      - name: zipkin', //                                                          12
    '    colour: blue', //                                                              13
  );
  assert.deepEqual(errorsOf(text), [
    "gw.yaml:3:3: gateway.admin_listn: unknown field; did you mean 'admin_listen'?",
    "gw.yaml:4:1: service: unknown field; did you mean 'services'?",
    "gw.yaml:10:52: routes[0].plugins[0].config.enable_client_credential: unknown field; did you mean 'enable_client_credentials'?",
    "gw.yaml:11:15: routes[0].plugins[1].name: unknown plugin 'metring'; did you mean 'metering'?",
    "gw.yaml:12:15: routes[0].plugins[2].name: plugin 'zipkin' not enabled; add it to the 'plugins' configuration property",
    'gw.yaml:13:5: routes[0].colour: unknown field',
  ]);
});

test('the top level: _format_version required and checked, a non-map document refused', () => {
  assert.deepEqual(errorsOf(yaml('services: []')), ['gw.yaml:1:1: _format_version: required field missing']);
  assert.deepEqual(errorsOf(yaml('_format_version: "9"')), ['gw.yaml:1:18: _format_version: expected one of: 1.1, 2.1, 3.0']);
  assert.deepEqual(errorsOf(yaml('- 1', '- 2')), ['gw.yaml:1:1: (root): failed parsing declarative configuration: expected an object']);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services: {name: a}')), ['gw.yaml:2:11: services: expected an array']);
});

test('an unreadable file is one clear error naming it', async () => {
  const result = await loadConfigFile('/nonexistent/tollgate/gw.yaml', bundledPlugins);
  assert.equal(result.ok, false);
  if (!result.ok) assert.match(String(result.errors[0]), /^\/nonexistent\/tollgate\/gw\.yaml:1:1: \(root\): cannot read the file: .*ENOENT/);
});

test("field errors carry Kong's messages", () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"', //                               1
      'services:', //                                            2
      '  - name: "bad name"', //                                 3
      '    host: "not a host!"', //                              4
      '    protocol: ftp', //                                    5
      '    path: nope', //                                       6
      '    connect_timeout: 0', //                               7
      '    enabled: "yes"', //                                   8
      '    routes:', //                                          9
      '      - paths: [/a]', //                                  10
      '        methods: [get]', //                               11
      '        path_handling: v9', //                            12
      '        https_redirect_status_code: 303', //              13
      '      - headers: { Host: [a.example] }', //               14
      '      - protocols: [grpc, http]', //                      15
      '        paths: [/b]', //                                  16
      '      - protocols: [grpc]', //                            17
      '        paths: [/c]', //                                  18
      '        strip_path: true', //                             19
      '      - protocols: [http]', //                            20
      '        paths: [/d]', //                                  21
      '        snis: [a.example]', //                            22
    ),
  );
  assert.deepEqual(errors, [
    "gw.yaml:3:11: services[0].name: invalid value 'bad name': the only accepted ascii characters are alphanumerics or ., -, _, and ~",
    'gw.yaml:4:11: services[0].host: invalid value: not a host!',
    'gw.yaml:5:15: services[0].protocol: expected one of: grpc, grpcs, http, https, ws, wss, tcp, tls, udp, tls_passthrough',
    'gw.yaml:6:11: services[0].path: should start with: /',
    'gw.yaml:7:22: services[0].connect_timeout: value should be between 1 and 2147483646',
    'gw.yaml:8:14: services[0].enabled: expected a boolean',
    'gw.yaml:11:19: services[0].routes[0].methods[0]: invalid value: get',
    'gw.yaml:12:24: services[0].routes[0].path_handling: expected one of: v0, v1',
    'gw.yaml:13:37: services[0].routes[0].https_redirect_status_code: expected one of: 426, 301, 302, 307, 308',
    "gw.yaml:14:18: services[0].routes[1].headers: cannot contain 'host' header, which must be specified in the 'hosts' attribute",
    "gw.yaml:15:20: services[0].routes[2].protocols: these sets are mutually exclusive: ('http', 'https'), ('grpc', 'grpcs'), ('ws', 'wss'), ('tcp', 'tls', 'udp'), ('tls_passthrough')",
    "gw.yaml:19:21: services[0].routes[3].strip_path: cannot set 'strip_path' when 'protocols' is 'grpc' or 'grpcs'",
    "gw.yaml:22:15: services[0].routes[4].snis: 'snis' can only be set when 'protocols' is 'grpcs', 'https' or 'wss'",
  ]);
});

/** The one error a service or route with `fields` gets, without its position. */
function fieldError(entity: 'services' | 'routes', fields: Record<string, unknown>): string {
  const base = entity === 'services' ? { host: 'example.com' } : { paths: ['/ok'] };
  const result = loadConfigText(JSON.stringify({ _format_version: '3.0', [entity]: [{ ...base, ...fields }] }), '/tmp/gw.json', bundledPlugins, FILE);
  if (result.ok) return 'accepted';
  assert.equal(result.errors.length, 1, result.errors.map(String).join('\n'));
  return `${result.errors[0].path}: ${result.errors[0].message}`;
}

test("Kong's schema catalogue: service hosts and paths", () => {
  for (const host of ['example_api.com', 'localhost', 'HELLO.com', '1991.io', 'example.123', '-with-SUPER-MONKEYS-pc58ag80a8qai00g7n9n', '10.0.0.1', '::1']) {
    assert.equal(fieldError('services', { host }), 'accepted', host);
  }
  for (const host of ['/example', '.example', 'example.', 'example:', 'mock;bin', 'example.com/org', 'example-.org', 'example.org-', 'hello..example.com', '*example.com', 'mock*bin.com']) {
    assert.equal(fieldError('services', { host }), `services[0].host: invalid value: ${host}`);
  }
  assert.equal(fieldError('services', { host: 'example.com:80' }), 'services[0].host: must not have a port');
  assert.equal(fieldError('services', { host: 'example.com:1000000' }), 'services[0].host: must not have a port');
  assert.equal(fieldError('services', { host: '' }), 'services[0].host: length must be at least 1');

  assert.equal(fieldError('services', { path: '' }), 'services[0].path: length must be at least 1');
  assert.equal(fieldError('services', { path: '/foo//bar' }), 'services[0].path: must not have empty segments');
  assert.equal(fieldError('services', { path: '/users/|foo/profile' }), "services[0].path: invalid path: '/users/|foo/profile' (characters outside of the reserved list of RFC 3986 found)");
  assert.equal(fieldError('services', { path: '/some%2Gwords' }), "services[0].path: invalid url-encoded value: '%2G'");
  assert.equal(fieldError('services', { path: "/hello/path$with$!&'()*+,;=stuff" }), 'accepted');
  assert.equal(fieldError('services', { path: '/abcd%aa%10%ff%AA%FF' }), 'accepted');
  assert.equal(fieldError('services', { protocol: 'grpc', path: '/' }), 'services[0].path: value must be null');
  assert.equal(fieldError('services', { protocol: 'http', tls_verify: true }), 'services[0].tls_verify: value must be null');
  assert.equal(fieldError('services', { protocol: 'https', tls_verify: true, tls_verify_depth: 2 }), 'accepted');
});

test("Kong's schema catalogue: route hosts, paths, methods, headers, snis and names", () => {
  for (const host of ['example_api.com', '-with-SUPER-MONKEYS-pc58ag80a8qai00g7n9n', 'example.com:8080', '*.example.org:321', 'example.*']) {
    assert.equal(fieldError('routes', { hosts: [host] }), 'accepted', host);
  }
  for (const host of ['/example', '.example', 'example.', 'example:', 'mock;bin', 'example-.org', 'hello..example.com']) {
    assert.equal(fieldError('routes', { hosts: [host] }), `routes[0].hosts[0]: invalid hostname: ${host}`);
  }
  assert.equal(fieldError('routes', { hosts: ['example.com:1000000'] }), 'routes[0].hosts[0]: invalid port number');
  assert.equal(fieldError('routes', { hosts: [''] }), 'routes[0].hosts[0]: length must be at least 1');
  assert.equal(fieldError('routes', { paths: [''] }), 'routes[0].paths[0]: length must be at least 1');
  assert.equal(fieldError('routes', { paths: ['/some%2words'] }), "routes[0].paths[0]: invalid url-encoded value: '%2w'");
  assert.equal(fieldError('routes', { paths: ['~/discount/\\d+%'] }), 'accepted');
  assert.equal(fieldError('routes', { methods: ['get'] }), 'routes[0].methods[0]: invalid value: get');
  assert.equal(fieldError('routes', { methods: ['HELLO WORLD'] }), 'routes[0].methods[0]: invalid value: HELLO WORLD');
  assert.equal(fieldError('routes', { methods: [''] }), 'routes[0].methods[0]: length must be at least 1');
  assert.equal(fieldError('routes', { headers: { location: [''] } }), 'routes[0].headers.location[0]: length must be at least 1');
  assert.equal(fieldError('routes', { protocols: ['https'], snis: ['127.0.0.1'] }), 'routes[0].snis[0]: must not be an IP');
  assert.equal(fieldError('routes', { protocols: ['https'], snis: ['example.org:80'] }), 'routes[0].snis[0]: must not have a port');
  assert.equal(fieldError('routes', { protocols: ['https'], snis: ['*.example.org'] }), 'accepted');
  for (const name of ['~3..x4~.M-p~1__3_', '孔', 'Конг', '🦍']) assert.equal(fieldError('routes', { name }), 'accepted', name);
  assert.equal(fieldError('routes', { name: 'examp:le' }), "routes[0].name: invalid value 'examp:le': the only accepted ascii characters are alphanumerics or ., -, _, and ~");
});

test('a YAML alias bomb is one error in the usual shape, not an exception', () => {
  const lines = ['_format_version: "3.0"', 'a: &a [x, x, x, x, x, x, x, x, x]'];
  for (let i = 0; i < 9; i++) lines.push(`${'bcdefghij'[i]}: &${'bcdefghij'[i]} [${Array(9).fill('*' + 'abcdefghi'[i]).join(', ')}]`);
  const errors = errorsOf(yaml(...lines));
  assert.equal(errors.length, 1);
  assert.match(errors[0], /^gw\.yaml:1:1: \(root\): YAML: .*alias/i);
});

test("keys named like Object.prototype's members are unknown fields too", () => {
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - name: a', '    host: h', '    constructor: 1', '    __proto__: { port: 1 }')), [
    'gw.yaml:5:5: services[0].constructor: unknown field',
    'gw.yaml:6:5: services[0].__proto__: unknown field',
  ]);
});

test('_format_version must be a string (an unquoted 3.0 is a YAML number)', () => {
  assert.deepEqual(errorsOf(yaml('_format_version: 3.0')), ['gw.yaml:1:18: _format_version: expected a string']);
});

test('route paths and hosts are checked by the router (non-normalized path, bad regex, bad wildcard)', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"', //           1
      'routes:', //                          2
      '  - paths: [/a/../b, "~/(unclosed"]', // 3
      '    hosts: ["*.a.*"]', //               4
    ),
  );
  assert.equal(errors.length, 3, errors.join('\n'));
  assert.equal(errors[0], "gw.yaml:3:13: routes[0].paths[0]: non-normalized path, consider use '/b' instead");
  assert.match(errors[1], /^gw\.yaml:3:22: routes\[0\]\.paths\[1\]: invalid regex: '\/\(unclosed'/);
  assert.match(errors[2], /^gw\.yaml:4:13: routes\[0\]\.hosts\[0\]: /);
});

test('uniqueness violations and invalid references', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"', //      1
      'services:', //                   2
      '  - { name: a, host: x }', //    3
      '  - { name: a, host: y }', //    4
      'routes:', //                     5
      '  - { name: r, paths: [/a] }', // 6
      '  - { name: r, paths: [/b] }', // 7
      'consumers:', //                  8
      '  - { username: u }', //         9
      '  - { username: u }', //         10
      'plugins:', //                    11
      '  - name: oauth2', //            12
      '    route: nope', //             13
      '    config: { enable_client_credentials: true }', // 14
    ),
  );
  assert.ok(errors.includes("gw.yaml:4:5: services[1]: uniqueness violation: 'services' entity with name set to 'a' already declared"), errors.join('\n'));
  assert.ok(errors.includes("gw.yaml:7:5: routes[1]: uniqueness violation: 'routes' entity with name set to 'r' already declared"), errors.join('\n'));
  assert.ok(errors.includes("gw.yaml:10:5: consumers[1]: uniqueness violation: 'consumers' entity with username set to 'u' already declared"), errors.join('\n'));
  assert.ok(errors.includes("gw.yaml:13:12: plugins[0].route: invalid reference 'route: nope' (no such entry in 'routes')"), errors.join('\n'));
  assert.equal(errors.length, 4, `one error per duplicate, not a second one for its derived id:\n${errors.join('\n')}`);
});

test('two instances of one plugin on the same scope collide (Kong cache key)', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"',
      'plugins:',
      '  - { name: oauth2, config: { enable_client_credentials: true } }',
      '  - { name: oauth2, config: { enable_password_grant: true } }',
    ),
  );
  assert.equal(errors.length, 1, errors.join('\n'));
  assert.match(errors[0], /^gw\.yaml:4:5: plugins\[1\]: uniqueness violation: 'plugins' entity with primary key set to '[0-9a-f-]{36}' already declared$/);
});

test("Kong's defaults are filled in for the node, services, routes and plugins", () => {
  const config = load(
    yaml(
      '_format_version: "3.0"',
      'services:',
      '  - name: s',
      '    host: example.com',
      '    routes:',
      '      - name: r',
      '        paths: [/r]',
      '      - name: g',
      '        protocols: [grpc]',
      '        paths: [/pkg.Svc/]',
      'plugins:',
      '  - name: oauth2',
      '    config: { enable_client_credentials: true }',
    ),
  );
  assert.deepEqual(config.gateway.proxy_listen, ['0.0.0.0:8000', '0.0.0.0:8443 ssl http2']);
  assert.deepEqual(config.gateway.admin_listen, ['127.0.0.1:8001']);
  assert.deepEqual(config.gateway.trusted_ips, []);
  assert.equal(config.gateway.data_dir, '/tmp/tollgate-load-test/data', 'data_dir is resolved against the file');
  assert.equal(config.gateway.ssl_cert, null);
  const [s] = config.services;
  assert.deepEqual(
    {
      protocol: s.protocol,
      port: s.port,
      path: s.path,
      retries: s.retries,
      timeouts: [s.connect_timeout, s.write_timeout, s.read_timeout],
      enabled: s.enabled,
    },
    { protocol: 'http', port: 80, path: null, retries: 5, timeouts: [60000, 60000, 60000], enabled: true },
  );
  const [r, g] = config.routes;
  assert.deepEqual(
    {
      protocols: r.protocols, strip_path: r.strip_path, preserve_host: r.preserve_host, regex_priority: r.regex_priority,
      path_handling: r.path_handling, https_redirect_status_code: r.https_redirect_status_code, service: r.service,
    },
    { protocols: ['http', 'https'], strip_path: true, preserve_host: false, regex_priority: 0, path_handling: 'v0', https_redirect_status_code: 426, service: { id: s.id } },
  );
  assert.equal(g.strip_path, false, 'grpc routes default to strip_path false');
  const [p] = config.plugins;
  assert.equal(p.enabled, true);
  assert.equal(p.config.token_expiration, 7200, "the plugin's config defaults are filled in");
  assert.equal(p.config.enable_authorization_code, false);
});

test('the url shorthand: scheme, host, port (default per scheme), path', () => {
  const config = load(
    yaml(
      '_format_version: "3.0"',
      'services:',
      '  - { name: a, url: "https://example.com" }',
      '  - { name: b, url: "http://example.com:8080/api/v1" }',
      '  - { name: c, url: "http://10.0.0.1/" }',
      '  - { name: d, protocol: https, host: example.com }',
      '  - { name: e, url: "http://[::1]:9000" }',
    ),
  );
  const pick = (n: string) => {
    const s = config.services.find((x) => x.name === n)!;
    return [s.protocol, s.host, s.port, s.path];
  };
  assert.deepEqual(pick('a'), ['https', 'example.com', 443, null]);
  assert.deepEqual(pick('b'), ['http', 'example.com', 8080, '/api/v1']);
  assert.deepEqual(pick('c'), ['http', '10.0.0.1', 80, '/']);
  assert.deepEqual(pick('d'), ['https', 'example.com', 80, null], 'a separate protocol keeps the default port 80, as Kong');
  assert.deepEqual(pick('e'), ['http', '::1', 9000, null]);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - { name: x, url: "ftp://example.com" }')), [
    "gw.yaml:3:21: services[0].url: invalid url: unsupported protocol 'ftp'",
  ]);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - { name: x, url: "not a url" }')), ['gw.yaml:3:21: services[0].url: invalid url: not a url']);
});

test('nested and top-level references resolve to the same entities (by name or by id)', () => {
  const sid = '11111111-2222-4333-8444-555555555555';
  const config = load(
    yaml(
      '_format_version: "3.0"',
      'services:',
      `  - { name: s1, id: ${sid}, host: a.example }`,
      '  - name: s2',
      '    host: b.example',
      '    routes:',
      '      - name: nested',
      '        paths: [/n]',
      '        plugins:',
      '          - { name: oauth2, config: { enable_client_credentials: true } }',
      '    plugins:',
      '      - { name: oauth2, config: { enable_password_grant: true } }',
      'routes:',
      '  - { name: by-name, service: s2, paths: [/a] }',
      `  - { name: by-id, service: { id: ${sid} }, paths: [/b] }`,
      '  - { name: no-service, paths: [/c] }',
      'consumers:',
      '  - username: alice',
      '    oauth2_credentials:',
      '      - { name: App, client_id: app-1, client_secret: s, redirect_uris: ["https://a.example/cb"] }',
      '  - username: bob',
      'oauth2_credentials:',
      '  - { name: Top, client_id: app-2, consumer: bob, redirect_uris: ["https://b.example/cb"] }',
      'plugins:',
      '  - { name: oauth2, route: by-name, config: { enable_implicit_grant: true } }',
    ),
  );
  const service = (n: string) => config.services.find((s) => s.name === n)!;
  const route = (n: string) => config.routes.find((r) => r.name === n)!;
  const consumer = (n: string) => config.consumers.find((c) => c.username === n)!;
  assert.equal(service('s1').id, sid, 'a given id is kept');
  assert.deepEqual(route('nested').service, { id: service('s2').id });
  assert.deepEqual(route('by-name').service, { id: service('s2').id });
  assert.deepEqual(route('by-id').service, { id: sid });
  assert.equal(route('no-service').service, null);

  const scopes = config.plugins.map((p) => [p.config.enable_client_credentials ? 'cc' : p.config.enable_password_grant ? 'pw' : 'impl', p.route?.id ?? null, p.service?.id ?? null]);
  assert.deepEqual(scopes, [
    ['cc', route('nested').id, null],
    ['pw', null, service('s2').id],
    ['impl', route('by-name').id, null],
  ]);

  const creds = config.entities.oauth2_credentials;
  assert.deepEqual(
    creds.map((c) => [c.client_id, c.consumer]),
    [
      ['app-1', { id: consumer('alice').id }],
      ['app-2', { id: consumer('bob').id }],
    ],
  );
});

test('a reference looks at ids or at names, never both: an entry named like another one\'s id does not stand in for it', () => {
  const takenId = '11111111-2222-4333-8444-555555555555';
  const config = load(
    yaml(
      '_format_version: "3.0"',
      'consumers:',
      `  - { username: "${takenId}" }`,
      `  - { username: alice, id: ${takenId} }`,
      'oauth2_credentials:',
      `  - { name: By id, client_id: app-1, consumer: ${takenId} }`,
      '  - { name: By username, client_id: app-2, consumer: { username: alice } }',
      `  - { name: By id field, client_id: app-3, consumer: { id: ${takenId} } }`,
    ),
  );
  assert.deepEqual(
    config.entities.oauth2_credentials.map((c) => c.consumer),
    [{ id: takenId }, { id: takenId }, { id: takenId }],
  );
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'consumers:', '  - { username: bob }', 'oauth2_credentials:', '  - { name: X, consumer: { id: bob } }')), [
    "gw.yaml:5:26: oauth2_credentials[0].consumer: invalid reference 'consumer: bob' (no such entry in 'consumers')",
  ]);
  // A route's service and a target's upstream by the same rule.
  const balanced = load(
    yaml(
      '_format_version: "3.0"',
      'services:',
      `  - { name: "${takenId}", host: a.test }`,
      `  - { name: b, id: ${takenId}, host: b.test }`,
      'routes:',
      `  - { paths: [/by-id], service: ${takenId} }`,
      '  - { paths: [/by-name], service: { name: b } }',
      'upstreams:',
      `  - { name: "${takenId}" }`,
      `  - { name: b.test, id: ${takenId} }`,
      'targets:',
      `  - { upstream: ${takenId}, target: 10.0.0.1 }`,
    ),
  );
  assert.deepEqual(balanced.routes.map((r) => r.service), [{ id: takenId }, { id: takenId }]);
  assert.deepEqual(balanced.targets.map((t) => t.upstream), [{ id: takenId }]);
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - { name: b, host: b.test }', 'routes:', '  - { paths: [/], service: { id: b } }')), [
    "gw.yaml:5:28: routes[0].service: invalid reference 'service: b' (no such entry in 'services')",
  ]);
});

test('ids not given are derived from names: stable across loads, distinct per name, in the Kong namespace', () => {
  const text = yaml(
    '_format_version: "3.0"',
    'services:',
    '  - { name: orders, host: a.example, routes: [ { name: list, paths: [/o] } ] }',
    '  - { name: users, host: b.example }',
    'consumers:',
    '  - { username: alice }',
    'plugins:',
    '  - { name: oauth2, service: orders, config: { enable_client_credentials: true } }',
  );
  const a = load(text);
  const b = load(text);
  const ids = (c: GatewayConfig) => [...c.services, ...c.routes, ...c.consumers, ...c.plugins].map((e) => e.id);
  assert.deepEqual(ids(a), ids(b));
  assert.equal(new Set(ids(a)).size, ids(a).length, 'every entity gets its own id');
  for (const id of ids(a)) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUIDv5');
  assert.equal(a.services[0].id, uuidv5('services:orders', KONG_NAMESPACE));

  // Reordering entities or adding others does not change the ids of named ones.
  const reordered = load(
    yaml(
      '_format_version: "3.0"',
      'consumers:',
      '  - { username: carol }',
      '  - { username: alice }',
      'services:',
      '  - { name: extra, host: c.example }',
      '  - { name: users, host: b.example }',
      '  - { name: orders, host: a.example, routes: [ { name: list, paths: [/o] } ] }',
    ),
  );
  assert.equal(reordered.services.find((s) => s.name === 'orders')!.id, a.services[0].id);
  assert.equal(reordered.services.find((s) => s.name === 'users')!.id, a.services[1].id);
  assert.equal(reordered.routes[0].id, a.routes[0].id);
  assert.equal(reordered.consumers.find((c) => c.username === 'alice')!.id, a.consumers[0].id);
});

test('an invalid id is refused', () => {
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'services:', '  - { name: a, host: x, id: nope }')), [
    'gw.yaml:3:29: services[0].id: expected a valid UUID',
  ]);
});

test('_comment and _ignore are allowed anywhere', () => {
  const config = load(
    yaml(
      '_format_version: "3.0"',
      '_comment: the top',
      '_ignore: [1, 2]',
      'services:',
      '  - { name: a, host: x, _comment: a service, routes: [ { paths: [/a], _ignore: [x] } ] }',
    ),
  );
  assert.equal(config.routes.length, 1);
});

test('the gateway block: listener strings, ssl pair, sizes', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"', //                      1
      'gateway:', //                                    2
      '  admin_listen: ["localhost"]', //               3
      '  ssl_cert: ./c.pem', //                         4
      '  max_header_size: 10', //                       5
    ),
  );
  assert.deepEqual(errors, [
    "gw.yaml:3:18: gateway.admin_listen[0]: invalid listen address 'localhost': expected HOST:PORT",
    'gw.yaml:5:20: gateway.max_header_size: value should be between 1024 and 1048576',
  ]);
  const pair = errorsOf(yaml('_format_version: "3.0"', 'gateway:', '  ssl_cert: ./c.pem'));
  assert.deepEqual(pair, ['gw.yaml:3:3: gateway.ssl_cert_key: ssl_cert and ssl_cert_key must be set together']);
  const config = load(yaml('_format_version: "3.0"', 'gateway:', '  ssl_cert: ./c.pem', '  ssl_cert_key: ./k.pem', '  data_dir: /var/tg'));
  assert.equal(config.gateway.ssl_cert, '/tmp/tollgate-load-test/c.pem');
  assert.equal(config.gateway.data_dir, '/var/tg');
});

test('the gateway block: a setting or list entry given as null is refused, not run with; a listener that is not a string is reported, not parsed', () => {
  const settings = ['  log_level:', '  client_timeout: null', '  proxy_listen: [null, 8000]', '  trusted_ips: [null]'];
  assert.deepEqual(errorsOf(yaml('_format_version: "3.0"', 'gateway:', ...settings)), [
    'gw.yaml:3:13: gateway.log_level: required field missing',
    'gw.yaml:4:19: gateway.client_timeout: required field missing',
    'gw.yaml:5:18: gateway.proxy_listen[0]: required field missing',
    'gw.yaml:5:24: gateway.proxy_listen[1]: expected a string',
    'gw.yaml:6:17: gateway.trusted_ips[0]: required field missing',
  ]);
});

test('the plugin config is validated by its own schema: unknown keys, types, entity checks', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"', //                        1
      'plugins:', //                                      2
      '  - name: oauth2', //                              3
      '    config:', //                                   4
      '      enable_client_credentials: "true"', //       5
      '      colour: blue', //                            6
      '      pkce: maybe', //                             7
    ),
  );
  assert.deepEqual(errors, [
    'gw.yaml:5:34: plugins[0].config.enable_client_credentials: expected a boolean',
    'gw.yaml:6:7: plugins[0].config.colour: unknown field',
    'gw.yaml:7:13: plugins[0].config.pkce: expected one of: none, lax, strict',
  ]);
  // The "at least one grant" entity check, on a plugin nested in a route.
  assert.deepEqual(
    errorsOf(yaml('_format_version: "3.0"', 'routes:', '  - paths: [/t]', '    plugins:', '      - name: oauth2', '        config: { scopes: [a] }')),
    ['gw.yaml:6:17: routes[0].plugins[0].config: at least one of these fields must be true: enable_authorization_code, enable_implicit_grant, enable_client_credentials, enable_password_grant'],
  );
});

test('a file written to disk loads with its path in the messages and its md5 as the hash', async () => {
  const dir = tempDir();
  const file = join(dir, 'gateway.yaml');
  const text = yaml('_format_version: "3.0"', 'services:', '  - { name: a, host: x, port: 99999 }');
  writeFileSync(file, text);
  const bad = await loadConfigFile(file, bundledPlugins);
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.deepEqual(bad.errors.map(String), [`${file}:3:31: services[0].port: value should be between 0 and 65535`]);
  const good = yaml('_format_version: "3.0"', 'services:', '  - { name: a, host: x }');
  writeFileSync(file, good);
  const ok = await loadConfigFile(file, bundledPlugins);
  assert.equal(ok.ok, true);
  if (ok.ok) {
    assert.equal(ok.config.file, file);
    const { createHash } = await import('node:crypto');
    assert.equal(ok.config.hash, createHash('md5').update(good).digest('hex'));
  }
});

test('_format_version 1.1 and 2.1: route paths are migrated as Kong does (regex-looking ones get "~", plain ones normalized)', () => {
  const routesOf = (version: string) =>
    yaml(`_format_version: "${version}"`, 'services:', '  - name: a', '    url: http://127.0.0.1:1', '    routes:', '      - paths: ["/users/\\\\d+$", "/plain/./x", "/ok"]');
  for (const version of ['1.1', '2.1']) {
    assert.deepEqual(load(routesOf(version)).routes[0].paths, ['~/users/\\d+$', '/plain/x', '/ok'], version);
  }
  const [error] = errorsOf(routesOf('3.0'));
  assert.match(error, /^gw\.yaml:6:17: services\[0\]\.routes\[0\]\.paths\[0\]: invalid path/, '3.0 takes paths as written');
});

test('trusted_ips: addresses and CIDR ranges are checked at load, never at start', () => {
  const bad = ['abc', '999.1.1.1', '1.2.3', '10.0.0.0/99', 'fe80::/200', '10.0.0.0/8/1'];
  const errors = errorsOf(yaml('_format_version: "3.0"', 'gateway:', `  trusted_ips: [${bad.map((b) => `"${b}"`).join(', ')}]`));
  assert.deepEqual(
    errors.map((e) => e.replace(/^gw\.yaml:3:\d+: /, '')),
    bad.map((b, i) => `gateway.trusted_ips[${i}]: invalid ip or cidr range: '${b}'`),
  );
  const good = load(yaml('_format_version: "3.0"', 'gateway:', '  trusted_ips: ["127.0.0.1", "10.0.0.0/8", "0.0.0.0/0", "::1", "fe80::/10"]'));
  assert.equal(good.gateway.trusted_ips.length, 5);
});

test('a plugin check asks the runtime plugin index: an oauth2 scoped to route x AND service svc does not protect route z of svc', () => {
  const config = (plugins: string[]) =>
    yaml(
      '_format_version: "3.0"',
      'services:',
      '  - name: svc',
      '    url: http://127.0.0.1:9',
      '    routes:',
      '      - { name: x, paths: [/x] }',
      '      - { name: z, paths: [/z], plugins: [{ name: metering, config: {} }] }',
      'plugins:',
      ...plugins,
    );
  // Kong applies a plugin with both `route` and `service` only to that route of that service (AND, not OR).
  const errors = errorsOf(config(['  - { name: oauth2, route: x, service: svc, config: { enable_client_credentials: true } }']));
  assert.equal(errors.length, 1);
  assert.match(errors[0], /^gw\.yaml:7:\d+: services\[0\]\.routes\[1\]\.plugins\[0\]\.config\.allow_unauthenticated: .*route z/);
  // On the service (every route of it), or globally, it protects z.
  load(config(['  - { name: oauth2, service: svc, config: { enable_client_credentials: true } }']));
  load(config(['  - { name: oauth2, config: { enable_client_credentials: true } }']));
  // Disabled, it protects nothing.
  assert.equal(errorsOf(config(['  - { name: oauth2, enabled: false, config: { enable_client_credentials: true } }'])).length, 1);
});

test('a metering plugin on a service needs authentication on every route of it, by the precedence the runtime applies', () => {
  const errors = errorsOf(
    yaml(
      '_format_version: "3.0"',
      'services:',
      '  - name: svc',
      '    url: http://127.0.0.1:9',
      '    plugins: [{ name: metering, config: {} }]',
      '    routes:',
      '      - { name: covered, paths: [/a], plugins: [{ name: oauth2, config: { enable_client_credentials: true } }] }',
      '      - { name: bare, paths: [/b] }',
      // A more specific metering instance takes this route over: the service's instance does not run here.
      '      - { name: own, paths: [/c], plugins: [{ name: metering, config: { allow_unauthenticated: true } }] }',
    ),
  );
  assert.equal(errors.length, 1);
  assert.match(errors[0], /services\[0\]\.plugins\[0\]\.config\.allow_unauthenticated: .*route bare/);
  assert.doesNotMatch(errors[0], /covered|own/);
});

test('an authentication plugin that runs after metering (lower priority) does not protect it', () => {
  const lateAuth: PluginDefinition = { name: 'late-auth', version: '1.0.0', priority: 10, authenticates: true, configSchema: { type: 'record', fields: {} }, create: () => ({}) };
  const registry = new Map([...bundledPlugins, [lateAuth.name, lateAuth]]);
  const text = (auth: string) => yaml('_format_version: "3.0"', 'routes:', '  - name: m', '    paths: [/m]', `    plugins: [{ name: metering, config: {} }, { name: ${auth}${auth === 'oauth2' ? ', config: { enable_client_credentials: true }' : ''} }]`);
  const late = loadConfigText(text('late-auth'), '/tmp/tollgate-load-test/gw.yaml', registry, FILE);
  assert.equal(late.ok, false);
  assert.match(late.ok ? '' : String(late.errors[0]), /none runs before it on route m/);
  assert.equal(loadConfigText(text('oauth2'), '/tmp/tollgate-load-test/gw.yaml', registry, FILE).ok, true);
});

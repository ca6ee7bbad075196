/** Field matching: hosts, ports, headers, methods, SNIs, paths (prefix, regex, normalized), match results, cache. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Route } from '../../../src/config/types.ts';
import { Router, type RouteRequest } from '../../../src/router/index.ts';
import { request, route, service } from './fixtures.ts';

const upstream = service({ path: '/svc' });

function matches(r: Route, req: Partial<RouteRequest>): boolean {
  return new Router([r], [upstream]).match(request(req)) !== null;
}

test('hosts: exact, compared case-insensitively and without the request port', () => {
  const r = route({ hosts: ['api.example.com'] });
  assert.ok(matches(r, { host: 'api.example.com' }));
  assert.ok(matches(r, { host: 'API.Example.COM:8443' }));
  assert.ok(!matches(r, { host: 'example.com' }));
  assert.ok(!matches(r, { host: '' }));
});

test('hosts: a trailing dot (fully qualified name) is the same name, for exact and wildcard hosts; what is no host name matches nothing', () => {
  assert.ok(matches(route({ hosts: ['api.example.com'] }), { host: 'API.example.com.' }));
  assert.ok(matches(route({ hosts: ['api.example.com:8000'] }), { host: 'api.example.com.:8000' }));
  assert.ok(matches(route({ hosts: ['*.example.com'] }), { host: 'a.example.com.' }));
  assert.ok(matches(route({ hosts: ['example.*'] }), { host: 'example.org.' }));
  assert.ok(matches(route({ hosts: ['Mixed.Example.COM'] }), { host: 'mixed.example.com' }));
  for (const host of ['api.example.com..', 'user@api.example.com', 'api.example.com/x']) assert.ok(!matches(route({ hosts: ['api.example.com'] }), { host }), host);
});

test('hosts: leftmost wildcard matches any deeper name, not the bare domain', () => {
  const r = route({ hosts: ['*.example.com'] });
  assert.ok(matches(r, { host: 'a.example.com' }));
  assert.ok(matches(r, { host: 'a.b.example.com:80' }));
  assert.ok(!matches(r, { host: 'example.com' }));
  assert.ok(!matches(r, { host: 'badexample.com' }));
});

test('hosts: rightmost wildcard', () => {
  const r = route({ hosts: ['example.*'] });
  assert.ok(matches(r, { host: 'example.org' }));
  assert.ok(matches(r, { host: 'example.co.uk' }));
  assert.ok(!matches(r, { host: 'www.example.org' }));
});

test('hosts with :port match the Host port, or the listener port when Host has none', () => {
  const r = route({ hosts: ['example.com:8000'] });
  assert.ok(matches(r, { host: 'example.com:8000', port: 9999 }));
  assert.ok(matches(r, { host: 'example.com', port: 8000 }));
  assert.ok(!matches(r, { host: 'example.com:9000', port: 8000 }));
  assert.ok(!matches(r, { host: 'example.com', port: 9000 }));
  assert.ok(matches(route({ hosts: ['*.example.com:8000'] }), { host: 'a.example.com:8000' }));
});

test('hosts: IPv6 literals with and without port', () => {
  const r = route({ hosts: ['[::1]'] });
  assert.ok(matches(r, { host: '[::1]:8000' }));
  assert.ok(matches(r, { host: '[::1]' }));
  assert.ok(matches(route({ hosts: ['[::1]:8000'] }), { host: '[::1]', port: 8000 }));
});

test('headers: values case-insensitive, several values OR, several names AND', () => {
  const r = route({ headers: { 'x-env': ['Prod', 'staging'], 'x-team': ['core'] } });
  assert.ok(matches(r, { headers: { 'x-env': 'PROD', 'x-team': 'Core' } }));
  assert.ok(matches(r, { headers: { 'x-env': 'staging', 'x-team': 'core' } }));
  assert.ok(!matches(r, { headers: { 'x-env': 'dev', 'x-team': 'core' } }));
  assert.ok(!matches(r, { headers: { 'x-env': 'prod' } }));
});

test('headers: `~*` values are case-insensitive unanchored regexes; repeated headers match on any value', () => {
  const r = route({ headers: { 'x-version': ['~*^v[23]$'], 'user-agent': ['~*mobile'] } });
  assert.ok(matches(r, { headers: { 'x-version': 'V2', 'user-agent': 'Foo Mobile Safari' } }));
  assert.ok(!matches(r, { headers: { 'x-version': 'v4', 'user-agent': 'mobile' } }));
  const multi = route({ headers: { 'x-tag': ['b'] } });
  assert.ok(matches(multi, { headers: { 'x-tag': ['a', 'B'] } }));
  assert.ok(!matches(multi, { headers: { 'x-tag': ['a', 'c'] } }));
});

test('methods: exact uppercase match', () => {
  const r = route({ methods: ['GET', 'POST'] });
  assert.ok(matches(r, { method: 'POST' }));
  assert.ok(!matches(r, { method: 'DELETE' }));
});

test('snis: required on https, ignored on plaintext; wildcard and trailing dot', () => {
  const r = route({ snis: ['api.example.com.'], paths: ['/'] });
  assert.ok(matches(r, { scheme: 'https', sni: 'api.example.com' }));
  assert.ok(!matches(r, { scheme: 'https', sni: 'other.example.com' }));
  assert.ok(!matches(r, { scheme: 'https' }), 'https without SNI');
  assert.ok(matches(r, { scheme: 'http' }), 'SNI ignored for plaintext (Kong #6425)');
  assert.ok(matches(route({ snis: ['*.example.com'] }), { scheme: 'https', sni: 'x.example.com' }));
  assert.ok(matches(route({ snis: ['api.example.com'] }), { scheme: 'https', sni: 'API.example.com.' }));
});

test('prefix paths: plain startsWith, no segment boundary', () => {
  assert.ok(matches(route({ paths: ['/rou'] }), { path: '/roureq' }));
  assert.ok(!matches(route({ paths: ['/route'] }), { path: '/rou' }));
});

test('regex paths are anchored at the start only; numbered and named captures', () => {
  const r = route({ paths: ['~/version/(?<version>\\d+)/users/(\\w+)'], service: { id: upstream.id } });
  const match = new Router([r], [upstream]).match(request({ path: '/version/1/users/john/x' }));
  assert.ok(match);
  assert.deepEqual({ ...match.captures }, { '0': '/version/1/users/john', '1': '1', '2': 'john', version: '1' });
  assert.equal(match.strippedPrefix, '/version/1/users/john');
  assert.equal(match.upstreamPath, '/svc/x');
  assert.ok(!matches(r, { path: '/x/version/1/users/john' }), 'anchored at start');
  assert.ok(matches(route({ paths: ['~/(?P<id>\\d+)$'] }), { path: '/42' }), 'PCRE (?P<name>) syntax accepted');
});

test('matching runs on the normalized path', () => {
  const router = new Router([route({ paths: ['/foo/baz'] }), route({ paths: ['/foo'], strip_path: false })], [upstream]);
  assert.equal(router.match(request({ path: '/foo/./bar/../baz' }))?.route.paths?.[0], '/foo/baz');
  assert.equal(router.match(request({ path: '/fo%6F' }))?.normalizedPath, '/foo');
  assert.equal(router.match(request({ path: '//foo//x' }))?.normalizedPath, '/foo/x');
});

test('encoded dot segments cannot climb out of a prefix route', () => {
  const router = new Router([route({ paths: ['/public'] })], [upstream]);
  assert.equal(router.match(request({ path: '/public/%2E%2E/admin' })), null);
  assert.equal(router.match(request({ path: '/public/%2e%2e/%2E%2E/admin' })), null);
  const match = new Router([route({ paths: ['/route'], service: { id: upstream.id } })], [upstream]).match(
    request({ path: '/route%2E%2E/req' }),
  );
  assert.equal(match?.upstreamPath, '/svc/req', 'a stripped postfix starting with ../ is sanitized');
});

test('a malformed percent-escape matches nothing', () => {
  assert.equal(new Router([route({ paths: ['/'] })], [upstream]).match(request({ path: '/a%zzb' })), null);
  assert.equal(new Router([route({ paths: ['/'] })], [upstream]).match(request({ path: '/a%4' })), null);
});

test('match result: service, strippedPrefix for X-Forwarded-Prefix, escaped upstream path', () => {
  const r = route({ paths: ['/api'], service: { id: upstream.id } });
  const match = new Router([r], [upstream]).match(request({ path: '/api/a%20b/%c3%a9' }));
  assert.ok(match);
  assert.equal(match.service, upstream);
  assert.equal(match.strippedPrefix, '/api');
  assert.equal(match.normalizedPath, '/api/a%20b/%C3%A9');
  assert.equal(match.upstreamPath, '/svc/a%20b/%C3%A9');
  assert.ok(Object.isFrozen(match));
  const notStripped = new Router([route({ paths: ['/api'], strip_path: false })], [upstream]).match(request({ path: '/api/x' }));
  assert.equal(notStripped?.strippedPrefix, '');
  const root = new Router([route({ paths: ['/'] })], [upstream]).match(request({ path: '/x' }));
  assert.equal(root?.strippedPrefix, '');
  assert.equal(root?.upstreamPath, '/x', 'no service: base /');
});

test('the cache keys on every input a route uses (headers, SNI, port) and caches misses', () => {
  const routes = [
    route({ paths: ['/h'], headers: { 'x-a': ['1'] } }),
    route({ paths: ['/s'], snis: ['a.test'] }),
    route({ paths: ['/p'], hosts: ['example.com:8000'] }),
  ];
  const router = new Router(routes, [upstream]);
  for (let round = 0; round < 2; round++) {
    assert.ok(router.match(request({ path: '/h', headers: { 'x-a': '1' } })));
    assert.equal(router.match(request({ path: '/h', headers: { 'x-a': '2' } })), null);
    assert.equal(router.match(request({ path: '/h' })), null);
    assert.ok(router.match(request({ path: '/s', scheme: 'https', sni: 'a.test' })));
    assert.equal(router.match(request({ path: '/s', scheme: 'https', sni: 'b.test' })), null);
    assert.ok(router.match(request({ path: '/s', scheme: 'http' })));
    assert.ok(router.match(request({ path: '/p', port: 8000 })));
    assert.equal(router.match(request({ path: '/p', port: 9000 })), null);
    assert.equal(router.match(request({ path: '/none' })), null);
  }
  const uncached = new Router(routes, [upstream], { cacheSize: 0 });
  assert.ok(uncached.match(request({ path: '/h', headers: { 'x-a': '1' } })));
  assert.equal(uncached.match(request({ path: '/h', headers: { 'x-a': '2' } })), null);
});

test('a huge path is matched but not cached, and does not throw', () => {
  const router = new Router([route({ paths: ['/'] })], [upstream]);
  const long = '/' + 'a/'.repeat(50_000);
  assert.equal(router.match(request({ path: long }))?.normalizedPath, long);
});

test('regex routes pre-filtered by their literal head still match exactly as the regex does', () => {
  const cases: [string, string, boolean][] = [
    ['~/v1/users/\\d+', '/v1/users/7', true],
    ['~/v1/users/\\d+', '/v1/user/7', false],
    ['~/api/?items', '/apiitems', true],
    ['~/api/?items', '/api/items', true],
    ['~/a+b/c', '/aaab/c', true],
    ['~/x{0,1}y', '/y', true],
    ['~/files\\.json', '/files.json', true],
    ['~/files\\.json', '/filesXjson', false],
    ['~/(a|b)/z', '/b/z', true],
    ['~/one|/two', '/two', true],
    ['~/[cd]og', '/dog', true],
  ];
  for (const [path, requestPath, expected] of cases) {
    for (const cacheSize of [0, 10]) {
      const router = new Router([route({ paths: [path] })], [upstream], { cacheSize });
      assert.equal(router.match(request({ path: requestPath })) !== null, expected, `${path} vs ${requestPath}`);
    }
  }
});

/**
 * Golden table for the upstream path: every row of Kong's spec/fixtures/router_path_handling_tests.lua
 * (Kong/kong at 34c7dfdc29, the version matching 3.10's get_upstream_uri_v0), expanded over its
 * {false, true} strip_path and {"v0", "v1"} path_handling sets. A row without route path matches on host only.
 * Each case goes through a real Router match.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Router } from '../../../src/router/index.ts';
import { request, route, service } from './fixtures.ts';

type Strip = boolean | boolean[];
type Handling = 'v0' | 'v1' | ('v0' | 'v1')[];
type Row = [servicePath: string, routePath: string | null, strip: Strip, handling: Handling, requestPath: string, expected: string];

const B: boolean[] = [false, true];
const V: ('v0' | 'v1')[] = ['v0', 'v1'];

// prettier-ignore
const rows: Row[] = [
  // service_path  route_path  strip_path  path_handling  request_path  expected_path
  ['/',          '/',        B,     V,    '/',           '/'],
  ['/',          '/',        B,     V,    '/route',      '/route'],
  ['/',          '/',        B,     V,    '/route/',     '/route/'],
  ['/',          '/',        B,     V,    '/routereq',   '/routereq'],
  ['/',          '/',        B,     V,    '/route/req',  '/route/req'],
  // 5
  ['/',          '/route',   false, V,    '/route',      '/route'],
  ['/',          '/route',   false, V,    '/route/',     '/route/'],
  ['/',          '/route',   false, V,    '/routereq',   '/routereq'],
  ['/',          '/route',   true,  V,    '/route',      '/'],
  ['/',          '/route',   true,  V,    '/route/',     '/'],
  ['/',          '/route',   true,  V,    '/routereq',   '/req'],
  // 11
  ['/',          '/route/',  false, V,    '/route/',     '/route/'],
  ['/',          '/route/',  false, V,    '/route/req',  '/route/req'],
  ['/',          '/route/',  true,  V,    '/route/',     '/'],
  ['/',          '/route/',  true,  V,    '/route/req',  '/req'],
  // 15
  ['/srv',       '/rou',     false, 'v0', '/roureq',     '/srv/roureq'],
  ['/srv',       '/rou',     false, 'v1', '/roureq',     '/srvroureq'],
  ['/srv',       '/rou',     true,  'v0', '/roureq',     '/srv/req'],
  ['/srv',       '/rou',     true,  'v1', '/roureq',     '/srvreq'],
  // 19
  ['/srv/',      '/rou',     false, V,    '/rou',        '/srv/rou'],
  ['/srv/',      '/rou',     true,  'v0', '/rou',        '/srv'],
  ['/srv/',      '/rou',     true,  'v1', '/rou',        '/srv/'],
  // 22
  ['/service',   '/',        B,     V,    '/',           '/service'],
  ['/service',   '/',        B,     'v0', '/route',      '/service/route'],
  ['/service',   '/',        B,     'v1', '/route',      '/serviceroute'],
  ['/service',   '/',        B,     'v0', '/route/',     '/service/route/'],
  ['/service',   '/',        B,     'v1', '/route/',     '/serviceroute/'],
  // 27
  ['/service',   '/',        B,     'v0', '/routereq',   '/service/routereq'],
  ['/service',   '/',        B,     'v1', '/routereq',   '/serviceroutereq'],
  ['/service',   '/',        B,     'v0', '/route/req',  '/service/route/req'],
  ['/service',   '/',        B,     'v1', '/route/req',  '/serviceroute/req'],
  // 31
  ['/service',   '/route',   false, 'v0', '/route',      '/service/route'],
  ['/service',   '/route',   false, 'v1', '/route',      '/serviceroute'],
  ['/service',   '/route',   false, 'v0', '/route/',     '/service/route/'],
  ['/service',   '/route',   false, 'v1', '/route/',     '/serviceroute/'],
  ['/service',   '/route',   false, 'v0', '/routereq',   '/service/routereq'],
  ['/service',   '/route',   false, 'v1', '/routereq',   '/serviceroutereq'],
  ['/service',   '/route',   true,  V,    '/route',      '/service'],
  ['/service',   '/route',   true,  V,    '/route/',     '/service/'],
  ['/service',   '/route',   true,  'v0', '/routereq',   '/service/req'],
  ['/service',   '/route',   true,  'v1', '/routereq',   '/servicereq'],
  // 41
  ['/service',   '/route/',  false, 'v0', '/route/',     '/service/route/'],
  ['/service',   '/route/',  false, 'v1', '/route/',     '/serviceroute/'],
  ['/service',   '/route/',  false, 'v0', '/route/req',  '/service/route/req'],
  ['/service',   '/route/',  false, 'v1', '/route/req',  '/serviceroute/req'],
  ['/service',   '/route/',  true,  'v0', '/route/',     '/service/'],
  ['/service',   '/route/',  true,  'v1', '/route/',     '/service'],
  ['/service',   '/route/',  true,  'v0', '/route/req',  '/service/req'],
  ['/service',   '/route/',  true,  'v1', '/route/req',  '/servicereq'],
  // 49
  ['/service/',  '/',        B,     'v0', '/route/',     '/service/route/'],
  ['/service/',  '/',        B,     'v1', '/route/',     '/service/route/'],
  ['/service/',  '/',        B,     V,    '/',           '/service/'],
  ['/service/',  '/',        B,     V,    '/route',      '/service/route'],
  ['/service/',  '/',        B,     V,    '/routereq',   '/service/routereq'],
  ['/service/',  '/',        B,     V,    '/route/req',  '/service/route/req'],
  // 55
  ['/service/',  '/route',   false, V,    '/route',      '/service/route'],
  ['/service/',  '/route',   false, V,    '/route/',     '/service/route/'],
  ['/service/',  '/route',   false, V,    '/routereq',   '/service/routereq'],
  ['/service/',  '/route',   true,  'v0', '/route',      '/service'],
  ['/service/',  '/route',   true,  'v1', '/route',      '/service/'],
  ['/service/',  '/route',   true,  V,    '/route/',     '/service/'],
  ['/service/',  '/route',   true,  V,    '/routereq',   '/service/req'],
  // 62
  ['/service/',  '/route/',  false, V,    '/route/',     '/service/route/'],
  ['/service/',  '/route/',  false, V,    '/route/req',  '/service/route/req'],
  ['/service/',  '/route/',  true,  V,    '/route/',     '/service/'],
  ['/service/',  '/route/',  true,  V,    '/route/req',  '/service/req'],
  // 66: the following rows match on host, not on path
  ['/',          null,       B,     V,    '/',           '/'],
  ['/',          null,       B,     V,    '/route',      '/route'],
  ['/',          null,       B,     V,    '/route/',     '/route/'],
  // 69
  ['/service',   null,       B,     V,    '/',           '/service'],
  ['/service',   null,       B,     'v0', '/route',      '/service/route'],
  ['/service',   null,       B,     'v1', '/route',      '/serviceroute'],
  ['/service',   null,       B,     'v0', '/route/',     '/service/route/'],
  ['/service',   null,       B,     'v1', '/route/',     '/serviceroute/'],
  // 74
  ['/service/',  null,       B,     V,    '/',           '/service/'],
  ['/service/',  null,       B,     V,    '/route',      '/service/route'],
  ['/service/',  null,       B,     V,    '/route/',     '/service/route/'],
];

interface Case {
  servicePath: string;
  routePath: string | null;
  strip: boolean;
  handling: 'v0' | 'v1';
  requestPath: string;
  expected: string;
}

function expand([servicePath, routePath, strip, handling, requestPath, expected]: Row): Case[] {
  const strips = Array.isArray(strip) ? strip : [strip];
  const handlings = Array.isArray(handling) ? handling : [handling];
  return strips.flatMap((s) => handlings.map((h) => ({ servicePath, routePath, strip: s, handling: h, requestPath, expected })));
}

const cases = rows.flatMap(expand);

test('the golden table is complete (77 rows, 164 expanded cases)', () => {
  assert.equal(rows.length, 77);
  assert.equal(cases.length, 164);
});

for (const c of cases) {
  const name = `service ${c.servicePath} route ${c.routePath ?? '(host)'} strip=${c.strip} ${c.handling} GET ${c.requestPath} -> ${c.expected}`;
  test(name, () => {
    const upstream = service({ path: c.servicePath });
    const matchOn = c.routePath === null ? { hosts: ['example.com'] } : { paths: [c.routePath] };
    const r = route({ ...matchOn, strip_path: c.strip, path_handling: c.handling, service: { id: upstream.id } });
    const match = new Router([r], [upstream]).match(request({ path: c.requestPath }));
    assert.ok(match, 'route matched');
    assert.equal(match.upstreamPath, c.expected);
  });
}

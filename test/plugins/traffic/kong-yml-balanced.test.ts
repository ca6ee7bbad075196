/**
 * The most common public kong.yml shape: key-auth, acl, rate-limiting and cors on one service whose host
 * is an upstream of three targets, consumers with `keyauth_credentials` and `acls` nested. The file loads
 * unchanged, and the traffic behaves as each piece promises together: preflights answered before
 * authentication, keys required, groups enforced per route, limits per consumer, requests spread over the
 * three targets by weight, and a target that goes away taken out while every client request still succeeds.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { request, startGateway, tempDir, type TestGateway } from '../../helpers/gateway.ts';
import { loadConfigFile } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';

const KONG_YML = `
_format_version: "3.0"
services:
- name: catalog
  host: catalog.upstream
  protocol: http
  retries: 3
  tags: [team-catalog]
  routes:
  - name: catalog-public
    paths: [/catalog]
  - name: catalog-admin
    paths: [/catalog-admin]
    plugins:
    - name: acl
      config: { allow: [gold], hide_groups_header: true }
  plugins:
  - name: key-auth
    config: { key_names: [apikey], hide_credentials: true }
  - name: acl
    config: { allow: [gold, silver] }
  - name: rate-limiting
    config: { hour: 6, policy: local, limit_by: consumer }
  - name: cors
    config: { origins: ["https://shop.example.com"], methods: [GET, POST], credentials: true, max_age: 600 }
upstreams:
- name: catalog.upstream
  algorithm: round-robin
  healthchecks:
    passive:
      unhealthy: { tcp_failures: 1, http_failures: 0, timeouts: 0 }
  targets:
  - { target: "127.0.0.1:PORT_A", weight: 100 }
  - { target: "127.0.0.1:PORT_B", weight: 100 }
  - { target: "127.0.0.1:PORT_C", weight: 100 }
consumers:
- username: alice
  keyauth_credentials: [{ key: alice-key-0123456789 }]
  acls: [{ group: gold }]
- username: bob
  keyauth_credentials: [{ key: bob-key-0123456789 }]
  acls: [{ group: silver }]
- username: mallory
  keyauth_credentials: [{ key: mallory-key-0123456789 }]
`;

interface Target {
  name: string;
  server: http.Server;
  port: number;
}

/** An upstream that answers with its own name and the headers it received. */
async function target(name: string): Promise<Target> {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ target: name, headers: req.headers, url: req.url }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { name, server, port: (server.address() as AddressInfo).port };
}

function stop(t: Target): Promise<void> {
  return new Promise((r) => {
    t.server.closeAllConnections();
    t.server.close(() => r());
  });
}

let targets: Target[];
let gw: TestGateway;
let text: string;

before(async () => {
  targets = await Promise.all(['a', 'b', 'c'].map(target));
  text = KONG_YML.replace('PORT_A', String(targets[0].port)).replace('PORT_B', String(targets[1].port)).replace('PORT_C', String(targets[2].port));
  gw = await startGateway(parse(text));
});

after(async () => {
  await gw?.stop();
  for (const t of targets ?? []) if (t.server.listening) await stop(t);
});

const get = (path: string, headers: Record<string, string> = {}) => request(`${gw.http}${path}`, { headers });

test('the file loads unchanged through the loader (the same text `npm run check` reads)', async () => {
  const file = join(tempDir(), 'kong.yml');
  writeFileSync(file, text);
  const loaded = await loadConfigFile(file, bundledPlugins);
  assert.ok(loaded.ok, loaded.ok ? '' : loaded.errors.join('\n'));
});

test('a preflight is answered by cors before key-auth; a request without a key gets 401 with CORS headers', async () => {
  const preflight = await request(`${gw.http}/catalog`, {
    method: 'OPTIONS',
    headers: { origin: 'https://shop.example.com', 'access-control-request-method': 'POST' },
  });
  assert.equal(preflight.status, 200);
  assert.equal(preflight.headers['access-control-allow-origin'], 'https://shop.example.com');
  assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
  const missing = await get('/catalog', { origin: 'https://shop.example.com' });
  assert.equal(missing.status, 401);
  assert.equal(missing.json().message, 'No API key found in request');
  assert.equal(missing.headers['access-control-allow-origin'], 'https://shop.example.com');
  assert.equal((await get('/catalog', { apikey: 'not-a-key' })).status, 401);
});

test('a consumer in an allowed group passes with its identity; its key never reaches the upstream', async () => {
  const res = await get('/catalog/items', { apikey: 'alice-key-0123456789' });
  assert.equal(res.status, 200, res.text);
  const seen = res.json().headers;
  assert.equal(seen['x-consumer-username'], 'alice');
  assert.equal(seen['x-consumer-groups'], 'gold');
  assert.equal(seen.apikey, undefined, 'hide_credentials');
});

test('acl: a consumer in no allowed group is refused; a route narrower than its service refuses silver', async () => {
  const outsider = await get('/catalog', { apikey: 'mallory-key-0123456789' });
  assert.equal(outsider.status, 403);
  assert.equal(outsider.json().message, 'You cannot consume this service');
  const silverAdmin = await get('/catalog-admin', { apikey: 'bob-key-0123456789' });
  assert.equal(silverAdmin.status, 403);
  const goldAdmin = await get('/catalog-admin', { apikey: 'alice-key-0123456789' });
  assert.equal(goldAdmin.status, 200);
  assert.equal(goldAdmin.json().headers['x-consumer-groups'], undefined, 'hide_groups_header on that route');
});

test('round-robin spreads one consumer’s requests evenly over the three targets, and the limit is per consumer', async () => {
  const served: Record<string, number> = {};
  const statuses: number[] = [];
  // Six requests an hour (the window is the clock's hour: a minute's boundary could fall mid-test).
  for (let i = 0; i < 7; i++) {
    const res = await get('/catalog', { apikey: 'bob-key-0123456789' });
    statuses.push(res.status);
    if (res.status === 200) served[res.json().target] = (served[res.json().target] ?? 0) + 1;
    else {
      assert.equal(res.json().message, 'API rate limit exceeded');
      assert.ok(Number(res.headers['retry-after']) > 0);
      assert.equal(res.headers['x-ratelimit-remaining-hour'], '0');
    }
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429]);
  assert.deepEqual(served, { a: 2, b: 2, c: 2 });
  // Another consumer has its own count.
  const other = await get('/catalog-admin', { apikey: 'alice-key-0123456789' });
  assert.notEqual(other.status, 429);
});

test('a target that goes away: tries move to the next target, it is taken out, and no client sees a failure', async () => {
  const gone = targets[1];
  await stop(gone);
  const served = new Set<string>();
  // alice has used three of her six requests: three more, each of which would reach the stopped target in turn.
  for (let i = 0; i < 3; i++) {
    const res = await get('/catalog-admin', { apikey: 'alice-key-0123456789' });
    assert.equal(res.status, 200, res.text);
    served.add(res.json().target);
  }
  assert.ok(!served.has('b'), 'the stopped target served nothing');
  const health = await request(`${gw.admin}/upstreams/catalog.upstream/health`);
  const byTarget = Object.fromEntries(health.json().data.map((t: { target: string; health: string }) => [t.target, t.health]));
  assert.equal(byTarget[`127.0.0.1:${gone.port}`], 'UNHEALTHY');
  assert.equal(byTarget[`127.0.0.1:${targets[0].port}`], 'HEALTHY');
});

/**
 * Load balancing end to end: a real gateway, services whose host names an upstream, real target
 * servers. Kong's cases from spec/02-integration/05-proxy/10-balancer (04-round-robin,
 * 03-consistent-hashing, 02-least-connections, 07-latency), plus retries across targets, the Host
 * each target gets, and Kong's 503 when an upstream has no target to give.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { startTargetServer, type TargetServer } from '../../fixtures/target-server.ts';
import { closedPort, startWithRegistry } from '../../helpers/support.ts';
import { balancedConfig, clientRequests as requestsTo, newUpstreamName, SLOTS, startTargets as targets, stopAll, type TargetSpec } from './support.ts';

let gw: TestGateway;

before(async () => {
  gw = await startGateway({});
});
after(async () => {
  await gw?.stop();
});

/** Reloads the gateway with one route `/` to a service on a new upstream; returns the upstream's name. */
async function balance(upstream: Record<string, unknown>, list: TargetSpec[], service: Record<string, unknown> = {}): Promise<string> {
  const { name, config } = balancedConfig(upstream, list, service);
  assert.ok(await gw.reload(config), 'the configuration was refused');
  return name;
}

const clientRequests = (n: number, headers: Record<string, string> = {}, path = '/') => requestsTo(gw.http, n, headers, path);

describe('round-robin (04-round-robin_spec)', () => {
  test('over multiple targets', async () => {
    const servers = await targets(2);
    await balance({}, servers.map((s) => s.target));
    const { oks } = await clientRequests(SLOTS * 2);
    await stopAll(servers);
    assert.equal(oks, SLOTS * 2);
    assert.deepEqual(servers.map((s) => s.ok), [SLOTS, SLOTS]);
  });

  test('adding a target (50/50 → 40/40/20), modifying a weight (50/50 → 40/60), removing one (weight 0)', async () => {
    const [s1, s2, s3] = await targets(3);
    const name = await balance({}, [[s1.target, 10], [s2.target, 10]]);
    const reload = async (list: [string, number][]) => {
      assert.ok(await gw.reload({
        services: [{ name: 'svc', host: name, routes: [{ name: 'r', paths: ['/'] }] }],
        upstreams: [{ name, targets: list.map(([target, weight]) => ({ target, weight })) }],
      }));
      for (const s of [s1, s2, s3]) s.reset();
    };
    await clientRequests(SLOTS * 2);
    assert.deepEqual([s1.total, s2.total], [SLOTS, SLOTS]);

    await reload([[s1.target, 10], [s2.target, 10], [s3.target, 5]]);
    assert.equal((await clientRequests(SLOTS * 2)).oks, SLOTS * 2);
    assert.deepEqual([s1.total, s2.total, s3.total], [SLOTS * 2 * 0.4, SLOTS * 2 * 0.4, SLOTS * 2 * 0.2]);

    await reload([[s1.target, 10], [s2.target, 15]]);
    await clientRequests(SLOTS * 2);
    assert.deepEqual([s1.total, s2.total], [SLOTS * 2 * 0.4, SLOTS * 2 * 0.6]);

    await reload([[s1.target, 10], [s2.target, 0]]);
    await clientRequests(SLOTS * 2);
    assert.deepEqual([s1.total, s2.total], [SLOTS * 2, 0]);
    await stopAll([s1, s2, s3]);
  });

  test("failure due to targets all 0 weight, or no targets: Kong's 503", async () => {
    const [s1] = await targets(1);
    await balance({}, [[s1.target, 0]]);
    const res = await request(gw.http + '/');
    assert.equal(res.status, 503);
    assert.equal(res.json().message, 'failure to get a peer from the ring-balancer');
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    await balance({}, []);
    assert.equal((await clientRequests(1)).last, 503);
    assert.equal(s1.total, 0);
    await stopAll([s1]);
  });

  test('removing and adding the same target', async () => {
    const [server] = await targets(1);
    const name = await balance({}, [[server.target, 100]]);
    const reload = (weight: number) =>
      gw.reload({ services: [{ name: 'svc', host: name, routes: [{ name: 'r', paths: ['/'] }] }], upstreams: [{ name, targets: [{ target: server.target, weight }] }] });
    assert.equal((await clientRequests(20)).oks, 20);
    await reload(0);
    assert.equal((await clientRequests(20)).oks, 0);
    await reload(100);
    assert.equal((await clientRequests(20)).oks, 20);
    assert.equal(server.total, 40);
    await stopAll([server]);
  });
});

describe('consistent hashing (03-consistent-hashing_spec)', () => {
  const oneGetsAll = (servers: TargetServer[], n: number) => {
    assert.ok(servers.every((s) => s.total === 0 || s.total === n), `counts should either get 0 or ALL hits: ${servers.map((s) => s.total)}`);
    assert.equal(servers.reduce((sum, s) => sum + s.total, 0), n);
  };

  test('hashing on a header, on several values of it, on a missing header', async () => {
    const cases: Record<string, string>[] = [{ hashme: 'just a value' }, { hashme: '1st value, 2nd value' }, { nothashme: 'just a value' }];
    for (const headers of cases) {
      const servers = await targets(2);
      await balance({ hash_on: 'header', hash_on_header: 'hashme' }, servers.map((s) => s.target));
      assert.equal((await clientRequests(SLOTS * 2, headers)).oks, SLOTS * 2);
      oneGetsAll(servers, SLOTS * 2);
      await stopAll(servers);
    }
  });

  test('hashing on a cookie: no Set-Cookie when the client has it; one made up (and sticking) when not', async () => {
    const servers = await targets(2);
    await balance({ hash_on: 'cookie', hash_on_cookie: 'hashme' }, servers.map((s) => s.target));
    const withCookie = await request(gw.http + '/', { headers: { cookie: 'hashme=some-cookie-value' } });
    assert.equal(withCookie.headers['set-cookie'], undefined);
    servers.forEach((s) => s.reset());
    const first = await request(gw.http + '/', { headers: { cookie: 'some-other-cooke=some-other-value' } });
    const setCookie = (first.headers['set-cookie'] ?? [])[0];
    assert.match(setCookie, /^hashme=[0-9a-f-]{36}; Path=\/; Same-Site=Lax; HttpOnly$/);
    const cookie = setCookie.split(';')[0];
    assert.equal((await clientRequests(SLOTS * 2 - 1, { cookie })).oks, SLOTS * 2 - 1);
    oneGetsAll(servers, SLOTS * 2);
    await stopAll(servers);
  });

  test('hashing on the path, a query argument, a regex capture', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ hash_on: 'path' }, '/my-path?a=1&b=2'],
      [{ hash_on: 'query_arg', hash_on_query_arg: 'hashme' }, '/?hashme=123'],
      [{ hash_on: 'uri_capture', hash_on_uri_capture: 'namespace' }, '/foo/123'],
    ];
    for (const [upstream, uri] of cases) {
      const servers = await targets(2);
      const name = newUpstreamName();
      assert.ok(await gw.reload({
        services: [{ name: 'svc', host: name, routes: [{ name: 'r', paths: ['~/(?<namespace>[^/]+)/(?<id>[0-9]+)', '/'] }] }],
        upstreams: [{ name, ...upstream, targets: servers.map((s) => ({ target: s.target })) }],
      }));
      assert.equal((await clientRequests(SLOTS * 2, {}, uri)).oks, SLOTS * 2);
      oneGetsAll(servers, SLOTS * 2);
      await stopAll(servers);
    }
  });

  test('without a hash value every request goes to one target; distinct values spread', async () => {
    const servers = await targets(2);
    await balance({ hash_on: 'header', hash_on_header: 'x-user' }, servers.map((s) => s.target));
    for (let i = 0; i < 40; i++) await request(gw.http + '/', { headers: { 'x-user': `user-${i}` } });
    assert.ok(servers.every((s) => s.total > 5), `both targets get some users: ${servers.map((s) => s.total)}`);
    await stopAll(servers);
  });
});

describe('consistent hashing on the consumer', () => {
  test('the consumer an authentication plugin set on the request context decides the target', async () => {
    // A test-only authentication plugin: the consumer named by the x-user header.
    const byHeader: PluginDefinition = {
      name: 'header-auth', version: '0.1.0', priority: 1000, configSchema: { type: 'record', fields: {} },
      create: (api) => ({
        access: (ctx) => {
          ctx.consumer = api.consumers.byUsername(String(ctx.headers['x-user'])) ?? null;
        },
      }),
    };
    const servers = await targets(2);
    const consumers = Array.from({ length: 20 }, (_, i) => ({ username: `user-${i}` }));
    const other = await startWithRegistry({
      services: [{ name: 'svc', host: 'by-consumer', routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'header-auth' }] }] }],
      upstreams: [{ name: 'by-consumer', hash_on: 'consumer', targets: servers.map((s) => ({ target: s.target })) }],
      consumers,
    }, new Map([...bundledPlugins, ['header-auth', byHeader]]));
    try {
      const seen = new Map<string, Set<number>>();
      for (let round = 0; round < 3; round++) {
        for (const { username } of consumers) {
          servers.forEach((s) => s.reset());
          assert.equal((await request(other.http + '/', { headers: { 'x-user': username } })).status, 200);
          const port = servers.find((s) => s.total === 1)!.port;
          seen.set(username, (seen.get(username) ?? new Set()).add(port));
        }
      }
      assert.ok([...seen.values()].every((ports) => ports.size === 1), 'each consumer always lands on the same target');
      assert.equal(new Set([...seen.values()].map((ports) => [...ports][0])).size, 2, 'consumers spread over both targets');
    } finally {
      await other.stop();
      await stopAll(servers);
    }
  });
});

describe('least-connections (02-least-connections_spec)', () => {
  test('balances by least-connections: the twice-faster target takes about twice the requests', async () => {
    const fast = await startTargetServer({ delayMs: 100 });
    const slow = await startTargetServer({ delayMs: 200 });
    await balance({ algorithm: 'least-connections' }, [fast.target, slow.target]);
    const deadline = Date.now() + 1500;
    await Promise.all(Array.from({ length: 20 }, async () => {
      while (Date.now() < deadline) assert.equal((await request(gw.http + '/leastconnections')).status, 200);
    }));
    await stopAll([fast, slow]);
    const ratio = fast.ok / slow.ok;
    assert.ok(ratio > 1 && ratio < 3, `ratio ${fast.ok}/${slow.ok}`);
  });
});

describe('latency (07-latency_spec)', () => {
  test('balances by latency: the fast target takes most requests', async () => {
    const fast = await startTargetServer({ delayMs: 5 });
    const slow = await startTargetServer({ delayMs: 150 });
    await balance({ algorithm: 'latency' }, [slow.target, fast.target]);
    // The averages start at the configuration's load: let some time make the first samples count.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await clientRequests(40)).oks, 40);
    await stopAll([fast, slow]);
    assert.ok(fast.ok > slow.ok * 4, `fast ${fast.ok} / slow ${slow.ok}`);
  });
});

describe('retries and hosts', () => {
  test('a target that refuses connections: its tries move to the next target, the client sees none of it', async () => {
    const servers = await targets(2);
    await balance({}, [`127.0.0.1:${await closedPort()}`, ...servers.map((s) => s.target)]);
    const { oks, fails } = await clientRequests(SLOTS * 3);
    await stopAll(servers);
    assert.deepEqual([oks, fails], [SLOTS * 3, 0]);
    assert.equal(servers[0].ok + servers[1].ok, SLOTS * 3);
  });

  test('a timeout waiting for an answer moves an idempotent request to the next target', async () => {
    const servers = await targets(2);
    await balance({}, servers.map((s) => s.target), { read_timeout: 300, retries: 1 });
    servers[0].hangNext = 1;
    servers[1].hangNext = 1;
    const res = await request(gw.http + '/');
    assert.equal(res.status, 504, 'one try on each target, both timed out: 504');
    const { oks } = await clientRequests(4);
    assert.equal(oks, 4);
    servers[0].hangNext = 1;
    assert.equal((await clientRequests(2)).oks, 2, 'the hung try was retried on the other target');
    const post = await request(gw.http + '/', { method: 'POST', body: 'x' });
    assert.equal(post.status, 200);
    await stopAll(servers);
  });

  test("each target gets its own Host (with its port); an upstream's host_header replaces it; preserve_host keeps the client's", async () => {
    const [server] = await targets(1);
    await balance({}, [server.target]);
    await request(gw.http + '/', { headers: { host: 'client.test' } });
    assert.equal(server.requests.at(-1)!.headers.host, server.target);
    await balance({ host_header: 'backend.internal' }, [server.target]);
    await request(gw.http + '/', { headers: { host: 'client.test' } });
    assert.equal(server.requests.at(-1)!.headers.host, 'backend.internal');
    const name = newUpstreamName();
    await gw.reload({
      services: [{ name: 'svc', host: name, routes: [{ name: 'r', paths: ['/'], preserve_host: true }] }],
      upstreams: [{ name, targets: [{ target: server.target }] }],
    });
    await request(gw.http + '/', { headers: { host: 'client.test' } });
    assert.equal(server.requests.at(-1)!.headers.host, 'client.test');
    await stopAll([server]);
  });

  test('a retry on another target carries that target\'s Host', async () => {
    const [server] = await targets(1);
    await balance({ hash_on: 'header', hash_on_header: 'h' }, [`localhost:${await closedPort()}`, server.target].map((t) => t));
    for (let i = 0; i < 6; i++) assert.equal((await request(gw.http + '/', { headers: { h: `v${i}` } })).status, 200);
    assert.ok(server.requests.every((r) => r.headers.host === server.target));
    await stopAll([server]);
  });
});

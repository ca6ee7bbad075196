/**
 * Health checks end to end, Kong's cases from spec/02-integration/05-proxy/10-balancer/
 * 01-healthchecks_spec.lua: passive checks counting real traffic, active probes taking targets out
 * and bringing them back (http and https), manual recovery and shutdown through the admin API,
 * `healthchecks.threshold`, and the health endpoints' shapes. Target servers are stopped, made
 * unhealthy and made to hang; intervals are short and every wait is on a condition.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { startTargetServer, type TargetServer } from '../../fixtures/target-server.ts';
import { startWithRegistry, waitFor, type RegistryGateway } from '../../helpers/support.ts';
import { balancedConfig, clientRequests as requestsTo, newUpstreamName, SLOTS, startTargets as servers, stopAll, type TargetSpec } from './support.ts';

/** Probe interval in seconds (Kong's tests use 1). */
const INTERVAL = 0.05;

let gw: TestGateway;

before(async () => {
  gw = await startGateway({});
});
after(async () => {
  await gw?.stop();
});

interface Balanced {
  name: string;
  id: string;
}

async function balance(
  healthchecks: Record<string, unknown>,
  targets: TargetSpec[],
  service: Record<string, unknown> = {},
  upstream: Record<string, unknown> = {},
): Promise<Balanced> {
  const { name, config } = balancedConfig({ healthchecks, ...upstream }, targets, service);
  assert.ok(await gw.reload(config), 'the configuration was refused');
  return { name, id: (await request(`${gw.admin}/upstreams/${name}`)).json().id };
}

const clientRequests = (n: number, base = gw.http) => requestsTo(base, n);

async function health(upstream: string, admin = gw.admin): Promise<any> {
  return (await request(`${admin}/upstreams/${upstream}/health`)).json();
}

async function targetHealth(upstream: string, target: string): Promise<string | undefined> {
  return (await health(upstream)).data.find((d: { target: string }) => d.target === target)?.health;
}

async function waitHealth(upstream: string, target: string, expected: string): Promise<void> {
  await waitFor(async () => (await targetHealth(upstream, target)) === expected, `${target} in ${upstream} to become ${expected}`, 10_000);
}

function putHealth(upstream: string, target: string, state: 'healthy' | 'unhealthy', address?: string) {
  const path = address === undefined ? `${target}/${state}` : `${target}/${address}/${state}`;
  return request(`${gw.admin}/upstreams/${upstream}/targets/${path}`, { method: 'PUT', body: {} });
}


/**
 * Kong's three phases: both targets take traffic, then server 2 is out, then back; SLOTS requests
 * each, none failing, so server 1 answers two thirds and server 2 one third.
 */
async function outAndBack(name: string, [s1, s2]: TargetServer[], takeOut: () => unknown, bringBack: () => unknown): Promise<void> {
  const before = await clientRequests(SLOTS);
  await takeOut();
  await waitHealth(name, s2.target, 'UNHEALTHY');
  const down = await clientRequests(SLOTS);
  await bringBack();
  await waitHealth(name, s2.target, 'HEALTHY');
  const back = await clientRequests(SLOTS);
  await stopAll([s1, s2]);
  assert.deepEqual([s1.ok, s2.ok, s1.fail, s2.fail], [SLOTS * 2, SLOTS, 0, 0]);
  assert.deepEqual([before.oks + down.oks + back.oks, before.fails + down.fails + back.fails], [SLOTS * 3, 0]);
}

describe('passive', () => {
  test('perform passive health checks', async () => {
    for (let nfails = 1; nfails <= 3; nfails++) {
      const [s1, s2] = await servers(2);
      await balance({ passive: { unhealthy: { http_failures: nfails } } }, [s1.target, s2.target]);
      const requests = SLOTS * 2;
      const server2Oks = Math.floor(requests / 4);
      const first = await clientRequests(server2Oks * 2);
      s2.healthy = false;
      const second = await clientRequests(requests - server2Oks * 2);
      await stopAll([s1, s2]);
      // Kong asserts these near their values; round-robin over two targets makes them exact here.
      assert.equal(s1.ok, requests - server2Oks - nfails);
      assert.equal(s2.ok, server2Oks);
      assert.equal(s1.fail, 0);
      assert.equal(s2.fail, nfails, `nfails=${nfails}: the failures it took to take server 2 out`);
      assert.equal(first.oks + second.oks, requests - nfails);
      assert.equal(first.fails + second.fails, nfails);
    }
  });

  test('perform passive health checks -- manual recovery', async () => {
    const [s1, s2] = await servers(2);
    const { name } = await balance({ passive: { unhealthy: { http_failures: 1 } } }, [[s1.target, 100], [s2.target, 1]]);
    await clientRequests(100);
    assert.ok(Math.abs(s1.total / 100 - 1) <= 0.05);
    s1.healthy = false;
    await clientRequests(10);
    s2.reset();
    await clientRequests(100);
    assert.equal(s2.total, 100, 'server 1 is out: server 2 takes everything');
    s1.healthy = true;
    assert.equal((await putHealth(name, s1.target, 'healthy')).status, 204);
    await waitHealth(name, s1.target, 'HEALTHY');
    s1.reset();
    await clientRequests(100);
    assert.ok(s1.total >= 95, `server 1 is back: ${s1.total}/100`);
    await stopAll([s1, s2]);
  });

  test('perform passive health checks -- manual shutdown (by target id and address)', async () => {
    const [s1, s2] = await servers(2);
    const { name } = await balance({ passive: { unhealthy: { http_failures: 1 } } }, [s1.target, s2.target]);
    const target2 = (await request(`${gw.admin}/upstreams/${name}/targets/${s2.target}`)).json();
    const set = async (state: 'healthy' | 'unhealthy') => assert.equal((await putHealth(name, target2.id, state, s2.target)).status, 204);
    await outAndBack(name, [s1, s2], () => set('unhealthy'), () => set('healthy'));
  });

  test('perform passive health checks -- connection timeouts', async () => {
    const [s1, s2] = await servers(2);
    await balance({ passive: { unhealthy: { timeouts: 1 } } }, [s1.target, s2.target], { read_timeout: 500, write_timeout: 500 });
    let { oks, fails } = await clientRequests(SLOTS);
    s2.hangNext = 1;
    const after = await clientRequests(SLOTS);
    oks += after.oks;
    fails += after.fails;
    await stopAll([s1, s2]);
    assert.deepEqual([s1.ok, s2.ok, s1.fail, s2.fail], [SLOTS * 1.5, SLOTS / 2, 0, 1]);
    assert.deepEqual([oks, fails], [SLOTS * 2, 0]);
  });

  test('a target that stops accepting connections is taken out after tcp_failures', async () => {
    const [s1, s2] = await servers(2);
    const { name } = await balance({ passive: { unhealthy: { tcp_failures: 2 } } }, [s1.target, s2.target]);
    await s2.stop();
    const { oks } = await clientRequests(SLOTS);
    assert.equal(oks, SLOTS, 'the refused tries were retried on server 1');
    assert.equal(await targetHealth(name, s2.target), 'UNHEALTHY');
    await stopAll([s1]);
  });

  test('do not count Kong-generated errors as failures', async () => {
    // A plugin that answers the first request itself with 401, as Kong's fail-once-auth fixture.
    let failed = false;
    const failOnce: PluginDefinition = {
      name: 'fail-once-auth', version: '0.1.0', priority: 1000, configSchema: { type: 'record', fields: {} },
      create: () => ({
        access: (ctx) => {
          if (failed) return;
          failed = true;
          ctx.respond(401, { message: 'Unauthorized' });
        },
      }),
    };
    const registryGateway: RegistryGateway = await startWithRegistry({}, new Map([...bundledPlugins, ['fail-once-auth', failOnce]]));
    try {
      const [s1, s2] = await servers(2);
      const name = newUpstreamName();
      assert.ok(await registryGateway.reload({
        services: [{ name: 'svc', host: name, connect_timeout: 50, routes: [{ name: 'r', paths: ['/'] }], plugins: [{ name: 'fail-once-auth' }] }],
        upstreams: [{
          name,
          healthchecks: { passive: { healthy: { successes: 1 }, unhealthy: { http_statuses: [401, 500], http_failures: 1, tcp_failures: 1, timeouts: 1 } } },
          targets: [{ target: s1.target }, { target: s2.target }],
        }],
      }));
      const first = await clientRequests(1, registryGateway.http);
      assert.deepEqual([first.oks, first.fails, first.last], [0, 1, 401]);
      const rest = await clientRequests(SLOTS * 2, registryGateway.http);
      assert.deepEqual([rest.fails, rest.last], [0, 200]);
      await stopAll([s1, s2]);
      assert.ok(s1.ok > 0 && s2.ok > 0, 'both servers were fully operational');
    } finally {
      await registryGateway.stop();
    }
  });
});

describe('active', () => {
  const active = (nfails: number, fields: Record<string, unknown> = {}) => ({
    active: {
      http_path: '/status',
      healthy: { interval: INTERVAL, successes: 1 },
      unhealthy: { interval: INTERVAL, http_failures: nfails },
      ...fields,
    },
  });

  test('perform active health checks -- up then down', async () => {
    for (let nfails = 1; nfails <= 3; nfails++) {
      const [s1, s2] = await servers(2);
      const { name } = await balance(active(nfails), [s1.target, s2.target], { connect_timeout: 50 });
      const requests = SLOTS * 2;
      const server2Oks = Math.floor(requests / 4);
      let { oks, fails } = await clientRequests(server2Oks * 2);
      s2.healthy = false;
      await waitHealth(name, s2.target, 'UNHEALTHY');
      const rest = await clientRequests(requests - server2Oks * 2);
      oks += rest.oks;
      fails += rest.fails;
      await stopAll([s1, s2]);
      assert.deepEqual([s1.ok, s2.ok, s1.fail, s2.fail], [requests - server2Oks, server2Oks, 0, 0]);
      assert.deepEqual([oks, fails], [requests, 0]);
    }
  });

  for (const protocol of ['http', 'https'] as const) {
    test(`perform active health checks -- automatic recovery (${protocol})`, async () => {
      for (const nchecks of [1, 3]) {
        const [s1, s2] = await Promise.all([startTargetServer({ protocol }), startTargetServer({ protocol })]);
        const { name } = await balance(
          {
            active: {
              type: protocol, http_path: '/status', https_verify_certificate: false,
              healthy: { interval: INTERVAL, successes: nchecks }, unhealthy: { interval: INTERVAL, http_failures: nchecks },
            },
          },
          [s1.target, s2.target],
          { protocol },
        );
        await waitHealth(name, s1.target, 'HEALTHY');
        await outAndBack(name, [s1, s2], () => (s2.healthy = false), () => (s2.healthy = true));
      }
    });
  }

  test('perform active health checks -- can detect before any proxy traffic, and a stopped server', async () => {
    const [s1, s2, s3] = await servers(3);
    s2.healthy = false;
    await s3.stop();
    const { name } = await balance(active(2, { unhealthy: { interval: INTERVAL, http_failures: 2, tcp_failures: 2 } }), [s1.target, s2.target, s3.target]);
    await waitHealth(name, s2.target, 'UNHEALTHY');
    await waitHealth(name, s3.target, 'UNHEALTHY');
    const { oks, fails } = await clientRequests(SLOTS * 2);
    await stopAll([s1, s2, s3]);
    assert.deepEqual([s1.ok, s2.ok, oks, fails], [SLOTS * 2, 0, SLOTS * 2, 0]);
  });

  test('a stopped target comes back when its server starts again', async () => {
    const [s1, s2] = await servers(2);
    const { name } = await balance(active(1, { unhealthy: { interval: INTERVAL, tcp_failures: 1 } }), [s1.target, s2.target]);
    await s2.stop();
    await waitHealth(name, s2.target, 'UNHEALTHY');
    await s2.start();
    await waitHealth(name, s2.target, 'HEALTHY');
    await clientRequests(SLOTS);
    assert.ok(s2.ok > 0);
    await stopAll([s1, s2]);
  });

  test('health survives a reload that keeps the target; health probes of the previous configuration stop', async () => {
    const [s1, s2] = await servers(2);
    const checks = active(1);
    const { name } = await balance(checks, [s1.target, s2.target]);
    s2.healthy = false;
    await waitHealth(name, s2.target, 'UNHEALTHY');
    // The same upstream again (new service name, same upstream and targets): still unhealthy at once.
    assert.ok(await gw.reload({
      services: [{ name: 'svc2', host: name, routes: [{ name: 'r2', paths: ['/'] }] }],
      upstreams: [{ name, healthchecks: checks, targets: [{ target: s1.target }, { target: s2.target }] }],
    }));
    assert.equal(await targetHealth(name, s2.target), 'UNHEALTHY');
    assert.equal((await clientRequests(SLOTS)).oks, SLOTS);
    assert.equal(s2.ok, 0);
    await stopAll([s1, s2]);
  });
});

describe('consistent hashing', () => {
  const hashed = { hash_on: 'header', hash_on_header: 'hashme' };

  const balanceHashed = (healthchecks: Record<string, unknown>, targets: TargetServer[]) => balance(healthchecks, targets.map((t) => t.target), {}, hashed);

  const hashedRequests = async (n: number) => {
    for (let i = 0; i < n; i++) await request(gw.http + '/', { headers: { hashme: 'just a value' } });
  };

  test('passive healthcheck: the hashed target goes away, its value moves to another, the upstream stays healthy', async () => {
    const all = await servers(3);
    const { name } = await balanceHashed({ passive: { type: 'http', healthy: { successes: 1 }, unhealthy: { http_failures: 1 } } }, all);
    await hashedRequests(9);
    const first = all.find((s) => s.total > 0)!;
    assert.ok(all.every((s) => s.total === 0 || s.total === 9), 'counts should either get 0 or all hits');
    first.healthy = false;
    await hashedRequests(9);
    const details = (await request(`${gw.admin}/upstreams/${name}/health?balancer_health=1`)).json().data;
    const host = details.details.hosts.find((h: { port: number }) => h.port === first.port);
    assert.equal(host.addresses[0].healthy, false);
    assert.equal(details.health, 'HEALTHY');
    assert.equal(all.filter((s) => s !== first).reduce((sum, s) => sum + s.ok, 0), 8, 'after one failure the value lands on another target');
    await stopAll(all);
  });

  test('active healthcheck: probes reach every target, the failing one is marked, the upstream stays healthy', async () => {
    const all = await servers(3);
    const { name } = await balanceHashed({ active: { type: 'http', http_path: '/status', healthy: { interval: INTERVAL, successes: 1 }, unhealthy: { interval: INTERVAL, http_failures: 1 } } }, all);
    await waitFor(() => all.every((s) => s.statusOk > 0), 'probes on every target');
    all[2].healthy = false;
    await waitHealth(name, all[2].target, 'UNHEALTHY');
    const details = (await request(`${gw.admin}/upstreams/${name}/health?balancer_health=1`)).json().data;
    assert.deepEqual(details.details.hosts.map((h: { addresses: { healthy: boolean }[] }) => h.addresses[0].healthy), [true, true, false]);
    assert.equal(details.health, 'HEALTHY');
    await stopAll(all);
    assert.ok(all[0].statusFail === 0 && all[1].statusFail === 0 && all[2].statusFail > 0);
  });
});

describe('threshold and the health endpoints', () => {
  test('threshold for health checks', async () => {
    const [s1, s2, s3, s4] = await servers(4);
    const all = [s1, s2, s3, s4];
    for (const threshold of [0, 25, 75, 99, 100]) {
      const { name } = await balance({ passive: { unhealthy: { tcp_failures: 1 } }, threshold }, all.map((s): [string, number] => [s.target, 25]));
      const balancerHealth = async () => (await request(`${gw.admin}/upstreams/${name}/health?balancer_health=1`)).json().data;
      for (const s of all) assert.equal((await putHealth(name, s.target, 'healthy')).status, 204);
      let steps = 0;
      for (const available of [100, 75, 50, 25, 0]) {
        const data = await balancerHealth();
        assert.deepEqual(data.details.weight, { available, unavailable: 100 - available, total: 100 });
        const expected = available > threshold ? 'HEALTHY' : 'UNHEALTHY';
        assert.equal(data.health, expected, `threshold ${threshold}, ${available}% available`);
        assert.equal(data.balancer_health, expected);
        const res = await request(gw.http + '/');
        assert.equal(res.status, available > threshold ? 200 : 503);
        if (steps < 4) assert.equal((await putHealth(name, all[steps++].target, 'unhealthy')).status, 204);
      }
    }
    await stopAll(all);
  });

  test('a target that has healthchecks disabled; setting its health is refused as Kong does', async () => {
    const [s1] = await servers(1);
    const { name, id } = await balance({}, [s1.target]);
    const body = await health(name);
    assert.equal(body.data[0].health, 'HEALTHCHECKS_OFF');
    assert.equal(body.data[0].data.addresses[0].health, 'HEALTHCHECKS_OFF');
    assert.match(body.node_id, /^[0-9a-f-]{36}$/);
    const balancerHealth = (await request(`${gw.admin}/upstreams/${id}/health?balancer_health=1`)).json().data;
    assert.equal(balancerHealth.health, 'HEALTHCHECKS_OFF');
    assert.equal(balancerHealth.balancer_health, 'HEALTHY');
    const refused = await putHealth(name, s1.target, 'unhealthy');
    assert.deepEqual([refused.status, refused.json().message], [400, `no healthchecker found for ${name}`]);
    await stopAll([s1]);
  });

  test('does not perform health checks when disabled (#3304): a failing target keeps its traffic', async () => {
    const [server] = await servers(1);
    await balance({}, [server.target]);
    assert.deepEqual(await clientRequests(10), { oks: 10, fails: 0, last: 200 });
    server.healthy = false;
    assert.deepEqual(await clientRequests(10), { oks: 0, fails: 10, last: 500 });
    server.healthy = true;
    assert.deepEqual(await clientRequests(10), { oks: 10, fails: 0, last: 200 });
    await stopAll([server]);
  });

  test("Kong's shapes: /upstreams, /upstreams/{u}, targets, health; 404s; writes refused (DB-less)", async () => {
    const [s1] = await servers(1);
    const { name, id } = await balance({ passive: { unhealthy: { http_failures: 1 } } }, [s1.target, ['10.0.0.9', 0]]);
    const list = (await request(`${gw.admin}/upstreams`)).json();
    assert.deepEqual(list.data.map((u: { name: string }) => u.name), [name]);
    assert.equal(list.next, null);
    const upstream = (await request(`${gw.admin}/upstreams/${id}`)).json();
    assert.equal(upstream.name, name);
    assert.equal(upstream.algorithm, 'round-robin');
    const targets = (await request(`${gw.admin}/upstreams/${name}/targets`)).json();
    assert.deepEqual(targets.data.map((t: { target: string; weight: number; upstream: { id: string } }) => [t.target, t.weight, t.upstream.id]), [
      [s1.target, 100, id],
      ['10.0.0.9:8000', 0, id],
    ]);
    const byAddress = (await request(`${gw.admin}/upstreams/${name}/targets/10.0.0.9`)).json();
    assert.equal(byAddress.target, '10.0.0.9:8000');
    const body = await health(name);
    assert.deepEqual(body.data.map((d: { health: string }) => d.health), ['HEALTHY', 'HEALTHCHECKS_OFF']);
    const [port] = s1.target.split(':').slice(1).map(Number);
    assert.deepEqual(body.data[0].data, {
      host: '127.0.0.1', port, dns: 'A', nodeWeight: 100,
      weight: { total: 100, unavailable: 0, available: 100 },
      addresses: [{ ip: '127.0.0.1', port, weight: 100, health: 'HEALTHY' }],
    });
    assert.equal((await request(`${gw.admin}/upstreams/nope/health`)).status, 404);
    assert.equal((await request(`${gw.admin}/upstreams/${name}/targets/10.0.0.10`)).status, 404);
    assert.equal((await putHealth(name, s1.target, 'unhealthy', '10.9.9.9:1')).status, 404);
    const write = await request(`${gw.admin}/upstreams`, { method: 'POST', body: { name: 'x' } });
    assert.deepEqual([write.status, write.json().message], [405, "cannot create 'upstreams' entities when not using a database"]);
    assert.equal((await request(`${gw.admin}/upstreams/${name}/targets`, { method: 'POST', body: { target: 'a' } })).status, 405);
    await stopAll([s1]);
  });
});

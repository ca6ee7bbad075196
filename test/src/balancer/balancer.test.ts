/**
 * The balancer's algorithms and health bookkeeping, without network: Kong's unit cases
 * (spec/01-unit/09-balancer: 01-generic, 02-least_connections, 03-consistent_hashing,
 * 04-round_robin, 06-latency) on balancers built from a loaded configuration.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { Latency } from '../../../src/balancer/algorithms.ts';
import { Balancer } from '../../../src/balancer/balancer.ts';
import { newHandle, TargetState, type PickHandle } from '../../../src/balancer/target-state.ts';
import { xxhash32 } from '../../../src/balancer/xxhash32.ts';
import { loadConfigText } from '../../../src/config/load.ts';
import type { Target, Upstream } from '../../../src/config/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';

/** An upstream with Kong's defaults and `fields`, and its targets (`address` and weight). */
function upstreamOf(fields: Record<string, unknown>, targets: [string, number][]): { upstream: Upstream; targets: Target[] } {
  const text = stringify({ _format_version: '3.0', upstreams: [{ name: 'u', ...fields, targets: targets.map(([target, weight]) => ({ target, weight })) }] });
  const loaded = loadConfigText(text, '/tmp/tollgate-balancer-test/gw.yaml', bundledPlugins);
  if (!loaded.ok) throw new Error(loaded.errors.map(String).join('\n'));
  return { upstream: loaded.config.upstreams[0], targets: loaded.config.targets };
}

function balancerOf(fields: Record<string, unknown>, targets: [string, number][]): Balancer {
  const { upstream, targets: list } = upstreamOf(fields, targets);
  return new Balancer(upstream, list);
}

/** One request's first pick (its target kept busy, as a request in progress). */
function pickOne(b: Balancer, hash = ''): string | null {
  const picked = b.pick(newHandle(), hash);
  return typeof picked === 'string' ? null : picked.address;
}

function countPicks(b: Balancer, n: number, hash: (i: number) => string = () => ''): Record<string, number> {
  const counts: Record<string, number> = {};
  for (let i = 1; i <= n; i++) {
    const address = pickOne(b, hash(i));
    if (address) counts[address] = (counts[address] ?? 0) + 1;
  }
  return counts;
}

const down = (b: Balancer, address: string) => b.setAvailable(b.find(address)!, false);
const up = (b: Balancer, address: string) => b.setAvailable(b.find(address)!, true);

describe('health (01-generic_spec)', () => {
  for (const algorithm of ['round-robin', 'consistent-hashing', 'least-connections', 'latency']) {
    test(`${algorithm}: empty is unhealthy; below and above the threshold`, () => {
      assert.equal(balancerOf({ algorithm }, []).healthy, false);
      assert.equal(balancerOf({ algorithm }, [['127.0.0.1:8000', 0]]).healthy, false, 'all weight 0: nothing to give');
      const b = balancerOf({ algorithm, healthchecks: { threshold: 50 } }, [['127.0.0.1:8000', 100], ['127.0.0.2:8000', 100], ['127.0.0.3:8000', 100]]);
      assert.equal(b.healthy, true);
      down(b, '127.0.0.2:8000');
      assert.equal(b.healthy, true, '66% available > 50%');
      down(b, '127.0.0.3:8000');
      assert.equal(b.healthy, false, '33% available');
      assert.equal(b.pick(newHandle(), 'x'), 'unhealthy');
      up(b, '127.0.0.2:8000');
      assert.equal(b.healthy, true);
      assert.deepEqual(b.weight(), { total: 300, unavailable: 100, available: 200 });
    });
  }

  test('with every target down there is no peer, whatever the threshold', () => {
    const b = balancerOf({}, [['127.0.0.1:8000', 100]]);
    down(b, '127.0.0.1:8000');
    assert.equal(b.pick(newHandle(), ''), 'unhealthy');
  });
});

describe('round-robin (04-round_robin_spec)', () => {
  test('gets an IP address and port number; round-robin', () => {
    const b = balancerOf({}, [['1.2.3.4:123', 100], ['5.6.7.8:321', 50]]);
    assert.deepEqual(countPicks(b, 30), { '1.2.3.4:123': 20, '5.6.7.8:321': 10 });
  });

  test('skips unhealthy addresses', () => {
    const b = balancerOf({}, [['1.2.3.4:123', 100], ['5.6.7.8:321', 50]]);
    down(b, '1.2.3.4:123');
    assert.deepEqual(countPicks(b, 30), { '5.6.7.8:321': 30 });
  });

  test('weights 10, 10, 5: every five requests 2, 2, 1', () => {
    const b = balancerOf({}, [['10.0.0.1:1', 10], ['10.0.0.2:2', 10], ['10.0.0.3:3', 5]]);
    for (let round = 0; round < 4; round++) assert.deepEqual(countPicks(b, 5), { '10.0.0.1:1': 2, '10.0.0.2:2': 2, '10.0.0.3:3': 1 });
  });

  test('weight 0 takes nothing; huge coprime weights keep their proportions in a bounded wheel', () => {
    assert.deepEqual(countPicks(balancerOf({}, [['10.0.0.1:1', 1], ['10.0.0.2:2', 0]]), 5), { '10.0.0.1:1': 5 });
    const b = balancerOf({}, [['10.0.0.1:1', 65535], ['10.0.0.2:2', 65534], ['10.0.0.3:3', 65533]]);
    const counts = countPicks(b, 65536);
    for (const n of Object.values(counts)) assert.ok(Math.abs(n - 65536 / 3) < 10, JSON.stringify(counts));
  });

  test('a retry goes to another target; after all failed, round them again', () => {
    const b = balancerOf({}, [['10.0.0.1:1', 1], ['10.0.0.2:2', 1], ['10.0.0.3:3', 1]]);
    const handle = newHandle();
    const tried: string[] = [];
    for (let i = 0; i < 6; i++) {
      const t = b.pick(handle, '') as TargetState;
      tried.push(t.address);
      b.endTry(handle, true);
    }
    assert.equal(new Set(tried.slice(0, 3)).size, 3);
    assert.equal(new Set(tried.slice(3)).size, 3);
  });
});

describe('consistent-hashing (03-consistent_hashing_spec)', () => {
  test('the continuum is the one Kong builds: xxhash32 of "<ip>::<port> <n>"', () => {
    assert.equal(xxhash32(''), 0x02cc5d05);
    assert.equal(xxhash32('abc'), 0x32d153ff);
    assert.equal(xxhash32('Nobody inspects the spammish repetition'), 0xe2293b2f);
  });

  test('gets an address by weight; one value always the same address', () => {
    const b = balancerOf({ hash_on: 'header', hash_on_header: 'h', slots: 1000 }, [['1.2.3.4:123', 10], ['5.6.7.8:321', 5]]);
    const counts = countPicks(b, 1500, (n) => String(n));
    assert.ok(counts['1.2.3.4:123'] > 900 && counts['1.2.3.4:123'] < 1100, JSON.stringify(counts));
    assert.ok(counts['5.6.7.8:321'] > 450 && counts['5.6.7.8:321'] < 550, JSON.stringify(counts));
    assert.equal(Object.keys(countPicks(b, 15, () => '6')).length, 1);
  });

  test('skips unhealthy addresses', () => {
    const b = balancerOf({ hash_on: 'header', hash_on_header: 'h', slots: 1000 }, [['1.2.3.4:123', 100], ['5.6.7.8:321', 50]]);
    down(b, '1.2.3.4:123');
    assert.deepEqual(countPicks(b, 160, (n) => String(n)), { '5.6.7.8:321': 160 });
  });

  test('evaluate the change in the continuum: adding targets moves few values', () => {
    const fields = { hash_on: 'header', hash_on_header: 'h', slots: 5000 };
    const five: [string, number][] = [1, 2, 3, 4, 5].map((i) => [`10.0.0.${i}:${i}`, 100]);
    const pickAll = (b: Balancer) => Array.from({ length: 10000 }, (_, n) => pickOne(b, String(n + 1)));
    const res1 = pickAll(balancerOf(fields, five));
    const res2 = pickAll(balancerOf(fields, [...five, ['10.0.0.6:6', 100]]));
    const res3 = pickAll(balancerOf(fields, [...five, ['10.0.0.6:6', 100], ['10.0.0.7:7', 100], ['10.0.0.8:8', 100]]));
    const changed = (a: (string | null)[], b: (string | null)[]) => a.filter((x, i) => x !== b[i]).length / 100;
    assert.ok(changed(res1, res2) < 20, `5 → 6 targets moved ${changed(res1, res2)}%`);
    assert.ok(changed(res1, res3) < 40, `5 → 8 targets moved ${changed(res1, res3)}%`);
    assert.ok(changed(res2, res3) < 25, `6 → 8 targets moved ${changed(res2, res3)}%`);
  });

  test('the order targets are declared in has no effect; a low weight still gets a point', () => {
    const fields = { hash_on: 'header', hash_on_header: 'h', slots: 1000 };
    const a = balancerOf(fields, [['10.0.0.1:80', 100], ['10.0.0.2:80', 100], ['10.0.0.3:80', 100]]);
    const b = balancerOf(fields, [['10.0.0.3:80', 100], ['10.0.0.1:80', 100], ['10.0.0.2:80', 100]]);
    for (let n = 0; n < 200; n++) assert.equal(pickOne(a, `v${n}`), pickOne(b, `v${n}`));
    const skewed = balancerOf(fields, [['10.0.0.1:80', 65535], ['10.0.0.2:123', 1]]);
    assert.ok(countPicks(skewed, 1000, (n) => String(n))['10.0.0.1:80'] > 900);
  });

  test('a retry goes to the next usable target on the continuum', () => {
    const b = balancerOf({ hash_on: 'header', hash_on_header: 'h' }, [['10.0.0.1:1', 1], ['10.0.0.2:2', 1]]);
    const handle = newHandle();
    const first = (b.pick(handle, 'same') as TargetState).address;
    b.endTry(handle, true);
    const second = (b.pick(handle, 'same') as TargetState).address;
    assert.notEqual(first, second);
  });
});

describe('least-connections (02-least_connections_spec)', () => {
  const fields = { algorithm: 'least-connections' };
  const two: [string, number][] = [['20.20.20.20:80', 20], ['50.50.50.50:80', 50]];

  test('honours weights', () => {
    assert.deepEqual(countPicks(balancerOf(fields, two), 70), { '20.20.20.20:80': 20, '50.50.50.50:80': 50 });
  });

  test('first returns top weights, on a 0-connection balancer', () => {
    const b = balancerOf(fields, two);
    assert.deepEqual([pickOne(b), pickOne(b), pickOne(b)], ['50.50.50.50:80', '50.50.50.50:80', '20.20.20.20:80']);
  });

  test("doesn't use unavailable addresses, uses re-enabled ones again", () => {
    const b = balancerOf(fields, two);
    down(b, '20.20.20.20:80');
    assert.deepEqual(countPicks(b, 70), { '50.50.50.50:80': 70 });
    up(b, '20.20.20.20:80');
    assert.deepEqual(countPicks(b, 70), { '20.20.20.20:80': 40, '50.50.50.50:80': 30 });
  });

  const three: [string, number][] = [['20.20.20.20:80', 20], ['50.50.50.50:80', 50], ['70.70.70.70:80', 70]];

  test('retrying does not return already failed addresses, and releases the previous connection', () => {
    const b = balancerOf(fields, three);
    const handle = newHandle();
    const tried = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const t = b.pick(handle, '') as TargetState;
      assert.ok(!tried.has(t.address));
      tried.add(t.address);
      b.endTry(handle, true);
    }
    assert.deepEqual(b.targets.map((t) => t.connections), [0, 0, 0]);
  });

  test('retries, after all addresses failed, restart with previously failed ones', () => {
    const b = balancerOf(fields, three);
    const handle: PickHandle = newHandle();
    const tried: Record<string, number> = {};
    for (let i = 0; i < 6; i++) {
      const t = b.pick(handle, '') as TargetState;
      tried[t.address] = (tried[t.address] ?? 0) + 1;
      b.endTry(handle, true);
    }
    assert.deepEqual(tried, { '20.20.20.20:80': 2, '50.50.50.50:80': 2, '70.70.70.70:80': 2 });
  });

  test('release() gives the connection back', () => {
    const b = balancerOf(fields, two);
    const handle = newHandle();
    b.pick(handle, '');
    assert.equal(b.targets[1].connections, 1);
    b.endTry(handle, false);
    assert.equal(b.targets[1].connections, 0);
  });
});

describe('latency (06-latency_spec)', () => {
  function latencyOf(targets: [string, number][]) {
    let clock = 1_000_000;
    const { upstream, targets: list } = upstreamOf({ algorithm: 'latency' }, targets);
    const states = list.map((t) => new TargetState(t));
    const algorithm = new Latency(states, () => clock);
    const advance = (ms: number) => (clock += ms);
    return { upstream, states, algorithm, advance };
  }
  const two: [string, number][] = [['20.20.20.20:80', 20], ['50.50.50.50:80', 20]];

  test('selects the low latency target', () => {
    const { states, algorithm, advance } = latencyOf(two);
    for (const [t, ms] of [[states[0], 200], [states[1], 400]] as const) {
      algorithm.observe(t, ms);
      advance(10);
      algorithm.observe(t, ms);
    }
    const counts: Record<string, number> = {};
    for (let i = 0; i < 70; i++) {
      const t = algorithm.pick(newHandle())!;
      counts[t.address] = (counts[t.address] ?? 0) + 1;
    }
    assert.deepEqual(counts, { '20.20.20.20:80': 70 });
  });

  test('first returns one, after its latency is known returns the other', () => {
    const { algorithm, advance } = latencyOf(two);
    const first = algorithm.pick(newHandle())!;
    algorithm.observe(first, 10_000);
    advance(10);
    algorithm.observe(first, 10_000);
    const second = algorithm.pick(newHandle())!;
    assert.notEqual(second.address, first.address);
  });

  test("doesn't use unavailable addresses; retries end once every target failed", () => {
    const b = balancerOf({ algorithm: 'latency' }, two);
    down(b, '50.50.50.50:80');
    assert.deepEqual(countPicks(b, 70), { '20.20.20.20:80': 70 });
    up(b, '50.50.50.50:80');
    const handle = newHandle();
    b.pick(handle, '');
    b.endTry(handle, true);
    b.pick(handle, '');
    b.endTry(handle, true);
    assert.equal(b.pick(handle, ''), 'none');
  });
});

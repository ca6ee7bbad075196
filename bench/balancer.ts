/**
 * The balancer's cost: a small GET through a service whose host names an upstream of three targets
 * (round-robin), against an upstream of one target and a plain service (no upstream). The three
 * targets are three ports of one upstream process, so every row has the same upstream capacity and
 * the difference is the gateway's own work. Ratios are to the one-target upstream (aim ≥ 0.9).
 */
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts', ['3'], 3);
  const targets = upstream.urls.map((u) => new URL(u).host);
  const tollgate = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'] },
      services: [
        { name: 'plain', url: upstream.urls[0], routes: [{ name: 'plain', paths: ['/plain'] }] },
        { name: 'one', host: 'one-target', routes: [{ name: 'one', paths: ['/one'] }] },
        { name: 'three', host: 'three-targets', routes: [{ name: 'three', paths: ['/three'] }] },
      ],
      upstreams: [
        { name: 'one-target', targets: [{ target: targets[0] }] },
        { name: 'three-targets', targets: targets.map((target) => ({ target })) },
      ],
    },
    2,
  );
  const proxy = tollgate.urls[0];
  const pid = tollgate.process.pid;
  try {
    // Alternating rounds, best of each: the load generator, the upstream and the gateway share the CPUs.
    const measure = { one: () => load({ url: `${proxy}/one/hello`, pid }), three: () => load({ url: `${proxy}/three/hello`, pid }), plain: () => load({ url: `${proxy}/plain/hello`, pid }) };
    const rounds: Record<keyof typeof measure, LoadResult[]> = { one: [], three: [], plain: [] };
    for (let round = 0; round < 2; round++) for (const key of ['one', 'three', 'plain'] as const) rounds[key].push(await measure[key]());
    const best = (key: keyof typeof measure) => rounds[key].reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    printTable('Balancer: small GET, 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the one-target upstream; aim ≥ 0.9 for three targets)', [
      ['upstream, one target', best('one')],
      ['upstream, three targets (round-robin)', best('three')],
      ['plain service, no upstream', best('plain')],
    ], best('one'));
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

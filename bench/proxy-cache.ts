/**
 * proxy-cache's hits: the same small GET answered from the cache (the upstream not asked) against the
 * route without the plugin (a proxied round trip) and straight to the upstream; the issue aims at a hit
 * faster than the upstream round trip. One gateway process, as `proxy`; alternating rounds, best of each.
 */
import { bestOfAlternating, load, machineLoad, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const target = upstream.urls[0];
  const tollgate = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, worker_processes: 1 },
      services: [
        { name: 'open', url: target, routes: [{ name: 'open', paths: ['/open'] }] },
        { name: 'cached', url: target, routes: [{ name: 'cached', paths: ['/cached'] }], plugins: [{ name: 'proxy-cache', config: { strategy: 'memory' } }] },
      ],
    },
    2,
  );
  const [proxy] = tollgate.urls;
  const pid = tollgate.process.pid;
  try {
    const first = await fetch(`${proxy}/cached/hello`);
    await first.arrayBuffer();
    if (first.headers.get('x-cache-status') !== 'Miss') throw new Error(`the first request was not a Miss: ${first.headers.get('x-cache-status')}`);
    const [open, hit] = await bestOfAlternating([() => load({ url: `${proxy}/open/hello`, pid }), () => load({ url: `${proxy}/cached/hello`, pid })]);
    const rows: [string, LoadResult][] = [
      ['tollgate, no plugins (upstream round trip)', open],
      ['proxy-cache hit (no upstream)', hit],
      ['direct to upstream', await load({ url: `${target}/hello`, pid: upstream.process.pid })],
    ];
    printTable('proxy-cache: small GET, 50 keep-alive connections, 5 s, best of 2 alternating rounds (CPU of the serving process; ratio to the route without plugin; aim: a hit faster than the round trip)', rows, rows[0][1]);
    console.log(`(machine: ${machineLoad()})`);
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

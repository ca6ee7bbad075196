/**
 * The rate-limiting plugin's cost (policy local, limits high enough never to refuse): the same route shape
 * with and without the plugin, alternating rounds, best of each (the issue aims at a ratio ≥ 0.85). Beside
 * them, the counts kept in the store and admitted by compare-and-set: the cluster policy on one process, and
 * on a node of two worker processes both policies (local: the node's counters in the primary's memory;
 * cluster: the primary's LevelDB, over IPC).
 * With PostgreSQL, two nodes on one database, loaded at once, the cluster policy counting over both.
 * Every request of a run has one identifier (one client address): the worst case for the compare-and-set,
 * each round of a process admitting the requests that waited for it.
 */
import { postgresSkipReason, startPostgres } from '../test/helpers/postgres.ts';
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

const LIMITS = { second: 1e9, hour: 1e12 };

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const target = upstream.urls[0];
  const config = (workers: number) => ({
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, worker_processes: workers },
    services: [
      { name: 'open', url: target, routes: [{ name: 'open', paths: ['/open'] }] },
      { name: 'limited', url: target, routes: [{ name: 'limited', paths: ['/limited'] }], plugins: [{ name: 'rate-limiting', config: { ...LIMITS, limit_by: 'ip' } }] },
      { name: 'cluster', url: target, routes: [{ name: 'cluster', paths: ['/cluster'] }], plugins: [{ name: 'rate-limiting', config: { ...LIMITS, limit_by: 'ip', policy: 'cluster' } }] },
    ],
  });
  const tollgate = await startTollgate(config(1), 2);
  const proxy = tollgate.urls[0];
  const pid = tollgate.process.pid;
  try {
    const rounds: [LoadResult, LoadResult][] = [];
    for (let round = 0; round < 2; round++) rounds.push([await load({ url: `${proxy}/open/hello`, pid }), await load({ url: `${proxy}/limited/hello`, pid })]);
    const best = (i: 0 | 1) => rounds.map((r) => r[i]).reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    const rows: [string, LoadResult][] = [
      ['same route shape, no plugin', best(0)],
      ['rate-limiting, policy local (2 periods, by ip)', best(1)],
      ['rate-limiting, policy cluster (compare-and-set in the store)', await load({ url: `${proxy}/cluster/hello`, pid })],
    ];
    printTable('rate-limiting: small GET, 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the route without plugin; aim ≥ 0.85 for local)', rows, rows[0][1]);
    await tollgate.stop();
    const node = await startTollgate(config(2), 2);
    try {
      const url = node.urls[0];
      const targets: [string, string][] = [
        ['2 workers, no plugin', `${url}/open/hello`],
        ['2 workers, policy local (the node counters in the primary)', `${url}/limited/hello`],
        ['2 workers, policy cluster (compare-and-set in the store, owned by the primary)', `${url}/cluster/hello`],
      ];
      const results: LoadResult[][] = targets.map(() => []);
      for (let round = 0; round < 2; round++) for (const [i, [, target]] of targets.entries()) results[i].push(await load({ url: target }));
      const workerRows = targets.map(([name], i): [string, LoadResult] => [
        name,
        results[i].reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a)),
      ]);
      printTable('rate-limiting on a node of 2 worker processes, LevelDB, best of 2 alternating rounds (ratio to the route without plugin)', workerRows, workerRows[0][1]);
    } finally {
      await node.stop();
    }
    await twoPostgresNodes(config(1));
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

/** Both nodes loaded at once (25 connections each); their requests per second added. */
async function twoPostgresNodes(config: { gateway: Record<string, unknown>; services: unknown[] }): Promise<void> {
  const skip = postgresSkipReason();
  if (skip) return console.log(`\n## rate-limiting on two PostgreSQL nodes: ${skip}`);
  const pg = await startPostgres();
  const onDatabase = { ...config, gateway: { ...config.gateway, ...pg.settings({ pg_schema: 'bench_rate_limiting' }) } };
  const nodes = [await startTollgate(onDatabase, 2), await startTollgate(onDatabase, 2)];
  try {
    const both = async (path: string): Promise<LoadResult> => {
      const [a, b] = await Promise.all(nodes.map((node) => load({ url: node.urls[0] + path, connections: 25 })));
      return {
        ...a,
        requestsPerSecond: a.requestsPerSecond + b.requestsPerSecond,
        p50: Math.max(a.p50, b.p50),
        p99: Math.max(a.p99, b.p99),
        errors: a.errors + b.errors,
        non2xx: a.non2xx + b.non2xx,
      };
    };
    const rows: [string, LoadResult][] = [
      ['2 nodes, no plugin', await both('/open/hello')],
      ['2 nodes, policy cluster (compare-and-set in PostgreSQL)', await both('/cluster/hello')],
    ];
    printTable('rate-limiting on two nodes of one PostgreSQL, loaded at once, one identifier (ratio to the route without plugin)', rows, rows[0][1]);
  } finally {
    await Promise.all(nodes.map((node) => node.stop()));
    await pg.stop();
  }
}

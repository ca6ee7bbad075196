/**
 * The logging plugins' cost: the same route shape without a plugin, with http-log (batches of 100 to a
 * local receiver, the queue on disk) and with file-log (a temp file). Each logged request builds Kong's
 * log entry and queues or writes it after the answer; the issue aims at ≥ 0.85 of the plain route for
 * http-log. The gateway runs as a child process.
 */
import { join } from 'node:path';
import { tempDir } from '../test/helpers/gateway.ts';
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

function benchConfig(upstream: string, receiver: string, logFile: string): Record<string, any> {
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
    services: [
      { name: 'open', url: upstream, routes: [{ name: 'open', paths: ['/open'] }] },
      {
        name: 'http-logged', url: upstream,
        routes: [{ name: 'http-logged', paths: ['/http-logged'], plugins: [{ name: 'http-log', config: { http_endpoint: `${receiver}/logs`, queue: { max_batch_size: 100 } } }] }],
      },
      { name: 'file-logged', url: upstream, routes: [{ name: 'file-logged', paths: ['/file-logged'], plugins: [{ name: 'file-log', config: { path: logFile } }] }] },
    ],
  };
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  // The bench upstream answers any request with a 200: a log server that takes everything.
  const receiver = await startChild('servers/upstream.ts');
  const tollgate = await startTollgate(benchConfig(upstream.urls[0], receiver.urls[0], join(tempDir('tollgate-bench-log-'), 'access.log')), 2);
  const [proxy] = tollgate.urls;
  try {
    const pid = tollgate.process.pid;
    const at = (path: string) => () => load({ url: `${proxy}${path}/hello`, pid });
    const [open, httpLogged, fileLogged] = [at('/open'), at('/http-logged'), at('/file-logged')];
    // Alternating rounds, best of each: the load generator, the upstream and the gateway share the CPUs.
    const rounds: LoadResult[][] = [];
    for (let round = 0; round < 2; round++) rounds.push([await open(), await httpLogged(), await fileLogged()]);
    const best = (i: number) => rounds.map((r) => r[i]).reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    const rows: [string, LoadResult][] = [
      ['same route shape, no plugin', best(0)],
      ['http-log, batches of 100 to a local receiver', best(1)],
      ['file-log, a local file', best(2)],
    ];
    printTable('logging plugins: GET, 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the route without plugin; aim ≥ 0.85 for http-log)', rows, rows[0][1]);
  } finally {
    await Promise.all([upstream.stop(), receiver.stop(), tollgate.stop()]);
  }
}

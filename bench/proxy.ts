/**
 * The core's proxy overhead: a small GET straight to the upstream, through two bare reference
 * forwarders (node-http-proxy with a keep-alive agent; an undici Pool), and through Tollgate with no
 * plugins. Ratios are to the bare http-proxy forwarder.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { tempDir } from '../test/helpers/gateway.ts';
import { GATEWAY_NODE_FLAGS, load, printTable, startChild, type Child, type LoadResult } from './lib.ts';

/** Starts a Tollgate child process on `config` (a gateway.yaml object) and returns its listener URLs. */
export async function startTollgate(config: Record<string, any>, listenerCount: number): Promise<Child> {
  const dir = tempDir('tollgate-bench-');
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify({ _format_version: '3.0', ...config, gateway: { data_dir: join(dir, 'data'), log_level: 'info', ...config.gateway } }));
  // The same node flags as `npm start`; the access log is on (written to a file): part of the cost measured.
  return startChild('../bin/tollgate.js', ['start', '--config', file], listenerCount, GATEWAY_NODE_FLAGS);
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const target = upstream.urls[0];
  const httpProxy = await startChild('servers/http-proxy-forwarder.ts', [target]);
  const undici = await startChild('servers/undici-forwarder.ts', [target]);
  const tollgate = await startTollgate(
    {
      // One process, as each forwarder is: per-process overhead (`cluster` measures worker_processes: auto).
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], worker_processes: 1 },
      services: [{ name: 'bench', url: target, routes: [{ name: 'bench', paths: ['/'] }] }],
    },
    2,
  );
  try {
    const rows: [string, LoadResult][] = [];
    rows.push(['direct to upstream', await load({ url: target + '/hello', pid: upstream.process.pid })]);
    rows.push(['bare http-proxy (keep-alive agent)', await load({ url: httpProxy.urls[0] + '/hello', pid: httpProxy.process.pid })]);
    rows.push(['bare undici Pool', await load({ url: undici.urls[0] + '/hello', pid: undici.process.pid })]);
    rows.push(['tollgate, no plugins', await load({ url: tollgate.urls[0] + '/hello', pid: tollgate.process.pid })]);
    printTable('Proxy: small GET, 50 keep-alive connections, 5 s (CPU of the serving process; ratio of req/s to bare http-proxy)', rows, rows[1][1]);
  } finally {
    await Promise.all([upstream.stop(), httpProxy.stop(), undici.stop(), tollgate.stop()]);
  }
}

/**
 * The authentication plugins' cost: key-auth requests with a valid key against the same route shape
 * without the plugin (the issue aims at ≥ 0.85, as oauth2 reaches), keys refused (one repeated, and a
 * fresh one every request: each is a digest and a map miss, never a store read), and basic-auth with a
 * known caller (its PBKDF2 hash derived once, then remembered). The gateway runs as a child process.
 */
import { randomBytes } from 'node:crypto';
import { bestOfAlternating, load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

/** Consumers with keys beside the one used: the lookup is a map hit among many. */
const OTHER_CONSUMERS = 10_000;

function benchConfig(upstream: string): Record<string, any> {
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
    services: [
      { name: 'open', url: upstream, routes: [{ name: 'open', paths: ['/open'] }] },
      { name: 'keyed', url: upstream, routes: [{ name: 'keyed', paths: ['/keyed'], plugins: [{ name: 'key-auth' }] }] },
      { name: 'basic', url: upstream, routes: [{ name: 'basic', paths: ['/basic'], plugins: [{ name: 'basic-auth' }] }] },
    ],
    consumers: [
      { username: 'bench', keyauth_credentials: [{ key: 'bench-key' }] },
      ...Array.from({ length: OTHER_CONSUMERS }, (_, i) => ({ username: `consumer-${i}`, keyauth_credentials: [{ key: `key-${i}-${randomBytes(8).toString('hex')}` }] })),
    ],
  };
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const tollgate = await startTollgate(benchConfig(upstream.urls[0]), 2);
  const [proxy, admin] = tollgate.urls;
  try {
    await fetch(`${admin}/consumers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'basic-bench' }) });
    const created = await fetch(`${admin}/consumers/basic-bench/basic-auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'basic-bench', password: 'bench-password' }),
    });
    if (created.status !== 201) throw new Error(`basic-auth credential: ${created.status} ${await created.text()}`);
    const basic = `Basic ${Buffer.from('basic-bench:bench-password').toString('base64')}`;

    // CPU per request of the gateway process as well: on a shared machine it varies less than req/s.
    const pid = tollgate.process.pid;
    const open = () => load({ url: `${proxy}/open/hello`, pid });
    const keyed = () => load({ url: `${proxy}/keyed/hello`, headers: { apikey: 'bench-key' }, pid });
    const [plain, withPlugin] = await bestOfAlternating([open, keyed]);
    const rows: [string, LoadResult][] = [
      ['same route shape, no plugin', plain],
      ['key-auth, valid key (header)', withPlugin],
      ['key-auth, valid key (query)', await load({ url: `${proxy}/keyed/hello?apikey=bench-key`, pid })],
      ['key-auth, one bad key repeated (401)', await load({ url: `${proxy}/keyed/hello`, headers: { apikey: 'not-a-key' } })],
      ['key-auth, a new bad key each request (401)', await loadWithFreshBadKeys(`${proxy}/keyed/hello`)],
      ['basic-auth, known caller (PBKDF2 hash remembered)', await load({ url: `${proxy}/basic/hello`, headers: { authorization: basic }, pid })],
    ];
    printTable(`key-auth and basic-auth: GET, 50 keep-alive connections, 5 s, ${OTHER_CONSUMERS + 1} keyed consumers, best of 2 alternating rounds (ratio to the route without plugin; aim ≥ 0.85 for key-auth)`, rows, rows[0][1]);
    console.log('(401 rows count as non-2xx by design: they measure how fast bad keys are refused.)');
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

async function loadWithFreshBadKeys(url: string): Promise<LoadResult> {
  const { default: autocannon } = await import('autocannon');
  const options = { url, connections: 50, duration: 5, requests: [{ setupRequest: (req: any) => ({ ...req, headers: { ...req.headers, apikey: randomBytes(24).toString('base64url') } }) }] };
  const r = await autocannon(options as any);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

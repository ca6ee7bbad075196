/**
 * The oauth2 plugin's cost: protected requests with a valid bearer token versus the same route shape
 * without the plugin (the ratio the issue aims at: ≥ 0.85), requests with bad tokens (one repeated,
 * and a fresh one every request), token issuance (client_credentials, plain and PBKDF2-hashed secret), and
 * token issuance while anonymous callers flood the token endpoint with wrong secrets of hashed clients
 * (PBKDF2 once ran on libuv's threads, which the store's writes wait for too).
 * The gateway runs as a child process; token requests use plain HTTP from a trusted proxy address with
 * `X-Forwarded-Proto: https` (accept_http_if_already_terminated), so TLS cost stays out of the figures.
 */
import { randomBytes } from 'node:crypto';
import { request } from '../test/helpers/gateway.ts';
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

const OAUTH = {
  enable_client_credentials: true,
  accept_http_if_already_terminated: true,
  token_expiration: 3600,
  scopes: ['read'],
  provision_key: 'bench-provision-key',
};
const TOKEN_HEADERS = { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-proto': 'https' };
/** Hashed-secret clients the flood guesses at, in turn. */
const FLOOD_CLIENTS = 20;

function benchConfig(upstream: string): Record<string, any> {
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], trusted_ips: ['127.0.0.1/32'], access_log: false },
    services: [
      { name: 'open', url: upstream, routes: [{ name: 'open', paths: ['/open'] }] },
      { name: 'protected', url: upstream, routes: [{ name: 'protected', paths: ['/protected'], plugins: [{ name: 'oauth2', config: OAUTH }] }] },
    ],
    consumers: [
      {
        username: 'bench',
        oauth2_credentials: [
          { name: 'Bench', client_id: 'bench-app', client_secret: 'bench-secret' },
          { name: 'Bench hashed', client_id: 'bench-hashed', client_secret: 'bench-secret', hash_secret: true },
          ...Array.from({ length: FLOOD_CLIENTS }, (_, i) => ({ name: `Flooded ${i}`, client_id: `flooded-${i}`, client_secret: 'bench-secret', hash_secret: true })),
        ],
      },
    ],
  };
}

function tokenBody(clientId: string): string {
  return `grant_type=client_credentials&client_id=${clientId}&client_secret=bench-secret&scope=read`;
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const tollgate = await startTollgate(benchConfig(upstream.urls[0]), 2);
  const proxy = tollgate.urls[0];
  try {
    const issued = await request(`${proxy}/protected/oauth2/token`, { method: 'POST', headers: TOKEN_HEADERS, body: tokenBody('bench-app') });
    if (issued.status !== 200) throw new Error(`token request failed: ${issued.status} ${issued.text}`);
    const token = issued.json().access_token as string;

    // Two alternating rounds, best of each: on a small machine the load generator, the upstream and the
    // gateway share the CPUs, and a single run of each is mostly noise.
    const open = () => load({ url: `${proxy}/open/hello` });
    const valid = () => load({ url: `${proxy}/protected/hello`, headers: { authorization: `Bearer ${token}` } });
    const rounds: [LoadResult, LoadResult][] = [];
    for (let round = 0; round < 2; round++) rounds.push([await open(), await valid()]);
    const best = (i: 0 | 1) => rounds.map((r) => r[i]).reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    const proxied: [string, LoadResult][] = [];
    proxied.push(['same route shape, no plugin', best(0)]);
    proxied.push(['oauth2, valid bearer token', best(1)]);
    proxied.push(['oauth2, one bad token repeated (401)', await load({ url: `${proxy}/protected/hello`, headers: { authorization: 'Bearer not-a-valid-token' } })]);
    proxied.push(['oauth2, a new bad token each request (401)', await loadWithFreshBadTokens(`${proxy}/protected/hello`)]);
    printTable('oauth2: protected GET, 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the route without plugin; aim ≥ 0.85 for the valid token)', proxied, proxied[0][1]);
    console.log('(401 rows count as non-2xx by design: they measure how fast bad tokens are refused.)');

    const issuance: [string, LoadResult][] = [];
    issuance.push(['client_credentials, plain secret', await load({ url: `${proxy}/protected/oauth2/token`, method: 'POST', headers: TOKEN_HEADERS, body: tokenBody('bench-app') })]);
    issuance.push(['client_credentials, PBKDF2-hashed secret', await load({ url: `${proxy}/protected/oauth2/token`, method: 'POST', headers: TOKEN_HEADERS, body: tokenBody('bench-hashed'), seconds: 3 })]);
    printTable('oauth2: token issuance (tokens/s), 50 connections', issuance);

    const plainIssuance = () => load({ url: `${proxy}/protected/oauth2/token`, method: 'POST', headers: TOKEN_HEADERS, body: tokenBody('bench-app'), connections: 10 });
    const flooded: [string, LoadResult][] = [['client_credentials, plain secret, alone', await plainIssuance()]];
    const [during, flood] = await Promise.all([plainIssuance(), floodWrongSecrets(`${proxy}/protected/oauth2/token`, 7)]);
    flooded.push(['the same, during the flood', during], ['the flood: wrong secrets of 20 hashed clients', flood]);
    printTable('oauth2: token issuance (10 connections) while 50 connections send wrong secrets of hashed clients', flooded, flooded[0][1]);
    console.log('(The flood rows are refusals by design: 400, then 429 once a client is locked, or 503 when the hashing queue is full.)');
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

/** Every request carries a token never seen before: each one is a cache miss and a store read. */
async function loadWithFreshBadTokens(url: string): Promise<LoadResult> {
  const { default: autocannon } = await import('autocannon');
  const options = {
    url,
    connections: 50,
    duration: 5,
    requests: [{ setupRequest: (req: any) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${randomBytes(24).toString('base64url')}` } }) }],
  };
  const r = await autocannon(options as any);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

/** Wrong secrets for the flooded clients in turn, as fast as 50 connections go, for `seconds`. */
async function floodWrongSecrets(url: string, seconds: number): Promise<LoadResult> {
  const { default: autocannon } = await import('autocannon');
  let next = 0;
  const body = () => `grant_type=client_credentials&client_id=flooded-${next++ % FLOOD_CLIENTS}&client_secret=${randomBytes(12).toString('base64url')}`;
  const options = { url, method: 'POST', headers: TOKEN_HEADERS, connections: 50, duration: seconds, requests: [{ setupRequest: (req: any) => ({ ...req, body: body() }) }] };
  const r = await autocannon(options as any);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

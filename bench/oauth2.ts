/**
 * The oauth2 plugin's cost: protected requests with a valid bearer token versus the same route shape
 * without the plugin (the ratio the issue aims at: ≥ 0.85), requests with bad tokens (one repeated,
 * and a fresh one every request), token issuance (client_credentials, plain and PBKDF2-hashed secret), and
 * token issuance while anonymous callers flood the token endpoint with wrong secrets of hashed clients
 * (PBKDF2 once ran on libuv's threads, which the store's writes wait for too). On PostgreSQL, two nodes:
 * the latency of a token check on the node that did not issue the token, its first request (a store read)
 * and the cached ones after it.
 * The gateway runs as a child process; token requests use plain HTTP from a trusted proxy address with
 * `X-Forwarded-Proto: https` (accept_http_if_already_terminated), so TLS cost stays out of the figures.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { request } from '../test/helpers/gateway.ts';
import { postgresSkipReason, startPostgres } from '../test/helpers/postgres.ts';
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
    flooded.push(['the same, during the flood', during], ['the flood: wrong secrets of 20 hashed clients, each from another address', flood]);
    printTable('oauth2: token issuance (10 connections) while 50 connections send wrong secrets of hashed clients', flooded, flooded[0][1]);
    console.log('(The flood rows are refusals by design: 400, then 429 once a client is past its bound, or 503 when the hashing queue is full.)');
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
  await tokenChecksOnAnotherNode();
}

/** Tokens issued on node A, each then used on node B: once (not cached there yet) and again (cached). */
const CROSS_NODE_TOKENS = 2000;
const CACHED_USES = 5;

async function tokenChecksOnAnotherNode(): Promise<void> {
  const title = 'oauth2: token check latency on a node that did not issue the token (two nodes on PostgreSQL)';
  const skip = postgresSkipReason();
  if (skip) {
    console.log(`\n## ${title}: ${skip}`);
    return;
  }
  const postgres = await startPostgres({ fsync: true });
  const upstream = await startChild('servers/upstream.ts');
  const config = benchConfig(upstream.urls[0]);
  config.gateway = { ...config.gateway, ...postgres.settings({ pg_schema: 'bench_oauth2' }) };
  const a = await startTollgate(config, 2);
  const b = await startTollgate(config, 2);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const tokens = await issueTokens(a.urls[0], CROSS_NODE_TOKENS);
    const first: number[] = [];
    const cached: number[] = [];
    for (const token of tokens) {
      first.push(await timedCheck(agent, b.urls[0], token));
      for (let i = 0; i < CACHED_USES; i++) cached.push(await timedCheck(agent, b.urls[0], token));
    }
    console.log(`\n## ${title}`);
    console.log(`${CROSS_NODE_TOKENS} tokens issued on A; each used on B once, then ${CACHED_USES} times more; one keep-alive connection, one request at a time`);
    console.log('| request on B | requests | p50 ms | p99 ms |');
    console.log('|---|---|---|---|');
    for (const [name, samples] of [['first use of the token (store read)', first], ['later uses (cached)', cached]] as const) {
      console.log(`| ${name} | ${samples.length} | ${percentile(samples, 50).toFixed(2)} | ${percentile(samples, 99).toFixed(2)} |`);
    }
  } finally {
    agent.destroy();
    await Promise.all([upstream.stop(), a.stop(), b.stop()]);
    await postgres.stop();
  }
}

/** `count` client_credentials tokens from `proxy`, 20 requests at a time. */
async function issueTokens(proxy: string, count: number): Promise<string[]> {
  const tokens: string[] = [];
  while (tokens.length < count) {
    const replies = await Promise.all(
      Array.from({ length: Math.min(20, count - tokens.length) }, () =>
        request(`${proxy}/protected/oauth2/token`, { method: 'POST', headers: TOKEN_HEADERS, body: tokenBody('bench-app') }),
      ),
    );
    for (const reply of replies) {
      if (reply.status !== 200) throw new Error(`token request failed: ${reply.status} ${reply.text}`);
      tokens.push(reply.json().access_token);
    }
  }
  return tokens;
}

/** Milliseconds for one protected GET with `token`; throws unless it is accepted. */
function timedCheck(agent: http.Agent, proxy: string, token: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(`${proxy}/protected/hello`, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`token refused on B: ${res.statusCode}`))));
    });
    req.on('error', reject);
  });
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
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

/**
 * Wrong secrets for the flooded clients in turn, as fast as 50 connections go, for `seconds`, each from
 * another client address (X-Real-IP from the trusted proxy): guessers spread over many addresses, the
 * case where no address gets locked and every guess costs a derivation until a client's far higher bound.
 */
async function floodWrongSecrets(url: string, seconds: number): Promise<LoadResult> {
  const { default: autocannon } = await import('autocannon');
  let next = 0;
  const setupRequest = (req: any) => {
    const n = next++;
    const body = `grant_type=client_credentials&client_id=flooded-${n % FLOOD_CLIENTS}&client_secret=${randomBytes(12).toString('base64url')}`;
    return { ...req, body, headers: { ...req.headers, 'x-real-ip': `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` } };
  };
  const options = { url, method: 'POST', headers: TOKEN_HEADERS, connections: 50, duration: seconds, requests: [{ setupRequest }] };
  const r = await autocannon(options as any);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

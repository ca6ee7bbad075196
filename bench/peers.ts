/**
 * Tollgate against the Node gateways a user would pick instead, and nginx as the reference: one process
 * each (nginx: one worker), the same upstream, in turns (every target once a round, several rounds,
 * medians), a small GET on 50 keep-alive connections. CPU per request of each target's process tree, and
 * its ratio to the Node floor: a node:http server streaming through an undici Pool, hop-by-hop headers
 * dropped, nothing else (servers/undici-forwarder.ts). The peers live in bench/peers/ with their own
 * package.json (old packages with deprecation warnings stay out of the main install), installed here
 * on first use.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { load, medianResult, printTable, startChild, startNginx, which, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

const ROUNDS = 3;
const SECONDS = 5;
const CONNECTIONS = 50;
const PEERS_DIR = join(import.meta.dirname, 'peers');
const PEER_PACKAGES = ['@fastify/http-proxy', 'fastify', 'fast-gateway', 'express-gateway'];

interface Target {
  name: string;
  url: string;
  pid: number;
  headers?: Record<string, string>;
  stop(): Promise<void>;
}

/** `npm ci` in bench/peers/ (from its lockfile) unless every peer is already there. */
function installPeers(): void {
  if (PEER_PACKAGES.every((name) => existsSync(join(PEERS_DIR, 'node_modules', name, 'package.json')))) return;
  console.log(`\n(peers: installing the peer gateways into ${PEERS_DIR}/node_modules: npm ci --prefix bench/peers)`);
  const npm = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', PEERS_DIR], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (npm.status !== 0) throw new Error(`npm ci --prefix bench/peers exited with ${npm.status}`);
}

async function nodeTarget(name: string, script: string, upstream: string): Promise<Target> {
  const child = await startChild(script, [upstream]);
  return { name, url: child.urls[0], pid: child.process.pid!, stop: child.stop };
}

async function tollgateTarget(name: string, upstream: string, plugins: Record<string, unknown>[], consumers: Record<string, unknown>[] = []): Promise<Target> {
  const child = await startTollgate(
    {
      // One process, as each peer is; the access log on, as `npm start` runs (proxy.ts).
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], worker_processes: 1 },
      services: [{ name: 'bench', url: upstream, routes: [{ name: 'bench', paths: ['/'] }], plugins }],
      consumers,
    },
    2,
  );
  return { name, url: child.urls[0], pid: child.process.pid!, stop: child.stop };
}

async function nginxTarget(upstream: string): Promise<Target> {
  const nginx = await startNginx('1', 'location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }', `upstream up { server ${upstream.slice('http://'.length)}; keepalive 64; }`);
  return { name: 'nginx, 1 worker (reference)', url: nginx.url, pid: nginx.process.pid!, stop: nginx.stop };
}

export async function run(): Promise<void> {
  installPeers();
  const upstream = await startChild('servers/upstream.ts');
  const target = upstream.urls[0];
  const targets: Target[] = [];
  try {
    targets.push(await nodeTarget('Node floor: node:http + undici Pool.stream()', 'servers/undici-forwarder.ts', target));
    targets.push(await nodeTarget('http-proxy (keep-alive agent)', 'servers/http-proxy-forwarder.ts', target));
    targets.push(await nodeTarget('@fastify/http-proxy', 'peers/fastify-http-proxy.js', target));
    targets.push(await nodeTarget('fast-gateway', 'peers/fast-gateway.js', target));
    targets.push(await nodeTarget('express-gateway (proxy only)', 'peers/express-gateway.js', target));
    targets.push(await tollgateTarget('tollgate, no plugins', target, []));
    const keyed = await tollgateTarget(
      'tollgate, key-auth + rate-limiting',
      target,
      [{ name: 'key-auth' }, { name: 'rate-limiting', config: { second: 1e9, hour: 1e12, limit_by: 'consumer' } }],
      [{ username: 'bench', keyauth_credentials: [{ key: 'bench-key' }] }],
    );
    targets.push({ ...keyed, headers: { apikey: 'bench-key' } });
    const nginx = which('nginx');
    if (nginx) targets.push(await nginxTarget(target));

    const measure = (t: Target) => load({ url: t.url + '/hello', headers: t.headers, pid: t.pid, seconds: SECONDS, connections: CONNECTIONS });
    // One unrecorded round first: in a trial run without it every Node target's first round cost more CPU per request than its later ones, up to 4× (likely the JIT still compiling).
    for (const t of targets) await measure(t);
    const rounds = new Map<Target, LoadResult[]>(targets.map((t) => [t, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const t of targets) rounds.get(t)!.push(await measure(t));
    }
    const rows: [string, LoadResult][] = targets.map((t) => [t.name, medianResult(rounds.get(t)!)]);
    printTable(`peers: small GET, ${CONNECTIONS} keep-alive connections, a warm-up round then ${ROUNDS} rounds of ${SECONDS} s in turns, medians; one process each, one Node upstream (CPU of the target's process tree; ratio of req/s to the Node floor)`, rows, rows[0][1]);
    const floorCpu = rows[0][1].cpuPerRequest!;
    console.log('CPU per request against the Node floor (rounds: CPU µs/req):');
    for (const [t, r] of targets.map((t, i) => [t, rows[i][1]] as const)) {
      console.log(`  ${t.name}: ${(r.cpuPerRequest! / floorCpu).toFixed(2)}× (${rounds.get(t)!.map((round) => round.cpuPerRequest!.toFixed(1)).join(', ')})`);
    }
    if (!nginx) console.log('  nginx: skipped (not installed; Debian: apt-get install nginx)');
  } finally {
    await Promise.all([upstream.stop(), ...targets.map((t) => t.stop())]);
  }
}

/**
 * Latency the gateway adds at half load (issue 33: aim p99 added ≤ 1 ms). Capacity first, closed-loop
 * (autocannon, as load() does), then an open-loop client at 50 % of the gateway's capacity: requests are
 * scheduled at fixed intervals whatever the answers, and each latency is counted from the request's
 * *scheduled* send time, so a stall delays every request it holds up and is not hidden by a client that
 * waits (coordinated omission). Direct to the upstream, through Tollgate with no plugins and with key-auth
 * (one process), in turns, all at the same rate. `LATENCY_SECONDS` (default 60) is each target's measured
 * time, split over the turns.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { load, machineLoad, startChild } from './lib.ts';
import { startTollgate } from './proxy.ts';

const SECONDS = Number(process.env.LATENCY_SECONDS ?? 60);
const TURNS = 2;
const WARM_UP_SECONDS = 2;
/** Enough connections that a stall of a few ms at the rate never waits for a free one in the client. */
const CONNECTIONS = 128;
/** The client's timer wakes up this often and sends every request whose time has come. */
const TICK_MS = 1;
const KEY = { apikey: 'bench-key' };

interface Target {
  name: string;
  url: string;
  headers?: Record<string, string>;
}

interface OpenLoopResult {
  /** Latencies in ms from the scheduled send time to the end of the response, sorted. */
  sorted: Float64Array;
  errors: number;
}

/**
 * Sends `rate` GETs a second for `seconds` over a keep-alive Pool, each at its scheduled time (or as soon
 * after as the timer allows: the wait counts in its latency), and waits for every answer.
 */
function openLoop(target: Target, rate: number, seconds: number): Promise<OpenLoopResult> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin, { connections: CONNECTIONS });
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const latencies = new Float64Array(total);
  let errors = 0;
  let answered = 0;
  return new Promise((done) => {
    const start = performance.now();
    const finish = () => {
      if (++answered < total) return;
      void pool.close();
      done({ sorted: latencies.sort(), errors });
    };
    const send = (i: number) => {
      const scheduled = start + i * interval;
      pool.request({ path: url.pathname + url.search, method: 'GET', headers: target.headers }).then(
        async (res) => {
          await res.body.dump();
          if (res.statusCode !== 200) errors++;
          latencies[i] = performance.now() - scheduled;
          finish();
        },
        () => {
          errors++;
          latencies[i] = performance.now() - scheduled;
          finish();
        },
      );
    };
    let sent = 0;
    const tick = () => {
      const due = Math.min(total, Math.floor((performance.now() - start) / interval) + 1);
      while (sent < due) send(sent++);
      if (sent < total) setTimeout(tick, TICK_MS);
    };
    tick();
  });
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function merged(results: OpenLoopResult[]): OpenLoopResult {
  const all = new Float64Array(results.reduce((n, r) => n + r.sorted.length, 0));
  let offset = 0;
  for (const r of results) {
    all.set(r.sorted, offset);
    offset += r.sorted.length;
  }
  return { sorted: all.sort(), errors: results.reduce((n, r) => n + r.errors, 0) };
}

const QUANTILES = [50, 99, 99.9];
const ms = (value: number) => value.toFixed(2);

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const tollgate = await startTollgate(
    {
      // One process, the access log on (to a file): the proxy bench's gateway, plus a key-auth route.
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], worker_processes: 1 },
      services: [
        {
          name: 'bench',
          url: upstream.urls[0],
          routes: [
            { name: 'open', paths: ['/open'] },
            { name: 'keyed', paths: ['/keyed'], plugins: [{ name: 'key-auth' }] },
          ],
        },
      ],
      consumers: [{ username: 'bench', keyauth_credentials: [{ key: KEY.apikey }] }],
    },
    2,
  );
  const proxy = tollgate.urls[0];
  const targets: Target[] = [
    { name: 'direct to upstream', url: `${upstream.urls[0]}/hello` },
    { name: 'tollgate, no plugins', url: `${proxy}/open/hello` },
    { name: 'tollgate, key-auth', url: `${proxy}/keyed/hello`, headers: KEY },
  ];
  try {
    const loadBefore = machineLoad();
    const capacity: number[] = [];
    for (const target of targets) {
      const pid = target.url.startsWith(proxy) ? tollgate.process.pid : upstream.process.pid;
      const r = await load({ url: target.url, headers: target.headers, pid });
      if (r.errors + r.non2xx > 0) throw new Error(`${target.name}: ${r.errors} errors, ${r.non2xx} non-2xx under closed-loop load`);
      capacity.push(r.requestsPerSecond);
    }
    // Every target at the same rate: half the slower gateway route's capacity.
    const rate = Math.round(Math.min(capacity[1], capacity[2]) / 2);
    const turns: OpenLoopResult[][] = targets.map(() => []);
    for (let turn = 0; turn < TURNS; turn++) {
      for (const [i, target] of targets.entries()) {
        await openLoop(target, rate, WARM_UP_SECONDS);
        turns[i].push(await openLoop(target, rate, SECONDS / TURNS));
      }
    }
    const results = turns.map(merged);
    const direct = results[0];
    console.log(`\n## latency: open-loop GETs at ${rate} req/s (half the slower gateway route's closed-loop capacity), ${SECONDS} s per target in ${TURNS} alternating turns, measured from the scheduled send time`);
    console.log('| target | capacity req/s (closed loop) | requests | p50 ms | p99 ms | p99.9 ms | max ms | errors | added p50 / p99 / p99.9 ms |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    results.forEach((r, i) => {
      const at = QUANTILES.map((q) => percentile(r.sorted, q));
      const added = i === 0 ? '–' : QUANTILES.map((q, j) => ms(at[j] - percentile(direct.sorted, q))).join(' / ');
      console.log(`| ${targets[i].name} | ${Math.round(capacity[i])} | ${r.sorted.length} | ${at.map(ms).join(' | ')} | ${ms(r.sorted[r.sorted.length - 1])} | ${r.errors} | ${added} |`);
    });
    console.log('(added = the gateway\'s quantile minus the direct one; aim p99 added ≤ 1 ms. The client, upstream and gateway share the machine.)');
    console.log(`(machine: ${loadBefore} before the runs, ${machineLoad()} after; latencies of seconds mean a target fell behind the rate for a while)`);
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();

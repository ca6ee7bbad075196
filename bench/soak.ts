/**
 * Memory over a long run at full load (issue 33: aim < 5 % RSS growth between the end of the warm-up and
 * the end). Two soaks, each on a gateway with the default process model (a worker per core, the primary
 * owning LevelDB):
 * - proxy: GETs through key-auth + metering-and-billing (events into the gateway's own metering store,
 *   counted by a meter), autocannon with 50 keep-alive connections;
 * - ingest: batches of 100 events POSTed to the metering API, 8 in flight.
 * Every 10 s the RSS of every process of the node (/proc) is sampled, with the node's V8 heap and external
 * memory from the admin API's /metrics (summed over its processes), to tell what grows.
 * Runs only when named (`npm run bench -- soak`): 10 minutes per soak; `SOAK_SECONDS` shortens it.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { request } from '../test/helpers/gateway.ts';
import { machineLoad, processTree, startChild, type Child } from './lib.ts';
import { METERING, batchBodies, drive, meteringRoute } from './metering.ts';
import { startTollgate } from './proxy.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
/** RSS is compared from here on: before, V8 and LevelDB are still growing to their working size. */
const WARM_UP_SECONDS = Math.min(60, Math.floor(SECONDS / 3));
const SAMPLE_SECONDS = 10;
const KEY = { apikey: 'bench-key' };

interface Sample {
  second: number;
  /** RSS in MiB by process, the root (the primary) first. */
  rss: Map<number, number>;
  /** The node's V8 heap used and external memory (ArrayBuffers, LevelDB's buffers handed to JS), in MiB. */
  heapUsed: number;
  external: number;
}

const MIB = 1024 * 1024;

function rssMiB(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return line ? Number(line[1]) / 1024 : undefined;
  } catch {
    return undefined; // The process ended meanwhile.
  }
}

/** A series of the admin API's /metrics (the node's, summed over its processes), in MiB. */
function metricMiB(text: string, name: string): number {
  return text.split('\n').filter((l) => l.startsWith(name + ' ') || l.startsWith(name + '{')).reduce((n, l) => n + Number(l.split(' ').pop()), 0) / MIB;
}

async function sample(gateway: Child, second: number): Promise<Sample> {
  const rss = new Map<number, number>();
  for (const pid of processTree(gateway.process.pid!)) {
    const value = rssMiB(pid);
    if (value !== undefined) rss.set(pid, value);
  }
  const metrics = (await request(`${gateway.urls[1]}/metrics`)).text;
  return { second, rss, heapUsed: metricMiB(metrics, 'tollgate_nodejs_heap_size_used_bytes'), external: metricMiB(metrics, 'tollgate_nodejs_external_memory_bytes') };
}

/** Samples the gateway every SAMPLE_SECONDS while `loadFor` runs. */
async function soak(gateway: Child, loadFor: (seconds: number) => Promise<string>): Promise<{ samples: Sample[]; summary: string }> {
  const samples: Sample[] = [await sample(gateway, 0)];
  const started = Date.now();
  const sampling = setInterval(() => {
    void sample(gateway, Math.round((Date.now() - started) / 1000)).then((s) => samples.push(s));
  }, SAMPLE_SECONDS * 1000);
  const loadBefore = machineLoad();
  const summary = `${await loadFor(SECONDS)}; machine: ${loadBefore} at the start, ${machineLoad()} at the end`;
  clearInterval(sampling);
  samples.push(await sample(gateway, Math.round((Date.now() - started) / 1000)));
  return { samples, summary };
}

const total = (s: Sample) => [...s.rss.values()].reduce((a, b) => a + b, 0);
const mib = (value: number) => value.toFixed(1);
const growth = (from: number, to: number) => `${to >= from ? '+' : ''}${(((to - from) / from) * 100).toFixed(1)} %`;

function report(title: string, summary: string, samples: Sample[]): void {
  const pids = [...samples[0].rss.keys()];
  const warm = samples.find((s) => s.second >= WARM_UP_SECONDS) ?? samples[samples.length - 1];
  const end = samples[samples.length - 1];
  console.log(`\n## soak, ${title}: ${SECONDS} s, ${summary}; RSS after ${warm.second} s of warm-up against the end`);
  console.log('| process | RSS after warm-up MiB | RSS at the end MiB | growth |');
  console.log('|---|---|---|---|');
  pids.forEach((pid, i) => {
    const [from, to] = [warm.rss.get(pid), end.rss.get(pid)];
    const name = i === 0 ? `primary (${pid})` : `child ${pid} (a worker)`;
    console.log(`| ${name} | ${from === undefined ? '–' : mib(from)} | ${to === undefined ? '–' : mib(to)} | ${from && to ? growth(from, to) : '–'} |`);
  });
  console.log(`| all processes | ${mib(total(warm))} | ${mib(total(end))} | ${growth(total(warm), total(end))} |`);
  console.log(`| V8 heap used (node) | ${mib(warm.heapUsed)} | ${mib(end.heapUsed)} | ${growth(warm.heapUsed, end.heapUsed)} |`);
  console.log(`| external memory (node) | ${mib(warm.external)} | ${mib(end.external)} | ${growth(warm.external, end.external)} |`);
  console.log(`series, every ${SAMPLE_SECONDS} s (s: RSS MiB per process, primary first | heap used | external):`);
  console.log(samples.map((s) => `${s.second}: ${pids.map((p) => mib(s.rss.get(p) ?? 0)).join('+')} | ${mib(s.heapUsed)} | ${mib(s.external)}`).join('\n'));
}

export async function proxySoak(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const gateway = await startTollgate(
    {
      // No access log: ten minutes at full load would write gigabytes of it.
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, log_level: 'warn' },
      services: [{ name: 'bench', url: upstream.urls[0], routes: [{ name: 'soak', paths: ['/soak'], plugins: [{ name: 'key-auth' }, { name: 'metering-and-billing' }] }] }],
      routes: [meteringRoute()],
      consumers: [{ username: 'bench', keyauth_credentials: [{ key: KEY.apikey }] }],
      meters: [{ key: 'requests', name: 'Requests', event_type: 'kong.api_request', aggregation: 'count', dimensions: { route: '$.route_name' } }],
    },
    2,
  );
  try {
    const { samples, summary } = await soak(gateway, async (seconds) => {
      const r = await autocannon({ url: `${gateway.urls[0]}/soak/hello`, headers: KEY, connections: 50, duration: seconds });
      return `${Math.round(r.requests.average)} req/s, ${r.errors + r.timeouts} errors, ${r.non2xx} non-2xx`;
    });
    report('proxy + key-auth + metering-and-billing (local store), 50 keep-alive connections', summary, samples);
  } finally {
    await Promise.all([upstream.stop(), gateway.stop()]);
  }
}

export async function ingestSoak(): Promise<void> {
  const gateway = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, log_level: 'warn' },
      routes: [meteringRoute()],
      meters: [
        { key: 'requests', name: 'Requests', event_type: 'request', aggregation: 'count', dimensions: { method: '$.method' } },
        { key: 'bytes', name: 'Bytes', event_type: 'request', aggregation: 'sum', value_property: '$.bytes', dimensions: { route: '$.route' } },
      ],
    },
    2,
  );
  try {
    const { samples, summary } = await soak(gateway, async (seconds) => {
      const r = await drive(`${gateway.urls[0]}${METERING}/events`, 8, 'application/cloudevents-batch+json', batchBodies(100), seconds);
      return `${Math.round(r.rps * 100)} events/s, ${r.failed} failed requests`;
    });
    report('metering ingest, batches of 100 events, 8 in flight', summary, samples);
  } finally {
    await gateway.stop();
  }
}

export async function run(): Promise<void> {
  await proxySoak();
  await ingestSoak();
}

if (import.meta.url === `file://${process.argv[1]}`) await run();

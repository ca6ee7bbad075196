/** Shared bench plumbing: child processes on loopback, autocannon runs, printing. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { tempDir } from '../test/helpers/gateway.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** Node flags `npm start` runs the gateway with (package.json): a larger young generation, measured 20–30% more batched ingest. */
export const GATEWAY_NODE_FLAGS = ['--max-semi-space-size=64'];

export interface Child {
  process: ChildProcess;
  /** Every `listening on URL` line the child printed, in order. */
  urls: string[];
  stop(): Promise<void>;
}

/**
 * Starts `node script args…` (through tsx for a .ts script; one process, so signals reach it) and waits until it has
 * printed `count` "listening on URL" lines. Its stdout goes to a file, as a deployed gateway's log
 * does: drained through a pipe, it would cost the load generator in this process, not the child.
 */
export async function startChild(script: string, args: string[] = [], count = 1, nodeArgs: string[] = []): Promise<Child> {
  const output = join(tempDir('tollgate-bench-out-'), 'stdout.log');
  const fd = openSync(output, 'w');
  const child = spawn(process.execPath, [...nodeArgs, ...(script.endsWith('.ts') ? ['--import', 'tsx'] : []), resolve(import.meta.dirname, script), ...args], { cwd: ROOT, stdio: ['ignore', fd, 'inherit'] });
  closeSync(fd);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  let early = false;
  void exited.then(() => (early = true));
  for (;;) {
    const urls = [...readFileSync(output, 'utf8').matchAll(/listening on (\S+)/g)].map((m) => m[1]);
    if (urls.length >= count) {
      return {
        process: child,
        urls,
        stop: () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          return exited;
        },
      };
    }
    if (early) throw new Error(`${script} exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface LoadResult {
  requestsPerSecond: number;
  /** CPU time (user + system) the server process spent per request, in µs, when its pid was given. */
  cpuPerRequest?: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

export interface LoadOptions {
  url: string;
  seconds?: number;
  connections?: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** The server's process: its CPU time per request (with its children's) is measured too (steadier than req/s on a small machine). */
  pid?: number;
}

/** Keep-alive load for a fixed duration (after a short warm-up). */
export async function load(options: LoadOptions): Promise<LoadResult> {
  const base = { url: options.url, connections: options.connections ?? 50, method: options.method ?? 'GET', headers: options.headers, body: options.body };
  await autocannon({ ...base, duration: 1 });
  const cpuBefore = options.pid === undefined ? 0 : treeCpuMs(options.pid);
  const r = await autocannon({ ...base, duration: options.seconds ?? 5 });
  const cpuPerRequest = options.pid === undefined ? undefined : ((treeCpuMs(options.pid) - cpuBefore) * 1000) / r.requests.total;
  return { requestsPerSecond: r.requests.average, cpuPerRequest, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

const CLOCK_TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>/stat after the command name: [11] + [12] its own CPU, [13] + [14] its waited-for children's, in clock ticks. */
export function statFields(pid: number | 'self'): string[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
}

/** A process and all its descendants alive now (Linux /proc): a gateway with several worker processes serves from its children. */
export function processTree(pid: number): number[] {
  const tree: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop()!;
    try {
      const children = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      tree.push(p);
      if (children) stack.push(...children.split(' ').map(Number));
    } catch {
      // The process ended meanwhile.
    }
  }
  return tree;
}

/** CPU time (user + system) of a process and all its descendants so far, in ms, from /proc. */
export function treeCpuMs(pid: number): number {
  let total = 0;
  for (const p of processTree(pid)) {
    try {
      const fields = statFields(p);
      total += (Number(fields[11]) + Number(fields[12])) * (1000 / CLOCK_TICKS_PER_SECOND);
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

/** The machine's 1-minute load average against its CPUs: on a shared machine, what the figures beside it competed with. */
export function machineLoad(): string {
  return `load average ${loadavg()[0].toFixed(1)} on ${availableParallelism()} CPUs`;
}

/**
 * Each of `measures` run `rounds` times in turn, the best (most req/s) of each kept: the load generator, the
 * upstream and the gateway share the CPUs, so rounds side by side see the same disturbances.
 */
export async function bestOfAlternating(measures: (() => Promise<LoadResult>)[], rounds = 2): Promise<LoadResult[]> {
  const best: (LoadResult | undefined)[] = measures.map(() => undefined);
  for (let round = 0; round < rounds; round++) {
    for (const [i, measure] of measures.entries()) {
      const result = await measure();
      if (!best[i] || result.requestsPerSecond > best[i].requestsPerSecond) best[i] = result;
    }
  }
  return best as LoadResult[];
}

export function printTable(title: string, rows: [string, LoadResult][], baseline?: LoadResult): void {
  const cpu = rows.some(([, r]) => r.cpuPerRequest !== undefined);
  console.log(`\n## ${title}`);
  console.log('| target | req/s | p50 ms | p99 ms | errors | non-2xx |' + (cpu ? ' CPU µs/req |' : '') + (baseline ? ' ratio |' : ''));
  console.log('|---|---|---|---|---|---|' + (cpu ? '---|' : '') + (baseline ? '---|' : ''));
  for (const [name, r] of rows) {
    const cpuCell = cpu ? ` ${r.cpuPerRequest === undefined ? '' : r.cpuPerRequest.toFixed(1)} |` : '';
    const ratio = baseline ? ` ${(r.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)} |` : '';
    const ms = (value: number) => String(Number(value.toFixed(2)));
    console.log(`| ${name} | ${Math.round(r.requestsPerSecond)} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.errors} | ${r.non2xx} |${cpuCell}${ratio}`);
  }
}

/** Medians over rounds, field by field: one round disturbed by the machine's other work does not move the figure. */
export function medianResult(list: LoadResult[]): LoadResult {
  const mid = (f: (r: LoadResult) => number) => {
    const sorted = list.map(f).sort((a, b) => a - b);
    const half = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
  };
  return {
    requestsPerSecond: mid((r) => r.requestsPerSecond),
    cpuPerRequest: mid((r) => r.cpuPerRequest ?? 0),
    p50: mid((r) => r.p50),
    p99: mid((r) => r.p99),
    errors: mid((r) => r.errors),
    non2xx: mid((r) => r.non2xx),
  };
}

/** The path of `command` when installed. */
export function which(command: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface Nginx {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** nginx in the foreground in a directory of its own (`server`: the body of its one server block). */
export async function startNginx(workers: string, server: string, http = ''): Promise<Nginx> {
  const dir = tempDir('tollgate-bench-nginx-');
  mkdirSync(join(dir, 'logs'));
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes ${workers};\ndaemon off;\npid ${dir}/nginx.pid;\nerror_log ${dir}/logs/error.log;\n` +
      (process.getuid?.() === 0 ? 'user root;\n' : '') +
      `events { worker_connections 4096; }\nhttp {\n access_log off;\n client_body_temp_path ${dir}/b; proxy_temp_path ${dir}/p; fastcgi_temp_path ${dir}/f; uwsgi_temp_path ${dir}/u; scgi_temp_path ${dir}/s;\n keepalive_requests 1000000;\n ${http}\n server { listen 127.0.0.1:${port}; ${server} }\n}\n`,
  );
  const child = spawn(which('nginx')!, ['-p', dir, '-c', conf], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((r) => {
      const s: Socket = connect(port, '127.0.0.1', () => (s.destroy(), r(true))).on('error', () => r(false));
    });
    if (up) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `http://127.0.0.1:${port}`, process: child, stop: () => (child.kill('SIGTERM'), exited) };
}

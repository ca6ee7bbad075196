/** Shared bench plumbing: child processes on loopback, autocannon runs, printing. */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import autocannon from 'autocannon';

const ROOT = resolve(import.meta.dirname, '..');

/** Node flags `npm start` runs the gateway with (package.json): a larger young generation, measured 20–30% more batched ingest. */
export const GATEWAY_NODE_FLAGS = ['--max-semi-space-size=64'];

export interface Child {
  process: ChildProcess;
  /** Every `listening on URL` line the child printed, in order. */
  urls: string[];
  stop(): Promise<void>;
}

/** Starts `node --import tsx script args…` (one process, so signals reach it) and waits until it has printed `count` "listening on URL" lines. */
export function startChild(script: string, args: string[] = [], count = 1, nodeArgs: string[] = []): Promise<Child> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', resolve(import.meta.dirname, script), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    const urls: string[] = [];
    const early = (code: number | null) => rej(new Error(`${script} exited with ${code}`));
    child.once('exit', early);
    const onData = (chunk: Buffer) => {
      for (const m of chunk.toString().matchAll(/listening on (\S+)/g)) urls.push(m[1]);
      if (urls.length >= count) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        child.off('exit', early);
        res({
          process: child,
          urls,
          stop: () =>
            new Promise((done) => {
              child.once('exit', () => done());
              child.kill('SIGTERM');
            }),
        });
      }
    };
    child.stdout!.on('data', onData);
  });
}

export interface LoadResult {
  requestsPerSecond: number;
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
}

/** Keep-alive load for a fixed duration (after a short warm-up). */
export async function load(options: LoadOptions): Promise<LoadResult> {
  const base = { url: options.url, connections: options.connections ?? 50, method: options.method ?? 'GET', headers: options.headers, body: options.body };
  await autocannon({ ...base, duration: 1 });
  const r = await autocannon({ ...base, duration: options.seconds ?? 5 });
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

export function printTable(title: string, rows: [string, LoadResult][], baseline?: LoadResult): void {
  console.log(`\n## ${title}`);
  console.log('| target | req/s | p50 ms | p99 ms | errors | non-2xx |' + (baseline ? ' ratio |' : ''));
  console.log('|---|---|---|---|---|---|' + (baseline ? '---|' : ''));
  for (const [name, r] of rows) {
    const ratio = baseline ? ` ${(r.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)} |` : '';
    console.log(`| ${name} | ${Math.round(r.requestsPerSecond)} | ${r.p50} | ${r.p99} | ${r.errors} | ${r.non2xx} |${ratio}`);
  }
}

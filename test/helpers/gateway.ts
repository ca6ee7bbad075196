/**
 * Test helpers: a real gateway (in-process or as a child process) on loopback ports, a real echo
 * upstream, and a small HTTP/1.1 client that accepts the gateway's self-signed certificate; aroundTests
 * starts such a fixture before the tests of a file (or `describe`) and closes it after them.
 *
 * Worker mode: with TOLLGATE_TEST_WORKERS=N in the environment, startGateway starts a node of N worker
 * processes instead (a child process, as `tollgate start` with `worker_processes: N`), so that a suite
 * written against one process runs unchanged against several sharing the store.
 *
 * PostgreSQL mode: with TOLLGATE_TEST_POSTGRES set to a gateway block's `pg_*` settings (JSON), every
 * gateway whose file names no `database` runs on that PostgreSQL instead of LevelDB, in a schema of its
 * data directory's own (a gateway restarted on the same directory finds its store again).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before } from 'node:test';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { ConfigLoadError } from '../../src/errors.ts';
import { Gateway } from '../../src/gateway.ts';
import { bundledPlugins } from '../../src/plugins.ts';

export interface GatewayUrls {
  /** Plain HTTP/1.1 proxy listener. */
  http: string;
  /** TLS listener with ALPN h2 + http/1.1 (self-signed certificate). */
  https: string;
  /** Plaintext listener: h2c prior knowledge and HTTP/1.1. */
  h2c: string;
  admin: string;
  dataDir: string;
  configFile: string;
}

export interface TestGateway extends GatewayUrls {
  /** The in-process gateway; in worker mode (TOLLGATE_TEST_WORKERS) reading it throws. */
  gateway: Gateway;
  /** Rewrites the config file and reloads (as SIGHUP does); returns whether it was accepted. */
  reload(config: Record<string, any>): Promise<boolean>;
  stop(): Promise<void>;
}

export interface StartOptions {
  dataDir?: string;
}

const DEFAULT_LISTENERS = {
  proxy_listen: ['127.0.0.1:0', '127.0.0.1:0 ssl http2', '127.0.0.1:0 http2'],
  admin_listen: ['127.0.0.1:0'],
};

/** The `pg_*` settings of PostgreSQL mode (see above), or undefined. */
const TEST_POSTGRES: Record<string, unknown> | undefined = process.env.TOLLGATE_TEST_POSTGRES ? JSON.parse(process.env.TOLLGATE_TEST_POSTGRES) : undefined;
/** The store startGateway's gateways run on unless their file names one. */
export const TEST_DATABASE: 'leveldb' | 'postgres' = TEST_POSTGRES ? 'postgres' : 'leveldb';

/** In PostgreSQL mode, a file without `database` runs on the test's PostgreSQL, in its data directory's schema. */
function testDatabase(gateway: Record<string, any> | undefined, dataDir: string): Record<string, unknown> {
  if (!TEST_POSTGRES || gateway?.database !== undefined) return {};
  return { ...TEST_POSTGRES, database: 'postgres', pg_schema: 'suite_' + createHash('sha256').update(dataDir).digest('hex').slice(0, 16) };
}

/** Writes `config` as a gateway.yaml on `dataDir` with the tests' defaults (loopback listeners, silent); returns its path. */
export function writeConfig(config: Record<string, any>, dataDir: string, file?: string): string {
  const full = { _format_version: '3.0', ...config, gateway: { ...DEFAULT_LISTENERS, log_level: 'silent', data_dir: dataDir, ...testDatabase(config.gateway, dataDir), ...config.gateway } };
  const path = file ?? join(tempDir('tollgate-config-'), 'gateway.yaml');
  writeFileSync(path, stringify(full));
  return path;
}

const tempDirs: string[] = [];
/**
 * Spawned gateways still running, each the leader of its own process group: none outlives this process,
 * a node's workers included (a worker whose primary and stdout reader are gone at once may never exit).
 */
const running = new Set<ChildProcess>();
const killRunning = () => {
  for (const child of running) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
};
// When the test file's (or the bench's) process ends: first the gateways go (they write in the data
// directories), then the directories (those of a bench run hold hundreds of MB, and every run would
// leave its own behind).
process.once('exit', () => {
  killRunning();
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // A process of another test still writing there: the system's temp cleaning takes it.
    }
  }
});
// The test runner stops a file that ran out of time with a signal, which skips 'exit'.
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    killRunning();
    process.kill(process.pid, signal);
  });
}

/** A fresh directory under the system's temp dir, removed when this process exits. */
export function tempDir(prefix = 'tollgate-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Worker processes per gateway that startGateway starts (TOLLGATE_TEST_WORKERS), or 0: one in-process gateway. */
export const TEST_WORKERS = testWorkers(process.env.TOLLGATE_TEST_WORKERS);

function testWorkers(setting: string | undefined): number {
  if (setting === undefined || setting === '') return 0;
  const count = Number(setting);
  if (!Number.isInteger(count) || count < 1) throw new Error(`TOLLGATE_TEST_WORKERS: expected a number of worker processes, got '${setting}'`);
  return count;
}

export async function startGateway(config: Record<string, any>, options: StartOptions = {}): Promise<TestGateway> {
  if (TEST_WORKERS > 0) return startWorkerNode(config, options, TEST_WORKERS);
  const dataDir = options.dataDir ?? tempDir();
  const configFile = writeConfig(config, dataDir);
  const gateway = await Gateway.start(configFile, { registry: bundledPlugins });
  const [plain, tls, h2c] = gateway.proxyListeners;
  return {
    gateway,
    http: plain?.url ?? '',
    https: tls?.url ?? '',
    h2c: h2c?.url ?? '',
    admin: gateway.adminListeners[0]?.url ?? '',
    dataDir,
    configFile,
    async reload(next) {
      writeConfig(next, dataDir, configFile);
      return (await gateway.reload()).ok;
    },
    stop: () => gateway.stop(),
  };
}

/** What the primary logs once every worker answered a SIGHUP: reloaded, or kept the configuration. */
const NODE_RELOADED = '"msg":"configuration reloaded on every worker"';
const NODE_KEPT_CONFIG = /"msg":"(?:configuration invalid \(\d+ errors?\): keeping the current one|reload refused: keeping the current configuration)"/g;

/**
 * startGateway's worker mode: a node of `workers` processes, with the in-process TestGateway's shape.
 * Info lines (the primary's outcome of a reload) are needed; the access log is not.
 */
async function startWorkerNode(config: Record<string, any>, options: StartOptions, workers: number): Promise<TestGateway> {
  const withWorkers = (c: Record<string, any>) => ({ ...c, gateway: { access_log: false, ...c.gateway, log_level: 'info', worker_processes: workers } });
  // An invalid file is refused as the in-process start refuses it: with the same error.
  const loaded = await loadConfigFile(writeConfig(withWorkers(config), options.dataDir ?? tempDir()), bundledPlugins);
  if (!loaded.ok) throw new ConfigLoadError(loaded.errors);
  const node = await spawnGateway(withWorkers(config), options);
  const outcomes = () => node.output().split(NODE_RELOADED).length - 1 + (node.output().match(NODE_KEPT_CONFIG)?.length ?? 0);
  let reloading = Promise.resolve(true);
  const reloadOnce = async (next: Record<string, any>) => {
    writeConfig(withWorkers(next), node.dataDir, node.configFile);
    const before = outcomes();
    const reloaded = node.output().split(NODE_RELOADED).length - 1;
    node.kill('SIGHUP');
    while (outcomes() === before) {
      if (node.child.exitCode !== null || node.child.signalCode !== null) throw new Error(`the gateway exited during a reload:\n${node.output()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return node.output().split(NODE_RELOADED).length - 1 > reloaded;
  };
  return {
    get gateway(): Gateway {
      throw new Error('TestGateway.gateway: the in-process gateway does not exist in worker mode (TOLLGATE_TEST_WORKERS); drive the node over HTTP');
    },
    http: node.http,
    https: node.https,
    h2c: node.h2c,
    admin: node.admin,
    dataDir: node.dataDir,
    configFile: node.configFile,
    // One at a time, as the in-process reloads: each SIGHUP's outcome is the next line of the primary.
    reload: (next) => (reloading = reloading.then(() => reloadOnce(next), () => reloadOnce(next))),
    async stop() {
      if (node.child.exitCode === null && node.child.signalCode === null) node.kill('SIGTERM');
      const code = await node.exited;
      if (code !== 0) throw new Error(`the gateway stopped with exit code ${code}:\n${node.output()}`);
    },
  };
}

export interface SpawnedGateway extends GatewayUrls {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /**
   * Signals the node: its primary (which coordinates its workers), except SIGKILL, which reaches every
   * process of the node at once, as a crash of its machine or `systemctl kill -s KILL` would.
   */
  kill(signal?: NodeJS.Signals): void;
  output(): string;
}

/**
 * The arguments of node that run `tollgate ARGS` as npm's scripts do (package.json): the package's
 * command with node's flags. One process, as a signal sent to it must reach the gateway.
 */
export function tollgateArgs(...args: string[]): string[] {
  return ['--max-semi-space-size=64', resolve(import.meta.dirname, '../../bin/tollgate.js'), ...args];
}

export interface CommandRun {
  code: number | null;
  output: string;
}

/** `tollgate ARGS` run to its end, stdout and stderr together; `killWhen` sends SIGKILL as soon as the output matches it. */
export function runTollgate(args: string[], killWhen?: RegExp): Promise<CommandRun> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, tollgateArgs(...args), { cwd: resolve(import.meta.dirname, '../..'), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk;
      if (killWhen?.test(output)) child.kill('SIGKILL');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('exit', (code) => resolvePromise({ code, output }));
  });
}

/** The gateway as a child process (`tollgate start --config F`), for crash and signal tests. */
export async function spawnGateway(config: Record<string, any>, options: StartOptions = {}): Promise<SpawnedGateway> {
  const dataDir = options.dataDir ?? tempDir();
  const configFile = writeConfig(config, dataDir);
  const child = spawn(process.execPath, tollgateArgs('start', '--config', configFile), {
    cwd: resolve(import.meta.dirname, '../..'),
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own (the node's workers join it): killRunning ends them all.
    detached: true,
  });
  let out = '';
  running.add(child);
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  void exited.then(() => running.delete(child));
  const urls = await new Promise<string[]>((res, rej) => {
    const expected =
      (config.gateway?.proxy_listen ?? DEFAULT_LISTENERS.proxy_listen).length +
      (config.gateway?.admin_listen ?? DEFAULT_LISTENERS.admin_listen).length;
    const onData = (chunk: Buffer) => {
      out += chunk;
      // Over the whole output: a line may arrive in two chunks.
      const urls = [...out.matchAll(/listening on (\S+)/g)].map((m) => m[1]);
      if (urls.length >= expected) res(urls);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c) => (out += c));
    exited.then((code) => rej(new Error(`gateway exited with ${code}: ${out}`)));
  });
  child.stdout!.resume();
  const proxies = urls.slice(0, -1);
  return {
    child,
    http: proxies[0] ?? '',
    https: proxies[1] ?? '',
    h2c: proxies[2] ?? '',
    admin: urls[urls.length - 1],
    dataDir,
    configFile,
    exited,
    kill: (signal = 'SIGTERM') => {
      if (signal !== 'SIGKILL') return void child.kill(signal);
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    },
    output: () => out,
  };
}

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json(): any;
}

export interface RequestOptions {
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: string | Buffer | Record<string, any>;
  /** TLS servername (SNI) to send. */
  servername?: string;
  /** The client's source address, e.g. another loopback address (127.0.0.2) to be another client. */
  localAddress?: string;
}

/** One HTTP/1.1 request (no connection reuse); objects are sent as JSON. */
export function request(url: string, options: RequestOptions = {}): Promise<Reply> {
  const target = new URL(url);
  let body = options.body;
  const headers: OutgoingHttpHeaders = { ...options.headers };
  if (body !== undefined && !Buffer.isBuffer(body) && typeof body !== 'string') {
    body = JSON.stringify(body);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  }
  // Node sends neither Content-Length nor chunked for a GET or DELETE body unless told.
  if (body !== undefined && headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) headers['content-length'] = Buffer.byteLength(body as string | Buffer);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolvePromise, reject) => {
    const req = client.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname + target.search,
        method: options.method ?? 'GET',
        headers,
        agent: false,
        rejectUnauthorized: false,
        servername: options.servername,
        localAddress: options.localAddress,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const buf = Buffer.concat(chunks);
          const text = buf.toString('utf8');
          resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: buf, text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface EchoRequest {
  method: string;
  path: string;
  query: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Upstream {
  url: string;
  port: number;
  requests: EchoRequest[];
  server: http.Server;
  close(): Promise<void>;
}

/** A real upstream answering JSON `{method, path, query, headers, body}` (or `handler`'s answer). */
export async function startUpstream(handler?: http.RequestListener): Promise<Upstream> {
  const requests: EchoRequest[] = [];
  const server = http.createServer(
    handler ??
      ((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
          const [path, query = ''] = (req.url ?? '/').split(/\?(.*)/s);
          const echo = { method: req.method ?? '', path, query, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
          requests.push(echo);
          const payload = JSON.stringify(echo);
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }).end(payload);
        });
      }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    server,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A gateway in front of an echo upstream (startUpstream's), closed together. */
export interface GatewayOnEchoUpstream {
  gw: TestGateway;
  upstream: Upstream;
  close(): Promise<void>;
}

/** Starts an echo upstream, then a gateway on `configFor(upstream.url)`; a gateway that fails to start closes the upstream. */
export async function startGatewayOnEchoUpstream(configFor: (upstreamUrl: string) => Record<string, any>): Promise<GatewayOnEchoUpstream> {
  const upstream = await startUpstream();
  let gw: TestGateway;
  try {
    gw = await startGateway(configFor(upstream.url));
  } catch (err) {
    // A listening upstream would keep the test file alive.
    await upstream.close();
    throw err;
  }
  return {
    gw,
    upstream,
    async close() {
      await gw.stop();
      await upstream.close();
    },
  };
}

/**
 * What `start` gives, for the tests of the enclosing file or `describe`: it is started in their `before` hook, then
 * `setUp` runs on it, and it is closed in their `after` hook. The returned object is empty until then, and takes
 * `start`'s result's own fields (copied, so getters are read once): read it inside tests and hooks only.
 * Setup that needs it goes in `setUp`, not in a `before` of its own: Node 20 runs a file's top-level `before` hooks
 * side by side, each as it is registered.
 */
export function aroundTests<T extends { close(): Promise<void> }>(start: () => Promise<T>, setUp?: (started: T) => Promise<void>): T {
  const started = {} as T;
  before(async () => {
    Object.assign(started, await start());
    await setUp?.(started);
  });
  after(async () => {
    await started.close?.();
  });
  return started;
}

/** startGatewayOnEchoUpstream's gateway and upstream, for the tests of the enclosing file or `describe` (see aroundTests). */
export function gatewayOnEchoUpstreamAroundTests(configFor: (upstreamUrl: string) => Record<string, any>): GatewayOnEchoUpstream {
  return aroundTests(() => startGatewayOnEchoUpstream(configFor));
}

/** Whether a process of this machine is still running (signal 0 checks without signalling). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

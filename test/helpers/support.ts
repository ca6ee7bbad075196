/**
 * Helpers shared by the tests: raw HTTP/1.1 over a socket (for bytes Node's client will not send),
 * upstreams that count their open connections, waiting for a condition (the one polling helper), which
 * workers of a node answered a path, and a
 * gateway started with a test-only plugin registry.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { PluginRegistry } from '../../src/pdk/types.ts';
import { Gateway } from '../../src/gateway.ts';
import { request, startUpstream, tempDir, type Reply, type SpawnedGateway } from './gateway.ts';

export interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server sent, as text. */
  raw: string;
}

/**
 * Sends `bytes` on a fresh connection (TLS with ALPN http/1.1 when `tls`) and reads until the server
 * closes it (or `idleMs` of silence).
 */
export function rawExchange(port: number, bytes: string | Buffer, idleMs = 1500, { tls: overTls = false } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = overTls ? tls.connect({ host: '127.0.0.1', port, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false }) : net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(idleMs, () => socket.destroy());
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', (err) => (chunks.length ? undefined : reject(err)));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.write(bytes);
  });
}

export function parseRaw(raw: string): RawReply {
  const end = raw.indexOf('\r\n\r\n');
  const head = end === -1 ? raw : raw.slice(0, end);
  const [statusLine, ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: end === -1 ? '' : raw.slice(end + 4), raw };
}

/** One raw request with `Connection: close` added; the reply parsed. */
export async function rawRequest(port: number, head: string[], body = ''): Promise<RawReply> {
  const lines = [...head];
  if (!lines.some((l) => /^connection:/i.test(l))) lines.push('Connection: close');
  return parseRaw(await rawExchange(port, lines.join('\r\n') + '\r\n\r\n' + body));
}

export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** What a value is once it passed `Boolean`. */
type Truthy<T> = Exclude<T, undefined | null | false | 0 | ''>;

/**
 * The tests' one polling helper: calls `probe` until `done` holds for what it returns (by default, until
 * that is truthy) and returns that value. After `timeoutMs` it fails, naming what it waited for and the
 * last value seen. The pause between calls grows from 10 ms to 100 ms: a condition about to hold is seen
 * at once, and a long wait does not load the gateway it probes.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs?: number): Promise<Truthy<T>>;
export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs: number, done: (value: T) => boolean): Promise<T>;
export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 5000, done: (value: T) => boolean = Boolean): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let pauseMs = 10; ; pauseMs = Math.min(pauseMs * 2, 100)) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value)?.slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, pauseMs));
  }
}

export interface CountingServer {
  url: string;
  port: number;
  server: http.Server;
  /** Connections open right now. */
  readonly open: number;
  /** Connections ever accepted. */
  readonly accepted: number;
  /** Requests in progress: received and neither answered nor torn down with their connection. */
  readonly active: number;
  close(): Promise<void>;
}

/** An HTTP upstream (startUpstream's, with `handler`) that counts its connections (to prove the gateway leaves none behind). */
export async function countingUpstream(handler: http.RequestListener): Promise<CountingServer> {
  const { url, port, server, close } = await startUpstream(handler);
  let open = 0;
  let accepted = 0;
  let active = 0;
  // Counted from the start: nobody knows the port before it is returned.
  server.on('request', (_req, res) => {
    active++;
    res.once('close', () => active--);
  });
  server.on('connection', (socket) => {
    open++;
    accepted++;
    socket.once('close', () => open--);
  });
  return {
    url,
    port,
    server,
    get open() {
      return open;
    },
    get accepted() {
      return accepted;
    },
    get active() {
      return active;
    },
    close,
  };
}

/** A loopback port nobody listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

export interface RegistryGateway {
  gateway: Gateway;
  http: string;
  admin: string;
  dataDir: string;
  configFile: string;
  /** Rewrites the file and reloads it. */
  reload(config: Record<string, any>): Promise<boolean>;
  stop(): Promise<void>;
}

/** A gateway on a plain listener and an admin listener, with the plugins of `registry` only. */
export async function startWithRegistry(config: Record<string, any>, registry: PluginRegistry): Promise<RegistryGateway> {
  const dataDir = tempDir();
  const configFile = join(tempDir('tollgate-config-'), 'gateway.yaml');
  const write = (c: Record<string, any>) =>
    writeFileSync(
      configFile,
      stringify({
        _format_version: '3.0',
        ...c,
        gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'silent', data_dir: dataDir, ...c.gateway },
      }),
    );
  write(config);
  const gateway = await Gateway.start(configFile, { registry });
  return {
    gateway,
    http: gateway.proxyListeners[0].url,
    admin: gateway.adminListeners[0].url,
    dataDir,
    configFile,
    async reload(next) {
      write(next);
      return (await gateway.reload()).ok;
    },
    stop: () => gateway.stop(),
  };
}

export type { IncomingHttpHeaders };

/** Whether something accepts connections on 127.0.0.1:`port` now. */
export function isListening(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      r(true);
    });
    s.once('error', () => r(false));
  });
}

/** The pids of the workers of a spawned node that wrote access-log lines for `path`. */
export function servingPids(gw: SpawnedGateway, path: string): Set<number> {
  const lines = gw.output().split('\n').filter((l) => l.includes('"type":"access"') && l.includes(path));
  return new Set(lines.map((l) => JSON.parse(l).pid as number));
}

/**
 * Requests for `path`, each on a connection of its own, until both workers of a node of two have
 * answered one (their access log lines): the workers take connections from the shared socket themselves,
 * so which one takes the next is not fixed. Every answer must pass `check` (by default, be a 200).
 */
export async function servedByBoth(gw: SpawnedGateway, path: string, check: (reply: Reply) => void = (r) => assert.equal(r.status, 200, `${path} is served`)): Promise<void> {
  await waitFor(async () => {
    check(await request(gw.http + path));
    return servingPids(gw, path).size === 2;
  }, `both workers to serve ${path}`, 20_000);
}

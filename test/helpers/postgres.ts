/**
 * A throwaway PostgreSQL cluster for tests and benches: `initdb` into a fresh temp directory, started on
 * a free loopback port, with an ordinary role `tollgate` (password authentication over TCP) owning the
 * database `tollgate`, the way an operator would set it up. Nothing of the machine's own PostgreSQL is
 * used. As root, the server runs as the `postgres` user (initdb refuses root).
 *
 * Without PostgreSQL's binaries the tests that need it skip with a message; with
 * TOLLGATE_REQUIRE_POSTGRES=1 (set by .ci/run) that skip is a failure instead.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before } from 'node:test';
import pg from 'pg';

export interface ThrowawayPostgres {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  /** The `gateway:` settings that point a gateway at this cluster (plus `extra`). */
  settings(extra?: Record<string, unknown>): Record<string, unknown>;
  /** Runs SQL as the superuser in the `tollgate` database (over the Unix socket). */
  sql(text: string, values?: unknown[]): Promise<Record<string, any>[]>;
  /** Ends every session of the `tollgate` role (as a network failure or a database restart would). */
  terminateSessions(): Promise<number>;
  /** Stops the server (fast shutdown), keeping its data; `resume` starts it again on the same port. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** `pg_ctl restart -m fast`: every session ends, and the server is back on the same port when it resolves. */
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** fsync on commit (default off: tests kill gateways, not the database; benches turn it on). */
  fsync?: boolean;
}

const REQUIRED = process.env.TOLLGATE_REQUIRE_POSTGRES === '1';
const SERVER_BINARIES = ['initdb', 'pg_ctl', 'postgres'];

/** The directory holding initdb/pg_ctl/postgres: on PATH, or Debian's /usr/lib/postgresql/<version>/bin. */
function binaryDir(): string | undefined {
  const candidates = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(debian, v, 'bin')));
  }
  return candidates.find((dir) => SERVER_BINARIES.every((b) => existsSync(join(dir, b))));
}

function runsAsRoot(): boolean {
  return process.getuid?.() === 0;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  const passwd = existsSync('/etc/passwd') ? readFileSync('/etc/passwd', 'utf8') : '';
  const line = passwd.split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Why the PostgreSQL tests cannot run here, or undefined when they can. Throws where they must run (CI). */
export function postgresSkipReason(): string | undefined {
  let reason: string | undefined;
  if (!binaryDir()) reason = `PostgreSQL's server binaries (${SERVER_BINARIES.join(', ')}) are not installed (Debian: apt-get install postgresql)`;
  else if (runsAsRoot() && !postgresUser()) reason = 'running as root without a `postgres` user to run the server as (initdb refuses root)';
  if (reason && REQUIRED) throw new Error(`TOLLGATE_REQUIRE_POSTGRES=1 but ${reason}`);
  return reason ? `skipped: ${reason}` : undefined;
}

/** Runs a PostgreSQL binary, as the `postgres` user when this process is root. */
function command(bin: string, args: string[]): [string, string[]] {
  const path = join(binaryDir()!, bin);
  return runsAsRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
}

function run(bin: string, args: string[]): Promise<void> {
  const [file, argv] = command(bin, args);
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${bin} ${args.join(' ')} exited with ${code}:\n${out}`))));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Stops the server and removes the directory once `pid` (this process) is gone, however it ends: a
 * test runner that kills a timed-out file with a signal runs no exit handler.
 */
function watchdog(pid: number, dir: string, dataDir: string): void {
  const [file, argv] = command('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate']);
  const stop = [file, ...argv].map((a) => `'${a}'`).join(' ');
  const script = `while kill -0 ${pid} 2>/dev/null; do sleep 1; done; ${stop} >/dev/null 2>&1; rm -rf '${dir}'`;
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
}

export interface PostgresSuite {
  /** The suite's cluster (started before its tests). */
  readonly pg: ThrowawayPostgres;
  /** Stops `stop`'s node after the suite's tests, before the cluster (the last tracked first). */
  track(stop: () => Promise<unknown>): void;
  /** A fresh schema name: nodes on it share a store of their own. */
  schema(prefix: string): string;
}

/** For a describe block of gateway nodes on one throwaway cluster (see PostgresSuite). */
export function postgresForSuite(): PostgresSuite {
  let cluster: ThrowawayPostgres | undefined;
  const stops: (() => Promise<unknown>)[] = [];
  let schemas = 0;
  before(async () => {
    cluster = await startPostgres();
  });
  after(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await cluster?.stop();
  });
  return {
    get pg() {
      if (!cluster) throw new Error('the cluster starts before the suite\'s tests');
      return cluster;
    },
    track: (stop) => void stops.push(stop),
    schema: (prefix) => `${prefix}_${++schemas}`,
  };
}

export async function startPostgres(options: PostgresOptions = {}): Promise<ThrowawayPostgres> {
  const skip = postgresSkipReason();
  if (skip) throw new Error(skip);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-pg-'));
  const dataDir = join(dir, 'data');
  const owner = runsAsRoot() ? postgresUser()! : { uid: userInfo().uid, gid: userInfo().gid };
  chownSync(dir, owner.uid, owner.gid);
  watchdog(process.pid, dir, dataDir);
  await run('initdb', ['-D', dataDir, '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--auth-local=trust', '--auth-host=scram-sha-256', '--no-sync']);
  let port = 0;
  const serverOptions = () =>
    [`-p ${port}`, `-k ${dir}`, "-c listen_addresses='127.0.0.1'", `-c fsync=${options.fsync ? 'on' : 'off'}`, '-c max_connections=300', '-c shared_buffers=64MB'].join(' ');
  const startServer = () => run('pg_ctl', ['start', '-D', dataDir, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', serverOptions()]);
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await startServer();
      break;
    } catch (err) {
      // Another process may have taken the port between our probe and the server's bind.
      if (attempt >= 3) throw err;
    }
  }
  const superuser = async <T>(use: (client: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> => {
    const client = new pg.Client({ host: dir, port, user: 'postgres', database });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  };
  const password = 'tollgate-test-password';
  await superuser(async (c) => {
    await c.query(`CREATE ROLE tollgate LOGIN PASSWORD '${password}' NOSUPERUSER NOCREATEDB NOCREATEROLE`);
    await c.query('CREATE DATABASE tollgate OWNER tollgate');
  });
  let stopped = false;
  const cluster: ThrowawayPostgres = {
    host: '127.0.0.1',
    port,
    user: 'tollgate',
    password,
    database: 'tollgate',
    settings: (extra = {}) => ({ database: 'postgres', pg_host: '127.0.0.1', pg_port: port, pg_user: 'tollgate', pg_password: password, pg_database: 'tollgate', ...extra }),
    sql: (text, values) => superuser(async (c) => (await c.query(text, values)).rows, 'tollgate'),
    terminateSessions: async () =>
      (await cluster.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'tollgate' AND pid <> pg_backend_pid()")).length,
    pause: () => run('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w']),
    resume: startServer,
    restart: () => run('pg_ctl', ['restart', '-D', dataDir, '-m', 'fast', '-w', '-t', '60', '-l', join(dir, 'server.log'), '-o', serverOptions()]),
    async stop() {
      if (stopped) return;
      stopped = true;
      await run('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w']).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  process.once('exit', () => {
    if (stopped) return;
    const [file, argv] = command('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate']);
    spawnSync(file, argv, { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });
  return cluster;
}

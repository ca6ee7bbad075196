/**
 * The shared store: PostgreSQL, for several gateway nodes (and every worker process of each) on one
 * database, with the contract of store.ts:
 * - one table, keys in UTF-8 byte order (`COLLATE "C"`), the same order as LevelDB;
 * - every write call is one statement or one transaction: atomic; a write with `sync` commits with
 *   `synchronous_commit = on` (durable when it resolves), others with `off` (visible to every node at
 *   once, lost only if the database server itself crashes within its WAL writer delay — the same
 *   class as an unsynced LevelDB write);
 * - `commitIf` takes a transaction-scoped advisory lock on every key it reads or writes (in one
 *   global order, so callers never deadlock each other), then checks and writes: two commitIf
 *   calls touching a common key run one after the other on every node; disjoint ones commute;
 * - notices travel over LISTEN/NOTIFY on a connection of their own, which is also watched: when it is
 *   lost, every topic gets `null` at once and again each `db_update_frequency` until it is back, so
 *   no cache outlives the promised delay while notices cannot arrive.
 *
 * PostgreSQL text cannot hold U+0000, which store keys and values may contain: it is escaped with an
 * order-preserving code (U+0001 U+0001 for U+0000, U+0001 U+0002 for U+0001), so keys still sort as
 * their originals do.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { StoreClosedError, StoreUnavailableError } from './errors.ts';
import { checkStrings, NAMESPACE_SEPARATOR, NamespacedStore, type PrefixedRoot } from './namespace.ts';
import { atMost, LocalNotices, SETTLE_TIMEOUT_MS } from './notices.ts';
import { pagedScan } from './order.ts';
import { PostgresJournal, type JournalAccess } from './postgres-journal.ts';
import { runStoreProcedure } from './procedures.ts';
import { lockKey, migrate, schemaNames, type MigrationResult, type SchemaNames } from './postgres-schema.ts';
import { expiryFor, type BatchOp, type Expectation, type Journal, type NoticeListener, type Notices, type PutOptions, type ScanOptions, type Store, type StoreAdapter, type WriteBatch, type WriteOptions } from './store.ts';
import type { NodeExchange } from '../process/exchange.ts';

export interface PostgresSettings {
  host: string;
  port: number;
  user: string;
  password: string | null;
  database: string;
  schema: string;
  ssl: boolean;
  /** Verify the server's certificate (with the system's CAs and NODE_EXTRA_CA_CERTS). */
  sslVerify: boolean;
  /** How stale a cache may get: notices arrive sooner, and a lost notice connection is noticed within it. */
  updateFrequencyMs: number;
  /** Connections this process keeps (default 10). */
  poolSize?: number;
}

const DEFAULT_POOL_SIZE = 10;
const CONNECT_TIMEOUT_MS = 5_000;
/** A statement that takes longer is abandoned by the client (the request that made it fails; nothing hangs for ever). */
const QUERY_TIMEOUT_MS = 30_000;
/**
 * The server ends a session left idle inside a transaction this long: a process paused (SIGSTOP, a
 * frozen VM) in the middle of a transaction releases its locks instead of holding every other node
 * (a fenced write holds the metering lease's lock) until it wakes. This gateway never waits on anything
 * but the database inside a transaction.
 */
const IDLE_IN_TRANSACTION_MS = 5_000;
/** Deadlocks between plain batches (e.g. two writers of overlapping aggregates) are retried this often. */
const MAX_ATTEMPTS = 5;
const RETRIED_CODES = new Set(['40P01', '40001']);
const SWEEP_LIMIT = 10_000;
/** The node exchange's topic carrying notices between a node's worker processes. */
const NODE_NOTICE_TOPIC = 'store-notice';
/** NOTIFY payloads are limited to 8000 bytes; a longer notice is sent as `null` (drop the topic's cache). */
const MAX_NOTICE_BYTES = 7_900;
/** Notices waiting while the connection is down; beyond, they collapse into one `null` per topic. */
const MAX_OUTBOX = 10_000;

/** Escapes U+0000 (and U+0001, the escape character) keeping the order of keys. */
export function encodeText(text: string): string {
  if (text.indexOf('\u0000') === -1 && text.indexOf('\u0001') === -1) return text;
  return text.replace(/[\u0000\u0001]/g, (c) => (c === '\u0000' ? '\u0001\u0001' : '\u0001\u0002'));
}

export function decodeText(text: string): string {
  if (text.indexOf('\u0001') === -1) return text;
  return text.replace(/\u0001([\u0001\u0002])/g, (_, c) => (c === '\u0001' ? '\u0000' : '\u0001'));
}

/** The rows a set of operations leaves, by key: the last operation on a key wins. */
class Changes {
  /** Encoded key -> encoded value with expiry, or null for a delete. */
  private readonly byKey = new Map<string, { value: string; expiresAt: number | null } | null>();

  get size(): number {
    return this.byKey.size;
  }

  put(key: string, value: string, expiresAt: number | null): void {
    this.byKey.set(encodeText(key), { value: encodeText(value), expiresAt });
  }

  del(key: string): void {
    this.byKey.set(encodeText(key), null);
  }

  addAll(base: string, ops: BatchOp[], now: number): void {
    for (const op of ops) checkStrings(op.key, op.type === 'put' ? op.value : '');
    for (const op of ops) {
      if (op.type === 'del') this.del(base + op.key);
      else this.put(base + op.key, op.value, expiryFor(op.ttlMs, now));
    }
  }

  /**
   * Statement parameters: deleted keys, then the rows to upsert, sorted so that concurrent writers
   * lock rows in the same order (no deadlock between two batches over the same keys).
   */
  parameters(): [string[], string[], string[], (number | null)[]] {
    const deleted: string[] = [];
    const keys: string[] = [];
    for (const [key, row] of this.byKey) (row === null ? deleted : keys).push(key);
    keys.sort();
    const values = keys.map((k) => this.byKey.get(k)!.value);
    const expiry = keys.map((k) => this.byKey.get(k)!.expiresAt);
    return [deleted, keys, values, expiry];
  }
}

/** A WriteBatch collected in memory and written as one multi-row statement. */
class PostgresWriteBatch implements WriteBatch {
  private changes: Changes | null = new Changes();

  constructor(
    private readonly store: PostgresStore,
    private readonly base: string,
  ) {}

  private open(): Changes {
    if (!this.changes) throw new Error('this write batch was already written or discarded');
    return this.changes;
  }

  put(key: string, value: string, options?: PutOptions): void {
    checkStrings(key, value);
    this.open().put(this.base + key, value, expiryFor(options?.ttlMs));
  }

  del(key: string): void {
    checkStrings(key, '');
    this.open().del(this.base + key);
  }

  async write(options: WriteOptions = {}): Promise<void> {
    const changes = this.open();
    this.changes = null;
    await this.store.writeChanges(changes, options);
  }

  async writeIf(expectations: Expectation[], options: WriteOptions = {}): Promise<boolean> {
    const changes = this.open();
    this.changes = null;
    return this.store.writeChangesIf(this.base, expectations, changes, [], options);
  }

  async discard(): Promise<void> {
    this.changes = null;
  }
}

type Row = { key: string; value: string };

export class PostgresStore implements StoreAdapter, PrefixedRoot {
  private readonly pool: pg.Pool;
  private readonly names: SchemaNames;
  private readonly sql: ReturnType<typeof statements>;
  readonly notices: PostgresNotices;
  private closed = false;
  /** What `open` did to the schema. */
  migration: MigrationResult | undefined;

  constructor(
    readonly settings: PostgresSettings,
    private readonly log: (message: string, err?: unknown) => void = () => {},
  ) {
    this.names = schemaNames(settings.schema);
    this.sql = statements(this.names);
    this.pool = new pg.Pool({ ...connectionConfig(settings), max: settings.poolSize ?? DEFAULT_POOL_SIZE });
    // An idle connection that breaks (database restarted) must not take the process down.
    // pg hangs the whole client on the error: only what says why is logged.
    this.pool.on('error', (err) => this.log('postgres: an idle connection failed', { message: err.message, code: (err as { code?: string }).code }));
    this.notices = new PostgresNotices(settings, this.log);
  }

  /** Connects, creates or upgrades the schema (under the migration lock) and starts the notices. */
  async open(): Promise<void> {
    const client = await this.connect();
    try {
      this.migration = await migrate(client, this.settings.schema);
    } finally {
      client.release();
    }
    await this.notices.start();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.notices.stop();
    await this.pool.end();
  }

  /** Whether the database answers now (bounded by the connect timeout). */
  async reachable(): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  private async connect(): Promise<pg.PoolClient> {
    if (this.closed) throw new StoreClosedError('the store is closed');
    try {
      return await this.pool.connect();
    } catch (err) {
      throw unreachable(this.settings, err);
    }
  }

  private async query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    if (this.closed) throw new StoreClosedError('the store is closed');
    try {
      return await this.pool.query<R>(config);
    } catch (err) {
      throw this.unavailableIfLost(err);
    }
  }

  /** A failure of the connection (not of the statement) as StoreUnavailableError: callers answer 503, not 500. */
  private unavailableIfLost(err: unknown): unknown {
    return isConnectionError(err) && !(err instanceof StoreUnavailableError) ? unreachable(this.settings, err, 'reach') : err;
  }

  async get(key: string): Promise<string | undefined> {
    const { rows } = await this.query<Row>({ name: 'tg_get', text: this.sql.get, values: [encodeText(key), Date.now()] });
    return rows.length === 0 ? undefined : decodeText(rows[0].value);
  }

  async getMany(keys: string[]): Promise<(string | undefined)[]> {
    if (keys.length === 0) return [];
    const found = await this.readMany((c) => this.query<Row>(c), keys);
    return keys.map((k) => found.get(k));
  }

  private async readMany(run: (c: pg.QueryConfig) => Promise<pg.QueryResult<Row>>, keys: string[]): Promise<Map<string, string>> {
    const { rows } = await run({ name: 'tg_get_many', text: this.sql.getMany, values: [keys.map(encodeText), Date.now()] });
    return new Map(rows.map((r) => [decodeText(r.key), decodeText(r.value)]));
  }

  async put(key: string, value: string, options: PutOptions & WriteOptions = {}): Promise<void> {
    await this.batchUnder('', [{ type: 'put', key, value, ttlMs: options.ttlMs }], options);
  }

  async del(key: string, options: WriteOptions = {}): Promise<void> {
    await this.batchUnder('', [{ type: 'del', key }], options);
  }

  batch(ops: BatchOp[], options: WriteOptions = {}): Promise<void> {
    return this.batchUnder('', ops, options);
  }

  async batchUnder(base: string, ops: BatchOp[], options: WriteOptions): Promise<void> {
    if (ops.length === 0) return;
    const changes = new Changes();
    changes.addAll(base, ops, Date.now());
    await this.writeChanges(changes, options);
  }

  writeBatch(): WriteBatch {
    return this.writeBatchUnder('');
  }

  writeBatchUnder(base: string): WriteBatch {
    return new PostgresWriteBatch(this, base);
  }

  /** One statement (deletes and a multi-row upsert), in a transaction only when it must be durable. */
  async writeChanges(changes: Changes, options: WriteOptions): Promise<void> {
    if (changes.size === 0) return;
    const write = { name: 'tg_write', text: this.sql.write, values: changes.parameters() };
    if (!options.sync) {
      await this.retried(() => this.query(write));
      return;
    }
    await this.retried(() => this.transaction(true, (client) => client.query(write)));
  }

  commitIf(expectations: Expectation[], ops: BatchOp[], options: WriteOptions = {}): Promise<boolean> {
    return this.commitIfUnder('', expectations, ops, options);
  }

  commitIfUnder(base: string, expectations: Expectation[], ops: BatchOp[], options: WriteOptions): Promise<boolean> {
    const changes = new Changes();
    changes.addAll(base, ops, Date.now());
    return this.writeChangesIf(base, expectations, changes, ops.map((op) => base + op.key), options);
  }

  /**
   * Checks the expectations and writes `changes` in one transaction, under advisory locks on the
   * expectation keys and on `alsoLocked` (commitIf: every key it writes; a fenced write: none).
   */
  async writeChangesIf(base: string, expectations: Expectation[], changes: Changes, alsoLocked: string[], options: WriteOptions): Promise<boolean> {
    const expected = expectations.map((e) => ({ key: base + e.key, value: e.value }));
    const touched = new Set([...expected.map((e) => e.key), ...alsoLocked]);
    // Locks taken in one global order (sorted numerically), so two commitIf calls never wait on each other in a cycle.
    const locks = [...new Set([...touched].map((k) => lockKey(`${this.settings.schema}\u0000${k}`)))].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    return this.retried(() =>
      this.transaction(options.sync ?? false, async (client) => {
        await client.query({ name: 'tg_lock', text: 'SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS k', values: [locks] });
        // A new statement: its snapshot includes every commit made before the locks were granted.
        const current = expected.length === 0 ? new Map<string, string>() : await this.readMany((c) => client.query<Row>(c), expected.map((e) => e.key));
        if (expected.some((e) => current.get(e.key) !== e.value)) return false;
        if (changes.size > 0) await client.query({ name: 'tg_write', text: this.sql.write, values: changes.parameters() });
        return true;
      }),
    );
  }

  private async transaction<T>(sync: boolean, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    let broken: Error | undefined;
    // A checked-out client has no listener of the pool's: its connection dying between two statements
    // would otherwise be an uncaught 'error' event (the next statement fails with it anyway).
    const lost = (err: Error) => (broken ??= err);
    client.on('error', lost);
    try {
      await client.query(sync ? 'BEGIN; SET LOCAL synchronous_commit TO on' : 'BEGIN');
      try {
        const result = await body(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken = rollbackErr));
        throw err;
      }
    } catch (err) {
      broken ??= isConnectionError(err) ? (err as Error) : undefined;
      throw this.unavailableIfLost(err);
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
  }

  /** Runs `attempt` again after a deadlock or serialisation failure (PostgreSQL aborted it whole). */
  private async retried<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        if (n >= MAX_ATTEMPTS || !RETRIED_CODES.has((err as { code?: string }).code ?? '')) throw err;
      }
    }
  }

  scan(options: ScanOptions): AsyncIterable<[string, string]> {
    return this.scanRaw(options, '');
  }

  scanRaw(options: ScanOptions, base: string): AsyncIterable<[string, string]> {
    return pagedScan(
      async (gte, lt, reverse, limit) => {
        const { rows } = await this.query<Row>({
          name: reverse ? 'tg_scan_reverse' : 'tg_scan',
          text: reverse ? this.sql.scanReverse : this.sql.scan,
          values: [encodeText(gte), encodeText(lt), Date.now(), limit],
        });
        return rows.map((r): [string, string] => [decodeText(r.key), decodeText(r.value)]);
      },
      options,
      base,
    );
  }

  namespace(name: string): Store {
    return new NamespacedStore(this, name + NAMESPACE_SEPARATOR);
  }

  journal(): Journal {
    return this.journalUnder('');
  }

  journalUnder(base: string): Journal {
    return new PostgresJournal(this.journalAccess, this.names, base);
  }

  /** Here: every node reaches PostgreSQL itself. */
  nearData(procedure: string, args: unknown[]): Promise<unknown> {
    return this.nearDataUnder('', procedure, args);
  }

  nearDataUnder(base: string, procedure: string, args: unknown[]): Promise<unknown> {
    return runStoreProcedure(base === '' ? this : new NamespacedStore(this, base), procedure, args);
  }

  private readonly journalAccess: JournalAccess = {
    query: (config) => this.query(config),
    durably: (config) => this.retried(() => this.transaction(true, (client) => client.query(config))),
    encode: encodeText,
    decode: decodeText,
  };

  /** Deletes up to 10,000 expired rows per call (every node sweeps; that is harmless). */
  async sweepExpired(now = Date.now()): Promise<number> {
    const { rowCount } = await this.query({ name: 'tg_sweep', text: this.sql.sweep, values: [now, SWEEP_LIMIT] });
    return rowCount ?? 0;
  }

  /** Runs `use` with a connection of the pool (migrations, store:copy). */
  async withClient<T>(use: (client: pg.PoolClient, names: SchemaNames) => Promise<T>): Promise<T> {
    const client = await this.connect();
    try {
      return await use(client, this.names);
    } finally {
      client.release();
    }
  }
}

function statements(n: SchemaNames) {
  const live = '(expires_at IS NULL OR expires_at > $2)';
  return {
    get: `SELECT value FROM ${n.store} WHERE key = $1 AND ${live}`,
    getMany: `SELECT key, value FROM ${n.store} WHERE key = ANY($1::text[]) AND ${live}`,
    write: `WITH removed AS (DELETE FROM ${n.store} WHERE key = ANY($1::text[]))
      INSERT INTO ${n.store} (key, value, expires_at) SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[])
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
    scan: `SELECT key, value FROM ${n.store} WHERE key >= $1 AND key < $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY key LIMIT $4`,
    scanReverse: `SELECT key, value FROM ${n.store} WHERE key >= $1 AND key < $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY key DESC LIMIT $4`,
    // The outer expiry test is evaluated again on a row a concurrent write renewed meanwhile: it is kept.
    sweep: `DELETE FROM ${n.store} WHERE key IN (SELECT key FROM ${n.store} WHERE expires_at <= $1 LIMIT $2) AND expires_at <= $1`,
  };
}

/** node-postgres connection settings from the gateway's. */
export function connectionConfig(s: PostgresSettings): pg.ClientConfig {
  return {
    host: s.host,
    port: s.port,
    user: s.user,
    password: s.password ?? undefined,
    database: s.database,
    ssl: s.ssl ? { rejectUnauthorized: s.sslVerify } : false,
    application_name: 'tollgate',
    // Writes without `sync` commit asynchronously; `sync` ones switch it on for their transaction.
    options: `-c synchronous_commit=off -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_MS}`,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
  };
}

function unreachable(s: PostgresSettings, err: unknown, doing = 'connect to'): StoreUnavailableError {
  return new StoreUnavailableError(`cannot ${doing} PostgreSQL at ${s.host}:${s.port} (database ${s.database}, user ${s.user}): ${(err as Error).message}`, { cause: err });
}

/** A connection of its own (migrations, store:copy, locks), or a StoreUnavailableError saying where it was looked for. */
export async function connectedClient(settings: PostgresSettings): Promise<pg.Client> {
  const client = new pg.Client(connectionConfig(settings));
  try {
    await client.connect();
    return client;
  } catch (err) {
    await client.end().catch(() => undefined);
    throw unreachable(settings, err);
  }
}

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  // Class 08 (connection exception), 57P01-03 (shutdown), class 53 (insufficient resources: too many
  // connections, disk full, out of memory; retrying later is right), or a Node socket error.
  return code === undefined || code.startsWith('08') || code.startsWith('57P') || code.startsWith('53') || code.startsWith('E');
}

/** Notices over LISTEN/NOTIFY, on a connection that is watched and re-established when lost. */
export class PostgresNotices implements Notices {
  private readonly local = new LocalNotices();
  /** Sent with every notice, so this process skips its own (it delivered them when publishing). */
  private readonly sender = randomUUID();
  private readonly channel: string;
  private client: pg.Client | null = null;
  private outbox: string[] = [];
  private sending = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  /** The connection whose liveness check has not answered yet. */
  private pinging: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  /** Hands a notice to the node's other processes and resolves once they applied it (see shareWithinNode). */
  private withinNode: (topic: string, message: string) => Promise<void> = () => Promise.resolve();

  constructor(
    private readonly settings: PostgresSettings,
    private readonly log: (message: string, err?: unknown) => void,
  ) {
    // One channel per schema: deployments in two schemas of one database do not hear each other.
    this.channel = `tollgate:${settings.schema}`;
  }

  /** Whether notices can flow right now. */
  get connected(): boolean {
    return this.client !== null;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
    this.timer = setInterval(() => this.tick(), this.settings.updateFrequencyMs).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  /**
   * The node's other worker processes (when there are) hear this process's `publishAndWait` notices
   * through `exchange` at once and confirm they applied them; NOTIFY still carries them to other nodes.
   */
  shareWithinNode(exchange: NodeExchange): void {
    exchange.offer(NODE_NOTICE_TOPIC, (argument) => {
      const [pid, topic, message] = JSON.parse(argument ?? '[]') as [number, string, string];
      return pid === process.pid || typeof topic !== 'string' ? undefined : this.local.deliver(topic, message);
    });
    this.withinNode = (topic, message) => exchange.gather(NODE_NOTICE_TOPIC, JSON.stringify([process.pid, topic, message])).then(() => undefined);
  }

  publishAndWait(topic: string, message: string): Promise<void> {
    const here = this.local.deliver(topic, message);
    this.send(topic, message);
    return atMost(Promise.all([here, this.withinNode(topic, message)]).then(() => undefined), SETTLE_TIMEOUT_MS);
  }

  publish(topic: string, message: string): void {
    void this.local.deliver(topic, message);
    this.send(topic, message);
  }

  private send(topic: string, message: string): void {
    let payload = JSON.stringify([this.sender, topic, message]);
    if (Buffer.byteLength(payload) > MAX_NOTICE_BYTES) payload = JSON.stringify([this.sender, topic, null]);
    this.outbox.push(payload);
    if (this.outbox.length > MAX_OUTBOX) this.collapseOutbox();
    void this.flush();
  }

  subscribe(topic: string, listener: NoticeListener): () => void {
    return this.local.subscribe(topic, listener);
  }

  /** Too many notices waiting: one `null` per topic says as much as all of them. */
  private collapseOutbox(): void {
    const topics = new Set(this.outbox.map((p) => JSON.parse(p)[1] as string));
    this.outbox = [...topics].map((t) => JSON.stringify([this.sender, t, null]));
  }

  private async flush(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.outbox.length > 0 && this.client) {
        await this.client.query('SELECT pg_notify($1, $2)', [this.channel, this.outbox[0]]);
        this.outbox.shift();
      }
    } catch (err) {
      // Kept in the outbox; sent once the connection is back.
      this.lost(err);
    } finally {
      this.sending = false;
    }
  }

  private connect(): Promise<void> {
    this.connecting ??= this.connectNow().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connectNow(): Promise<void> {
    const client = new pg.Client(connectionConfig(this.settings));
    client.on('error', (err) => this.lost(err, client));
    client.on('end', () => this.lost(undefined, client));
    client.on('notification', (n) => this.received(n.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw unreachable(this.settings, err, 'listen for notices on');
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    void this.flush();
  }

  private received(payload: string | undefined): void {
    if (!payload) return;
    let sender: string, topic: string, message: string | null;
    try {
      [sender, topic, message] = JSON.parse(payload);
    } catch {
      return;
    }
    if (sender !== this.sender && typeof topic === 'string') void this.local.deliver(topic, message);
  }

  /** The notice connection failed: caches drop what notices keep fresh, and a reconnect is due. */
  private lost(err: unknown, client: pg.Client | null = this.client): void {
    if (client !== this.client || this.client === null) return;
    this.client = null;
    if (!this.stopped) this.log('postgres: the notice connection was lost; caches are dropped until it is back', err);
    void client?.end().catch(() => undefined);
    this.local.deliverLoss();
  }

  /** Each db_update_frequency: reconnect when down (dropping caches again), or check the connection is alive. */
  private tick(): void {
    if (this.stopped) return;
    if (!this.client) {
      this.local.deliverLoss();
      this.connect().then(
        () => {
          // Notices sent while we were away are lost: everything cached since the loss is suspect.
          this.local.deliverLoss();
          this.log('postgres: the notice connection is back');
        },
        () => undefined,
      );
      return;
    }
    const client = this.client;
    if (this.pinging === client) {
      // The last check has not answered within a whole period: the connection is as good as lost.
      this.lost(new Error('the notice connection stopped answering'));
      return;
    }
    this.pinging = client;
    const answered = () => {
      if (this.pinging === client) this.pinging = null;
    };
    client.query('SELECT 1').then(answered, (err) => {
      answered();
      this.lost(err, client);
    });
  }
}

/**
 * A lock one node holds on the database while it runs plugins that keep state in one process (they
 * would corrupt each other's data from two nodes). A session advisory lock on a connection of its own:
 * held as long as that connection lives, released by PostgreSQL when the node dies.
 */
export class SoleNodeLock {
  private client: pg.Client | null = null;

  constructor(
    private readonly settings: PostgresSettings,
    private readonly log: (message: string, err?: unknown) => void,
  ) {}

  get held(): boolean {
    return this.client !== null;
  }

  /** True when this node holds the lock now (it may already have). */
  async acquire(): Promise<boolean> {
    if (this.client) return true;
    const client = await connectedClient(this.settings);
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.client = null;
      this.log('postgres: the connection holding this node\'s sole-node lock was lost; another node may now start on this database', err);
    });
    const { rows } = await client.query('SELECT pg_try_advisory_lock($1) AS locked', [lockKey(`tollgate-sole-node:${this.settings.schema}`)]);
    if (!rows[0].locked) {
      await client.end();
      return false;
    }
    this.client = client;
    return true;
  }

  async release(): Promise<void> {
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}

/**
 * The shared store: PostgreSQL, for several gateway nodes (and every worker process of each) on one
 * database, with the contract of ../store.ts:
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
 * Keys and values are escaped on their way in and out (text.ts): PostgreSQL text cannot hold U+0000.
 */
import pg from 'pg';
import { StoreClosedError, StoreUnavailableError } from '../errors.ts';
import { NAMESPACE_SEPARATOR, NamespacedStore, type PrefixedRoot } from '../namespace.ts';
import { pagedScan } from '../order.ts';
import { runStoreProcedure } from '../procedures.ts';
import type { BatchOp, Expectation, Journal, PutOptions, ScanOptions, Store, StoreAdapter, WriteBatch, WriteOptions } from '../store.ts';
import { connectionConfig, isConnectionError, unreachable, type PostgresSettings } from './connection.ts';
import { PostgresJournal, type JournalAccess } from './journal.ts';
import { PostgresNotices } from './notices.ts';
import { lockKey, migrate, schemaNames, type MigrationResult, type SchemaNames } from './schema.ts';
import { decodeText, encodeText } from './text.ts';
import { Changes, PostgresWriteBatch } from './write-batch.ts';

const DEFAULT_POOL_SIZE = 10;
/** Deadlocks between plain batches (e.g. two writers of overlapping aggregates) are retried this often. */
const MAX_ATTEMPTS = 5;
const RETRIED_CODES = new Set(['40P01', '40001']);
const SWEEP_LIMIT = 10_000;

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

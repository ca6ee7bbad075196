/**
 * The embedded store: LevelDB (classic-level) under the data directory.
 *
 * Values carry a one-character header: '0' + value, or '1' + expiresAt (13 digits, ms) + value.
 * Expiring entries also get an index entry `!ttl!<expiresAt>!<key>` so the sweeper finds them
 * without a full scan. Keys starting with '!' are reserved for the adapter.
 */
import { mkdirSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';
import { PRIVATE_DIR_MODE } from '../data-dir.ts';
import { StoreDamagedError, StoreUnwritableError } from './errors.ts';
import { checkStrings, NAMESPACE_SEPARATOR, NamespacedStore, type PrefixedRoot } from './namespace.ts';
import { LocalNotices } from './notices.ts';
import { runStoreProcedure } from './procedures.ts';
import { byteOrder, SCAN_FIRST_BATCH, SCAN_MAX_BATCH, scanBounds } from './order.ts';
import { expiryFor, type BatchOp, type Expectation, type Notices, type PutOptions, type ScanOptions, type Store, type StoreAdapter, type WriteBatch, type WriteOptions } from './store.ts';

const TTL_PREFIX = '!ttl!';
const EXPIRY_DIGITS = 13;
const PERMANENT = '0';
const EXPIRING = '1';

/**
 * LevelDB settings. A 32 MB write buffer (default 4 MB) flushes an eighth as many level-0 tables, and
 * the compaction thread's CPU per metering event fell from ~17 µs to ~7.5 µs (bench/metering.ts
 * load, 2-core machine); the cost is up to 64 MB of memtables (the active one and the one being
 * flushed) and a longer log replay after a crash.
 */
export const LEVEL_OPTIONS = { keyEncoding: 'utf8', valueEncoding: 'utf8', writeBufferSize: 32 << 20 } as const;

type ChainedBatch = ReturnType<ClassicLevel<string, string>['batch']>;

/** LevelDB could not write or read its files (a full disk, EIO), or found them damaged. */
export function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'LEVEL_IO_ERROR' || code === 'LEVEL_CORRUPTION';
}

/** The store at `location` cannot be read because of `err`, and what the operator does about it. */
export function damagedStoreError(location: string, err: unknown): StoreDamagedError {
  return new StoreDamagedError(
    `the store in ${location} is damaged or unreadable (${(err as Error).message}): stop the gateway, then run 'tollgate store:repair --config FILE' ` +
      `(it keeps what can be read and sets damaged files aside in ${location}/lost), or restore ${location} from a backup`,
    { cause: err },
  );
}

function expiryOf(stored: string): number | undefined {
  return stored[0] === EXPIRING ? Number(stored.slice(1, 1 + EXPIRY_DIGITS)) : undefined;
}

/** The value, or undefined when it has expired. */
function decode(stored: string | undefined, now: number): string | undefined {
  if (stored === undefined) return undefined;
  if (stored[0] === PERMANENT) return stored.slice(1);
  const expiresAt = expiryOf(stored)!;
  return expiresAt > now ? stored.slice(1 + EXPIRY_DIGITS) : undefined;
}

function ttlIndexKey(expiresAt: number, key: string): string {
  return TTL_PREFIX + String(expiresAt).padStart(EXPIRY_DIGITS, '0') + '!' + key;
}

/** Puts `key` into `batch` with its header, and its expiry index entry when it expires. */
function putStored(batch: ChainedBatch, key: string, value: string, expiresAt: number | null): void {
  if (expiresAt === null) {
    batch.put(key, PERMANENT + value);
    return;
  }
  batch.put(key, EXPIRING + String(expiresAt).padStart(EXPIRY_DIGITS, '0') + value);
  batch.put(ttlIndexKey(expiresAt, key), '');
}

/** A classic-level chained batch below `base` (a namespace's prefix). */
class LevelWriteBatch implements WriteBatch {
  constructor(
    private readonly store: LevelStore,
    private readonly batch: ChainedBatch,
    private readonly base: string,
  ) {}

  put(key: string, value: string, options?: PutOptions): void {
    checkStrings(key, value);
    putStored(this.batch, this.base + key, value, expiryFor(options?.ttlMs));
  }

  del(key: string): void {
    checkStrings(key, '');
    this.batch.del(this.base + key);
  }

  async write(options: WriteOptions = {}): Promise<void> {
    try {
      this.store.checkWritable();
    } catch (err) {
      await this.discard();
      throw err;
    }
    await this.store.guarded(() => this.batch.write({ sync: options.sync ?? false }));
  }

  async writeIf(expectations: Expectation[], options: WriteOptions = {}): Promise<boolean> {
    let written = false;
    try {
      written = await this.store.conditionally(this.base, expectations, () => this.write(options));
      return written;
    } finally {
      // Refused, or the check failed: the batch is spent all the same (a failed write closed it already).
      if (!written) await this.discard().catch(() => undefined);
    }
  }

  async discard(): Promise<void> {
    await this.batch.close();
  }
}

export class LevelStore implements StoreAdapter, PrefixedRoot {
  private readonly db: ClassicLevel<string, string>;
  /** This process's; in a node's primary, the hub that also reaches every worker (see shareNotices). */
  readonly localNotices = new LocalNotices();
  notices: Notices = this.localNotices;
  /** The namespaced views procedures run on, one per namespace: a procedure that keeps state finds it by its store. */
  private readonly procedureStores = new Map<string, Store>();
  /** commitIf calls, one after the other: this process is the database's only writer. */
  private conditional: Promise<unknown> = Promise.resolve();
  /** Set by the first write that failed; from then on every write is refused (see `guarded`). */
  private writeFailure: StoreUnwritableError | undefined;

  constructor(readonly location: string) {
    mkdirSync(location, { recursive: true, mode: PRIVATE_DIR_MODE });
    this.db = new ClassicLevel<string, string>(location, LEVEL_OPTIONS);
  }

  async open(): Promise<void> {
    await this.db.open();
  }

  async close(): Promise<void> {
    await this.db.close();
  }

  /** Open and writable: a store that refuses writes takes the node out of rotation (GET /status/ready). */
  async reachable(): Promise<boolean> {
    return this.db.status === 'open' && this.writeFailure === undefined;
  }

  /** Throws once a write has failed (see `guarded`). */
  checkWritable(): void {
    if (this.writeFailure) throw this.writeFailure;
  }

  /**
   * Runs a write of LevelDB's, unless one failed before. LevelDB appends each write to its log, and
   * one that failed half-way (the disk filled up) leaves a torn record there; when the log is replayed
   * at the next open, LevelDB drops the rest of that log block with the torn record, so a write
   * acknowledged after it would be lost (seen: every event acknowledged after the disk was freed
   * again). Hence the first failure makes the store refuse every write until it is opened again, by a
   * restart; reads are still served. LevelDB itself refuses writes after a failed compaction the same way.
   */
  async guarded(write: () => Promise<void>): Promise<void> {
    this.checkWritable();
    try {
      await write();
    } catch (err) {
      if (!isStorageFailure(err)) throw err;
      this.writeFailure ??= new StoreUnwritableError(
        `the store in ${this.location} cannot be written (${(err as Error).message}); since ${new Date().toISOString()} every write is refused, reads still served: free space (or fix the disk), then restart the gateway`,
        { cause: err },
      );
      throw this.writeFailure;
    }
  }

  async get(key: string): Promise<string | undefined> {
    return decode(await this.read(() => this.db.get(key)), Date.now());
  }

  async getMany(keys: string[]): Promise<(string | undefined)[]> {
    if (keys.length === 0) return [];
    const now = Date.now();
    return (await this.read(() => this.db.getMany(keys))).map((v) => decode(v, now));
  }

  /** A read of LevelDB's: a damaged file (a truncated table) is reported as such, with what to do. */
  private async read<T>(reading: () => Promise<T>): Promise<T> {
    try {
      return await reading();
    } catch (err) {
      throw isStorageFailure(err) ? damagedStoreError(this.location, err) : err;
    }
  }

  async put(key: string, value: string, options: PutOptions & WriteOptions = {}): Promise<void> {
    await this.batch([{ type: 'put', key, value, ttlMs: options.ttlMs }], options);
  }

  async del(key: string, options: WriteOptions = {}): Promise<void> {
    await this.guarded(() => this.db.del(key, { sync: options.sync ?? false }));
  }

  batch(ops: BatchOp[], options: WriteOptions = {}): Promise<void> {
    return this.batchUnder('', ops, options);
  }

  /** A batch whose keys are below `base` (a namespace's prefix), written without copying the operations. */
  async batchUnder(base: string, ops: BatchOp[], options: WriteOptions): Promise<void> {
    if (ops.length === 0) return;
    for (const op of ops) checkStrings(op.key, op.type === 'put' ? op.value : '');
    this.checkWritable();
    const now = Date.now();
    const batch: ChainedBatch = this.db.batch();
    for (const op of ops) {
      if (op.type === 'del') batch.del(base + op.key);
      else putStored(batch, base + op.key, op.value, expiryFor(op.ttlMs, now));
    }
    await this.guarded(() => batch.write({ sync: options.sync ?? false }));
  }

  writeBatch(): WriteBatch {
    return this.writeBatchUnder('');
  }

  commitIf(expectations: Expectation[], ops: BatchOp[], options: WriteOptions = {}): Promise<boolean> {
    return this.commitIfUnder('', expectations, ops, options);
  }

  commitIfUnder(base: string, expectations: Expectation[], ops: BatchOp[], options: WriteOptions): Promise<boolean> {
    return this.conditionally(base, expectations, () => this.batchUnder(base, ops, options));
  }

  /** Runs `write` if every expectation (keys below `base`) holds, one conditional write after the other. */
  conditionally(base: string, expectations: Expectation[], write: () => Promise<void>): Promise<boolean> {
    return this.serialised(async () => {
      const current = await this.getMany(expectations.map((e) => base + e.key));
      if (expectations.some((e, i) => current[i] !== e.value)) return false;
      await write();
      return true;
    });
  }

  /** Conditional writes and the sweep, one at a time in call order: this process is the database's only writer. */
  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const run = this.conditional.then(work);
    this.conditional = run.catch(() => undefined);
    return run;
  }

  writeBatchUnder(base: string): WriteBatch {
    return new LevelWriteBatch(this, this.db.batch(), base);
  }

  scan(options: ScanOptions): AsyncIterable<[string, string]> {
    return this.scanRaw(options, '');
  }

  /** Scan below `base`, yielding keys without it: one iterator, so one snapshot of the database. */
  async *scanRaw(options: ScanOptions, base: string): AsyncIterable<[string, string]> {
    const { gte, lt } = scanBounds(options, base);
    if (byteOrder(gte, lt) >= 0) return;
    const limit = options.limit ?? Infinity;
    if (limit <= 0) return;
    const now = Date.now();
    let yielded = 0;
    const iterator = this.db.iterator({ gte, lt, reverse: options.reverse ?? false });
    try {
      // Entries come in batches (nextv): one native round trip per batch instead of per key.
      for (let size = SCAN_FIRST_BATCH; ; size = Math.min(size * 4, SCAN_MAX_BATCH)) {
        const entries = await this.read(() => iterator.nextv(Math.min(size, limit - yielded)));
        if (entries.length === 0) return;
        for (const [key, stored] of entries) {
          const value = decode(stored, now);
          if (value === undefined) continue;
          yield [key.slice(base.length), value];
          if (++yielded >= limit) return;
        }
      }
    } finally {
      await iterator.close();
    }
  }

  namespace(name: string): Store {
    return new NamespacedStore(this, name + NAMESPACE_SEPARATOR);
  }

  /** No journals: LevelDB has one writer process, which keeps its events in keys (see Journal). */
  journal(): null {
    return null;
  }

  journalUnder(): null {
    return null;
  }

  /** Here: this process holds the database. */
  nearData(procedure: string, args: unknown[]): Promise<unknown> {
    return this.nearDataUnder('', procedure, args);
  }

  nearDataUnder(base: string, procedure: string, args: unknown[]): Promise<unknown> {
    return runStoreProcedure(this.procedureStore(base), procedure, args);
  }

  private procedureStore(base: string): Store {
    if (base === '') return this;
    let store = this.procedureStores.get(base);
    if (!store) this.procedureStores.set(base, (store = new NamespacedStore(this, base)));
    return store;
  }

  /**
   * A node's primary: what its own code publishes (a procedure's service) reaches the workers too, as
   * their notices reach it. Set before any namespace is made (each takes the notices it finds).
   */
  shareNotices(hub: Notices): void {
    this.notices = hub;
  }

  /**
   * Every entry live at `now` with its expiry (ms, null: never), in key order after `after`; the
   * adapter's own keys ('!…') left out. For moving the store elsewhere (store:copy).
   */
  async *entries(after: string | undefined, now: number): AsyncIterable<{ key: string; value: string; expiresAt: number | null }> {
    for await (const [key, stored] of this.db.iterator(after === undefined ? {} : { gt: after })) {
      if (key.startsWith('!')) continue;
      const value = decode(stored, now);
      if (value !== undefined) yield { key, value, expiresAt: expiryOf(stored) ?? null };
    }
  }

  /**
   * Serialised with conditional writes: a lease or counter that commitIf renews while the sweep runs
   * is read again after the renewal and kept (read before it, it would be deleted with the new value).
   */
  sweepExpired(now = Date.now()): Promise<number> {
    return this.serialised(async () => {
      this.checkWritable();
      const end = TTL_PREFIX + String(now).padStart(EXPIRY_DIGITS, '0') + '"';
      const indexKeys = await this.db.keys({ gte: TTL_PREFIX, lt: end, limit: 10_000 }).all();
      const keys = indexKeys.map((indexKey) => indexKey.slice(TTL_PREFIX.length + EXPIRY_DIGITS + 1));
      const stored = await this.db.getMany(keys);
      const batch: ChainedBatch = this.db.batch();
      let removed = 0;
      indexKeys.forEach((indexKey, i) => {
        batch.del(indexKey);
        // The key may have been re-written since with another expiry (or none): keep it then.
        const expiresAt = Number(indexKey.slice(TTL_PREFIX.length, TTL_PREFIX.length + EXPIRY_DIGITS));
        if (stored[i] !== undefined && expiryOf(stored[i]!) === expiresAt) {
          batch.del(keys[i]);
          removed++;
        }
      });
      await this.guarded(() => batch.write());
      return removed;
    });
  }
}

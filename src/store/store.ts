/**
 * The store: the only persistence plugins reach. Narrow and asynchronous on purpose, so that one
 * contract has three adapters and no plugin knows which it runs on: LevelDB in this process
 * (level.ts), LevelDB owned by the node's primary process and reached by its workers (ipc.ts), and
 * PostgreSQL shared by several nodes (postgres/).
 *
 * Keys and values are any strings. Keys order by their UTF-8 bytes (= code points) in every
 * adapter; JavaScript's `<` on strings differs beyond U+FFFF. A scan may read in pages: on a store
 * shared by several processes it can see writes made while it runs (LevelDB in-process reads one
 * snapshot).
 *
 * Concurrency contract, the same for every adapter (one process, several workers, several nodes):
 * - `get`, `put`, `del`, `batch` and `writeBatch().write()` are atomic per call, last writer wins.
 *   A read-modify-write built from them is NOT safe once another process may write the same keys.
 * - `commitIf` is the only compare-and-set: its expectations are checked and its operations applied
 *   as one step, serialised with every other `commitIf` of every process sharing the store that
 *   touches one of the same keys (calls on disjoint keys commute, so they may overlap). Single-use
 *   values (take), insert-if-absent (dedupe keys, invoice numbers) and leases are built on it. A key
 *   that is ever guarded by `commitIf` must only be changed through `commitIf`.
 * - `writeBatch().writeIf` is a fenced write: its expectations are checked and the whole batch applied
 *   as one step, serialised with every `commitIf` that touches an expectation key. Only those keys are
 *   serialised, so a batch may be large (the metering aggregator's, fenced by its lease), but its own
 *   keys must not be ones guarded by `commitIf`.
 * - `notices` reach every process sharing the store (the publisher's too), within the cluster's
 *   `db_update_frequency`. They are for cache invalidation only, never for truth: a listener that is
 *   called with `null` may have missed notices and must drop everything it caches from that topic.
 *   `publishAndWait` also waits until every process of the publisher's node has applied the notice:
 *   within a node, an admin change is read-your-writes for the proxy path too.
 * - Expiry (`ttlMs`) is judged by the reader's clock; expired entries read as absent everywhere,
 *   `commitIf` expectations included.
 * - `journal` (PostgreSQL only): appends are serialised per journal and each is one durable
 *   transaction, so sequence order is commit order, and a key is stored once however many processes
 *   append it at the same time (see Journal).
 */
export interface PutOptions {
  /** Milliseconds until the entry expires; an expired entry reads as absent and is swept later. */
  ttlMs?: number;
}

export type BatchOp =
  | { type: 'put'; key: string; value: string; ttlMs?: number }
  | { type: 'del'; key: string };

export interface WriteOptions {
  /** Flush to stable storage (fsync) before resolving. */
  sync?: boolean;
}

export interface ScanOptions {
  /** Only keys starting with this prefix. */
  prefix?: string;
  /** Inclusive lower bound (combined with prefix). */
  gte?: string;
  /** Exclusive upper bound (combined with prefix). */
  lt?: string;
  reverse?: boolean;
  limit?: number;
}

/**
 * Operations added one at a time and applied atomically by `write`: all or none. They go straight
 * into the database's own batch, so a batch can be filled ahead of its write (the metering writer
 * fills the next batch while the previous one is being written) and keeps no operation objects.
 */
export interface WriteBatch {
  put(key: string, value: string, options?: PutOptions): void;
  del(key: string): void;
  /** Applies every operation; the batch is spent afterwards. */
  write(options?: WriteOptions): Promise<void>;
  /**
   * Applies every operation if, at that moment, every expectation holds; resolves false and writes
   * nothing otherwise (see the contract above). The batch is spent afterwards.
   */
  writeIf(expectations: Expectation[], options?: WriteOptions): Promise<boolean>;
  /** Drops the operations unwritten; the batch is spent afterwards. */
  discard(): Promise<void>;
}

/** A precondition of `commitIf`: `key` holds exactly `value` (undefined: the key is absent or expired). */
export interface Expectation {
  key: string;
  value: string | undefined;
}

/**
 * What a listener does with a notice. It may return a promise (a re-read of what changed): the
 * notice counts as applied in its process once that settles.
 */
export type NoticeListener = (message: string | null) => unknown;

/** Messages between the processes sharing a store, for cache invalidation (see the contract above). */
export interface Notices {
  /** Delivered to every subscriber of `topic` in every process, this one included. */
  publish(topic: string, message: string): void;
  /**
   * Publishes, and resolves once every process of this node has applied the notice (bounded by a few
   * seconds, so a stuck process cannot hold the caller). An admin change awaits it, so the node's next
   * request is decided on the new state whichever worker answers it; other nodes hear it within
   * `db_update_frequency`.
   */
  publishAndWait(topic: string, message: string): Promise<void>;
  /** `message` null: notices may have been lost (e.g. a reconnect); drop what the topic's notices keep fresh. */
  subscribe(topic: string, listener: NoticeListener): () => void;
}

/** A record of a journal: a unique key, an integer time (e.g. seconds) for ranges, a kind for filters, and its value. */
export interface JournalRecord {
  key: string;
  time: number;
  kind: string;
  value: string;
}

/** A record as the journal stores it: with the sequence number and time (ms) of its append. */
export interface JournalEntry extends JournalRecord {
  seq: number;
  storedAt: number;
}

/** Entries read in sequence order, and how far the read is complete (see Journal.read). */
export interface JournalRead {
  entries: JournalEntry[];
  /** Every entry with a sequence number up to this one is in `entries` or was never stored (a duplicate key). */
  through: number;
}

/** Which entries `Journal.read` returns: sequence numbers in (after, upTo]. */
export interface JournalReadOptions {
  limit: number;
  /** Only entries of this kind; then at most `limit` sequence numbers are looked at, so a rare kind still reads in bounded steps. */
  kind?: string;
  upTo?: number;
}

/** Entries by time: [from, to), kind optional, strictly after `after` ([time, seq]) in the scan's direction. */
export interface JournalTimeRange {
  from: number;
  to?: number;
  kind?: string;
  after?: [time: number, seq: number];
  /** Newest first. */
  reverse?: boolean;
  limit: number;
}

/**
 * An append-only log of records with unique keys, for what is written once, at a high rate, by every
 * process, and read in order by one (the metering plugin's events on PostgreSQL): one row per record
 * instead of a key per access path, and the key's uniqueness checked by the database in the append
 * itself. Sequence numbers increase with commit order and may have gaps (duplicates take one too).
 */
export interface Journal {
  /**
   * Appends the records whose key the journal does not hold, in one durable transaction; the others
   * are skipped. Appends to one journal are serialised, so a reader never sees a later sequence number
   * before an earlier one.
   */
  append(records: readonly JournalRecord[], storedAt: number): Promise<void>;
  /** Entries in sequence order from `after` on (see JournalReadOptions), and how far that read is complete. */
  read(after: number, options: JournalReadOptions): Promise<JournalRead>;
  /** The highest sequence number a committed append used (0: none). */
  last(): Promise<number>;
  byTime(range: JournalTimeRange): Promise<JournalEntry[]>;
  /** Deletes at most `limit` entries older than `time`; returns how many. */
  deleteBefore(time: number, limit: number): Promise<number>;
  /**
   * Stores entries with the sequence numbers they already have (moving them from elsewhere), skipping
   * keys the journal holds, and makes later appends number after `floor`.
   */
  import(entries: readonly JournalEntry[], floor: number): Promise<void>;
}

export interface Store {
  get(key: string): Promise<string | undefined>;
  /** Several keys at once, in order; undefined where absent. */
  getMany(keys: string[]): Promise<(string | undefined)[]>;
  put(key: string, value: string, options?: PutOptions & WriteOptions): Promise<void>;
  del(key: string, options?: WriteOptions): Promise<void>;
  /** All operations are applied atomically: all or none. */
  batch(ops: BatchOp[], options?: WriteOptions): Promise<void>;
  /** An empty batch to fill operation by operation (see WriteBatch). */
  writeBatch(): WriteBatch;
  /** Ordered scan; expired entries are skipped. */
  scan(options: ScanOptions): AsyncIterable<[key: string, value: string]>;
  /**
   * Applies `ops` atomically if, at that moment, every expectation holds; resolves false and writes
   * nothing otherwise. Serialised with every other commitIf of every process sharing the store.
   */
  commitIf(expectations: Expectation[], ops: BatchOp[], options?: WriteOptions): Promise<boolean>;
  /** Notices between processes; topics are namespaced like keys. */
  readonly notices: Notices;
  /** A view of this store whose keys are all prefixed by `name` and a separator. */
  namespace(name: string): Store;
  /** This namespace's journal, on a store that has journals (PostgreSQL); null otherwise. */
  journal(): Journal | null;
  /**
   * Runs a registered store procedure (procedures.ts) on this namespace where the data is: in the
   * node's primary when this process reaches the store through it, here otherwise.
   */
  nearData(procedure: string, args: unknown[]): Promise<unknown>;
}

/** The store as the gateway owns it: it opens, sweeps and closes it. */
export interface StoreAdapter extends Store {
  open(): Promise<void>;
  /** Deletes expired entries; returns how many. */
  sweepExpired(now?: number): Promise<number>;
  /** Whether the database answers right now (GET /status, /status/ready). */
  reachable(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * When an entry written with `ttlMs` expires (ms since the epoch; null: never). The clock is read only
 * for an expiring entry, unless a batch passes the `now` it read once.
 */
export function expiryFor(ttlMs: number | undefined, now?: number): number | null {
  return ttlMs !== undefined && ttlMs > 0 ? (now ?? Date.now()) + ttlMs : null;
}

/** Reads and deletes `key` in one step: of several concurrent takers exactly one gets the value. */
export async function take(store: Store, key: string): Promise<string | undefined> {
  for (;;) {
    const value = await store.get(key);
    if (value === undefined) return undefined;
    if (await store.commitIf([{ key, value }], [{ type: 'del', key }], { sync: true })) return value;
  }
}

/** Writes `key` only when it is absent: true when this call wrote it. */
export function putIfAbsent(store: Store, key: string, value: string, options: { ttlMs?: number; sync?: boolean } = {}): Promise<boolean> {
  return store.commitIf([{ key, value: undefined }], [{ type: 'put', key, value, ttlMs: options.ttlMs }], { sync: options.sync ?? true });
}

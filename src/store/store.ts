/**
 * The store: the only persistence plugins reach. Narrow and asynchronous on purpose, so that the
 * LevelDB adapter can later be replaced by a process that owns LevelDB for several workers, or by a
 * shared PostgreSQL store for several nodes, without changing any plugin.
 *
 * Keys and values are strings. Keys order lexicographically (by UTF-16 code unit for the
 * characters used here; keep keys ASCII for portable ordering).
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
  put(key: string, value: string): void;
  del(key: string): void;
  /** Applies every operation; the batch is spent afterwards. */
  write(options?: WriteOptions): Promise<void>;
  /** Drops the operations unwritten; the batch is spent afterwards. */
  discard(): Promise<void>;
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
  /** A view of this store whose keys are all prefixed by `name` and a separator. */
  namespace(name: string): Store;
}

/** The store as the gateway owns it: it opens, sweeps and closes it. */
export interface StoreAdapter extends Store {
  open(): Promise<void>;
  /** Deletes expired entries; returns how many. */
  sweepExpired(now?: number): Promise<number>;
  close(): Promise<void>;
}

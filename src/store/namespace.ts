/**
 * A namespace: a view of a store whose keys (and notice topics) all carry a prefix. Adapters give
 * it the operations taking that prefix (`base`) apart from the keys, so that batches are prefixed
 * while they are written instead of being copied, and stay atomic: they go to the one database.
 */
import { NamespacedNotices } from './notices.ts';
import type { BatchOp, Expectation, Journal, Notices, PutOptions, ScanOptions, Store, WriteBatch, WriteOptions } from './store.ts';

export const NAMESPACE_SEPARATOR = ':';

/** What an adapter implements for its namespaces: every key below `base`. */
export interface PrefixedRoot {
  get(key: string): Promise<string | undefined>;
  getMany(keys: string[]): Promise<(string | undefined)[]>;
  put(key: string, value: string, options?: PutOptions & WriteOptions): Promise<void>;
  del(key: string, options?: WriteOptions): Promise<void>;
  batchUnder(base: string, ops: BatchOp[], options: WriteOptions): Promise<void>;
  writeBatchUnder(base: string): WriteBatch;
  commitIfUnder(base: string, expectations: Expectation[], ops: BatchOp[], options: WriteOptions): Promise<boolean>;
  /** Scan below `base`, yielding keys without it. */
  scanRaw(options: ScanOptions, base: string): AsyncIterable<[string, string]>;
  /** The journal of the namespace `base`, or null on a store without journals. */
  journalUnder(base: string): Journal | null;
  /** Runs a store procedure on the namespace `base`. */
  nearDataUnder(base: string, procedure: string, args: unknown[]): Promise<unknown>;
  readonly notices: Notices;
}

export class NamespacedStore implements Store {
  readonly notices: Notices;

  constructor(
    private readonly root: PrefixedRoot,
    private readonly base: string,
  ) {
    this.notices = new NamespacedNotices(root.notices, base);
  }

  get(key: string) {
    return this.root.get(this.base + key);
  }
  getMany(keys: string[]) {
    return this.root.getMany(keys.map((k) => this.base + k));
  }
  put(key: string, value: string, options?: PutOptions & WriteOptions) {
    return this.root.put(this.base + key, value, options);
  }
  del(key: string, options?: WriteOptions) {
    return this.root.del(this.base + key, options);
  }
  batch(ops: BatchOp[], options?: WriteOptions) {
    return this.root.batchUnder(this.base, ops, options ?? {});
  }
  writeBatch() {
    return this.root.writeBatchUnder(this.base);
  }
  commitIf(expectations: Expectation[], ops: BatchOp[], options?: WriteOptions) {
    return this.root.commitIfUnder(this.base, expectations, ops, options ?? {});
  }
  scan(options: ScanOptions) {
    return this.root.scanRaw(options, this.base);
  }
  namespace(name: string): Store {
    return new NamespacedStore(this.root, this.base + name + NAMESPACE_SEPARATOR);
  }
  journal() {
    return this.root.journalUnder(this.base);
  }
  nearData(procedure: string, args: unknown[]) {
    return this.root.nearDataUnder(this.base, procedure, args);
  }
}

/** Refused before anything is written, so a bad operation fails its whole batch (and never stores "undefined"). */
export function checkStrings(key: unknown, value: unknown): void {
  if (typeof key !== 'string' || typeof value !== 'string') throw new TypeError(`store keys and values must be strings (key ${JSON.stringify(key)})`);
}

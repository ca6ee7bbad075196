import { checkStrings } from '../namespace.ts';
import { expiryFor, type BatchOp, type Expectation, type PutOptions, type WriteBatch, type WriteOptions } from '../store.ts';
import { encodeText } from './text.ts';

/** The rows a set of operations leaves, by key: the last operation on a key wins. */
export class Changes {
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

/** What a batch needs of the store (PostgresStore) to write its changes. */
export interface ChangeWriter {
  writeChanges(changes: Changes, options: WriteOptions): Promise<void>;
  writeChangesIf(base: string, expectations: Expectation[], changes: Changes, alsoLocked: string[], options: WriteOptions): Promise<boolean>;
}

/** A WriteBatch collected in memory and written as one multi-row statement. */
export class PostgresWriteBatch implements WriteBatch {
  private changes: Changes | null = new Changes();

  constructor(
    private readonly store: ChangeWriter,
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

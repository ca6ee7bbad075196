/**
 * The single writer: a bounded queue between the HTTP handlers and the store, and group commit.
 * Requests enqueue validated events and wait; a flush commits whole requests in one atomic LevelDB
 * batch written with sync: the raw events, their time index, their dedupe keys, the sequence number
 * and the aggregate updates of every matching meter. The promise of each request settles only after
 * that commit. Everything else that writes aggregates or meters (backfill, clean-up, purge, meter
 * changes) runs in the same serial section, so the read-merge-write of aggregates never races.
 */
import type { Logger } from 'pino';
import type { BatchOp, Store } from '../../src/pipeline/plugin-api.ts';
import type { PreparedEvent } from './events.ts';
import { dedupeKey, eventKey, padSeq, SEQ_KEY, STORED_AT_WIDTH, timeKey } from './keys.ts';
import { addEvent, newDelta, type AggregateLedger } from './ledger.ts';
import type { MeterRegistry } from './registry.ts';

export class QueueFullError extends Error {
  constructor() {
    super('the ingest queue is full, retry later');
  }
}

export class WriterClosedError extends Error {
  constructor() {
    super('the gateway is shutting down');
  }
}

export interface WriterOptions {
  batchMaxEvents: number;
  batchMaxWaitMs: number;
}

interface Waiting {
  events: PreparedEvent[];
  resolve(): void;
  reject(err: unknown): void;
}

export interface CommitResult {
  accepted: number;
  duplicates: number;
}

export class Writer {
  private waiting: Waiting[] = [];
  private waitingEvents = 0;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Last sequence number committed. */
  lastSeq = 0;

  constructor(
    private readonly store: Store,
    private readonly ledger: AggregateLedger,
    private readonly meters: MeterRegistry,
    private readonly log: Logger,
    public options: WriterOptions,
  ) {}

  async open(): Promise<void> {
    const seq = await this.store.get(SEQ_KEY);
    this.lastSeq = seq === undefined ? 0 : parseInt(seq, 16);
  }

  /** Events waiting for their commit. */
  get queued(): number {
    return this.waitingEvents;
  }

  /** Runs `fn` alone among all writes (FIFO). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Resolves once every event is durably committed (or was a duplicate). Throws QueueFullError when
   * `queueLimit` events already wait (a lone request larger than the limit still gets through).
   */
  submit(events: PreparedEvent[], queueLimit: number): Promise<void> {
    if (this.closed) return Promise.reject(new WriterClosedError());
    if (this.waitingEvents > 0 && this.waitingEvents + events.length > queueLimit) return Promise.reject(new QueueFullError());
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ events, resolve, reject });
      this.waitingEvents += events.length;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.flushing || this.waiting.length === 0) return;
    if (this.waitingEvents >= this.options.batchMaxEvents || this.options.batchMaxWaitMs === 0) {
      this.startFlush();
    } else if (!this.timer) {
      this.timer = setTimeout(() => this.startFlush(), this.options.batchMaxWaitMs);
    }
  }

  private startFlush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.flushing || this.waiting.length === 0) return;
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = null;
      // Whatever arrived during the commit has already waited that long: commit it right away.
      if (this.waiting.length > 0) this.startFlush();
    });
  }

  private async flushOnce(): Promise<void> {
    const group: Waiting[] = [];
    let count = 0;
    while (this.waiting.length > 0 && (group.length === 0 || count + this.waiting[0].events.length <= this.options.batchMaxEvents)) {
      const next = this.waiting.shift()!;
      group.push(next);
      count += next.events.length;
    }
    this.waitingEvents -= count;
    try {
      await this.exclusive(() => this.commit(group.flatMap((w) => w.events)));
      group.forEach((w) => w.resolve());
    } catch (err) {
      this.log.error({ err }, 'metering: committing events failed');
      group.forEach((w) => w.reject(err));
    }
  }

  /** Commits events (first of each (source, id) wins; known ones are skipped). Serial section only. */
  private async commit(events: PreparedEvent[]): Promise<CommitResult> {
    const fresh: PreparedEvent[] = [];
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.dedupe)) continue;
      seen.add(e.dedupe);
      fresh.push(e);
    }
    const known = await this.store.getMany(fresh.map((e) => dedupeKey(e.dedupe)));
    const accepted = fresh.filter((_, i) => known[i] === undefined);
    if (accepted.length === 0) return { accepted: 0, duplicates: events.length };
    const storedAt = String(Date.now()).padStart(STORED_AT_WIDTH, '0');
    const ops: BatchOp[] = [];
    const delta = newDelta();
    let seq = this.lastSeq;
    for (const e of accepted) {
      seq++;
      ops.push(
        { type: 'put', key: eventKey(e.typeEscaped, seq), value: storedAt + e.json },
        { type: 'put', key: timeKey(e.record.time, seq), value: `${e.typeEscaped}/${e.dedupe}` },
        { type: 'put', key: dedupeKey(e.dedupe), value: padSeq(seq) },
      );
      for (const m of this.meters.aggregating(e.record.type)) addEvent(delta, m, seq, e.record);
    }
    ops.push({ type: 'put', key: SEQ_KEY, value: padSeq(seq) });
    const aggregates = await this.ledger.prepare(delta);
    await this.store.batch(aggregates.ops.length ? ops.concat(aggregates.ops) : ops, { sync: true });
    this.lastSeq = seq;
    aggregates.committed();
    return { accepted: accepted.length, duplicates: events.length - accepted.length };
  }

  /** Commits everything queued, then refuses new events. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.waiting.length > 0 || this.flushing) {
      if (!this.flushing) this.startFlush();
      await this.flushing;
    }
    await this.idle();
  }

  /** Resolves when no serial work is running or queued. */
  async idle(): Promise<void> {
    let tail;
    do {
      tail = this.tail;
      await tail;
    } while (tail !== this.tail);
  }
}

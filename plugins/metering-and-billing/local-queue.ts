/**
 * Events for this gateway's own metering store (no `ingest_endpoint`): batched in memory as Kong's queue
 * batches them, then handed to the metering writer (plugin service `metering.ingest`), whose group
 * commit writes every batch that arrives meanwhile in one fsynced store write. A batch goes once it
 * holds max(max_batch_size, LOCAL_BATCH_EVENTS) events or `max_coalescing_delay` after its first event:
 * Kong's default batch of one is about HTTP requests, and for the writer a batch of one event would
 * cost a read-merge-write of the aggregates and an fsync per request.
 *
 * What a `kill -9` can lose on this path: the events not yet committed, i.e. those of the batch being
 * formed (none older than `max_coalescing_delay`, fewer than a batch) and those handed to the writer
 * whose commit had not finished (a few milliseconds of them). SIGTERM loses none: `close` hands over
 * everything before the writer closes.
 */
import type { Logger } from 'pino';
import { FullQueueLog, retryDelayMs, StoreUnwritableError, type QueueDepth } from '../../src/pdk/index.ts';
import { AGGREGATION_LAG_CODE, QUEUE_FULL_CODE, type LocalIngest, type RefusedEvent } from '../metering/public.ts';
import type { MeteringEvent } from './events.ts';
import type { RequestMeteringMetrics } from './metrics.ts';
import type { EventQueue } from './queue.ts';
import type { QueueConfig, RequestMeteringConfig } from './schema.ts';

/** The smallest batch handed to the writer (unless the coalescing delay ends it first). */
export const LOCAL_BATCH_EVENTS = 1000;

/** Metering's refusals that ask for a later retry, by code. */
const RETRY_LATER_CODES: ReadonlySet<unknown> = new Set([QUEUE_FULL_CODE, AGGREGATION_LAG_CODE]);

export class LocalQueue implements EventQueue {
  private waiting: MeteringEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Batches handed over and not yet committed, with events put back after a refusal. */
  private readonly handing = new Set<Promise<void>>();
  /** Consecutive failures; while above 0, batches wait for the retry delay. */
  private failures = 0;
  private failingSince = 0;
  private closing = false;
  private readonly fullLog: FullQueueLog;
  cannotRecord = false;

  constructor(
    readonly name: string,
    private queue: QueueConfig,
    private readonly ingest: () => LocalIngest | undefined,
    private readonly metrics: RequestMeteringMetrics,
    private readonly log: Logger,
  ) {
    this.fullLog = new FullQueueLog(name, log, (count) => metrics.dropped.inc({ queue: name, reason: 'queue_full' }, count));
  }

  reconfigure(config: RequestMeteringConfig): void {
    this.queue = config.queue;
  }

  private get batchSize(): number {
    return Math.max(this.queue.max_batch_size, LOCAL_BATCH_EVENTS);
  }

  depth(): QueueDepth {
    return { queue: this.name, memory: this.waiting.length, disk: 0 };
  }

  add(events: MeteringEvent[]): void {
    for (const event of events) this.waiting.push(event);
    const over = this.waiting.length - this.queue.max_entries;
    if (over > 0) {
      this.waiting.splice(0, over);
      this.fullLog.dropped(over);
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.waiting.length === 0 || this.failures > 0) return;
    if (this.waiting.length >= this.batchSize || this.closing) return this.handOver(this.closing);
    this.timer ??= setTimeout(() => this.handOver(true), this.queue.max_coalescing_delay * 1000);
  }

  /**
   * Hands the full batches to the writer, and with `all` the last partial one too. Batches are not sent
   * one after the other: the writer commits whatever arrives together in one write (Kong's
   * concurrency_limit is about HTTP requests, not fsyncs).
   */
  private handOver(all: boolean): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const ingest = this.ingest();
    if (!ingest) return this.failed(new Error('the metering plugin is not loaded'), []);
    while (this.waiting.length >= (all ? 1 : this.batchSize)) {
      const batch = this.waiting.splice(0, this.batchSize);
      const handed = ingest.ingest(batch).then(
        (refused) => this.committed(batch.length, refused),
        (err) => this.failed(err, batch),
      );
      this.handing.add(handed);
      void handed.finally(() => this.handing.delete(handed));
    }
    this.schedule();
  }

  private committed(count: number, refused: RefusedEvent[]): void {
    this.metrics.deliveries.inc({ queue: this.name });
    this.cannotRecord = false;
    if (refused.length > 0) {
      this.metrics.dropped.inc({ queue: this.name, reason: 'refused' }, refused.length);
      const [{ reason, code }] = refused;
      this.log.warn({ queue: this.name, refused: refused.length, of: count, reason, code }, 'request metering: events refused by the metering store');
    }
    if (this.failures > 0) {
      this.failures = 0;
      this.fullLog.resumed();
      this.schedule();
    }
  }

  /** A refused hand-over: its events wait at the front, and the queue retries after a doubling delay. */
  private failed(err: unknown, batch: MeteringEvent[]): void {
    const now = Date.now();
    this.cannotRecord = err instanceof StoreUnwritableError;
    if (this.failures === 0) this.failingSince = now;
    // Stopping, with a store that refuses writes until it is opened again: retrying cannot help.
    const hopeless = this.closing && this.cannotRecord;
    if (hopeless || now - this.failingSince > this.queue.max_retry_time * 1000) {
      this.metrics.dropped.inc({ queue: this.name, reason: 'retry_time' }, batch.length);
      this.log.error({ queue: this.name, err }, `queue ${this.name}: could not send entries, giving up after ${this.failures} retries. ${batch.length} queue entries were lost`);
    } else {
      this.waiting.unshift(...batch);
      // A full queue or a lagging aggregator asks for a later retry: the retries metric tells, not a line each.
      if (!RETRY_LATER_CODES.has((err as { code?: unknown } | null)?.code)) this.log.warn({ queue: this.name, err }, `queue ${this.name}: handler could not process entries`);
    }
    this.metrics.retries.inc({ queue: this.name });
    const delay = retryDelayMs(this.queue, this.failures++);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.handOver(true), this.closing ? Math.min(delay, 50) : delay);
  }

  async close(): Promise<void> {
    this.closing = true;
    this.handOver(true);
    while (this.waiting.length > 0 || this.handing.size > 0) {
      if (this.handing.size > 0) await Promise.all([...this.handing]);
      else await new Promise((r) => setTimeout(r, 10));
    }
    clearTimeout(this.timer);
  }
}

/**
 * Kong's queue settings (kong/tools/queue_schema.lua, `typedefs.queue`) as the plugins that batch and
 * send entries declare them, and what they mean to every queue alike: retries back off from
 * `initial_retry_delay`, doubling up to `max_retry_delay`; a full queue drops its oldest entries, with
 * one log line when it starts and one when it is back.
 */
import type { Logger } from 'pino';
import type { Issue, RecordSchema } from '../config/schema.ts';

const seconds = (fallback: number, min: number, max: number) => ({ type: 'number' as const, default: fallback, between: [min, max] as [number, number] });

/** The `queue` field of a plugin's config, with Kong's defaults. */
export const QUEUE_SCHEMA = {
  type: 'record',
  fields: {
    /** The queue's name; instances naming the same queue share it. */
    name: { type: 'string', len_min: 1, len_max: 128 },
    max_batch_size: { type: 'integer', default: 1, between: [1, 1_000_000] },
    /** Seconds after the first entry of a batch before the batch is sent, full or not. */
    max_coalescing_delay: seconds(1, 0, 3600),
    max_entries: { type: 'integer', default: 10_000, between: [1, 1_000_000] },
    max_bytes: { type: 'integer', gt: 0 },
    /** Seconds a failing batch is retried before it is given up. */
    max_retry_time: { type: 'number', default: 60, between: [0, 1_000_000] },
    initial_retry_delay: seconds(0.01, 0.001, 1_000_000),
    max_retry_delay: seconds(60, 0.001, 1_000_000),
    /** 1: one batch in flight at a time; -1: as many as there are batches ready. */
    concurrency_limit: { type: 'integer', default: 1, custom: (v) => (v === 1 || v === -1 ? undefined : 'expected one of: -1, 1') },
  },
} as const satisfies RecordSchema;

/** A queue's settings once defaulted (`max_bytes` and `name` may be absent). */
export interface QueueSettings {
  name?: string | null;
  max_batch_size: number;
  max_coalescing_delay: number;
  max_entries: number;
  max_bytes?: number | null;
  max_retry_time: number;
  initial_retry_delay: number;
  max_retry_delay: number;
  concurrency_limit: number;
}

/** Checks across the queue's fields, with paths under `queue`. */
export function queueSettingsProblems(queue: QueueSettings): Issue[] {
  return queue.max_retry_delay < queue.initial_retry_delay ? [{ path: ['queue', 'max_retry_delay'], message: 'must not be less than initial_retry_delay' }] : [];
}

/** Milliseconds before retry number `attempt` (0 for the first retry). */
export function retryDelayMs(queue: QueueSettings, attempt: number): number {
  return Math.min(queue.max_retry_delay, 2 ** attempt * queue.initial_retry_delay) * 1000;
}

/** Kong's log lines around a full queue: one when it starts dropping, one when it is back. */
export class FullQueueLog {
  private full = false;

  constructor(
    private readonly name: string,
    private readonly log: Logger,
    /** Counts the entries dropped (a metric). */
    private readonly counted: (count: number) => void,
  ) {}

  dropped(count: number): void {
    if (count <= 0) return;
    this.counted(count);
    if (this.full) return;
    this.full = true;
    this.log.error({ queue: this.name, dropped: count }, `queue ${this.name}: queue full, dropping old entries until processing is successful again`);
  }

  resumed(): void {
    if (!this.full) return;
    this.full = false;
    this.log.info({ queue: this.name }, `queue ${this.name}: queue resumed processing`);
  }
}

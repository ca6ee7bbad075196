/**
 * What the local and the remote queue share: Kong's queue settings read the same way
 * (kong/tools/queue.lua): batches of up to `max_batch_size` sent once full or `max_coalescing_delay`
 * after their first event, failures retried with a delay that doubles from `initial_retry_delay` up to
 * `max_retry_delay` until `max_retry_time`, and a full queue dropping its oldest events with one log
 * line per episode.
 */
import type { Logger } from 'pino';
import type { MeteringEvent } from './events.ts';
import type { QueueDepth, RequestMeteringMetrics } from './metrics.ts';
import type { QueueConfig, RequestMeteringConfig } from './schema.ts';

export interface EventQueue {
  readonly name: string;
  add(events: MeteringEvent[]): void;
  /** The settings of the instance using this queue changed (a reload). */
  reconfigure(config: RequestMeteringConfig): void;
  depth(): QueueDepth;
  /**
   * The store refuses every write (a full disk: StoreUnwritableError) since this queue's last attempt,
   * so the usage of a request served now could never be recorded: the plugin refuses such requests.
   */
  readonly cannotRecord: boolean;
  /** Hands over or stores everything it holds, then stops. */
  close(): Promise<void>;
}

/** Milliseconds before retry number `attempt` (0 for the first retry). */
export function retryDelayMs(queue: QueueConfig, attempt: number): number {
  return Math.min(queue.max_retry_delay, 2 ** attempt * queue.initial_retry_delay) * 1000;
}

/** Kong's log lines around a full queue: one when it starts dropping, one when it is back. */
export class FullQueueLog {
  private full = false;

  constructor(
    private readonly name: string,
    private readonly log: Logger,
    private readonly metrics: RequestMeteringMetrics,
  ) {}

  dropped(count: number): void {
    if (count <= 0) return;
    this.metrics.dropped.inc({ queue: this.name, reason: 'queue_full' }, count);
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

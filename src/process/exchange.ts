import { QuotaCounters, type QuotaRequest, type QuotaReservation } from './quota-counters.ts';
import { WindowCounters, type Admission } from './window-counters.ts';

export type { Admission } from './window-counters.ts';
export type { QuotaRequest, QuotaReservation } from './quota-counters.ts';

/**
 * What the processes of one node share, as Kong's workers share a dictionary: each process offers a
 * value under a topic (read when asked), and any of them gathers every process's value (the prometheus
 * plugin sums its counters so that a scrape of any worker reports the node's totals); and counters that
 * are the node's (rate-limiting's `local` policy), kept where every process reaches them.
 */
export interface NodeExchange {
  /**
   * Offers this process's value of `topic`; `read` (which may resolve later) is called each time a
   * process gathers it, with the gatherer's `argument`.
   */
  offer(topic: string, read: (argument?: string) => unknown): void;
  /** The value of `topic` of every process of the node that answered (this one's included). */
  gather(topic: string, argument?: string): Promise<unknown[]>;
  /**
   * Counts up to `requests` on each of the node's counters `keys` in one step, as many as every limit
   * leaves room for (see WindowCounters.admit); a new counter expires after its `ttlsMs`.
   */
  admit(keys: readonly string[], limits: readonly number[], ttlsMs: readonly number[], requests: number): Promise<Admission>;
  /** Reserves quota on one of the node's quota counters (see QuotaCounters). */
  reserve(request: QuotaRequest): Promise<QuotaReservation>;
  /** Adds `delta` (decimal text; negative releases) to one of the node's quota counters. */
  adjust(key: string, delta: string): void;
}

/** One process: its own values are the node's. */
export class LocalExchange implements NodeExchange {
  private readonly offered = new Map<string, (argument?: string) => unknown>();
  private readonly counters = new WindowCounters();
  private readonly quotas = new QuotaCounters();

  offer(topic: string, read: (argument?: string) => unknown): void {
    if (this.offered.has(topic)) throw new Error(`exchange topic ${topic} is offered twice`);
    this.offered.set(topic, read);
  }

  /** This process's value of `topic` (undefined when it offers none). */
  async read(topic: string, argument?: string): Promise<unknown> {
    return this.offered.get(topic)?.(argument);
  }

  async gather(topic: string, argument?: string): Promise<unknown[]> {
    return this.offered.has(topic) ? [await this.read(topic, argument)] : [];
  }

  async admit(keys: readonly string[], limits: readonly number[], ttlsMs: readonly number[], requests: number): Promise<Admission> {
    return this.counters.admit(keys, limits, ttlsMs, requests);
  }

  async reserve(request: QuotaRequest): Promise<QuotaReservation> {
    return this.quotas.reserve(request);
  }

  adjust(key: string, delta: string): void {
    this.quotas.adjust(key, delta);
  }
}

/**
 * Request counters per (plugin scope, identifier, period window), behind one interface for both policies:
 * `local` counts in this process's memory; `cluster` in the gateway's shared store, where each process
 * writes only its own count per window and the usage is the sum over every process (a grow-only counter:
 * plain last-writer-wins puts stay correct because no key has two writers).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Store } from '../../src/pipeline/plugin-api.ts';
import { windowEnd, windowStart, type Period } from './periods.ts';

export interface Counters {
  /** Requests counted so far in the windows holding `now`, one per period, in the given order. */
  usage(key: string, periods: readonly Period[], now: number): number[] | Promise<number[]>;
  /** Counts one more request in those windows. */
  add(key: string, periods: readonly Period[], now: number): void;
  /** Writes out what is still held (the store closes after this). */
  close(): Promise<void>;
}

/**
 * Keys tracked per window at most: an identifier is attacker-chosen (a header, an address), so past this
 * the oldest key of the window is forgotten (Kong's shared dict evicts the same way when full).
 */
const MAX_KEYS_PER_WINDOW = 100_000;

interface Window {
  start: number;
  counts: Map<string, number>;
}

/** Kong's `local` policy: one process's memory; each gateway process counts on its own. */
export class LocalCounters implements Counters {
  private readonly windows = new Map<Period, Window>();

  usage(key: string, periods: readonly Period[], now: number): number[] {
    return periods.map((period) => this.window(period, now).counts.get(key) ?? 0);
  }

  add(key: string, periods: readonly Period[], now: number): void {
    for (const period of periods) {
      const { counts } = this.window(period, now);
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (counts.size > MAX_KEYS_PER_WINDOW) counts.delete(counts.keys().next().value!);
    }
  }

  async close(): Promise<void> {}

  /** Windows are calendar-aligned for every key alike: a new window replaces the old one whole. */
  private window(period: Period, now: number): Window {
    const start = windowStart(period, now);
    let window = this.windows.get(period);
    if (window?.start !== start) this.windows.set(period, (window = { start, counts: new Map() }));
    return window;
  }
}

/** A window's counts in the store: the other processes' sum, and this process's own stored copy. */
interface StoredCounts {
  others: number;
  mine: number;
}

interface OwnCount {
  count: number;
  /** When the window ends: the stored count expires then. */
  end: number;
}

/**
 * Kong's `cluster` policy on the gateway's store. This process's counts are exact at once (held here and
 * written behind, coalesced per event-loop turn); the other processes' reach it with their writes, so
 * what several processes admit beyond a limit is bounded by the requests in flight between a write and
 * the next read.
 */
export class StoreCounters implements Counters {
  /** This process's name in the keys: each process owns its own counter per window. */
  private readonly processId = randomUUID();
  private readonly own = new Map<string, OwnCount>();
  private readonly dirty = new Set<string>();
  /** Store reads under way, by window prefix: requests arriving meanwhile share one (a busy key costs one scan, not one per request). */
  private readonly reading = new Map<string, Promise<StoredCounts>>();
  private flushScheduled = false;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

  async usage(key: string, periods: readonly Period[], now: number): Promise<number[]> {
    const prefixes = periods.map((period) => windowPrefix(key, period, now));
    const stored = await Promise.all(prefixes.map((prefix) => this.stored(prefix)));
    // This process's part is taken from memory after the read: requests it admitted meanwhile count.
    return prefixes.map((prefix, i) => {
      let own = this.own.get(prefix);
      // A count forgotten from memory (see forgetOldest) resumes from its stored copy.
      if (!own && stored[i].mine > 0) this.remember(prefix, (own = { count: stored[i].mine, end: windowEnd(periods[i], windowStart(periods[i], now)) }));
      return stored[i].others + (own?.count ?? 0);
    });
  }

  add(key: string, periods: readonly Period[], now: number): void {
    for (const period of periods) {
      const prefix = windowPrefix(key, period, now);
      let own = this.own.get(prefix);
      if (!own) this.remember(prefix, (own = { count: 0, end: windowEnd(period, windowStart(period, now)) }));
      own.count++;
      this.dirty.add(prefix);
    }
    this.scheduleFlush();
  }

  async close(): Promise<void> {
    await this.flushing;
    await this.flush();
  }

  private stored(prefix: string): Promise<StoredCounts> {
    let read = this.reading.get(prefix);
    if (!read) {
      read = this.storedSum(prefix).finally(() => this.reading.delete(prefix));
      this.reading.set(prefix, read);
    }
    return read;
  }

  private async storedSum(prefix: string): Promise<StoredCounts> {
    const mineKey = prefix + this.processId;
    let others = 0;
    let mine = 0;
    for await (const [k, v] of this.store.scan({ prefix })) {
      if (k === mineKey) mine = Number(v) || 0;
      else others += Number(v) || 0;
    }
    return { others, mine };
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flushing = this.flushing.then(() => this.flush());
    });
  }

  /** Writes every changed count whole (not a delta), so a failed write heals with the next one. */
  private async flush(): Promise<void> {
    if (this.dirty.size === 0) return;
    const now = Date.now();
    const ops = [...this.dirty].flatMap((prefix) => {
      const own = this.own.get(prefix);
      if (!own || own.end <= now) return [];
      return [{ type: 'put' as const, key: prefix + this.processId, value: String(own.count), ttlMs: own.end - now }];
    });
    this.dirty.clear();
    for (const [prefix, own] of this.own) if (own.end <= now) this.own.delete(prefix);
    if (ops.length === 0) return;
    try {
      await this.store.batch(ops);
    } catch (err) {
      this.log.error({ err }, 'rate-limiting: could not write the cluster counters');
    }
  }

  /** Keeps a count in memory; past the bound the oldest leaves (its stored copy stays counted as `mine`). */
  private remember(prefix: string, own: OwnCount): void {
    this.own.set(prefix, own);
    if (this.own.size <= MAX_KEYS_PER_WINDOW) return;
    const oldest = this.own.keys().next().value!;
    this.own.delete(oldest);
    this.dirty.delete(oldest);
  }
}

/** `<period>|<window start>|<counter key>|`: every process's count of one window shares it. */
function windowPrefix(key: string, period: Period, now: number): string {
  return `${period}|${windowStart(period, now)}|${key}|`;
}

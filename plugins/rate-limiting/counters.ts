/**
 * Request counters per (plugin scope, identifier, period window), behind one interface for every policy:
 *
 * - `MemoryCounters`: Kong's `local` policy when this process is its node's only one (nginx's shared dict
 *   is per node; here the node is one process).
 * - `StoreCounters`: counts kept in the gateway's store and admitted with its compare-and-set, so that no
 *   increment is lost and no more than the limit is admitted, whatever the number of processes counting.
 *   Kong's `cluster` policy counts over every node sharing the store.
 * - `NodeCounters`: Kong's `local` policy on a node of several worker processes: the node's counters in
 *   its primary process (nginx's shared dict, which its workers share), whatever the store.
 *
 * Each call admits one request when every window is below its limit and counts it; refused requests are
 * not counted (Kong's handler adds only what it lets through).
 */
import type { NodeExchange, PluginApi, Store } from '../../src/pdk/index.ts';
import { windowEnd, windowStart, type Period } from './periods.ts';

/** The windows a configuration limits and their limits (one per period); `id` names the pair, made once per configuration. */
export interface WindowLimits {
  periods: readonly Period[];
  values: readonly number[];
  id: string;
}

export interface Counters {
  /**
   * Counts one request in the windows of `limits.periods` holding now, unless one of them has reached its
   * limit. Answers each window's count before this request: the request is admitted when every count is
   * below its limit.
   */
  consume(key: string, limits: WindowLimits, now: number): number[] | Promise<number[]>;
  /**
   * Adds `amount` to the windows of `periods` holding now, whatever their counts (response-ratelimiting
   * counts what the upstream says a request used). Answers each window's count before; 0 only reads them.
   */
  add(key: string, periods: readonly Period[], amount: number, now: number): number[] | Promise<number[]>;
}

/** No limit: windows counted without a bound (a safe integer, as it may cross to another process). */
function unbounded(periods: readonly Period[]): WindowLimits {
  return { periods, values: periods.map(() => Number.MAX_SAFE_INTEGER), id: `${periods.join(',')}#unbounded` };
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

/** Kong's `local` policy on a node of one process: that process's memory. */
export class MemoryCounters implements Counters {
  private readonly windows = new Map<Period, Window>();

  consume(key: string, { periods, values }: WindowLimits, now: number): number[] {
    const windows = periods.map((period) => this.window(period, now).counts);
    const usage = windows.map((counts) => counts.get(key) ?? 0);
    if (admits(usage, values)) count(windows, key, 1);
    return usage;
  }

  add(key: string, periods: readonly Period[], amount: number, now: number): number[] {
    const windows = periods.map((period) => this.window(period, now).counts);
    const usage = windows.map((counts) => counts.get(key) ?? 0);
    if (amount > 0) count(windows, key, amount);
    return usage;
  }

  /** Windows are calendar-aligned for every key alike: a new window replaces the old one whole. */
  private window(period: Period, now: number): Window {
    const start = windowStart(period, now);
    let window = this.windows.get(period);
    if (window?.start !== start) this.windows.set(period, (window = { start, counts: new Map() }));
    return window;
  }
}

/** Adds `amount` to `key` in each window, forgetting a window's oldest key past MAX_KEYS_PER_WINDOW. */
function count(windows: Map<string, number>[], key: string, amount: number): void {
  for (const counts of windows) {
    counts.set(key, (counts.get(key) ?? 0) + amount);
    if (counts.size > MAX_KEYS_PER_WINDOW) counts.delete(counts.keys().next().value!);
  }
}

interface Waiter {
  resolve(usage: number[]): void;
  reject(err: unknown): void;
}

/** The requests of one counter key and limits waiting in this process for the next round. */
interface Queue {
  key: string;
  limits: WindowLimits;
  waiters: Waiter[];
  /** A round is under way (new waiters join the next one). */
  draining: boolean;
}

/**
 * Counters kept outside this process, counted in rounds: requests for one key that arrive while a round
 * is under way wait and go together in the next one, which admits as many of them as the limits leave
 * room for. Under load a process costs one round per key at a time, not one per request.
 */
abstract class RoundCounters implements Counters {
  private readonly queues = new Map<string, Queue>();

  consume(key: string, limits: WindowLimits): Promise<number[]> {
    const id = `${key}#${limits.id}`;
    const queue = this.queues.get(id) ?? { key, limits, waiters: [], draining: false };
    this.queues.set(id, queue);
    const usage = new Promise<number[]>((resolve, reject) => queue.waiters.push({ resolve, reject }));
    if (!queue.draining) void this.drain(id, queue);
    return usage;
  }

  /** A round of its own per call: usage is read once per request and added once per response. */
  async add(key: string, periods: readonly Period[], amount: number): Promise<number[]> {
    return (await this.admit(key, unbounded(periods), amount)).counts;
  }

  /**
   * Admits up to `requests` at once in the windows of `limits` holding now: each window's count before,
   * and how many were counted.
   */
  protected abstract admit(key: string, limits: WindowLimits, requests: number): Promise<{ counts: number[]; admitted: number }>;

  /** Rounds until nobody waits; the queue then leaves memory, so idle keys cost nothing. */
  private async drain(id: string, queue: Queue): Promise<void> {
    queue.draining = true;
    while (queue.waiters.length > 0) {
      const waiters = queue.waiters.splice(0);
      try {
        const { counts, admitted } = await this.admit(queue.key, queue.limits, waiters.length);
        // The n-th request sees the n-1 admitted before it; those past the room see a full window.
        waiters.forEach((waiter, n) => waiter.resolve(counts.map((count) => count + Math.min(n, admitted))));
      } catch (err) {
        for (const waiter of waiters) waiter.reject(err);
      }
    }
    this.queues.delete(id);
  }
}

/** Each window's counter key (`<period>|<window start>|<key>`) and how long it has left, now. */
function windowsOf(key: string, periods: readonly Period[], now: number): { keys: string[]; ttlsMs: number[] } {
  const starts = periods.map((period) => windowStart(period, now));
  return { keys: periods.map((period, i) => `${period}|${starts[i]}|${key}`), ttlsMs: periods.map((period, i) => windowEnd(period, starts[i]) - now) };
}

/**
 * Counts in the store, one entry per window (expiring with its window), changed only by `commitIf` from
 * the count just read: a round costs two store calls, and its conflicts are with other processes only.
 */
export class StoreCounters extends RoundCounters {
  constructor(private readonly store: Store) {
    super();
  }

  /** Reads the windows' counts and adds what fits under every limit, if no one changed them meanwhile (else reads again). */
  protected async admit(key: string, { periods, values: limits }: WindowLimits, requests: number): Promise<{ counts: number[]; admitted: number }> {
    for (;;) {
      const { keys, ttlsMs } = windowsOf(key, periods, Date.now());
      const stored = await this.store.getMany(keys);
      const counts = stored.map((value) => Number(value ?? 0) || 0);
      // A limit need not be whole (Kong's is a number): a count below it admits one more.
      const admitted = Math.max(0, Math.min(requests, ...limits.map((limit, i) => Math.ceil(limit - counts[i]))));
      if (admitted === 0) return { counts, admitted };
      const expectations = keys.map((k, i) => ({ key: k, value: stored[i] }));
      const writes = keys.map((k, i) => ({ type: 'put' as const, key: k, value: String(counts[i] + admitted), ttlMs: ttlsMs[i] }));
      if (await this.store.commitIf(expectations, writes)) return { counts, admitted };
    }
  }
}

/**
 * Kong's `local` policy on a node of several worker processes: the node's counters, kept in its primary
 * process (as nginx keeps a shared dictionary for its workers); a round is one message there and back.
 */
export class NodeCounters extends RoundCounters {
  constructor(
    private readonly node: NodeExchange,
    /** Keeps these counters apart from other users of the node's. */
    private readonly prefix: string,
  ) {
    super();
  }

  protected admit(key: string, { periods, values }: WindowLimits, requests: number): Promise<{ counts: number[]; admitted: number }> {
    const { keys, ttlsMs } = windowsOf(this.prefix + key, periods, Date.now());
    return this.node.admit(keys, values, ttlsMs, requests);
  }
}

/** Whether a request is admitted with these counts: every window below its limit. */
function admits(usage: readonly number[], limits: readonly number[]): boolean {
  return usage.every((count, i) => count < limits[i]);
}

/**
 * A plugin's counters for each policy: `local` counts per node (a node of several processes counts in its
 * primary, which every worker asks, under `nodePrefix`), `cluster` in the plugin's store.
 */
export function countersByPolicy(api: PluginApi, nodePrefix: string): Record<'local' | 'cluster', Counters> {
  return {
    local: api.processesOnNode > 1 ? new NodeCounters(api.node, nodePrefix) : new MemoryCounters(),
    cluster: new StoreCounters(api.store.namespace('cluster')),
  };
}

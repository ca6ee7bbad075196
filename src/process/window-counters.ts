/**
 * Counters that expire and admit up to a limit in one step: what Kong's workers do with an nginx shared
 * dictionary's `incr`. A node of one process keeps them in that process; a node of several keeps them
 * in its primary, which every worker asks (NodeExchange.admit), so a count is the node's.
 */

/** Keys kept at most: they are attacker-chosen (a header, an address); past this the oldest is forgotten. */
const MAX_KEYS = 200_000;
/** Expired keys dropped per call, oldest first: keeps memory to the live windows without a timer. */
const SWEEP_PER_CALL = 4;

export interface Admission {
  /** Each key's count before this call. */
  counts: number[];
  /** How many of the requests were counted: as many as every limit left room for. */
  admitted: number;
}

export class WindowCounters {
  private readonly entries = new Map<string, { count: number; expiresAt: number }>();

  /**
   * Counts up to `requests` on every key at once, as many as every key's limit leaves room for (a limit
   * need not be whole: a count below it admits one more). A new key expires `ttlsMs` from now.
   */
  admit(keys: readonly string[], limits: readonly number[], ttlsMs: readonly number[], requests: number, now = Date.now()): Admission {
    this.sweep(now);
    const counts = keys.map((key) => this.countOf(key, now));
    const admitted = Math.max(0, Math.min(requests, ...limits.map((limit, i) => Math.ceil(limit - counts[i]))));
    if (admitted > 0) keys.forEach((key, i) => this.add(key, admitted, now, now + ttlsMs[i]));
    return { counts, admitted };
  }

  private countOf(key: string, now: number): number {
    const entry = this.entries.get(key);
    return entry && entry.expiresAt > now ? entry.count : 0;
  }

  private add(key: string, by: number, now: number, expiresAt: number): void {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt > now) entry.count += by;
    else {
      this.entries.delete(key);
      this.entries.set(key, { count: by, expiresAt });
      if (this.entries.size > MAX_KEYS) this.entries.delete(this.entries.keys().next().value!);
    }
  }

  /** Drops a few expired keys from the oldest end (keys are set in the order their windows begin). */
  private sweep(now: number): void {
    for (let i = 0; i < SWEEP_PER_CALL; i++) {
      const oldest = this.entries.entries().next().value;
      if (!oldest || oldest[1].expiresAt > now) return;
      this.entries.delete(oldest[0]);
    }
  }
}

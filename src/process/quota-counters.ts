/**
 * Quota counters: usage admitted against a limit, reserved before the work it pays for and adjusted
 * once its real amount is known (the entitlement-enforcement plugin's hard limits). A node of one
 * process keeps them in that process; a node of several keeps them in its primary, which every worker
 * asks (NodeExchange.reserve/adjust), so one counter holds every worker's admissions.
 *
 * Amounts are decimal text (usage may be fractional: a sum of gigabytes), added exactly.
 */
import { Decimal as DecimalJs } from 'decimal.js';

const Decimal = DecimalJs.clone({ precision: 60 });
type Decimal = DecimalJs;
const ZERO = new Decimal(0);

export interface QuotaRequest {
  key: string;
  /** No more than this may be reserved in all (decimal text); null: no limit, every request is counted. */
  limit: string | null;
  /**
   * Usage known from elsewhere (what the meter committed, decimal text): the counter is raised to it first,
   * so usage the counter never saw (posted events, an earlier run) counts against the limit too.
   */
  floor: string;
  /** What each request reserves (decimal text); 0 admits while the counter is below the limit. */
  amount: string;
  /** Requests asking at once; as many are reserved as the limit leaves room for. */
  requests: number;
  /** When the counter may be forgotten (ms since the epoch): the end of its period, with a margin. */
  expiresAt: number;
}

export interface QuotaReservation {
  /** The counter before the first reserved request (after the raise to the floor), decimal text. */
  before: string;
  /** How many of the requests were reserved: the first `reserved` of them. */
  reserved: number;
}

/** How many requests of `amount` fit between `base` and `limit`. */
export function fitting(base: Decimal, limit: string | null, amount: Decimal, requests: number): number {
  if (limit === null) return requests;
  const room = new Decimal(limit).minus(base);
  if (amount.isZero()) return room.greaterThan(0) ? requests : 0;
  return Math.max(0, Math.min(requests, room.dividedToIntegerBy(amount).toNumber()));
}

/** One reservation round on a counter's current value: what it becomes and what the requests get. */
export function reserveOn(current: string | undefined, r: Pick<QuotaRequest, 'limit' | 'floor' | 'amount' | 'requests'>): { next: string; reservation: QuotaReservation } {
  const base = Decimal.max(new Decimal(current ?? 0), new Decimal(r.floor));
  const amount = new Decimal(r.amount);
  const reserved = fitting(base, r.limit, amount, r.requests);
  return { next: base.plus(amount.times(reserved)).toFixed(), reservation: { before: base.toFixed(), reserved } };
}

/** A counter after `delta` (never below zero: a release cannot make room that was never taken). */
export function adjustedOn(current: string | undefined, delta: string): string {
  return Decimal.max(new Decimal(current ?? 0).plus(delta), ZERO).toFixed();
}

export class QuotaCounters {
  private readonly entries = new Map<string, { value: string; expiresAt: number }>();
  private nextSweep = 0;

  reserve(r: QuotaRequest, now = Date.now()): QuotaReservation {
    this.sweep(now);
    const entry = this.entries.get(r.key);
    const { next, reservation } = reserveOn(entry && entry.expiresAt > now ? entry.value : undefined, r);
    this.entries.set(r.key, { value: next, expiresAt: r.expiresAt });
    return reservation;
  }

  /** Adds `delta` (decimal text, negative to release) to a counter; one that expired is not brought back. */
  adjust(key: string, delta: string): void {
    const entry = this.entries.get(key);
    if (entry) entry.value = adjustedOn(entry.value, delta);
  }

  /** Expired counters go, at most once a minute (their number is the live subscriptions' features). */
  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + 60_000;
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }
}

/** What the n-th request (from 0) of a round of requests of `amount` got: reserved or not, and the counter before it. */
export function nthOfRound(round: QuotaReservation, n: number, amount: string): QuotaReservation {
  const before = new Decimal(round.before).plus(new Decimal(amount).times(Math.min(n, round.reserved)));
  return { before: before.toFixed(), reserved: n < round.reserved ? 1 : 0 };
}

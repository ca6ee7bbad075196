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
  /** No more than this may be reserved in all (decimal text). */
  limit: string;
  /** A soft limit: every request is counted, none refused (what remains still says where the limit is). */
  soft?: boolean;
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
function fitting(base: Decimal, limit: string, amount: Decimal, requests: number): number {
  const room = new Decimal(limit).minus(base);
  if (amount.isZero()) return room.greaterThan(0) ? requests : 0;
  return Math.max(0, Math.min(requests, room.dividedToIntegerBy(amount).toNumber()));
}

/** Whole numbers whose sums stay exact as JavaScript numbers: counts, the usual case, skip decimal arithmetic. */
const SMALL_INTEGER = /^-?\d{1,14}$/;

function small(...texts: (string | null | undefined)[]): boolean {
  return texts.every((t) => t === null || t === undefined || SMALL_INTEGER.test(t));
}

/** One reservation round on a counter's current value: what it becomes and what the requests get. */
export function reserveOn(current: string | undefined, r: Pick<QuotaRequest, 'limit' | 'soft' | 'floor' | 'amount' | 'requests'>): { next: string; reservation: QuotaReservation } {
  if (small(current, r.floor, r.amount, r.limit)) {
    const base = Math.max(Number(current ?? 0), Number(r.floor));
    const amount = Number(r.amount);
    const room = Number(r.limit) - base;
    const fit = amount === 0 ? (room > 0 ? r.requests : 0) : Math.max(0, Math.min(r.requests, Math.floor(room / amount)));
    const reserved = r.soft ? r.requests : fit;
    return { next: String(base + amount * reserved), reservation: { before: String(base), reserved } };
  }
  const base = Decimal.max(new Decimal(current ?? 0), new Decimal(r.floor));
  const amount = new Decimal(r.amount);
  const reserved = r.soft ? r.requests : fitting(base, r.limit, amount, r.requests);
  return { next: base.plus(amount.times(reserved)).toFixed(), reservation: { before: base.toFixed(), reserved } };
}

/** `a - b` of two decimal texts. */
export function difference(a: string, b: string): string {
  if (small(a, b)) return String(Number(a) - Number(b));
  return new Decimal(a).minus(b).toFixed();
}

/** A counter after `delta` (never below zero: a release cannot make room that was never taken). */
export function adjustedOn(current: string | undefined, delta: string): string {
  if (small(current, delta)) return String(Math.max(0, Number(current ?? 0) + Number(delta)));
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

/** What one request of a round got. */
export interface QuotaAnswer {
  reserved: boolean;
  /** What the limit leaves once this request is counted (decimal text, never negative). */
  remaining: string;
}

/** What the n-th request (from 0) of `request`'s round got, from the round's reservation. */
export function answerOf(round: QuotaReservation, n: number, request: Pick<QuotaRequest, 'limit' | 'amount'>): QuotaAnswer {
  const reserved = n < round.reserved;
  const counted = reserved ? n + 1 : round.reserved;
  if (small(round.before, request.amount, request.limit)) {
    return { reserved, remaining: String(Math.max(0, Number(request.limit) - Number(round.before) - Number(request.amount) * counted)) };
  }
  const used = new Decimal(round.before).plus(new Decimal(request.amount).times(counted));
  return { reserved, remaining: Decimal.max(new Decimal(request.limit).minus(used), ZERO).toFixed() };
}

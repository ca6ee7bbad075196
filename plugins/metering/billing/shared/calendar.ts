/**
 * Instants, ISO 8601 durations and the periods a cadence cuts from an anchor. Calendar steps go
 * through Temporal in UTC: a month step from the anchor clamps to the month end (anchor Jan 31 ->
 * Feb 28 -> Mar 31), and period n is computed from the anchor, never by chaining n steps (chaining
 * would drift to the 28th for good after February).
 */
import { Temporal } from 'temporal-polyfill';

/** Milliseconds since the epoch. */
export type Instant = number;

export interface Period {
  from: Instant;
  to: Instant;
}

export interface Cadence {
  /** The ISO 8601 text as given. */
  text: string;
  years: number;
  months: number;
  weeks: number;
  days: number;
  hours: number;
  minutes: number;
  /** The exact length when no calendar unit (years, months) is involved; UTC days are 24 h. */
  fixedMs: number | undefined;
  /** Average length, to estimate which period holds an instant. */
  approximateMs: number;
}

const MINUTE = 60_000;
const DAY = 86_400_000;
/** Longest accepted duration text: bounds parsing of hostile input. */
const MAX_DURATION_TEXT = 40;
/** No cadence needs more than a century; bounds the period arithmetic too. */
const MAX_CADENCE_MS = 100 * 366 * DAY;

/**
 * A positive ISO 8601 duration of whole minutes (PT1M up to a century), or undefined. Seconds and
 * fractions are refused: usage windows and invoices are cut at whole minutes or coarser.
 */
export function parseCadence(text: unknown): Cadence | undefined {
  if (typeof text !== 'string' || text.length > MAX_DURATION_TEXT || !/^P/.test(text)) return undefined;
  let d: Temporal.Duration;
  try {
    d = Temporal.Duration.from(text);
  } catch {
    return undefined;
  }
  if (d.sign <= 0 || d.seconds || d.milliseconds || d.microseconds || d.nanoseconds) return undefined;
  const fixed = d.weeks * 7 * DAY + d.days * DAY + d.hours * 3_600_000 + d.minutes * MINUTE;
  const approximateMs = fixed + d.years * 365.2425 * DAY + d.months * 30.436875 * DAY;
  if (approximateMs < MINUTE || approximateMs > MAX_CADENCE_MS) return undefined;
  const calendar = d.years !== 0 || d.months !== 0;
  return {
    text,
    years: d.years,
    months: d.months,
    weeks: d.weeks,
    days: d.days,
    hours: d.hours,
    minutes: d.minutes,
    fixedMs: calendar ? undefined : fixed,
    approximateMs,
  };
}

/** The n-th boundary after the anchor (n may be negative): anchor + n × cadence, clamped to month ends. */
export function boundary(anchor: Instant, cadence: Cadence, n: number): Instant {
  if (cadence.fixedMs !== undefined) return anchor + n * cadence.fixedMs;
  const start = Temporal.Instant.fromEpochMilliseconds(anchor).toZonedDateTimeISO('UTC');
  const step = {
    years: cadence.years * n,
    months: cadence.months * n,
    weeks: cadence.weeks * n,
    days: cadence.days * n,
    hours: cadence.hours * n,
    minutes: cadence.minutes * n,
  };
  return start.add(step).epochMilliseconds;
}

/** The index n of the period [boundary(n), boundary(n + 1)) that holds `t`. */
export function periodIndexAt(anchor: Instant, cadence: Cadence, t: Instant): number {
  if (cadence.fixedMs !== undefined) return Math.floor((t - anchor) / cadence.fixedMs);
  let n = Math.floor((t - anchor) / cadence.approximateMs);
  while (boundary(anchor, cadence, n) > t) n--;
  while (boundary(anchor, cadence, n + 1) <= t) n++;
  return n;
}

/** The aligned period n. */
export function alignedPeriod(anchor: Instant, cadence: Cadence, n: number): Period {
  return { from: boundary(anchor, cadence, n), to: boundary(anchor, cadence, n + 1) };
}

/** True when `t` is one of the cadence's boundaries. */
export function isBoundary(anchor: Instant, cadence: Cadence, t: Instant): boolean {
  return boundary(anchor, cadence, periodIndexAt(anchor, cadence, t)) === t;
}

/** An RFC 3339 date-time with an offset, as milliseconds; undefined when invalid. */
export function parseInstant(text: unknown): Instant | undefined {
  if (typeof text !== 'string' || text.length > 64) return undefined;
  try {
    return Temporal.Instant.from(text).epochMilliseconds;
  } catch {
    return undefined;
  }
}

/** UTC RFC 3339 text; milliseconds only when there are some. */
export function formatInstant(t: Instant): string {
  const text = new Date(t).toISOString();
  return text.endsWith('.000Z') ? text.slice(0, -5) + 'Z' : text;
}

/**
 * A subscription instant (start, end, billing anchor): truncated down to its whole second. Event times
 * are whole seconds, so every period boundary falls between two seconds and an event counts in the
 * period that holds its second, the subscription's first second included.
 */
export function wholeSecond(t: Instant): Instant {
  return Math.floor(t / 1000) * 1000;
}

/**
 * The event times, in whole seconds, that fall within [from, to). Boundaries are whole seconds
 * (wholeSecond); those of a subscription made before they were (with milliseconds) are rounded up,
 * as they were counted then.
 */
export function eventSeconds(period: Period): { from: number; to: number } {
  return { from: Math.ceil(period.from / 1000), to: Math.ceil(period.to / 1000) };
}

/** Longest collection period: a month of late events is already far more than any producer needs. */
const MAX_COLLECTION_MS = 31 * DAY;

/** A collection period (ISO 8601, no calendar units, PT0S up to 31 days) in ms, or undefined. */
export function parseCollectionPeriod(text: unknown): number | undefined {
  if (typeof text !== 'string' || text.length > MAX_DURATION_TEXT || !/^P/.test(text)) return undefined;
  try {
    const d = Temporal.Duration.from(text);
    if (d.sign < 0 || d.years || d.months) return undefined;
    // Weeks and days are 24-hour days here (UTC), so no calendar is needed.
    const ms = Temporal.Duration.from({ days: d.weeks * 7 + d.days, hours: d.hours, minutes: d.minutes, seconds: d.seconds, milliseconds: d.milliseconds }).total({ unit: 'milliseconds' });
    return ms <= MAX_COLLECTION_MS ? ms : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Query windows (tumbling, aligned to the clock of a time zone: local hours, calendar days and months,
 * DST aware) and their cover by stored aggregate buckets: the coarsest roll-up level that fits, so a
 * year at day granularity reads about 365 buckets per series instead of half a million minutes.
 */
import { LEVELS, type LevelName } from './aggregates.ts';
import { fromLocal, localTime, offsetAt } from '../shared/time.ts';

export const GRANULARITIES = ['PT1M', 'PT1H', 'P1D', 'P1M'] as const;
export type Granularity = (typeof GRANULARITIES)[number];

const MINUTE = 60;
const HOUR = 3_600;

const floorTo = (t: number, size: number) => t - (((t % size) + size) % size);
export const floorMinute = (t: number) => floorTo(t, MINUTE);
export const ceilMinute = (t: number) => floorTo(t + MINUTE - 1, MINUTE);

/** Start of the window holding instant `t`. */
export function windowStart(t: number, granularity: Granularity, timeZone: string): number {
  switch (granularity) {
    case 'PT1M':
      return floorMinute(t);
    case 'PT1H': {
      if (timeZone === 'UTC') return floorTo(t, HOUR);
      const offset = offsetAt(t, timeZone);
      return floorTo(t + offset, HOUR) - offset;
    }
    case 'P1D': {
      if (timeZone === 'UTC') return floorTo(t, 86_400);
      const l = localTime(t, timeZone);
      const start = fromLocal({ ...l, hour: 0, minute: 0, second: 0 }, timeZone);
      return start <= t ? start : fromLocal({ ...shiftDays(l, -1), hour: 0, minute: 0, second: 0 }, timeZone);
    }
    case 'P1M': {
      const l = localTime(t, timeZone);
      return fromLocal({ year: l.year, month: l.month, day: 1, hour: 0, minute: 0, second: 0 }, timeZone);
    }
  }
}

function shiftDays(l: { year: number; month: number; day: number }, days: number) {
  const d = new Date(Date.UTC(l.year, l.month - 1, l.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** End of the window starting at `start` (= start of the next one). */
export function windowEnd(start: number, granularity: Granularity, timeZone: string): number {
  switch (granularity) {
    case 'PT1M':
      return start + MINUTE;
    case 'PT1H': {
      if (timeZone === 'UTC') return start + HOUR;
      const next = windowStart(start + HOUR, granularity, timeZone);
      return next > start ? next : start + HOUR;
    }
    case 'P1D': {
      if (timeZone === 'UTC') return start + 86_400;
      // Usually the offset does not change within the day: then the next midnight is 24 hours later.
      const offset = offsetAt(start, timeZone);
      if (offsetAt(start + 86_400, timeZone) === offset && (start + offset) % 86_400 === 0) return start + 86_400;
      const l = localTime(start, timeZone);
      return fromLocal({ ...shiftDays(l, 1), hour: 0, minute: 0, second: 0 }, timeZone);
    }
    case 'P1M': {
      const l = localTime(start, timeZone);
      const year = l.month === 12 ? l.year + 1 : l.year;
      const month = l.month === 12 ? 1 : l.month + 1;
      return fromLocal({ year, month, day: 1, hour: 0, minute: 0, second: 0 }, timeZone);
    }
  }
}

export interface LevelRange {
  level: LevelName;
  size: number;
  start: number;
  end: number;
}

/**
 * Covers the minute-aligned span [start, end) with runs of buckets, coarsest level first.
 * `levels` limits the levels used (coarsest first; the minute level must be included).
 */
export function coverSpan(start: number, end: number, emit: (range: LevelRange) => void, levels: readonly { name: LevelName; size: number }[] = LEVELS): void {
  let cur = start;
  while (cur < end) {
    const i = levels.findIndex((l) => cur % l.size === 0 && cur + l.size <= end);
    const level = levels[i];
    let runEnd = cur + Math.floor((end - cur) / level.size) * level.size;
    const coarser = levels[i - 1];
    if (coarser) {
      const boundary = floorTo(cur, coarser.size) + coarser.size;
      if (boundary < runEnd && boundary + coarser.size <= end) runEnd = boundary;
    }
    emit({ level: level.name, size: level.size, start: cur, end: runEnd });
    cur = runEnd;
  }
}

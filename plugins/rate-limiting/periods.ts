/**
 * Kong's rate-limiting windows (kong/tools/timestamp.lua, kong/plugins/rate-limiting/expiration.lua):
 * fixed calendar windows in UTC, each starting at a whole second, minute, hour, day, month or year.
 */
export const PERIODS = ['second', 'minute', 'hour', 'day', 'month', 'year'] as const;
export type Period = (typeof PERIODS)[number];

/** Kong's EXPIRATION table, in seconds: its RateLimit-Reset counts from these (a "month" is 30 days). */
export const PERIOD_SECONDS: Record<Period, number> = { second: 1, minute: 60, hour: 3600, day: 86400, month: 2592000, year: 31536000 };

const FIXED_MS: Partial<Record<Period, number>> = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };

/** The start of the window of `period` holding `now` (ms since the epoch, UTC). */
export function windowStart(period: Period, now: number): number {
  const fixed = FIXED_MS[period];
  if (fixed !== undefined) return now - (now % fixed);
  const date = new Date(now);
  return period === 'month' ? Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1) : Date.UTC(date.getUTCFullYear(), 0, 1);
}

/** The end of that window (the start of the next one). */
export function windowEnd(period: Period, start: number): number {
  const fixed = FIXED_MS[period];
  if (fixed !== undefined) return start + fixed;
  const date = new Date(start);
  return period === 'month' ? Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) : Date.UTC(date.getUTCFullYear() + 1, 0, 1);
}

/**
 * A session's lifetime, as lua-resty-session 4 keeps it: created at, renewed at (the rolling timeout counts
 * from there), touched at (the idling timeout counts from there). A session is valid while none of its
 * timeouts has passed (0 turns one off). The persistent ("remember") cookie has its own rolling and absolute
 * timeouts and no idling one: it outlives a closed browser, not an expired session.
 */
import type { SessionConfig } from './schema.ts';

export interface Lifetime {
  /** Epoch seconds. */
  createdAt: number;
  renewedAt: number;
  touchedAt: number;
}

export interface Timeouts {
  idling: number;
  rolling: number;
  absolute: number;
}

/** Seconds left before each timeout (Infinity for one that is off); a session is valid while all are positive. */
export interface Remaining {
  idling: number;
  rolling: number;
  absolute: number;
  /** The least of the three: when the session ends unless renewed or touched. */
  timeout: number;
}

export const sessionTimeouts = (config: SessionConfig): Timeouts => ({
  idling: config.idling_timeout,
  rolling: config.rolling_timeout,
  absolute: config.absolute_timeout,
});

export const rememberTimeouts = (config: SessionConfig): Timeouts => ({
  idling: 0,
  rolling: config.remember_rolling_timeout,
  absolute: config.remember_absolute_timeout,
});

export function remaining(lifetime: Lifetime, timeouts: Timeouts, now: number): Remaining {
  const left = (timeout: number, since: number) => (timeout > 0 ? since + timeout - now : Infinity);
  const idling = left(timeouts.idling, lifetime.touchedAt);
  const rolling = left(timeouts.rolling, lifetime.renewedAt);
  const absolute = left(timeouts.absolute, lifetime.createdAt);
  return { idling, rolling, absolute, timeout: Math.min(idling, rolling, absolute) };
}

/**
 * What a request on a valid session does to it: `renew` once three quarters of the rolling timeout have
 * passed (a new rolling window, within the absolute one), `touch` once a quarter of the idling timeout (at
 * most a minute) has passed since the last touch; else nothing, and no Set-Cookie is sent.
 */
export function refreshOf(lifetime: Lifetime, timeouts: Timeouts, now: number): 'renew' | 'touch' | undefined {
  if (timeouts.rolling > 0 && now - lifetime.renewedAt >= timeouts.rolling * 0.75) return 'renew';
  if (timeouts.idling > 0 && now - lifetime.touchedAt >= Math.min(60, timeouts.idling / 4)) return 'touch';
  return undefined;
}

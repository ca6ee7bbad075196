/**
 * Which thresholds of a balance-threshold rule an entitlement has reached, in exact decimals, as
 * OpenMeter's consumer picks them (consumer/entitlementbalancethreshold.go): thresholds come in two
 * kinds, usage (`usage_value`, `usage_percentage` of the limit) and balance (`balance_value`), and of
 * each kind only the most advanced one reached counts. So usage jumping from 0 to the whole limit
 * fires 100 % alone, never 80 % after it.
 *
 * Every threshold is turned into the usage at which it is reached, once per limit (`levelsOf`): a
 * usage threshold at its value (or that share of the limit), a balance threshold at `limit - value`
 * (the balance, `max(limit - usage, 0)`, is at or below the value exactly from there). Judging a
 * usage is then comparisons only, and the lowest level says at once whether anything can be reached.
 *
 * Tollgate counts a threshold as reached when usage is at or past it (`>=`; OpenMeter: strictly past
 * it), so 100 % of a hard limit fires when the limit is used up — the moment the gateway starts
 * refusing — and not never (usage under a hard limit stops at the limit).
 */
import { Decimal } from 'decimal.js';
import type { Threshold } from './model.ts';

export interface Level {
  threshold: Threshold;
  kind: 'usage' | 'balance';
  /** The usage from which it is reached. */
  at: Decimal;
}

const HUNDRED = new Decimal(100);

function levelOf(threshold: Threshold, limit: Decimal): Level | undefined {
  switch (threshold.type) {
    case 'usage_value':
    case 'NUMBER':
      return { threshold, kind: 'usage', at: new Decimal(threshold.value) };
    case 'usage_percentage':
    case 'PERCENT':
      // Without a limit there is nothing to take a share of (OpenMeter: no balance available).
      return limit.isZero() ? undefined : { threshold, kind: 'usage', at: limit.times(threshold.value).div(HUNDRED) };
    case 'balance_value':
      return { threshold, kind: 'balance', at: limit.minus(threshold.value) };
  }
}

/** A rule's thresholds as usage levels, for an entitlement of this limit. */
export function levelsOf(thresholds: readonly Threshold[], limit: Decimal): Level[] {
  return thresholds.map((t) => levelOf(t, limit)).filter((l): l is Level => l !== undefined);
}

/** The thresholds reached at `usage`: of each kind the most advanced (the highest level reached). */
export function reached(levels: readonly Level[], usage: Decimal): Threshold[] {
  const top: Partial<Record<Level['kind'], Level>> = {};
  for (const level of levels) {
    const best = top[level.kind];
    if (usage.greaterThanOrEqualTo(level.at) && (!best || level.at.greaterThan(best.at))) top[level.kind] = level;
  }
  return [top.usage, top.balance].filter((l): l is Level => l !== undefined).map((l) => l.threshold);
}

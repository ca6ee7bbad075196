/**
 * Which thresholds of a balance-threshold rule an entitlement's value has reached, in exact decimals,
 * as OpenMeter's consumer picks them (consumer/entitlementbalancethreshold.go): thresholds come in two
 * kinds, usage (`usage_value`, `usage_percentage` of the limit) and balance (`balance_value`), and of
 * each kind only the most advanced one reached counts. So usage jumping from 0 to the whole limit
 * fires 100 % alone, never 80 % after it.
 *
 * Tollgate counts a threshold as reached when usage is at or past it (`>=`; OpenMeter: strictly past
 * it), so 100 % of a hard limit fires when the limit is used up — the moment the gateway starts
 * refusing — and not never (usage under a hard limit stops at the limit).
 */
import { Decimal } from 'decimal.js';
import type { Threshold } from './model.ts';

/** An entitlement's value in its current usage period, as exact decimal texts. */
export interface EntitlementValue {
  usage: string;
  limit: string;
  balance: string;
}

interface Reached {
  threshold: Threshold;
  /** Where it sits in usage units (usage kind) or balance units (balance kind). */
  at: Decimal;
}

const HUNDRED = new Decimal(100);

function usageLevel(t: Threshold, limit: Decimal): Decimal | undefined {
  if (t.type === 'usage_value' || t.type === 'NUMBER') return new Decimal(t.value);
  if (t.type === 'usage_percentage' || t.type === 'PERCENT') return limit.isZero() ? undefined : limit.times(t.value).div(HUNDRED);
  return undefined;
}

/** The thresholds reached, at most one per kind (the most advanced). */
export function reachedThresholds(thresholds: readonly Threshold[], value: EntitlementValue): Threshold[] {
  const usage = new Decimal(value.usage);
  const balance = new Decimal(value.balance);
  const limit = new Decimal(value.limit);
  let byUsage: Reached | undefined;
  let byBalance: Reached | undefined;
  for (const threshold of thresholds) {
    if (threshold.type === 'balance_value') {
      const at = new Decimal(threshold.value);
      if (balance.lessThanOrEqualTo(at) && (!byBalance || at.lessThan(byBalance.at))) byBalance = { threshold, at };
      continue;
    }
    const at = usageLevel(threshold, limit);
    if (at && usage.greaterThanOrEqualTo(at) && (!byUsage || at.greaterThan(byUsage.at))) byUsage = { threshold, at };
  }
  return [byUsage, byBalance].filter((r): r is Reached => r !== undefined).map((r) => r.threshold);
}

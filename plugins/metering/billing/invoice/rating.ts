/**
 * Price math (OpenMeter's billing/rating): unit, graduated and volume prices on a quantity, flat fees
 * prorated by time. Every line, and every tier of a line, is rounded to the currency's minor unit half
 * away from zero; a line's amount is the sum of its rounded tiers. `up_to_amount` is inclusive.
 */
import { Decimal, formatDecimal, roundAmount, sum, ZERO, type Currency } from '../shared/money.ts';
import type { Price, Tier } from '../productcatalog/port.ts';

export interface RatedTier {
  /** The tier's bounds: quantities above `from` up to `to` (inclusive; null: no bound). */
  from: string;
  to: string | null;
  quantity: string;
  amount: string;
}

export interface Rated {
  amount: Decimal;
  tiers?: RatedTier[];
}

type UsagePrice = Extract<Price, { type: 'unit' | 'graduated' | 'volume' }>;

const component = (c: { amount: string } | null) => (c ? new Decimal(c.amount) : ZERO);

/** The amount of `quantity` units (negative quantities count as none). */
export function rateUsage(price: UsagePrice, quantity: Decimal, currency: Currency): Rated {
  const q = Decimal.max(quantity, ZERO);
  if (price.type === 'unit') return { amount: roundAmount(q.times(price.amount), currency) };
  return price.type === 'graduated' ? graduated(price.tiers, q, currency) : volume(price.tiers, q, currency);
}

/** Lower bound of each tier: the previous tier's `up_to_amount` (0 for the first). */
function lowerBounds(tiers: Tier[]): Decimal[] {
  return tiers.map((_, i) => (i === 0 ? ZERO : new Decimal(tiers[i - 1].up_to_amount!)));
}

/**
 * Each tier prices the units within it at its unit price, plus its flat price once when usage enters
 * it; the first tier is always entered (its flat price is a minimum charge, as OpenMeter).
 */
function graduated(tiers: Tier[], q: Decimal, currency: Currency): Rated {
  const lows = lowerBounds(tiers);
  const rated: RatedTier[] = [];
  const amounts: Decimal[] = [];
  tiers.forEach((tier, i) => {
    const low = lows[i];
    if (i > 0 && !q.greaterThan(low)) return;
    const high = tier.up_to_amount === null ? q : Decimal.min(q, tier.up_to_amount);
    const within = Decimal.max(high.minus(low), ZERO);
    const amount = roundAmount(component(tier.flat_price).plus(within.times(component(tier.unit_price))), currency);
    amounts.push(amount);
    rated.push({ from: formatDecimal(low), to: tier.up_to_amount, quantity: formatDecimal(within), amount: formatDecimal(amount) });
  });
  return { amount: sum(amounts), tiers: rated };
}

/** The tier the total reaches prices every unit (its flat price once). */
function volume(tiers: Tier[], q: Decimal, currency: Currency): Rated {
  const i = tiers.findIndex((t) => t.up_to_amount === null || q.lessThanOrEqualTo(t.up_to_amount));
  const tier = tiers[i];
  const amount = roundAmount(component(tier.flat_price).plus(q.times(component(tier.unit_price))), currency);
  return { amount, tiers: [{ from: formatDecimal(lowerBounds(tiers)[i]), to: tier.up_to_amount, quantity: formatDecimal(q), amount: formatDecimal(amount) }] };
}

/** A flat fee for the part `served` of its full period (`full`), both in ms; the whole fee when not prorated. */
export function rateFlat(amount: string, served: number, full: number, prorate: boolean, currency: Currency): Decimal {
  const fee = new Decimal(amount);
  return roundAmount(prorate && served < full ? fee.times(served).dividedBy(full) : fee, currency);
}

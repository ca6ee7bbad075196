/**
 * Plans, phases, rate cards, prices and entitlement templates: their shape, and the structural checks
 * of a plan body (types, required fields, price and tier rules). Rules that need other records (features)
 * or that OpenMeter reports by code (critical ones reject, warnings block publishing) are in
 * plan-validation.ts.
 */
import { parseCadence } from '../shared/calendar.ts';
import { invalid } from '../shared/errors.ts';
import { amount, array, boolean, decimalOrNumber, description, isObject, join, labels, name, object, resourceKey, sealed, text, type Body, type Problems } from '../shared/fields.ts';
import { currencyOf, formatDecimal, type Decimal } from '../shared/money.ts';

export type Price =
  | { type: 'free' }
  | { type: 'flat'; amount: string }
  | { type: 'unit'; amount: string }
  | { type: 'graduated' | 'volume'; tiers: Tier[] };

export interface Tier {
  /** Inclusive upper bound; null for the open-ended last tier. */
  up_to_amount: string | null;
  unit_price: { amount: string } | null;
  flat_price: { amount: string } | null;
}

export type EntitlementTemplate =
  | { type: 'metered'; limit: string | null; is_soft_limit: boolean; usage_period: string | null }
  | { type: 'boolean' }
  | { type: 'static'; config: string };

export type PaymentTerm = 'in_advance' | 'in_arrears';

export interface RateCard {
  key: string;
  name: string;
  description: string | null;
  /** As given (id or key); resolved to both by plan validation. */
  feature: { id: string | null; key: string | null } | null;
  price: Price;
  payment_term: PaymentTerm;
  /** null: one-time (flat prices only). */
  billing_cadence: string | null;
  entitlement: EntitlementTemplate | null;
}

export interface Phase {
  key: string;
  name: string;
  description: string | null;
  /** null: open-ended (the last phase). */
  duration: string | null;
  rate_cards: RateCard[];
}

export interface PlanDefinition {
  key: string;
  name: string;
  description: string | null;
  labels: Record<string, string>;
  currency: string;
  billing_cadence: string;
  pro_rating_enabled: boolean;
  phases: Phase[];
}

export const USAGE_PRICES = ['unit', 'graduated', 'volume'];
const PRICE_TYPES = ['free', 'flat', 'unit', 'graduated', 'volume'] as const;
const PLAN_FIELDS = ['key', 'name', 'description', 'labels', 'currency', 'billing_cadence', 'pro_rating_enabled', 'phases'];
const MAX_PHASES = 10;
const MAX_RATE_CARDS = 100;
const MAX_TIERS = 100;

/**
 * Structural problems of a plan body and the critical rules that need nothing else (currency, cadence,
 * tiers), or the definition when there are none.
 */
export function parsePlan(body: unknown): { definition?: PlanDefinition; problems: Problems } {
  if (!isObject(body)) return { problems: [invalid('', 'request body must be a JSON object', 'type')] };
  const out: Problems = [];
  sealed(body, PLAN_FIELDS, '', out);
  const key = resourceKey(body, 'key', '', out);
  const planName = name(body, '', out);
  const desc = description(body, '', out);
  const planLabels = labels(body, '', out);
  const currency = currencyField(body, out);
  const cadence = cadenceField(body, 'billing_cadence', '', out, true);
  const proRating = boolean(body, 'pro_rating_enabled', '', true, out);
  const phaseList = array(body, 'phases', '', out, { required: true, min: 1, max: MAX_PHASES }) ?? [];
  const phases = phaseList.map((p, i) => parsePhase(p, join('phases', i), cadence ?? null, out)).filter((p): p is Phase => p !== undefined);
  if (out.length > 0) return { problems: out };
  return {
    definition: {
      key: key!,
      name: planName!,
      description: desc,
      labels: planLabels,
      currency: currency!,
      billing_cadence: cadence!,
      pro_rating_enabled: proRating,
      phases,
    },
    problems: out,
  };
}

/** A coded critical problem (OpenMeter's `productcatalog` validation codes). */
export function critical(field: string, code: string, message: string): Problems[number] {
  return invalid(field, message, code, { code, severity: 'critical' });
}

function currencyField(body: Body, out: Problems): string | undefined {
  const v = body.currency;
  if (v === undefined || v === null || v === '') return void out.push(invalid('currency', 'currency is required', 'required'));
  const currency = currencyOf(v);
  if (currency === 'unknown') return void out.push(critical('currency', 'currency_not_found', `currency not found: ${String(v).slice(0, 16)}`));
  if (currency === 'not_fiat') return void out.push(critical('currency', 'currency_invalid', `currency ${v} must be fiat`));
  return currency.code;
}

/** An ISO 8601 duration field (PT1M and up, whole minutes); null when explicitly null and allowed. */
function cadenceField(body: Body, field: string, at: string, out: Problems, required: boolean, code = 'plan_billing_cadence_invalid'): string | undefined {
  const v = body[field];
  const path = join(at, field);
  if (v === undefined || v === null) {
    if (required) out.push(invalid(path, `${field} is required`, 'required'));
    return undefined;
  }
  if (!parseCadence(v)) return void out.push(critical(path, code, `invalid ${field}: ${String(v).slice(0, 40)} (an ISO 8601 duration of whole minutes, PT1M or longer)`));
  return v as string;
}

function parsePhase(raw: unknown, at: string, planCadence: string | null, out: Problems): Phase | undefined {
  if (!isObject(raw)) return void out.push(invalid(at, 'must be an object', 'type'));
  sealed(raw, ['key', 'name', 'description', 'duration', 'rate_cards'], at, out);
  const key = resourceKey(raw, 'key', at, out);
  const phaseName = name(raw, at, out);
  const desc = description(raw, at, out);
  const duration = raw.duration === null || raw.duration === undefined ? null : cadenceField(raw, 'duration', at, out, false, 'plan_phase_duration_invalid');
  const cards = array(raw, 'rate_cards', at, out, { required: true, max: MAX_RATE_CARDS }) ?? [];
  const rateCards = cards.map((c, i) => parseRateCard(c, join(join(at, 'rate_cards'), i), planCadence, out)).filter((c): c is RateCard => c !== undefined);
  if (key === undefined || phaseName === undefined) return undefined;
  return { key, name: phaseName, description: desc, duration: duration ?? null, rate_cards: rateCards };
}

function parseRateCard(raw: unknown, at: string, planCadence: string | null, out: Problems): RateCard | undefined {
  if (!isObject(raw)) return void out.push(invalid(at, 'must be an object', 'type'));
  sealed(raw, ['key', 'name', 'description', 'feature', 'feature_key', 'price', 'payment_term', 'billing_cadence', 'entitlement'], at, out);
  const key = resourceKey(raw, 'key', at, out);
  const cardName = name(raw, at, out);
  const desc = description(raw, at, out);
  const feature = featureRef(raw, at, out);
  const price = parsePrice(raw, at, out);
  const usageBased = price !== undefined && USAGE_PRICES.includes(price.type);
  const cadence = rateCardCadence(raw, at, usageBased, planCadence, out);
  const term = paymentTerm(raw, at, usageBased, out);
  const entitlement = parseEntitlement(raw, at, cadence, out);
  if (key === undefined || cardName === undefined || price === undefined) return undefined;
  return { key, name: cardName, description: desc, feature, price, payment_term: term, billing_cadence: cadence, entitlement };
}

/**
 * A rate card's cadence. Omitted or null on a flat or free price: a one-time charge, as OpenMeter reads
 * it (a setup fee written for OpenMeter must not come back every period). A usage price has no one-time
 * form: omitted, it bills at the plan's cadence (OpenMeter refuses it); null is refused.
 */
function rateCardCadence(raw: Body, at: string, usageBased: boolean, planCadence: string | null, out: Problems): string | null {
  const v = raw.billing_cadence;
  if (v === undefined && usageBased) return planCadence;
  if (v !== undefined && v !== null) return cadenceField(raw, 'billing_cadence', at, out, false, 'rate_card_billing_cadence_invalid') ?? null;
  if (usageBased) out.push(critical(join(at, 'billing_cadence'), 'rate_card_usage_based_requires_billing_cadence', 'a usage-based price needs a billing cadence (one-time charges are flat)'));
  return null;
}

function featureRef(raw: Body, at: string, out: Problems): RateCard['feature'] {
  const byKey = text(raw, 'feature_key', at, { max: 64 }, out);
  const ref = object(raw, 'feature', at, out);
  if (ref) sealed(ref, ['id', 'key'], join(at, 'feature'), out);
  const id = ref ? text(ref, 'id', join(at, 'feature'), { max: 64 }, out) ?? null : null;
  const key = (ref ? text(ref, 'key', join(at, 'feature'), { max: 64 }, out) : undefined) ?? byKey ?? null;
  if (ref && id === null && key === null) out.push(invalid(join(at, 'feature.id'), 'feature id or key is required', 'required'));
  return id === null && key === null ? null : { id, key };
}

function paymentTerm(raw: Body, at: string, usageBased: boolean, out: Problems): PaymentTerm {
  const v = raw.payment_term;
  if (v === undefined || v === null) return usageBased ? 'in_arrears' : 'in_advance';
  if (v !== 'in_advance' && v !== 'in_arrears') return out.push(invalid(join(at, 'payment_term'), 'must be one of: in_advance, in_arrears', 'enum', { choices: ['in_advance', 'in_arrears'] })), 'in_advance';
  if (usageBased && v === 'in_advance') out.push(invalid(join(at, 'payment_term'), 'usage-based prices are always paid in arrears', 'invalid'));
  return v;
}

function parsePrice(raw: Body, at: string, out: Problems): Price | undefined {
  const p = object(raw, 'price', at, out, true);
  if (!p) return undefined;
  const path = join(at, 'price');
  const type = p.type;
  if (!(PRICE_TYPES as readonly unknown[]).includes(type)) return void out.push(invalid(join(path, 'type'), `must be one of: ${PRICE_TYPES.join(', ')}`, 'enum', { choices: PRICE_TYPES }));
  if (type === 'free') return sealed(p, ['type'], path, out), { type: 'free' };
  if (type === 'flat' || type === 'unit') {
    sealed(p, ['type', 'amount'], path, out);
    const a = amount(p, 'amount', path, out);
    return a === undefined ? undefined : { type, amount: formatDecimal(a) };
  }
  sealed(p, ['type', 'tiers'], path, out);
  const tiers = parseTiers(p, path, out);
  return tiers && { type: type as 'graduated' | 'volume', tiers };
}

/** Tiers sorted by their inclusive upper bounds, unique, exactly one open-ended tier (last). */
function parseTiers(p: Body, at: string, out: Problems): Tier[] | undefined {
  const list = array(p, 'tiers', at, out, { required: true, min: 1, max: MAX_TIERS });
  if (!list) return undefined;
  const before = out.length;
  const tiers: { tier: Tier; bound: Decimal | undefined }[] = [];
  list.forEach((t, i) => {
    const path = join(join(at, 'tiers'), i);
    if (!isObject(t)) return void out.push(invalid(path, 'must be an object', 'type'));
    sealed(t, ['up_to_amount', 'unit_price', 'flat_price'], path, out);
    const bound = amount(t, 'up_to_amount', path, out, false);
    const unit = priceComponent(t, 'unit_price', path, out);
    const flat = priceComponent(t, 'flat_price', path, out);
    if (unit === null && flat === null && t.unit_price == null && t.flat_price == null) out.push(invalid(path, 'a tier needs a unit_price, a flat_price or both', 'required'));
    tiers.push({ tier: { up_to_amount: bound === undefined ? null : formatDecimal(bound), unit_price: unit, flat_price: flat }, bound });
  });
  if (out.length > before) return undefined;
  const open = tiers.filter((t) => t.bound === undefined);
  if (open.length !== 1) return void out.push(critical(join(at, 'tiers'), 'price_tiers_invalid', 'tiers need exactly one open-ended tier (without up_to_amount), which is the last one'));
  tiers.sort((a, b) => (a.bound === undefined ? 1 : b.bound === undefined ? -1 : a.bound.comparedTo(b.bound)));
  for (let i = 1; i < tiers.length - 1; i++) {
    if (tiers[i].bound!.equals(tiers[i - 1].bound!)) return void out.push(critical(join(at, 'tiers'), 'price_tiers_invalid', `up_to_amount ${tiers[i].tier.up_to_amount} appears in two tiers`));
  }
  return tiers.map((t) => t.tier);
}

function priceComponent(t: Body, field: string, at: string, out: Problems): { amount: string } | null {
  const c = object(t, field, at, out);
  if (!c) return null;
  sealed(c, ['amount'], join(at, field), out);
  const a = amount(c, 'amount', join(at, field), out);
  return a === undefined ? null : { amount: formatDecimal(a) };
}

function parseEntitlement(raw: Body, at: string, cardCadence: string | null, out: Problems): EntitlementTemplate | null {
  const e = object(raw, 'entitlement', at, out);
  if (!e) return null;
  const path = join(at, 'entitlement');
  if (e.type === 'boolean') return sealed(e, ['type'], path, out), { type: 'boolean' };
  if (e.type === 'static') {
    sealed(e, ['type', 'config'], path, out);
    const config = object(e, 'config', path, out, true);
    return config ? { type: 'static', config: JSON.stringify(config) } : null;
  }
  if (e.type !== 'metered') return out.push(invalid(join(path, 'type'), 'must be one of: metered, boolean, static', 'enum', { choices: ['metered', 'boolean', 'static'] })), null;
  sealed(e, ['type', 'limit', 'is_soft_limit', 'usage_period'], path, out);
  const limit = decimalOrNumber(e, 'limit', path, out, false);
  const soft = boolean(e, 'is_soft_limit', path, false, out);
  const period = e.usage_period === undefined || e.usage_period === null ? cardCadence : cadenceField(e, 'usage_period', path, out, false, 'entitlement_template_usage_period_invalid') ?? null;
  if (period === null && (e.usage_period === undefined || e.usage_period === null)) {
    out.push(critical(join(path, 'usage_period'), 'entitlement_template_usage_period_required', 'metered entitlement requires usage_period (or a billing cadence on its rate card)'));
  }
  return { type: 'metered', limit: limit === undefined ? null : formatDecimal(limit), is_soft_limit: soft, usage_period: period };
}

/**
 * Entitlements: what a live subscription grants, from its rate cards' templates. Boolean and static ones
 * give access while the subscription is active; a metered one gives `limit` units per usage period
 * (anchored at the billing anchor, counted from the subscription's start), reset to the full limit at
 * each period, and has access while usage is below the limit, or always when the limit is soft.
 * Both access endpoints are answered from here; the gateway's enforcement decides from a cache of the
 * same values (access-cache.ts).
 */
import { alignedPeriod, eventSeconds, formatInstant, parseCadence, periodIndexAt, type Cadence, type Instant, type Period } from '../shared/calendar.ts';
import type { Customer, CustomerService } from '../customer/port.ts';
import { invalid, precondition, validationFailed } from '../shared/errors.ts';
import type { FeatureMeter, FeatureService } from '../productcatalog/port.ts';
import { Decimal, formatDecimal, ZERO } from '../shared/money.ts';
import type { Subscription, SubscriptionService } from '../subscription/port.ts';
import type { UsageSource } from '../shared/usage.ts';
import { stableId } from '../../shared/ids.ts';

/** One entitlement a subscription grants. */
export interface Grant {
  /** Stable per subscription and feature (the entitlement's id in OpenMeter's v1 API). */
  id: string;
  subscriptionId: string;
  customer: { id: string; key: string };
  featureKey: string;
  featureId: string | null;
  type: 'boolean' | 'static' | 'metered';
  config?: string;
  limit?: Decimal;
  soft?: boolean;
  usagePeriod?: Cadence;
  meter?: FeatureMeter | null;
  anchor: Instant;
  activeFrom: Instant;
  activeTo: Instant | null;
  subjects: string[];
}

export interface AccessValue {
  type: Grant['type'];
  feature_key: string;
  has_access: boolean;
  config?: string;
  usage?: string;
  limit?: string;
  balance?: string;
  overage?: string;
  is_soft_limit?: boolean;
  period?: { from: string; to: string };
}

export type ReasonCode = 'usage_limit_reached' | 'feature_unavailable' | 'feature_not_found';

export function grantsOf(s: Subscription): Grant[] {
  const grants: Grant[] = [];
  for (const { card, meter } of s.items) {
    const e = card.entitlement;
    if (!e || !card.feature?.key) continue;
    const base = {
      id: stableId(`tollgate-entitlement:${s.id}:${card.feature.key}`),
      subscriptionId: s.id,
      customer: s.customer,
      featureKey: card.feature.key,
      featureId: card.feature.id,
      anchor: Date.parse(s.billing_anchor),
      activeFrom: Date.parse(s.active_from),
      activeTo: s.active_to === null ? null : Date.parse(s.active_to),
      subjects: s.subjects,
    };
    if (e.type === 'metered') {
      grants.push({ ...base, type: 'metered', limit: new Decimal(e.limit ?? '0'), soft: e.is_soft_limit, usagePeriod: parseCadence(e.usage_period)!, meter });
    } else grants.push({ ...base, type: e.type, ...(e.type === 'static' ? { config: e.config } : {}) });
  }
  return grants.sort((a, b) => (a.featureKey < b.featureKey ? -1 : 1));
}

/** The usage period of a metered grant holding `t`, counted from the subscription's start. */
export function usagePeriodAt(g: Grant, t: Instant): Period {
  const p = alignedPeriod(g.anchor, g.usagePeriod!, periodIndexAt(g.anchor, g.usagePeriod!, t));
  return { from: Math.max(p.from, g.activeFrom), to: p.to };
}

/** The access a grant gives with `usage` units used in its current period. */
export function evaluate(g: Grant, usage: Decimal, period: Period | undefined): AccessValue {
  if (g.type !== 'metered') return { type: g.type, feature_key: g.featureKey, has_access: true, ...(g.config !== undefined ? { config: g.config } : {}) };
  const limit = g.limit!;
  const balance = Decimal.max(limit.minus(usage), ZERO);
  return {
    type: 'metered',
    feature_key: g.featureKey,
    has_access: g.soft! || usage.lessThan(limit),
    usage: formatDecimal(usage),
    limit: formatDecimal(limit),
    balance: formatDecimal(balance),
    overage: formatDecimal(Decimal.max(usage.minus(limit), ZERO)),
    is_soft_limit: g.soft!,
    ...(period ? { period: { from: formatInstant(period.from), to: formatInstant(period.to) } } : {}),
  };
}

export interface AccessQueryEntry {
  matched: string[];
  customer: { id: string; key: string };
  features: Record<string, { has_access: boolean; reason?: { code: ReasonCode; message: string } }>;
  updated_at: string;
}

const MAX_QUERY_KEYS = 100;

export class EntitlementService {
  constructor(
    private readonly usage: UsageSource,
    private readonly customers: CustomerService,
    private readonly subscriptions: SubscriptionService,
    private readonly features: FeatureService,
  ) {}

  /** Usage of a metered grant in `period` (`consistent`: see UsageSource.quantity). */
  async usageOf(g: Grant, period: Period, options: { consistent?: boolean } = {}): Promise<Decimal> {
    if (!g.meter) return ZERO;
    const { from, to } = eventSeconds(period);
    return new Decimal(await this.usage.quantity({ meterId: g.meter.id, subjects: g.subjects, filters: g.meter.filters, from, to }, options));
  }

  /** The grants of the customer's subscription active at `now` (none without one). */
  async grants(customer: Customer, now: Instant): Promise<Grant[]> {
    const s = await this.subscriptions.activeAt(customer.id, now);
    return s ? grantsOf(s) : [];
  }

  /** Every grant of the subscriptions active at `now`, by customer and feature key. */
  async allGrants(now: Instant): Promise<Grant[]> {
    const active = (await this.subscriptions.list()).filter((s) => Date.parse(s.active_from) <= now && (s.active_to === null || now < Date.parse(s.active_to)));
    const order = (g: Grant) => `${g.customer.key}\u0000${g.featureKey}`;
    return active.flatMap(grantsOf).sort((a, b) => (order(a) < order(b) ? -1 : 1));
  }

  /** What one grant gives at `now`: the usage of its current period against its limit. */
  async valueOf(g: Grant, now: Instant): Promise<AccessValue> {
    const period = g.type === 'metered' ? usagePeriodAt(g, now) : undefined;
    return evaluate(g, period ? await this.usageOf(g, period) : ZERO, period);
  }

  /**
   * A metered grant's usage in each of `windows` (ascending, within its life), and the balance it had
   * at each window's start: its limit less what its usage period had used by then.
   */
  async history(g: Grant, windows: Period[]): Promise<{ period: Period; usage: Decimal; balanceAtStart: Decimal }[]> {
    const out: { period: Period; usage: Decimal; balanceAtStart: Decimal }[] = [];
    for (const w of windows) {
      const used = await this.usageOf(g, { from: usagePeriodAt(g, w.from).from, to: w.from });
      out.push({ period: w, usage: await this.usageOf(g, w), balanceAtStart: Decimal.max(g.limit!.minus(used), ZERO) });
    }
    return out;
  }

  async values(customer: Customer, now: Instant): Promise<AccessValue[]> {
    const values: AccessValue[] = [];
    for (const g of await this.grants(customer, now)) values.push(await this.valueOf(g, now));
    return values;
  }

  /** `GET /customers/{c}/entitlement-access`: the entitlements active now, by feature key. */
  async access(customerIdOrKey: string, now = Date.now()): Promise<AccessValue[]> {
    const customer = await this.customers.get(customerIdOrKey);
    if (customer.deleted_at) throw precondition(`customer ${customer.key} is deleted`);
    return this.values(customer, now);
  }

  /** `POST /entitlement-access/query`: customers by key or subject key, features by key (all when none). */
  async query(body: unknown, now = Date.now()): Promise<{ data: AccessQueryEntry[]; errors: { code: string; message: string; customer: string }[] }> {
    const { customerKeys, featureKeys } = parseAccessQuery(body);
    const live = (await this.features.list()).filter((f) => f.archived_at === null);
    const wanted = featureKeys ?? live.map((f) => f.key).sort();
    const known = new Set(live.map((f) => f.key));
    const byCustomer = new Map<string, { customer: Customer; matched: string[] }>();
    const errors: { code: string; message: string; customer: string }[] = [];
    for (const key of customerKeys) {
      const customer = await this.customers.resolve(key);
      if (!customer) errors.push({ code: 'customer_not_found', message: `no customer has the key or subject key ${key}`, customer: key });
      else byCustomer.set(customer.id, { customer, matched: [...(byCustomer.get(customer.id)?.matched ?? []), key] });
    }
    const data: AccessQueryEntry[] = [];
    for (const { customer, matched } of byCustomer.values()) {
      const values = new Map((await this.values(customer, now)).map((v) => [v.feature_key, v]));
      const features: AccessQueryEntry['features'] = {};
      for (const key of wanted) features[key] = accessOf(key, values.get(key), known.has(key));
      data.push({ matched, customer: { id: customer.id, key: customer.key }, features, updated_at: formatInstant(now) });
    }
    return { data, errors };
  }
}

/** A feature's entry in the batch answer, with OpenMeter's reason codes. */
export function accessOf(featureKey: string, value: AccessValue | undefined, known: boolean): AccessQueryEntry['features'][string] {
  if (value?.has_access) return { has_access: true };
  if (value) return { has_access: false, reason: { code: 'usage_limit_reached', message: `usage limit of ${value.limit} reached for ${featureKey}` } };
  if (known) return { has_access: false, reason: { code: 'feature_unavailable', message: `the customer has no entitlement to ${featureKey}` } };
  return { has_access: false, reason: { code: 'feature_not_found', message: `feature not found: ${featureKey}` } };
}

function keyList(body: Record<string, unknown>, field: string, required: boolean): string[] | undefined {
  const v = body[field];
  if (v === undefined || v === null) {
    if (required) throw validationFailed([invalid(`${field}.keys`, `${field}.keys is required`, 'required')]);
    return undefined;
  }
  const list = typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>).keys : undefined;
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_QUERY_KEYS || list.some((k) => typeof k !== 'string' || k.length === 0 || k.length > 256)) {
    throw validationFailed([invalid(`${field}.keys`, `must be an array of 1 to ${MAX_QUERY_KEYS} non-empty strings`, 'invalid')]);
  }
  return [...new Set(list as string[])];
}

function parseAccessQuery(body: unknown): { customerKeys: string[]; featureKeys: string[] | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw validationFailed([invalid('', 'request body must be a JSON object', 'type')]);
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !['customer', 'feature', 'include_credits'].includes(k));
  if (unknown.length) throw validationFailed(unknown.map((k) => invalid(k, 'unknown property', 'unknown_property')));
  return { customerKeys: keyList(b, 'customer', true)!, featureKeys: keyList(b, 'feature', false) };
}

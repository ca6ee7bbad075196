/**
 * Subscriptions: a customer on one plan version, from creation (never earlier) until canceled. Billing
 * periods are aligned to `billing_anchor` by the plan's cadence and clipped to the subscription. One
 * subscription per customer at a time (the customer's slot, taken in the create commit); a change ends
 * the current one and starts the next at the same instant in one commit.
 */
import { ulid } from '../../shared/ids.ts';
import { alignedPeriod, formatInstant, isBoundary, parseCadence, periodIndexAt, wholeSecond, type Cadence, type Instant, type Period } from '../shared/calendar.ts';
import { liveSubscriptionOf, usageSubjects, type Customer, type CustomerService, type Slot } from '../customer/port.ts';
import { conflict, forbidden, invalid, notFound, precondition, ruleBroken, validationFailed } from '../shared/errors.ts';
import type { FeatureMeter, FeatureService, Plan, PlanRef, PlanService, RateCard } from '../productcatalog/port.ts';
import { keys, PREFIXES, type BillingStore, type Transaction } from '../shared/store.ts';

export type SubscriptionStatus = 'active' | 'inactive' | 'canceled' | 'scheduled';

/** A rate card as the subscription bought it, with its feature's meter (both frozen at creation). */
export interface Item {
  card: RateCard;
  meter: FeatureMeter | null;
}

export interface Subscription {
  id: string;
  customer: { id: string; key: string };
  /** The customer's usage subjects (they cannot change while the subscription is live). */
  subjects: string[];
  plan: { id: string; key: string; version: number };
  name: string;
  active_from: string;
  active_to: string | null;
  billing_anchor: string;
  billing_cadence: string;
  currency: string;
  pro_rating_enabled: boolean;
  items: Item[];
  created_at: string;
  updated_at: string;
}

/** A billing period of a subscription: its part of the aligned period, and the whole aligned period. */
export interface BillingPeriod extends Period {
  /** 0 for the period holding `active_from`, then 1, 2, … */
  index: number;
  full: Period;
}

export type Timing = 'immediate' | 'next_billing_cycle' | Instant;

export function subscriptionStatus(s: Pick<Subscription, 'active_from' | 'active_to'>, now = Date.now()): SubscriptionStatus {
  if (Date.parse(s.active_from) > now) return 'scheduled';
  if (s.active_to === null) return 'active';
  return Date.parse(s.active_to) <= now ? 'inactive' : 'canceled';
}

/** Whether any rate card costs something (a plan of free cards invoices nothing, in no currency). */
const priced = (cards: RateCard[]) => cards.some((c) => c.price.type !== 'free');

export const cadenceOf = (s: Pick<Subscription, 'billing_cadence'>): Cadence => parseCadence(s.billing_cadence)!;

/** Billing period `index` of the subscription, or undefined when the subscription has ended before it. */
export function billingPeriod(s: Subscription, index: number): BillingPeriod | undefined {
  const anchor = Date.parse(s.billing_anchor);
  const cadence = cadenceOf(s);
  const start = Date.parse(s.active_from);
  const full = alignedPeriod(anchor, cadence, periodIndexAt(anchor, cadence, start) + index);
  const from = Math.max(full.from, start);
  const to = s.active_to === null ? full.to : Math.min(full.to, Date.parse(s.active_to));
  return from < to ? { index, from, to, full } : undefined;
}

/** The billing period holding `t`, when the subscription is active then. */
export function billingPeriodAt(s: Subscription, t: Instant): BillingPeriod | undefined {
  const start = Date.parse(s.active_from);
  if (t < start || (s.active_to !== null && t >= Date.parse(s.active_to))) return undefined;
  const anchor = Date.parse(s.billing_anchor);
  const cadence = cadenceOf(s);
  return billingPeriod(s, periodIndexAt(anchor, cadence, t) - periodIndexAt(anchor, cadence, start));
}

export function publicSubscription(s: Subscription, now = Date.now()): Record<string, unknown> {
  const status = subscriptionStatus(s, now);
  const out: Record<string, unknown> = {
    id: s.id,
    customer_id: s.customer.id,
    customer: s.customer,
    plan: s.plan,
    name: s.name,
    status,
    active_from: s.active_from,
  };
  if (s.active_to !== null) out.active_to = s.active_to;
  Object.assign(out, { billing_cadence: s.billing_cadence, billing_anchor: s.billing_anchor, currency: s.currency, pro_rating_enabled: s.pro_rating_enabled });
  const current = billingPeriodAt(s, now);
  if (current) out.current_period = { from: formatInstant(current.from), to: formatInstant(current.to) };
  out.created_at = s.created_at;
  out.updated_at = s.updated_at;
  return out;
}

export interface CustomerRef {
  id?: string;
  key?: string;
}

export class SubscriptionService {
  constructor(
    private readonly db: BillingStore,
    private readonly customers: CustomerService,
    private readonly plans: PlanService,
    private readonly features: FeatureService,
  ) {}

  async get(id: string, tx?: Transaction): Promise<Subscription> {
    const s = /^[0-9A-Z]{26}$/.test(id) ? await (tx ? tx.get<Subscription>(keys.subscription(id)) : this.db.get<Subscription>(keys.subscription(id))) : undefined;
    if (!s) throw notFound('subscription', id);
    return s;
  }

  list(): Promise<Subscription[]> {
    return this.db.list<Subscription>(PREFIXES.subscriptions);
  }

  async ofCustomer(customerId: string): Promise<Subscription[]> {
    const ids = await this.db.keysUnder(keys.customerSubscriptions(customerId));
    return (await this.db.getMany<Subscription>(ids.map(keys.subscription))).filter((s): s is Subscription => s !== undefined);
  }

  /** The customer's subscription active (or canceled, not yet ended) at `t`. */
  async activeAt(customerId: string, t: Instant): Promise<Subscription | undefined> {
    return (await this.ofCustomer(customerId)).find((s) => billingPeriodAt(s, t) !== undefined);
  }

  private async liveCustomer(tx: Transaction, ref: CustomerRef): Promise<Customer> {
    const customer = await this.customers.get((ref.id ?? ref.key)!, tx);
    if (customer.deleted_at) throw precondition(`customer ${customer.key} is deleted`);
    return customer;
  }

  /** The customer's subscription, not yet ended, that invoices priced items in another currency than `currency`. */
  async inOtherCurrency(tx: Transaction, customerId: string, currency: string): Promise<Subscription | undefined> {
    // Read so that a subscription created or changed meanwhile makes the caller's commit fail and retry.
    await tx.get<Slot>(keys.slot(customerId));
    const unended = (await this.ofCustomer(customerId)).filter((s) => subscriptionStatus(s) !== 'inactive');
    return unended.find((s) => s.currency !== currency && priced(s.items.map((i) => i.card)));
  }

  /** The items of a plan version with their features' meters (frozen into the subscription). */
  private async itemsOf(plan: Plan): Promise<Item[]> {
    const cards = plan.phases[0]?.rate_cards ?? [];
    const items: Item[] = [];
    for (const card of cards) {
      const feature = card.feature?.id ? await this.features.find(card.feature.id) : undefined;
      items.push({ card, meter: feature?.meter ?? null });
    }
    return items;
  }

  private checkCurrency(customer: Customer, plan: Plan): void {
    if (customer.currency && priced(plan.phases.flatMap((p) => p.rate_cards)) && customer.currency !== plan.currency) {
      throw ruleBroken('currency_mismatch', `currency mismatch: customer currency is ${customer.currency}, but subscription invoice currency is ${plan.currency}`, 'plan');
    }
  }

  private async newSubscription(customer: Customer, plan: Plan, start: Instant, anchorAt: Instant): Promise<Subscription> {
    const now = formatInstant(Date.now());
    const [from, anchor] = [wholeSecond(start), wholeSecond(anchorAt)];
    return {
      id: ulid(),
      customer: { id: customer.id, key: customer.key },
      subjects: usageSubjects(customer),
      plan: { id: plan.id, key: plan.key, version: plan.version },
      name: `${plan.key} v${plan.version}`,
      active_from: formatInstant(from),
      active_to: null,
      billing_anchor: formatInstant(anchor),
      billing_cadence: plan.billing_cadence,
      currency: plan.currency,
      pro_rating_enabled: plan.pro_rating_enabled,
      items: await this.itemsOf(plan),
      created_at: now,
      updated_at: now,
    };
  }

  /** Writes a new subscription, its customer index entry, the customer's slot and its schedule. */
  private start(tx: Transaction, s: Subscription): void {
    tx.put(keys.subscription(s.id), s);
    tx.put(keys.customerSubscription(s.customer.id, s.id), '1');
    tx.put(keys.slot(s.customer.id), { subscription_id: s.id, active_to: null } satisfies Slot);
    tx.put(keys.schedule(s.id), { advance: 0, arrears: 0, resets_until: s.active_from });
  }

  /**
   * Starts now (never earlier; at the start of the current second, like every subscription instant);
   * `anchor` defaults to the start. `now` is the clock, given only by benchmarks and tests that need a
   * subscription as it was created in the past.
   */
  create(customerRef: CustomerRef, planRef: PlanRef, anchor?: Instant, now = Date.now()): Promise<Subscription> {
    return this.db.transact(async (tx) => {
      const customer = await this.liveCustomer(tx, customerRef);
      const plan = await this.plans.subscribable(planRef, tx, now);
      this.checkCurrency(customer, plan);
      if (await liveSubscriptionOf(tx, customer.id, now)) {
        const code = 'only_single_subscription_allowed_per_customer_at_a_time';
        throw conflict(`customer ${customer.key} already has a subscription; only a single subscription is allowed per customer at a time`, [
          invalid('customer', 'only a single subscription is allowed per customer at a time', code, { code }),
        ]);
      }
      const s = await this.newSubscription(customer, plan, now, anchor ?? now);
      this.start(tx, s);
      return s;
    }, 'subscription');
  }

  /** When `timing` ends the subscription (a whole second): now, the end of the current period, or a period boundary. */
  private endOf(s: Subscription, timing: Timing, now: Instant): Instant {
    if (timing === 'immediate') return wholeSecond(now);
    const current = billingPeriodAt(s, now)!;
    if (timing === 'next_billing_cycle') return wholeSecond(current.full.to);
    const end = wholeSecond(timing);
    if (end < wholeSecond(now)) throw validationFailed([invalid('timing', 'cannot cancel or change a subscription in the past', 'invalid')]);
    if (!isBoundary(Date.parse(s.billing_anchor), cadenceOf(s), end)) {
      throw validationFailed([invalid('timing', 'cannot cancel aligned subscription with custom misaligned timing: use a billing period boundary', 'misaligned_timing', { code: 'misaligned_timing' })]);
    }
    return end;
  }

  private async ending(tx: Transaction, id: string, action: string, timing: Timing, now: Instant): Promise<{ s: Subscription; end: Instant }> {
    const s = await this.get(id, tx);
    const status = subscriptionStatus(s, now);
    if (status !== 'active') throw forbidden(`transition ${action} in state ${status} not allowed`);
    return { s, end: this.endOf(s, timing, now) };
  }

  private setEnd(tx: Transaction, s: Subscription, end: Instant): Subscription {
    const ended = { ...s, active_to: formatInstant(end), updated_at: formatInstant(Date.now()) };
    tx.put(keys.subscription(s.id), ended);
    return ended;
  }

  cancel(id: string, timing: Timing): Promise<Subscription> {
    return this.db.transact(async (tx) => {
      const now = Date.now();
      const { s, end } = await this.ending(tx, id, 'cancel', timing, now);
      const ended = this.setEnd(tx, s, end);
      const slot = await tx.get<Slot>(keys.slot(s.customer.id));
      if (slot?.subscription_id === s.id) tx.put(keys.slot(s.customer.id), { subscription_id: s.id, active_to: ended.active_to } satisfies Slot);
      return ended;
    }, 'subscription');
  }

  /** Takes back a cancellation that has not taken effect yet (OpenMeter's "continue"). */
  unscheduleCancelation(id: string): Promise<Subscription> {
    return this.db.transact(async (tx) => {
      const s = await this.get(id, tx);
      const status = subscriptionStatus(s);
      if (status !== 'canceled') throw forbidden(`transition continue in state ${status} not allowed`);
      const slot = await tx.get<Slot>(keys.slot(s.customer.id));
      if (slot?.subscription_id !== s.id) throw conflict(`subscription ${s.id} is followed by ${slot?.subscription_id}; it cannot continue`);
      const continued = { ...s, active_to: null, updated_at: formatInstant(Date.now()) };
      tx.put(keys.subscription(s.id), continued);
      tx.put(keys.slot(s.customer.id), { subscription_id: s.id, active_to: null } satisfies Slot);
      return continued;
    }, 'subscription');
  }

  /** Ends this subscription and starts one on `planRef` at the same instant; the anchor carries over. */
  change(id: string, planRef: PlanRef, timing: Timing): Promise<{ current: Subscription; next: Subscription }> {
    return this.db.transact(async (tx) => {
      const now = Date.now();
      const { s, end } = await this.ending(tx, id, 'change', timing, now);
      const customer = await this.liveCustomer(tx, { id: s.customer.id });
      const plan = await this.plans.subscribable(planRef, tx, now);
      this.checkCurrency(customer, plan);
      // Read so that a create or change racing this one for the same customer loses its commit.
      await tx.get<Slot>(keys.slot(s.customer.id));
      const current = this.setEnd(tx, s, end);
      const next = await this.newSubscription(customer, plan, end, Date.parse(s.billing_anchor));
      this.start(tx, next);
      return { current, next };
    }, 'subscription');
  }
}

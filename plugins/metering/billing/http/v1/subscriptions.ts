/**
 * OpenMeter v1's subscriptions to a plan: create (`{plan: {key, version?}, customerId | customerKey,
 * billingAnchor?, timing?}`), get, change, cancel and unschedule a cancellation, through the same
 * subscription service and the same parsing of plan references and timings as the v3 paths. Custom
 * plans, edits, migrations, deletion and add-ons have no counterpart (501).
 */
import type { Billing } from '../../port.ts';
import { nearInstant, planRef, timing } from '../http.ts';
import { invalid, validationFailed } from '../../shared/errors.ts';
import type { Problems } from '../../shared/fields.ts';
import { publicSubscription, type CustomerRef, type Subscription } from '../../subscription/port.ts';
import { notSupported } from '../../../shared/errors.ts';
import type { MeteringConfig } from '../../../schema.ts';
import type { MeteringRequest } from '../../../http/http.ts';
import { v1Body } from './body.ts';
import { v1RateCard } from './catalog.ts';
import { operation, type V1Handler, type V1Routes } from '../../../http/v1/router.ts';
import { toV1 } from '../../../http/v1/shapes.ts';

/** A subscription as v1 shows it (OpenMeter's `Subscription`). */
export function v1Subscription(s: Subscription): Record<string, unknown> {
  const { customer: _customer, pro_rating_enabled: proRating, current_period: _period, ...rest } = publicSubscription(s);
  return { ...toV1(rest), proRatingConfig: { enabled: proRating, mode: 'prorate_prices' }, alignment: { billablesMustAlign: true } };
}

const refuse = (what: string, instead: string): V1Handler => () => {
  throw notSupported(what, instead);
};

function onlyFields(b: Record<string, unknown>, allowed: string[], out: Problems): void {
  for (const k of Object.keys(b)) if (!allowed.includes(k)) out.push(invalid(k, 'not supported by Tollgate', 'unknown_property'));
}

/** Tollgate starts a subscription when it is created. */
function immediateOnly(b: Record<string, unknown>, out: Problems): void {
  if (b.timing !== undefined && b.timing !== 'immediate') out.push(invalid('timing', 'a subscription starts when it is created: timing must be immediate', 'enum', { choices: ['immediate'] }));
}

export class SubscriptionsV1 {
  constructor(private readonly billing: Billing) {}

  routes(): V1Routes {
    const billing = (handle: V1Handler) => operation('billing', handle);
    const subscribe = 'subscribe the customer to a published plan, and change it to another plan';
    return {
      'v1/subscriptions': { POST: billing((ctx, config) => this.create(ctx, config)) },
      'v1/subscriptions/*': {
        GET: billing((ctx, _c, [id]) => this.get(ctx, id)),
        PATCH: billing(refuse('editing a subscription', subscribe)),
        DELETE: billing(refuse('deleting a subscription', 'cancel it')),
      },
      'v1/subscriptions/*/change': { POST: billing((ctx, config, [id]) => this.change(ctx, config, id)) },
      'v1/subscriptions/*/cancel': { POST: billing((ctx, config, [id]) => this.cancel(ctx, config, id)) },
      'v1/subscriptions/*/unschedule-cancelation': { POST: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Subscription(await this.billing.subscriptions.unscheduleCancelation(id)))) },
      'v1/subscriptions/*/migrate': { POST: billing(refuse('migrating a subscription', 'change it to the plan version it should have')) },
      'v1/subscriptions/*/addons': { GET: billing((ctx) => ctx.respond(200, [])), POST: billing(refuse('add-ons', subscribe)) },
    };
  }

  /** OpenMeter's expanded subscription: its one phase (the plan version's), whose items are the rate cards it bought (their price and cadence). */
  private async get(ctx: MeteringRequest, id: string): Promise<void> {
    const s = await this.billing.subscriptions.get(id);
    const phase = (await this.billing.plans.find(s.plan.id))?.phases[0];
    const during = { activeFrom: s.active_from, ...(s.active_to === null ? {} : { activeTo: s.active_to }) };
    const items = s.items.map(({ card }) => {
      const { type: _type, entitlementTemplate: _template, ...item } = v1RateCard(card);
      return { ...item, ...during };
    });
    ctx.respond(200, {
      ...v1Subscription(s),
      phases: [{ key: phase?.key ?? 'main', name: phase?.name ?? s.name, ...during, items, itemTimelines: Object.fromEntries(s.items.map(({ card }, i) => [card.key, [items[i]]])) }],
    });
  }

  private async create(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const b = await v1Body(ctx, config);
    const out: Problems = [];
    onlyFields(b, ['plan', 'customer_id', 'customer_key', 'billing_anchor', 'timing'], out);
    immediateOnly(b, out);
    const plan = planRef(b, out);
    const customer: Partial<CustomerRef> = typeof b.customer_id === 'string' ? { id: b.customer_id } : typeof b.customer_key === 'string' ? { key: b.customer_key } : {};
    if (!customer.id && !customer.key) out.push(invalid('customer_id', 'customerId or customerKey is required', 'required'));
    const anchor = b.billing_anchor === undefined || b.billing_anchor === null ? undefined : nearInstant(b.billing_anchor);
    if (b.billing_anchor != null && anchor === undefined) out.push(invalid('billing_anchor', 'must be an RFC 3339 date-time within a century of now', 'is_date_time'));
    if (out.length) throw validationFailed(out);
    ctx.respond(201, v1Subscription(await this.billing.subscriptions.create(customer as CustomerRef, plan!, anchor)));
  }

  private async change(ctx: MeteringRequest, config: MeteringConfig, id: string): Promise<void> {
    const b = await v1Body(ctx, config);
    const out: Problems = [];
    onlyFields(b, ['plan', 'timing'], out);
    const plan = planRef(b, out);
    const when = timing(b, out);
    if (out.length) throw validationFailed(out);
    const { current, next } = await this.billing.subscriptions.change(id, plan!, when!);
    ctx.respond(200, { current: v1Subscription(current), next: v1Subscription(next) });
  }

  private async cancel(ctx: MeteringRequest, config: MeteringConfig, id: string): Promise<void> {
    const b = await v1Body(ctx, config);
    const out: Problems = [];
    onlyFields(b, ['timing'], out);
    const when = timing(b, out, 'immediate');
    if (out.length) throw validationFailed(out);
    ctx.respond(200, v1Subscription(await this.billing.subscriptions.cancel(id, when!)));
  }
}

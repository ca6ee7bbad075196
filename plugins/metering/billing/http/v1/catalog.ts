/**
 * OpenMeter v1's product catalogue: features (`meterSlug`, `meterGroupByFilters`) and plans (phases of
 * `flat_fee` / `usage_based` rate cards, `tiered` prices with a `mode`, entitlement templates whose
 * `issueAfterReset` is v3's `limit`), translated to the v3 definitions the same services validate and
 * store, and back. Add-ons have no counterpart in Tollgate's catalogue (501; their lists are empty).
 */
import type { Billing } from '../../port.ts';
import { parsePlan, planStatus, publicFeature, publicPlan, validateFeature, type Feature, type Plan, type RateCard } from '../../productcatalog/port.ts';
import { validationFailed } from '../../shared/errors.ts';
import { numberText } from '../../shared/exact-json.ts';
import { isObject, type Body } from '../../shared/fields.ts';
import { notSupported } from '../../../shared/errors.ts';
import type { MeteringRequest } from '../../../http/http.ts';
import type { MeteringConfig } from '../../../schema.ts';
import { operation, type V1Handler, type V1Routes } from '../../../http/v1/router.ts';
import { byText, fromV1, listOrPage, pageOf, paginated, queryList, toV1 } from '../../../http/v1/shapes.ts';
import { rawBody } from './body.ts';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const USAGE_PRICES = ['unit', 'graduated', 'volume'];

// ---- features ----

/** v1's exact-match filters (`meterGroupByFilters`) and `$eq` / `$in` of the advanced ones, as v3 filters. */
function v3Filters(b: Body): unknown {
  const filters: Record<string, unknown> = {};
  if (isObject(b.meterGroupByFilters)) for (const [k, v] of Object.entries(b.meterGroupByFilters)) filters[k] = { eq: v };
  if (isObject(b.advancedMeterGroupByFilters)) {
    for (const [k, v] of Object.entries(b.advancedMeterGroupByFilters)) {
      filters[k] = isObject(v) ? Object.fromEntries(Object.entries(v).map(([op, x]) => [op.replace(/^\$/, ''), x])) : v;
    }
  }
  return filters;
}

function v3Feature(b: Body): Body {
  const { meterSlug, meterGroupByFilters: _eq, advancedMeterGroupByFilters: _advanced, metadata, ...rest } = b;
  const out: Body = { ...fromV1<Body>(rest) };
  if (metadata !== undefined && metadata !== null) out.labels = metadata;
  if (meterSlug !== undefined) out.meter = { key: meterSlug, filters: v3Filters(b) };
  return out;
}

export function v1Feature(f: Feature): Record<string, unknown> {
  const { meter: _meter, ...rest } = publicFeature(f);
  const out: Record<string, unknown> = toV1(rest);
  if (f.meter) {
    out.meterSlug = f.meter.key;
    const entries = Object.entries(f.meter.filters);
    const exact = entries.filter(([, filter]) => 'eq' in filter);
    const advanced = entries.filter(([, filter]) => !('eq' in filter));
    if (exact.length) out.meterGroupByFilters = Object.fromEntries(exact.map(([k, filter]) => [k, (filter as { eq: string }).eq]));
    if (advanced.length) out.advancedMeterGroupByFilters = Object.fromEntries(advanced.map(([k, filter]) => [k, { $in: (filter as { in: string[] }).in }]));
  }
  return out;
}

// ---- plans ----

function v3Price(price: unknown): Body {
  if (price === null || price === undefined) return { price: { type: 'free' } };
  if (!isObject(price)) return { price };
  const { type, paymentTerm, mode, tiers, ...rest } = price;
  if (type === 'flat') return { price: { type, ...rest }, ...(paymentTerm === undefined ? {} : { payment_term: paymentTerm }) };
  if (type === 'tiered') {
    const v3Tiers = Array.isArray(tiers) ? tiers.map((t) => (isObject(t) ? v3Tier(t) : t)) : tiers;
    return { price: { type: mode, tiers: v3Tiers, ...fromV1<Body>(rest) } };
  }
  return { price: { type, ...fromV1<Body>(rest) } };
}

function v3Tier(t: Body): Body {
  const component = (c: unknown) => (isObject(c) ? { amount: c.amount } : c);
  const out: Body = { flat_price: component(t.flatPrice ?? null), unit_price: component(t.unitPrice ?? null) };
  if (t.upToAmount !== undefined && t.upToAmount !== null) out.up_to_amount = t.upToAmount;
  return out;
}

/** An entitlement template; `issueAfterReset` (v3's `limit`) read from its text when it is a number. */
function v3Entitlement(t: unknown): unknown {
  if (!isObject(t)) return t;
  const { type, issueAfterReset, isSoftLimit, usagePeriod, config, ...rest } = t;
  const out: Body = { type, ...fromV1<Body>(rest) };
  if (issueAfterReset !== undefined) out.limit = numberText(t, 'issueAfterReset') ?? issueAfterReset;
  if (isSoftLimit !== undefined) out.is_soft_limit = isSoftLimit;
  if (usagePeriod !== undefined) out.usage_period = usagePeriod;
  if (config !== undefined) out.config = typeof config === 'string' ? parsedOr(config) : config;
  return out;
}

/** A static entitlement's config is a JSON string in v1 and an object in v3. */
function parsedOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function v3RateCard(card: unknown): unknown {
  if (!isObject(card)) return card;
  const { type: _type, featureKey, entitlementTemplate, billingCadence, price, ...rest } = card;
  const out: Body = { ...fromV1<Body>(rest), ...v3Price(price) };
  if (featureKey !== undefined) out.feature_key = featureKey;
  if (billingCadence !== undefined) out.billing_cadence = billingCadence;
  if (entitlementTemplate !== undefined) out.entitlement = v3Entitlement(entitlementTemplate);
  return out;
}

function v3Plan(b: Body): Body {
  const { phases, proRatingConfig, metadata, ...rest } = b;
  const out: Body = fromV1<Body>(rest);
  if (metadata !== undefined && metadata !== null) out.labels = metadata;
  if (isObject(proRatingConfig)) out.pro_rating_enabled = proRatingConfig.enabled;
  out.phases = Array.isArray(phases)
    ? phases.map((p) => {
        if (!isObject(p)) return p;
        const { rateCards, ...phase } = p;
        return { ...fromV1<Body>(phase), rate_cards: Array.isArray(rateCards) ? rateCards.map(v3RateCard) : rateCards };
      })
    : phases;
  return out;
}

function v1Price(card: RateCard): unknown {
  const p = card.price;
  if (p.type === 'free') return null;
  if (p.type === 'flat') return { type: 'flat', amount: p.amount, paymentTerm: card.payment_term };
  if (p.type === 'unit') return p;
  const tiers = p.tiers.map((t) => ({
    ...(t.up_to_amount === null ? {} : { upToAmount: t.up_to_amount }),
    flatPrice: t.flat_price && { type: 'flat', amount: t.flat_price.amount },
    unitPrice: t.unit_price && { type: 'unit', amount: t.unit_price.amount },
  }));
  return { type: 'tiered', mode: p.type, tiers };
}

function v1EntitlementTemplate(e: NonNullable<RateCard['entitlement']>): unknown {
  if (e.type === 'metered') {
    return { type: 'metered', isSoftLimit: e.is_soft_limit, usagePeriod: e.usage_period, ...(e.limit === null ? {} : { issueAfterReset: Number(e.limit) }) };
  }
  return e;
}

/** A rate card as v1 shows it (`flat_fee` or `usage_based`, by its price). */
export function v1RateCard(card: RateCard): Record<string, unknown> {
  return {
    type: USAGE_PRICES.includes(card.price.type) ? 'usage_based' : 'flat_fee',
    key: card.key,
    name: card.name,
    ...(card.description === null ? {} : { description: card.description }),
    ...(card.feature?.key ? { featureKey: card.feature.key } : {}),
    billingCadence: card.billing_cadence,
    price: v1Price(card),
    ...(card.entitlement ? { entitlementTemplate: v1EntitlementTemplate(card.entitlement) } : {}),
  };
}

export function v1Plan(p: Plan): Record<string, unknown> {
  const { phases: _phases, pro_rating_enabled: proRating, validation_errors: issues, ...rest } = publicPlan(p);
  return {
    ...toV1(rest),
    proRatingConfig: { enabled: proRating, mode: 'prorate_prices' },
    validationErrors: (issues as unknown[]).length ? toV1(issues) : null,
    phases: p.phases.map((phase) => ({
      key: phase.key,
      name: phase.name,
      ...(phase.description === null ? {} : { description: phase.description }),
      duration: phase.duration,
      rateCards: phase.rate_cards.map(v1RateCard),
    })),
  };
}

export class CatalogV1 {
  constructor(private readonly billing: Billing) {}

  routes(): V1Routes {
    const billing = (handle: V1Handler) => operation('billing', handle);
    const refuse = (what: string): V1Handler => () => {
      throw notSupported(what, 'Tollgate\'s plans have one phase of rate cards and no add-ons; put the rate card in the plan');
    };
    return {
      'v1/features': { GET: billing((ctx) => this.listFeatures(ctx)), POST: billing((ctx, config) => this.createFeature(ctx, config)) },
      'v1/features/*': {
        GET: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Feature(await this.billing.features.get(id)))),
        DELETE: billing(async (ctx, _c, [id]) => {
          await this.billing.features.archive(id);
          ctx.respond(204);
        }),
      },
      'v1/plans': { GET: billing((ctx) => this.listPlans(ctx)), POST: billing((ctx, config) => this.createPlan(ctx, config)) },
      'v1/plans/*': {
        GET: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Plan(await this.findPlan(id, ctx.query.get('includeLatest') === 'true')))),
        PUT: billing((ctx, config, [id]) => this.updatePlan(ctx, config, id)),
        DELETE: billing(async (ctx, _c, [id]) => {
          await this.billing.plans.delete((await this.findPlan(id, true)).id);
          ctx.respond(204);
        }),
      },
      'v1/plans/*/publish': { POST: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Plan(await this.billing.plans.publish((await this.findPlan(id, true)).id)))) },
      'v1/plans/*/archive': { POST: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Plan(await this.billing.plans.archive((await this.findPlan(id, false)).id)))) },
      'v1/plans/*/addons': { GET: billing((ctx) => ctx.respond(200, paginated([], pageOf(ctx)!, (a) => a))), POST: billing(refuse('plan add-ons')) },
      'v1/plans/*/addons/*': { GET: billing(refuse('plan add-ons')), PUT: billing(refuse('plan add-ons')), DELETE: billing(refuse('plan add-ons')) },
      'v1/addons': { GET: billing((ctx) => ctx.respond(200, paginated([], pageOf(ctx)!, (a) => a))), POST: billing(refuse('add-ons')) },
      'v1/addons/*': { GET: billing(refuse('add-ons')), PUT: billing(refuse('add-ons')), DELETE: billing(refuse('add-ons')) },
      'v1/addons/*/publish': { POST: billing(refuse('add-ons')) },
      'v1/addons/*/archive': { POST: billing(refuse('add-ons')) },
    };
  }

  private async listFeatures(ctx: MeteringRequest): Promise<void> {
    const includeArchived = ctx.query.get('includeArchived') === 'true';
    const meters = queryList(ctx, 'meterSlug');
    const features = (await this.billing.features.list())
      .filter((f) => (includeArchived || f.archived_at === null) && (meters.length === 0 || meters.includes(f.meter?.key ?? '')))
      .sort(byText((f) => f.key));
    ctx.respond(200, listOrPage(ctx, features, v1Feature));
  }

  private async createFeature(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const { definition, problems } = validateFeature(v3Feature(await rawBody(ctx, config)));
    if (!definition) throw validationFailed(problems);
    ctx.respond(201, v1Feature(await this.billing.features.create(definition)));
  }

  /** A plan version by id, or a key's active version (its latest, draft included, with `latest`). */
  private async findPlan(idOrKey: string, latest: boolean): Promise<Plan> {
    if (ULID.test(idOrKey)) return this.billing.plans.get(idOrKey);
    const versions = (await this.billing.plans.list()).filter((p) => p.key === idOrKey && p.deleted_at === null).sort((a, b) => b.version - a.version);
    const found = latest ? versions[0] : versions.find((p) => planStatus(p) === 'active');
    return found ?? this.billing.plans.get(idOrKey);
  }

  private async listPlans(ctx: MeteringRequest): Promise<void> {
    const [keys, ids, statuses, currencies] = ['key', 'id', 'status', 'currency'].map((n) => queryList(ctx, n));
    const includeDeleted = ctx.query.get('includeDeleted') === 'true';
    const plans = (await this.billing.plans.list())
      .filter(
        (p) =>
          (includeDeleted || p.deleted_at === null) &&
          (keys.length === 0 || keys.includes(p.key)) &&
          (ids.length === 0 || ids.includes(p.id)) &&
          (statuses.length === 0 || statuses.includes(planStatus(p))) &&
          (currencies.length === 0 || currencies.includes(p.currency)),
      )
      .sort((a, b) => byText<Plan>((p) => p.key)(a, b) || a.version - b.version);
    ctx.respond(200, paginated(plans, pageOf(ctx)!, v1Plan));
  }

  private async createPlan(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const { definition, problems } = parsePlan(v3Plan(await rawBody(ctx, config)));
    if (!definition) throw validationFailed(problems);
    ctx.respond(201, v1Plan(await this.billing.plans.create(definition)));
  }

  /** v1's replace-update has no key and no currency: the version's own are kept. */
  private async updatePlan(ctx: MeteringRequest, config: MeteringConfig, idOrKey: string): Promise<void> {
    const current = await this.findPlan(idOrKey, true);
    const { definition, problems } = parsePlan({ key: current.key, currency: current.currency, ...v3Plan(await rawBody(ctx, config)) });
    if (!definition) throw validationFailed(problems);
    ctx.respond(200, v1Plan(await this.billing.plans.update(current.id, definition)));
  }
}

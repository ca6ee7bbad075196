/**
 * The HTTP mapping of billing under the metering route: paths and methods, request bodies, scopes,
 * pagination, and billing errors turned into the metering routes' problem+json answers (their status
 * chosen here, by kind; their code kept). The domain services know nothing of HTTP.
 */
import { methodNotAllowed, type InvalidParameter } from '../../shared/errors.ts';
import { readJson, requireScope, sendProblem, type MeteringRequest, type Problem, type SubRoutes } from '../../http/http.ts';
import type { MeteringConfig } from '../../schema.ts';
import type { Billing } from '../billing.ts';
import { parseInstant } from '../shared/calendar.ts';
import { publicCustomer, validateCustomer } from '../customer/port.ts';
import { BillingError, invalid, validationFailed, type BillingErrorKind } from '../shared/errors.ts';
import { parseExactJson } from '../shared/exact-json.ts';
import { parsePlan, planStatus, publicFeature, publicPlan, validateFeature, type PlanRef } from '../productcatalog/port.ts';
import { isObject, reference, type Problems } from '../shared/fields.ts';
import { publicSubscription, type CustomerRef, type Timing } from '../subscription/port.ts';

const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 1000;
const MAX_ACCESS_PAGE_SIZE = 100;

/** The one place billing's kinds become statuses (the v1 mapping answers through billingProblem too). */
const STATUS_OF_KIND: Record<BillingErrorKind, number> = {
  validation: 400,
  notFound: 404,
  gone: 410,
  conflict: 409,
  // As OpenMeter answers a state transition the resource's state does not allow.
  forbidden: 403,
  // As OpenMeter answers for a deleted customer.
  precondition: 412,
  readOnly: 405,
  contention: 503,
};

export function billingProblem(err: BillingError): Problem {
  const problem: Problem = { status: STATUS_OF_KIND[err.kind], code: err.code, detail: err.message, headers: {} };
  if (err.invalidParameters) problem.invalidParameters = err.invalidParameters;
  return problem;
}

type Handler = (ctx: MeteringRequest, config: MeteringConfig, params: string[]) => Promise<void>;
type Routes = Record<string, Partial<Record<string, Handler>>>;

/** `{data, meta: {page: {number, size, total}}}` of `items`, from `page[number]` and `page[size]`. */
function paginate<T>(ctx: MeteringRequest, items: T[], map: (item: T) => unknown): object {
  const problems: InvalidParameter[] = [];
  const read = (name: string, fallback: number, max: number) => {
    const raw = ctx.query.get(name);
    if (raw === null) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) problems.push({ field: name, reason: 'page has to be at least 1', rule: 'minimum', source: 'query', minimum: 1 });
    else if (n > max) problems.push({ field: name, reason: `must be at most ${max}`, rule: 'maximum', source: 'query', maximum: max });
    return n;
  };
  const number = read('page[number]', 1, Number.MAX_SAFE_INTEGER);
  const size = read('page[size]', DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  if (problems.length) throw validationFailed(problems);
  return { data: items.slice((number - 1) * size, number * size).map(map), meta: { page: { number, size, total: items.length } } };
}

/** A billing body, its numbers' texts kept (an entitlement limit sent as a JSON number is read exactly). */
async function body(ctx: MeteringRequest, config: MeteringConfig): Promise<unknown> {
  return readJson(ctx, config.max_body_size, parseExactJson);
}

function ensure<T>(parsed: { definition?: T; problems: Problems }): T {
  if (!parsed.definition) throw validationFailed(parsed.problems);
  return parsed.definition;
}

export function planRef(b: Record<string, unknown>, out: Problems): PlanRef | undefined {
  const ref = reference(b, 'plan', '', out, ['version']);
  if (!ref) return undefined;
  const version = ref.rest.version;
  if (version !== undefined && version !== null && !(Number.isInteger(version) && (version as number) >= 1)) out.push(invalid('plan.version', 'must be an integer of at least 1', 'minimum'));
  return { id: ref.id, key: ref.key, version: typeof version === 'number' ? version : undefined };
}

export function timing(b: Record<string, unknown>, out: Problems, fallback?: Timing): Timing | undefined {
  const v = b.timing;
  if (v === undefined || v === null) {
    if (fallback === undefined) out.push(invalid('timing', 'timing is required', 'required'));
    return fallback;
  }
  if (v === 'immediate' || v === 'next_billing_cycle') return v;
  const at = nearInstant(v);
  if (at === undefined) out.push(invalid('timing', 'must be immediate, next_billing_cycle or an RFC 3339 date-time within a century of now', 'invalid'));
  return at;
}

/** Instants billing computes periods around stay within a century of now (calendar math stays cheap and in range). */
const CENTURY_MS = 100 * 366 * 86_400_000;

export function nearInstant(text: unknown): number | undefined {
  const at = parseInstant(text);
  return at !== undefined && Math.abs(at - Date.now()) <= CENTURY_MS ? at : undefined;
}

function sealedBody(raw: unknown, allowed: string[]): Record<string, unknown> {
  const b = raw === undefined ? {} : raw;
  if (!isObject(b)) throw validationFailed([invalid('', 'request body must be a JSON object', 'type')]);
  const unknown = Object.keys(b).filter((k) => !allowed.includes(k));
  if (unknown.length) throw validationFailed(unknown.map((k) => invalid(k, 'unknown property', 'unknown_property')));
  return b;
}

export class BillingHttp implements SubRoutes {
  private readonly routes: Routes;

  constructor(private readonly billing: Billing) {
    this.routes = {
      'customers': { GET: this.listCustomers, POST: this.createCustomer },
      'customers/*': { GET: this.getCustomer, PUT: this.updateCustomer, DELETE: this.deleteCustomer },
      'customers/*/entitlement-access': { GET: this.customerAccess },
      'customers/*/upcoming-invoice': { GET: this.upcomingInvoice },
      'features': { GET: this.listFeatures, POST: this.createFeature },
      'features/*': { GET: this.getFeature, DELETE: this.archiveFeature },
      'plans': { GET: this.listPlans, POST: this.createPlan },
      'plans/*': { GET: this.getPlan, PUT: this.updatePlan, DELETE: this.deletePlan },
      'plans/*/publish': { POST: this.publishPlan },
      'plans/*/archive': { POST: this.archivePlan },
      'subscriptions': { GET: this.listSubscriptions, POST: this.createSubscription },
      'subscriptions/*': { GET: this.getSubscription },
      'subscriptions/*/cancel': { POST: this.cancelSubscription },
      'subscriptions/*/change': { POST: this.changeSubscription },
      'subscriptions/*/unschedule-cancelation': { POST: this.unscheduleCancelation },
      'entitlement-access/query': { POST: this.queryAccess },
      'invoices': { GET: this.listInvoices },
      'invoices/*': { GET: this.getInvoice },
    };
  }

  async route(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<boolean> {
    // Collections alternate with ids (`customers/<id>/upcoming-invoice`); a few paths are fixed words.
    let pattern = parts.join('/');
    if (!this.routes[pattern]) pattern = parts.map((p, i) => (i % 2 === 1 ? '*' : p)).join('/');
    const methods = this.routes[pattern];
    if (!methods) return false;
    const handler = methods[ctx.method];
    if (!handler) throw methodNotAllowed(ctx.method, Object.keys(methods));
    const access = pattern.includes('entitlement-access');
    requireScope(ctx, config, access ? 'read' : 'billing');
    try {
      await handler.call(this, ctx, config, parts.filter((_, i) => i % 2 === 1));
    } catch (err) {
      if (!(err instanceof BillingError)) throw err;
      sendProblem(ctx, billingProblem(err));
    }
    return true;
  }

  // ---- customers ----

  private async listCustomers(ctx: MeteringRequest): Promise<void> {
    const q = ctx.query;
    const includeDeleted = q.get('include_deleted') === 'true';
    const key = q.get('key');
    const subject = q.get('subject') ?? q.get('usage_attribution_subject_key');
    const customers = (await this.billing.customers.list())
      .filter(
        (c) =>
          (includeDeleted || c.deleted_at === null) &&
          (key === null || c.key === key) &&
          (subject === null || c.usage_attribution.subject_keys.includes(subject)),
      )
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));
    ctx.respond(200, paginate(ctx, customers, publicCustomer));
  }

  private async createCustomer(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const def = ensure(validateCustomer(await body(ctx, config)));
    ctx.respond(201, publicCustomer(await this.billing.customers.create(def)));
  }

  private async getCustomer(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicCustomer(await this.billing.customers.get(id)));
  }

  private async updateCustomer(ctx: MeteringRequest, config: MeteringConfig, [id]: string[]): Promise<void> {
    const raw = await body(ctx, config);
    const current = await this.billing.customers.get(id);
    // The key cannot change: the stored one is kept (as OpenMeter's upsert), so it need not be sent.
    const withKey = isObject(raw) ? { ...raw, key: current.key } : raw;
    const def = ensure(validateCustomer(withKey));
    ctx.respond(200, publicCustomer(await this.billing.customers.update(id, def, new Set(Object.keys(raw as object)))));
  }

  private async deleteCustomer(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    await this.billing.customers.delete(id);
    ctx.respond(204);
  }

  private async customerAccess(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, { data: await this.billing.entitlements.access(id) });
  }

  private async upcomingInvoice(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, await this.billing.invoices.upcoming(id));
  }

  // ---- features ----

  private async listFeatures(ctx: MeteringRequest): Promise<void> {
    const includeArchived = ctx.query.get('include_archived') === 'true';
    const meter = ctx.query.get('meter');
    const features = (await this.billing.features.list())
      .filter((f) => (includeArchived || f.archived_at === null) && (meter === null || f.meter?.id === meter || f.meter?.key === meter))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id < b.id ? -1 : 1));
    ctx.respond(200, paginate(ctx, features, publicFeature));
  }

  private async createFeature(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const def = ensure(validateFeature(await body(ctx, config)));
    ctx.respond(201, publicFeature(await this.billing.features.create(def)));
  }

  private async getFeature(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicFeature(await this.billing.features.get(id)));
  }

  private async archiveFeature(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    await this.billing.features.archive(id);
    ctx.respond(204);
  }

  // ---- plans ----

  private async listPlans(ctx: MeteringRequest): Promise<void> {
    const key = ctx.query.get('key');
    const status = ctx.query.get('status');
    const plans = (await this.billing.plans.list())
      .filter((p) => p.deleted_at === null && (key === null || p.key === key) && (status === null || planStatus(p) === status))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.version - b.version));
    ctx.respond(200, paginate(ctx, plans, publicPlan));
  }

  private async createPlan(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const def = ensure(parsePlan(await body(ctx, config)));
    ctx.respond(201, publicPlan(await this.billing.plans.create(def)));
  }

  private async getPlan(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicPlan(await this.billing.plans.get(id)));
  }

  private async updatePlan(ctx: MeteringRequest, config: MeteringConfig, [id]: string[]): Promise<void> {
    const def = ensure(parsePlan(await body(ctx, config)));
    ctx.respond(200, publicPlan(await this.billing.plans.update(id, def)));
  }

  private async deletePlan(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    await this.billing.plans.delete(id);
    ctx.respond(204);
  }

  private async publishPlan(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicPlan(await this.billing.plans.publish(id)));
  }

  private async archivePlan(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicPlan(await this.billing.plans.archive(id)));
  }

  // ---- subscriptions ----

  private async listSubscriptions(ctx: MeteringRequest): Promise<void> {
    const customer = ctx.query.get('customer');
    const subscriptions =
      customer === null
        ? await this.billing.subscriptions.list()
        : await this.billing.subscriptions.ofCustomer((await this.billing.customers.get(customer)).id);
    subscriptions.sort((a, b) => Date.parse(a.active_from) - Date.parse(b.active_from) || (a.id < b.id ? -1 : 1));
    ctx.respond(200, paginate(ctx, subscriptions, (s) => publicSubscription(s)));
  }

  private async createSubscription(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const b = sealedBody(await body(ctx, config), ['customer', 'plan', 'billing_anchor']);
    const out: Problems = [];
    const customer = reference(b, 'customer', '', out);
    const plan = planRef(b, out);
    const anchor = b.billing_anchor === undefined || b.billing_anchor === null ? undefined : nearInstant(b.billing_anchor);
    if (b.billing_anchor != null && anchor === undefined) out.push(invalid('billing_anchor', 'must be an RFC 3339 date-time within a century of now', 'is_date_time'));
    if (out.length) throw validationFailed(out);
    const s = await this.billing.subscriptions.create(customer as CustomerRef, plan!, anchor);
    ctx.respond(201, publicSubscription(s));
  }

  private async getSubscription(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicSubscription(await this.billing.subscriptions.get(id)));
  }

  private async cancelSubscription(ctx: MeteringRequest, config: MeteringConfig, [id]: string[]): Promise<void> {
    const b = sealedBody(await body(ctx, config), ['timing']);
    const out: Problems = [];
    const when = timing(b, out, 'immediate');
    if (out.length) throw validationFailed(out);
    ctx.respond(200, publicSubscription(await this.billing.subscriptions.cancel(id, when!)));
  }

  private async unscheduleCancelation(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, publicSubscription(await this.billing.subscriptions.unscheduleCancelation(id)));
  }

  private async changeSubscription(ctx: MeteringRequest, config: MeteringConfig, [id]: string[]): Promise<void> {
    const b = sealedBody(await body(ctx, config), ['plan', 'timing']);
    const out: Problems = [];
    const plan = planRef(b, out);
    const when = timing(b, out);
    if (out.length) throw validationFailed(out);
    const { current, next } = await this.billing.subscriptions.change(id, plan!, when!);
    ctx.respond(200, { current: publicSubscription(current), next: publicSubscription(next) });
  }

  // ---- entitlement access ----

  private async queryAccess(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const raw = ctx.query.get('page[size]');
    const size = raw === null ? MAX_ACCESS_PAGE_SIZE : Number(raw);
    if (!Number.isInteger(size) || size < 1 || size > MAX_ACCESS_PAGE_SIZE) {
      throw validationFailed([{ field: 'page[size]', reason: `page size must be between 1 and ${MAX_ACCESS_PAGE_SIZE}`, rule: 'range', source: 'query', minimum: 1, maximum: MAX_ACCESS_PAGE_SIZE }]);
    }
    const after = ctx.query.get('page[after]');
    const { data, errors } = await this.billing.entitlements.query(await body(ctx, config));
    const ordered = data.sort((a, b) => (a.customer.id < b.customer.id ? -1 : 1)).filter((e) => after === null || e.customer.id > after);
    const page = ordered.slice(0, size);
    const next = ordered.length > size ? page[page.length - 1].customer.id : null;
    ctx.respond(200, { data: page, errors, meta: { page: { size, next } } });
  }

  // ---- invoices ----

  private async listInvoices(ctx: MeteringRequest): Promise<void> {
    const customer = ctx.query.get('customer');
    ctx.respond(200, paginate(ctx, await this.billing.invoices.list(customer ?? undefined), (i) => i));
  }

  private async getInvoice(ctx: MeteringRequest, _config: MeteringConfig, [id]: string[]): Promise<void> {
    ctx.respond(200, await this.billing.invoices.get(id));
  }
}

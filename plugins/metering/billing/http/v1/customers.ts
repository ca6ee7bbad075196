/**
 * OpenMeter v1's customers: the v3 customer domain with camelCase bodies (`usageAttribution.subjectKeys`,
 * `primaryEmail`, `metadata`), page-number lists, the current subscription's id, the access of every
 * entitlement (`/access`) and the customer's subscriptions.
 */
import { ulid } from '../../../shared/ids.ts';
import type { Billing } from '../../port.ts';
import { publicCustomer, usageSubjects, validateCustomer, type Customer } from '../../customer/port.ts';
import { validationFailed } from '../../shared/errors.ts';
import type { MeteringRequest } from '../../../http/http.ts';
import type { MeteringConfig } from '../../../schema.ts';
import { v1Value } from './entitlements.ts';
import { operation, type V1Handler, type V1Routes } from '../../../http/v1/router.ts';
import { byText, pageOf, paginated, queryList, toV1 } from '../../../http/v1/shapes.ts';
import { v1Subscription } from './subscriptions.ts';
import { v1Body } from './body.ts';

const ORDERS: Record<string, (c: Customer) => string> = {
  id: (c) => c.id,
  key: (c) => c.key,
  name: (c) => c.name,
  createdAt: (c) => c.created_at,
  updatedAt: (c) => c.updated_at,
};

export class CustomersV1 {
  constructor(private readonly billing: Billing) {}

  routes(): V1Routes {
    const billing = (handle: V1Handler) => operation('billing', handle);
    return {
      'v1/customers': { GET: billing((ctx) => this.list(ctx)), POST: billing((ctx, config) => this.create(ctx, config)) },
      'v1/customers/*': {
        GET: billing((ctx, _c, [id]) => this.get(ctx, id)),
        PUT: billing((ctx, config, [id]) => this.update(ctx, config, id)),
        DELETE: billing((ctx, _c, [id]) => this.delete(ctx, id)),
      },
      'v1/customers/*/access': { GET: operation('read', (ctx, _c, [id]) => this.access(ctx, id)) },
      'v1/customers/*/subscriptions': { GET: billing((ctx, _c, [id]) => this.subscriptions(ctx, id)) },
    };
  }

  /** The customer as v1 shows it, with the id of the subscription active now (and that subscription with `expand=subscriptions`). */
  private async v1Customer(c: Customer, ctx?: MeteringRequest): Promise<Record<string, unknown>> {
    const current = c.deleted_at ? undefined : await this.billing.subscriptions.activeAt(c.id, Date.now());
    const out: Record<string, unknown> = { ...toV1(publicCustomer(c)), ...(current ? { currentSubscriptionId: current.id } : {}) };
    if (ctx && queryList(ctx, 'expand').includes('subscriptions')) out.subscriptions = current ? [v1Subscription(current)] : [];
    return out;
  }

  private async list(ctx: MeteringRequest): Promise<void> {
    const q = ctx.query;
    const page = pageOf(ctx)!;
    const includeDeleted = q.get('includeDeleted') === 'true';
    const [key, name, email, subject] = ['key', 'name', 'primaryEmail', 'subject'].map((n) => q.get(n));
    const planKeys = queryList(ctx, 'planKey');
    const now = Date.now();
    const onPlan = async (c: Customer) => planKeys.length === 0 || planKeys.includes((await this.billing.subscriptions.activeAt(c.id, now))?.plan.key ?? '');
    const matching: Customer[] = [];
    for (const c of await this.billing.customers.list()) {
      const matches =
        (includeDeleted || c.deleted_at === null) &&
        (key === null || c.key === key) &&
        (name === null || c.name.toLowerCase().includes(name.toLowerCase())) &&
        (email === null || c.primary_email === email) &&
        (subject === null || usageSubjects(c).includes(subject));
      if (matches && (await onPlan(c))) matching.push(c);
    }
    const order = ORDERS[q.get('orderBy') ?? 'name'] ?? ORDERS.name;
    matching.sort(byText(order));
    if (q.get('order')?.toUpperCase() === 'DESC') matching.reverse();
    const listed = paginated(matching, page, (c) => c);
    ctx.respond(200, { ...listed, items: await Promise.all(listed.items.map((c) => this.v1Customer(c, ctx))) });
  }

  /** v1's key is optional: a customer without one is known by its id, which becomes its key. */
  private async create(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const body = await v1Body(ctx, config);
    const id = ulid();
    const { definition, problems } = validateCustomer({ ...body, key: body.key ?? id });
    if (!definition) throw validationFailed(problems);
    ctx.respond(201, await this.v1Customer(await this.billing.customers.create(definition, 'api', id)));
  }

  private async get(ctx: MeteringRequest, id: string): Promise<void> {
    ctx.respond(200, await this.v1Customer(await this.billing.customers.get(id), ctx));
  }

  /** As the v3 PUT: the key never changes, so v1 need not send it. */
  private async update(ctx: MeteringRequest, config: MeteringConfig, id: string): Promise<void> {
    const body = await v1Body(ctx, config);
    const current = await this.billing.customers.get(id);
    const { definition, problems } = validateCustomer({ ...body, key: current.key });
    if (!definition) throw validationFailed(problems);
    ctx.respond(200, await this.v1Customer(await this.billing.customers.update(id, definition, new Set(Object.keys(body)))));
  }

  private async delete(ctx: MeteringRequest, id: string): Promise<void> {
    await this.billing.customers.delete(id);
    ctx.respond(204);
  }

  /** `{entitlements: {<feature key>: EntitlementValue}}` of the entitlements active now. */
  private async access(ctx: MeteringRequest, id: string): Promise<void> {
    const values = await this.billing.entitlements.access(id);
    ctx.respond(200, { entitlements: Object.fromEntries(values.map((v) => [v.feature_key, v1Value(v)])) });
  }

  private async subscriptions(ctx: MeteringRequest, id: string): Promise<void> {
    const page = pageOf(ctx)!;
    const statuses = queryList(ctx, 'status');
    const customer = await this.billing.customers.get(id);
    const all = (await this.billing.subscriptions.ofCustomer(customer.id)).map((s) => v1Subscription(s));
    const listed = all.filter((s) => statuses.length === 0 || statuses.includes(s.status as string)).sort(byText((s) => s.activeFrom as string));
    if (ctx.query.get('order')?.toUpperCase() === 'DESC') listed.reverse();
    ctx.respond(200, paginated(listed, page, (s) => s));
  }
}

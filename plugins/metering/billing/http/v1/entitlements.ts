/**
 * OpenMeter's entitlements, v1 (by subject) and v2 (by customer): read from the grants of the
 * subscriptions active now, as the v3 access endpoints are (one entitlement per subscription and
 * feature, its id stable). Tollgate grants entitlements only through a plan's rate cards, so writing
 * them (create, override, reset, delete) and grants are answered 501 with what to do instead; the
 * list of grants is empty.
 */
import type { AccessValue, Billing, Grant } from '../../port.ts';
import { usagePeriodAt } from '../../entitlement/port.ts';
import { Temporal } from 'temporal-polyfill';
import { formatInstant, parseInstant, type Instant, type Period } from '../../shared/calendar.ts';
import { notFound } from '../../shared/errors.ts';
import { notSupported, type InvalidParameter } from '../../../shared/errors.ts';
import { validationProblem, type MeteringRequest } from '../../../http/http.ts';
import { operation, type V1Handler, type V1Routes } from '../../../http/v1/router.ts';
import { listOrPage, pageOf, paginated, queryList } from '../../../http/v1/shapes.ts';

const INSTEAD = 'Tollgate grants entitlements through the entitlement templates of a plan\'s rate cards; publish such a plan and subscribe the customer to it';
const refuse = (what: string): V1Handler => () => {
  throw notSupported(what, INSTEAD);
};

const iso = (t: Instant) => formatInstant(t);
const amount = (text: string | undefined) => (text === undefined ? undefined : Number(text));

/** The period a metered grant is in at `now`, as v1 shows it. */
function v1Period(g: Grant, now: Instant): { from: string; to: string } {
  const p = usagePeriodAt(g, now);
  return { from: iso(p.from), to: iso(p.to) };
}

/** A grant as OpenMeter's v1 (`subjectKey`) or v2 (`customerId`, `customerKey`) entitlement. */
function v1Entitlement(g: Grant, now: Instant, version: 1 | 2): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: g.id,
    type: g.type,
    featureKey: g.featureKey,
    featureId: g.featureId,
    ...(version === 1 ? { subjectKey: g.subjects[0] } : { customerId: g.customer.id, customerKey: g.customer.key }),
    activeFrom: iso(g.activeFrom),
    ...(g.activeTo === null ? {} : { activeTo: iso(g.activeTo) }),
    createdAt: iso(g.activeFrom),
    updatedAt: iso(g.activeFrom),
    metadata: { subscriptionId: g.subscriptionId },
  };
  if (g.type === 'static') out.config = g.config;
  if (g.type === 'metered') {
    const current = v1Period(g, now);
    Object.assign(out, {
      isSoftLimit: g.soft,
      isUnlimited: false,
      issueAfterReset: Number(g.limit!.toString()),
      preserveOverageAtReset: false,
      usagePeriod: { interval: g.usagePeriod!.text, intervalISO: g.usagePeriod!.text, anchor: iso(g.anchor) },
      currentUsagePeriod: current,
      lastReset: current.from,
      measureUsageFrom: iso(g.activeFrom),
    });
  }
  return out;
}

/** v1's `EntitlementValue`: numbers where v3 answers decimal strings. */
export function v1Value(v: AccessValue | undefined): Record<string, unknown> {
  if (!v) return { hasAccess: false };
  const out: Record<string, unknown> = { hasAccess: v.has_access };
  if (v.config !== undefined) out.config = v.config;
  if (v.type === 'metered') Object.assign(out, { balance: amount(v.balance), usage: amount(v.usage), overage: amount(v.overage), totalAvailableGrantAmount: amount(v.limit) });
  return out;
}

const WINDOW_SIZES = ['MINUTE', 'HOUR', 'DAY', 'MONTH'] as const;
type WindowSize = (typeof WINDOW_SIZES)[number];
const UNITS = { MINUTE: 'minute', HOUR: 'hour', DAY: 'day', MONTH: 'month' } as const;
/** Windows one history answer may hold (each costs two usage reads). */
const MAX_HISTORY_WINDOWS = 1000;

/** The start of the window of `size` holding `t`, on the clock of `zone`. */
function windowStart(t: Instant, size: WindowSize, zone: string): Temporal.ZonedDateTime {
  const at = Temporal.Instant.fromEpochMilliseconds(t).toZonedDateTimeISO(zone);
  if (size === 'MONTH') return at.with({ day: 1 }).startOfDay();
  return at.round({ smallestUnit: UNITS[size], roundingMode: 'floor' });
}

/** Windows of `size` in `zone` covering [from, to), the first and last clipped to them (DST days are 23 or 25 hours). */
function windowsOf(from: Instant, to: Instant, size: WindowSize, zone: string): Period[] {
  const out: Period[] = [];
  for (let start = windowStart(from, size, zone); start.epochMilliseconds < to; start = start.add({ [`${UNITS[size]}s`]: 1 })) {
    if (out.length === MAX_HISTORY_WINDOWS) {
      throw validationProblem([{ field: 'windowSize', reason: `from and to span more than ${MAX_HISTORY_WINDOWS} windows of ${size}`, rule: 'range', source: 'query' }]);
    }
    const end = start.add({ [`${UNITS[size]}s`]: 1 }).epochMilliseconds;
    out.push({ from: Math.max(start.epochMilliseconds, from), to: Math.min(end, to) });
  }
  return out;
}

function validZone(zone: string): boolean {
  try {
    Temporal.Now.zonedDateTimeISO(zone);
    return zone.length <= 64;
  } catch {
    return false;
  }
}

export class EntitlementsV1 {
  constructor(private readonly billing: Billing) {}

  routes(): V1Routes {
    const read = (handle: V1Handler) => operation('read', handle);
    return {
      'v1/entitlements': { GET: read((ctx) => this.list(ctx, 1)) },
      'v1/entitlements/*': { GET: read((ctx, _c, [id]) => this.getById(ctx, id, 1)) },
      'v1/subjects/*/entitlements': { GET: read((ctx, _c, [subject]) => this.listOfSubject(ctx, subject)), POST: read(refuse('creating an entitlement')) },
      'v1/subjects/*/entitlements/*': { GET: read((ctx, _c, [subject, id]) => this.getOfSubject(ctx, subject, id)), DELETE: read(refuse('deleting an entitlement')) },
      'v1/subjects/*/entitlements/*/value': { GET: read((ctx, _c, [subject, id]) => this.valueOfSubject(ctx, subject, id)) },
      'v1/subjects/*/entitlements/*/history': { GET: read((ctx, _c, [subject, id]) => this.historyOfSubject(ctx, subject, id)) },
      'v1/subjects/*/entitlements/*/override': { PUT: read(refuse('overriding an entitlement')) },
      'v1/subjects/*/entitlements/*/reset': { POST: read(refuse('resetting an entitlement\'s usage')) },
      'v1/subjects/*/entitlements/*/grants': { GET: read((ctx) => ctx.respond(200, [])), POST: read(refuse('granting to an entitlement')) },
      'v1/grants': { GET: read((ctx) => ctx.respond(200, listOrPage(ctx, [], (g) => g))) },
      'v1/grants/*': { DELETE: read(refuse('voiding a grant')) },
      'v1/customers/*/entitlements/*/value': { GET: read((ctx, _c, [customer, feature]) => this.valueOfCustomer(ctx, customer, feature)) },
      'v2/entitlements': { GET: read((ctx) => this.list(ctx, 2)) },
      'v2/entitlements/*': { GET: read((ctx, _c, [id]) => this.getById(ctx, id, 2)) },
      'v2/grants': { GET: read((ctx) => ctx.respond(200, paginated([], pageOf(ctx)!, (g) => g))) },
      'v2/customers/*/entitlements': { GET: read((ctx, _c, [customer]) => this.listOfCustomer(ctx, customer)), POST: read(refuse('creating an entitlement')) },
      'v2/customers/*/entitlements/*': { GET: read((ctx, _c, [customer, id]) => this.getOfCustomer(ctx, customer, id)), DELETE: read(refuse('deleting an entitlement')) },
      'v2/customers/*/entitlements/*/value': { GET: read((ctx, _c, [customer, id]) => this.valueOfCustomer(ctx, customer, id)) },
      'v2/customers/*/entitlements/*/history': { GET: read((ctx, _c, [customer, id]) => this.historyOfCustomer(ctx, customer, id)) },
      'v2/customers/*/entitlements/*/override': { PUT: read(refuse('overriding an entitlement')) },
      'v2/customers/*/entitlements/*/reset': { POST: read(refuse('resetting an entitlement\'s usage')) },
      'v2/customers/*/entitlements/*/grants': { GET: read((ctx) => ctx.respond(200, paginated([], pageOf(ctx)!, (g) => g))), POST: read(refuse('granting to an entitlement')) },
    };
  }

  /** `time`: the instant the answer is for (default now). */
  private instantOf(ctx: MeteringRequest): Instant {
    const raw = ctx.query.get('time');
    if (raw === null) return Date.now();
    const t = parseInstant(raw);
    if (t === undefined) throw validationProblem([{ field: 'time', reason: 'must be an RFC 3339 date-time', rule: 'is_date_time', source: 'query' }]);
    return t;
  }

  private async list(ctx: MeteringRequest, version: 1 | 2): Promise<void> {
    const now = Date.now();
    const features = queryList(ctx, 'feature');
    const types = queryList(ctx, 'entitlementType');
    const subjects = queryList(ctx, 'subject');
    const customerKeys = queryList(ctx, 'customerKeys');
    const customerIds = queryList(ctx, 'customerIds');
    const grants = (await this.billing.entitlements.allGrants(now)).filter(
      (g) =>
        (features.length === 0 || features.includes(g.featureKey) || features.includes(g.featureId ?? '')) &&
        (types.length === 0 || types.includes(g.type)) &&
        (subjects.length === 0 || g.subjects.some((s) => subjects.includes(s))) &&
        (customerKeys.length === 0 || customerKeys.includes(g.customer.key)) &&
        (customerIds.length === 0 || customerIds.includes(g.customer.id)),
    );
    const map = (g: Grant) => v1Entitlement(g, now, version);
    ctx.respond(200, version === 1 ? listOrPage(ctx, grants, map) : paginated(grants, pageOf(ctx)!, map));
  }

  private async getById(ctx: MeteringRequest, id: string, version: 1 | 2): Promise<void> {
    const now = Date.now();
    const grant = (await this.billing.entitlements.allGrants(now)).find((g) => g.id === id);
    if (!grant) throw notFound('entitlement', id);
    ctx.respond(200, v1Entitlement(grant, now, version));
  }

  /** The grants of the live customer a subject key (or customer key) names. */
  private async grantsOfSubject(subject: string, now: Instant): Promise<Grant[]> {
    const customer = await this.billing.customers.resolve(subject);
    if (!customer) throw notFound('subject', subject);
    return this.billing.entitlements.grants(customer, now);
  }

  private async grantsOfCustomer(idOrKey: string, now: Instant): Promise<Grant[]> {
    return this.billing.entitlements.grants(await this.billing.customers.get(idOrKey), now);
  }

  /** One grant by entitlement id or feature key (OpenMeter's `entitlementIdOrFeatureKey`). */
  private pick(grants: Grant[], idOrFeatureKey: string): Grant {
    const grant = grants.find((g) => g.id === idOrFeatureKey || g.featureKey === idOrFeatureKey);
    if (!grant) throw notFound('entitlement', idOrFeatureKey);
    return grant;
  }

  private async listOfSubject(ctx: MeteringRequest, subject: string): Promise<void> {
    const now = Date.now();
    ctx.respond(200, (await this.grantsOfSubject(subject, now)).map((g) => v1Entitlement(g, now, 1)));
  }

  private async listOfCustomer(ctx: MeteringRequest, customer: string): Promise<void> {
    const now = Date.now();
    ctx.respond(200, paginated(await this.grantsOfCustomer(customer, now), pageOf(ctx)!, (g) => v1Entitlement(g, now, 2)));
  }

  private async getOfSubject(ctx: MeteringRequest, subject: string, id: string): Promise<void> {
    const now = Date.now();
    ctx.respond(200, v1Entitlement(this.pick(await this.grantsOfSubject(subject, now), id), now, 1));
  }

  private async getOfCustomer(ctx: MeteringRequest, customer: string, id: string): Promise<void> {
    const now = Date.now();
    ctx.respond(200, v1Entitlement(this.pick(await this.grantsOfCustomer(customer, now), id), now, 2));
  }

  private async valueOfSubject(ctx: MeteringRequest, subject: string, idOrFeatureKey: string): Promise<void> {
    const at = this.instantOf(ctx);
    const grant = this.pick(await this.grantsOfSubject(subject, at), idOrFeatureKey);
    ctx.respond(200, v1Value(await this.billing.entitlements.valueOf(grant, at)));
  }

  /** A customer's value of a feature: no access (not 404) for a live feature its subscription does not grant, as the access endpoints. */
  private async valueOfCustomer(ctx: MeteringRequest, customer: string, idOrFeatureKey: string): Promise<void> {
    const at = this.instantOf(ctx);
    const grants = await this.grantsOfCustomer(customer, at);
    const grant = grants.find((g) => g.id === idOrFeatureKey || g.featureKey === idOrFeatureKey);
    if (grant) return void ctx.respond(200, v1Value(await this.billing.entitlements.valueOf(grant, at)));
    await this.billing.features.get(idOrFeatureKey);
    ctx.respond(200, v1Value(undefined));
  }

  private async historyOfSubject(ctx: MeteringRequest, subject: string, id: string): Promise<void> {
    await this.history(ctx, this.pick(await this.grantsOfSubject(subject, Date.now()), id));
  }

  private async historyOfCustomer(ctx: MeteringRequest, customer: string, id: string): Promise<void> {
    await this.history(ctx, this.pick(await this.grantsOfCustomer(customer, Date.now()), id));
  }

  /** Usage and balance per window (in `windowTimeZone`, default UTC) from `from` (default: the current usage period's start) to `to` (default: now). */
  private async history(ctx: MeteringRequest, grant: Grant): Promise<void> {
    const q = ctx.query;
    const problems: InvalidParameter[] = [];
    const size = q.get('windowSize') as WindowSize;
    if (!WINDOW_SIZES.includes(size)) problems.push({ field: 'windowSize', reason: `must be one of: ${WINDOW_SIZES.join(', ')}`, rule: 'enum', source: 'query', choices: WINDOW_SIZES });
    const zone = q.get('windowTimeZone') ?? 'UTC';
    if (!validZone(zone)) problems.push({ field: 'windowTimeZone', reason: `invalid time zone: ${zone.slice(0, 64)}`, rule: 'invalid_time_zone', source: 'query' });
    if (grant.type !== 'metered') problems.push({ field: 'entitlementIdOrFeatureKey', reason: `${grant.featureKey} is a ${grant.type} entitlement: only metered ones have a history`, rule: 'invalid', source: 'path' });
    const time = (name: string, fallback: () => Instant) => {
      const raw = q.get(name);
      const t = raw === null ? fallback() : parseInstant(raw);
      if (t === undefined) problems.push({ field: name, reason: 'must be an RFC 3339 date-time', rule: 'is_date_time', source: 'query' });
      return t ?? 0;
    };
    const now = Date.now();
    const to = time('to', () => now);
    const from = Math.max(time('from', () => usagePeriodAt(grant, now).from), grant.activeFrom);
    if (problems.length === 0 && from >= to) problems.push({ field: 'from', reason: 'from must be before to (and not before the entitlement is active)', rule: 'invalid', source: 'query' });
    if (problems.length) throw validationProblem(problems);
    const rows = await this.billing.entitlements.history(grant, windowsOf(from, to, size, zone));
    ctx.respond(200, {
      windowedHistory: rows.map((r) => ({
        period: { from: iso(r.period.from), to: iso(r.period.to) },
        usage: Number(r.usage.toString()),
        balanceAtStart: Number(r.balanceAtStart.toString()),
      })),
      burndownHistory: [],
    });
  }
}

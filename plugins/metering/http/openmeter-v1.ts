/**
 * OpenMeter's classic v1 metering API under the metering route (`api/v1/...`, camelCase, RFC 7807
 * errors), so that the official `@openmeter/sdk` works with the route's URL as its base URL: another HTTP
 * mapping of the same domain as the v3 paths (same service, meters, events and usage; each request is
 * translated to the v3 domain calls and each answer back).
 *
 * Shapes follow OpenMeter's v1 spec (api/spec/packages/legacy): meters `{id, slug, name, aggregation:
 * SUM|COUNT|..., eventType, valueProperty, groupBy, ...}`, query rows `{value, windowStart, windowEnd,
 * subject, customerId?, groupBy}` with numeric values, events listed as `{event, ingestedAt, storedAt, validationError}`.
 */
import { methodNotAllowed, meterNotFound, noResource, RequestError, type InvalidParameter } from '../shared/errors.ts';
import { ingestRequest, readJson, requireScope, toProblem, validationProblem, type MeteringRequest, type SubRoutes } from './http.ts';
import type { Ingestion } from '../ingest/port.ts';
import type { NotificationsV1Http } from './notifications-v1.ts';
import { meterDefinitionFrom, validateMeterCreate, validateMeterUpdate, type MeterRecord } from '../meter/port.ts';
import { CUSTOMER_DIMENSION, parseQuery, type UsageQueries } from '../query/port.ts';
import type { MeteringConfig } from '../schema.ts';
import type { MeteringService } from '../service.ts';
import { parseRfc3339 } from '../shared/time.ts';

const WINDOW_SIZES: Record<string, string> = { MINUTE: 'PT1M', HOUR: 'PT1H', DAY: 'P1D', MONTH: 'P1M' };

/** v3 field names as v1 calls them, for problems. */
const V1_FIELDS: Record<string, string> = { key: 'slug', event_type: 'eventType', value_property: 'valueProperty', dimensions: 'groupBy', events_from: 'eventFrom', labels: 'metadata', granularity: 'windowSize', time_zone: 'windowTimeZone', group_by_dimensions: 'groupBy' };

/** Filters v1 sends as parameters of their own. */
const V1_FILTERS: Record<string, string> = { 'filters.dimensions.subject': 'subject', [`filters.dimensions.${CUSTOMER_DIMENSION}`]: 'filterCustomerId' };

function v1Field(field: string): string {
  if (V1_FILTERS[field]) return V1_FILTERS[field];
  const [head, ...rest] = field.split('.');
  const bracket = head.indexOf('[');
  const name = bracket === -1 ? head : head.slice(0, bracket);
  return [(V1_FIELDS[name] ?? name) + (bracket === -1 ? '' : head.slice(bracket)), ...rest].join('.');
}

function v1Problems(problems: InvalidParameter[]): InvalidParameter[] {
  return problems.map((p) => ({ ...p, field: v1Field(p.field) }));
}

/** RFC 7807 as OpenMeter's v1 API answers it (the SDK reads the body only with exactly this content type). */
function sendV1Problem(ctx: MeteringRequest, err: unknown): void {
  const p = toProblem(err);
  const body: Record<string, unknown> = { type: 'about:blank', title: titleOf(p.status), status: p.status, detail: p.detail, instance: `urn:request:${ctx.id}`, code: p.code };
  if (p.invalidParameters) body.invalidParameters = v1Problems(p.invalidParameters);
  ctx.respond(p.status, JSON.stringify(body), { 'content-type': 'application/problem+json', ...p.headers });
}

const TITLES: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 413: 'Payload Too Large', 503: 'Service Unavailable' };
const titleOf = (status: number) => TITLES[status] ?? (status >= 500 ? 'Internal Server Error' : 'Error');

export function v1Meter(record: MeterRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: record.id,
    slug: record.key,
    name: record.name,
    aggregation: record.aggregation.toUpperCase(),
    eventType: record.event_type,
    groupBy: record.dimensions,
    createdAt: record.created_at,
    updatedAt: record.updated_at,
  };
  if (record.description) out.description = record.description;
  if (Object.keys(record.labels ?? {}).length > 0) out.metadata = record.labels;
  if (record.events_from) out.eventFrom = record.events_from;
  if (record.value_property) out.valueProperty = record.value_property;
  if (record.deleted_at) out.deletedAt = record.deleted_at;
  return out;
}

/** A v1 `MeterCreate` as the v3 create body (unknown v1 fields kept, so that validation names them). */
function v3MeterBody(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const { slug, eventType, valueProperty, groupBy, eventFrom, metadata, aggregation, windowSize: _deprecated, ...rest } = body as Record<string, unknown>;
  const out: Record<string, unknown> = { ...rest };
  const set = (name: string, value: unknown) => {
    if (value !== undefined) out[name] = value;
  };
  set('key', slug);
  set('event_type', eventType);
  set('value_property', valueProperty);
  set('dimensions', groupBy);
  set('events_from', eventFrom);
  set('labels', metadata);
  set('aggregation', typeof aggregation === 'string' ? aggregation.toLowerCase() : aggregation);
  return out;
}

type Params = { get(name: string): string | null; getAll(name: string): string[] };

export class OpenMeterV1Http implements SubRoutes {
  constructor(
    private readonly service: MeteringService,
    private readonly ingestion: Ingestion,
    private readonly queries: UsageQueries,
    private readonly notifications?: NotificationsV1Http,
  ) {}

  async route(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<boolean> {
    if (parts[0] !== 'api' || parts[1] !== 'v1') return false;
    try {
      await this.v1(ctx, config, parts.slice(2));
    } catch (err) {
      sendV1Problem(ctx, err);
    }
    return true;
  }

  private async v1(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<void> {
    const method = ctx.method;
    const allow = (methods: string[]) => {
      if (!methods.includes(method)) throw methodNotAllowed(method, methods);
    };
    const [resource, id, sub, ...rest] = parts;
    if (resource === 'notification' && this.notifications) return this.notifications.route(ctx, config, parts.slice(1));
    if (resource === 'events' && parts.length === 1) {
      allow(['GET', 'POST']);
      if (method === 'GET') return this.listEvents(ctx, config);
      await ingestRequest(ctx, config, this.ingestion);
      return void ctx.respond(204);
    }
    if (resource === 'subjects' && parts.length === 1) {
      allow(['GET']);
      requireScope(ctx, config, 'read');
      const subjects = await this.service.subjects();
      return void ctx.respond(200, subjects.map((key) => ({ id: key, key, displayName: null, metadata: null })));
    }
    if (resource === 'meters' && parts.length === 1) {
      allow(['GET', 'POST']);
      if (method === 'GET') {
        requireScope(ctx, config, 'read');
        const all = ctx.query.get('includeDeleted') === 'true' ? this.service.meters.all() : this.service.meters.live();
        return void ctx.respond(200, all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map(v1Meter));
      }
      return this.createMeter(ctx, config);
    }
    if (resource === 'meters' && parts.length === 2) {
      allow(['GET', 'PUT', 'DELETE']);
      if (method === 'GET') {
        requireScope(ctx, config, 'read');
        return void ctx.respond(200, v1Meter(this.service.catalogue.find(id)));
      }
      if (method === 'PUT') return this.updateMeter(ctx, config, id);
      requireScope(ctx, config, 'manage');
      await this.service.catalogue.deleteMeter(id);
      return void ctx.respond(204);
    }
    if (resource === 'meters' && sub === 'query' && rest.length === 0) {
      allow(['GET', 'POST']);
      return this.query(ctx, config, id);
    }
    throw noResource('OpenMeter v1', ctx.path);
  }

  private async createMeter(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    requireScope(ctx, config, 'manage');
    const body = v3MeterBody(await readJson(ctx, config.max_body_size));
    // OpenMeter v1 names a meter after its slug when no name is given.
    const problems = validateMeterCreate(body, { nameDefaultsToKey: true });
    if (problems.length) throw validationProblem(v1Problems(problems));
    const record = await this.service.catalogue.createMeter(meterDefinitionFrom(body as Record<string, unknown>));
    ctx.respond(201, v1Meter(record));
  }

  private async updateMeter(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string): Promise<void> {
    requireScope(ctx, config, 'manage');
    const current = this.service.catalogue.find(idOrSlug);
    const body = v3MeterBody(await readJson(ctx, config.max_body_size)) as Record<string, unknown>;
    // v1: an omitted name resets it to the slug.
    if (body && typeof body === 'object' && (body.name === undefined || body.name === null)) body.name = current.key;
    const problems = validateMeterUpdate(body, current);
    if (problems.length) throw validationProblem(v1Problems(problems));
    ctx.respond(200, v1Meter(await this.service.catalogue.updateMeter(idOrSlug, body)));
  }

  private async listEvents(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    requireScope(ctx, config, 'read');
    const q = ctx.query;
    const problems: InvalidParameter[] = [];
    const time = (name: string) => {
      const value = q.get(name);
      if (value === null || value === '') return undefined;
      const t = parseRfc3339(value);
      if (t === undefined) problems.push({ field: name, reason: 'must be an RFC 3339 date-time', rule: 'is_date_time', source: 'query' });
      return t;
    };
    const from = time('from');
    const to = time('to');
    if (from !== undefined && to !== undefined && to < from) problems.push({ field: 'to', reason: 'to must not be before from', rule: 'invalid', source: 'query' });
    const limit = q.get('limit') === null ? 100 : Number(q.get('limit'));
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) problems.push({ field: 'limit', reason: 'must be an integer between 1 and 100', rule: 'range', source: 'query' });
    if (problems.length) throw validationProblem(problems);
    const page = await this.service.eventListing.list({ subject: q.get('subject') ?? undefined, id: q.get('id') ?? undefined, from, to }, limit);
    ctx.respond(
      200,
      page.items.map((item: any) => {
        const out: Record<string, unknown> = { event: item.event, ingestedAt: item.ingested_at, storedAt: item.stored_at };
        if (item.validation_errors.length > 0) out.validationError = item.validation_errors.map((e: { message: string }) => e.message).join('; ');
        return out;
      }),
    );
  }

  /** `GET` (query string, deepObject filters) or `POST` (JSON body): both become one v3 query. */
  private async query(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string): Promise<void> {
    requireScope(ctx, config, 'read');
    const record = this.service.catalogue.find(idOrSlug);
    if (record.deleted_at) throw meterNotFound(idOrSlug);
    const request = ctx.method === 'GET' ? fromQueryString(ctx.query) : ((await readJson(ctx, config.max_body_size)) ?? {});
    if (typeof request !== 'object' || request === null || Array.isArray(request)) throw new RequestError('METERING_ERR_MALFORMED_BODY', 'the body must be a JSON object');
    const v1 = request as Record<string, any>;
    const windowSize = v1.windowSize;
    const subjects: string[] = asList(v1.subject);
    const customers: string[] = asList(v1.filterCustomerId);
    const groupBy: string[] = asList(v1.groupBy);
    const dimensions: Record<string, unknown> = {};
    if (subjects.length > 0) dimensions.subject = { in: subjects };
    if (customers.length > 0) dimensions[CUSTOMER_DIMENSION] = { in: customers };
    for (const [name, values] of Object.entries((v1.filterGroupBy ?? {}) as Record<string, unknown>)) dimensions[name] = { in: asList(values) };
    const body: Record<string, unknown> = {
      from: v1.from ?? undefined,
      to: v1.to ?? undefined,
      granularity: windowSize === undefined || windowSize === null ? undefined : (WINDOW_SIZES[windowSize] ?? windowSize),
      time_zone: v1.windowTimeZone ?? undefined,
      group_by_dimensions: groupBy,
      filters: { dimensions },
    };
    const { query, problems } = parseQuery(body, this.service.meters.compiledOf(record));
    if (!query) throw validationProblem(v1Problems(problems));
    const { result } = await this.queries.run(record, query, config.query_backfill_wait_ms);
    const byCustomer = query.groupBy.includes(CUSTOMER_DIMENSION);
    const meterGroups = query.groupBy.filter((name) => name !== 'subject' && name !== CUSTOMER_DIMENSION);
    const out: Record<string, unknown> = {
      data: result.data.map((row) => ({
        value: Number(row.value),
        windowStart: row.from,
        windowEnd: row.to,
        subject: row.dimensions.subject ?? null,
        // Only when grouped by customer, as OpenMeter's; null for usage of subjects no customer claims.
        ...(byCustomer ? { customerId: row.dimensions[CUSTOMER_DIMENSION] ?? null } : {}),
        groupBy: Object.fromEntries(meterGroups.map((name) => [name, row.dimensions[name] ?? ''])),
      })),
    };
    if (v1.from) out.from = v1.from;
    if (v1.to) out.to = v1.to;
    if (windowSize) out.windowSize = windowSize;
    ctx.respond(200, out);
  }
}

function asList(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value.map(String) : [String(value)];
}

/** A v1 GET query: repeated `subject`, `filterCustomerId` and `groupBy`, `filterGroupBy[name]=value` (deepObject). */
function fromQueryString(q: Params & URLSearchParams): Record<string, unknown> {
  const filterGroupBy: Record<string, string[]> = {};
  for (const [key, value] of q) {
    const m = /^filterGroupBy\[([^\]]+)\]$/.exec(key);
    if (m) (filterGroupBy[m[1]] ??= []).push(value);
  }
  return {
    from: q.get('from') ?? undefined,
    to: q.get('to') ?? undefined,
    windowSize: q.get('windowSize') ?? undefined,
    windowTimeZone: q.get('windowTimeZone') ?? undefined,
    subject: q.getAll('subject'),
    filterCustomerId: q.getAll('filterCustomerId'),
    groupBy: q.getAll('groupBy'),
    filterGroupBy,
  };
}

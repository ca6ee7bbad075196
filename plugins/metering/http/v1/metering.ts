/**
 * OpenMeter v1's metering area: events (ingest, list), meters (create, list, get, update, delete), their
 * queries (GET with a query string, POST with a body) and the values of a group-by, translated to the v3
 * domain calls and back. Shapes follow OpenMeter's v1 spec (api/spec/packages/legacy): meters `{id, slug,
 * name, aggregation: SUM|COUNT|..., eventType, valueProperty, groupBy, ...}`, query rows `{value,
 * windowStart, windowEnd, subject, customerId?, groupBy}` with numeric values, events listed as
 * `{event, ingestedAt, storedAt, validationError}`.
 */
import { meterNotFound, RequestError, type InvalidParameter } from '../../shared/errors.ts';
import { ingestRequest, readJson, validationProblem, type MeteringRequest } from '../http.ts';
import type { Ingestion } from '../../ingest/port.ts';
import { meterDefinitionFrom, validateMeterCreate, validateMeterUpdate, type MeterRecord } from '../../meter/port.ts';
import { CUSTOMER_DIMENSION, parseQuery, type EventFilters, type UsageQueries } from '../../query/port.ts';
import type { MeteringConfig } from '../../schema.ts';
import type { MeteringService } from '../../service.ts';
import { parseRfc3339 } from '../../shared/time.ts';
import { V1_QUERY_FILTERS, v1Problems } from './problems.ts';
import { operation, type V1Routes } from './router.ts';
import { byText } from './shapes.ts';

const WINDOW_SIZES: Record<string, string> = { MINUTE: 'PT1M', HOUR: 'PT1H', DAY: 'P1D', MONTH: 'P1M' };

/** v3 field names as v1 calls them, for problems. */
const V1_FIELDS: Record<string, string> = { key: 'slug', event_type: 'eventType', value_property: 'valueProperty', dimensions: 'groupBy', events_from: 'eventFrom', labels: 'metadata', granularity: 'windowSize', time_zone: 'windowTimeZone', group_by_dimensions: 'groupBy' };

function v1Field(field: string): string {
  if (V1_QUERY_FILTERS[field]) return V1_QUERY_FILTERS[field];
  const [head, ...rest] = field.split('.');
  const bracket = head.indexOf('[');
  const name = bracket === -1 ? head : head.slice(0, bracket);
  return [(V1_FIELDS[name] ?? name) + (bracket === -1 ? '' : head.slice(bracket)), ...rest].join('.');
}

/** Meter problems with v1's names (the generic renaming would not know `key` is a meter's `slug`). */
function meterProblems(problems: InvalidParameter[]): InvalidParameter[] {
  return v1Problems(problems, v1Field);
}

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

/** An event as v1 lists it: `{event, ingestedAt, storedAt, validationError?}` (the messages joined). */
function v1IngestedEvent(item: any): Record<string, unknown> {
  const out: Record<string, unknown> = { event: item.event, ingestedAt: item.ingested_at, storedAt: item.stored_at };
  if (item.validation_errors.length > 0) out.validationError = item.validation_errors.map((e: { message: string }) => e.message).join('; ');
  return out;
}

/** The v3 listing's cursor (`page[after]`). */
const EVENT_CURSOR = /^\d{12}\/[0-9a-f]{12}$/;
const EXACT_FIELDS = ['id', 'source', 'subject', 'type'] as const;

/** v2's JSON filter as the listing's filters; operators the listing has no equivalent of are refused. */
function eventFiltersV2(raw: string | null, problems: InvalidParameter[]): EventFilters {
  const filters: EventFilters = {};
  if (raw === null || raw === '') return filters;
  const refuse = (field: string, reason: string) => void problems.push({ field: `filter.${field}`.replace(/\.$/, ''), reason, rule: 'invalid', source: 'query' });
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return refuse('', 'must be a JSON object'), filters;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return refuse('', 'must be a JSON object'), filters;
  for (const [field, condition] of Object.entries(parsed as Record<string, unknown>)) {
    const ops = typeof condition === 'object' && condition !== null && !Array.isArray(condition) ? (condition as Record<string, unknown>) : undefined;
    if ((EXACT_FIELDS as readonly string[]).includes(field) && ops && Object.keys(ops).length === 1 && typeof ops.$eq === 'string') {
      filters[field as (typeof EXACT_FIELDS)[number]] = ops.$eq;
    } else if (field === 'time' && ops) {
      timeRange(ops, filters, (reason) => refuse('time', reason));
    } else refuse(field, 'supported: $eq on id, source, subject and type; $gt, $gte, $lt, $lte on time');
  }
  return filters;
}

/** The listing's bounds are whole seconds (as event times are): `$gt t` starts a second after t, `$lte t` ends a second after it. */
function timeRange(ops: Record<string, unknown>, filters: EventFilters, refuse: (reason: string) => void): void {
  const shifts: Record<string, ['from' | 'to', number]> = { $gte: ['from', 0], $gt: ['from', 1], $lt: ['to', 0], $lte: ['to', 1] };
  for (const [op, value] of Object.entries(ops)) {
    const t = typeof value === 'string' ? parseRfc3339(value) : undefined;
    if (!shifts[op] || t === undefined) return refuse('operators $gt, $gte, $lt, $lte with RFC 3339 date-times');
    filters[shifts[op][0]] = t + shifts[op][1];
  }
}

/** How far back the values of a group-by are read when no `from` is given (OpenMeter's default). */
const GROUP_BY_VALUES_WINDOW_MS = 24 * 3_600_000;

export class MeteringV1 {
  constructor(
    private readonly service: MeteringService,
    private readonly ingestion: Ingestion,
    private readonly queries: UsageQueries,
  ) {}

  routes(): V1Routes {
    return {
      'v1/events': { GET: operation('read', (ctx, config) => this.listEvents(ctx, config)), POST: operation('ingest', (ctx, config) => this.ingest(ctx, config)) },
      'v2/events': { GET: operation('read', (ctx) => this.listEventsV2(ctx)) },
      'v1/meters': { GET: operation('read', (ctx) => this.listMeters(ctx)), POST: operation('manage', (ctx, config) => this.createMeter(ctx, config)) },
      'v1/meters/*': {
        GET: operation('read', (ctx, _config, [id]) => ctx.respond(200, v1Meter(this.service.catalogue.find(id)))),
        PUT: operation('manage', (ctx, config, [id]) => this.updateMeter(ctx, config, id)),
        DELETE: operation('manage', (ctx, _config, [id]) => this.deleteMeter(ctx, id)),
      },
      'v1/meters/*/query': { GET: operation('read', (ctx, config, [id]) => this.query(ctx, config, id)), POST: operation('read', (ctx, config, [id]) => this.query(ctx, config, id)) },
      'v1/meters/*/group-by/*/values': { GET: operation('read', (ctx, config, [id, key]) => this.groupByValues(ctx, config, id, key)) },
    };
  }

  private async ingest(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    await ingestRequest(ctx, config, this.ingestion);
    ctx.respond(204);
  }

  private listMeters(ctx: MeteringRequest): void {
    const all = ctx.query.get('includeDeleted') === 'true' ? this.service.meters.all() : this.service.meters.live();
    ctx.respond(200, all.sort(byText((m) => m.key)).map(v1Meter));
  }

  private async deleteMeter(ctx: MeteringRequest, id: string): Promise<void> {
    await this.service.catalogue.deleteMeter(id);
    ctx.respond(204);
  }

  /** The distinct values of one of the meter's group-bys in [from, to) (default: the last 24 hours), sorted. */
  private async groupByValues(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string, key: string): Promise<void> {
    const record = this.liveMeter(idOrSlug);
    const to = ctx.query.get('to') ?? undefined;
    const from = ctx.query.get('from') ?? new Date((to ? Date.parse(to) : Date.now()) - GROUP_BY_VALUES_WINDOW_MS).toISOString();
    const { query, problems } = parseQuery({ from, to, group_by_dimensions: [key] }, this.service.meters.compiledOf(record));
    if (!query) throw validationProblem(meterProblems(problems));
    const { result } = await this.queries.run(record, query, config.query_backfill_wait_ms);
    const values = new Set(result.data.map((row) => row.dimensions[key]).filter((v): v is string => typeof v === 'string' && v !== ''));
    ctx.respond(200, [...values].sort());
  }

  private liveMeter(idOrSlug: string): MeterRecord {
    const record = this.service.catalogue.find(idOrSlug);
    if (record.deleted_at) throw meterNotFound(idOrSlug);
    return record;
  }

  private async createMeter(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const body = v3MeterBody(await readJson(ctx, config.max_body_size));
    // OpenMeter v1 names a meter after its slug when no name is given.
    const problems = validateMeterCreate(body, { nameDefaultsToKey: true });
    if (problems.length) throw validationProblem(meterProblems(problems));
    const record = await this.service.catalogue.createMeter(meterDefinitionFrom(body as Record<string, unknown>));
    ctx.respond(201, v1Meter(record));
  }

  private async updateMeter(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string): Promise<void> {
    const current = this.service.catalogue.find(idOrSlug);
    const body = v3MeterBody(await readJson(ctx, config.max_body_size)) as Record<string, unknown>;
    // v1: an omitted name resets it to the slug.
    if (body && typeof body === 'object' && (body.name === undefined || body.name === null)) body.name = current.key;
    const problems = validateMeterUpdate(body, current);
    if (problems.length) throw validationProblem(meterProblems(problems));
    ctx.respond(200, v1Meter(await this.service.catalogue.updateMeter(idOrSlug, body)));
  }

  private async listEvents(ctx: MeteringRequest, _config: MeteringConfig): Promise<void> {
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
    ctx.respond(200, page.items.map(v1IngestedEvent));
  }

  /** `GET /api/v2/events`: cursor pages, and a JSON `filter` of `$eq` on id, source, subject, type and a range of `time`. */
  private async listEventsV2(ctx: MeteringRequest): Promise<void> {
    const q = ctx.query;
    const problems: InvalidParameter[] = [];
    const limit = q.get('limit') === null ? 100 : Number(q.get('limit'));
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) problems.push({ field: 'limit', reason: 'must be an integer between 1 and 100', rule: 'range', source: 'query' });
    const cursor = q.get('cursor') ?? undefined;
    if (cursor !== undefined && !EVENT_CURSOR.test(cursor)) problems.push({ field: 'cursor', reason: 'invalid cursor', rule: 'invalid', source: 'query' });
    const filters = eventFiltersV2(q.get('filter'), problems);
    if (problems.length) throw validationProblem(problems);
    const page = await this.service.eventListing.list(filters, limit, cursor);
    ctx.respond(200, { items: page.items.map(v1IngestedEvent), ...(page.next ? { nextCursor: page.next } : {}) });
  }

  /** `GET` (query string, deepObject filters) or `POST` (JSON body): both become one v3 query. */
  private async query(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string): Promise<void> {
    const request = ctx.method === 'GET' ? fromQueryString(ctx.query) : ((await readJson(ctx, config.max_body_size)) ?? {});
    if (typeof request !== 'object' || request === null || Array.isArray(request)) throw new RequestError('METERING_ERR_MALFORMED_BODY', 'the body must be a JSON object');
    await this.answerQuery(ctx, config, idOrSlug, request as Record<string, any>);
  }

  /** A consumer portal's query (GET): the subject's own usage, whatever subjects or customers the query names. */
  async portalQuery(ctx: MeteringRequest, config: MeteringConfig, slug: string, subject: string): Promise<void> {
    const request: Record<string, any> = { ...fromQueryString(ctx.query), subject: [subject], filterCustomerId: [] };
    if ((request.groupBy as string[]).includes(CUSTOMER_DIMENSION)) {
      throw validationProblem([{ field: 'groupBy', reason: `invalid group by: ${CUSTOMER_DIMENSION} (a portal token reads one subject)`, rule: 'invalid_group_by', source: 'query' }]);
    }
    await this.answerQuery(ctx, config, slug, request);
  }

  private async answerQuery(ctx: MeteringRequest, config: MeteringConfig, idOrSlug: string, v1: Record<string, any>): Promise<void> {
    const record = this.liveMeter(idOrSlug);
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
    if (!query) throw validationProblem(meterProblems(problems));
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

/**
 * The HTTP surface under the metering route: routing, scopes, bodies, and errors as
 * `application/problem+json` in the Konnect shape (`invalid_parameters` for validation failures).
 */
import { isUtf8 } from 'node:buffer';
import Negotiator from 'negotiator';
import { HttpError, parseUntrustedJson, StoreClosedError, StoreUnavailableError, StoreUnwritableError, type AccessContext } from '../../../src/pdk/index.ts';
import {
  BodyError, bodyTooLarge, internalError, malformedJson, methodNotAllowed, MeteringError, meterNotFound, noResource, notUtf8, RequestError, scopeRequired,
  validationFailed, type InvalidParameter, type MeteringErrorKind,
} from '../shared/errors.ts';
import type { Ingestion } from '../ingest/port.ts';
import { meterDefinitionFrom, publicMeter, validateMeterCreate, validateMeterUpdate, type MeterRecord } from '../meter/port.ts';
import { toCsv } from './csv.ts';
import { parseQuery, type EventFilters, type UsageQueries } from '../query/port.ts';
import type { MeteringConfig } from '../schema.ts';
import type { MeteringService } from '../service.ts';
import { parseRfc3339 } from '../shared/time.ts';

/**
 * What the metering API reads of a request and how it answers: the proxy's MeteringRequest, or the admin
 * API's read-only mount of the same resources (admin.ts), so both answer through this one mapping.
 */
export type MeteringRequest = Pick<AccessContext, 'id' | 'method' | 'path' | 'matchedPrefix' | 'query' | 'headers' | 'credential' | 'readBody' | 'respond'>;

/** An error as the client is answered: status, stable code, detail, and what the client can act on. */
export interface Problem {
  status: number;
  code: string;
  detail: string;
  invalidParameters?: InvalidParameter[];
  headers: Record<string, string>;
}

/** The one place metering's kinds become statuses (billing/http maps billing's). */
const STATUS_OF_KIND: Record<MeteringErrorKind, number> = {
  validation: 400,
  unauthorized: 401,
  forbidden: 403,
  notFound: 404,
  methodNotAllowed: 405,
  readOnly: 405,
  conflict: 409,
  tooLarge: 413,
  unavailable: 503,
  notSupported: 501,
  internal: 500,
};

function problemOf(err: MeteringError): Problem {
  const headers: Record<string, string> = {};
  if (err.allowedMethods) headers.allow = err.allowedMethods.join(', ');
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
  const problem: Problem = { status: STATUS_OF_KIND[err.kind], code: err.code, detail: err.message, headers };
  if (err.invalidParameters) problem.invalidParameters = err.invalidParameters;
  return problem;
}

/** The problem a failure of any metering domain, or of the core beneath it (keeping the core's code), is answered with. */
export function toProblem(err: unknown): Problem {
  if (err instanceof MeteringError) return problemOf(err);
  // The disk is full or failing: writes are refused until the operator restarts the gateway.
  if (err instanceof StoreUnwritableError) {
    return { status: 503, code: err.code, detail: 'storage is full or failing: nothing of this request was stored; retry later', headers: { 'retry-after': '10' } };
  }
  // The database is down or restarting: nothing of the request was stored, the producer retries.
  if (err instanceof StoreUnavailableError || err instanceof StoreClosedError) {
    return { status: 503, code: err.code, detail: 'the store is unavailable; retry later', headers: { 'retry-after': '1' } };
  }
  if (err instanceof HttpError) return { status: err.status, code: String(err.code), detail: err.message, headers: {} };
  return problemOf(internalError());
}

const PROBLEM_TYPES: Record<number, [string, string]> = {
  400: ['bad-request', 'Bad Request'],
  401: ['unauthorized', 'Unauthorized'],
  403: ['forbidden', 'Forbidden'],
  404: ['not-found', 'Not Found'],
  405: ['method-not-allowed', 'Method Not Allowed'],
  409: ['resource-conflict', 'Conflict'],
  413: ['payload-too-large', 'Payload Too Large'],
  415: ['unsupported-media-type', 'Unsupported Media Type'],
  500: ['internal', 'Internal'],
  501: ['not-implemented', 'Not Implemented'],
  503: ['service-unavailable', 'Service Unavailable'],
};

/** Answers with `p` as problem+json in the Konnect shape. */
export function sendProblem(ctx: MeteringRequest, p: Problem): void {
  const [slug, title] = PROBLEM_TYPES[p.status] ?? ['error', 'Error'];
  const body: Record<string, unknown> = {
    type: `https://kongapi.info/konnect/${slug}`,
    title,
    status: p.status,
    detail: p.detail,
    instance: `urn:request:${ctx.id}`,
    code: p.code,
  };
  if (p.invalidParameters) body.invalid_parameters = p.invalidParameters;
  ctx.respond(p.status, JSON.stringify(body), { 'content-type': 'application/problem+json', ...p.headers });
}

/** Rules whose reason is OpenMeter's own message, which names what is wrong (`invalid group by: x`). */
const SELF_DESCRIBING_RULES = new Set(['invalid', 'required', 'invalid_group_by', 'invalid_dimension_filter', 'invalid_window_size', 'invalid_time_zone', 'unsupported_filter_operator', 'reserved_dimension']);

/** 400 whose detail reads as OpenMeter's (`validation error: invalid group by: unknown`); generic reasons keep their field. */
export function validationProblem(problems: InvalidParameter[]): MeteringError {
  const described = problems.map((p) => (!p.field || SELF_DESCRIBING_RULES.has(p.rule ?? '') ? p.reason : `${p.field}: ${p.reason}`));
  return validationFailed(described, problems);
}

/** Resources answered under the same route by another mapping (billing, collectors, OpenMeter's v1 API); false when the path is not theirs. */
export interface SubRoutes {
  route(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<boolean>;
}

export type Operation = 'ingest' | 'manage' | 'read' | 'billing';

export function requireScope(ctx: MeteringRequest, config: MeteringConfig, operation: Operation): void {
  const needed = config.scopes?.[operation];
  if (!needed) return;
  if (!ctx.credential?.scopes?.includes(needed)) throw scopeRequired(needed);
}

/** The body as JSON (`parse`: JSON.parse, or a reader that keeps more of the text); undefined when empty. */
export async function readJson(ctx: MeteringRequest, limit: number, parse: (text: string) => unknown = JSON.parse): Promise<unknown> {
  const body = await readLimited(ctx, limit);
  if (body.length === 0) return undefined;
  if (!isUtf8(body)) throw notUtf8();
  try {
    return parseUntrustedJson(body.toString('utf8'), parse);
  } catch (err) {
    throw malformedJson(err as Error, 'malformed JSON');
  }
}

async function readLimited(ctx: MeteringRequest, limit: number): Promise<Buffer> {
  const tooLarge = () => bodyTooLarge(limit);
  if (Number(ctx.headers['content-length']) > limit) throw tooLarge();
  let body: Buffer;
  try {
    body = await ctx.readBody();
  } catch (err) {
    if (err instanceof HttpError && err.status === 413) throw tooLarge();
    throw err;
  }
  if (body.length > limit) throw tooLarge();
  return body;
}

/** An ingest request's events (structured mode only), through the ingestion; resolves once they are durable. */
export async function ingestRequest(ctx: MeteringRequest, config: MeteringConfig, ingestion: Ingestion): Promise<void> {
  requireScope(ctx, config, 'ingest');
  const body = await readLimited(ctx, config.max_body_size);
  if (ctx.headers['ce-specversion'] !== undefined) {
    // The cloudevents SDK's default emitter: attributes in headers, the data alone as the body (as OpenMeter, not accepted).
    throw new BodyError('METERING_ERR_CONTENT_TYPE', 'invalid event: binary content mode (ce-* headers) is not supported; send the event in structured mode as application/cloudevents+json', { invalidParameters: [
      { field: 'ce-specversion', reason: 'binary content mode is not supported', rule: 'content_mode', source: 'header' },
    ] });
  }
  await ingestion.events(ctx.headers['content-type'], body, config);
}

function instant(field: string, value: string | null, problems: InvalidParameter[]): number | undefined {
  if (value === null || value === '') return undefined;
  const t = parseRfc3339(value);
  if (t === undefined) problems.push({ field, reason: 'must be an RFC 3339 date-time', rule: 'is_date_time', source: 'query' });
  return t;
}

/** A query parameter by its plain name or as `filter[name]` / `filter[name][eq]`. */
function param(q: URLSearchParams, name: string): string | null {
  return q.get(name) ?? q.get(`filter[${name}]`) ?? q.get(`filter[${name}][eq]`);
}

function pageSize(q: URLSearchParams, name: string, fallback: number, max: number, problems: InvalidParameter[]): number {
  const raw = q.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    problems.push({ field: name, reason: `must be an integer between 1 and ${max}`, rule: 'range', source: 'query', minimum: 1, maximum: max });
  }
  return n;
}

const SORTABLE = ['key', 'name', 'aggregation', 'created_at', 'updated_at'] as const;

const CSV = 'text/csv; charset=utf-8';
/** What a query answers in, by preference: JSON unless the client's Accept ranks CSV higher (`text/*` included). */
const QUERY_MEDIA_TYPES = ['application/json', CSV];

function prefersCsv(accept: string | string[] | undefined): boolean {
  return new Negotiator({ headers: { accept } }).mediaType(QUERY_MEDIA_TYPES) === CSV;
}

export class MeteringHttp {
  constructor(
    private readonly service: MeteringService,
    private readonly ingestion: Ingestion,
    private readonly queries: UsageQueries,
    private readonly subRoutes: SubRoutes[] = [],
    /** What answers on a portal route (OpenMeter's v1 router). */
    private readonly portalRoutes?: SubRoutes,
  ) {}

  async handle(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    try {
      await this.route(ctx, config);
    } catch (err) {
      sendProblem(ctx, toProblem(err));
    }
  }

  private async route(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const sub = ctx.path.slice(ctx.matchedPrefix.length).replace(/\/+$/, '');
    let parts: string[];
    try {
      parts = sub.split('/').slice(1).map((p) => decodeURIComponent(p));
    } catch {
      throw new RequestError('METERING_ERR_MALFORMED_PATH', 'malformed percent-encoding in the path');
    }
    // A portal route has no authentication plugin: only OpenMeter's v1 router answers there, with the portal's read alone.
    if (config.portal) return this.portal(ctx, config, parts);
    const method = ctx.method;
    const allow = (methods: string[]) => {
      if (!methods.includes(method)) throw methodNotAllowed(method, methods);
    };
    // On a shared store, meters another process changed are served at once (ingest needs no meter).
    if (!(method === 'POST' && parts.at(-1) === 'events')) await this.service.refreshMeters();
    if (sub === '/events') {
      allow(['GET', 'POST']);
      if (method === 'POST') return this.ingest(ctx, config);
      return this.listEvents(ctx, config);
    }
    if (sub === '/meters') {
      allow(['GET', 'POST']);
      if (method === 'POST') return this.createMeter(ctx, config);
      return this.listMeters(ctx, config);
    }
    if (parts[0] === 'meters' && parts.length === 2) {
      allow(['GET', 'PUT', 'DELETE']);
      if (method === 'GET') {
        requireScope(ctx, config, 'read');
        return void ctx.respond(200, publicMeter(this.service.catalogue.find(parts[1])));
      }
      if (method === 'PUT') return this.updateMeter(ctx, config, parts[1]);
      requireScope(ctx, config, 'manage');
      await this.service.catalogue.deleteMeter(parts[1]);
      return void ctx.respond(204);
    }
    if (parts[0] === 'meters' && parts.length === 3 && parts[2] === 'query') {
      allow(['POST']);
      return this.query(ctx, config, parts[1]);
    }
    for (const sub of this.subRoutes) if (await sub.route(ctx, config, parts)) return;
    throw noResource('metering', ctx.path);
  }

  private async portal(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<void> {
    await this.service.refreshMeters();
    if (!(await this.portalRoutes?.route(ctx, config, parts))) throw noResource('metering', ctx.path);
  }

  private async ingest(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    await ingestRequest(ctx, config, this.ingestion);
    ctx.respond(202);
  }

  private async listEvents(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    requireScope(ctx, config, 'read');
    const q = ctx.query;
    const problems: InvalidParameter[] = [];
    const filters: EventFilters = {};
    for (const name of ['subject', 'type', 'source', 'id'] as const) {
      const v = param(q, name);
      if (v !== null) filters[name] = v;
    }
    filters.from = instant('from', q.get('from') ?? q.get('filter[time][gte]'), problems);
    filters.to = instant('to', q.get('to') ?? q.get('filter[time][lt]'), problems);
    if (filters.from !== undefined && filters.to !== undefined && filters.to < filters.from) {
      problems.push({ field: 'to', reason: 'to must not be before from', rule: 'invalid', source: 'query' });
    }
    const size = pageSize(q, 'page[size]', 100, 100, problems);
    const after = q.get('page[after]') ?? undefined;
    if (after !== undefined && !/^\d{12}\/[0-9a-f]{12}$/.test(after)) problems.push({ field: 'page[after]', reason: 'invalid cursor', rule: 'invalid', source: 'query' });
    if (problems.length) throw validationProblem(problems);
    const page = await this.service.eventListing.list(filters, size, after);
    ctx.respond(200, { data: page.items, meta: { page: { size, next: page.next } } });
  }

  private async createMeter(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    requireScope(ctx, config, 'manage');
    const body = await readJson(ctx, config.max_body_size);
    const problems = validateMeterCreate(body);
    if (problems.length) throw validationProblem(problems);
    const record = await this.service.catalogue.createMeter(meterDefinitionFrom(body as Record<string, unknown>));
    ctx.respond(201, publicMeter(record));
  }

  private listMeters(ctx: MeteringRequest, config: MeteringConfig): void {
    requireScope(ctx, config, 'read');
    const q = ctx.query;
    const problems: InvalidParameter[] = [];
    const number = pageSize(q, 'page[number]', 1, 1_000_000, problems);
    const size = pageSize(q, 'page[size]', 100, 1000, problems);
    const sort = (q.get('sort') ?? 'created_at').trim();
    const match = /^(-)?([a-z_]+)(?:\s+(asc|desc))?$/i.exec(sort);
    const field = match?.[2] as (typeof SORTABLE)[number] | undefined;
    if (!match || !field || !SORTABLE.includes(field)) {
      problems.push({ field: 'sort', reason: `invalid sort: ${sort}`, rule: 'enum', source: 'query', choices: SORTABLE });
    }
    if (problems.length) throw validationProblem(problems);
    const descending = match![1] === '-' || match![3]?.toLowerCase() === 'desc';
    const includeDeleted = (q.get('include_deleted') ?? q.get('includeDeleted')) === 'true';
    let meters = includeDeleted ? this.service.meters.all() : this.service.meters.live();
    for (const name of ['key', 'name'] as const) meters = meters.filter((m) => this.matchesFilter(m[name], q, name));
    meters.sort((a, b) => {
      const x = String(a[field!] ?? '');
      const y = String(b[field!] ?? '');
      const order = x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : 1;
      return descending ? -order : order;
    });
    const data = meters.slice((number - 1) * size, number * size).map(publicMeter);
    ctx.respond(200, { data, meta: { page: { number, size, total: meters.length } } });
  }

  private matchesFilter(value: string, q: URLSearchParams, name: string): boolean {
    const list = (v: string) => v.split(',');
    const checks: [string, (v: string) => boolean][] = [
      [`filter[${name}]`, (v) => value === v],
      [`filter[${name}][eq]`, (v) => value === v],
      [`filter[${name}][neq]`, (v) => value !== v],
      [`filter[${name}][oeq]`, (v) => list(v).includes(value)],
      [`filter[${name}][contains]`, (v) => value.toLowerCase().includes(v.toLowerCase())],
      [`filter[${name}][ocontains]`, (v) => list(v).some((x) => value.toLowerCase().includes(x.toLowerCase()))],
    ];
    return checks.every(([param, test]) => {
      const v = q.get(param);
      return v === null || test(v);
    });
  }

  private async updateMeter(ctx: MeteringRequest, config: MeteringConfig, idOrKey: string): Promise<void> {
    requireScope(ctx, config, 'manage');
    const current = this.service.catalogue.find(idOrKey);
    const body = await readJson(ctx, config.max_body_size);
    const problems = validateMeterUpdate(body, current);
    if (problems.length) throw validationProblem(problems);
    const record = await this.service.catalogue.updateMeter(idOrKey, body as Record<string, unknown>);
    ctx.respond(200, publicMeter(record));
  }

  private async query(ctx: MeteringRequest, config: MeteringConfig, idOrKey: string): Promise<void> {
    requireScope(ctx, config, 'read');
    const record: MeterRecord = this.service.catalogue.find(idOrKey);
    if (record.deleted_at) throw meterNotFound(idOrKey);
    const body = await readJson(ctx, config.max_body_size);
    const { query, problems } = parseQuery(body, this.service.meters.compiledOf(record));
    if (!query) throw validationProblem(problems);
    const { result, customers } = await this.queries.run(record, query, config.query_backfill_wait_ms);
    if (prefersCsv(ctx.headers.accept)) {
      ctx.respond(200, toCsv(query, result, customers), {
        'content-type': CSV,
        'content-disposition': `attachment; filename="${record.key}.csv"`,
      });
    } else {
      ctx.respond(200, result);
    }
  }
}

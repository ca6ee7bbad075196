/**
 * Shared fixture of the metering catalogue, crash and abuse tests: a gateway config with the oauth2 plugin
 * (client credentials, global credentials) and the metering plugin on the service-less route `/v3/metering`,
 * plus a small client for the v3 metering API of INTERFACE §5 that authenticates like a real producer does
 * (a client-credentials token from `<route>/oauth2/token`, then `Authorization: Bearer`).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request, type Reply, type SpawnedGateway } from '../../helpers/gateway.ts';

export type { Reply };

export const ROUTE_PATH = '/v3/metering';
export const CLIENT_ID = 'metering-producer';
export const CLIENT_SECRET = 'metering-producer-secret-0123456789';

export interface MeteringFixtureOptions {
  /** Meters declared in gateway.yaml (`meters:` entities). */
  meters?: Record<string, unknown>[];
  /** Extra `config` of the metering plugin. */
  metering?: Record<string, unknown>;
  /** Extra settings of the `gateway:` block. */
  gateway?: Record<string, unknown>;
}

/** The gateway.yaml (as an object) every metering test file starts from. */
export function meteringConfig(options: MeteringFixtureOptions = {}): Record<string, unknown> {
  return {
    _format_version: '3.0',
    ...(options.gateway ? { gateway: options.gateway } : {}),
    routes: [
      {
        name: 'metering',
        paths: [ROUTE_PATH],
        protocols: ['https'],
        strip_path: false,
        plugins: [
          { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } },
          { name: 'metering', config: { ...options.metering } },
        ],
      },
    ],
    consumers: [
      {
        username: 'producer',
        custom_id: 'producer-1',
        oauth2_credentials: [{ name: 'Metering producer', client_id: CLIENT_ID, client_secret: CLIENT_SECRET }],
      },
    ],
    ...(options.meters ? { meters: options.meters } : {}),
  };
}

/** A client-credentials access token from the route's token endpoint. */
export async function fetchToken(httpsBase: string): Promise<string> {
  const res: Reply = await request(`${httpsBase}${ROUTE_PATH}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
    }).toString(),
  });
  assert.equal(res.status, 200, `token endpoint answered ${res.status}: ${res.text}`);
  const token = res.json().access_token;
  assert.equal(typeof token, 'string');
  return token;
}

export const CE_SINGLE = 'application/cloudevents+json';
export const CE_BATCH = 'application/cloudevents-batch+json';
export const JSON_TYPE = 'application/json';

/** The v3 metering API under the route, as a producer and an operator call it. */
export class MeteringApi {
  constructor(
    readonly base: string,
    readonly token: string,
  ) {}

  static async connect(httpsBase: string): Promise<MeteringApi> {
    return new MeteringApi(`${httpsBase}${ROUTE_PATH}`, await fetchToken(httpsBase));
  }

  async send(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
    return request(`${this.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...headers },
      body,
    });
  }

  sendJson(method: string, path: string, value: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    return this.send(method, path, JSON.stringify(value), { 'content-type': JSON_TYPE, ...headers });
  }

  /** POST /events with a body serialized as JSON under the given content type. */
  ingest(events: unknown, contentType = Array.isArray(events) ? CE_BATCH : CE_SINGLE): Promise<Reply> {
    return this.send('POST', '/events', JSON.stringify(events), { 'content-type': contentType });
  }

  /** Ingests and insists on 202 with an empty body. */
  async ingestOk(events: unknown, contentType?: string): Promise<void> {
    const res = await this.ingest(events, contentType);
    assert.equal(res.status, 202, `ingest answered ${res.status}: ${res.text}`);
    assert.equal(res.body.length, 0);
  }

  createMeter(meter: Record<string, unknown>): Promise<Reply> {
    return this.sendJson('POST', '/meters', meter);
  }

  async createMeterOk(meter: Record<string, unknown>): Promise<any> {
    const res = await this.createMeter(meter);
    assert.equal(res.status, 201, `create meter answered ${res.status}: ${res.text}`);
    return res.json();
  }

  getMeter(idOrKey: string): Promise<Reply> {
    return this.send('GET', `/meters/${encodeURIComponent(idOrKey)}`);
  }

  listMeters(query = ''): Promise<Reply> {
    return this.send('GET', `/meters${query ? `?${query}` : ''}`);
  }

  updateMeter(idOrKey: string, body: Record<string, unknown>): Promise<Reply> {
    return this.sendJson('PUT', `/meters/${encodeURIComponent(idOrKey)}`, body);
  }

  deleteMeter(idOrKey: string): Promise<Reply> {
    return this.send('DELETE', `/meters/${encodeURIComponent(idOrKey)}`);
  }

  query(idOrKey: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Reply> {
    return this.sendJson('POST', `/meters/${encodeURIComponent(idOrKey)}/query`, body, headers);
  }

  async queryOk(idOrKey: string, body: Record<string, unknown> = {}): Promise<QueryResult> {
    const res = await this.query(idOrKey, body);
    assert.equal(res.status, 200, `query answered ${res.status}: ${res.text}`);
    const result = res.json();
    assert.ok(Array.isArray(result.data), 'query result has a data array');
    for (const row of result.data) assert.match(row.value, DECIMAL, `value ${row.value} is a decimal string`);
    return result;
  }

  /**
   * Queries until `settled(result)` holds, for implementations that aggregate shortly after the 202
   * (OpenMeter's own suite polls up to a minute); returns the last result for the caller's assertions.
   */
  async queryWhen(
    idOrKey: string,
    body: Record<string, unknown>,
    settled: (result: QueryResult) => boolean,
  ): Promise<QueryResult> {
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      const result = await this.queryOk(idOrKey, body);
      if (settled(result) || Date.now() > deadline) return result;
      await sleep(50);
    }
  }

  /** The single total of an ungrouped query once it reaches `expected` (0 when no row). */
  async totalWhen(idOrKey: string, expected: number, body: Record<string, unknown> = {}): Promise<number> {
    const result = await this.queryWhen(idOrKey, body, (r) => totalOf(r) >= expected);
    return totalOf(result);
  }

  /** GET /events with filters (`subject`, `type`, `source`, `id`, `from`, `to`) and paging parameters. */
  listEvents(params: Record<string, string> = {}): Promise<Reply> {
    const query = new URLSearchParams(params).toString();
    return this.send('GET', `/events${query ? `?${query}` : ''}`);
  }

  /** Every listed event matching the filters, following the cursor to the end. */
  async listAllEvents(filters: Record<string, string> = {}, pageSize = 100): Promise<EventItem[]> {
    const items: EventItem[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10_000; pages++) {
      const res = await this.listEvents({ ...filters, 'page[size]': String(pageSize), ...(cursor ? { 'page[after]': cursor } : {}) });
      assert.equal(res.status, 200, `list events answered ${res.status}: ${res.text}`);
      const page = res.json();
      assert.ok(Array.isArray(page.data), 'event list has a data array');
      items.push(...page.data);
      cursor = page.meta?.page?.next ?? undefined;
      if (!cursor || page.data.length === 0) return items;
    }
    throw new Error('event listing never ended');
  }

  /** The listed events of a filter once there are `count` of them. */
  async eventsWhen(filters: Record<string, string>, count: number): Promise<EventItem[]> {
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      const items = await this.listAllEvents(filters);
      if (items.length >= count || Date.now() > deadline) return items;
      await sleep(50);
    }
  }
}

export interface QueryRow {
  value: string;
  from: string;
  to: string;
  dimensions: Record<string, string>;
}
export interface QueryResult {
  from?: string;
  to?: string;
  data: QueryRow[];
}
export interface EventItem {
  event: Record<string, any>;
  ingested_at: string;
  stored_at: string;
  validation_errors?: { code: string; message: string }[];
}

/** v3 values: decimal strings (OpenMeter's `^-?[0-9]+(\.[0-9]+)?$`). */
export const DECIMAL = /^-?[0-9]+(\.[0-9]+)?$/;
const SETTLE_MS = 10_000;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The value of an ungrouped total: 0 for no row (value aggregations return none on empty input). */
export function totalOf(result: QueryResult): number {
  assert.ok(result.data.length <= 1, `expected at most one row, got ${JSON.stringify(result.data)}`);
  return result.data.length === 0 ? 0 : Number(result.data[0].value);
}

/** Rows as comparable `{from, to, value}` with instants in ISO UTC (zones render offsets; compare instants). */
export function rows(result: QueryResult, dimensionNames: string[] = []): Record<string, unknown>[] {
  return result.data.map((row) => ({
    from: iso(row.from),
    to: iso(row.to),
    value: Number(row.value),
    ...Object.fromEntries(dimensionNames.map((name) => [name, row.dimensions?.[name]])),
  }));
}

export function iso(time: string | Date | number): string {
  return new Date(time).toISOString();
}

/** A unique, valid CloudEvent (plain JSON object) with the given fields. */
export function event(fields: Record<string, unknown> = {}): Record<string, any> {
  return {
    specversion: '1.0',
    id: randomUUID(),
    source: 'catalogue',
    type: 'catalogue',
    subject: 'customer-1',
    time: new Date().toISOString(),
    ...fields,
  };
}

/** A name no other test in the same gateway uses (meter keys, event types, subjects). */
export function unique(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

/**
 * Asserts an `application/problem+json` answer of INTERFACE §5 with the given status; for 400 validation
 * failures pass `invalidField` (a substring of some `invalid_parameters[].field`) to require that listing.
 */
export function assertProblem(res: Reply, status: number, invalidField?: string): any {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text}`);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  const problem = res.json();
  assert.equal(problem.status, status);
  assert.equal(typeof problem.title, 'string');
  assert.equal(typeof problem.type, 'string');
  assert.equal(typeof problem.detail, 'string');
  assert.equal(typeof problem.instance, 'string');
  if (invalidField !== undefined) {
    assert.ok(Array.isArray(problem.invalid_parameters), `invalid_parameters listed: ${res.text}`);
    assert.ok(
      problem.invalid_parameters.some((p: any) => String(p.field).includes(invalidField) && typeof p.reason === 'string'),
      `an invalid parameter names ${invalidField}: ${res.text}`,
    );
  }
  return problem;
}

/** Runs `task` over `items` with at most `width` in flight. */
export async function inParallel<T>(items: T[], width: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await task(items[index], index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
}

/** Start of the UTC day `days` before now. */
export function utcDayAgo(days: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - days));
}

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** kill -9 of a spawned gateway; resolves once it is gone (idempotent). */
export async function crash(spawned: SpawnedGateway): Promise<void> {
  if (spawned.child.exitCode === null && spawned.child.signalCode === null) spawned.kill('SIGKILL');
  await spawned.exited;
}

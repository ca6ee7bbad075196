/**
 * OpenMeter's v1 notification API under `api/v1/notification/` (one area of the v1 router, http/v1/, whose
 * problem answers it shares): channels, rules and events as `@openmeter/sdk`'s `notifications` client
 * calls them. Lists are OpenMeter's pages `{items, page, pageSize, totalCount}`; everything needs the
 * route's `billing` scope, as the billing resources do.
 */
import { RequestError, type InvalidParameter } from '../shared/errors.ts';
import { parseRfc3339 } from '../shared/time.ts';
import type { Channel, DeliveryStatus, EventFilter, EventView, NotificationService, Rule } from '../notification/port.ts';
import type { MeteringConfig } from '../schema.ts';
import { readJson, validationProblem, type MeteringRequest } from './http.ts';
import { operation, type V1Handler, type V1Routes } from './v1/router.ts';

const MAX_PAGE_SIZE = 1000;
const DEFAULT_PAGE_SIZE = 100;
/** Values a list filter may repeat. */
const MAX_FILTER_VALUES = 100;

/** The features, as OpenMeter's rules name them (`FeatureMeta`): a rule may have been given an id or a key. */
export type FeatureList = () => Promise<{ id: string; key: string }[]>;

type Features = Map<string, { id: string; key: string }>;

type Query = URLSearchParams;

function flag(q: Query, name: string): boolean {
  return q.get(name) === 'true';
}

function pageOf(q: Query): { page: number; pageSize: number } {
  const page = q.get('page') === null ? 1 : Number(q.get('page'));
  const pageSize = q.get('pageSize') === null ? DEFAULT_PAGE_SIZE : Number(q.get('pageSize'));
  const problems: InvalidParameter[] = [];
  if (!Number.isInteger(page) || page < 1) problems.push({ field: 'page', reason: 'must be a positive integer', rule: 'range', source: 'query' });
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    problems.push({ field: 'pageSize', reason: `must be an integer from 1 to ${MAX_PAGE_SIZE}`, rule: 'range', source: 'query' });
  }
  if (problems.length) throw validationProblem(problems);
  return { page, pageSize };
}

function paged<T>(all: T[], q: Query): Record<string, unknown> {
  const { page, pageSize } = pageOf(q);
  return { items: all.slice((page - 1) * pageSize, page * pageSize), page, pageSize, totalCount: all.length };
}

function list(q: Query, name: string): string[] {
  const values = q.getAll(name).flatMap((v) => v.split(',')).filter((v) => v !== '');
  if (values.length > MAX_FILTER_VALUES) throw validationProblem([{ field: name, reason: `at most ${MAX_FILTER_VALUES} values`, rule: 'range', source: 'query' }]);
  return values;
}

function time(q: Query, name: string): number | undefined {
  const value = q.get(name);
  if (value === null || value === '') return undefined;
  const t = parseRfc3339(value);
  if (t === undefined) throw validationProblem([{ field: name, reason: 'must be an RFC 3339 date-time', rule: 'is_date_time', source: 'query' }]);
  return t;
}

function managed(record: { createdAt: string; updatedAt: string; deletedAt?: string }): Record<string, unknown> {
  return { createdAt: record.createdAt, updatedAt: record.updatedAt, ...(record.deletedAt ? { deletedAt: record.deletedAt } : {}) };
}

export function v1Channel(c: Channel): Record<string, unknown> {
  return {
    id: c.id,
    type: c.type,
    name: c.name,
    disabled: c.disabled,
    url: c.url,
    customHeaders: c.customHeaders,
    signingSecret: c.signingSecret,
    metadata: c.metadata,
    annotations: {},
    ...managed(c),
  };
}

export class NotificationsV1Http {
  constructor(
    private readonly notifications: NotificationService,
    private readonly featureList: FeatureList,
  ) {}

  /** Features by id and by key, read once per request. */
  private async features(): Promise<Features> {
    const byIdOrKey: Features = new Map();
    for (const f of await this.featureList()) byIdOrKey.set(f.id, f).set(f.key, f);
    return byIdOrKey;
  }

  /** The paths under `api/v1/notification/` and their methods, for the v1 router (http/v1/index.ts). */
  routes(): V1Routes {
    const op = (handle: V1Handler) => operation('billing', handle);
    const channels = op((ctx, config, [id]) => this.channels(ctx, config, id));
    const rules = op((ctx, config, [id]) => this.rules(ctx, config, id));
    const events = op((ctx, _config, [id]) => this.events(ctx, id));
    return {
      'v1/notification/channels': { GET: channels, POST: channels },
      'v1/notification/channels/*': { GET: channels, PUT: channels, DELETE: channels },
      'v1/notification/rules': { GET: rules, POST: rules },
      'v1/notification/rules/*': { GET: rules, PUT: rules, DELETE: rules },
      'v1/notification/events': { GET: events },
      'v1/notification/events/*': { GET: events },
      'v1/notification/events/*/resend': { POST: op((ctx, config, [id]) => this.resend(ctx, config, id)) },
    };
  }

  private async channels(ctx: MeteringRequest, config: MeteringConfig, id: string | undefined): Promise<void> {
    const n = this.notifications;
    if (id === undefined) {
      if (ctx.method === 'POST') return void ctx.respond(201, v1Channel(await n.createChannel(await readJson(ctx, config.max_body_size))));
      const all = await n.listChannels({ includeDisabled: flag(ctx.query, 'includeDisabled'), includeDeleted: flag(ctx.query, 'includeDeleted') });
      return void ctx.respond(200, paged(all.map(v1Channel), ctx.query));
    }
    if (ctx.method === 'GET') return void ctx.respond(200, v1Channel(await n.getChannel(id)));
    if (ctx.method === 'PUT') return void ctx.respond(200, v1Channel(await n.updateChannel(id, await readJson(ctx, config.max_body_size))));
    await n.deleteChannel(id);
    ctx.respond(204);
  }

  private async rules(ctx: MeteringRequest, config: MeteringConfig, id: string | undefined): Promise<void> {
    const n = this.notifications;
    if (id === undefined) {
      if (ctx.method === 'POST') return void ctx.respond(201, v1Rule(await n.createRule(await readJson(ctx, config.max_body_size)), await this.features()));
      const q = ctx.query;
      const all = await n.listRules({ includeDisabled: flag(q, 'includeDisabled'), includeDeleted: flag(q, 'includeDeleted'), channels: list(q, 'channel'), features: list(q, 'feature') });
      const features = await this.features();
      return void ctx.respond(200, paged(all.map((r) => v1Rule(r, features)), q));
    }
    if (ctx.method === 'GET') return void ctx.respond(200, v1Rule(await n.getRule(id), await this.features()));
    if (ctx.method === 'PUT') return void ctx.respond(200, v1Rule(await n.updateRule(id, await readJson(ctx, config.max_body_size)), await this.features()));
    await n.deleteRule(id);
    ctx.respond(204);
  }

  private async events(ctx: MeteringRequest, id: string | undefined): Promise<void> {
    if (id !== undefined) return void ctx.respond(200, v1Event(await this.notifications.getEvent(id), await this.features()));
    const q = ctx.query;
    const filter: EventFilter = { from: time(q, 'from'), to: time(q, 'to'), rules: list(q, 'rule'), channels: list(q, 'channel'), subjects: list(q, 'subject'), features: list(q, 'feature') };
    const { page, pageSize } = pageOf(q);
    const { items, total } = await this.notifications.listEvents(filter, { offset: (page - 1) * pageSize, limit: pageSize });
    const features = await this.features();
    ctx.respond(200, { items: items.map((e) => v1Event(e, features)), page, pageSize, totalCount: total });
  }

  private async resend(ctx: MeteringRequest, config: MeteringConfig, id: string): Promise<void> {
    const body = (await readJson(ctx, config.max_body_size)) ?? {};
    const channels = (body as { channels?: unknown }).channels;
    if (typeof body !== 'object' || Array.isArray(body) || (channels !== undefined && (!Array.isArray(channels) || channels.some((c) => typeof c !== 'string')))) {
      throw new RequestError('METERING_ERR_MALFORMED_BODY', 'the body must be {"channels"?: [channel ids]}');
    }
    await this.notifications.resend(id, channels as string[] | undefined);
    ctx.respond(202);
  }
}

function v1Rule(r: Rule, features: Features): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: r.id,
    type: r.type,
    name: r.name,
    disabled: r.disabled,
    channels: r.channels.map((id) => ({ id, type: 'WEBHOOK' })),
    metadata: r.metadata,
    annotations: {},
    ...managed(r),
  };
  if (r.thresholds) out.thresholds = r.thresholds;
  if (r.features) out.features = r.features.map((f) => features.get(f) ?? { id: f, key: f });
  return out;
}

function v1Event(e: EventView, features: Features): Record<string, unknown> {
  return {
    id: e.id,
    type: e.type,
    createdAt: e.createdAt,
    rule: v1Rule(e.rule, features),
    deliveryStatus: e.deliveryStatus.map(v1Status),
    payload: e.payload,
    annotations: {},
  };
}

function v1Status(s: DeliveryStatus): Record<string, unknown> {
  return {
    state: s.state,
    reason: s.reason,
    updatedAt: s.updatedAt,
    channel: { id: s.channelId, type: 'WEBHOOK' },
    ...(s.nextAttempt ? { nextAttempt: s.nextAttempt } : {}),
    attempts: s.attempts,
    annotations: {},
  };
}


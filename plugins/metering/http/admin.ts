/**
 * Metering and billing on the admin API, read-only, for the console and operators' scripts: the
 * resources of the metering route under `/metering` (`/metering/meters`, `/metering/customers`, …),
 * answered by the route's own HTTP mapping (same JSON, same problem+json errors) without the route's
 * token scopes, since whoever reaches the admin listener is the operator; plus `/metering/status`, the
 * ingest queue and the backfills, which the route does not expose.
 */
import { randomUUID } from 'node:crypto';
import { HttpError, type AdminMethod, type AdminReply, type AdminRequest, type AdminRoute } from '../../../src/pdk/index.ts';
import type { MeteringHttp, MeteringRequest } from './http.ts';
import type { Rejections } from '../aggregation/port.ts';
import { backfillRatio } from '../meter/port.ts';
import type { MeteringConfig } from '../schema.ts';
import type { MeteringService } from '../service.ts';

const ADMIN_PREFIX = '/metering';

/** What reads (queries are POSTs with a body, yet change nothing); every write stays on the route. */
const READ_ONLY: [AdminMethod, string][] = [
  ['GET', '/meters'],
  ['GET', '/meters/:id'],
  ['POST', '/meters/:id/query'],
  ['GET', '/events'],
  ['GET', '/customers'],
  ['GET', '/customers/:id'],
  ['GET', '/customers/:id/entitlement-access'],
  ['GET', '/customers/:id/upcoming-invoice'],
  ['POST', '/entitlement-access/query'],
  ['GET', '/features'],
  ['GET', '/features/:id'],
  ['GET', '/plans'],
  ['GET', '/plans/:id'],
  ['GET', '/subscriptions'],
  ['GET', '/subscriptions/:id'],
  ['GET', '/invoices'],
  ['GET', '/invoices/:id'],
  ['GET', '/api/v1/notification/channels'],
  ['GET', '/api/v1/notification/rules'],
  ['GET', '/api/v1/notification/events'],
  ['GET', '/api/v1/notification/events/:id'],
];

export interface AdminDeps {
  service: MeteringService;
  http: MeteringHttp;
  /** The config of a metering route (limits, backfill wait), or undefined when no route runs the plugin. */
  routeConfig(): MeteringConfig | undefined;
  /** What meters could not take, summed over the node's processes. */
  rejections(): Promise<Rejections[]>;
}

export function meteringAdminRoutes(deps: AdminDeps): AdminRoute[] {
  const operatorConfig = (): MeteringConfig => {
    const config = deps.routeConfig();
    if (!config) throw new HttpError(404, 'no route runs the metering plugin');
    return { ...config, scopes: null };
  };
  const mounted = READ_ONLY.map(([method, template]): AdminRoute => ({
    method,
    path: ADMIN_PREFIX + template,
    handler: async (req) => {
      const config = operatorConfig();
      const exchange = adminExchange(method, ADMIN_PREFIX + fill(template, req.params), req);
      await deps.http.handle(exchange.request, config);
      return exchange.reply();
    },
  }));
  const status: AdminRoute = {
    method: 'GET',
    path: `${ADMIN_PREFIX}/status`,
    handler: async () => ({ status: 200, body: { ...(await meteringStatus(deps.service, operatorConfig())), rejected_values: await deps.rejections() } }),
  };
  return [status, ...mounted];
}

/** The template's path with its parameters re-encoded, as the route's mapping decodes them. */
function fill(template: string, params: Record<string, string>): string {
  return template.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name]));
}

/** An admin request as the route's mapping reads it, and the mapping's answer as an admin reply. */
function adminExchange(method: AdminMethod, path: string, req: AdminRequest): { request: MeteringRequest; reply(): AdminReply } {
  let reply: AdminReply = { status: 500, body: { message: 'no answer' } };
  // The admin router has parsed the body already (JSON or a form); the mapping reads JSON.
  const body = Buffer.from(method === 'GET' ? '' : JSON.stringify(req.body));
  const request: MeteringRequest = {
    id: randomUUID(),
    method,
    path,
    matchedPrefix: ADMIN_PREFIX,
    query: req.query,
    headers: req.headers,
    credential: null,
    readBody: async () => body,
    respond: (status, payload, headers) => {
      const flat = Object.fromEntries(Object.entries(headers ?? {}).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : value]));
      reply = { status, body: Buffer.isBuffer(payload) ? payload.toString('utf8') : payload, headers: flat };
    },
  };
  return { request, reply: () => reply };
}

/** The ingest queue, the dedupe filter and each backfill in progress (with what meters could not take: rejected_values). */
async function meteringStatus(service: MeteringService, config: MeteringConfig) {
  const { aggregator, dedupe_filter } = await service.aggregatorStatus();
  return {
    queue: { events: service.writer.queuedEvents, max_events: config.queue_max_events },
    dedupe_filter,
    // On a store shared by several processes: whether this one aggregates everyone's events now, and which does.
    aggregating: service.aggregatingWriter !== null,
    aggregator,
    meters: service.meters.live().length,
    backfills: service.meters.pendingBackfills().map(({ id, key, backfill }) => ({
      meter: { id, key },
      aggregated_events: backfill!.aggregated,
      ratio: backfillRatio(backfill!),
    })),
  };
}

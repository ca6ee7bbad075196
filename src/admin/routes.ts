/** The core's admin endpoints, in Kong's shapes (reference/gateway-core.md §6). */
import { hostname } from 'node:os';
import { consumerByReference, type Consumers } from '../consumers.ts';
import type { PluginRegistry } from '../config/load.ts';
import { consoleRoutes } from '../console/routes.ts';
import type { Metrics } from '../metrics.ts';
import { HttpError, type AdminReply, type AdminRequest, type AdminRoute, type PluginRuntime } from '../pipeline/plugin-api.ts';
import type { Snapshot } from '../runtime.ts';
import { SERVER_TOKEN } from '../proxy/respond.ts';

export const VERSION = SERVER_TOKEN.split('/')[1];

export interface AdminState {
  snapshot(): Snapshot;
  consumers: Consumers;
  metrics: Metrics;
  registry: PluginRegistry;
  runtimes: ReadonlyMap<string, PluginRuntime>;
  nodeId: string;
  processes(): { master: number; workers: number[] };
  ready(): boolean;
  databaseReachable(): Promise<boolean>;
  connections(): { active: number; accepted: number };
  totalRequests(): number;
}

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/** Kong's `size`: 100 when absent, else an integer from 1 to 1000. */
function pageSize(req: AdminRequest): number {
  const raw = req.query.get('size');
  if (raw === null) return DEFAULT_PAGE;
  const size = Number(raw);
  if (raw.trim() === '' || Number.isNaN(size)) throw new HttpError(400, 'size must be a number');
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE) throw new HttpError(400, `size must be an integer between 1 and ${MAX_PAGE}`);
  return size;
}

/** Kong's list shape `{data, next}` with `size` and an opaque `offset`. */
export function page<T>(items: T[], req: AdminRequest, path: string): AdminReply {
  const size = pageSize(req);
  const offsetParam = req.query.get('offset');
  const decoded = offsetParam ? Buffer.from(offsetParam, 'base64url').toString() : '0';
  // Offsets are only ever the ones `next` handed out (Kong: 400 for anything else).
  if (!/^\d{1,15}$/.test(decoded)) throw new HttpError(400, `invalid offset: ${offsetParam}`);
  const start = Number(decoded);
  const data = items.slice(start, start + size);
  const nextStart = start + size;
  const offset = nextStart < items.length ? Buffer.from(String(nextStart)).toString('base64url') : null;
  return { status: 200, body: { data, next: offset ? `${path}?offset=${offset}&size=${size}` : null, ...(offset ? { offset } : {}) } };
}

export function byIdOrName<T extends { id: string }>(items: T[], key: string, nameField: keyof T): T {
  const found = items.find((x) => x.id === key || x[nameField] === key);
  if (!found) throw new HttpError(404, 'Not found');
  return found;
}

/** What Kong's DB-less admin API calls each write. */
const UNSUPPORTED_OPERATION = { POST: 'create', PUT: 'create or update', PATCH: 'update', DELETE: 'remove' } as const;

/**
 * 405 for a write to entities that only gateway.yaml declares, with Kong's DB-less error (code 12,
 * `cannot create 'services' entities when not using a database`), which tools written for Kong recognise.
 */
export function dbLessWrite(entity: string, method: keyof typeof UNSUPPORTED_OPERATION): AdminRoute['handler'] {
  return operationUnsupported(`cannot ${UNSUPPORTED_OPERATION[method]} '${entity}' entities when not using a database`);
}

function operationUnsupported(message: string): AdminRoute['handler'] {
  return () => ({ status: 405, body: { code: 12, name: 'operation unsupported', message } });
}

const declaredConsumer = operationUnsupported('cannot remove a consumer declared in gateway.yaml: edit the file and reload (SIGHUP)');
const consumerUpdate = operationUnsupported("cannot update 'consumers' entities: edit gateway.yaml and reload, or delete and create them again");

export function coreAdminRoutes(state: AdminState): AdminRoute[] {
  const cfg = () => state.snapshot().config;
  const routes: AdminRoute[] = [
    { method: 'GET', path: '/', handler: () => ({ status: 200, body: nodeInfo(state) }) },
    { method: 'GET', path: '/status', handler: async () => ({ status: 200, body: status(state, await state.databaseReachable()) }) },
    {
      method: 'GET',
      path: '/status/ready',
      handler: async () => {
        if (!state.ready()) return { status: 503, body: { message: 'draining' } };
        // Kong's readiness in a database mode: not ready while the database cannot be reached.
        if (!(await state.databaseReachable())) return { status: 503, body: { message: 'failed to connect to database' } };
        return { status: 200, body: { message: 'ready' } };
      },
    },
    // The counters are this process's since it started: `pid` tells a reader when they are another's.
    { method: 'GET', path: '/status/traffic', handler: () => ({ status: 200, body: { pid: process.pid, ...state.metrics.requestCounts() } }) },
    {
      method: 'GET',
      path: '/metrics',
      handler: async () => ({ status: 200, body: await state.metrics.render(), headers: { 'content-type': state.metrics.contentType } }),
    },
    { method: 'GET', path: '/services', handler: (req) => page(cfg().services, req, '/services') },
    { method: 'GET', path: '/services/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().services, req.params.id, 'name') }) },
    {
      method: 'GET',
      path: '/services/:id/routes',
      handler: (req) => {
        const service = byIdOrName(cfg().services, req.params.id, 'name');
        return page(cfg().routes.filter((r) => r.service?.id === service.id), req, `/services/${req.params.id}/routes`);
      },
    },
    { method: 'GET', path: '/routes', handler: (req) => page(cfg().routes, req, '/routes') },
    { method: 'GET', path: '/routes/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().routes, req.params.id, 'name') }) },
    {
      method: 'GET',
      path: '/routes/:id/service',
      handler: (req) => {
        const route = byIdOrName(cfg().routes, req.params.id, 'name');
        if (!route.service) throw new HttpError(404, 'Not found');
        return { status: 200, body: byIdOrName(cfg().services, route.service.id, 'name') };
      },
    },
    { method: 'GET', path: '/plugins', handler: (req) => page(cfg().plugins, req, '/plugins') },
    { method: 'GET', path: '/plugins/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().plugins, req.params.id, 'instance_name') }) },
    { method: 'GET', path: '/consumers', handler: (req) => page(state.consumers.list(), req, '/consumers') },
    {
      method: 'GET',
      path: '/consumers/:id',
      handler: (req) => {
        const consumer = consumerByReference(state.consumers, req.params.id);
        if (!consumer) throw new HttpError(404, 'Not found');
        return { status: 200, body: consumer };
      },
    },
    {
      method: 'POST',
      path: '/consumers',
      handler: async (req) => {
        const created = await state.consumers.create(req.body);
        if (typeof created === 'string') return { status: created.startsWith('UNIQUE') ? 409 : 400, body: { message: created } };
        return { status: 201, body: created };
      },
    },
    {
      method: 'DELETE',
      path: '/consumers/:id',
      handler: async (req) => {
        const consumer = consumerByReference(state.consumers, req.params.id);
        if (!consumer) return { status: 204 };
        if (state.consumers.isDeclared(consumer.id)) return declaredConsumer(req);
        for (const runtime of state.runtimes.values()) await runtime.consumerDeleted?.(consumer.id);
        await state.consumers.delete(consumer.id);
        return { status: 204 };
      },
    },
  ];
  for (const entity of ['services', 'routes', 'plugins']) {
    routes.push({ method: 'POST', path: `/${entity}`, handler: dbLessWrite(entity, 'POST') });
    for (const method of ['PUT', 'PATCH', 'DELETE'] as const) routes.push({ method, path: `/${entity}/:id`, handler: dbLessWrite(entity, method) });
  }
  for (const method of ['PUT', 'PATCH'] as const) routes.push({ method, path: '/consumers/:id', handler: consumerUpdate });
  routes.push(...consoleRoutes());
  return routes;
}

function nodeInfo(state: AdminState) {
  const config = state.snapshot().config;
  const available = Object.fromEntries([...state.registry.values()].map((p) => [p.name, { version: p.version, priority: p.priority }]));
  const { gateway } = config;
  return {
    tagline: 'Welcome to tollgate',
    version: VERSION,
    edition: 'community',
    hostname: hostname(),
    node_id: state.nodeId,
    lua_version: null,
    node_version: process.version,
    plugins: { available_on_server: available, enabled_in_cluster: [...new Set(config.plugins.filter((p) => p.enabled).map((p) => p.name))] },
    configuration: {
      database: 'off',
      declarative_config: config.file,
      proxy_listen: gateway.proxy_listen,
      admin_listen: gateway.admin_listen,
      data_dir: gateway.data_dir,
      trusted_ips: gateway.trusted_ips,
      ssl_cert: gateway.ssl_cert,
      log_level: gateway.log_level,
      client_max_body_size: gateway.client_max_body_size,
    },
    pids: state.processes(),
  };
}

function status(state: AdminState, databaseReachable: boolean) {
  const { active, accepted } = state.connections();
  const memory = process.memoryUsage();
  return {
    server: {
      connections_accepted: accepted,
      connections_active: active,
      connections_handled: accepted,
      connections_reading: 0,
      connections_writing: active,
      connections_waiting: 0,
      total_requests: state.totalRequests(),
    },
    database: { reachable: databaseReachable },
    memory: { heap_used: memory.heapUsed, rss: memory.rss },
    configuration_hash: state.snapshot().config.hash,
  };
}

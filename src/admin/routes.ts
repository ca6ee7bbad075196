/** The core's admin endpoints, in the shapes of Kong's admin API (kong/api/routes/kong.lua, health.lua). */
import { hostname } from 'node:os';
import type { GatewayConfig } from '../config/types.ts';
import type { Consumers } from '../consumers.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { consoleRoutes } from '../console/routes.ts';
import type { Metrics } from '../metrics.ts';
import type { AdminRoute } from '../pdk/types.ts';
import { entityWriteUnsupported, NotFoundError, type WriteMethod } from '../toolkit/admin-errors.ts';
import { entityAdminRoutes } from '../toolkit/entity-admin.ts';
import { page } from '../toolkit/paging.ts';
import type { Snapshot } from '../snapshot.ts';
import { SERVER_TOKEN } from '../proxy/respond.ts';

export const VERSION = SERVER_TOKEN.split('/')[1];
/**
 * The Kong release whose admin API Tollgate follows (../shared/reference: Kong 3.10.0). `GET /` reports it as
 * `version` because tools read that field to choose their behaviour: decK writes the pre-3.0 format 1.1 for
 * anything below 3.0. Tollgate's own version is `tollgate_version`.
 */
export const KONG_COMPATIBLE_VERSION = '3.10.0';

export interface AdminState {
  snapshot(): Snapshot;
  consumers: Consumers;
  metrics: Metrics;
  registry: PluginRegistry;
  nodeId: string;
  processes(): { master: number; workers: number[] };
  ready(): boolean;
  databaseReachable(): Promise<boolean>;
}

/** 405 for a write to entities that only gateway.yaml declares, with Kong's DB-less error, which tools written for Kong recognise. */
export function dbLessWrite(entity: string, method: WriteMethod): AdminRoute['handler'] {
  return () => {
    throw entityWriteUnsupported(entity, method);
  };
}

export function byIdOrName<T extends { id: string }>(items: T[], key: string, nameField: keyof T): T {
  const found = items.find((x) => x.id === key || x[nameField] === key);
  if (!found) throw new NotFoundError();
  return found;
}


export function coreAdminRoutes(state: AdminState): AdminRoute[] {
  const cfg = () => state.snapshot().config;
  const routes: AdminRoute[] = [
    { method: 'GET', path: '/', handler: () => ({ status: 200, body: nodeInfo(state) }) },
    { method: 'GET', path: '/status', handler: async () => ({ status: 200, body: await status(state, await state.databaseReachable()) }) },
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
    // The node's counters, summed over `processes`: a reader starts its rates over when that set changes.
    { method: 'GET', path: '/status/traffic', handler: async () => ({ status: 200, body: await state.metrics.requestCounts() }) },
    // The node's requests by status class over the last hour (10 s buckets) and day (minutes), for the console's chart.
    { method: 'GET', path: '/status/traffic/history', handler: async () => ({ status: 200, body: await state.metrics.trafficHistory() }) },
    {
      method: 'GET',
      path: '/metrics',
      handler: async () => ({ status: 200, body: await state.metrics.render(), headers: { 'content-type': state.metrics.contentType } }),
    },
    { method: 'GET', path: '/services', handler: (req) => page(cfg().services, req, '/services'), entity: 'services' },
    { method: 'GET', path: '/services/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().services, req.params.id, 'name') }) },
    {
      method: 'GET',
      path: '/services/:id/routes',
      handler: (req) => {
        const service = byIdOrName(cfg().services, req.params.id, 'name');
        return page(cfg().routes.filter((r) => r.service?.id === service.id), req, `/services/${req.params.id}/routes`);
      },
    },
    { method: 'GET', path: '/routes', handler: (req) => page(cfg().routes, req, '/routes'), entity: 'routes' },
    { method: 'GET', path: '/routes/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().routes, req.params.id, 'name') }) },
    {
      method: 'GET',
      path: '/routes/:id/service',
      handler: (req) => {
        const route = byIdOrName(cfg().routes, req.params.id, 'name');
        if (!route.service) throw new NotFoundError();
        return { status: 200, body: byIdOrName(cfg().services, route.service.id, 'name') };
      },
    },
    { method: 'GET', path: '/plugins', handler: (req) => page(cfg().plugins, req, '/plugins'), entity: 'plugins' },
    { method: 'GET', path: '/plugins/:id', handler: (req) => ({ status: 200, body: byIdOrName(cfg().plugins, req.params.id, 'instance_name') }) },
  ];
  routes.push(...consoleRoutes(state.registry, () => enabledInCluster(cfg())));
  return [...routes, ...entityAdminRoutes(state.consumers)];
}

/** The plugins the configuration runs somewhere (Kong's `enabled_in_cluster`). */
function enabledInCluster(config: GatewayConfig): string[] {
  return [...new Set(config.plugins.filter((p) => p.enabled).map((p) => p.name))];
}

function nodeInfo(state: AdminState) {
  const config = state.snapshot().config;
  const available = Object.fromEntries([...state.registry.values()].map((p) => [p.name, { version: p.version, priority: p.priority }]));
  const { gateway } = config;
  return {
    tagline: 'Welcome to tollgate',
    version: KONG_COMPATIBLE_VERSION,
    tollgate_version: VERSION,
    edition: 'community',
    hostname: hostname(),
    node_id: state.nodeId,
    lua_version: null,
    node_version: process.version,
    plugins: { available_on_server: available, enabled_in_cluster: enabledInCluster(config) },
    configuration: {
      database: gateway.database,
      worker_processes: gateway.worker_processes,
      db_update_frequency: gateway.db_update_frequency,
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

/** Kong's /status; the server's figures are the node's (every worker's, summed). */
async function status(state: AdminState, databaseReachable: boolean) {
  const { active, accepted, totalRequests } = await state.metrics.serverCounts();
  const memory = process.memoryUsage();
  return {
    server: {
      connections_accepted: accepted,
      connections_active: active,
      connections_handled: accepted,
      connections_reading: 0,
      connections_writing: active,
      connections_waiting: 0,
      total_requests: totalRequests,
    },
    database: { reachable: databaseReachable },
    memory: { heap_used: memory.heapUsed, rss: memory.rss },
    configuration_hash: state.snapshot().config.hash,
  };
}

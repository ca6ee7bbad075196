/**
 * Kong's node-level series (kong/plugins/prometheus/exporter.lua's metric_data), read at each scrape:
 * nginx's connection figures are the node's downstream connections (what /status reports), the Lua VM's
 * allocated bytes are each process's V8 heap in use, the datastore is the store, and the health of every
 * upstream target comes from the balancers. Kong's shared dictionaries and nginx timers have no
 * counterpart here and are not exported.
 */
import type { NodeStatus, TargetHealthReport } from '../../src/pdk/index.ts';
import { labels } from './series.ts';

/** Kong's label for the HTTP side of the node (its stream subsystem has no counterpart here). */
const SUBSYSTEM = 'http';
/** Kong's states of a target address, each exported with 1 on the current one and 0 on the others. */
const TARGET_STATES = ['healthchecks_off', 'healthy', 'unhealthy', 'dns_error'] as const;

/** One process's memory, as exchanged between the node's processes. */
export interface ProcessMemory {
  pid: number;
  heapUsed: number;
}

export interface NodeFacts {
  nodeId: string;
  server: Awaited<ReturnType<NodeStatus['server']>>;
  databaseReachable: boolean;
  memory: ProcessMemory[];
  /** Absent unless some instance asks for `upstream_health_metrics`. */
  targets: TargetHealthReport[] | undefined;
}

export function renderNodeSeries(facts: NodeFacts): string[] {
  const { nodeId, server } = facts;
  // Kong's states from nginx's stub_status: here every open connection is writing, none reading or idle.
  const connections: [string, number][] = [
    ['accepted', server.accepted], ['handled', server.accepted], ['total', server.totalRequests],
    ['active', server.active], ['reading', 0], ['writing', server.active], ['waiting', 0],
  ];
  const out = [
    '# HELP kong_nginx_connections_total Number of connections by subsystem',
    '# TYPE kong_nginx_connections_total gauge',
    ...connections.map(([state, n]) => `kong_nginx_connections_total{${labels([['node_id', nodeId], ['subsystem', SUBSYSTEM], ['state', state]])}} ${n}`),
    '# HELP kong_nginx_requests_total Number of requests total',
    '# TYPE kong_nginx_requests_total gauge',
    `kong_nginx_requests_total{${labels([['node_id', nodeId], ['subsystem', SUBSYSTEM]])}} ${server.totalRequests}`,
    '# HELP kong_datastore_reachable Datastore reachable from Kong, 0 is unreachable',
    '# TYPE kong_datastore_reachable gauge',
    `kong_datastore_reachable ${facts.databaseReachable ? 1 : 0}`,
    '# HELP kong_memory_workers_lua_vms_bytes Allocated bytes in worker Lua VM',
    '# TYPE kong_memory_workers_lua_vms_bytes gauge',
    ...facts.memory.map((m) => `kong_memory_workers_lua_vms_bytes{${labels([['node_id', nodeId], ['pid', String(m.pid)], ['kong_subsystem', SUBSYSTEM]])}} ${m.heapUsed}`),
  ];
  if (facts.targets) {
    out.push(
      '# HELP kong_upstream_target_health Health status of targets of upstream. States = healthchecks_off|healthy|unhealthy|dns_error, value is 1 when state is populated.',
      '# TYPE kong_upstream_target_health gauge',
    );
    for (const t of facts.targets) {
      const state = t.health.toLowerCase();
      for (const s of TARGET_STATES) {
        out.push(`kong_upstream_target_health{${labels([['upstream', t.upstream], ['target', t.target], ['address', t.address], ['state', s], ['subsystem', SUBSYSTEM]])}} ${s === state ? 1 : 0}`);
      }
    }
  }
  return out;
}

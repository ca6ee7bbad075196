/**
 * Kong's admin endpoints for upstreams and their targets (kong/api/routes/upstreams.lua,
 * kong/db/dao/targets.lua): reading them and their health, and setting it (their writes are entity-writes.ts's).
 */
import { healthOf, type Balancers, type HealthChange, type UpstreamBalancer } from '../balancer/balancers.ts';
import type { Balancer } from '../balancer/balancer.ts';
import type { TargetState } from '../balancer/target-state.ts';
import { formatTarget } from '../config/upstreams.ts';
import type { GatewayConfig, Target } from '../config/types.ts';
import type { AdminReply, AdminRequest, AdminRoute, TargetHealthState as Health } from '../pdk/types.ts';
import { HttpError } from '../pipeline/http-error.ts';
import { page } from '../toolkit/paging.ts';

export interface UpstreamAdminState {
  config(): GatewayConfig;
  balancers(): Balancers;
  nodeId: string;
  /** Sets a target's health in every process sharing the store (Kong broadcasts it to its cluster). */
  setTargetHealth(upstream: string, address: string, healthy: boolean): HealthChange;
}

export function upstreamAdminRoutes(state: UpstreamAdminState): AdminRoute[] {
  const upstreamOf = (req: AdminRequest): UpstreamBalancer => {
    const entry = state.balancers().get(req.params.upstream);
    if (!entry) throw new HttpError(404, 'Not found');
    return entry;
  };
  const targetsOf = (entry: UpstreamBalancer) => state.config().targets.filter((t) => t.upstream.id === entry.upstream.id);
  const routes: AdminRoute[] = [
    { method: 'GET', path: '/upstreams', handler: (req) => page(state.config().upstreams, req, '/upstreams'), entity: 'upstreams' },
    { method: 'GET', path: '/upstreams/:upstream', handler: (req) => ({ status: 200, body: upstreamOf(req).upstream }) },
    {
      method: 'GET',
      path: '/upstreams/:upstream/targets',
      handler: (req) => page(targetsOf(upstreamOf(req)), req, `/upstreams/${req.params.upstream}/targets`),
    },
    {
      method: 'GET',
      path: '/upstreams/:upstream/targets/all',
      handler: (req) => page(targetsOf(upstreamOf(req)), req, `/upstreams/${req.params.upstream}/targets/all`),
    },
    {
      method: 'GET',
      path: '/upstreams/:upstream/targets/:target',
      handler: (req) => ({ status: 200, body: findTarget(targetsOf(upstreamOf(req)), req.params.target) }),
    },
    { method: 'GET', path: '/upstreams/:upstream/health', handler: (req) => health(req, upstreamOf(req), targetsOf(upstreamOf(req)), state.nodeId) },
  ];
  for (const [action, healthy] of [['healthy', true], ['unhealthy', false]] as const) {
    const set = (req: AdminRequest): AdminReply => {
      const entry = upstreamOf(req);
      const target = findTarget(targetsOf(entry), req.params.target);
      // The address of a target is the target itself here: its name is not resolved to several.
      if (req.params.address !== undefined && formatTarget(req.params.address) !== target.target) throw new HttpError(404, 'Not found');
      return healthAnswer(state.setTargetHealth(entry.upstream.id, target.target, healthy), entry);
    };
    // Kong 3 takes PUT; Kong 2 took POST, which older tooling still sends.
    for (const method of ['PUT', 'POST'] as const) {
      routes.push({ method, path: `/upstreams/:upstream/targets/:target/${action}`, handler: set });
      routes.push({ method, path: `/upstreams/:upstream/targets/:target/:address/${action}`, handler: set });
    }
  }
  // Their writes: src/admin/entity-writes.ts.
  return routes;
}

/** By id, or by address as written or in Kong's normal form (`host` means `host:8000`). */
function findTarget(targets: Target[], key: string): Target {
  const normal = formatTarget(key);
  const found = targets.find((t) => t.id === key || t.target === key || t.target === normal);
  if (!found) throw new HttpError(404, 'Not found');
  return found;
}

function healthAnswer(change: HealthChange, entry: UpstreamBalancer): AdminReply {
  if (change === 'not-found') throw new HttpError(404, 'Not found');
  // Kong's post_health without a health checker.
  if (change === 'no-checker') throw new HttpError(400, `no healthchecker found for ${entry.upstream.name}`);
  return { status: 204 };
}

function health(req: AdminRequest, entry: UpstreamBalancer, targets: Target[], nodeId: string): AdminReply {
  const { balancer } = entry;
  if (req.query.get('balancer_health') === '1') {
    const balancerHealth = balancer.healthy ? 'HEALTHY' : 'UNHEALTHY';
    return {
      status: 200,
      body: {
        data: {
          health: entry.checker ? balancerHealth : 'HEALTHCHECKS_OFF',
          balancer_health: balancerHealth,
          id: entry.upstream.id,
          details: { healthy: balancer.healthy, weight: balancer.weight(), hosts: balancer.targets.map((t) => targetStatus(t, { healthy: t.available })) },
        },
        next: null,
        node_id: nodeId,
      },
    };
  }
  const listed = page(targets, req, `/upstreams/${req.params.upstream}/health`);
  const body = listed.body as { data: Target[] };
  body.data = body.data.map((t) => withHealth(t, balancer, entry));
  return { status: 200, body: { ...body, node_id: nodeId } };
}

function withHealth(target: Target, balancer: Balancer, entry: UpstreamBalancer) {
  const state = balancer.find(target.target)!;
  const health = healthOf(entry, state);
  return { ...target, health, data: targetStatus(state, { health }) };
}

/**
 * Kong's getTargetStatus; the one address of a target is the target itself (no DNS expansion). Its
 * address reports `healthy` (a boolean) in the balancer's details, `health` in the targets' list.
 */
function targetStatus(t: TargetState, health: { health: Health } | { healthy: boolean }) {
  const unavailable = t.available ? 0 : t.weight;
  return {
    host: t.type === 'ipv6' ? `[${t.host}]` : t.host,
    port: t.port,
    dns: t.type === 'ipv4' ? 'A' : t.type === 'ipv6' ? 'AAAA' : 'unknown',
    nodeWeight: t.weight,
    weight: { total: t.weight, unavailable, available: t.weight - unavailable },
    addresses: [{ ip: t.type === 'ipv6' ? `[${t.host}]` : t.host, port: t.port, weight: t.weight, ...health }],
  };
}

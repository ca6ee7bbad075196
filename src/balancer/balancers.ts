/**
 * The balancers of one configuration: one per upstream, found by the name a service's `host` uses.
 * A reload builds new ones; targets that stay (same upstream name and address) keep the health they
 * had, so a reload neither resurrects a dead target nor forgets a recovered one.
 */
import { lookup } from 'node:dns/promises';
import type { Logger } from 'pino';
import type { GatewayConfig, Service, Upstream } from '../config/types.ts';
import type { TargetHealthReport, TargetHealthState } from '../pdk/types.ts';
import { Balancer, type NoPeer } from './balancer.ts';
import { hashValue, type HashRequest } from './hash-value.ts';
import { HealthChecker, usesHealthchecks } from './health.ts';
import { BalancedPeers, probeHostHeader, ServicePeers, type PeerSource } from './peers.ts';
import type { TargetState } from './target-state.ts';

export interface UpstreamBalancer {
  upstream: Upstream;
  balancer: Balancer;
  /** Only when the upstream uses health checks (Kong's HEALTHCHECKS_OFF otherwise). */
  checker: HealthChecker | undefined;
}

const NO_HASH = { value: '' };

/** The outcome of a manual health change. */
export type HealthChange = 'done' | 'no-checker' | 'not-found';

export class Balancers {
  private readonly byName = new Map<string, UpstreamBalancer>();
  private readonly byId = new Map<string, UpstreamBalancer>();
  /** A service without an upstream is its own peer, the same for every request. */
  private readonly servicePeers = new Map<string, ServicePeers>();

  constructor(config: GatewayConfig, log: Logger, previous?: Balancers) {
    const certificates = new Map(config.certificates.map((c) => [c.id, c]));
    for (const upstream of config.upstreams) {
      const balancer = new Balancer(upstream, config.targets.filter((t) => t.upstream.id === upstream.id));
      let checker: HealthChecker | undefined;
      if (usesHealthchecks(upstream)) {
        const before = previous?.byName.get(upstream.name);
        const clientCertificate = upstream.client_certificate ? certificates.get(upstream.client_certificate.id) : undefined;
        checker = new HealthChecker(
          balancer,
          {
            hostHeader: (t) => probeHostHeader(upstream, t),
            credentials: clientCertificate ? { cert: clientCertificate.cert, key: clientCertificate.key } : {},
            changed: (t, healthy, why) => log.warn({ upstream: upstream.name, target: t.address, why }, `target ${healthy ? 'healthy' : 'unhealthy'}`),
          },
          (t) => {
            const old = before?.balancer.find(t.address);
            return old && before?.checker?.healthOf(old);
          },
        );
      }
      const entry = { upstream, balancer, checker };
      this.byName.set(upstream.name, entry);
      this.byId.set(upstream.id, entry);
    }
  }

  /** By id or name. */
  get(key: string): UpstreamBalancer | undefined {
    return this.byId.get(key) ?? this.byName.get(key);
  }

  /** The balancer of the upstream a service's host names, if it names one. */
  forService(service: Service): UpstreamBalancer | undefined {
    return this.byName.get(service.host);
  }

  /** The peers of one request to `service`, or why its upstream has none. `request` is read only for hashing. */
  peers(service: Service, request: HashRequest): PeerSource | NoPeer {
    const entry = this.byName.get(service.host);
    if (entry) {
      const hash = entry.upstream.hash_on === 'none' ? NO_HASH : hashValue(entry.upstream, request);
      return BalancedPeers.pick(entry.balancer, entry.checker, service.protocol, hash);
    }
    let own = this.servicePeers.get(service.id);
    if (!own) this.servicePeers.set(service.id, (own = new ServicePeers(service)));
    return own;
  }

  start(): void {
    for (const { checker } of this.byId.values()) checker?.start();
  }

  stop(): void {
    for (const { checker } of this.byId.values()) checker?.stop();
  }

  /**
   * Every address of every target of every upstream with its health (what Kong's prometheus exports per
   * target): a target named by a host name is resolved now, and one that does not resolve is DNS_ERROR
   * with no address, as in Kong's balancer.
   */
  async targetHealth(): Promise<TargetHealthReport[]> {
    const reports = [...this.byId.values()].flatMap((entry) =>
      entry.balancer.targets.map(async (t): Promise<TargetHealthReport[]> => {
        const report = { upstream: entry.upstream.name, target: t.address };
        if (t.type !== 'name') return [{ ...report, address: t.address, health: healthOf(entry, t) }];
        const ips = await resolve(t.host);
        if (ips.length === 0) return [{ ...report, address: '', health: 'DNS_ERROR' }];
        return ips.map((ip) => ({ ...report, address: `${ip.includes(':') ? `[${ip}]` : ip}:${t.port}`, health: healthOf(entry, t) }));
      }),
    );
    return (await Promise.all(reports)).flat();
  }

  /** Whether a target's health can be set outright. */
  check(upstreamKey: string, address: string): HealthChange {
    const found = this.locate(upstreamKey, address);
    return typeof found === 'string' ? found : 'done';
  }

  /** Sets a target's health outright (the admin API). */
  setHealth(upstreamKey: string, address: string, healthy: boolean): HealthChange {
    const found = this.locate(upstreamKey, address);
    if (typeof found === 'string') return found;
    found.checker.setStatus(found.target, healthy);
    return 'done';
  }

  private locate(upstreamKey: string, address: string): { checker: HealthChecker; target: TargetState } | Exclude<HealthChange, 'done'> {
    const entry = this.get(upstreamKey);
    const target = entry?.balancer.find(address);
    if (!entry || !target) return 'not-found';
    return entry.checker ? { checker: entry.checker, target } : 'no-checker';
  }
}

/** Kong reports HEALTHCHECKS_OFF for an upstream without checks, and for targets of weight 0. */
export function healthOf(entry: UpstreamBalancer, target: TargetState): TargetHealthState {
  if (!entry.checker || target.weight === 0) return 'HEALTHCHECKS_OFF';
  return target.available ? 'HEALTHY' : 'UNHEALTHY';
}

/** A health report waits this long for a name to resolve before calling it a DNS error. */
const RESOLVE_TIMEOUT_MS = 2000;

/** The addresses of a host name; none when it does not resolve in time. */
async function resolve(host: string): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string[]>((done) => (timer = setTimeout(() => done([]), RESOLVE_TIMEOUT_MS)));
  const found = lookup(host, { all: true }).then((addresses) => addresses.map((a) => a.address), () => []);
  return Promise.race([found, timeout]).finally(() => clearTimeout(timer));
}

/**
 * One configuration, ready to serve: router, plugin index, trusted peers, balancers, certificates.
 * Built once per load or reload and swapped atomically; a request keeps the snapshot it started with.
 */
import type { Logger } from 'pino';
import { Balancers } from './balancer/balancers.ts';
import type { GatewayConfig, Route, Service } from './config/types.ts';
import { PluginsIndex } from './pipeline/plugins-index.ts';
import type { PluginRuntime } from './pdk/types.ts';
import { AddressRanges } from './address-ranges.ts';
import { Router } from './router/index.ts';
import type { PluginRegistry } from './pdk/types.ts';
import { CertificateIndex } from './tls/certificates.ts';
import { upstreamTls, type UpstreamTls } from './tls/upstream-tls.ts';

const TLS_PROTOCOLS = new Set(['https', 'grpcs', 'wss']);

export class Snapshot {
  readonly router: Router;
  readonly plugins: PluginsIndex;
  /** `trusted_ips`: peers whose forwarding headers are believed. */
  readonly trusted: AddressRanges;
  readonly servicesById: ReadonlyMap<string, Service>;
  readonly routesById: ReadonlyMap<string, Route>;
  readonly balancers: Balancers;
  /** Certificates the TLS listeners present by server name. */
  readonly certificates: CertificateIndex;
  private readonly upstreamTlsByService = new Map<string, UpstreamTls>();

  constructor(
    readonly config: GatewayConfig,
    registry: PluginRegistry,
    /** Plugin runtimes by name (created once per process, configured per snapshot). */
    readonly runtimes: ReadonlyMap<string, PluginRuntime>,
    log: Logger,
    previous?: Snapshot,
  ) {
    this.router = new Router(config.routes, config.services);
    this.plugins = new PluginsIndex(config.plugins, config.routes, registry);
    this.trusted = new AddressRanges(config.gateway.trusted_ips);
    this.servicesById = new Map(config.services.map((s) => [s.id, s]));
    this.routesById = new Map(config.routes.map((r) => [r.id, r]));
    this.balancers = new Balancers(config, log, previous?.balancers);
    this.certificates = new CertificateIndex(config.certificates, config.snis, previous?.certificates);
    const certificates = new Map(config.certificates.map((c) => [c.id, c]));
    const cas = new Map(config.ca_certificates.map((c) => [c.id, c]));
    const material = { certificate: (id: string) => certificates.get(id), caCertificate: (id: string) => cas.get(id) };
    for (const service of config.services) {
      if (!TLS_PROTOCOLS.has(service.protocol)) continue;
      this.upstreamTlsByService.set(service.id, upstreamTls(service, this.balancers.forService(service)?.upstream, material));
    }
  }

  /** TLS settings towards a service's upstream (for https, grpcs and wss services). */
  upstreamTls(service: Service): UpstreamTls | undefined {
    return this.upstreamTlsByService.get(service.id);
  }
}

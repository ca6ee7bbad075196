/**
 * One configuration, ready to serve: router, plugin index, trusted peers. Built once per load or
 * reload and swapped atomically; a request keeps the snapshot it started with.
 */
import type { GatewayConfig, Route, Service } from './config/types.ts';
import { PluginsIndex } from './pipeline/plugins-index.ts';
import type { PluginRuntime } from './pipeline/plugin-api.ts';
import { AddressRanges } from './address-ranges.ts';
import { Router } from './router/index.ts';
import type { PluginRegistry } from './config/load.ts';

export class Snapshot {
  readonly router: Router;
  readonly plugins: PluginsIndex;
  /** `trusted_ips`: peers whose forwarding headers are believed. */
  readonly trusted: AddressRanges;
  readonly servicesById: ReadonlyMap<string, Service>;
  readonly routesById: ReadonlyMap<string, Route>;

  constructor(
    readonly config: GatewayConfig,
    registry: PluginRegistry,
    /** Plugin runtimes by name (created once per process, configured per snapshot). */
    readonly runtimes: ReadonlyMap<string, PluginRuntime>,
  ) {
    this.router = new Router(config.routes, config.services);
    this.plugins = new PluginsIndex(config.plugins, config.routes, registry);
    this.trusted = new AddressRanges(config.gateway.trusted_ips);
    this.servicesById = new Map(config.services.map((s) => [s.id, s]));
    this.routesById = new Map(config.routes.map((r) => [r.id, r]));
  }
}

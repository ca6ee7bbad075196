/**
 * Which plugin instances run on a request, in which order, with which config: Kong's precedence
 * (route+service+consumer, route+consumer, service+consumer, route+service, consumer, route, service,
 * global), computed per route once per configuration so a request only walks a short list.
 */
import type { PluginEntity, Route } from '../config/types.ts';
import type { PluginDefinition } from './plugin-api.ts';

export interface PluginStep {
  name: string;
  definition: PluginDefinition;
  /** The instance that applies when no consumer is identified (or none is consumer-scoped). */
  anonymous: PluginEntity | undefined;
  /** True when some instance of this plugin is consumer-scoped: resolve again once a consumer is known. */
  consumerScoped: boolean;
}

function key(name: string, route: string | null, service: string | null, consumer: string | null): string {
  return `${name}|${route ?? ''}|${service ?? ''}|${consumer ?? ''}`;
}

export class PluginsIndex {
  private readonly byKey = new Map<string, PluginEntity>();
  private readonly stepsByRoute = new Map<string, PluginStep[]>();
  /** Global plugins, for requests that match no route. */
  readonly globalNames: string[];

  constructor(
    plugins: PluginEntity[],
    routes: Route[],
    private readonly definitions: ReadonlyMap<string, PluginDefinition>,
  ) {
    const enabled = plugins.filter((p) => p.enabled && definitions.has(p.name));
    for (const p of enabled) this.byKey.set(key(p.name, p.route?.id ?? null, p.service?.id ?? null, p.consumer?.id ?? null), p);
    for (const route of routes) this.stepsByRoute.set(route.id, this.stepsFor(route, enabled));
    this.globalNames = [...new Set(enabled.filter((p) => !p.route && !p.service && !p.consumer).map((p) => p.name))];
  }

  steps(routeId: string): PluginStep[] {
    return this.stepsByRoute.get(routeId) ?? [];
  }

  /** The config for `step` once the consumer is known (Kong looks it up lazily during the access phase). */
  resolve(step: PluginStep, route: Route, consumerId: string | null): PluginEntity | undefined {
    if (!consumerId || !step.consumerScoped) return step.anonymous;
    const r = route.id;
    const s = route.service?.id ?? null;
    const n = step.name;
    return (
      (s ? this.byKey.get(key(n, r, s, consumerId)) : undefined) ??
      this.byKey.get(key(n, r, null, consumerId)) ??
      (s ? this.byKey.get(key(n, null, s, consumerId)) : undefined) ??
      this.byKey.get(key(n, null, null, consumerId)) ??
      step.anonymous
    );
  }

  private stepsFor(route: Route, enabled: PluginEntity[]): PluginStep[] {
    const serviceId = route.service?.id ?? null;
    const applicable = enabled.filter(
      (p) => (p.route === null || p.route.id === route.id) && (p.service === null || p.service.id === serviceId),
    );
    const names = [...new Set(applicable.map((p) => p.name))];
    const steps = names.map((name): PluginStep => {
      const get = (r: string | null, s: string | null) => this.byKey.get(key(name, r, s, null));
      const anonymous =
        (serviceId ? get(route.id, serviceId) : undefined) ?? get(route.id, null) ?? (serviceId ? get(null, serviceId) : undefined) ?? get(null, null);
      return {
        name,
        definition: this.definitions.get(name)!,
        anonymous,
        consumerScoped: applicable.some((p) => p.name === name && p.consumer !== null),
      };
    });
    // Descending priority, ties by name descending (Kong's sort_by_handler_priority).
    return steps.sort((a, b) => b.definition.priority - a.definition.priority || (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
  }
}

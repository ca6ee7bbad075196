/**
 * Which plugin instances run on a request, in which order, with which config: Kong's precedence
 * (route+service+consumer, route+consumer, service+consumer, route+service, consumer, route, service,
 * global), computed per route once per configuration so a request only walks a short list.
 */
import type { PluginInstance, Route } from '../config/types.ts';
import type { PluginDefinition } from '../pdk/types.ts';

export interface PluginStep {
  name: string;
  definition: PluginDefinition;
  /** The instance that applies when no consumer is identified (or none is consumer-scoped). */
  anonymous: PluginInstance | undefined;
  /** True when some instance of this plugin is consumer-scoped: resolve again once a consumer is known. */
  consumerScoped: boolean;
}

/** A route an instance runs on, with the steps that run before it there. */
export interface Placement {
  route: Route;
  before: PluginStep[];
}

function key(name: string, route: string | null, service: string | null, consumer: string | null): string {
  return `${name}|${route ?? ''}|${service ?? ''}|${consumer ?? ''}`;
}

export class PluginsIndex {
  private readonly byKey = new Map<string, PluginInstance>();
  private readonly stepsByRoute = new Map<string, PluginStep[]>();

  constructor(
    plugins: PluginInstance[],
    private readonly routes: Route[],
    private readonly definitions: ReadonlyMap<string, PluginDefinition>,
  ) {
    const enabled = plugins.filter((p) => p.enabled && definitions.has(p.name));
    for (const p of enabled) this.byKey.set(key(p.name, p.route?.id ?? null, p.service?.id ?? null, p.consumer?.id ?? null), p);
    for (const route of routes) this.stepsByRoute.set(route.id, this.stepsFor(route, enabled));
  }

  steps(routeId: string): PluginStep[] {
    return this.stepsByRoute.get(routeId) ?? [];
  }

  /** The config for `step` once the consumer is known (Kong looks it up lazily during the access phase). */
  resolve(step: PluginStep, route: Route, consumerId: string | null): PluginInstance | undefined {
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

  /**
   * Where `plugin` runs, decided exactly as requests decide it: each route on which the instance is the
   * one resolved (for its consumer, if it has one), with the steps that run before it for that caller.
   * Config checks ask this instead of re-deriving precedence, so a check and the runtime cannot disagree.
   */
  placements(plugin: PluginInstance): Placement[] {
    const consumerId = plugin.consumer?.id ?? null;
    const placements: Placement[] = [];
    for (const route of this.routes) {
      const steps = this.steps(route.id);
      const at = steps.findIndex((step) => step.name === plugin.name);
      if (at === -1 || this.resolve(steps[at], route, consumerId) !== plugin) continue;
      const before = steps.slice(0, at).filter((step) => this.resolve(step, route, consumerId) !== undefined);
      placements.push({ route, before });
    }
    return placements;
  }

  private stepsFor(route: Route, enabled: PluginInstance[]): PluginStep[] {
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

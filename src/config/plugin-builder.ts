/**
 * Builds plugin instances: the top-level `plugins` and those nested in a service, route or consumer.
 * Each is queued where the file declares it, its references resolved against what is declared so far,
 * and all are built at the end: ids must be unique among all instances, and a plugin's own check has to
 * see every plugin a route runs.
 */
import { closestName } from '../did-you-mean.ts';
import { ConfigCompileError } from '../errors.ts';
import type { PluginDefinition, PluginRegistry, PluginScope } from '../pdk/types.ts';
import { PluginsIndex } from '../pipeline/plugins-index.ts';
import { findReferenced, resolveReference, type BuildContext, type CoreEntities, type Referable } from './builder-context.ts';
import { pluginEntitySchema } from './entities.ts';
import { luaPluginRefusal } from './lua-plugins.ts';
import { isPlainObject, validate, type Path } from './schema.ts';
import type { PluginEntity, PluginInstance } from './types.ts';

/** What a plugin's place in the file decides: the id of the route, service or consumer it is nested in. */
export interface Nesting {
  route?: string;
  service?: string | null;
  consumer?: string;
}

/** A plugin as the file declares it, with the ids of what it applies to. */
interface PendingPlugin {
  path: Path;
  raw: Record<string, any>;
  route: string | null;
  service: string | null;
  consumer: string | null;
}

/** A built instance, with where the file declares it and its plugin, for the checks that follow. */
interface BuiltPlugin {
  entity: PluginInstance;
  path: Path;
  def: PluginDefinition;
  /** Its config passed the plugin's schema: `checkConfig` and `prepare` may read it. */
  configValid: boolean;
}

export class PluginBuilder {
  private readonly pending: PendingPlugin[] = [];

  constructor(
    private readonly ctx: BuildContext,
    private readonly core: CoreEntities,
  ) {}

  /** Queues the plugins of `container.plugins` (`container` at `base`), nested as `nesting` says. */
  queue(container: Record<string, any>, nesting: Nesting, base: Path = []): void {
    this.ctx.eachEntry(container, 'plugins', (raw, path) => this.queueOne(raw, path, nesting), base);
  }

  /** Validates the queued plugins against the `enabled` ones, then runs each plugin's own check and `prepare`. */
  build(registry: PluginRegistry, enabled: PluginRegistry): PluginInstance[] {
    const built: BuiltPlugin[] = [];
    for (const pending of this.pending) {
      const plugin = this.buildOne(pending, registry, enabled);
      if (!plugin) continue;
      if (built.some((x) => x.entity.id === plugin.entity.id)) {
        this.ctx.issue(plugin.path, `uniqueness violation: 'plugins' entity with primary key set to '${plugin.entity.id}' already declared`);
        continue;
      }
      built.push(plugin);
    }
    this.checkEach(built, registry);
    return built.map((p) => p.entity);
  }

  private queueOne(raw: Record<string, any>, path: Path, nesting: Nesting): void {
    if (nesting.route === undefined && findReferenced(this.core.streamRoutes, raw.route)) return this.ctx.warn(path, 'a plugin of a stream route is left out with its route');
    const route = this.appliesTo('route', raw, path, nesting, this.core.routes);
    // A plugin nested in a route belongs to that route only, not to the route's service.
    const service = nesting.route ? null : this.appliesTo('service', raw, path, nesting, this.core.services);
    this.pending.push({ path, raw, route, service, consumer: this.appliesTo('consumer', raw, path, nesting, this.core.consumers) });
  }

  /** The id of the route, service or consumer a plugin applies to: the one it is nested in, or the one its field names. */
  private appliesTo(field: keyof Nesting, raw: Record<string, any>, path: Path, nesting: Nesting, pool: Referable[]): string | null {
    if (nesting[field] !== undefined) return nesting[field] ?? null;
    const ref = raw[field];
    // A consumer created through the admin API is not the file's: the write checked that it exists.
    if (field === 'consumer' && this.ctx.fromApi(raw) && isPlainObject(ref) && typeof ref.id === 'string' && !findReferenced(pool, ref)) return ref.id;
    return resolveReference(raw[field], pool, { at: [...path, field], field, entity: `${field}s`, required: false }, this.ctx) ?? null;
  }

  /** The instance a queued plugin makes, or undefined when it cannot be built (reported). */
  private buildOne(p: PendingPlugin, registry: PluginRegistry, enabled: PluginRegistry): BuiltPlugin | undefined {
    // Its references are resolved already: the schema sees the instance's own fields only.
    const e = this.ctx.validateEntity<Record<string, any>>(
      pluginEntitySchema,
      { ...p.raw, route: undefined, service: undefined, consumer: undefined },
      p.path,
      [],
    );
    const def = enabled.get(e.name);
    if (typeof e.name === 'string' && !def) {
      this.ctx.issue([...p.path, 'name'], notEnabledMessage(e.name, registry));
      return undefined;
    }
    if (!def) return undefined;
    if (def.noConsumer && p.consumer) this.ctx.issue([...p.path, 'consumer'], 'value must be null');
    // Its vault references first, as Kong resolves a referenceable field before it is used (an unresolved one is reported).
    const declared = p.raw.config ?? {};
    const given = this.ctx.dereference(declared, def.configSchema, [...p.path, 'config']);
    if (given === undefined) return undefined;
    const { value: config, issues } = validate(def.configSchema, given, [...p.path, 'config']);
    for (const issue of issues) this.ctx.issue(issue.path, issue.message);
    const cacheKey = `plugins:${e.name}:${p.route ?? ''}:${p.service ?? ''}:${p.consumer ?? ''}`;
    const entity = withPrepared(this.ctx.stamped('plugins', e, {
      id: this.ctx.id(e.id, cacheKey),
      name: e.name,
      instance_name: e.instance_name ?? null,
      enabled: e.enabled,
      protocols: e.protocols,
      config: config as Record<string, any>,
      route: p.route ? { id: p.route } : null,
      service: p.service ? { id: p.service } : null,
      consumer: p.consumer ? { id: p.consumer } : null,
      tags: e.tags ?? null,
    }), undefined);
    if (given !== declared) showReferences(entity, validate(def.configSchema, declared).value);
    return { entity, path: p.path, def, configValid: issues.length === 0 };
  }

  /**
   * Runs the `checkConfig` of each enabled instance, which looks beyond its own config (its scope, the
   * plugins before it), then, when its config passed, its `prepare`.
   */
  private checkEach(built: BuiltPlugin[], registry: PluginRegistry): void {
    // The index requests will use: a check must see the plugins a route runs, not guess them.
    const index = new PluginsIndex(built.map((p) => p.entity), this.core.routes, registry);
    for (const plugin of built) {
      const { entity, path, def } = plugin;
      if (!entity.enabled) continue;
      const issues = def.checkConfig?.(entity.config, this.scopeOf(entity, index)) ?? [];
      for (const issue of issues) this.ctx.issue([...path, 'config', ...issue.path], issue.message);
      if (plugin.configValid && issues.length === 0) this.prepare(plugin);
    }
  }

  /** What the instance's hooks need of its config; a ConfigCompileError is an issue at its position. */
  private prepare({ entity, path, def }: BuiltPlugin): void {
    if (!def.prepare) return;
    try {
      withPrepared(entity, def.prepare(entity.config));
    } catch (err) {
      if (!(err instanceof ConfigCompileError)) throw err;
      this.ctx.issue([...path, 'config', ...err.path], err.message);
    }
  }

  /** What an instance applies to and where it runs, as its check sees them. */
  private scopeOf(entity: PluginInstance, index: PluginsIndex): PluginScope {
    const route = this.core.routes.find((r) => r.id === entity.route?.id) ?? null;
    const serviceId = entity.service?.id ?? route?.service?.id;
    return {
      route,
      service: this.core.services.find((s) => s.id === serviceId) ?? null,
      consumer: this.core.consumers.find((c) => c.id === entity.consumer?.id) ?? null,
      runsOn: index.placements(entity).map(({ route, before }) => ({ route, before: before.map((step) => step.definition) })),
    };
  }
}

/** Sets what `prepare` made of the instance's config, kept out of enumeration (see PluginInstance). */
function withPrepared(entity: PluginEntity, prepared: unknown): PluginInstance {
  return Object.defineProperty(entity, 'prepared', { value: prepared, configurable: true }) as PluginInstance;
}

/**
 * The admin API shows the instance's config with its vault references, as Kong does, not the secrets
 * they were resolved to (which the plugin runs with).
 */
function showReferences(entity: PluginInstance, declaredConfig: Record<string, any>): void {
  Object.defineProperty(entity, 'toJSON', { value: () => ({ ...entity, config: declaredConfig }) });
}

/**
 * Kong's message for a plugin the `plugins` setting leaves out; but a name no plugin has and close to
 * one that exists is a typo, which that advice would only send the operator chasing: the suggestion alone;
 * and Kong's Lua-running plugins get what to use instead.
 */
function notEnabledMessage(name: string, registry: PluginRegistry): string {
  const lua = registry.has(name) ? undefined : luaPluginRefusal(name);
  if (lua !== undefined) return lua;
  const close = registry.has(name) ? undefined : closestName(name, registry.keys());
  if (close !== undefined) return `unknown plugin '${name}'; did you mean '${close}'?`;
  return `plugin '${name}' not enabled; add it to the 'plugins' configuration property`;
}

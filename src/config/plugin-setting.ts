/**
 * Kong's `plugins` setting (kong.conf `plugins = bundled,<name>,...`, or `off`): which plugins a
 * configuration may use. Every plugin this gateway ships counts as bundled.
 */
import type { PluginDefinition } from '../pdk/types.ts';
import { luaPluginRefusal } from './lua-plugins.ts';

type Registry = ReadonlyMap<string, PluginDefinition>;

/** The enabled part of `registry`; a name that is no plugin here is reported through `report`. */
export function enabledPlugins(registry: Registry, setting: unknown, report: (index: number, message: string) => void): Registry {
  if (!Array.isArray(setting)) return registry;
  if (setting.length === 1 && setting[0] === 'off') return new Map();
  const enabled = new Map<string, PluginDefinition>();
  setting.forEach((name, i) => {
    if (name === 'bundled') for (const [n, p] of registry) enabled.set(n, p);
    else if (name === 'off') report(i, "'off' cannot be combined with other plugins");
    else if (typeof name === 'string' && registry.has(name)) enabled.set(name, registry.get(name)!);
    else if (typeof name === 'string') report(i, luaPluginRefusal(name) ?? `plugin '${name}' is enabled but not installed`);
  });
  return enabled;
}

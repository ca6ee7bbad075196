/**
 * Which plugins in use keep state in one process: with them a node runs one worker process, and on
 * PostgreSQL one node. A plugin is in use when an instance is enabled or the file declares its entities
 * (e.g. meters it syncs), and so is every plugin whose services an in-use plugin calls (`uses`): their
 * state is then written from every process too.
 */
import type { PluginRegistry } from '../pipeline/plugin-api.ts';
import type { PluginEntity } from './types.ts';

export function pluginsKeepingOneProcess(registry: PluginRegistry, plugins: PluginEntity[], entities: Record<string, Record<string, any>[]>): string[] {
  const inUse = new Set(plugins.filter((p) => p.enabled).map((p) => p.name));
  for (const plugin of registry.values()) {
    if ((plugin.entities ?? []).some((e) => (entities[e.name] ?? []).length > 0)) inUse.add(plugin.name);
  }
  for (const name of inUse) for (const used of registry.get(name)?.uses ?? []) inUse.add(used);
  return [...inUse].filter((name) => !registry.get(name)?.multiProcess);
}

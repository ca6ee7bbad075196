/**
 * Which plugins in use keep state in one process: with them a node runs one worker process, and on
 * PostgreSQL one node. A plugin is in use when an instance is enabled or the file declares its entities
 * (e.g. meters it syncs), and so is every plugin whose services an in-use plugin calls (`uses`): their
 * state is then written from every process too. The loader checks `worker_processes` against them.
 */
import type { PluginRegistry } from '../pdk/types.ts';
import type { BuildContext } from './builder-context.ts';
import { workerCount } from './entities.ts';
import type { GatewayConfig, NodeSettings, PluginEntity } from './types.ts';

export function pluginsKeepingOneProcess(registry: PluginRegistry, plugins: PluginEntity[], entities: Record<string, Record<string, any>[]>): string[] {
  const inUse = new Set(plugins.filter((p) => p.enabled).map((p) => p.name));
  for (const plugin of registry.values()) {
    if ((plugin.entities ?? []).some((e) => (entities[e.name] ?? []).length > 0)) inUse.add(plugin.name);
  }
  for (const name of inUse) for (const used of registry.get(name)?.uses ?? []) inUse.add(used);
  return [...inUse].filter((name) => !registry.get(name)?.multiProcess);
}

/**
 * Several worker processes only with plugins whose state stays correct across processes. Asked
 * for explicitly (`explicit`), several processes are refused; left at the default, the node runs one
 * process and the reason is returned (so that a default never makes a valid file invalid).
 */
export function checkProcessModel(
  gateway: NodeSettings,
  explicit: boolean,
  registry: PluginRegistry,
  inUse: Pick<GatewayConfig, 'plugins' | 'entities'>,
  ctx: BuildContext,
): string | null {
  if (gateway.worker_processes === undefined || workerCount(gateway.worker_processes) <= 1) return null;
  const singleProcess = pluginsKeepingOneProcess(registry, inUse.plugins, inUse.entities);
  if (singleProcess.length === 0) return null;
  if (!explicit) {
    gateway.worker_processes = 1;
    const names = singleProcess.map((n) => `'${n}'`).join(', ');
    return `one worker process instead of worker_processes: auto (the default): plugin ${names} ${singleProcess.length === 1 ? 'keeps' : 'keep'} state in one process`;
  }
  for (const name of singleProcess) {
    ctx.issue(['gateway', 'worker_processes'], `plugin '${name}' keeps state in one process: it runs with worker_processes: 1 only`);
  }
  return null;
}

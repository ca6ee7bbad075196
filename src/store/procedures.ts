/**
 * Store procedures: reads a plugin declares (PluginDefinition.storeProcedures) that run where the data
 * is. On a node of workers every read of the embedded store crosses a socket to the primary, which owns
 * LevelDB; a read of thousands of keys (a usage query over a year) is far cheaper run in the primary,
 * with only its answer crossing. Alone on a store, or on PostgreSQL, a procedure runs in the caller.
 * Arguments and results are JSON.
 */
import { StoreError } from './errors.ts';
import type { Store } from './store.ts';

export type StoreProcedure = (store: Store, args: unknown[]) => Promise<unknown>;

const procedures = new Map<string, StoreProcedure>();

/** Makes each plugin's procedures callable as `<plugin name>.<key>` in this process. */
export function registerStoreProcedures(plugins: Iterable<{ name: string; storeProcedures?: Record<string, StoreProcedure> }>): void {
  for (const plugin of plugins) {
    for (const [key, procedure] of Object.entries(plugin.storeProcedures ?? {})) procedures.set(`${plugin.name}.${key}`, procedure);
  }
}

/** Runs the procedure on `store` (the caller's namespace), here. */
export function runStoreProcedure(store: Store, name: string, args: unknown[]): Promise<unknown> {
  const procedure = procedures.get(name);
  if (!procedure) return Promise.reject(new StoreError(`unknown store procedure ${name}`));
  return procedure(store, args);
}

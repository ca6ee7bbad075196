/**
 * Store procedures: reads a plugin declares (PluginDefinition.storeProcedures) that run where the data
 * is. On a node of workers every read of the embedded store crosses a socket to the primary, which owns
 * LevelDB; a read of thousands of keys (a usage query over a year) is far cheaper run in the primary,
 * with only its answer crossing. Alone on a store, or on PostgreSQL, a procedure runs in the caller.
 * Arguments and results are JSON.
 *
 * A procedure may keep state between calls in the process that owns the data (a service of its own, such
 * as metering's single writer in a node's primary): the host gives it a logger, the node's id and a
 * hook to close that state before the store closes.
 */
import type { Logger } from 'pino';
import { createLogger } from '../log.ts';
import { StoreError } from './errors.ts';
import type { Store } from './store.ts';

export type StoreProcedure = (store: Store, args: unknown[], host: ProcedureHost) => Promise<unknown>;

/** What the process running a procedure offers it. */
export interface ProcedureHost {
  log: Logger;
  nodeId: string;
  /** Runs `close` before the store closes (the state a procedure keeps must be written by then). */
  onClose(close: () => Promise<void>): void;
}

const closers: (() => Promise<void>)[] = [];
let host: ProcedureHost = { log: createLogger('info'), nodeId: 'node', onClose: (close) => void closers.push(close) };

/** Set by the process that owns the store (a node's primary) before it serves its workers. */
export function hostStoreProcedures(log: Logger, nodeId: string): void {
  host = { log, nodeId, onClose: host.onClose };
}

/** Closes what procedures keep, last registered first; called before the store closes. */
export async function closeStoreProcedures(): Promise<void> {
  for (const close of closers.splice(0).reverse()) await close();
}

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
  return procedure(store, args, host);
}

/**
 * `npm run migrate -- --config FILE`: creates or upgrades the PostgreSQL schema the config names, and
 * nothing else (every node also does it at start, under the same lock).
 */
import { loadConfigFile } from '../config/load.ts';
import type { GatewayConfig } from '../config/types.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { StoreError } from './errors.ts';
import { postgresSettings } from './open.ts';
import { connectedClient } from './postgres/connection.ts';
import { migrate } from './postgres/schema.ts';

/** The config a store command works on (`--config FILE`, GATEWAY_CONFIG, ./gateway.yaml); its errors printed. */
export async function commandConfig(file: string, plugins: PluginRegistry): Promise<GatewayConfig | undefined> {
  const loaded = await loadConfigFile(file, plugins);
  if (loaded.ok) return loaded.config;
  for (const error of loaded.errors) console.error(String(error));
  console.error(`${file}: invalid configuration`);
  return undefined;
}

/** A command's failure as one line for the operator; exit code 1. */
export function commandFailed(err: unknown): number {
  const known = err instanceof StoreError || (err as { code?: string }).code !== undefined;
  console.error(`tollgate: ${known ? (err as Error).message : ((err as Error)?.stack ?? String(err))}`);
  return 1;
}

/** Creates or upgrades the schema of the PostgreSQL database the config `file` names; resolves with the exit code. */
export async function migrateStore(file: string, plugins: PluginRegistry): Promise<number> {
  const config = await commandConfig(file, plugins);
  if (!config) return 1;
  const { gateway } = config;
  if (gateway.database !== 'postgres') {
    console.log(`${file}: database is ${gateway.database}; the embedded store needs no migration`);
    return 0;
  }
  let client;
  try {
    client = await connectedClient(postgresSettings(gateway));
    const { from, to } = await migrate(client, gateway.pg_schema);
    const where = `${gateway.pg_user}@${gateway.pg_host}:${gateway.pg_port}/${gateway.pg_database}, schema ${gateway.pg_schema}`;
    if (from === to) console.log(`${where}: up to date (version ${to})`);
    else console.log(`${where}: ${from === 0 ? 'created' : `upgraded from version ${from}`} to version ${to}`);
    return 0;
  } catch (err) {
    return commandFailed(err);
  } finally {
    await client?.end().catch(() => undefined);
  }
}

/** Opens the store a node's settings name: LevelDB under the data directory, or PostgreSQL. */
import { join } from 'node:path';
import type { NodeSettings } from '../config/types.ts';
import { StoreUnavailableError } from './errors.ts';
import { damagedStoreError, LevelStore } from './level.ts';
import type { PostgresSettings } from './postgres/connection.ts';
import { PostgresStore } from './postgres/store.ts';
import type { StoreAdapter } from './store.ts';

export function postgresSettings(g: NodeSettings): PostgresSettings {
  return {
    host: g.pg_host,
    port: g.pg_port,
    user: g.pg_user,
    password: g.pg_password,
    database: g.pg_database,
    schema: g.pg_schema,
    ssl: g.pg_ssl,
    sslVerify: g.pg_ssl_verify,
    poolSize: g.pg_pool_size,
    updateFrequencyMs: g.db_update_frequency * 1000,
  };
}

export async function openStore(settings: NodeSettings, log: (message: string, err?: unknown) => void): Promise<StoreAdapter> {
  if (settings.database === 'postgres') {
    const store = new PostgresStore(postgresSettings(settings), log);
    try {
      await store.open();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }
  return openEmbeddedStore(settings.data_dir);
}

/** LevelDB under `dataDir`; only one process may hold it. */
export async function openEmbeddedStore(dataDir: string): Promise<LevelStore> {
  const store = new LevelStore(join(dataDir, 'store'));
  try {
    await store.open();
  } catch (err) {
    const cause = ((err as { cause?: Error }).cause ?? err) as Error & { code?: string };
    if (cause.code === 'LEVEL_LOCKED') {
      throw new StoreUnavailableError(`cannot open the store in ${dataDir}: ${cause.message} (is another gateway running on this data directory?)`, { cause: err });
    }
    throw damagedStoreError(store.location, cause);
  }
  return store;
}

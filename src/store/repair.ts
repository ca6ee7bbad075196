/**
 * `tollgate store:repair --config FILE`: LevelDB's own repair of the embedded store (data_dir/store),
 * for a store the gateway reports damaged at start (exit code 3). It rebuilds the store's index files
 * (CURRENT, MANIFEST) from its tables and logs, keeps every entry it can read, and moves the files it
 * cannot into data_dir/store/lost. The gateway must be stopped: LevelDB's lock refuses the repair then.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ClassicLevel } from 'classic-level';
import { LEVEL_OPTIONS } from './level.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { commandConfig, commandFailed } from './migrate.ts';

export async function repairStore(file: string, plugins: PluginRegistry): Promise<number> {
  const config = await commandConfig(file, plugins);
  if (!config) return 1;
  const location = join(config.gateway.data_dir, 'store');
  if (config.gateway.database !== 'leveldb' || !existsSync(location)) {
    console.error(`tollgate: no embedded store to repair in ${location}`);
    return 1;
  }
  try {
    if (await heldByAnotherProcess(location)) {
      console.error(`tollgate: the store in ${location} is in use (is a gateway running on this data directory?): stop it first`);
      return 1;
    }
    await ClassicLevel.repair(location);
  } catch (err) {
    return commandFailed(err);
  }
  console.log(`repaired the store in ${location}: what could be read is kept; files that could not are in ${join(location, 'lost')} (details in ${join(location, 'LOG')})`);
  return 0;
}

/** Whether a process holds the store's lock: an open fails then, whatever state the files are in. */
async function heldByAnotherProcess(location: string): Promise<boolean> {
  const probe = new ClassicLevel<string, string>(location, LEVEL_OPTIONS);
  try {
    await probe.open();
    return false;
  } catch (err) {
    return (err as { cause?: { code?: string } }).cause?.code === 'LEVEL_LOCKED';
  } finally {
    await probe.close().catch(() => undefined);
  }
}

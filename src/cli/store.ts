/** `tollgate migrate` and `tollgate store:copy`: the PostgreSQL store's schema, and moving an embedded store into it. */
import { UsageError } from '../errors.ts';
import { copyStore, DEFAULT_COPY_BATCH } from '../store/copy.ts';
import { migrateStore } from '../store/migrate.ts';
import { repairStore } from '../store/repair.ts';
import type { CommandDefinition } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

export const migrate: CommandDefinition = {
  name: 'migrate',
  summary: 'create or upgrade the PostgreSQL schema the configuration names (database: postgres)',
  details: 'Every node also does it at start, under the same lock; this runs it alone (e.g. before a rolling upgrade).',
  options: { config: CONFIG_OPTION },
  run: (options, plugins) => migrateStore(configFileOf(options), plugins),
};

export const storeRepair: CommandDefinition = {
  name: 'store:repair',
  summary: 'repair the embedded LevelDB store the configuration names, when start reports it damaged (exit code 3)',
  details: [
    'Stop the gateway first. Keeps every entry that can be read; files that cannot are moved to <data_dir>/store/lost.',
    'Copy the data directory aside before, to keep the damaged files as they were.',
  ].join('\n'),
  options: { config: CONFIG_OPTION },
  run: (options, plugins) => repairStore(configFileOf(options), plugins),
};

const MAX_BATCH = 100_000;

export const storeCopy: CommandDefinition = {
  name: 'store:copy',
  summary: 'copy the embedded LevelDB store into the PostgreSQL database the configuration names',
  details: [
    'Stop the gateway first. Resumable: run it again after an interruption and it continues where it was.',
    'At the end the entries of every key group are counted on both sides.',
  ].join('\n'),
  options: {
    from: { type: 'string', value: 'leveldb', description: 'the store to copy from (only leveldb)' },
    to: { type: 'string', value: 'postgres', description: 'the store to copy into (only postgres)' },
    config: CONFIG_OPTION,
    'batch-size': { type: 'string', value: 'N', description: `entries per transaction (default ${DEFAULT_COPY_BATCH}, at most ${MAX_BATCH})` },
  },
  run(options, plugins) {
    if (options.from !== 'leveldb' || options.to !== 'postgres') throw new UsageError('only --from leveldb --to postgres is supported', 'store:copy');
    const batch = options['batch-size'] === undefined ? DEFAULT_COPY_BATCH : Number(options['batch-size']);
    if (!Number.isInteger(batch) || batch < 1 || batch > MAX_BATCH) throw new UsageError(`--batch-size must be an integer between 1 and ${MAX_BATCH}`, 'store:copy');
    return copyStore(configFileOf(options), plugins, batch);
  },
};

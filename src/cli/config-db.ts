/**
 * `tollgate config:db_import` and `config:db_export` (Kong's `kong config db_import|db_export`): moving
 * services, routes, plugins, upstreams and targets between a declarative file and the store, where the admin API keeps
 * those it creates (src/stored-entities.ts). An import is validated whole with gateway.yaml, as an admin
 * API write is, and stored with the same conditional write; the running nodes apply it as they apply one.
 */
import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { API_ENTITY_KINDS, loadConfigFile, loadConfigText, type ApiEntities } from '../config/load.ts';
import { formatPath } from '../config/schema.ts';
import type { GatewayConfig } from '../config/types.ts';
import { UsageError } from '../errors.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { StoredEntities, storedRecord } from '../stored-entities.ts';
import { commandConfig, commandFailed } from '../store/migrate.ts';
import { openStore } from '../store/open.ts';
import type { StoreAdapter } from '../store/store.ts';
import { EXIT, type CommandDefinition, type OptionValues } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

const FILE_OPTION = { type: 'string', short: 'f', value: 'FILE', description: 'the declarative file (Kong\'s format, `_format_version: "3.0"`)' } as const;
/** Tries of an import that keeps meeting admin API writes, as the admin API's own. */
const MAX_ATTEMPTS = 5;

export const dbImport: CommandDefinition = {
  name: 'config:db_import',
  summary: "add the services, routes, plugins, upstreams and targets of a declarative file to the store (Kong's config db_import)",
  details: [
    'They join those created through the admin API: an entity with the id of a stored one replaces it. The result is',
    'validated with gateway.yaml as a whole first; nothing is stored when it is invalid. Running nodes apply it within',
    'db_update_frequency. On LevelDB, stop the node first (its primary holds the store).',
  ].join('\n'),
  options: { file: FILE_OPTION, config: CONFIG_OPTION },
  run: (options, plugins) => withStore(options, plugins, 'config:db_import', (store, config, file) => importFile(store, config, file, plugins)),
};

export const dbExport: CommandDefinition = {
  name: 'config:db_export',
  summary: "write the services, routes, plugins, upstreams and targets of the store to a declarative file (Kong's config db_export)",
  details: "Those created through the admin API or imported: gateway.yaml's own are in gateway.yaml. The file loads with config:db_import.",
  options: { file: FILE_OPTION, config: CONFIG_OPTION },
  run: (options, plugins) => withStore(options, plugins, 'config:db_export', (store, _config, file) => exportFile(store, file)),
};

async function withStore(
  options: OptionValues,
  plugins: PluginRegistry,
  command: string,
  work: (store: StoredEntities, config: GatewayConfig, file: string) => Promise<number>,
): Promise<number> {
  const file = options.file as string | undefined;
  if (!file) throw new UsageError('--file FILE is required', command);
  const config = await commandConfig(configFileOf(options), plugins);
  if (!config) return EXIT.failure;
  let store: StoreAdapter | undefined;
  try {
    store = await openStore(config.gateway, (message) => console.error(`tollgate: ${message}`));
    return await work(new StoredEntities(store.namespace('core')), config, file);
  } catch (err) {
    return commandFailed(err);
  } finally {
    await store?.close().catch(() => undefined);
  }
}

async function importFile(stored: StoredEntities, config: GatewayConfig, file: string, plugins: PluginRegistry): Promise<number> {
  const loaded = await loadConfigFile(file, plugins);
  if (!loaded.ok) return refused(loaded.errors, file);
  const others = Object.entries(kindsBeyondImport(loaded.config)).filter(([, count]) => count > 0);
  if (others.length > 0) {
    console.error(`${file}: only ${API_ENTITY_KINDS.join(', ')} can be imported; the file also has ${others.map(([kind, n]) => `${n} ${kind}`).join(', ')}`);
    return EXIT.failure;
  }
  const incoming = Object.fromEntries(API_ENTITY_KINDS.map((kind) => [kind, loaded.config[kind]])) as unknown as ApiEntities;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const read = await stored.read();
    const next = withImported(read.document, incoming);
    const effective = loadConfigText(config.text, config.file, plugins, config.file, next);
    if (!effective.ok) {
      // What is wrong with an imported entity is said of it, not of where gateway.yaml's list of its kind is.
      const about = effective.apiIssues?.length ? effective.apiIssues.map((i) => `${file}: ${i.kind} ${i.id}: ${i.path.length > 0 ? `${formatPath(i.path)}: ` : ''}${i.message}`) : effective.errors;
      return refused(about, `${file} with ${config.file}`);
    }
    const document = await stored.replace(read, next);
    if (!document) continue;
    await stored.announce(document.version);
    console.log(`${file}: imported ${countsOf(incoming)} into the store (version ${document.version})`);
    return EXIT.ok;
  }
  console.error(`${file}: the store kept changing meanwhile (admin API writes): try again`);
  return EXIT.failure;
}

/** The stored entities with the imported ones: by id, an imported entity replaces a stored one. */
function withImported(current: ApiEntities, incoming: ApiEntities): ApiEntities {
  const next = { ...current };
  for (const kind of API_ENTITY_KINDS) {
    // A certificate's `snis` are the SNI entities beside it (the loader would declare them twice).
    const records = incoming[kind].map((entity) => (kind === 'certificates' ? withoutSnis(storedRecord(entity)) : storedRecord(entity)));
    const ids = new Set(records.map((r) => r.id));
    next[kind] = [...current[kind].filter((e) => !ids.has(e.id)), ...records];
  }
  return next;
}

function withoutSnis({ snis: _snis, ...certificate }: Record<string, any>): Record<string, any> & { id: string } {
  return certificate as Record<string, any> & { id: string };
}

/** What an import does not take (yet): every other kind of entity the file declares. */
function kindsBeyondImport(config: GatewayConfig): Record<string, number> {
  const counts: Record<string, number> = {
    consumers: config.consumers.length,
    vaults: config.vaults.length,
  };
  for (const [kind, entities] of Object.entries(config.entities)) counts[kind] = entities.length;
  return counts;
}

function refused(errors: readonly unknown[], what: string): number {
  for (const error of errors) console.error(String(error));
  console.error(`${what}: invalid configuration, nothing imported`);
  return EXIT.failure;
}

async function exportFile(stored: StoredEntities, file: string): Promise<number> {
  const { document } = await stored.read();
  const entities = Object.fromEntries(API_ENTITY_KINDS.map((kind) => [kind, document[kind]]));
  await writeFile(file, stringify({ _format_version: '3.0', ...entities }), { mode: 0o600 });
  console.log(`${file}: exported ${countsOf(document)} (version ${document.version})`);
  return EXIT.ok;
}

function countsOf(entities: ApiEntities): string {
  return API_ENTITY_KINDS.map((kind) => `${entities[kind].length} ${kind}`).join(', ');
}

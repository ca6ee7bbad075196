/**
 * The entities one plugin declares `keptByCore` (Kong's DAOs): one EntityDirectory each, built in the
 * plugin's store before the plugin is created, loaded once it is, given the file's records before every
 * `configure` of the plugin, their admin API generated, closed after the plugin (see src/pdk/types.ts).
 */
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/types.ts';
import type { AdminRoute, ConsumerDirectory, Entity, KeptEntities, PluginDefinition, PluginRuntime } from './pdk/types.ts';
import type { Store } from './store/store.ts';
import { entityAdminRoutes } from './toolkit/entity-admin.ts';
import { EntityDirectory } from './toolkit/entity-directory.ts';

export class KeptEntityDirectories {
  private readonly byName = new Map<string, EntityDirectory>();

  constructor(
    private readonly plugin: PluginDefinition,
    store: Store,
    consumers: ConsumerDirectory,
    log: Logger,
  ) {
    for (const definition of plugin.entities ?? []) {
      if (!definition.keptByCore) continue;
      // Only consumers live at runtime: children of services or routes exist in the file alone.
      const parent = definition.parent?.entity === 'consumers' ? consumers : undefined;
      this.byName.set(definition.name, new EntityDirectory(store, definition, { parent, log }));
    }
  }

  /** What `api.entities(name)` answers. */
  get<T extends Entity>(name: string): KeptEntities<T> {
    const directory = this.byName.get(name);
    if (!directory) throw new Error(`plugin ${this.plugin.name} declares no entity ${name} kept by the core`);
    return directory as unknown as KeptEntities<T>;
  }

  /** Reads the runtime records and starts following other processes' changes. */
  async load(): Promise<void> {
    for (const directory of this.byName.values()) await directory.load();
  }

  /** The file's records of `config`, given before the plugin's `configure` sees it. */
  setDeclared(config: GatewayConfig): void {
    for (const [name, directory] of this.byName) directory.setDeclared(config.entities[name] ?? []);
  }

  /** The generated admin API of the entities that have admin names, with the runtime's save hooks. */
  adminRoutes(runtime: PluginRuntime): AdminRoute[] {
    return [...this.byName.values()]
      .filter((directory) => directory.definition.admin)
      .flatMap((directory) => entityAdminRoutes(directory, runtime.beforeEntitySave?.[directory.definition.name]));
  }

  close(): void {
    for (const directory of this.byName.values()) directory.close();
  }
}

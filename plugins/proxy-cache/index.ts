/**
 * Kong's `proxy-cache` plugin with its `memory` strategy: answers cacheable requests from cached upstream
 * responses, keyed as Kong keys them, with Kong's admin endpoints to read and purge entries. Each gateway
 * process keeps its own cache (Kong's is one per node); purges reach every process and node.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { serveCaches } from './api.ts';
import { createRuntime, prepare, type Prepared } from './handler.ts';
import { Dictionaries } from './memory.ts';
import { configSchema, type ProxyCacheConfig } from './schema.ts';

const proxyCache: PluginDefinition<ProxyCacheConfig, Prepared> = {
  name: 'proxy-cache',
  version: '0.1.0',
  // Kong's PRIORITY: late in the access phase, after authentication and rate limiting.
  priority: 100,
  multiProcess: true,
  configSchema,
  prepare,
  create(api) {
    const dictionaries = new Dictionaries();
    let dictionaryById = new Map<string, string>();
    const caches = serveCaches(api, dictionaries, (id) => dictionaryById.get(id));
    return {
      ...createRuntime(api, dictionaries),
      configure(view) {
        dictionaryById = new Map(view.instances.map((instance) => [instance.id, instance.config.memory.dictionary_name]));
      },
      adminRoutes: caches.routes,
      close: async () => caches.close(),
    };
  },
};

export default proxyCache;

/**
 * Kong's `proxy-cache` plugin with its `memory` strategy: answers cacheable requests from cached upstream
 * responses, keyed as Kong keys them, with Kong's admin endpoints to read and purge entries. The cache is
 * the node's (node-cache.ts); purges reach every node.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { adminRoutes } from './api.ts';
import { createRuntime, prepare, type Prepared } from './handler.ts';
import { NodeCache } from './node-cache.ts';
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
    const cache = new NodeCache(api);
    let dictionaryById = new Map<string, string>();
    return {
      ...createRuntime(api, cache),
      configure(view) {
        dictionaryById = new Map(view.instances.map((instance) => [instance.id, instance.config.memory.dictionary_name]));
      },
      adminRoutes: adminRoutes(cache, (id) => dictionaryById.get(id)),
      close: async () => cache.close(),
    };
  },
};

export default proxyCache;

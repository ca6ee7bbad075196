/**
 * Kong's proxy-cache admin endpoints (kong/plugins/proxy-cache/api.lua): an entry by plugin instance and
 * key, an entry by key in any instance's dictionary, and purges. Entries are looked for in every process
 * of this node; purges reach every process of every node sharing the store.
 */
import type { AdminReply, AdminRoute } from '../../src/pdk/index.ts';
import type { NodeCache, Where } from './node-cache.ts';

const NOT_FOUND: AdminReply = { status: 404, body: { message: 'Not found' } };
const NO_CONTENT: AdminReply = { status: 204 };

/** `dictionaryOf` names the dictionary of a proxy-cache instance by its id (undefined for an unknown id). */
export function adminRoutes(cache: NodeCache, dictionaryOf: (pluginId: string) => string | undefined): AdminRoute[] {
  /** The entry (GET) or its purge (DELETE); 404 when no process of the node has it. */
  const answer = async (where: Where, remove: boolean): Promise<AdminReply> => {
    const entry = await cache.entryOnNode(where);
    if (!entry) return NOT_FOUND;
    if (!remove) return { status: 200, body: entry };
    await cache.purge(where);
    return NO_CONTENT;
  };
  const byInstance = (pluginId: string, key: string, remove: boolean): Promise<AdminReply> | AdminReply => {
    const dictionary = dictionaryOf(pluginId);
    return dictionary === undefined ? NOT_FOUND : answer({ dictionary, key }, remove);
  };
  return [
    { method: 'DELETE', path: '/proxy-cache', handler: async () => (await cache.purge({}), NO_CONTENT) },
    { method: 'GET', path: '/proxy-cache/:cache_key', handler: (req) => answer({ key: req.params.cache_key }, false) },
    { method: 'DELETE', path: '/proxy-cache/:cache_key', handler: (req) => answer({ key: req.params.cache_key }, true) },
    { method: 'GET', path: '/proxy-cache/:plugin_id/caches/:cache_key', handler: (req) => byInstance(req.params.plugin_id, req.params.cache_key, false) },
    { method: 'DELETE', path: '/proxy-cache/:plugin_id/caches/:cache_key', handler: (req) => byInstance(req.params.plugin_id, req.params.cache_key, true) },
  ];
}

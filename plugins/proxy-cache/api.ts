/**
 * Kong's proxy-cache admin endpoints (kong/plugins/proxy-cache/api.lua): an entry by plugin instance and
 * key, an entry by key in any instance's dictionary, and purges. An entry is looked for in every process
 * of this node; a purge reaches every process of every node sharing the store (Kong broadcasts its
 * purges to the cluster the same way).
 */
import type { AdminReply, AdminRoute, PluginApi } from '../../src/pdk/index.ts';
import { entryView, type Dictionaries } from './memory.ts';

const ENTRY_TOPIC = 'proxy-cache:entry';
const PURGE_TOPIC = 'proxy-cache:purge';

/** An entry asked for, or a purge: in one dictionary, or in all when `dictionary` is absent; everything when `key` is absent. */
interface Where {
  dictionary?: string;
  key?: string;
}

const NOT_FOUND: AdminReply = { status: 404, body: { message: 'Not found' } };
const NO_CONTENT: AdminReply = { status: 204 };

/**
 * Offers this process's entries to the node and applies purges, wherever they were asked for.
 * `dictionaryOf` names the dictionary of a proxy-cache instance by its id (undefined for an unknown id).
 */
export function serveCaches(api: PluginApi, dictionaries: Dictionaries, dictionaryOf: (pluginId: string) => string | undefined): { routes: AdminRoute[]; close(): void } {
  api.node.offer(ENTRY_TOPIC, (argument) => {
    const { dictionary, key } = JSON.parse(argument!) as Where;
    const entry = dictionaries.find(key!, dictionary);
    return entry ? entryView(entry) : null;
  });
  const unsubscribe = api.store.notices.subscribe(PURGE_TOPIC, (message) => {
    // Lost notices (null): the purges they carried are made by dropping everything.
    const { dictionary, key } = message === null ? {} : (JSON.parse(message) as Where);
    dictionaries.purge(dictionary, key);
  });
  const entryOnNode = async (where: Where) => (await api.node.gather(ENTRY_TOPIC, JSON.stringify(where))).find((entry) => entry != null);
  const purge = (where: Where) => api.store.notices.publishAndWait(PURGE_TOPIC, JSON.stringify(where));

  /** An instance's entry (GET) or its purge (DELETE), 404 for an unknown instance or key. */
  const byInstance = async (pluginId: string, key: string, remove: boolean): Promise<AdminReply> => {
    const dictionary = dictionaryOf(pluginId);
    if (dictionary === undefined) return NOT_FOUND;
    const entry = await entryOnNode({ dictionary, key });
    if (!entry) return NOT_FOUND;
    if (!remove) return { status: 200, body: entry };
    await purge({ dictionary, key });
    return NO_CONTENT;
  };
  const byKey = async (key: string, remove: boolean): Promise<AdminReply> => {
    const entry = await entryOnNode({ key });
    if (!entry) return NOT_FOUND;
    if (!remove) return { status: 200, body: entry };
    await purge({ key });
    return NO_CONTENT;
  };

  const routes: AdminRoute[] = [
    { method: 'DELETE', path: '/proxy-cache', handler: async () => (await purge({}), NO_CONTENT) },
    { method: 'GET', path: '/proxy-cache/:cache_key', handler: (req) => byKey(req.params.cache_key, false) },
    { method: 'DELETE', path: '/proxy-cache/:cache_key', handler: (req) => byKey(req.params.cache_key, true) },
    { method: 'GET', path: '/proxy-cache/:plugin_id/caches/:cache_key', handler: (req) => byInstance(req.params.plugin_id, req.params.cache_key, false) },
    { method: 'DELETE', path: '/proxy-cache/:plugin_id/caches/:cache_key', handler: (req) => byInstance(req.params.plugin_id, req.params.cache_key, true) },
  ];
  return { routes, close: unsubscribe };
}

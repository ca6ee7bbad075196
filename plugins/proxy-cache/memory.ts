/**
 * Kong's `memory` strategy (kong/plugins/proxy-cache/strategies/memory.lua): cached responses kept in a
 * dictionary named by `memory.dictionary_name`, which every instance naming it shares, each entry
 * expiring after its storage TTL. Kong's dictionary is an nginx shared dict of a fixed size per node;
 * here each process keeps its own, bounded in bytes, least recently used first out.
 */
import { LRUCache } from 'lru-cache';

/** Kong's entry format version, shown with each entry. */
export const CACHE_VERSION = 1;

/** Bytes one dictionary holds at most (Kong's `mem_cache_size` default, which sizes `kong_db_cache`). */
export const DICTIONARY_BYTES = 128 * 1024 * 1024;
/** The largest body cached: a larger response streams through uncached (and never sits in memory whole). */
export const MAX_CACHED_BODY = 8 * 1024 * 1024;
/** Bytes counted per header, beside its name and value, and per entry, beside its key and body. */
const OVERHEAD = 64;

export interface CachedResponse {
  status: number;
  /** The answer's headers as they went downstream, minus those recomputed on a hit. */
  headers: Record<string, string | string[]>;
  body: Buffer;
  /** Seconds since the epoch when stored. */
  timestamp: number;
  /** How long, in seconds, the entry is fresh (the resource's TTL). */
  ttl: number;
  version: number;
}

/** An entry as Kong's admin API shows it (`body` as text). */
export function entryView(entry: CachedResponse): Record<string, unknown> {
  return { ...entry, body: entry.body.toString('utf8'), body_len: entry.body.length };
}

function sizeOf(entry: CachedResponse, key: string): number {
  let size = OVERHEAD + key.length + entry.body.length;
  for (const [name, value] of Object.entries(entry.headers)) size += OVERHEAD + name.length + String(value).length;
  return size;
}

export class Dictionaries {
  private readonly byName = new Map<string, LRUCache<string, CachedResponse>>();

  /** The dictionary of that name, made on first use. */
  get(name: string): LRUCache<string, CachedResponse> {
    let dictionary = this.byName.get(name);
    if (!dictionary) {
      dictionary = new LRUCache<string, CachedResponse>({ maxSize: DICTIONARY_BYTES, sizeCalculation: sizeOf });
      this.byName.set(name, dictionary);
    }
    return dictionary;
  }

  /** Stores an entry for `storageTtl` seconds. */
  store(name: string, key: string, entry: CachedResponse, storageTtl: number): void {
    this.get(name).set(key, entry, { ttl: storageTtl * 1000 });
  }

  /** The entry under `key` in the named dictionary, or in any when no name is given. */
  find(key: string, name?: string): CachedResponse | undefined {
    if (name !== undefined) return this.byName.get(name)?.get(key);
    for (const dictionary of this.byName.values()) {
      const entry = dictionary.get(key);
      if (entry) return entry;
    }
    return undefined;
  }

  /** Milliseconds the entry under `key` has left in the named dictionary (0 when there is none). */
  remainingMs(name: string, key: string): number {
    return this.byName.get(name)?.getRemainingTTL(key) ?? 0;
  }

  /** Drops `key` from the named dictionary (every one without a name), or everything without a key. */
  purge(name: string | undefined, key: string | undefined): void {
    const dictionaries = name === undefined ? [...this.byName.values()] : [this.byName.get(name)].filter((d) => d !== undefined);
    for (const dictionary of dictionaries) {
      if (key === undefined) dictionary.clear();
      else dictionary.delete(key);
    }
  }
}

/**
 * Kong's proxy-cache handler.lua: in the access phase a cacheable request is answered from the cache
 * when its entry is fresh (Hit), else goes upstream marked Miss or Refresh; the response phase decides
 * whether the upstream's answer may be cached (status, content type, Cache-Control) and watches its body
 * go by; the log phase stores it once the whole answer went downstream. `X-Cache-Status`, `X-Cache-Key`
 * and `Age` tell the client what happened, as the config (or a `Kong-Debug` request header) allows.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { AccessContext, PluginApi, PluginRuntime, RequestView, ResponseHead } from '../../src/pdk/index.ts';
import { cacheKeyOf } from './cache-key.ts';
import { contentTypeMatches, parseDirectives, parseMediaType, resourceTtl, seconds, type Directives, type MediaType } from './cacheability.ts';
import { CACHE_VERSION, MAX_CACHED_BODY, type CachedResponse } from './memory.ts';
import type { NodeCache } from './node-cache.ts';
import type { ProxyCacheConfig } from './schema.ts';

/** What the hooks need of a config, made once per configuration. */
export interface Prepared {
  methods: Set<string>;
  statuses: Set<number>;
  /** The configured content types Kong's grammar accepts (the others match nothing). */
  contentTypes: MediaType[];
}

export function prepare(config: ProxyCacheConfig): Prepared {
  return {
    methods: new Set(config.request_method),
    statuses: new Set(config.response_code),
    contentTypes: config.content_type.flatMap((text) => parseMediaType(text) ?? []),
  };
}

type DiagnosticHeader = keyof ProxyCacheConfig['response_headers'];

/**
 * Kong's hop-by-hop list (Content-Length included, as the answer's own is set again): never replayed
 * from the cache, nor any rate limit's remaining count, which belongs to the request that stored it.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailers', 'transfer-encoding', 'upgrade', 'content-length']);
const DIAGNOSTIC_HEADERS = ['age', 'x-cache-status', 'x-cache-key'];

/** A request on its way upstream whose answer may be stored (Kong's `ctx.proxy_cache`). */
interface Pending {
  key: string;
  /** Set once the response phase found the answer cacheable. */
  response?: { status: number; headers: Record<string, string | string[]>; ttl: number; chunks: Buffer[]; size: number; tooLarge: boolean };
}

const PENDING = 'proxyCache';

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Whether the client or the config asks for a diagnostic header (Kong-Debug shows them all). */
function shows(ctx: RequestView, config: ProxyCacheConfig, header: DiagnosticHeader): boolean {
  return ctx.headers['kong-debug'] !== undefined || config.response_headers[header];
}

export function createRuntime(api: PluginApi, cache: NodeCache): PluginRuntime<ProxyCacheConfig, Prepared> {
  return {
    access(ctx, config, plugin) {
      const directives = parseDirectives(ctx.headers['cache-control']);
      const key = cacheableRequest(ctx, config, plugin.prepared, directives) ? cacheKeyOf(ctx, config) : undefined;
      if (key === undefined) return setDiagnostic(ctx, config, 'X-Cache-Status', 'Bypass');
      setDiagnostic(ctx, config, 'X-Cache-Key', key);
      const dictionary = config.memory.dictionary_name;
      const entry = cache.dictionaries.find(key, dictionary);
      if ((entry && fresh(entry, config, directives)) || api.processesOnNode < 2) return serve(ctx, config, directives, key, entry);
      // Another process of the node may hold the entry, or a newer one it refreshed.
      return cache.copyFromNode(dictionary, key, entry?.timestamp).then((copy) => serve(ctx, config, directives, key, copy ?? entry));
    },

    response(ctx, config, head, plugin) {
      const pending = ctx.shared[PENDING] as Pending | undefined;
      if (!pending) return;
      const directives = parseDirectives(head.headers['cache-control']);
      const now = Date.now();
      if (!cacheableResponse(head, config, plugin.prepared, directives, now)) {
        delete ctx.shared[PENDING];
        if (shows(ctx, config, 'X-Cache-Status')) head.headers['x-cache-status'] = 'Bypass';
        return;
      }
      const ttl = config.cache_control ? resourceTtl(directives, head.headers.expires, now) : config.cache_ttl;
      const response = { status: head.status, headers: storedHeaders(head.headers), ttl, chunks: [] as Buffer[], size: 0, tooLarge: false };
      pending.response = response;
      if (Number(head.headers['content-length']) > MAX_CACHED_BODY) response.tooLarge = true;
      else head.observeBody?.((chunk) => collect(response, chunk));
    },

    log(ctx, config) {
      const pending = ctx.shared[PENDING] as Pending | undefined;
      const response = pending?.response;
      if (!response || response.tooLarge || !ctx.outcome.complete) return;
      const entry: CachedResponse = {
        status: response.status,
        headers: response.headers,
        body: Buffer.concat(response.chunks, response.size),
        timestamp: nowSeconds(),
        ttl: response.ttl,
        version: CACHE_VERSION,
      };
      const storageTtl = config.storage_ttl ?? (config.cache_control ? response.ttl : config.cache_ttl);
      try {
        cache.dictionaries.store(config.memory.dictionary_name, pending.key, entry, storageTtl);
      } catch (err) {
        api.log.error({ err, request_id: ctx.id }, 'proxy-cache: could not store the response');
      }
    },
  };
}

/** Answers from the entry when it is fresh enough for this request (Hit), else lets the request go upstream. */
function serve(ctx: AccessContext, config: ProxyCacheConfig, directives: Directives, key: string, entry: CachedResponse | undefined): void {
  if (!entry) {
    // RFC 7234 §5.2.1.7: the client wants a cached answer or none.
    if (config.cache_control && directives['only-if-cached'] !== undefined) return ctx.respond(504);
    return awaitResponse(ctx, config, key, 'Miss');
  }
  if (!fresh(entry, config, directives)) return awaitResponse(ctx, config, key, 'Refresh');
  ctx.respond(entry.status, entry.body, hitHeaders(ctx, config, entry, key));
}

function setDiagnostic(ctx: AccessContext, config: ProxyCacheConfig, header: DiagnosticHeader, value: string): void {
  if (shows(ctx, config, header)) ctx.setResponseHeader(header, value);
}

/** Kong's cacheable_request: a configured method, and with cache_control no no-store, no-cache or Authorization. */
function cacheableRequest(ctx: AccessContext, config: ProxyCacheConfig, prepared: Prepared, directives: Directives): boolean {
  // A gRPC call or a WebSocket handshake is no cacheable exchange.
  if (ctx.isGrpc || ctx.isUpgrade || !prepared.methods.has(ctx.method)) return false;
  return !(config.cache_control && (directives['no-store'] !== undefined || directives['no-cache'] !== undefined || ctx.headers.authorization !== undefined));
}

/** Marks the request so that its answer may be stored (Kong's signal_cache_req). */
function awaitResponse(ctx: AccessContext, config: ProxyCacheConfig, key: string, status: 'Miss' | 'Refresh'): void {
  ctx.shared[PENDING] = { key } satisfies Pending;
  setDiagnostic(ctx, config, 'X-Cache-Status', status);
}

/**
 * Whether an entry may answer this request: with cache_control, as the request's max-age, max-stale and
 * min-fresh allow (an entry is kept up to `storage_ttl`, possibly past its freshness); else while younger
 * than cache_ttl.
 */
function fresh(entry: CachedResponse, config: ProxyCacheConfig, directives: Directives): boolean {
  const age = nowSeconds() - entry.timestamp;
  if (!config.cache_control) return age <= config.cache_ttl;
  const maxAge = seconds(directives, 'max-age');
  const maxStale = seconds(directives, 'max-stale');
  const minFresh = seconds(directives, 'min-fresh');
  if (maxAge !== undefined && age > maxAge) return false;
  if (maxStale !== undefined && age - entry.ttl > maxStale) return false;
  return !(minFresh !== undefined && entry.ttl - age < minFresh);
}

/** Kong's cacheable_response: a configured status and content type, and with cache_control a positive TTL, not private. */
function cacheableResponse(head: ResponseHead, config: ProxyCacheConfig, prepared: Prepared, directives: Directives, now: number): boolean {
  // Only the upstream's answers are cached, never the gateway's own (a failure, another plugin's).
  if (head.source !== 'service' || !prepared.statuses.has(head.status)) return false;
  if (!contentTypeMatches(head.headers['content-type'], prepared.contentTypes)) return false;
  if (!config.cache_control) return true;
  if (directives.private !== undefined || directives['no-store'] !== undefined || directives['no-cache'] !== undefined) return false;
  return resourceTtl(directives, head.headers.expires, now) > 0;
}

/** The answer's headers as text, to be replayed. */
function storedHeaders(headers: OutgoingHttpHeaders): Record<string, string | string[]> {
  const stored: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) stored[name] = Array.isArray(value) ? value.map(String) : String(value);
  }
  return stored;
}

/** Keeps a body chunk while the body stays within MAX_CACHED_BODY; past it the body is let go uncached. */
function collect(response: NonNullable<Pending['response']>, chunk: Buffer): void {
  if (response.tooLarge) return;
  response.size += chunk.length;
  if (response.size <= MAX_CACHED_BODY) return void response.chunks.push(chunk);
  response.tooLarge = true;
  response.chunks = [];
}

/** The stored headers a hit replays, with its own Age, X-Cache-Status and X-Cache-Key. */
function hitHeaders(ctx: AccessContext, config: ProxyCacheConfig, entry: CachedResponse, key: string): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(entry.headers)) {
    if (!HOP_BY_HOP.has(name) && !name.includes('ratelimit-remaining') && !DIAGNOSTIC_HEADERS.includes(name)) headers[name] = value;
  }
  if (shows(ctx, config, 'age')) headers.age = String(nowSeconds() - entry.timestamp);
  if (shows(ctx, config, 'X-Cache-Status')) headers['x-cache-status'] = 'Hit';
  if (shows(ctx, config, 'X-Cache-Key')) headers['x-cache-key'] = key;
  return headers;
}

/**
 * Kong's cache key (kong/plugins/proxy-cache/cache_key.lua): the SHA-256, in hex, of
 * `<prefix>|<method>|<request line>|<query part>|<header part>`, where the prefix is
 * `<consumer id>:<route id>`, the route id alone, or `default`; the request line is nginx's `$request`
 * cut at its `?` (so a request without a query keeps its ` HTTP/1.1`); the query part is every argument,
 * sorted by name (or only `vary_query_params`, in their order), as `name=value`, a bare flag as its name,
 * repeated values sorted and joined by `,`, all joined by `:`; the header part the same over
 * `vary_headers` (nothing without them).
 */
import { createHash } from 'node:crypto';
import { headerValues, MAX_PARAMETERS, parseArgs, requestLine, type AccessContext, type Params } from '../../src/pdk/index.ts';
import type { ProxyCacheConfig } from './schema.ts';

/** Kong's prefix_uuid: an authenticated caller's entries are its own on each route. */
export function prefixOf(consumerId: string | undefined, routeId: string | undefined): string {
  if (consumerId && routeId) return `${consumerId}:${routeId}`;
  return routeId ?? 'default';
}

/** `name=value` for each of `fields` the arguments hold, joined by `:` (Kong's generate_key_from). */
export function keyFrom(args: Params, fields: readonly string[]): string {
  const parts: string[] = [];
  for (const field of fields) {
    const value = args[field];
    if (value === undefined) continue;
    if (Array.isArray(value)) parts.push(`${field}=${value.map(String).sort().join(',')}`);
    else if (value === true) parts.push(field);
    else parts.push(`${field}=${String(value)}`);
  }
  return parts.join(':');
}

/** Kong's params_key: only `vary_query_params` when set, else every argument by name. */
export function paramsKey(args: Params, varyQueryParams: readonly string[] | null | undefined): string {
  return keyFrom(args, varyQueryParams?.length ? varyQueryParams : Object.keys(args).sort());
}

/** nginx's `$request` with Kong's `\?.*` cut: the method, the target as sent, and the protocol only when there is no query. */
function requestLineKey(ctx: AccessContext): string {
  const { target, httpVersion } = requestLine(ctx);
  const query = target.indexOf('?');
  return query === -1 ? `${ctx.method} ${target} HTTP/${httpVersion}` : `${ctx.method} ${target.slice(0, query)}`;
}

/**
 * The request's key under `config`, or undefined when its query cannot be read whole (more arguments
 * than Kong reads): such a request is not cached.
 */
export function cacheKeyOf(ctx: AccessContext, config: ProxyCacheConfig): string | undefined {
  let args: Params;
  try {
    args = parseArgs(ctx.rawQuery, MAX_PARAMETERS);
  } catch {
    return undefined;
  }
  const line = config.ignore_uri_case ? requestLineKey(ctx).toLowerCase() : requestLineKey(ctx);
  const headers = config.vary_headers?.length ? keyFrom(headerArgs(ctx, config.vary_headers), config.vary_headers) : '';
  const text = [prefixOf(ctx.consumer?.id, ctx.route.id), ctx.method, line, paramsKey(args, config.vary_query_params), headers].join('|');
  return createHash('sha256').update(text).digest('hex');
}

/** The values of the named request headers, as Kong's `get_headers()` gives them: one a string, several a list. */
function headerArgs(ctx: AccessContext, names: readonly string[]): Params {
  const out: Params = Object.create(null);
  for (const name of names) {
    const values = headerValues(ctx, name);
    if (values.length > 0) out[name] = values.length === 1 ? values[0] : values;
  }
  return out;
}

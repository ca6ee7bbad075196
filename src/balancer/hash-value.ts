/**
 * What a consistent-hashing upstream hashes a request on (kong/runloop/balancer/init.lua
 * get_value_to_hash): `hash_on`, then `hash_fallback` when the first gives nothing. A missing cookie
 * is made up (a UUID) and handed to the client in Set-Cookie, so its next requests stick.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { HashInput, Upstream } from '../config/types.ts';

/** What hashing reads of a request (the request context has it all). */
export interface HashRequest {
  /** The authenticated consumer, and the credential it authenticated with. */
  readonly consumer: { id: string } | null;
  readonly credential: { id: string } | null;
  readonly clientIp: string;
  readonly headers: IncomingHttpHeaders;
  /** The normalized request path, without the query. */
  readonly path: string;
  readonly rawQuery: string;
  /** Regex path captures of the matched route. */
  readonly match: { readonly captures?: Record<string, string> };
}

export interface HashValue {
  value: string;
  /** A Set-Cookie value for the response, when the cookie was made up. */
  setCookie?: string;
}

/** Kong reads at most this many query arguments (lua_max_uri_args). */
const MAX_QUERY_ARGS = 100;

export function hashValue(upstream: Upstream, request: HashRequest): HashValue {
  if (upstream.hash_on === 'none') return { value: '' };
  const first = read(upstream, upstream.hash_on, 'on', request);
  if (first) return first;
  if (upstream.hash_fallback !== 'none') {
    const fallback = read(upstream, upstream.hash_fallback, 'fallback', request);
    if (fallback) return fallback;
  }
  return { value: '' };
}

function read(upstream: Upstream, input: HashInput, which: 'on' | 'fallback', request: HashRequest): HashValue | undefined {
  let value: string | undefined;
  switch (input) {
    case 'consumer':
      value = request.consumer?.id ?? request.credential?.id;
      break;
    case 'ip':
      value = request.clientIp;
      break;
    case 'header':
      value = headerValue(request.headers, (which === 'on' ? upstream.hash_on_header : upstream.hash_fallback_header)!);
      break;
    case 'cookie':
      return cookieValue(upstream, request.headers);
    case 'path':
      // nginx's $uri, which Kong hashes: the normalized path with every escape decoded.
      value = percentDecode(request.path);
      break;
    case 'query_arg':
      value = queryArg(request.rawQuery, (which === 'on' ? upstream.hash_on_query_arg : upstream.hash_fallback_query_arg)!);
      break;
    case 'uri_capture':
      value = request.match.captures?.[(which === 'on' ? upstream.hash_on_uri_capture : upstream.hash_fallback_uri_capture)!];
      break;
  }
  return value === undefined ? undefined : { value };
}

/** Several headers of one name are one value joined with ", " (as nginx's $http_ variables). */
function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

function cookieValue(upstream: Upstream, headers: IncomingHttpHeaders): HashValue {
  const name = upstream.hash_on_cookie!;
  const found = readCookie(headers.cookie, name);
  if (found !== undefined) return { value: found };
  const value = randomUUID();
  // Kong's attributes, written as Kong writes them ("Same-Site").
  return { value, setCookie: `${name}=${value}; Path=${upstream.hash_on_cookie_path}; Same-Site=Lax; HttpOnly` };
}

function readCookie(header: string | string[] | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of (Array.isArray(header) ? header.join('; ') : header).split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * A query argument as Kong reads it (ngx.req.get_uri_args): an argument without `=` is "true", an
 * argument given several times is its values sorted and joined with ",".
 */
function queryArg(rawQuery: string, name: string): string | undefined {
  const values: string[] = [];
  let count = 0;
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    if (++count > MAX_QUERY_ARGS) break;
    const eq = part.indexOf('=');
    const key = unescape(eq === -1 ? part : part.slice(0, eq));
    if (key === name) values.push(eq === -1 ? 'true' : unescape(part.slice(eq + 1)));
  }
  if (values.length === 0) return undefined;
  return values.length === 1 ? values[0] : values.sort().join(',');
}

/** ngx.unescape_uri: `+` is a space, `%XX` its byte. */
function unescape(text: string): string {
  return percentDecode(text.replaceAll('+', ' '));
}

/** `%XX` escapes decoded (as UTF-8 when they form it, else byte by byte); never throws. */
function percentDecode(text: string): string {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
}

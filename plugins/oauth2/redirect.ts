/**
 * Redirect URIs as Kong composes them: the registered URI's own query (or fragment) arguments merged
 * with ours (ours win), keys sorted, both sides escaped like LuaSocket's `url.escape` (every byte
 * outside [A-Za-z0-9_] as %xx, lower-case hex).
 */
import { parseArgs, type Params } from '../../src/pdk/index.ts';

const URI = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*[^?#]*)(?:\?([^#]*))?(?:#(.*))?$/;

export function luaEscape(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const isPlain = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || byte === 0x5f;
    out += isPlain ? String.fromCharCode(byte) : '%' + byte.toString(16).padStart(2, '0');
  }
  return out;
}

/** Kong's `encode_args`: sorted keys, arrays as repeated keys, `true` as a bare key, `false`/null left out. */
function encodeArgs(args: Params): string {
  const parts: string[] = [];
  for (const key of Object.keys(args).sort()) {
    for (const value of Array.isArray(args[key]) ? (args[key] as unknown[]) : [args[key]]) {
      if (value === true) parts.push(luaEscape(key));
      else if (value !== false && value !== null && value !== undefined) parts.push(`${luaEscape(key)}=${luaEscape(String(value))}`);
    }
  }
  return parts.join('&');
}

/** The registered URI with `params` added to its query, or to its fragment (implicit grant). */
export function composeRedirectUri(uri: string, params: Params, inFragment: boolean): string {
  const m = URI.exec(uri);
  if (!m) return `${uri}${uri.includes('?') ? '&' : '?'}${encodeArgs(params)}`;
  const [, base, query, fragment] = m;
  if (inFragment) {
    const merged = encodeArgs({ ...parseArgs(fragment ?? ''), ...params });
    return `${base}${query !== undefined ? `?${query}` : ''}#${merged}`;
  }
  const merged = encodeArgs({ ...parseArgs(query ?? ''), ...params });
  return `${base}?${merged}${fragment !== undefined ? `#${fragment}` : ''}`;
}

/**
 * Kong's request-path handling: normalization before matching (kong/tools/uri.lua `normalize(uri, true)` semantics),
 * the re-escaping applied before proxying, and the sanitizing of a stripped postfix.
 */

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const HEX_PAIR = /^[0-9A-Fa-f]{2}$/;

/**
 * Normalizes a raw request path (without its query):
 * - `%XX` escapes of unreserved characters are decoded, all other escapes are upper-cased;
 * - repeated `/` are merged;
 * - `.` and `..` segments are removed (RFC 3986 §5.2.4), never climbing above the root.
 * Decoding happens first, so `%2E%2E` segments are removed like `..` (no traversal past the router).
 * Returns null when the path is not usable: it does not start with `/`, or holds a malformed `%` escape
 * (nginx answers such requests with 400 too).
 */
export function normalizePath(raw: string): string | null {
  if (raw.length === 0 || raw.charCodeAt(0) !== 0x2f /* / */) return null;
  let path = raw;
  if (path.includes('%')) {
    const decoded = decodeUnreserved(path);
    if (decoded === null) return null;
    path = decoded;
  }
  if (path.includes('//')) path = path.replace(/\/{2,}/g, '/');
  if (path.includes('/.')) path = removeDotSegments(path);
  return path;
}

function decodeUnreserved(path: string): string | null {
  let out = '';
  let last = 0;
  for (let i = path.indexOf('%'); i !== -1; i = path.indexOf('%', last)) {
    const hex = path.slice(i + 1, i + 3);
    if (!HEX_PAIR.test(hex)) return null;
    const char = String.fromCharCode(parseInt(hex, 16));
    out += path.slice(last, i) + (UNRESERVED.test(char) ? char : '%' + hex.toUpperCase());
    last = i + 3;
  }
  return out + path.slice(last);
}

function removeDotSegments(path: string): string {
  const segments = path.split('/');
  const kept: string[] = [];
  let trailingSlash = false;
  // segments[0] is the empty string before the leading '/'
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i];
    const isLast = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') kept.pop();
      trailingSlash = isLast; // `/a/b/..` resolves to the directory `/a/`
    } else {
      kept.push(segment);
    }
  }
  if (kept.length === 0) return '/';
  const joined = '/' + kept.join('/');
  return trailingSlash ? joined + '/' : joined;
}

/**
 * Characters Kong leaves as they are when escaping the upstream path: unreserved, reserved, and `%` (escapes
 * are kept); but not `#`, which would end the path and start a fragment the upstream never gets.
 */
const NEEDS_ESCAPE = /[^A-Za-z0-9\-._~!$&'()*+,/:;=?@[\]%]/;
const NEEDS_ESCAPE_GLOBAL = new RegExp(NEEDS_ESCAPE.source, 'g');

/**
 * Escapes a normalized path for the upstream request line, as Kong does before proxying: every character outside the
 * unreserved + reserved sets becomes `%XX`. Node hands raw request bytes over as latin1 characters (one char per byte),
 * so a char code up to 0xFF is one byte; a wider character (only from a decoded source) is escaped as its UTF-8 bytes.
 */
export function escapeUpstreamPath(path: string): string {
  if (!NEEDS_ESCAPE.test(path)) return path;
  return path.replace(NEEDS_ESCAPE_GLOBAL, (char) => {
    const code = char.charCodeAt(0);
    if (code <= 0xff) return '%' + (code < 0x10 ? '0' : '') + code.toString(16).toUpperCase();
    return encodeURIComponent(char);
  });
}

/** After stripping, a postfix that starts with a dot segment must not reach the upstream as one (`/route..` → ``). */
export function sanitizePostfix(postfix: string): string {
  if (postfix === '.' || postfix === '..') return '';
  if (postfix.startsWith('./')) return postfix.slice(2);
  if (postfix.startsWith('../')) return postfix.slice(3);
  return postfix;
}

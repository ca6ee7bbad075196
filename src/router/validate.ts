/** Config-time checks for route paths, hosts and header regexes, with Kong's messages; and the one regex compiler. */
import { createRequire } from 'node:module';
import { types, type Root, type Token } from 'ret';
import { parseHostAddress, splitHostPort } from '../config/hostnames.ts';
import { checkEscapes } from '../config/paths.ts';
import { normalizePath } from './normalize.ts';

/** Characters a prefix path may hold literally: RFC 3986 unreserved + reserved, and `%` for escapes. */
const RFC3986_PATH = /^[A-Za-z0-9\-._~!#$&'()*+,/:;=?@[\]%]*$/;

/**
 * Compiles a route regex (the text after `~`, or after `~*` for header values).
 * Kong runs PCRE (traditional) or Rust regex (ATC); we run JS RegExp, so PCRE's `(?P<name>` is accepted as `(?<name>`
 * and a leading `(?i)` becomes the `i` flag.
 * ReDoS guard: JS RegExp has no match limit (PCRE had LIMIT_MATCH, Rust regex is linear), so a pattern with nested
 * unbounded quantifiers such as `(a+)+` could pin the event loop on one request: such patterns (star height > 1, as
 * safe-regex2 measures it, but counting only unbounded repetitions, so the common optional group `(.*\.)?` passes)
 * are rejected at config time; routes compile once, when the router is built.
 * Returns the RegExp or the reason it was rejected.
 */
export function compileRouteRegex(source: string, options: { anchored: boolean; ignoreCase: boolean }): RegExp | string {
  let pattern = source.replace(/\(\?P</g, '(?<');
  let flags = options.ignoreCase ? 'i' : '';
  if (pattern.startsWith('(?i)')) {
    pattern = pattern.slice(4);
    flags = 'i';
  }
  try {
    new RegExp(pattern, flags); // syntax check on the pattern alone, before wrapping it
  } catch (err) {
    return (err as Error).message;
  }
  if (nestsUnboundedRepetitions(tokenize(pattern), 0)) return 'nested quantifiers can backtrack catastrophically (ReDoS), rewrite the pattern';
  // Anchored at the start only, like PCRE's "a" flag and ATC's prepended `^`.
  return new RegExp(options.anchored ? '^(?:' + pattern + ')' : pattern, flags);
}

/** ret's tokenizer: its CommonJS export is the function itself, which its typings describe as `default`. */
const tokenize = createRequire(import.meta.url)('ret') as (pattern: string) => Root;

/** True when an unbounded repetition (`*`, `+`, `{n,}`) holds another one: the shape that backtracks exponentially. */
function nestsUnboundedRepetitions(token: Root | Token, height: number): boolean {
  if (token.type === types.REPETITION) {
    if (token.max === Infinity || token.max === null) height++;
    if (height > 1) return true;
    return nestsUnboundedRepetitions(token.value, height);
  }
  const nested = 'options' in token && token.options ? token.options : 'stack' in token && token.stack ? [token.stack] : [];
  return nested.some((stack) => stack.some((t) => nestsUnboundedRepetitions(t, height)));
}

/** Kong's `router_path` checks. undefined when the path is fine, else Kong's message. */
export function validateRoutePath(path: string): string | undefined {
  if (typeof path !== 'string') return 'expected a string';
  if (path.includes('//')) return 'must not have empty segments';
  if (!path.startsWith('/') && !path.startsWith('~/')) return 'should start with: / (fixed path) or ~/ (regex path)';
  if (path.startsWith('~')) {
    // A regex is PCRE text, not a URL: Kong checks no escapes in it (`%` is a plain character there).
    const regex = path.slice(1);
    const compiled = compileRouteRegex(regex, { anchored: true, ignoreCase: false });
    return typeof compiled === 'string' ? `invalid regex: '${regex}' (${compiled})` : undefined;
  }
  if (!RFC3986_PATH.test(path)) return `invalid path: '${path}' (characters outside of the reserved list of RFC 3986 found)`;
  const escapeError = checkEscapes(path);
  if (escapeError) return escapeError;
  const normalized = normalizePath(path);
  if (normalized !== path) return `non-normalized path, consider use '${normalized}' instead`;
  return undefined;
}

/** Route `hosts` entry: hostname or IP, at most one `*` as the leftmost or rightmost label, optional `:port`. */
export function validateRouteHost(host: string): string | undefined {
  const { name } = splitHostPort(host);
  const wildcards = name.split('*').length - 1;
  if (wildcards > 1) return 'invalid wildcard: must have at most one wildcard';
  if (wildcards === 1 && !name.startsWith('*.') && !name.endsWith('.*')) {
    return 'invalid wildcard: must be placed at leftmost or rightmost label';
  }
  // Kong checks a wildcard host as if its `*` were a label.
  const parsed = parseHostAddress(host.replace('*', 'abc'));
  if (typeof parsed !== 'string') return undefined;
  return parsed === 'invalid port number' ? parsed : `invalid hostname: ${host}`;
}

/** A route `headers` value: plain values always pass; `~*<re>` must be a safe, valid regex. */
export function validateRouteHeaderValue(value: string): string | undefined {
  if (!value.startsWith('~*')) return undefined;
  const regex = value.slice(2);
  const compiled = compileRouteRegex(regex, { anchored: false, ignoreCase: true });
  return typeof compiled === 'string' ? `invalid regex: '${regex}' (${compiled})` : undefined;
}

/** Config-time checks for route paths, hosts and header regexes, with Kong's messages. */
import { parseHostAddress, splitHostPort } from '../config/hostnames.ts';
import { checkEscapes } from '../config/paths.ts';
import { operatorRegexProblem, type OperatorRegexOptions } from '../operator-regex.ts';
import { normalizePath } from './normalize.ts';

/** Characters a prefix path may hold literally: RFC 3986 unreserved + reserved, and `%` for escapes. */
const RFC3986_PATH = /^[A-Za-z0-9\-._~!#$&'()*+,/:;=?@[\]%]*$/;

/** `~` paths match from the path's start (PCRE's "a" flag, ATC's prepended `^`), not necessarily to its end. */
export const ROUTE_PATH_REGEX: OperatorRegexOptions = { anchored: true, ignoreCase: false };
/** `~*` header values match anywhere in the value, whatever its case. */
export const HEADER_VALUE_REGEX: OperatorRegexOptions = { anchored: false, ignoreCase: true };

/** A route regex's problem, in Kong's words (`invalid regex: '<re>' (...)`), or undefined. */
function routeRegexProblem(regex: string, options: OperatorRegexOptions): string | undefined {
  const problem = operatorRegexProblem(regex, options);
  return problem === undefined ? undefined : `invalid regex: '${regex}' (${problem})`;
}

/** Kong's `router_path` checks. undefined when the path is fine, else Kong's message. */
export function validateRoutePath(path: string): string | undefined {
  if (typeof path !== 'string') return 'expected a string';
  if (path.includes('//')) return 'must not have empty segments';
  if (!path.startsWith('/') && !path.startsWith('~/')) return 'should start with: / (fixed path) or ~/ (regex path)';
  if (path.startsWith('~')) {
    // A regex is PCRE text, not a URL: Kong checks no escapes in it (`%` is a plain character there).
    return routeRegexProblem(path.slice(1), ROUTE_PATH_REGEX);
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

/** A route `headers` value: plain values always pass; `~*<re>` must be a regex the linear-time engine runs. */
export function validateRouteHeaderValue(value: string): string | undefined {
  return value.startsWith('~*') ? routeRegexProblem(value.slice(2), HEADER_VALUE_REGEX) : undefined;
}

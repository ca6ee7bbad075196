/**
 * Which origin a cors config allows, as Kong's handler.lua decides it: no origins or `*` allow all; one
 * plain origin is always answered as configured; otherwise the request's Origin is normalized (scheme,
 * host, port without the scheme's default) and compared with each entry: plain ones by the whole
 * normalized origin, regexes anchored at both ends, against the host alone when the regex has no `:`.
 */
import { compileOperatorRegex, ConfigCompileError, RegexRefusedError, type OperatorRegex } from '../../src/pdk/index.ts';
import { ORIGIN_REGEX, type CorsConfig } from './schema.ts';

/** What configure_origin decides. */
export type OriginRule =
  | { kind: 'any' }
  /** One plain origin: always sent as it is. */
  | { kind: 'fixed'; origin: string }
  | { kind: 'list'; entries: OriginEntry[] };

type OriginEntry = { regex: OperatorRegex; byHost: boolean } | { domain: string };

interface NormalizedOrigin {
  /** scheme://host[:port], the port left out when it is the scheme's default. */
  domain: string;
  host: string;
}

/** An entry that looks like an origin rather than a regex (Kong's test for the direct answer). */
const PLAIN = /^[A-Za-z0-9.:/-]+$/;
const URL_START = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/;
const DEFAULT_PORTS: Record<string, string> = { http: '80', https: '443' };
/** No real origin is longer (scheme, a 253-character host, a port): a longer Origin header matches nothing. */
const MAX_ORIGIN_LENGTH = 512;

/** An instance's rule, made once per configuration (its regexes compiled). */
export function prepareOriginRule(config: CorsConfig): OriginRule {
  const origins = config.origins ?? [];
  if (origins.length === 0 || origins.includes('*')) return { kind: 'any' };
  if (origins.length === 1 && PLAIN.test(origins[0])) return { kind: 'fixed', origin: origins[0] };
  return {
    kind: 'list',
    entries: origins.map((entry, i): OriginEntry => {
      if (PLAIN.test(entry)) return { domain: normalizeOrigin(entry).domain };
      return { regex: anchoredRegex(entry, i), byHost: !entry.includes(':') };
    }),
  };
}

/**
 * Kong anchors user regexes at both ends (it used not to): an explicit ^ or $ is kept meaning the same.
 * The schema checked the entry as written; one that fails only once anchored refuses the configuration.
 */
function anchoredRegex(entry: string, index: number): OperatorRegex {
  const source = (entry.startsWith('^') ? entry.slice(1) : entry) + (entry.endsWith('$') ? '' : '$');
  try {
    return compileOperatorRegex(source, ORIGIN_REGEX);
  } catch (err) {
    if (!(err instanceof RegexRefusedError)) throw err;
    throw new ConfigCompileError(['origins', index], `'${entry}' is not a valid regex (${err.message})`);
  }
}

/** The normalized request origin a list entry matches, or undefined. */
export function matchOrigin(entries: OriginEntry[], origin: string): string | undefined {
  if (origin.length > MAX_ORIGIN_LENGTH) return undefined;
  const normalized = normalizeOrigin(origin);
  for (const entry of entries) {
    const found = 'regex' in entry ? entry.regex.test(entry.byHost ? normalized.host : normalized.domain) : entry.domain === normalized.domain;
    if (found) return normalized.domain;
  }
  return undefined;
}

/** Kong's normalize_origin: without a scheme and host (e.g. `example.test`) the value is kept whole. */
function normalizeOrigin(origin: string): NormalizedOrigin {
  const url = URL_START.exec(origin);
  const authority = url?.[2].slice(url[2].lastIndexOf('@') + 1);
  if (!url || !authority) return { domain: origin, host: origin };
  const scheme = url[1];
  const portAt = authority.lastIndexOf(':');
  const hasPort = portAt !== -1 && !authority.slice(portAt).includes(']');
  const host = hasPort ? authority.slice(0, portAt) : authority;
  let port = hasPort ? authority.slice(portAt + 1) : '';
  if (DEFAULT_PORTS[scheme] === port) port = '';
  return { domain: `${scheme}://${host}${port ? ':' + port : ''}`, host };
}

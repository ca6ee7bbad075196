/**
 * Kong's `upstreams` and `targets` (kong/db/schema/entities/upstreams.lua, targets.lua): fields,
 * defaults, the hashing rules between `hash_on` and `hash_fallback`, the health check records, and
 * the target address normal form (`host:port`, port 8000 when none is given, IPv6 written out in full).
 */
import { parseHostAddress } from './hostnames.ts';
import { checkPathCharacters } from './paths.ts';
import { validateSni } from './hostnames.ts';
import { ENTITY_KEYS, TAGS } from './entities.ts';
import type { ArraySchema, Issue, MapSchema, NumberSchema, RecordSchema, StringSchema } from './schema.ts';

export const ALGORITHMS = ['consistent-hashing', 'least-connections', 'round-robin', 'latency'] as const;
export const HASH_INPUTS = ['none', 'consumer', 'ip', 'header', 'cookie', 'path', 'query_arg', 'uri_capture'] as const;
/** Kong's default port of a target given without one (kong/db/dao/targets.lua). */
export const DEFAULT_TARGET_PORT = 8000;

const SECONDS = (value: number) => ({ type: 'number', between: [0, 65535], default: value }) as const satisfies NumberSchema;
const ONE_BYTE = (value: number) => ({ type: 'integer', between: [0, 255], default: value }) as const satisfies NumberSchema;
const HTTP_STATUSES = (statuses: number[]) =>
  ({
    type: 'array',
    elements: { type: 'integer', between: [100, 999] },
    default: statuses,
  }) as const satisfies ArraySchema;

/** Kong's header_name: the characters nginx accepts in a header name. */
export function checkHeaderName(name: string): string | undefined {
  return /^[a-zA-Z0-9_-]+$/.test(name) ? undefined : `bad header name '${name}', allowed characters are A-Z, a-z, 0-9, '_', and '-'`;
}

/** Kong's cookie_name: an RFC 7230 token. */
function checkCookieName(name: string): string | undefined {
  return /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)
    ? undefined
    : 'contains one or more invalid characters. ASCII control characters (0-31;127), space, tab and the characters ()<>@,;:\\"/?={}[] are not allowed.';
}

/** Kong's `path` typedef: starts with `/`, no empty segment, RFC 3986 characters. */
function checkProbePath(path: string): string | undefined {
  if (!path.startsWith('/')) return 'should start with: /';
  if (path.includes('//')) return 'must not have empty segments';
  return checkPathCharacters(path);
}

/** An upstream's name is the host a service points at: a host name, never an address, never a port. */
function checkUpstreamName(name: string): string | undefined {
  const parsed = parseHostAddress(name);
  if (typeof parsed === 'string') return `Invalid name ('${name}'); must be a valid hostname`;
  if (parsed.type !== 'name') return `Invalid name ('${name}'); no ip addresses allowed`;
  if (parsed.port !== -1) return `Invalid name ('${name}'); no port allowed`;
  // Kong's normalize_ip takes a name made only of digits and dots for a (bad) address.
  return /^[\d.]+$/.test(name) ? `Invalid name ('${name}'); must be a valid hostname` : undefined;
}

function checkHostWithOptionalPort(host: string): string | undefined {
  const parsed = parseHostAddress(host);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** Probe header values go on the wire as written: a line break would start another header. */
const checkHeaderValue = (value: string) => (/[\r\n\0]/.test(value) ? 'must not contain line breaks' : undefined);

const HEADERS = {
  type: 'map',
  keys: { type: 'string', custom: checkHeaderName },
  values: { type: 'array', elements: { type: 'string', custom: checkHeaderValue } },
} as const satisfies MapSchema;

function activeChecks() {
  return {
    type: 'record',
    fields: {
      type: { type: 'string', one_of: ['tcp', 'http', 'https', 'grpc', 'grpcs'], default: 'http' },
      timeout: SECONDS(1),
      concurrency: { type: 'integer', between: [1, 2 ** 31], default: 10 },
      http_path: { type: 'string', len_min: 1, custom: checkProbePath, default: '/' },
      // A fully qualified name may end with its root dot.
      https_sni: { type: 'string', custom: (sni) => validateSni(sni.replace(/\.$/, '')) },
      https_verify_certificate: { type: 'boolean', default: true },
      headers: HEADERS,
      healthy: {
        type: 'record',
        fields: { interval: SECONDS(0), http_statuses: HTTP_STATUSES([200, 302]), successes: ONE_BYTE(0) },
      },
      unhealthy: {
        type: 'record',
        fields: {
          interval: SECONDS(0),
          http_statuses: HTTP_STATUSES([429, 404, 500, 501, 502, 503, 504, 505]),
          tcp_failures: ONE_BYTE(0),
          timeouts: ONE_BYTE(0),
          http_failures: ONE_BYTE(0),
        },
      },
    },
  } as const satisfies RecordSchema;
}

function passiveChecks() {
  return {
    type: 'record',
    fields: {
      type: { type: 'string', one_of: ['tcp', 'http', 'https', 'grpc', 'grpcs'], default: 'http' },
      healthy: {
        type: 'record',
        fields: {
          http_statuses: HTTP_STATUSES([200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308]),
          successes: ONE_BYTE(0),
        },
      },
      unhealthy: {
        type: 'record',
        fields: {
          http_statuses: HTTP_STATUSES([429, 500, 503]),
          tcp_failures: ONE_BYTE(0),
          timeouts: ONE_BYTE(0),
          http_failures: ONE_BYTE(0),
        },
      },
    },
  } as const satisfies RecordSchema;
}

const HASH_INPUT = { type: 'string', one_of: HASH_INPUTS, default: 'none' } as const satisfies StringSchema;
const PARAMETER = { type: 'string', len_min: 1 } as const satisfies StringSchema;

export const upstreamSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    name: { type: 'string', required: true, custom: checkUpstreamName },
    algorithm: { type: 'string', one_of: ALGORITHMS, default: 'round-robin' },
    hash_on: HASH_INPUT,
    hash_fallback: HASH_INPUT,
    hash_on_header: { type: 'string', custom: checkHeaderName },
    hash_fallback_header: { type: 'string', custom: checkHeaderName },
    hash_on_cookie: { type: 'string', custom: checkCookieName },
    hash_on_cookie_path: { type: 'string', custom: checkProbePath, default: '/' },
    hash_on_query_arg: PARAMETER,
    hash_fallback_query_arg: PARAMETER,
    hash_on_uri_capture: PARAMETER,
    hash_fallback_uri_capture: PARAMETER,
    slots: { type: 'integer', between: [10, 2 ** 16], default: 10000 },
    healthchecks: {
      type: 'record',
      fields: { active: activeChecks(), passive: passiveChecks(), threshold: { type: 'number', between: [0, 100], default: 0 } },
    },
    tags: TAGS,
    host_header: { type: 'string', custom: checkHostWithOptionalPort },
    client_certificate: { type: 'any' },
    use_srv_name: { type: 'boolean', default: false },
  },
  entity_checks: [checkHashing],
} as const satisfies RecordSchema;

/**
 * Kong's shorthands between `algorithm` and `hash_on`, applied before validation as Kong does:
 * least-connections and latency hash on nothing; a `hash_on` other than none makes the upstream
 * consistent-hashing, and `hash_on: none` makes it round-robin.
 */
export function applyAlgorithmShorthands(raw: Record<string, any>): Record<string, any> {
  const out = { ...raw };
  if (out.algorithm === 'least-connections' || out.algorithm === 'latency') out.hash_on = null;
  if (out.hash_on === null) out.hash_on = 'none';
  else if (out.hash_on === 'none') out.algorithm = 'round-robin';
  else if (typeof out.hash_on === 'string') out.algorithm = 'consistent-hashing';
  return out;
}

interface Conditional {
  field: 'hash_on' | 'hash_fallback';
  is: string;
  then: string;
  /** Required when absent from `allowed`. */
  allowed?: readonly string[];
}

/** Kong's conditional entity checks between hash_on, hash_fallback and their parameters. */
const CONDITIONALS: Conditional[] = [
  { field: 'hash_on', is: 'header', then: 'hash_on_header' },
  { field: 'hash_fallback', is: 'header', then: 'hash_fallback_header' },
  { field: 'hash_on', is: 'cookie', then: 'hash_on_cookie' },
  { field: 'hash_fallback', is: 'cookie', then: 'hash_on_cookie' },
  { field: 'hash_on', is: 'none', then: 'hash_fallback', allowed: ['none'] },
  { field: 'hash_on', is: 'cookie', then: 'hash_fallback', allowed: ['none'] },
  { field: 'hash_on', is: 'consumer', then: 'hash_fallback', allowed: HASH_INPUTS.filter((h) => h !== 'consumer') },
  { field: 'hash_on', is: 'ip', then: 'hash_fallback', allowed: HASH_INPUTS.filter((h) => h !== 'ip') },
  { field: 'hash_on', is: 'path', then: 'hash_fallback', allowed: HASH_INPUTS.filter((h) => h !== 'path') },
  { field: 'hash_on', is: 'query_arg', then: 'hash_on_query_arg' },
  { field: 'hash_fallback', is: 'query_arg', then: 'hash_fallback_query_arg' },
  { field: 'hash_on', is: 'uri_capture', then: 'hash_on_uri_capture' },
  { field: 'hash_fallback', is: 'uri_capture', then: 'hash_fallback_uri_capture' },
];

const DISTINCT: [string, string][] = [
  ['hash_on_header', 'hash_fallback_header'],
  ['hash_on_query_arg', 'hash_fallback_query_arg'],
  ['hash_on_uri_capture', 'hash_fallback_uri_capture'],
];

function checkHashing(u: Record<string, any>): Issue[] {
  const issues: Issue[] = [];
  for (const c of CONDITIONALS) {
    if (u[c.field] !== c.is) continue;
    const value = u[c.then];
    const message = c.allowed
      ? c.allowed.includes(value) ? undefined : `expected one of: ${c.allowed.join(', ')}`
      : value === undefined || value === null ? 'required field missing' : undefined;
    if (!message) continue;
    issues.push({ path: [c.then], message });
    issues.push({ path: [], message: `failed conditional validation given value of field '${c.field}'` });
  }
  for (const [a, b] of DISTINCT) {
    if (u[a] != null && u[a] === u[b]) issues.push({ path: [], message: `values of these fields must be distinct: '${a}', '${b}'` });
  }
  return issues;
}

export const targetSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    upstream: { type: 'any' },
    target: { type: 'string', required: true, custom: (t) => (typeof formatTarget(t) === 'string' ? undefined : invalidTarget(t)) },
    weight: { type: 'integer', between: [0, 65535], default: 100 },
    tags: TAGS,
  },
} as const satisfies RecordSchema;

function invalidTarget(target: string): string {
  return `Invalid target ('${target}'); not a valid hostname or ip address`;
}

export interface TargetAddress {
  /** The host to connect to: a name, an IPv4 address or an IPv6 address (without brackets). */
  host: string;
  port: number;
  type: 'name' | 'ipv4' | 'ipv6';
}

/** A target's normal form as Kong stores it (`host:port`, `[ipv6]:port`), or null when it is not an address. */
export function formatTarget(target: string): string | null {
  const address = parseTarget(target);
  if (!address) return null;
  const host = address.type === 'ipv6' ? `[${address.host}]` : address.host;
  return `${host}:${address.port}`;
}

/** The host, port (8000 when absent) and kind of a target string. */
export function parseTarget(target: string): TargetAddress | null {
  const parsed = parseHostAddress(target);
  if (typeof parsed === 'string') return null;
  const port = parsed.port === -1 ? DEFAULT_TARGET_PORT : parsed.port;
  if (parsed.type === 'ipv6') {
    const bare = target.startsWith('[') ? target.slice(1, target.indexOf(']')) : target;
    return { host: expandIpv6(bare), port, type: 'ipv6' };
  }
  const host = parsed.port === -1 ? target : target.slice(0, target.lastIndexOf(':'));
  return { host, port, type: parsed.type };
}

/** An IPv6 address with all eight groups of four hex digits, as Kong's normalize_ipv6 writes it. */
export function expandIpv6(address: string): string {
  const [head, tail] = address.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail === undefined ? [] : tail ? tail.split(':') : [];
  const missing = tail === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array(missing).fill('0'), ...right].map((g) => g.padStart(4, '0')).join(':');
}

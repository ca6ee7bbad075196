/** Schemas of the core entities and of the `gateway:` block, with Kong's defaults and messages. */
import { availableParallelism } from 'node:os';
import { isCidr, validateServiceHost, validateSni } from './hostnames.ts';
import { checkPathCharacters } from './paths.ts';
import { atLeastOneOf, describedAs, type ArraySchema, type FieldSchema, type Issue, type NumberSchema, type RecordSchema, type StringSchema } from './schema.ts';

const TIMEOUT = { type: 'integer', between: [1, 2 ** 31 - 2], default: 60000 } as const satisfies NumberSchema;
export const TAGS = { type: 'set', elements: { type: 'string', len_min: 1 } } as const satisfies ArraySchema;
/**
 * `created_at` / `updated_at`, unix seconds: what a file exported from a Kong database carries (a fraction
 * included, as old exports' targets have), shown by the admin API as given.
 */
export const TIMESTAMP = { type: 'number', between: [0, 2 ** 40] } as const satisfies NumberSchema;
/** Kong's `ttl` of the entities whose DAO has `ttl = true` (seconds; 0 = never expires), as typedefs.ttl bounds it. */
export const TTL = { type: 'integer', between: [0, 100_000_000] } as const satisfies NumberSchema;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const ID = { type: 'string', match: UUID_RE, match_message: 'expected a valid UUID' } as const satisfies StringSchema;
/** The fields every Kong entity has: its id, and the timestamps a database export carries. */
export const ENTITY_KEYS = { id: ID, created_at: TIMESTAMP, updated_at: TIMESTAMP } as const satisfies Record<string, FieldSchema>;

/**
 * A plugin entity that belongs to a consumer (a credential, an acl), as the loader and the admin API
 * keep it: the fields its schema gives (`Infer<typeof schema>`), the id and creation time every Kong
 * DAO adds, and its consumer.
 */
export type ConsumerChild<Fields> = Fields & { id: string; created_at: number; consumer: { id: string } };

/**
 * Kong's admin rule for `/{entity}/{id or endpoint key}` (kong/api/endpoints.lua): a UUID-shaped key
 * names an id, and only an id; anything else names the endpoint key (username, client_id, ...).
 */
export function isUuid(key: string): boolean {
  return UUID_RE.test(key);
}

/** RFC 9110 §5.5 field content that Node sends as it is: no controls, nothing above U+00FF, no outer whitespace. */
const HEADER_VALUE = /^[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/;

/**
 * Why a value the gateway will send upstream as a header (a consumer's username, a token's user id or
 * scope) cannot be one, or undefined when it can. Refused where it is set, not where it is used: a value
 * with CR/LF would fail every request it is sent on, and one with outer whitespace would reach the
 * upstream trimmed, as another identity.
 */
export function headerValueProblem(value: string): string | undefined {
  return HEADER_VALUE.test(value)
    ? undefined
    : 'must be usable as an HTTP header value: no control characters, no characters above U+00FF, no leading or trailing whitespace';
}
/** Kong's utf8 name: alphanumerics and `.-_~` in the ASCII range, any character beyond it. */
const NAME = {
  type: 'string',
  len_min: 1,
  custom: (v) => (/^[A-Za-z0-9.\-_~\u0080-\u{10FFFF}]+$/u.test(v) ? undefined : `invalid value '${v}': the only accepted ascii characters are alphanumerics or ., -, _, and ~`),
} as const satisfies StringSchema;
/** Kong's typedefs.path (a service's `path`): RFC 3986 characters only, well-formed `%XX` escapes. */
function checkPath(path: string): string | undefined {
  if (path.includes('//')) return 'must not have empty segments';
  if (!path.startsWith('/')) return 'should start with: /';
  return checkPathCharacters(path);
}
export const PATH = { type: 'string', len_min: 1, custom: checkPath } as const satisfies StringSchema;

/** Kong's typedefs.ip_or_cidr. */
export const IP_OR_CIDR = { type: 'string', custom: (v) => (isCidr(v) ? undefined : `invalid ip or cidr range: '${v}'`) } as const satisfies StringSchema;

/** Kong's header-name rule (kong/tools/http.lua validate_header_name), as its typedefs.header_name. */
export function headerNameProblem(name: string): string | undefined {
  return /^[a-zA-Z0-9-_]+$/.test(name) ? undefined : `bad header name '${name}', allowed characters are A-Z, a-z, 0-9, '_', and '-'`;
}
export const HEADER_NAME = { type: 'string', len_min: 1, custom: headerNameProblem } as const satisfies StringSchema;

/** Kong's stream protocols: a Kong export may hold them; they are accepted and not proxied. */
export const STREAM_PROTOCOLS = ['tcp', 'tls', 'udp', 'tls_passthrough'] as const;
export const SERVICE_PROTOCOLS = ['grpc', 'grpcs', 'http', 'https', 'ws', 'wss', ...STREAM_PROTOCOLS] as const;
export const ROUTE_PROTOCOLS = ['grpc', 'grpcs', 'http', 'https', 'ws', 'wss', ...STREAM_PROTOCOLS] as const;
/** Upstream TLS settings apply to these service protocols (Kong: https and tls; here also grpcs and wss). */
const TLS_SERVICE_PROTOCOLS = ['https', 'grpcs', 'wss', 'tls'];

export const serviceSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    name: NAME,
    url: { type: 'string' },
    protocol: { type: 'string', one_of: SERVICE_PROTOCOLS, default: 'http' },
    host: { type: 'string', len_min: 1, custom: validateServiceHost, required: true },
    port: { type: 'integer', between: [0, 65535], default: 80 },
    path: PATH,
    retries: { type: 'integer', between: [0, 32767], default: 5 },
    connect_timeout: TIMEOUT,
    write_timeout: TIMEOUT,
    read_timeout: TIMEOUT,
    tls_verify: { type: 'boolean' },
    /** Most intermediate certificates allowed between the upstream's certificate and a trusted one. */
    tls_verify_depth: { type: 'integer', between: [0, 64] },
    /** Ids of the `ca_certificates` the upstream's certificate is verified against (instead of the system's). */
    ca_certificates: { type: 'array', elements: ID },
    /** The certificate presented to the upstream (mTLS). */
    client_certificate: { type: 'any' },
    enabled: { type: 'boolean', default: true },
    tags: TAGS,
  },
  entity_checks: [describedAs(serviceProtocolConditionals(), checkServiceProtocolFields)],
} as const satisfies RecordSchema;

/** Fields Kong allows only with some protocols: no `path` for gRPC, TLS settings only for TLS upstreams. */
/** Kong's conditionals that checkServiceProtocolFields implements (kong/db/schema/entities/services.lua). */
function serviceProtocolConditionals(): Record<string, unknown>[] {
  const nullUnless = (then_field: string) => ({
    conditional: { if_field: 'protocol', if_match: { not_one_of: ['https', 'tls'] }, then_field, then_match: { eq: null } },
  });
  return [
    { conditional: { if_field: 'protocol', if_match: { one_of: ['tcp', 'tls', 'udp', 'grpc', 'grpcs'] }, then_field: 'path', then_match: { eq: null } } },
    ...['client_certificate', 'tls_verify', 'tls_verify_depth', 'ca_certificates'].map(nullUnless),
  ];
}

function checkServiceProtocolFields(s: Record<string, any>): Issue[] {
  const issues: Issue[] = [];
  const mustBeNull = (field: string) => issues.push({ path: [field], message: 'value must be null' });
  if (['grpc', 'grpcs', ...STREAM_PROTOCOLS].includes(s.protocol) && s.path != null) mustBeNull('path');
  if (!TLS_SERVICE_PROTOCOLS.includes(s.protocol)) {
    for (const field of ['tls_verify', 'tls_verify_depth', 'ca_certificates', 'client_certificate']) if (s[field] != null) mustBeNull(field);
  }
  return issues;
}

const protocolGroups = [['http', 'https'], ['grpc', 'grpcs'], ['ws', 'wss'], ['tcp', 'tls', 'udp'], ['tls_passthrough']];

function checkProtocolGroups(protocols: string[]): Issue[] {
  const used = protocolGroups.filter((g) => g.some((p) => protocols.includes(p)));
  if (used.length <= 1) return [];
  const sets = protocolGroups.map((g) => `(${g.map((p) => `'${p}'`).join(', ')})`).join(', ');
  return [{ path: ['protocols'], message: `these sets are mutually exclusive: ${sets}` }];
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0);
}

export function isStreamRoute(protocols: readonly string[]): boolean {
  return protocols.some((p) => (STREAM_PROTOCOLS as readonly string[]).includes(p));
}

/** Kong's stream route rules: at least one of sources, destinations, snis; tls_passthrough needs snis. */
function checkStreamRouteFields(r: Record<string, any>): Issue[] {
  const issues: Issue[] = [];
  for (const field of ['methods', 'hosts', 'paths', 'headers']) {
    if (present(r[field])) issues.push({ path: [field], message: `cannot set '${field}' when 'protocols' is 'tcp', 'tls', 'tls_passthrough' or 'udp'` });
  }
  if (r.protocols.includes('tls_passthrough') && !present(r.snis)) issues.push({ path: [], message: "must set snis when 'protocols' is 'tls_passthrough'" });
  else if (!['sources', 'destinations', 'snis'].some((f) => present(r[f]))) {
    issues.push({ path: [], message: "must set one of 'sources', 'destinations', 'snis' when 'protocols' is 'tcp', 'tls' or 'udp'" });
  }
  return issues;
}

function checkRouteFields(r: Record<string, any>): Issue[] {
  const protocols: string[] = r.protocols;
  if (isStreamRoute(protocols)) return checkStreamRouteFields(r);
  const isGrpc = protocols.some((p) => p === 'grpc' || p === 'grpcs');
  const tls = protocols.some((p) => p === 'https' || p === 'grpcs' || p === 'wss');
  const issues: Issue[] = [];
  if (isGrpc) {
    if (present(r.methods)) issues.push({ path: ['methods'], message: "cannot set 'methods' when 'protocols' is 'grpc' or 'grpcs'" });
    if (r.strip_path === true) issues.push({ path: ['strip_path'], message: "cannot set 'strip_path' when 'protocols' is 'grpc' or 'grpcs'" });
  }
  if (present(r.snis) && !tls) issues.push({ path: ['snis'], message: "'snis' can only be set when 'protocols' is 'grpcs', 'https' or 'wss'" });
  const fields = isGrpc ? ['hosts', 'headers', 'paths'] : ['methods', 'hosts', 'headers', 'paths'];
  if (tls) fields.push('snis');
  if (!fields.some((f) => present(r[f]))) {
    const proto = protocols.includes('https') ? 'https' : protocols.includes('grpcs') ? 'grpcs' : protocols.includes('wss') ? 'wss' : protocols[0];
    issues.push({ path: [], message: `must set one of ${fields.map((f) => `'${f}'`).join(', ')} when 'protocols' is '${proto}'` });
  }
  for (const field of ['sources', 'destinations']) {
    if (present(r[field])) issues.push({ path: [field], message: `cannot set '${field}' when 'protocols' is '${protocols.join("', '")}'` });
  }
  if (r.headers && Object.keys(r.headers).some((h) => h.toLowerCase() === 'host')) {
    issues.push({ path: ['headers'], message: "cannot contain 'host' header, which must be specified in the 'hosts' attribute" });
  }
  return issues;
}

type Check = (value: string) => string | undefined;

/** A stream route's `sources` / `destinations` entry: an address or CIDR range, and/or a port. */
const ENDPOINT = {
  type: 'record',
  fields: {
    ip: IP_OR_CIDR,
    port: { type: 'integer', between: [0, 65535] },
  },
  entity_checks: [atLeastOneOf(['ip', 'port'])],
} as const satisfies RecordSchema;

/** The route schema, with the router's checks of paths, hosts and header values; its literal types kept. */
export function routeSchema(validatePath: Check, validateHost: Check, validateHeaderValue: Check) {
  return {
    type: 'record',
    fields: {
      ...ENTITY_KEYS,
      name: NAME,
      protocols: { type: 'set', elements: { type: 'string', one_of: ROUTE_PROTOCOLS }, len_min: 1, default: ['http', 'https'] },
      methods: { type: 'set', elements: { type: 'string', len_min: 1, match: /^[A-Z]+$/ } },
      hosts: { type: 'array', elements: { type: 'string', len_min: 1, custom: validateHost } },
      paths: { type: 'array', elements: { type: 'string', len_min: 1, custom: validatePath } },
      headers: { type: 'map', values: { type: 'array', elements: { type: 'string', len_min: 1, custom: validateHeaderValue }, len_min: 1 } },
      snis: { type: 'set', elements: { type: 'string', len_min: 1, custom: validateSni } },
      sources: { type: 'set', elements: ENDPOINT },
      destinations: { type: 'set', elements: ENDPOINT },
      strip_path: { type: 'boolean' },
      preserve_host: { type: 'boolean', default: false },
      regex_priority: { type: 'integer', default: 0 },
      path_handling: { type: 'string', one_of: ['v0', 'v1'], default: 'v0' },
      https_redirect_status_code: { type: 'integer', custom: (c) => ([426, 301, 302, 307, 308].includes(c) ? undefined : 'expected one of: 426, 301, 302, 307, 308'), default: 426 },
      request_buffering: { type: 'boolean', default: true },
      response_buffering: { type: 'boolean', default: true },
      /** The service id, or null for a route that only plugins answer. */
      service: { type: 'any' },
      tags: TAGS,
    },
    entity_checks: [(r) => checkProtocolGroups(r.protocols), checkRouteFields],
  } as const satisfies RecordSchema;
}

export const consumerSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    // Both are sent upstream as X-Consumer-Username and X-Consumer-Custom-ID.
    username: { type: 'string', len_min: 1, custom: headerValueProblem },
    custom_id: { type: 'string', len_min: 1, custom: headerValueProblem },
    tags: TAGS,
  },
  entity_checks: [atLeastOneOf(['custom_id', 'username'])],
} as const satisfies RecordSchema;

export const pluginEntitySchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    name: { type: 'string', required: true },
    instance_name: NAME,
    enabled: { type: 'boolean', default: true },
    protocols: { type: 'set', elements: { type: 'string', one_of: ROUTE_PROTOCOLS }, len_min: 1, default: ['grpc', 'grpcs', 'http', 'https', 'ws', 'wss'] },
    config: { type: 'any' },
    route: { type: 'any' },
    service: { type: 'any' },
    consumer: { type: 'any' },
    tags: TAGS,
  },
} as const satisfies RecordSchema;

/** Unquoted-identifier rules, so the name means the same quoted or not; 63 bytes is PostgreSQL's limit. */
const PG_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
export const MAX_WORKER_PROCESSES = 256;

/** Kong's `worker_processes`: `auto` (one per core) or a count. */
function checkWorkerProcesses(value: unknown): string | undefined {
  if (value === 'auto') return undefined;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_WORKER_PROCESSES) return undefined;
  return `expected 'auto' or an integer between 1 and ${MAX_WORKER_PROCESSES}`;
}

/** How many processes `worker_processes` asks for on this machine. */
export function workerCount(setting: number | 'auto'): number {
  return setting === 'auto' ? Math.min(availableParallelism(), MAX_WORKER_PROCESSES) : setting;
}

/**
 * The `gateway:` block (what Kong keeps in kong.conf). A setting with a default is required too, and so
 * are list entries: an explicit null (`log_level:` left empty in YAML) is refused, not run with.
 */
export const nodeSettingsSchema = {
  type: 'record',
  fields: {
    proxy_listen: { type: 'array', elements: { type: 'string', required: true }, default: ['0.0.0.0:8000', '0.0.0.0:8443 ssl http2'], required: true },
    admin_listen: { type: 'array', elements: { type: 'string', required: true }, default: ['127.0.0.1:8001'], required: true },
    ssl_cert: { type: 'string' },
    ssl_cert_key: { type: 'string' },
    data_dir: { type: 'string', len_min: 1, default: './data', required: true },
    trusted_ips: { type: 'array', elements: { type: 'string', required: true }, default: [], required: true },
    log_level: { type: 'string', one_of: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info', required: true },
    access_log: { type: 'boolean', default: true, required: true },
    /** Largest request body the gateway accepts, in bytes (0 = no limit). */
    client_max_body_size: { type: 'integer', between: [0, 2 ** 40], default: 128 * 1024 * 1024, required: true },
    /** Largest total size of request headers, in bytes. */
    max_header_size: { type: 'integer', between: [1024, 1024 * 1024], default: 32 * 1024, required: true },
    /** Idle timeout for downstream connections, ms. */
    client_timeout: { type: 'integer', between: [1000, 2 ** 31 - 2], default: 60000, required: true },
    /** How long SIGTERM waits for in-flight requests before closing connections, ms. */
    shutdown_timeout: { type: 'integer', between: [0, 2 ** 31 - 2], default: 10000, required: true },
    upstream_keepalive_pool_size: { type: 'integer', between: [0, 100000], default: 512, required: true },
    upstream_keepalive_idle_timeout: { type: 'integer', between: [0, 2 ** 31 - 2], default: 60, required: true },
    /** The store: LevelDB under data_dir (one node), or PostgreSQL shared by every node of a cluster. */
    database: { type: 'string', one_of: ['leveldb', 'postgres'], default: 'leveldb', required: true },
    pg_host: { type: 'string', len_min: 1, default: '127.0.0.1', required: true },
    pg_port: { type: 'integer', between: [1, 65535], default: 5432, required: true },
    pg_user: { type: 'string', len_min: 1, default: 'tollgate', required: true },
    pg_password: { type: 'string' },
    pg_database: { type: 'string', len_min: 1, default: 'tollgate', required: true },
    pg_schema: { type: 'string', match: PG_IDENTIFIER, match_message: 'expected a PostgreSQL identifier: a letter or _, then letters, digits or _ (at most 63)', default: 'public', required: true },
    pg_ssl: { type: 'boolean', default: false, required: true },
    pg_ssl_verify: { type: 'boolean', default: true, required: true },
    /** Connections to PostgreSQL each process of the node may open for its queries (plus one for notices). */
    pg_pool_size: { type: 'integer', between: [1, 1000], default: 10, required: true },
    // Left unset, a plugin in use that keeps state in one process brings it down to 1 (ConfigBuilder).
    /** Processes serving this node: 'auto' = one per core. */
    worker_processes: { type: 'any', custom: checkWorkerProcesses, default: 'auto', required: true },
    /** Seconds within which a change made by another process or node reaches this one's caches. */
    db_update_frequency: { type: 'number', between: [0.05, 3600], default: 1, required: true },
    /** Kong's `plugins`: `bundled`, plugin names, or `off`; a plugin not listed cannot be configured. */
    plugins: { type: 'array', elements: { type: 'string', len_min: 1, required: true }, default: ['bundled'], required: true },
  },
  entity_checks: [
    (g) =>
      (g.ssl_cert ? 1 : 0) + (g.ssl_cert_key ? 1 : 0) === 1
        ? [{ path: [g.ssl_cert ? 'ssl_cert_key' : 'ssl_cert'], message: 'ssl_cert and ssl_cert_key must be set together' }]
        : [],
  ],
} as const satisfies RecordSchema;

/**
 * Loads gateway.yaml: parses it keeping node positions, then builds the configuration. The gateway
 * settings, services, routes, consumers and plugins' entities are built here; certificates, upstreams and
 * plugin instances by their own builders. Every entity is validated against its schema, gets Kong's
 * defaults and an id derived from its name, and has its references resolved. Every problem is reported
 * at once, in file order, as FILE:LINE:COL: path.to.field: message (positions: yaml-positions.ts).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { v5 as uuidv5 } from 'uuid';
import { LineCounter, parseDocument, type Document } from 'yaml';
import { ConfigError } from '../errors.ts';
import type { EntityDefinition, PluginRegistry } from '../pdk/types.ts';
import { normalizePath } from '../router/index.ts';
import { resolveReference, type BuildContext, type CoreEntities } from './builder-context.ts';
import { buildTlsEntities, certificateRef, type TlsEntities } from './certificate-builder.ts';
import { isCidr } from './hostnames.ts';
import { consumerSchema, ID, isStreamRoute, nodeSettingsSchema, serviceSchema, TIMESTAMP, TTL } from './entities.ts';
import { CORE_ENTITY_SCHEMAS } from './entity-schemas.ts';
import { withDigests } from '../toolkit/entity-directory.ts';
import { parseListenList } from './listen.ts';
import { PluginBuilder } from './plugin-builder.ts';
import { enabledPlugins } from './plugin-setting.ts';
import { checkProcessModel } from './process-model.ts';
import { formatPath, isPlainObject, unknownField, validate, type Issue, type Path, type RecordSchema } from './schema.ts';
import type { GatewayConfig, NodeSettings, Route, Service, Timestamped, UnstampedEntity, VaultEntity } from './types.ts';
import { buildBalancing } from './upstream-builder.ts';
import { buildVaults, resolveReferences, type Vaults } from './vaults.ts';
import { issuePosition, syntaxErrors, type Position } from './yaml-positions.ts';

/** Kong's namespace for declarative ids. */
const ID_NAMESPACE = 'fd02801f-0957-4a15-a55a-c8d9606f30b5';
const FORMAT_VERSIONS = ['1.1', '2.1', '3.0'];
/** Before 3.0 a path with any other character was a regex (Kong's route_path migration). */
const LEGACY_PLAIN_PATH = /^[a-zA-Z0-9.\-_~/%]*$/;
const CORE_KEYS = new Set([
  '_format_version', '_transform', '_comment', '_ignore', 'gateway', 'services', 'routes', 'consumers', 'plugins',
  'upstreams', 'targets', 'certificates', 'snis', 'ca_certificates', 'vaults',
  // Kong's own settings (the cluster id) in a file exported from its database: nothing to apply here.
  'parameters',
]);
/** decK's metadata keys: decK accepts and ignores them, so a file that works with decK works here too. */
const DECK_METADATA_KEYS = ['_info', '_konnect', '_workspace'];

/**
 * The core entities created through the admin API on a shared store (src/stored-entities.ts): records as
 * the loader keeps them, with their ids and references by id. They join the file's at the top level.
 */
export interface ApiEntities {
  services: Record<string, any>[];
  routes: Record<string, any>[];
  plugins: Record<string, any>[];
  upstreams: Record<string, any>[];
  targets: Record<string, any>[];
  certificates: Record<string, any>[];
  snis: Record<string, any>[];
  ca_certificates: Record<string, any>[];
}

export const API_ENTITY_KINDS = ['services', 'routes', 'plugins', 'upstreams', 'targets', 'certificates', 'snis', 'ca_certificates'] as const;
export type ApiEntityKind = (typeof API_ENTITY_KINDS)[number];

/** A problem of an entity created through the admin API: `path` is within the entity. */
export interface ApiEntityIssue {
  kind: ApiEntityKind;
  id: string;
  path: Path;
  message: string;
}

export type LoadResult = { ok: true; config: GatewayConfig } | { ok: false; errors: ConfigError[]; apiIssues?: ApiEntityIssue[] };

/** The file's text, or why it cannot be read (as a load error). */
export async function readConfigFile(file: string): Promise<{ ok: true; text: string } | { ok: false; errors: ConfigError[] }> {
  try {
    return { ok: true, text: await readFile(resolve(file), 'utf8') };
  } catch (err) {
    return { ok: false, errors: [new ConfigError(file, 1, 1, '', `cannot read the file: ${(err as Error).message}`)] };
  }
}

export async function loadConfigFile(file: string, registry: PluginRegistry, api?: ApiEntities): Promise<LoadResult> {
  const read = await readConfigFile(file);
  if (!read.ok) return read;
  return loadConfigText(read.text, resolve(file), registry, file, api);
}

/**
 * The configuration `text` declares, with `api`'s entities added after the file's (the effective
 * configuration of a node whose store holds some): validated whole, so a reference or a name that only
 * the union breaks is an error too. Errors about `api`'s entities are in `apiIssues` as well.
 */
export function loadConfigText(text: string, absolute: string, registry: PluginRegistry, shownName = absolute, api?: ApiEntities): LoadResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  // Validating what a syntax error left would only add errors about a structure the file does not have.
  if (doc.errors.length > 0) {
    return { ok: false, errors: syntaxErrors(doc, lines, text).map((e) => errorAt(shownName, e.at, e.message)) };
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    // An alias bomb ("billion laughs") is refused while the document is expanded, not while it is parsed.
    return { ok: false, errors: [new ConfigError(shownName, 1, 1, '', `YAML: ${(err as Error).message}`)] };
  }
  const fileCounts = api && isPlainObject(raw) ? withApiEntities(raw, api) : undefined;
  const builder = new ConfigBuilder(registry, dirname(absolute), new Set(fileCounts ? API_ENTITY_KINDS.flatMap((kind) => api![kind]) : []));
  const config = builder.build(raw);
  if (builder.issues.length > 0) {
    const apiIssues = fileCounts ? builder.issues.flatMap((i) => apiIssueOf(i, fileCounts, api!) ?? []) : [];
    // In file order, so an operator can fix them top to bottom.
    const errors = builder.issues.map((i) => toConfigError(i, doc, lines, shownName));
    return { ok: false, errors: errors.sort((a, b) => a.line - b.line || a.col - b.col), apiIssues };
  }
  config.file = absolute;
  config.text = text;
  // Kong's configuration hash: of what the node runs, the admin API's entities included.
  config.hash = createHash('md5').update(text).update(fileCounts ? JSON.stringify(api) : '').digest('hex');
  config.warnings = builder.warnings.map((w) => String(toConfigError(w, doc, lines, shownName)));
  return { ok: true, config };
}

/**
 * Appends `api`'s entities to the file's top-level arrays; returns how many each array held before, so
 * that an issue at an index past them is about an API entity. An array the file got wrong is left so.
 */
function withApiEntities(raw: Record<string, any>, api: ApiEntities): Record<ApiEntityKind, number> {
  const counts = {} as Record<ApiEntityKind, number>;
  for (const kind of API_ENTITY_KINDS) {
    const own = raw[kind] ?? [];
    counts[kind] = Array.isArray(own) ? own.length : Infinity;
    if (Array.isArray(own) && api[kind].length > 0) raw[kind] = [...own, ...api[kind]];
  }
  return counts;
}

function apiIssueOf(issue: Issue, fileCounts: Record<ApiEntityKind, number>, api: ApiEntities): ApiEntityIssue | undefined {
  const [kind, index, ...rest] = issue.path;
  if (!API_ENTITY_KINDS.includes(kind as ApiEntityKind) || typeof index !== 'number') return undefined;
  const entity = api[kind as ApiEntityKind][index - fileCounts[kind as ApiEntityKind]];
  return entity && { kind: kind as ApiEntityKind, id: entity.id, path: rest, message: issue.message };
}

/** Kong's migration of 1.1/2.1 paths: regex-looking ones get the `~` prefix, plain ones are normalized. */
function migrateLegacyPaths(route: Record<string, any>): Record<string, any> {
  if (!Array.isArray(route.paths)) return route;
  const paths = route.paths.map((p: unknown) => {
    if (typeof p !== 'string') return p;
    if (!LEGACY_PLAIN_PATH.test(p)) return '~' + p;
    return normalizePath(p) ?? p;
  });
  return { ...route, paths };
}

function errorAt(file: string, at: Position, message: string): ConfigError {
  return new ConfigError(file, at.line, at.col, at.path, message);
}

function toConfigError(issue: Issue, doc: Document, lines: LineCounter, file: string): ConfigError {
  return errorAt(file, issuePosition(issue, doc, lines), issue.message);
}

class ConfigBuilder implements BuildContext {
  readonly issues: Issue[] = [];
  readonly warnings: Issue[] = [];
  private readonly core: CoreEntities = { services: [], routes: [], consumers: [], streamRoutes: [] };
  private readonly plugins = new PluginBuilder(this, this.core);
  private readonly entities: Record<string, Record<string, any>[]> = {};
  private readonly entityDefs = new Map<string, EntityDefinition>();
  /** The plugins the `plugins` setting enables (all of the registry by default). */
  private enabled: PluginRegistry = new Map();
  private tls: TlsEntities = { certificates: [], snis: [], ca_certificates: [] };
  private vaults: { entities: VaultEntity[]; byPrefix: Vaults } = { entities: [], byPrefix: new Map() };
  /** `_format_version` 1.1 or 2.1: route paths are migrated as Kong does on import. */
  private legacyPaths = false;
  /** `_transform: false` (Kong's exports): plugin entities' values are stored as given, already transformed. */
  private transformEntities = true;
  /** Unique values of plugin entities declared so far, by `<entity>.<field>`, as the file gives them. */
  private readonly declaredValues = new Map<string, Set<string>>();

  private readonly unstamped: UnstampedEntity[] = [];
  private readonly loadedAt = Date.now() / 1000;

  constructor(
    private readonly registry: PluginRegistry,
    private readonly baseDir: string,
    private readonly apiRecords: ReadonlySet<Record<string, any>>,
  ) {}

  fromApi(record: Record<string, any>): boolean {
    return this.apiRecords.has(record);
  }

  stamped<T extends { id: string }>(kind: string, given: Record<string, any>, entity: T): T & Timestamped {
    if (typeof given.created_at === 'number') {
      return { ...entity, created_at: given.created_at, updated_at: given.updated_at ?? given.created_at };
    }
    const stamped = { ...entity, created_at: this.loadTime(kind), updated_at: this.loadTime(kind) };
    this.unstamped.push({ kind, entity: stamped });
    return stamped;
  }

  /** Kong's seconds, to the millisecond for targets (their DAO's `auto_timestamp_ms`). */
  private loadTime(kind: string): number {
    return kind === 'targets' ? Math.round(this.loadedAt * 1000) / 1000 : Math.floor(this.loadedAt);
  }

  issue(path: Path, message: string): void {
    this.issues.push({ path, message });
  }

  warn(path: Path, message: string): void {
    this.warnings.push({ path, message });
  }

  build(raw: unknown): GatewayConfig {
    const empty: GatewayConfig = {
      file: '', text: '', hash: '', gateway: undefined as never, services: [], routes: [], consumers: [], plugins: [], entities: {},
      upstreams: [], targets: [], certificates: [], snis: [], ca_certificates: [], vaults: [], warnings: [], oneProcessBecause: null, unstamped: [],
    };
    if (!isPlainObject(raw)) {
      this.issue([], 'failed parsing declarative configuration: expected an object');
      return empty;
    }
    const gateway = this.buildGateway(raw.gateway);
    this.enabled = enabledPlugins(this.registry, gateway.plugins, (i, message) => this.issue(['gateway', 'plugins', i], message));
    for (const plugin of this.enabled.values()) for (const def of plugin.entities ?? []) this.entityDefs.set(def.name, def);
    for (const key of Object.keys(raw)) {
      if (DECK_METADATA_KEYS.includes(key)) this.warn([key], "decK's metadata: ignored");
      else if (!CORE_KEYS.has(key) && !this.entityDefs.has(key)) this.issues.push(unknownField([key], [...CORE_KEYS, ...this.entityDefs.keys()]));
    }
    if (raw._format_version === undefined) this.issue(['_format_version'], 'required field missing');
    else if (typeof raw._format_version !== 'string') this.issue(['_format_version'], 'expected a string');
    else if (!FORMAT_VERSIONS.includes(raw._format_version)) this.issue(['_format_version'], `expected one of: ${FORMAT_VERSIONS.join(', ')}`);

    this.legacyPaths = ['1.1', '2.1'].includes(String(raw._format_version));
    if (raw._transform !== undefined && typeof raw._transform !== 'boolean') this.issue(['_transform'], 'expected a boolean');
    this.transformEntities = raw._transform !== false;
    this.vaults = buildVaults(raw, this);
    this.tls = buildTlsEntities(raw, this);
    this.eachEntry(raw, 'services', (s, path) => this.addService(s, path));
    this.eachEntry(raw, 'routes', (r, path) => this.addRoute(r, path, r.service === undefined ? null : r.service));
    this.eachEntry(raw, 'consumers', (c, path) => this.addConsumer(c, path));
    this.plugins.queue(raw, {});
    for (const def of this.entityDefs.values()) {
      this.eachEntry(raw, def.name, (e, path) => this.addPluginEntity(def, e, path, undefined));
    }
    const plugins = this.plugins.build(this.registry, this.enabled);
    const explicitWorkers = isPlainObject(raw.gateway) && raw.gateway.worker_processes != null;
    const oneProcessBecause = checkProcessModel(gateway, explicitWorkers, this.registry, { plugins, entities: this.entities }, this);
    const balancing = buildBalancing(raw, this, this.tls.certificates);
    const { services, routes, consumers } = this.core;
    const unstamped = this.unstamped;
    return {
      ...empty,
      gateway,
      services,
      routes,
      consumers,
      plugins,
      entities: this.entities,
      ...this.tls,
      ...balancing,
      vaults: this.vaults.entities,
      oneProcessBecause,
      unstamped,
    };
  }

  eachEntry(container: Record<string, any>, key: string, add: (entry: Record<string, any>, path: Path) => void, base: Path = []): void {
    const list = container[key];
    if (list === undefined || list === null) return;
    if (!Array.isArray(list)) return this.issue([...base, key], 'expected an array');
    list.forEach((entry, i) => {
      if (!isPlainObject(entry)) this.issue([...base, key, i], 'expected a record');
      else add(entry, [...base, key, i]);
    });
  }

  private buildGateway(raw: unknown): NodeSettings {
    const { value, issues } = validate<NodeSettings>(nodeSettingsSchema, raw ?? {}, ['gateway']);
    this.issues.push(...issues);
    for (const key of ['proxy_listen', 'admin_listen'] as const) {
      // An entry that is not a string was reported by the schema; parsing it would throw.
      if (!Array.isArray(value[key]) || !value[key].every((entry) => typeof entry === 'string')) continue;
      for (const e of parseListenList(value[key]).errors) this.issue(['gateway', key, e.index], e.message);
    }
    for (const [i, cidr] of (value.trusted_ips ?? []).entries()) {
      if (typeof cidr === 'string' && !isCidr(cidr)) this.issue(['gateway', 'trusted_ips', i], `invalid ip or cidr range: '${cidr}'`);
    }
    value.data_dir = resolve(this.baseDir, value.data_dir ?? './data');
    if (value.ssl_cert) value.ssl_cert = resolve(this.baseDir, value.ssl_cert);
    if (value.ssl_cert_key) value.ssl_cert_key = resolve(this.baseDir, value.ssl_cert_key);
    value.ssl_cert ??= null;
    value.ssl_cert_key ??= null;
    value.pg_password ??= null;
    return value;
  }

  dereference(record: Record<string, any>, schema: RecordSchema, path: Path): Record<string, any> | undefined {
    return resolveReferences(record, schema, path, this.vaults.byPrefix, this);
  }

  /** Validates a record, with nested child arrays taken out first (they are validated on their own). */
  validateEntity<T>(schema: RecordSchema, raw: Record<string, any>, path: Path, nestedKeys: string[]): T {
    const own = { ...raw };
    for (const k of nestedKeys) delete own[k];
    const { value, issues } = validate<T>(schema, own, path);
    this.issues.push(...issues);
    return value;
  }

  id(given: unknown, name: string): string {
    return typeof given === 'string' && ID.type === 'string' && given.length > 0 ? given : uuidv5(name, ID_NAMESPACE);
  }

  private addService(raw: Record<string, any>, path: Path): void {
    const s = this.validateEntity<Record<string, any>>(serviceSchema, this.expandUrl(raw, path), path, ['routes', 'plugins']);
    const id = this.id(s.id, `services:${s.name ?? `#${path[1]}`}`);
    // A derived id repeats exactly when the name does: one error is enough.
    if (!this.unique('services', 'name', s.name, path, this.core.services)) this.unique('services', 'id', id, path, this.core.services);
    const service: Service = this.stamped('services', s, {
      id,
      name: s.name ?? null,
      protocol: s.protocol,
      host: s.host,
      port: s.port,
      path: s.path ?? null,
      retries: s.retries,
      connect_timeout: s.connect_timeout,
      write_timeout: s.write_timeout,
      read_timeout: s.read_timeout,
      tls_verify: s.tls_verify ?? null,
      tls_verify_depth: s.tls_verify_depth ?? null,
      ca_certificates: this.caCertificates(s.ca_certificates, path),
      client_certificate: certificateRef(s.client_certificate, path, this, this.tls.certificates),
      enabled: s.enabled,
      tags: s.tags ?? null,
    });
    this.core.services.push(service);
    this.eachEntry(raw, 'routes', (r, p) => this.addRoute(r, p, { id }), path);
    this.plugins.queue(raw, { service: id }, path);
  }

  private caCertificates(ids: unknown, path: Path): string[] | null {
    if (!Array.isArray(ids)) return null;
    ids.forEach((id, i) => {
      const site = { at: [...path, 'ca_certificates', i], field: 'ca_certificates', entity: 'ca_certificates', required: false };
      if (typeof id === 'string') resolveReference(id, this.tls.ca_certificates, site, this);
    });
    return ids as string[];
  }

  /** Kong's `url` shorthand: protocol, host, port and path from one URL. */
  private expandUrl(raw: Record<string, any>, path: Path): Record<string, any> {
    if (raw.url === undefined) return raw;
    const { url, ...rest } = raw;
    // After a url error, a placeholder host keeps a second, misleading "host: required field missing" away.
    const unusable = { host: 'invalid', ...rest };
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      this.issue([...path, 'url'], `invalid url: ${url}`);
      return unusable;
    }
    const protocol = parsed.protocol.slice(0, -1);
    const defaultPorts: Record<string, number> = { http: 80, https: 443, ws: 80, wss: 443, grpc: 80, grpcs: 443 };
    if (!(protocol in defaultPorts)) {
      this.issue([...path, 'url'], `invalid url: unsupported protocol '${protocol}'`);
      return unusable;
    }
    const hasPath = /^[a-z]+:\/\/[^/?#]*\/./i.test(url) || /^[a-z]+:\/\/[^/?#]*\/$/i.test(url);
    return {
      ...rest,
      protocol,
      host: parsed.hostname.replace(/^\[|\]$/g, ''),
      port: parsed.port ? Number(parsed.port) : defaultPorts[protocol],
      ...(hasPath ? { path: parsed.pathname } : {}),
    };
  }

  private addRoute(raw: Record<string, any>, path: Path, serviceRef: unknown): void {
    const r = this.validateEntity<Record<string, any>>(CORE_ENTITY_SCHEMAS.routes, this.legacyPaths ? migrateLegacyPaths(raw) : raw, path, ['plugins']);
    // Given, it must name a service: a value naming none (`service: 5`) is an error, not "no service".
    const site = { at: [...path, 'service'], field: 'service', entity: 'services', required: true };
    const serviceId = serviceRef === null || serviceRef === undefined ? undefined : resolveReference(serviceRef, this.core.services, site, this);
    const service = serviceId ? { id: serviceId } : null;
    const protocols: string[] = r.protocols ?? ['http', 'https'];
    if (isStreamRoute(protocols)) return this.skipStreamRoute(r, path);
    const isGrpc = protocols.some((p) => p === 'grpc' || p === 'grpcs');
    const id = this.id(r.id, `routes:${r.name ?? `${service?.id ?? ''}#${formatPath(path)}`}`);
    if (!this.unique('routes', 'name', r.name, path, this.core.routes)) this.unique('routes', 'id', id, path, this.core.routes);
    const headers = r.headers
      ? Object.fromEntries(Object.entries(r.headers as Record<string, string[]>).map(([k, v]) => [k.toLowerCase(), v]))
      : null;
    const route: Route = this.stamped('routes', r, {
      id,
      name: r.name ?? null,
      protocols: protocols as Route['protocols'],
      methods: r.methods ?? null,
      hosts: r.hosts ?? null,
      paths: r.paths ?? null,
      headers,
      snis: r.snis ?? null,
      strip_path: r.strip_path ?? !isGrpc,
      preserve_host: r.preserve_host,
      regex_priority: r.regex_priority,
      path_handling: r.path_handling,
      https_redirect_status_code: r.https_redirect_status_code,
      request_buffering: r.request_buffering,
      response_buffering: r.response_buffering,
      service,
      tags: r.tags ?? null,
    });
    this.core.routes.push(route);
    this.plugins.queue(raw, { route: id, service: null }, path);
  }

  private skipStreamRoute(r: Record<string, any>, path: Path): void {
    this.core.streamRoutes.push({ id: this.id(r.id, `routes:${r.name ?? `#${formatPath(path)}`}`), name: r.name ?? null });
    this.warn(path, `a ${r.protocols.join('/')} route is accepted but not proxied: this gateway serves HTTP, gRPC and WebSocket only`);
  }

  private addConsumer(raw: Record<string, any>, path: Path): void {
    const nested = ['plugins', ...[...this.entityDefs.values()].filter((d) => d.parent?.entity === 'consumers').map((d) => d.name)];
    const c = this.validateEntity<Record<string, any>>(consumerSchema, raw, path, nested);
    const id = this.id(c.id, `consumers:${c.username ?? ''}:${c.custom_id ?? ''}`);
    const takenUsername = this.unique('consumers', 'username', c.username, path, this.core.consumers);
    const takenCustomId = this.unique('consumers', 'custom_id', c.custom_id, path, this.core.consumers);
    if (!takenUsername && !takenCustomId) this.unique('consumers', 'id', id, path, this.core.consumers);
    this.core.consumers.push(this.stamped('consumers', c, { id, username: c.username ?? null, custom_id: c.custom_id ?? null, tags: c.tags ?? null }));
    this.plugins.queue(raw, { consumer: id }, path);
    for (const def of this.entityDefs.values()) {
      if (def.parent?.entity !== 'consumers') continue;
      this.eachEntry(raw, def.name, (e, pp) => this.addPluginEntity(def, e, pp, id), path);
    }
  }

  private addPluginEntity(def: EntityDefinition, given: Record<string, any>, path: Path, parentId: string | undefined): void {
    const raw = this.dereference(given, def.schema, path);
    if (!raw) return;
    const parent = def.parent;
    const fields = parent && parentId === undefined ? { ...def.schema.fields, [parent.field]: { type: 'any' as const } } : def.schema.fields;
    // Kong's DAOs give every entity `created_at`, and `ttl` to those declared `ttl = true`.
    const daoFields = { id: ID, created_at: TIMESTAMP, ...(def.ttl ? { ttl: TTL } : {}) };
    const e = this.validateEntity<Record<string, any>>({ ...def.schema, fields: { ...daoFields, ...fields } }, raw, path, []);
    if (parent) {
      const site = { at: [...path, parent.field], field: parent.field, entity: parent.entity, required: parent.required !== false };
      const resolvedId = parentId ?? resolveReference(raw[parent.field], this.core[parent.entity], site, this);
      if (resolvedId) e[parent.field] = { id: resolvedId };
    }
    const list = (this.entities[def.name] ??= []);
    const endpoint = def.endpointKey ? e[def.endpointKey] : undefined;
    e.id = this.id(e.id, `${def.name}:${endpoint ?? `${parentId ?? ''}#${formatPath(path)}`}`);
    let taken = false;
    for (const field of [...(def.endpointKey ? [def.endpointKey] : []), ...(def.unique ?? [])])
      taken ||= this.declaredTwice(def.name, field, e[field], e[field], path);
    if (def.uniqueInParent && e[def.parent?.field ?? '']?.id) {
      const field = def.uniqueInParent;
      taken ||= this.declaredTwice(def.name, field, e[field], `${e[def.parent!.field].id}/${e[field]}`, path);
    }
    if (!taken) this.unique(def.name, 'id', e.id, path, list);
    const transformed = this.transformEntities && def.transform ? def.transform(e) : e;
    const record = withDigests(def, transformed);
    list.push(def.keptByCore ? this.createdAt(def.name, record) : record);
  }

  /**
   * An entity the core keeps as Kong's DAOs do (a credential) has Kong's `created_at` alone: the file's,
   * else as `stamped` gives it. Other plugin entities keep times of their own (a meter's, a plan's).
   */
  private createdAt(kind: string, record: Record<string, any>): Record<string, any> {
    if (typeof record.created_at === 'number') return record;
    const stamped = { ...record, created_at: this.loadTime(kind) };
    this.unstamped.push({ kind, entity: stamped as UnstampedEntity['entity'] });
    return stamped;
  }

  /** Reports a unique value of a plugin entity that an earlier entry declared; true when it did. */
  private declaredTwice(type: string, field: string, shown: unknown, value: unknown, path: Path): boolean {
    if (typeof value !== 'string' && typeof value !== 'number') return false;
    let values = this.declaredValues.get(`${type}.${field}`);
    if (!values) this.declaredValues.set(`${type}.${field}`, (values = new Set()));
    if (!values.has(String(value))) {
      values.add(String(value));
      return false;
    }
    // A digested value (an API key) is a secret: the message names the field only.
    const what = this.entityDefs.get(type)?.digested?.includes(field) ? field : `${field} set to '${shown}'`;
    this.issue(path, `uniqueness violation: '${type}' entity with ${what} already declared`);
    return true;
  }

  /** Reports a value already taken in `pool`; true when it did. */
  unique(type: string, field: string, value: unknown, path: Path, pool: Record<string, any>[]): boolean {
    if (value === undefined || value === null || !pool.some((x) => x[field] === value)) return false;
    const what = field === 'id' ? 'primary key' : field;
    this.issue(path, `uniqueness violation: '${type}' entity with ${what} set to '${value}' already declared`);
    return true;
  }
}

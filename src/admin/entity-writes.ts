/**
 * Kong's traditional-mode writes of the core entities (services, routes, plugins, upstreams, targets,
 * certificates, SNIs, CA certificates; kong/api/endpoints.lua, kong/db/dao): POST, PUT (upsert by id or
 * endpoint key), PATCH and DELETE, and the nested ones, on a node whose store is shared. Entities
 * declared in gateway.yaml stay read-only (405); a name or id taken by either side is a 409. Each write edits the stored document (src/stored-entities.ts), has the loader validate gateway.yaml
 * and the edited document WHOLE, and commits only if no other write landed since it read: a refused write
 * changes nothing anywhere. On a node whose store is its own, the answer stays Kong DB-less's.
 */
import { randomUUID } from 'node:crypto';
import { isUuid } from '../config/entities.ts';
import { formatTarget } from '../config/upstreams.ts';
import { CORE_ENTITY_SCHEMAS } from '../config/entity-schemas.ts';
import { API_ENTITY_KINDS, type ApiEntities, type ApiEntityKind, type LoadResult } from '../config/load.ts';
import { isPlainObject, type Issue } from '../config/schema.ts';
import type { Certificate, GatewayConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { AdminMethod, AdminReply, AdminRequest, AdminRoute, CounterMetric } from '../pdk/types.ts';
import { MAX_API_ENTITIES, storedRecord, type EntityDocument, type ReadDocument } from '../stored-entities.ts';
import {
  ConcurrentChangeError,
  declaredEntityReadOnly,
  entityWriteUnsupported,
  ForeignKeyViolationError,
  NotFoundError,
  ReferencedEntityError,
  SchemaViolationError,
  UniqueViolationError,
  type WriteMethod,
} from '../toolkit/admin-errors.ts';
import { inferFormTypes } from '../toolkit/entity-admin.ts';
import { page } from '../toolkit/paging.ts';
import { withoutKeys } from './certificate-routes.ts';

/** A write that keeps meeting others' is refused after this many tries (each one starts again from the stored version). */
const MAX_ATTEMPTS = 5;
/** The most a write waits before its next try grows by this much at each try. */
const RETRY_SPREAD_MS = 25;

type StoredRecord = Record<string, any> & { id: string };

/** What the writes need of the gateway process. */
export interface EntityWriteAccess {
  /** Whether the node's store is shared (LevelDB with workers, or PostgreSQL): only then are writes possible. */
  shared: boolean;
  config(): GatewayConfig;
  /** The stored document this process's configuration was built from. */
  applied(): EntityDocument;
  read(): Promise<ReadDocument>;
  /** The effective configuration gateway.yaml and `entities` make, validated whole. */
  build(entities: ApiEntities): LoadResult;
  /** A consumer created through the admin API, by id or username (the consumers directory's). */
  runtimeConsumerId(key: string): string | undefined;
  /** Why this node could not run `config` although it is valid (a plugin keeping state in one process), or undefined. */
  refusal(config: GatewayConfig): string | undefined;
  /** Commits `next` if nothing was written since `read`, then applies it on this node; false otherwise. */
  commit(read: ReadDocument, next: ApiEntities): Promise<boolean>;
  log: Logger;
  /** Counts the writes that changed what the gateway serves. */
  writes: CounterMetric;
}

/** What an entity may reference, or be nested under in a path. */
type Referenced = 'services' | 'routes' | 'consumers' | 'upstreams' | 'certificates';

/** What Kong's DAO says of each kind (kong/db/schema/entities/*.lua) that the writes need. */
interface KindRules {
  /** The endpoint key: what `{id or name}` in a path means besides the id; unique (within `scope`, if any). */
  nameField: string;
  /** The reference the name is unique within (a target's address within its upstream). */
  scope?: string;
  /** The references the kind holds, to the kind each names. */
  references: [field: string, kind: Referenced][];
  /** What gateway.yaml nests in it, which the admin API takes through the nested endpoints only. */
  nested: string[];
  /** The entities that reference it, and what their deletion does: Kong's `on_delete`. */
  dependents: { kind: ApiEntityKind; field: string; onDelete: 'restrict' | 'cascade' }[];
}

const RULES: Record<ApiEntityKind, KindRules> = {
  services: {
    nameField: 'name',
    references: [],
    nested: ['routes', 'plugins'],
    dependents: [{ kind: 'routes', field: 'service', onDelete: 'restrict' }, { kind: 'plugins', field: 'service', onDelete: 'cascade' }],
  },
  routes: { nameField: 'name', references: [['service', 'services']], nested: ['plugins'], dependents: [{ kind: 'plugins', field: 'route', onDelete: 'cascade' }] },
  plugins: { nameField: 'instance_name', references: [['route', 'routes'], ['service', 'services'], ['consumer', 'consumers']], nested: [], dependents: [] },
  upstreams: { nameField: 'name', references: [], nested: ['targets'], dependents: [{ kind: 'targets', field: 'upstream', onDelete: 'cascade' }] },
  targets: { nameField: 'target', scope: 'upstream', references: [['upstream', 'upstreams']], nested: [], dependents: [] },
  // Certificates have no endpoint key; their `snis` (names, as Kong's admin API takes them) become SNI entities.
  certificates: {
    nameField: 'id',
    references: [],
    nested: [],
    dependents: [
      { kind: 'snis', field: 'certificate', onDelete: 'cascade' },
      { kind: 'services', field: 'client_certificate', onDelete: 'restrict' },
      { kind: 'upstreams', field: 'client_certificate', onDelete: 'restrict' },
    ],
  },
  snis: { nameField: 'name', references: [['certificate', 'certificates']], nested: [], dependents: [] },
  ca_certificates: { nameField: 'id', references: [], nested: [], dependents: [{ kind: 'services', field: 'ca_certificates', onDelete: 'restrict' }] },
};

/** Whether `entity`'s `field` references `id`: a `{id}` record, or a list of ids (a service's `ca_certificates`). */
function refersTo(entity: Record<string, any>, field: string, id: string): boolean {
  const value = entity[field];
  return Array.isArray(value) ? value.includes(id) : value?.id === id;
}

/** The kinds the loader builds again into what the document keeps (a service's `url` expanded, a target's port added). */
const NORMALIZED: ReadonlySet<ApiEntityKind> = new Set(['services', 'routes', 'targets', 'snis']);

/** An entity's endpoint key as compared: a target's address in Kong's normal form (`host` is `host:8000`). */
function nameOf(kind: ApiEntityKind, entity: Record<string, any>): unknown {
  const name = entity[RULES[kind].nameField];
  return kind === 'targets' && typeof name === 'string' ? (formatTarget(name) ?? name) : name;
}

/** Whether `entity` is the one `key` names (its id, or its endpoint key), within the parent `scopeId` for a scoped kind. */
function named(kind: ApiEntityKind, entity: Record<string, any>, key: string, scopeId?: string): boolean {
  const scope = RULES[kind].scope;
  if (scope && scopeId !== undefined && entity[scope]?.id !== scopeId) return false;
  return isUuid(key) ? entity.id === key : nameOf(kind, entity) === nameOf(kind, { [RULES[kind].nameField]: key });
}

/** The admin API's view of one write: the stored entities being edited, and gateway.yaml's beside them. */
class Draft {
  readonly entities: ApiEntities;
  /** The id each change wrote, and how; undefined: nothing changed (a DELETE of nothing). */
  changed: { id: string; kind: ApiEntityKind; operation: 'create' | 'update' | 'delete' } | undefined;
  /** The ids of the entities a deletion took along. */
  cascaded: string[] = [];

  constructor(
    document: EntityDocument,
    private readonly access: EntityWriteAccess,
  ) {
    this.entities = Object.fromEntries(API_ENTITY_KINDS.map((kind) => [kind, [...document[kind]]])) as unknown as ApiEntities;
  }

  stored(kind: ApiEntityKind, key: string, scopeId?: string): StoredRecord | undefined {
    return this.entities[kind].find((e) => named(kind, e, key, scopeId)) as StoredRecord | undefined;
  }

  /** gateway.yaml's entities of a kind: those of the running configuration that no stored document made. */
  declared(kind: ApiEntityKind): Record<string, any>[] {
    const applied = new Set(this.access.applied()[kind].map((e) => e.id));
    return (this.access.config()[kind] as Record<string, any>[]).filter((e) => !applied.has(e.id));
  }

  /** Every entity of a kind, the file's and the stored ones. */
  all(kind: ApiEntityKind): Record<string, any>[] {
    return [...this.declared(kind), ...this.entities[kind]];
  }

  find(kind: ApiEntityKind, key: string, scopeId?: string): Record<string, any> | undefined {
    return this.all(kind).find((e) => named(kind, e, key, scopeId));
  }

  refuseDeclared(kind: ApiEntityKind, key: string, method: WriteMethod, scopeId?: string): void {
    if (this.declared(kind).some((e) => named(kind, e, key, scopeId))) throw declaredEntityReadOnly(kind, method);
  }

  /**
   * Kong's `snis` of a certificate as its admin API takes them (names): the certificate's SNI entities
   * become exactly those, keeping the ids of names it had already. Left out, they stay as they are.
   */
  setSnis(certificateId: string, names: unknown): void {
    if (names === undefined) return;
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) throw new SchemaViolationError([{ path: ['snis'], message: 'expected a set of names' }]);
    const now = Math.floor(Date.now() / 1000);
    const before = this.entities.snis.filter((e) => e.certificate?.id === certificateId);
    const fresh = (name: string) => ({ id: randomUUID(), name, certificate: { id: certificateId }, created_at: now, updated_at: now });
    const kept = names.map((name) => before.find((e) => e.name === name) ?? fresh(name));
    for (const sni of kept) if (!before.includes(sni)) this.checkUnique('snis', sni as StoredRecord, undefined);
    this.entities.snis = [...this.entities.snis.filter((e) => !before.includes(e)), ...kept];
  }

  create(kind: ApiEntityKind, record: Record<string, any>): string {
    if (API_ENTITY_KINDS.reduce((sum, k) => sum + this.entities[k].length, 0) >= MAX_API_ENTITIES) {
      throw new SchemaViolationError([{ path: [], message: `at most ${MAX_API_ENTITIES} entities can be created through the admin API` }]);
    }
    const now = Math.floor(Date.now() / 1000);
    const entity = { ...record, id: record.id ?? randomUUID(), created_at: now, updated_at: now };
    this.checkUnique(kind, entity, undefined);
    this.entities[kind].push(entity);
    this.changed = { id: entity.id, kind, operation: 'create' };
    return entity.id;
  }

  replace(kind: ApiEntityKind, existing: StoredRecord, record: Record<string, any>): string {
    const entity = { ...record, id: existing.id, created_at: existing.created_at, updated_at: Math.floor(Date.now() / 1000) };
    this.checkUnique(kind, entity, existing);
    this.entities[kind] = this.entities[kind].map((e) => (e.id === existing.id ? entity : e));
    this.changed = { id: entity.id, kind, operation: 'update' };
    return entity.id;
  }

  /** Kong's deletion: refused while a `restrict` dependent references it, `cascade` dependents go with it. */
  delete(kind: ApiEntityKind, existing: StoredRecord): void {
    for (const { kind: dependent, field, onDelete } of RULES[kind].dependents) {
      const referencing = this.all(dependent).filter((e) => refersTo(e, field, existing.id));
      if (referencing.length === 0) continue;
      if (onDelete === 'restrict') throw new ReferencedEntityError(kind, dependent);
      this.removeAll(dependent, referencing.map((e) => e.id));
    }
    this.entities[kind] = this.entities[kind].filter((e) => e.id !== existing.id);
    this.changed = { id: existing.id, kind, operation: 'delete' };
  }

  /** Kong's cascade of a consumer's deletion to its plugins. */
  deletePluginsOf(consumerId: string): void {
    const attached = this.entities.plugins.filter((p) => p.consumer?.id === consumerId);
    if (attached.length === 0) return;
    this.removeAll('plugins', attached.map((p) => p.id));
    this.changed = { id: consumerId, kind: 'plugins', operation: 'delete' };
  }

  private removeAll(kind: ApiEntityKind, ids: string[]): void {
    this.cascaded.push(...ids);
    this.entities[kind] = this.entities[kind].filter((e) => !ids.includes(e.id));
  }

  /** Kong's unique constraints, over the file's entities and the stored ones: the id, the endpoint key, a plugin's scope. */
  private checkUnique(kind: ApiEntityKind, entity: StoredRecord, replacing: StoredRecord | undefined): void {
    const others = this.all(kind).filter((e) => e !== replacing);
    if (others.some((e) => e.id === entity.id)) throw new UniqueViolationError({ id: entity.id });
    const { nameField, scope } = RULES[kind];
    const name = nameOf(kind, entity);
    const sameScope = (e: Record<string, any>) => !scope || e[scope]?.id === entity[scope]?.id;
    if (name != null && others.some((e) => sameScope(e) && nameOf(kind, e) === name)) throw new UniqueViolationError({ [nameField]: entity[nameField] });
    if (kind !== 'plugins') return;
    const cacheKey = (p: Record<string, any>) => ({ consumer: refOf(p.consumer), name: p.name, route: refOf(p.route), service: refOf(p.service) });
    const mine = JSON.stringify(cacheKey(entity));
    if (others.some((p) => JSON.stringify(cacheKey(p)) === mine)) throw new UniqueViolationError(cacheKey(entity));
  }

  /** The references of `record` as ids (`{name}` or a name resolved), each to an entity that exists. */
  resolveReferences(kind: ApiEntityKind, record: Record<string, any>): Record<string, any> {
    const out = { ...record };
    for (const [field, target] of RULES[kind].references) {
      const ref = record[field];
      if (ref === undefined || ref === null) continue;
      const key = typeof ref === 'string' ? ref : isPlainObject(ref) ? (ref.id ?? ref.name ?? ref.username) : undefined;
      if (typeof key !== 'string') throw new SchemaViolationError([{ path: [field], message: 'expected a record' }]);
      const id = this.idOf(target, key);
      if (!id) throw new ForeignKeyViolationError(field, target, key);
      out[field] = { id };
    }
    return out;
  }

  /** The id of the entity of `kind` that `key` names (a consumer of gateway.yaml or of the admin API, by id or username). */
  idOf(kind: Referenced, key: string): string | undefined {
    if (kind !== 'consumers') return this.find(kind, key)?.id;
    const declared = this.access.config().consumers.find((c) => (isUuid(key) ? c.id === key : c.username === key));
    return declared?.id ?? this.access.runtimeConsumerId(key);
  }
}

function refOf(ref: unknown): { id: string } | null {
  return isPlainObject(ref) && typeof ref.id === 'string' ? { id: ref.id } : null;
}

/** Kong's PATCH: the given fields over the entity, records (a plugin's `config`) merged field by field. */
function merged(existing: Record<string, any>, patch: Record<string, any>): Record<string, any> {
  const out = { ...existing };
  for (const [key, value] of Object.entries(patch)) out[key] = isPlainObject(value) && isPlainObject(existing[key]) ? merged(existing[key], value) : value;
  return out;
}

/**
 * The body as an entity's fields: a form's values by the schema's types, its `service.id` (Kong's form
 * for a reference) as `service: {id}`; the timestamps are the gateway's; an id must be a UUID.
 */
function fieldsOf(kind: ApiEntityKind, req: AdminRequest): Record<string, any> {
  const body = req.form ? inferFormTypes(req.body, CORE_ENTITY_SCHEMAS[kind]) : { ...req.body };
  for (const [field] of RULES[kind].references) {
    for (const key of ['id', 'name']) {
      if (!req.form || body[`${field}.${key}`] === undefined) continue;
      body[field] = { [key]: body[`${field}.${key}`] };
      delete body[`${field}.${key}`];
    }
  }
  delete body.created_at;
  delete body.updated_at;
  const issues: Issue[] = RULES[kind].nested.filter((field) => body[field] !== undefined).map((field) => ({ path: [field], message: 'unknown field' }));
  if (body.id !== undefined && !(typeof body.id === 'string' && isUuid(body.id))) issues.push({ path: ['id'], message: 'expected a valid UUID' });
  if (issues.length > 0) throw new SchemaViolationError(issues);
  return body;
}

/** Where a nested path puts the entity: under the parent of `kind` named by `:parent`, in the reference `field`. */
type Nesting = [kind: Referenced, field: string];

export class EntityWriter {
  constructor(private readonly access: EntityWriteAccess) {}

  routes(): AdminRoute[] {
    const routes: AdminRoute[] = [];
    const add = (method: AdminMethod, path: string, handler: AdminRoute['handler']) => routes.push({ method, path, handler });
    const writes = (base: string, kind: ApiEntityKind, nesting?: Nesting) => {
      add('POST', base, (req) => this.create(kind, req, nesting));
      add('PUT', `${base}/:id`, (req) => this.update(kind, req, 'PUT', nesting));
      add('PATCH', `${base}/:id`, (req) => this.update(kind, req, 'PATCH', nesting));
      add('DELETE', `${base}/:id`, (req) => this.delete(kind, req, nesting));
    };
    for (const kind of ['services', 'routes', 'plugins', 'upstreams', 'certificates', 'snis', 'ca_certificates'] as const) writes(`/${kind}`, kind);
    // Kong 3 has targets under their upstream only.
    writes('/upstreams/:parent/targets', 'targets', ['upstreams', 'upstream']);
    add('POST', '/certificates/:parent/snis', (req) => this.create('snis', req, ['certificates', 'certificate']));
    add('POST', '/services/:parent/routes', (req) => this.create('routes', req, ['services', 'service']));
    for (const nesting of [['services', 'service'], ['routes', 'route'], ['consumers', 'consumer']] as const) {
      const [parent, field] = nesting;
      add('GET', `/${parent}/:parent/plugins`, (req) => {
        const id = this.parentId(parent, req.params.parent);
        return page(this.access.config().plugins.filter((p) => p[field]?.id === id), req, `/${parent}/${req.params.parent}/plugins`);
      });
      add('POST', `/${parent}/:parent/plugins`, (req) => this.create('plugins', req, [...nesting]));
    }
    return routes;
  }

  /**
   * Deletes the plugins of a consumer that was deleted (Kong's cascade), as a write of its own: called by
   * the process that deleted it. Until then, a plugin of a consumer that is gone matches no request.
   */
  async deletePluginsOfConsumer(consumerId: string): Promise<void> {
    if (!this.access.shared) return;
    const request: AdminRequest = { params: { id: consumerId }, query: new URLSearchParams(), body: {}, headers: {}, client: 'cascade' };
    await this.write('plugins', 'DELETE', request, (draft) => {
      draft.deletePluginsOf(consumerId);
      return undefined;
    });
  }

  /** The id of the parent a nested path names (by id or name), or 404 as in Kong. */
  parentId(parent: Referenced, key: string, draft = new Draft(this.access.applied(), this.access)): string {
    const id = draft.idOf(parent, key);
    if (!id) throw new NotFoundError();
    return id;
  }

  create(kind: ApiEntityKind, req: AdminRequest, nesting?: Nesting): Promise<AdminReply> {
    return this.write(kind, 'POST', req, (draft) => {
      const fields = fieldsOf(kind, req);
      if (nesting) fields[nesting[1]] = { id: this.parentId(nesting[0], req.params.parent, draft) };
      const { snis, ...own } = fields;
      const id = draft.create(kind, draft.resolveReferences(kind, kind === 'certificates' ? own : fields));
      if (kind === 'certificates') draft.setSnis(id, snis);
      return id;
    });
  }

  update(kind: ApiEntityKind, req: AdminRequest, method: 'PUT' | 'PATCH', nesting?: Nesting): Promise<AdminReply> {
    const key = req.params.id;
    return this.write(kind, method, req, (draft) => {
      const fields = fieldsOf(kind, req);
      const parentId = nesting && this.parentId(nesting[0], req.params.parent, draft);
      if (nesting) fields[nesting[1]] = { id: parentId };
      const existing = draft.stored(kind, key, parentId);
      // Kong's upsert: the path's key becomes the new entity's id or endpoint key.
      const keyed = isUuid(key) ? { id: key } : { [RULES[kind].nameField]: key };
      const { snis, ...own } = fields;
      const given = kind === 'certificates' ? own : fields;
      let id: string;
      if (!existing) {
        draft.refuseDeclared(kind, key, method, parentId);
        if (method === 'PATCH') throw new NotFoundError();
        id = draft.create(kind, draft.resolveReferences(kind, { ...given, ...keyed }));
      } else {
        // A service's `url` stands for protocol, host, port and path: a PATCH giving it replaces those four.
        const base = kind === 'services' && given.url !== undefined ? withoutFields(existing, ['protocol', 'host', 'port', 'path']) : existing;
        const next = method === 'PUT' ? { ...given, ...keyed, id: existing.id } : merged(base, given);
        id = draft.replace(kind, existing, draft.resolveReferences(kind, next));
      }
      if (kind === 'certificates') draft.setSnis(id, method === 'PUT' ? (snis ?? []) : snis);
      return id;
    });
  }

  delete(kind: ApiEntityKind, req: AdminRequest, nesting?: Nesting): Promise<AdminReply> {
    const key = req.params.id;
    return this.write(kind, 'DELETE', req, (draft) => {
      const parentId = nesting && this.parentId(nesting[0], req.params.parent, draft);
      const existing = draft.stored(kind, key, parentId);
      if (existing) draft.delete(kind, existing);
      else draft.refuseDeclared(kind, key, 'DELETE', parentId);
      // Kong's DELETE of nothing is a 204 too.
      return existing?.id;
    });
  }

  /**
   * Reads the stored document, edits it with `change`, validates the result with gateway.yaml, and
   * commits it if no other write came between; otherwise starts again from the newer document.
   */
  private async write(kind: ApiEntityKind, method: WriteMethod, req: AdminRequest, change: (draft: Draft) => string | undefined): Promise<AdminReply> {
    if (!this.access.shared) throw entityWriteUnsupported(kind, method);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const read = await this.access.read();
      const draft = new Draft(read.document, this.access);
      const id = change(draft);
      if (!draft.changed) return { status: 204 };
      const built = this.access.build(draft.entities);
      if (!built.ok) throw violation(built, draft.changed.id);
      const refusal = this.access.refusal(built.config);
      if (refusal) throw new SchemaViolationError([{ path: [], message: refusal }]);
      if (draft.changed.operation !== 'delete') normalize(draft, built.config);
      if (!(await this.access.commit(read, draft.entities))) {
        // Writers that met each other would meet again at once: each waits a random moment first.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * RETRY_SPREAD_MS * (attempt + 1)));
        continue;
      }
      this.record(req, method, draft);
      if (draft.changed.operation === 'delete') return { status: 204 };
      const entity = (built.config[kind] as Record<string, any>[]).find((e) => e.id === id) ?? draft.entities[kind].find((e) => e.id === id);
      // A private key is never shown (certificate-routes.ts): whoever reads the admin API cannot take the gateway's identity.
      const shown = kind === 'certificates' && entity ? withoutKeys(entity as Certificate) : entity;
      return { status: draft.changed.operation === 'create' ? 201 : 200, body: shown };
    }
    throw new ConcurrentChangeError(req.params.id ?? kind);
  }

  /** Who changed what the gateway serves, and which ids: the admin log line and the metric. */
  private record(req: AdminRequest, method: WriteMethod, draft: Draft): void {
    const { kind, id, operation } = draft.changed!;
    this.access.writes.inc({ entity: kind, operation });
    const cascaded = draft.cascaded.length > 0 ? { cascaded: draft.cascaded } : {};
    this.access.log.info({ client: req.client, method, entity: kind, id, operation, ...cascaded }, 'admin API changed the configuration');
  }
}

function withoutFields(record: StoredRecord, fields: string[]): StoredRecord {
  const out = { ...record };
  for (const field of fields) delete out[field];
  return out;
}

/**
 * The changed service, route or target as the loader built it (a `url` expanded, a target's port added,
 * defaults filled), so that the document holds what the configuration runs. A plugin or an upstream keeps
 * the fields as given: the defaults of its nested records are filled at each load.
 */
function normalize(draft: Draft, config: GatewayConfig): void {
  const { kind, id } = draft.changed!;
  if (!NORMALIZED.has(kind)) return;
  const built = (config[kind] as Record<string, any>[]).find((e) => e.id === id);
  // A stream route is validated but not kept by the loader: it stays as given.
  if (!built) return;
  draft.entities[kind] = draft.entities[kind].map((e) => (e.id === id ? storedRecord(built) : e));
}

/** A refused change: the changed entity's problems as Kong's schema violation; anything else (the file's entities) as entity-level messages. */
function violation(built: Extract<LoadResult, { ok: false }>, id: string): SchemaViolationError {
  const own = (built.apiIssues ?? []).filter((i) => i.id === id);
  const issues: Issue[] = own.length > 0 ? own.map(({ path, message }) => ({ path, message })) : built.errors.map((e) => ({ path: [], message: String(e) }));
  return new SchemaViolationError(issues);
}

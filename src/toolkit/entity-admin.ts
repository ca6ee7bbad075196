/**
 * The admin API of an entity, generated from its definition as Kong generates it from a DAO schema
 * (kong/api/endpoints.lua): `/<name>[/{id or endpoint key}]`, and for a consumer's children
 * `/consumers/{c}/<nested>[/{id or key}]` and `/<name>/{key}/consumer`, with GET, POST, PUT (upsert by id or
 * endpoint key), PATCH and DELETE, Kong's shapes, paging and errors. Entities of gateway.yaml are read-only
 * (405); runtime ones persist through the directory.
 */
import { randomUUID } from 'node:crypto';
import { isUuid, TTL } from '../config/entities.ts';
import { validate, type FieldSchema, type Issue, type RecordSchema } from '../config/schema.ts';
import type { AdminReply, AdminRequest, AdminRoute, BeforeEntitySave, Entity, ParentDirectory } from '../pdk/types.ts';
import { ConcurrentChangeError, declaredEntityReadOnly, ForeignKeyViolationError, NotFoundError, SchemaViolationError, type WriteMethod } from './admin-errors.ts';
import { MAX_WRITE_ATTEMPTS, type EntityDirectory } from './entity-directory.ts';
import { page } from './paging.ts';

/** Kong's auto_timestamp_s: set when created, may be given. */
const CREATED_AT: FieldSchema = { type: 'integer', between: [0, 2 ** 40] };

export function entityAdminRoutes<T extends Entity>(directory: EntityDirectory<T>, beforeSave?: BeforeEntitySave<T>): AdminRoute[] {
  const admin = new EntityAdmin(directory, beforeSave);
  return admin.routes();
}

interface WriteContext<T> {
  method: WriteMethod;
  /** The parent named by the URL (`/consumers/{c}/...`). */
  parent?: Entity;
  existing?: T;
}

class EntityAdmin<T extends Entity> {
  private readonly name: string;
  private readonly nested: string;
  private readonly definition;
  private readonly parent: ParentDirectory | undefined;
  private readonly parentField: string | undefined;

  constructor(
    private readonly directory: EntityDirectory<T>,
    private readonly beforeSave: BeforeEntitySave<T> | undefined,
  ) {
    this.definition = directory.definition;
    const names = this.definition.admin;
    if (!names) throw new Error(`entity ${this.definition.name} has no admin API names`);
    this.name = names.name;
    this.nested = names.nested ?? names.name;
    this.parent = directory.parent;
    this.parentField = this.definition.parent?.field;
  }

  routes(): AdminRoute[] {
    const top = `/${this.name}`;
    const routes: AdminRoute[] = [
      { method: 'GET', path: top, handler: (req) => this.list(req), entity: this.definition.name },
      { method: 'POST', path: top, handler: (req) => this.create(req) },
      { method: 'GET', path: `${top}/:key`, handler: async (req) => this.show(await this.existing(req.params.key)) },
      { method: 'PUT', path: `${top}/:key`, handler: (req) => this.put(req) },
      { method: 'PATCH', path: `${top}/:key`, handler: async (req) => this.patch(req, await this.existing(req.params.key)) },
      { method: 'DELETE', path: `${top}/:key`, handler: async (req) => this.delete(await this.find(req.params.key), true) },
    ];
    if (!this.parent || !this.parentField) return routes;
    const parentName = this.parent.definition.admin?.name ?? this.parent.definition.name;
    const nested = `/${parentName}/:parent/${this.nested}`;
    routes.push(
      // The credential's owner.
      { method: 'GET', path: `${top}/:key/${this.parentField}`, handler: (req) => this.owner(req.params.key) },
      { method: 'GET', path: nested, handler: async (req) => this.list(req, await this.parentOf(req)) },
      { method: 'POST', path: nested, handler: async (req) => this.create(req, await this.parentOf(req)) },
      { method: 'GET', path: `${nested}/:key`, handler: async (req) => this.show(await this.nestedExisting(req)) },
      { method: 'PUT', path: `${nested}/:key`, handler: async (req) => this.put(req, await this.parentOf(req)) },
      { method: 'PATCH', path: `${nested}/:key`, handler: async (req) => this.patch(req, await this.nestedExisting(req), await this.parentOf(req)) },
      { method: 'DELETE', path: `${nested}/:key`, handler: async (req) => this.delete(await this.nestedExisting(req), false) },
    );
    return routes;
  }

  // -- reads ------------------------------------------------------------------------------------------

  private async list(req: AdminRequest, parent?: Entity): Promise<AdminReply> {
    // `?username=…`, `?custom_id=…`, `?key=…`: the entity a unique field names, as a list of one (or none).
    const field = this.lookupFields().find((f) => req.query.has(f));
    if (field) return this.lookup(field, req.query.get(field)!, parent);
    const entities = parent ? this.directory.childrenOf(parent.id) : this.directory.list();
    const path = parent ? `/${this.parent!.definition.admin?.name}/${parent.id}/${this.nested}` : `/${this.name}`;
    return page(entities.map((e) => this.view(e)), req, path);
  }

  private lookupFields(): string[] {
    return [...(this.definition.endpointKey ? [this.definition.endpointKey] : []), ...(this.definition.unique ?? [])];
  }

  /** `?<unique field>=<value>`: the one match (or none) as a list. */
  private async lookup(field: string, value: string, parent: Entity | undefined): Promise<AdminReply> {
    const found = await this.directory.currentBy(field, value);
    const owner = found ? this.directory.parentOf(found) : undefined;
    const matches = found && (!parent || owner?.id === parent.id);
    const shown = matches
      ? {
          ...this.view(found),
          ...(this.definition.admin?.expandParentOnLookup && owner ? { [this.parentField!]: owner } : {}),
        }
      : undefined;
    return { status: 200, body: { data: shown ? [shown] : [], next: null } };
  }

  private show(entity: T | undefined): AdminReply {
    if (!entity) throw new NotFoundError();
    return { status: 200, body: this.view(entity) };
  }

  private async owner(key: string): Promise<AdminReply> {
    const entity = await this.find(key);
    const owner = entity ? this.directory.parentOf(entity) : undefined;
    if (!owner) throw new NotFoundError();
    return { status: 200, body: owner };
  }

  /** What the admin API shows: no internal fields, digested fields only in the answer to the write that set them. */
  private view(entity: T, revealed: Record<string, unknown> = {}): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(entity)) if (!field.startsWith('_')) out[field] = value;
    for (const field of this.definition.digested ?? []) out[field] = revealed[field] ?? null;
    const expiresAt = this.directory.expiresAt(entity);
    if (expiresAt !== undefined) out.ttl = Math.max(0, Math.ceil((expiresAt - Date.now()) / 1000));
    return out;
  }

  // -- lookups ----------------------------------------------------------------------------------------

  /**
   * By id when the key is UUID-shaped, else by the endpoint key (Kong's rule); only that one field. What
   * another process wrote a moment ago is found too (the directory reads the store on a miss).
   */
  private find(key: string): Promise<T | undefined> {
    if (isUuid(key)) return this.directory.currentById(key);
    const endpointKey = this.definition.endpointKey;
    return endpointKey ? this.directory.currentBy(endpointKey, key) : Promise.resolve(undefined);
  }

  private async existing(key: string): Promise<T> {
    const found = await this.find(key);
    if (!found) throw new NotFoundError();
    return found;
  }

  /** The parent the URL names; 404 when there is none. */
  private async parentOf(req: AdminRequest): Promise<Entity> {
    const parent = await referenced(this.parent!, req.params.parent);
    if (!parent) throw new NotFoundError();
    return parent;
  }

  /** A child under `/consumers/{c}/...`: by id or endpoint key, or by its `uniqueInParent` value; it must be that parent's. */
  private async nestedFind(req: AdminRequest): Promise<T | undefined> {
    const parent = await this.parentOf(req);
    const key = req.params.key;
    const found = (await this.find(key)) ?? (isUuid(key) ? undefined : await this.directory.currentInParent(parent.id, key));
    return found && this.directory.parentOf(found)?.id === parent.id ? found : undefined;
  }

  private async nestedExisting(req: AdminRequest): Promise<T> {
    const found = await this.nestedFind(req);
    if (!found) throw new NotFoundError();
    return found;
  }

  // -- writes -----------------------------------------------------------------------------------------

  private async create(req: AdminRequest, parent?: Entity): Promise<AdminReply> {
    return this.write(this.bodyOf(req), { method: 'POST', parent }, 201);
  }

  /** Kong's upsert: the URL's key is the id when UUID-shaped, else the endpoint key (or, nested, the child's name). */
  private async put(req: AdminRequest, parent?: Entity): Promise<AdminReply> {
    const key = req.params.key;
    const existing = parent ? await this.nestedFind(req) : await this.find(key);
    return this.write({ ...this.bodyOf(req), [this.fieldNamedBy(key, parent !== undefined)]: key }, { method: 'PUT', parent, existing }, 200);
  }

  /** Which field a URL key gives a value to: the id (UUID-shaped, or nothing else fits: then it is refused as one). */
  private fieldNamedBy(key: string, nested: boolean): string {
    if (isUuid(key)) return 'id';
    return this.definition.endpointKey ?? (nested ? this.definition.uniqueInParent : undefined) ?? 'id';
  }

  private async patch(req: AdminRequest, existing: T, parent?: Entity): Promise<AdminReply> {
    const body = this.bodyOf(req);
    const together = this.definition.allOrNone ?? [];
    const givenTogether = together.filter((field) => field in body);
    if (givenTogether.length > 0 && givenTogether.length < together.length) {
      throw new SchemaViolationError([{ path: [], message: `all or none of these fields must be set: ${together.map((f) => `'${f}'`).join(', ')}` }]);
    }
    return this.write(body, { method: 'PATCH', parent, existing }, 200);
  }

  /** Kong answers 204 for a missing entity at the top level, 404 under a parent (which looks it up first). */
  private async delete(entity: T | undefined, topLevel: boolean): Promise<AdminReply> {
    if (!entity) {
      if (topLevel) return { status: 204 };
      throw new NotFoundError();
    }
    if (this.directory.isDeclared(entity)) throw declaredEntityReadOnly(this.definition.name, 'DELETE');
    await this.directory.remove(entity);
    return { status: 204 };
  }

  private bodyOf(req: AdminRequest): Record<string, any> {
    return req.form ? inferFormTypes(req.body, this.definition.schema) : { ...req.body };
  }

  /**
   * A write made from an entity another process changed meanwhile starts again from the stored version
   * (a PATCH applies its fields to that one): concurrent updates end as one of them, last writer wins, as
   * in Kong on a database.
   */
  private async write(body: Record<string, any>, context: WriteContext<T>, status: number): Promise<AdminReply> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.writeOnce(body, context, status);
      } catch (err) {
        if (!(err instanceof ConcurrentChangeError) || !context.existing || attempt === MAX_WRITE_ATTEMPTS) throw err;
        const current = await this.directory.reread(context.existing.id);
        if (!current) throw new NotFoundError();
        context = { ...context, existing: current };
      }
    }
  }

  private async writeOnce(body: Record<string, any>, context: WriteContext<T>, status: number): Promise<AdminReply> {
    const { existing, method } = context;
    if (existing && this.directory.isDeclared(existing)) throw declaredEntityReadOnly(this.definition.name, method);
    const { id, created_at, ttl, [this.parentField ?? '']: parentRef, ...given } = body;
    const issues: Issue[] = [];
    const parent = await this.resolveParent(context, parentRef, issues);
    const fields = method === 'PATCH' && existing ? { ...this.fieldsOf(existing), ...given } : given;
    const validated = validate<Record<string, any>>(this.definition.schema, fields);
    issues.push(...validated.issues, ...validate(CREATED_AT, created_at, ['created_at']).issues);
    if (id !== undefined && (typeof id !== 'string' || !isUuid(id))) issues.push({ path: ['id'], message: 'expected a valid UUID' });
    const ttlSeconds = this.ttlOf(ttl, issues);
    if (issues.length > 0) throw new SchemaViolationError(issues);
    const { entity, revealed } = this.digest(validated.value, new Set(Object.keys(given)), context);
    entity.id = existing?.id ?? id ?? randomUUID();
    entity.created_at = existing?.created_at ?? created_at ?? Math.floor(Date.now() / 1000);
    if (this.parentField && parent) entity[this.parentField] = { id: parent.id };
    const transformed = this.beforeSave ? await this.beforeSave(entity, { given: new Set(Object.keys(given)), existing }) : entity;
    const saved = await this.directory.save(transformed as T, existing, ttlSeconds);
    return { status, body: this.view(saved, revealed) };
  }

  /**
   * The parent of a written child: the URL's, else the body's reference (required when creating, kept when
   * a PATCH names none). A missing one is a schema violation, an unknown one a foreign key violation.
   */
  private async resolveParent(context: WriteContext<T>, ref: unknown, issues: Issue[]): Promise<Entity | undefined> {
    if (!this.parent || !this.parentField) return undefined;
    if (context.parent) return context.parent;
    if (ref === undefined || ref === null) {
      if (context.method === 'PATCH' && context.existing) return this.directory.parentOf(context.existing);
      if (this.definition.parent?.required !== false) issues.unshift({ path: [this.parentField], message: 'required field missing' });
      return undefined;
    }
    const parent = await referenced(this.parent, ref);
    if (!parent) throw new ForeignKeyViolationError(this.parentField, this.parent.definition.name, referenceText(ref));
    return parent;
  }

  /** The schema fields of a stored entity that have a value: a PATCH starts from them. */
  private fieldsOf(entity: T): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const field of Object.keys(this.definition.schema.fields)) if (entity[field] !== null && entity[field] !== undefined) out[field] = entity[field];
    return out;
  }

  private ttlOf(ttl: unknown, issues: Issue[]): number | undefined {
    if (ttl === undefined || ttl === null) return undefined;
    if (!this.definition.ttl) {
      issues.push({ path: ['ttl'], message: 'unknown field' });
      return undefined;
    }
    const checked = validate<number>(TTL, typeof ttl === 'string' && /^\d+$/.test(ttl) ? Number(ttl) : ttl, ['ttl']);
    issues.push(...checked.issues);
    return checked.value || undefined;
  }

  /**
   * Digested fields set by this write are stored as digests and shown once, in this answer; a PATCH that
   * leaves them out keeps the stored digest as it is.
   */
  private digest(value: Record<string, any>, given: Set<string>, context: WriteContext<T>): { entity: Record<string, any>; revealed: Record<string, unknown> } {
    const entity = { ...value };
    const revealed: Record<string, unknown> = {};
    for (const field of this.definition.digested ?? []) {
      if (typeof entity[field] !== 'string') continue;
      const keptFromBefore = context.method === 'PATCH' && !given.has(field);
      if (keptFromBefore) continue;
      revealed[field] = entity[field];
      entity[field] = this.directory.storedValue(field, entity[field]);
    }
    return { entity, revealed };
  }
}

/**
 * The entity a reference names, looking at one field only: `{id}` the id, `{<endpoint key>}` that key, a
 * plain string the id when UUID-shaped and the endpoint key otherwise (Kong's rule). Never both, or an
 * entity named like another's id would stand in for it.
 */
export async function referenced(directory: ParentDirectory, ref: unknown): Promise<Entity | undefined> {
  const endpointKey = directory.definition.endpointKey;
  if (typeof ref === 'string') return isUuid(ref) ? directory.currentById(ref) : endpointKey ? directory.currentBy(endpointKey, ref) : undefined;
  if (typeof ref !== 'object' || ref === null) return undefined;
  const { id } = ref as Record<string, unknown>;
  if (typeof id === 'string') return directory.currentById(id);
  const key = endpointKey ? (ref as Record<string, unknown>)[endpointKey] : undefined;
  return typeof key === 'string' ? directory.currentBy(endpointKey!, key) : undefined;
}

function referenceText(ref: unknown): string {
  if (typeof ref === 'string') return ref;
  if (typeof ref === 'object' && ref !== null) {
    const first = Object.values(ref).find((v) => typeof v === 'string');
    if (typeof first === 'string') return first;
  }
  return JSON.stringify(ref);
}

/** Kong reads form values by the schema's field types (kong/api/arguments.lua): "true" is a boolean, "5" a number, a lone value an array. */
export function inferFormTypes(body: Record<string, any>, schema: RecordSchema): Record<string, any> {
  const out: Record<string, any> = { ...body };
  for (const [field, value] of Object.entries(body)) {
    const type = schema.fields[field]?.type ?? (field === 'ttl' ? 'integer' : undefined);
    if (type === 'boolean' && (value === 'true' || value === 'false')) out[field] = value === 'true';
    else if ((type === 'integer' || type === 'number') && typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) out[field] = Number(value);
    else if ((type === 'array' || type === 'set') && !Array.isArray(value)) out[field] = [value];
  }
  return out;
}

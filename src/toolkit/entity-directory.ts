/**
 * The entity directory: Kong's "declared in the file plus created at runtime" table of one entity type
 * (consumers, each credential type), answered from memory.
 *
 * - Declared entities come from gateway.yaml, are replaced on every reload and are read-only.
 * - Runtime entities are persisted in the store under `<definition.keyPrefix><id>` and loaded at start.
 * - Lookups by id and by each unique field are map hits. A child (a credential) whose parent (its consumer)
 *   is gone, or whose `ttl` has run out, reads as absent everywhere.
 * - Several processes and nodes share the store: a unique value is claimed with `commitIf` under
 *   `unique:<entity>:<field>:<value>` (two nodes creating the same key at once: one gets 409), and every
 *   change is announced on the `entities:<entity>` notice topic, on which each process re-reads that entity
 *   (all of them on `null`), one refresh after the other so that a slow read never overwrites a newer one.
 * - An update or a deletion is a compare-and-set against the stored record this process knows, moving the
 *   record's claims with it: a write made from a version another process replaced meanwhile fails
 *   (ConcurrentChangeError) and changes nothing, so claims always name the one record holding the value.
 * - A parent knows its children's directories: deleting a consumer deletes its runtime children of every
 *   type first (Kong's `on_delete = "cascade"`), and every other process that hears of the deletion deletes
 *   those it knows too (created there before the news of them reached the deleting process).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChildDirectory, Entity, EntityDefinition, KeptEntities, ParentDirectory, RemovedListener } from '../pdk/types.ts';
import type { BatchOp, Expectation, Store } from '../store/store.ts';
import { ConcurrentChangeError, PrimaryKeyViolationError, UniqueViolationError } from './admin-errors.ts';
import { tokenDigest } from './secrets.ts';

/** When a runtime entity expires (ms since the epoch); kept in the stored record, never shown. */
const EXPIRES_AT = '_expires_at';
/** How often expired entities leave memory (the store's sweeper deletes them from the store). */
const PRUNE_INTERVAL_MS = 60_000;
/** Longer unique values are claimed under their digest, so a claim key stays small whatever was sent. */
const MAX_PLAIN_CLAIM = 128;
/** Tries of a write whose entities other processes keep changing, before the client is told to retry. */
export const MAX_WRITE_ATTEMPTS = 5;

export interface DirectoryOptions {
  /** The directory of the entities this one's `parent.field` references (consumers). */
  parent?: ParentDirectory;
  log?: Logger;
}

/** Unique values of one entity: field → (stored value → entity). */
type UniqueIndex<T> = Map<string, Map<string, T>>;

interface Indexed<T> {
  byId: Map<string, T>;
  unique: UniqueIndex<T>;
  byParent: Map<string, Set<T>>;
}

function emptyIndex<T>(): Indexed<T> {
  return { byId: new Map(), unique: new Map(), byParent: new Map() };
}

export class EntityDirectory<T extends Entity = Entity> implements ParentDirectory, ChildDirectory, KeptEntities<T> {
  private declared: Indexed<T> = emptyIndex();
  private readonly runtime: Indexed<T> = emptyIndex();
  private readonly children: ChildDirectory[] = [];
  private readonly removedListeners: RemovedListener<T>[] = [];
  private refreshing: Promise<void> = Promise.resolve();
  private pendingRefreshes = 0;
  /**
   * How often this process changed each entity while refreshes were pending: a store read that a local
   * change overtook is stale and must not overwrite it (the change's own notice reads again after it).
   */
  private readonly localVersions = new Map<string, number>();
  private unsubscribe: (() => void) | undefined;
  private pruner: NodeJS.Timeout | undefined;
  private readonly keyPrefix: string;
  private readonly topic: string;
  readonly parent: ParentDirectory | undefined;
  /** The unique fields, the endpoint key first. */
  private readonly uniqueFields: string[];

  constructor(
    private readonly store: Store,
    readonly definition: EntityDefinition,
    private readonly options: DirectoryOptions = {},
  ) {
    this.keyPrefix = definition.keyPrefix ?? `${definition.name}/`;
    this.topic = `entities:${definition.name}`;
    this.parent = options.parent;
    this.uniqueFields = [...new Set([...(definition.endpointKey ? [definition.endpointKey] : []), ...(definition.unique ?? [])])];
    options.parent?.adopt(this);
  }

  /** Reads the runtime entities and starts following other processes' changes. */
  async load(): Promise<void> {
    this.unsubscribe ??= this.store.notices.subscribe(this.topic, (id) => this.queueRefresh(() => (id === null ? this.reloadRuntime() : this.refresh(id))));
    if (this.definition.ttl) this.pruner ??= setInterval(() => this.pruneExpired(), PRUNE_INTERVAL_MS).unref();
    await this.reloadRuntime();
    await this.claimUnclaimed();
  }

  /** Stops following notices (the gateway is closing). */
  close(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    clearInterval(this.pruner);
  }

  adopt(child: ChildDirectory): void {
    this.children.push(child);
  }

  /** Called whenever an entity disappears: deleted here or elsewhere, by cascade, or dropped from the file. */
  onRemoved(listener: RemovedListener<T>): void {
    this.removedListeners.push(listener);
  }

  /**
   * Replaces the entities of gateway.yaml (on start and on every reload). Without a `created_at` in the
   * file, an entity keeps the one it got when it first appeared, and a `ttl` counts from then too: a
   * reload that leaves it in place neither renews it nor makes it look new.
   */
  setDeclared(entities: readonly Record<string, any>[]): void {
    const previous = this.declared;
    const next = emptyIndex<T>();
    const now = Date.now();
    for (const { ttl, ...raw } of entities) {
      const id = raw.id ?? randomUUID();
      const before = previous.byId.get(id) as Entity | undefined;
      const entity = this.withNulls({ created_at: before?.created_at ?? Math.floor(now / 1000), ...raw, id }) as Entity;
      if (ttl) entity[EXPIRES_AT] = before?.[EXPIRES_AT] ?? now + ttl * 1000;
      this.addTo(next, entity as T);
    }
    this.declared = next;
    // A reload does not wait for the cleanups: the entities are gone from every lookup at once.
    for (const [id, entity] of previous.byId) if (!next.byId.has(id)) void this.announceRemoved(entity, true);
  }

  isDeclared(entity: T): boolean {
    return this.declared.byId.get(entity.id) === entity;
  }

  byId(id: string): T | undefined {
    return this.live(this.declared.byId.get(id)) ?? this.live(this.runtime.byId.get(id));
  }

  /** The entity whose unique `field` holds `value` as given by a client (digested fields are digested here). */
  find(field: string, value: string): T | undefined {
    const stored = this.storedValue(field, value);
    return this.live(this.declared.unique.get(field)?.get(stored)) ?? this.live(this.runtime.unique.get(field)?.get(stored));
  }

  /** A parent's child by its `uniqueInParent` value (acls: a consumer's group). */
  findInParent(parentId: string, value: string): T | undefined {
    const field = this.definition.uniqueInParent;
    return field ? this.find(field, inParent(parentId, value)) : undefined;
  }

  /**
   * `byId`, or when this process does not know the id, the record the store holds now: another process
   * may have created it a moment ago, before its notice arrived here. For the admin API, whose client's
   * next request may reach another worker or node than the one that wrote.
   */
  async currentById(id: string): Promise<T | undefined> {
    return this.byId(id) ?? (await this.reread(id));
  }

  /** `find`, or on a miss the entity the store's claim of that value names (see `currentById`). */
  async currentBy(field: string, value: string): Promise<T | undefined> {
    const found = this.find(field, value);
    if (found) return found;
    const owner = await this.store.get(this.claimKey(field, this.storedValue(field, value)));
    return owner === undefined ? undefined : this.currentById(owner);
  }

  /** `findInParent`, or on a miss what the store holds (see `currentById`). */
  async currentInParent(parentId: string, value: string): Promise<T | undefined> {
    const field = this.definition.uniqueInParent;
    return field ? this.currentBy(field, inParent(parentId, value)) : undefined;
  }

  /** Every live entity: the declared ones in file order, then the runtime ones. */
  list(): T[] {
    const out: T[] = [];
    for (const index of [this.declared, this.runtime]) for (const entity of index.byId.values()) if (this.live(entity)) out.push(entity);
    return out;
  }

  /** The live children of one parent. */
  childrenOf(parentId: string): T[] {
    const out: T[] = [];
    for (const index of [this.declared, this.runtime]) for (const entity of index.byParent.get(parentId) ?? []) if (this.live(entity)) out.push(entity);
    return out;
  }

  /** The parent of a child, when it is alive. */
  parentOf(entity: T): Entity | undefined {
    const field = this.definition.parent?.field;
    const id = field ? entity[field]?.id : undefined;
    return typeof id === 'string' ? this.parent?.byId(id) : undefined;
  }

  /**
   * Writes a runtime entity: a new one (`previous` undefined) or the next version of `previous`. Unique
   * values are claimed in the same atomic step; UniqueViolationError / PrimaryKeyViolationError when taken.
   * `ttlSeconds` makes it expire (entities with `ttl`).
   */
  async save(entity: T, previous?: T, ttlSeconds?: number): Promise<T> {
    const record = this.withNulls(entity) as T;
    const expiresAt = ttlSeconds ? Date.now() + ttlSeconds * 1000 : undefined;
    if (expiresAt !== undefined) (record as Entity)[EXPIRES_AT] = expiresAt;
    this.checkTakenInMemory(record, previous);
    const { expectations, ops } = this.writeOf(record, previous, expiresAt);
    if (!(await this.store.commitIf(expectations, ops, { sync: true }))) throw await this.conflictOf(record, previous);
    if (previous) this.removeFrom(this.runtime, previous);
    this.addTo(this.runtime, record);
    this.touch(record.id);
    // The admin API answers once every process of this node serves the new version.
    await this.store.notices.publishAndWait(this.topic, record.id);
    return record;
  }

  /**
   * Deletes a runtime entity and, first, its runtime children of every type: each type's in one atomic
   * write of its own store (plugins' stores are namespaces apart). A failure leaves the parent in place,
   * so deleting it again finishes the job.
   */
  async remove(entity: T): Promise<void> {
    for (const child of this.children) await child.removeChildrenOf(entity.id);
    await this.removeAll([entity]);
  }

  /**
   * Deletes runtime entities in one write, each as this process last read it; when another process changed
   * one meanwhile, they are read again and the deletion retried. Resolves once the cleanups of their removal
   * have run.
   */
  private async removeAll(entities: T[]): Promise<void> {
    for (let attempt = 1; entities.length > 0; attempt++) {
      const expectations = entities.map((entity) => ({ key: this.keyPrefix + entity.id, value: storedForm(entity) }));
      if (await this.store.commitIf(expectations, entities.flatMap((entity) => this.deletionOps(entity)), { sync: true })) break;
      if (attempt === MAX_WRITE_ATTEMPTS) throw new ConcurrentChangeError(entities[0].id);
      entities = (await Promise.all(entities.map((entity) => this.reread(entity.id)))).filter((entity) => entity !== undefined);
    }
    // Once the admin API has answered, nothing that belonged to them is usable any more, anywhere.
    await Promise.all(entities.map((entity) => this.forget(entity, true)));
  }

  /**
   * The runtime entity as the store holds it now (after every refresh queued before): what a write that
   * met a concurrent change starts again from. Undefined when it is gone.
   */
  async reread(id: string): Promise<T | undefined> {
    await this.queueRefresh(() => this.refresh(id));
    return this.runtime.byId.get(id);
  }

  /** The stored form of a unique field's value: a digest for digested fields, scoped to the parent for `uniqueInParent`. */
  storedValue(field: string, value: string): string {
    return this.definition.digested?.includes(field) ? tokenDigest(value) : value;
  }

  /** When an expiring entity expires (ms), else undefined. */
  expiresAt(entity: T): number | undefined {
    return (entity as Entity)[EXPIRES_AT];
  }

  /** A parent this process deletes: its runtime children of this type go first, in one write. */
  removeChildrenOf(parentId: string): Promise<void> {
    return this.removeAll([...(this.runtime.byParent.get(parentId) ?? [])]);
  }

  /**
   * A parent deleted by another process: the children this process knows that the deleting one did not
   * yet (created here just before) are deleted too, so none outlives its parent with its values claimed.
   * Children the deleting process removed already are found gone on the way.
   */
  async removeOrphansOf(parentId: string): Promise<void> {
    try {
      await this.removeChildrenOf(parentId);
    } catch (err) {
      this.options.log?.error({ err, entity: this.definition.name, parent: parentId }, 'deleting the children of a deleted parent failed');
    }
  }

  // -- internals --------------------------------------------------------------------------------------

  /** A runtime entity removed from this process's view; the store was written already (or by another process). */
  private forget(entity: T, byThisProcess: boolean): Promise<void> {
    const current = this.runtime.byId.get(entity.id);
    if (!current) return Promise.resolve();
    this.removeFrom(this.runtime, current);
    if (byThisProcess) {
      this.touch(entity.id);
      return Promise.all([this.store.notices.publishAndWait(this.topic, entity.id), this.announceRemoved(current, true)]).then(() => undefined);
    }
    for (const child of this.children) void child.removeOrphansOf(entity.id);
    return this.announceRemoved(current, false);
  }

  /** Calls the listeners at once (so caches drop the entity before anything else runs); resolves when their cleanups end. */
  private announceRemoved(entity: T, byThisProcess: boolean): Promise<void> {
    const cleanups = this.removedListeners.map((listener) => {
      try {
        return Promise.resolve(listener(entity, byThisProcess));
      } catch (err) {
        return Promise.reject(err);
      }
    });
    return Promise.allSettled(cleanups).then((results) => {
      for (const result of results) {
        if (result.status === 'rejected') this.options.log?.error({ err: result.reason, entity: this.definition.name, id: entity.id }, 'cleaning up after a removed entity failed');
      }
    });
  }

  /** Expired runtime entities leave memory, so keys made and left to expire never pile up. */
  private pruneExpired(): void {
    const now = Date.now();
    for (const entity of [...this.runtime.byId.values()]) {
      const expiresAt = (entity as Entity)[EXPIRES_AT];
      if (expiresAt !== undefined && expiresAt <= now) this.removeFrom(this.runtime, entity);
    }
  }

  private live(entity: T | undefined): T | undefined {
    if (!entity) return undefined;
    const expiresAt = (entity as Entity)[EXPIRES_AT];
    if (expiresAt !== undefined && expiresAt <= Date.now()) return undefined;
    if (this.parent && !this.parentOf(entity)) return undefined;
    return entity;
  }

  /** Kong answers every field of the schema, unset ones as null. */
  private withNulls(entity: Record<string, any>): Record<string, any> {
    const out: Record<string, any> = { ...entity };
    for (const field of Object.keys(this.definition.schema.fields)) if (out[field] === undefined) out[field] = null;
    if (this.definition.parent && out[this.definition.parent.field] === undefined) out[this.definition.parent.field] = null;
    return out;
  }

  /** The values `entity` claims: field → stored value (a `uniqueInParent` value is scoped to its parent). */
  private claimsOf(entity: T): Map<string, string> {
    const claims = new Map<string, string>();
    for (const field of this.uniqueFields) {
      const value = entity[field];
      if (typeof value === 'string' || typeof value === 'number') claims.set(field, String(value));
    }
    const scoped = this.definition.uniqueInParent;
    const parentId = this.definition.parent ? entity[this.definition.parent.field]?.id : undefined;
    if (scoped && typeof parentId === 'string' && typeof entity[scoped] === 'string') claims.set(scoped, inParent(parentId, entity[scoped]));
    return claims;
  }

  private claimKey(field: string, value: string): string {
    const shown = value.length > MAX_PLAIN_CLAIM ? 'sha256:' + createHash('sha256').update(value).digest('base64url') : value;
    return `unique:${this.definition.name}:${field}:${shown}`;
  }

  /** A value another live entity (declared, or runtime as this process knows it) holds already. */
  private checkTakenInMemory(entity: T, previous: T | undefined): void {
    for (const [field, value] of this.claimsOf(entity)) {
      const holder = this.live(this.declared.unique.get(field)?.get(value)) ?? this.live(this.runtime.unique.get(field)?.get(value));
      if (holder && holder.id !== entity.id) throw this.uniqueViolation(field, entity);
    }
    if (!previous && (this.declared.byId.has(entity.id) || this.runtime.byId.has(entity.id))) throw new PrimaryKeyViolationError(entity.id);
  }

  private uniqueViolation(field: string, entity: T): UniqueViolationError {
    // A digest would tell the client nothing: the field is named without it.
    const shown = this.definition.digested?.includes(field) ? '(hidden)' : entity[field];
    return new UniqueViolationError({ [field]: shown });
  }

  /** The compare-and-set that writes `entity`: its unique values must be free or already its own. */
  private writeOf(entity: T, previous: T | undefined, expiresAt: number | undefined): { expectations: Expectation[]; ops: BatchOp[] } {
    const ttlMs = expiresAt === undefined ? undefined : Math.max(1, expiresAt - Date.now());
    // The record must still be the version this write replaces (absent for a new one).
    const expectations: Expectation[] = [{ key: this.keyPrefix + entity.id, value: previous && storedForm(previous) }];
    const ops: BatchOp[] = [{ type: 'put', key: this.keyPrefix + entity.id, value: storedForm(entity), ttlMs }];
    const before = previous ? this.claimsOf(previous) : new Map<string, string>();
    const after = this.claimsOf(entity);
    for (const [field, value] of after) {
      const key = this.claimKey(field, value);
      expectations.push({ key, value: before.get(field) === value ? entity.id : undefined });
      ops.push({ type: 'put', key, value: entity.id, ttlMs });
    }
    for (const [field, value] of before) if (after.get(field) !== value) ops.push({ type: 'del', key: this.claimKey(field, value) });
    return { expectations, ops };
  }

  /** Why a write's compare-and-set failed: a value another process claimed, or the id. */
  private async conflictOf(entity: T, previous: T | undefined): Promise<Error> {
    for (const [field, value] of this.claimsOf(entity)) {
      const owner = await this.store.get(this.claimKey(field, value));
      if (owner !== undefined && owner !== entity.id) return this.uniqueViolation(field, entity);
    }
    if (!previous) return new PrimaryKeyViolationError(entity.id);
    // The record was rewritten or deleted elsewhere after this process read it.
    return new ConcurrentChangeError(entity.id);
  }

  private deletionOps(entity: T): BatchOp[] {
    return [{ type: 'del', key: this.keyPrefix + entity.id }, ...[...this.claimsOf(entity)].map(([field, value]) => ({ type: 'del' as const, key: this.claimKey(field, value) }))];
  }

  private addTo(index: Indexed<T>, entity: T): void {
    index.byId.set(entity.id, entity);
    for (const [field, value] of this.claimsOf(entity)) {
      let values = index.unique.get(field);
      if (!values) index.unique.set(field, (values = new Map()));
      values.set(value, entity);
    }
    const parentId = this.parentIdOf(entity);
    if (parentId !== undefined) {
      let owned = index.byParent.get(parentId);
      if (!owned) index.byParent.set(parentId, (owned = new Set()));
      owned.add(entity);
    }
  }

  private removeFrom(index: Indexed<T>, entity: T): void {
    if (index.byId.get(entity.id) === entity) index.byId.delete(entity.id);
    for (const [field, value] of this.claimsOf(entity)) {
      const values = index.unique.get(field);
      if (values?.get(value) === entity) values.delete(value);
    }
    const parentId = this.parentIdOf(entity);
    if (parentId !== undefined) {
      const owned = index.byParent.get(parentId);
      owned?.delete(entity);
      if (owned?.size === 0) index.byParent.delete(parentId);
    }
  }

  private parentIdOf(entity: T): string | undefined {
    const field = this.definition.parent?.field;
    const id = field ? entity[field]?.id : undefined;
    return typeof id === 'string' ? id : undefined;
  }

  private queueRefresh(refresh: () => Promise<void>): Promise<void> {
    this.pendingRefreshes++;
    return (this.refreshing = this.refreshing
      .then(refresh)
      .catch((err) => {
        // The store is unreachable: the next notice (or the `null` after a reconnect) refreshes again.
        this.options.log?.warn({ err, entity: this.definition.name }, 'refreshing entities from the store failed');
      })
      .finally(() => {
        // No read in flight: no version needs remembering.
        if (--this.pendingRefreshes === 0) this.localVersions.clear();
      }));
  }

  private touch(id: string): void {
    this.localVersions.set(id, (this.localVersions.get(id) ?? 0) + 1);
  }

  /** Re-reads one entity another process (or this one) changed. */
  private async refresh(id: string): Promise<void> {
    const version = this.localVersions.get(id);
    const value = await this.store.get(this.keyPrefix + id);
    if (this.localVersions.get(id) !== version) return;
    const current = this.runtime.byId.get(id);
    if (value === undefined) {
      if (current) await this.forget(current, false);
      return;
    }
    if (current && storedForm(current) === value) return;
    if (current) this.removeFrom(this.runtime, current);
    this.addTo(this.runtime, JSON.parse(value) as T);
  }

  /** Reads every runtime entity again (at start, and when notices may have been lost). */
  private async reloadRuntime(): Promise<void> {
    const versions = new Map(this.localVersions);
    const loaded = new Map<string, T>();
    for await (const [, value] of this.store.scan({ prefix: this.keyPrefix })) {
      const entity = JSON.parse(value) as T;
      const current = this.runtime.byId.get(entity.id);
      // An unchanged entity stays the same object: what is remembered per object (a verified secret) stays valid.
      loaded.set(entity.id, current && storedForm(current) === value ? current : entity);
    }
    // What this process changed during the scan is newer than what the scan read.
    const changedMeanwhile = (id: string) => this.localVersions.get(id) !== versions.get(id);
    for (const [id, entity] of [...this.runtime.byId]) {
      if (!loaded.has(id) && !changedMeanwhile(id)) await this.forget(entity, false);
    }
    for (const entity of loaded.values()) {
      if (changedMeanwhile(entity.id)) continue;
      const current = this.runtime.byId.get(entity.id);
      if (current === entity) continue;
      if (current) this.removeFrom(this.runtime, current);
      this.addTo(this.runtime, entity);
    }
  }

  /** Entities written before unique values were claimed in the store get their claims (once). */
  private async claimUnclaimed(): Promise<void> {
    const claimed = new Set<string>();
    for await (const [key] of this.store.scan({ prefix: `unique:${this.definition.name}:` })) claimed.add(key);
    for (const entity of this.runtime.byId.values()) {
      const expiresAt = (entity as Entity)[EXPIRES_AT];
      const ttlMs = expiresAt === undefined ? undefined : Math.max(1, expiresAt - Date.now());
      for (const [field, value] of this.claimsOf(entity)) {
        const key = this.claimKey(field, value);
        if (!claimed.has(key)) await this.store.commitIf([{ key, value: undefined }], [{ type: 'put', key, value: entity.id, ttlMs }], { sync: true });
      }
    }
  }
}

/** The entity with its `digested` fields replaced by their digests: how it is held and stored. */
export function withDigests(definition: EntityDefinition, entity: Record<string, any>): Record<string, any> {
  if (!definition.digested) return entity;
  const out = { ...entity };
  for (const field of definition.digested) if (typeof out[field] === 'string') out[field] = tokenDigest(out[field]);
  return out;
}

/** A runtime entity as its record is stored: what a compare-and-set expects to find. */
function storedForm(entity: Entity): string {
  return JSON.stringify(entity);
}

/** A `uniqueInParent` value as it is indexed and claimed: scoped to its parent. */
function inParent(parentId: string, value: string): string {
  return `${parentId}/${value}`;
}

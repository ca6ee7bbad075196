/** What the loader offers the builders of each family of entities (reporting, ids, uniqueness, references). */
import { isUuid } from './entities.ts';
import type { Path, RecordSchema } from './schema.ts';
import { isPlainObject } from './schema.ts';
import type { Consumer, Route, Service, Timestamped } from './types.ts';

export interface BuildContext {
  /** An error at `path` (the file is refused). */
  issue(path: Path, message: string): void;
  /** Accepted, but worth telling the operator (e.g. a stream route that is not proxied). */
  warn(path: Path, message: string): void;
  /** Validates a record against `schema`, with its nested child arrays `nestedKeys` taken out first. */
  validateEntity<T>(schema: RecordSchema, raw: Record<string, any>, path: Path, nestedKeys: string[]): T;
  /** The given id, or one derived from `name` (stable across loads). */
  id(given: unknown, name: string): string;
  /** Reports `value` already taken in `pool`; true when it was. */
  unique(type: string, field: string, value: unknown, path: Path, pool: Record<string, any>[]): boolean;
  /** The record with the vault references of the fields `schema` marks `referenceable` resolved, or undefined when one cannot be (reported). */
  dereference(record: Record<string, any>, schema: RecordSchema, path: Path): Record<string, any> | undefined;
  /**
   * `entity` with Kong's `created_at` / `updated_at`: those the file gives in `given` (a Kong export has
   * them), else the load's time, which the gateway replaces by the ones it keeps for the entity.
   */
  stamped<T extends { id: string }>(kind: string, given: Record<string, any>, entity: T): T & Timestamped;
  /**
   * Whether `record` is an entity created through the admin API (not the file's): its reference to a
   * consumer may name one created through the API too, whose existence the write checked.
   */
  fromApi(record: Record<string, any>): boolean;
  /** Calls `add` for each record of the array `container[key]`, reporting what is not one. */
  eachEntry(container: Record<string, any>, key: string, add: (entry: Record<string, any>, path: Path) => void, base?: Path): void;
}

/** The core entities plugins and plugin entities attach to, filled in as the file is read. */
export interface CoreEntities {
  services: Service[];
  routes: Route[];
  consumers: Consumer[];
  /** Validated, not proxied: what is attached to one is left out with it. */
  streamRoutes: { id: string; name: string | null }[];
}

/** A reference to another entity: a name/endpoint key, an id, or `{id}` / `{name}`. */
export function refKey(ref: unknown): string | undefined {
  if (typeof ref === 'string') return ref;
  if (isPlainObject(ref)) return (ref.id ?? ref.name ?? ref.username) as string | undefined;
  return undefined;
}

/** An entry a reference can name: by its id, or by its name (a consumer by its username). */
export type Referable = { id: string; name?: string | null; username?: string | null };

/**
 * The entry a reference names, looking at one field only: `{id}` the id, `{name}`/`{username}` that name,
 * a plain string the id when UUID-shaped and the name otherwise (Kong's endpoint-key rule). Never both,
 * or an entry named like another's id would stand in for it.
 */
export function findReferenced<T extends Referable>(pool: T[], ref: unknown): T | undefined {
  // `{}` names nothing, not the first unnamed entry.
  const byName = (name: unknown) => (name === undefined ? undefined : pool.find((x) => (x.name ?? x.username) === name));
  if (typeof ref === 'string') return isUuid(ref) ? pool.find((x) => x.id === ref) : byName(ref);
  if (!isPlainObject(ref)) return undefined;
  return ref.id !== undefined ? pool.find((x) => x.id === ref.id) : byName(ref.name ?? ref.username);
}

/** Where a reference stands (`at`, the path of its value) and what it names: `field` of an entry of `entity`. */
export interface ReferenceSite {
  at: Path;
  field: string;
  entity: string;
  /** Left out, it is reported (`required field missing`); otherwise it means no reference. */
  required: boolean;
}

/** The id of the entry of `pool` that `ref` names; a reference to nothing is reported, so is a required one left out. */
export function resolveReference(ref: unknown, pool: Referable[], site: ReferenceSite, ctx: BuildContext): string | undefined {
  const key = refKey(ref);
  if (key === undefined) {
    if (site.required) ctx.issue(site.at, 'required field missing');
    return undefined;
  }
  const found = findReferenced(pool, ref);
  // Kong's message for a reference to nothing.
  if (!found) ctx.issue(site.at, `invalid reference '${site.field}: ${key}' (no such entry in '${site.entity}')`);
  return found?.id;
}

/** What the loader offers the builders of each family of entities (reporting, ids, uniqueness, references). */
import type { Path, RecordSchema } from './schema.ts';
import { isPlainObject } from './schema.ts';

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
  /** Calls `add` for each record of the array `container[key]`, reporting what is not one. */
  eachEntry(container: Record<string, any>, key: string, add: (entry: Record<string, any>, path: Path) => void, base?: Path): void;
}

/** A reference to another entity: a name/endpoint key, an id, or `{id}` / `{name}`. */
export function refKey(ref: unknown): string | undefined {
  if (typeof ref === 'string') return ref;
  if (isPlainObject(ref)) return (ref.id ?? ref.name ?? ref.username) as string | undefined;
  return undefined;
}

/** Kong's message for a reference to nothing. */
export function invalidReference(field: string, key: string, entity: string): string {
  return `invalid reference '${field}: ${key}' (no such entry in '${entity}')`;
}

/**
 * A small declarative schema language with Kong's validation messages, used for the core entities and
 * for every plugin's `config`. It validates, fills defaults and reports every problem with its path,
 * so the loader can point at FILE:LINE:COL.
 */
import { didYouMean } from '../did-you-mean.ts';

export type Path = (string | number)[];

/** A path as messages show it: `routes[0].paths[1]`. */
export function formatPath(path: Path): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

export interface Issue {
  path: Path;
  message: string;
}

export const UNKNOWN_FIELD = 'unknown field';

/** An unknown key, with the closest known one as a suggestion when it looks like a typo of it. */
export function unknownField(path: Path, known: Iterable<string>): Issue {
  return { path, message: UNKNOWN_FIELD + didYouMean(String(path[path.length - 1]), known) };
}

/** The issue is about the key itself (an unknown field): its position is the key's, not the value's. */
export function isAboutKey(issue: Issue): boolean {
  return issue.message.startsWith(UNKNOWN_FIELD);
}

interface Common<T> {
  required?: boolean;
  default?: T | (() => T);
  /** Extra check on a present value; returns a message when invalid. */
  custom?: (value: T) => string | undefined;
}

export interface StringSchema extends Common<string> {
  type: 'string';
  /** Kong's `referenceable`: a `{vault://…}` reference here is replaced by its value when the file loads (config/vaults.ts). */
  referenceable?: boolean;
  one_of?: readonly string[];
  match?: RegExp;
  match_message?: string;
  len_min?: number;
  len_max?: number;
}
export interface NumberSchema extends Common<number> {
  type: 'integer' | 'number';
  between?: readonly [number, number];
  gt?: number;
}
export interface BooleanSchema extends Common<boolean> {
  type: 'boolean';
}
export interface ArraySchema extends Common<readonly unknown[]> {
  type: 'array' | 'set';
  elements: FieldSchema;
  len_min?: number;
  len_max?: number;
}
export interface MapSchema extends Common<Record<string, unknown>> {
  type: 'map';
  keys?: StringSchema;
  values: FieldSchema;
}
export interface RecordSchema extends Common<Record<string, unknown>> {
  type: 'record';
  fields: Readonly<Record<string, FieldSchema>>;
  /** Checks over the whole (defaulted) record, as Kong's entity_checks. */
  entity_checks?: readonly EntityCheck[];
}

/**
 * A check over a whole record. `kong`, when set, is the check as Kong's schema declares it (e.g.
 * `{at_least_one_of: ['custom_id', 'username']}`, field names relative to the record), which
 * `/schemas/...` shows; a check without it has no declarative form there.
 */
export type EntityCheck = ((record: Record<string, any>) => Issue[]) & { readonly kong?: readonly Record<string, unknown>[] };

/** `check`, described as the Kong entity checks it implements. */
export function describedAs(kong: readonly Record<string, unknown>[], check: (record: Record<string, any>) => Issue[]): EntityCheck {
  return Object.assign(check, { kong });
}
export interface AnySchema extends Common<unknown> {
  type: 'any';
}
export type FieldSchema = StringSchema | NumberSchema | BooleanSchema | ArraySchema | MapSchema | RecordSchema | AnySchema;

/**
 * The value `validate` returns for `schema` and a present, non-null input when it reports no issue;
 * the schema must keep its literal types (`as const satisfies RecordSchema`). It follows `check`
 * exactly: a required field is there (null is refused); a field with a default is there (an explicit
 * null reads as the default); a record whose fields have defaults is filled in when absent or null, so
 * it is there too; any other field may be absent or null. Array elements and map values are never null.
 */
export type Infer<S extends FieldSchema> = S extends StringSchema
  ? S['one_of'] extends readonly (infer L extends string)[] ? L : string
  : S extends NumberSchema
    ? number
    : S extends BooleanSchema
      ? boolean
      : S extends ArraySchema
        ? Infer<S['elements']>[]
        : S extends MapSchema
          ? Record<string, Infer<S['values']>>
          : S extends RecordSchema
            ? RecordValue<S['fields']>
            : unknown;

/** A field's value: null only where the field is neither required nor filled in when absent. */
type FieldValue<S extends FieldSchema> = AlwaysThere<S> extends true ? Infer<S> : Infer<S> | null;

type Fields = Readonly<Record<string, FieldSchema>>;

/** Whether `check` always puts the field in its record: required, defaulted, or a record it fills. */
type AlwaysThere<S extends FieldSchema> = S extends { required: true } ? true : FilledWhenAbsent<S>;

/** `defaultOf`, or `hasDefaults` for a record (where `required` alone does not count). */
type FilledWhenAbsent<S extends FieldSchema> = S extends { default: {} }
  ? true
  : S extends RecordSchema
    ? true extends { [K in keyof S['fields']]: FilledWhenAbsent<S['fields'][K]> }[keyof S['fields']] ? true : false
    : false;

type RecordValue<F extends Fields> = Flatten<
  { -readonly [K in keyof F as AlwaysThere<F[K]> extends true ? K : never]: FieldValue<F[K]> } & {
    -readonly [K in keyof F as AlwaysThere<F[K]> extends true ? never : K]?: FieldValue<F[K]>;
  }
>;
type Flatten<T> = { [K in keyof T]: T[K] };

export interface Validated<T> {
  value: T;
  issues: Issue[];
}

/** Keys Kong allows inside any entity and ignores. */
const IGNORED_KEYS = new Set(['_comment', '_ignore']);

export function validate<T = any>(schema: FieldSchema, input: unknown, path: Path = []): Validated<T> {
  const issues: Issue[] = [];
  const value = check(schema, input, path, issues);
  return { value: value as T, issues };
}

function defaultOf(schema: FieldSchema): unknown {
  const d = schema.default;
  if (typeof d === 'function') return (d as () => unknown)();
  if (Array.isArray(d)) return [...d];
  if (d && typeof d === 'object') return structuredClone(d);
  return d;
}

/**
 * `entry`: an array element or a map value, which Kong's validator requires (validate_elements): a null
 * one is refused as a required field's would be.
 */
function check(schema: FieldSchema, input: unknown, path: Path, issues: Issue[], entry = false): unknown {
  if (input === undefined) {
    if (schema.default !== undefined) return defaultOf(schema);
    // Kong fills nested records with their defaults when absent, required ones too.
    if (schema.type === 'record' && hasDefaults(schema)) return check(schema, {}, path, issues);
    if (schema.required) issues.push({ path, message: 'required field missing' });
    return undefined;
  }
  if (input === null) {
    if (schema.required || entry) issues.push({ path, message: 'required field missing' });
    // Kong stores such a null, but hands plugins and the proxy a stored null as absent (process_auto_fields
    // "select" without nulls): where absent means a default, the null means it too.
    else if (schema.default !== undefined || (schema.type === 'record' && hasDefaults(schema))) return check(schema, undefined, path, issues);
    return null;
  }
  const before = issues.length;
  const value = checkType(schema, input, path, issues);
  if (issues.length === before && schema.custom && value !== undefined) {
    const message = (schema.custom as (v: unknown) => string | undefined)(value);
    if (message) issues.push({ path, message });
  }
  return value;
}

function hasDefaults(schema: RecordSchema): boolean {
  return Object.values(schema.fields).some(
    (f) => f.default !== undefined || (f.type === 'record' && hasDefaults(f)),
  );
}

function checkType(schema: FieldSchema, input: unknown, path: Path, issues: Issue[]): unknown {
  switch (schema.type) {
    case 'string':
      return checkString(schema, input, path, issues);
    case 'integer':
    case 'number':
      return checkNumber(schema, input, path, issues);
    case 'boolean':
      if (typeof input !== 'boolean') issues.push({ path, message: 'expected a boolean' });
      return input;
    case 'array':
    case 'set':
      return checkArray(schema, input, path, issues);
    case 'map':
      return checkMap(schema, input, path, issues);
    case 'record':
      return checkRecord(schema, input, path, issues);
    case 'any':
      return input;
  }
}

function checkString(schema: StringSchema, input: unknown, path: Path, issues: Issue[]): unknown {
  if (typeof input !== 'string') {
    issues.push({ path, message: 'expected a string' });
    return input;
  }
  if (schema.len_min !== undefined && input.length < schema.len_min) {
    issues.push({ path, message: schema.len_min === 1 ? 'length must be at least 1' : `length must be at least ${schema.len_min}` });
  } else if (schema.len_max !== undefined && input.length > schema.len_max) {
    issues.push({ path, message: `length must be at most ${schema.len_max}` });
  } else if (schema.one_of && !schema.one_of.includes(input)) {
    issues.push({ path, message: `expected one of: ${schema.one_of.join(', ')}` });
  } else if (schema.match && !schema.match.test(input)) {
    issues.push({ path, message: schema.match_message ?? `invalid value: ${input}` });
  }
  return input;
}

function checkNumber(schema: NumberSchema, input: unknown, path: Path, issues: Issue[]): unknown {
  if (typeof input !== 'number' || Number.isNaN(input)) {
    issues.push({ path, message: schema.type === 'integer' ? 'expected an integer' : 'expected a number' });
    return input;
  }
  if (schema.type === 'integer' && !Number.isInteger(input)) {
    issues.push({ path, message: 'expected an integer' });
  } else if (schema.between && (input < schema.between[0] || input > schema.between[1])) {
    issues.push({ path, message: `value should be between ${schema.between[0]} and ${schema.between[1]}` });
  } else if (schema.gt !== undefined && !(input > schema.gt)) {
    issues.push({ path, message: `value must be greater than ${schema.gt}` });
  }
  return input;
}

function checkArray(schema: ArraySchema, input: unknown, path: Path, issues: Issue[]): unknown {
  if (!Array.isArray(input)) {
    issues.push({ path, message: `expected ${schema.type === 'set' ? 'a set' : 'an array'}` });
    return input;
  }
  if (schema.len_min !== undefined && input.length < schema.len_min) {
    issues.push({ path, message: `length must be at least ${schema.len_min}` });
  }
  // As Kong: a list too long is refused whole, its elements unread.
  if (schema.len_max !== undefined && input.length > schema.len_max) {
    issues.push({ path, message: `length must be at most ${schema.len_max}` });
    return input;
  }
  const out = input.map((item, i) => check(schema.elements, item, [...path, i], issues, true));
  return schema.type === 'set' ? [...new Set(out)] : out;
}

function checkMap(schema: MapSchema, input: unknown, path: Path, issues: Issue[]): unknown {
  if (!isPlainObject(input)) {
    issues.push({ path, message: 'expected a map' });
    return input;
  }
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(input)) {
    if (schema.keys) check(schema.keys, key, [...path, key], issues);
    out[key] = check(schema.values, item, [...path, key], issues, true);
  }
  return out;
}

function checkRecord(schema: RecordSchema, input: unknown, path: Path, issues: Issue[]): unknown {
  if (!isPlainObject(input)) {
    issues.push({ path, message: 'expected a record' });
    return input;
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(input)) {
    // Own fields only: `constructor` or `__proto__` are unknown keys too, not Object.prototype's.
    if (!Object.hasOwn(schema.fields, key) && !IGNORED_KEYS.has(key)) issues.push(unknownField([...path, key], Object.keys(schema.fields)));
  }
  const before = issues.length;
  for (const [key, field] of Object.entries(schema.fields)) {
    const v = check(field, input[key], [...path, key], issues);
    if (v !== undefined) out[key] = v;
  }
  if (issues.length === before && schema.entity_checks) {
    for (const entityCheck of schema.entity_checks) {
      for (const issue of entityCheck(out)) issues.push({ path: [...path, ...issue.path], message: issue.message });
    }
  }
  return out;
}

export function isPlainObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Kong's "at least one of these fields must be non-empty" entity check. */
export function atLeastOneOf(fields: string[]): EntityCheck {
  return describedAs([{ at_least_one_of: fields }], (r) => {
    const present = fields.some((f) => {
      const v = r[f];
      return v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0) && !(isPlainObject(v) && Object.keys(v).length === 0);
    });
    return present ? [] : [{ path: [], message: `at least one of these fields must be non-empty: ${fields.map((f) => `'${f}'`).join(', ')}` }];
  });
}

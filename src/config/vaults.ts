/**
 * Kong's `vaults` entity and its `{vault://<prefix>/<resource>[/<key>]}` references, for the vault Kong
 * OSS ships: `env` (kong/vaults/env, reference syntax of kong/pdk/vault.lua). A reference in a field Kong
 * marks `referenceable` is replaced by its value while the file loads, so again on every reload; one that
 * cannot be resolved is an error at that field. Anywhere else a reference is a plain string, as in Kong.
 */
import { ENTITY_KEYS, TAGS } from './entities.ts';
import type { BuildContext } from './builder-context.ts';
import { isPlainObject, type FieldSchema, type Path, type RecordSchema } from './schema.ts';
import type { VaultEntity } from './types.ts';

/** The vaults Kong OSS bundles; a `vaults` entity configures one under a prefix of its own. */
const BUNDLED_VAULTS = ['env'];

export const vaultSchema: RecordSchema = {
  type: 'record',
  fields: {
    ...ENTITY_KEYS,
    // Kong's pattern: usable as the host of a reference, and no bundled vault's name.
    prefix: {
      type: 'string',
      required: true,
      match: /^[a-z][a-z\d-]*?[a-z\d]+$/,
      custom: (p) => (BUNDLED_VAULTS.includes(p) ? `expected none of: ${BUNDLED_VAULTS.join(', ')}` : undefined),
    },
    name: { type: 'string', required: true, custom: (n) => (BUNDLED_VAULTS.includes(n) ? undefined : `vault '${n}' is not installed`) },
    description: { type: 'string' },
    config: { type: 'record', fields: { prefix: { type: 'string', match: /^[A-Za-z_-][A-Za-z\d_-]*$/ } } },
    tags: TAGS,
  },
};

/** An `env` vault's settings: the prefix its variable names start with. */
interface EnvVault {
  prefix: string;
}

/** The vaults a reference may name, by prefix: `env` itself, and those the file's `vaults` configure. */
export type Vaults = Map<string, EnvVault>;

/** The file's `vaults` entities, and every vault a reference may name. */
export function buildVaults(raw: Record<string, any>, ctx: BuildContext): { entities: VaultEntity[]; byPrefix: Vaults } {
  const byPrefix: Vaults = new Map([['env', { prefix: '' }]]);
  const entities: VaultEntity[] = [];
  ctx.eachEntry(raw, 'vaults', (entry, path) => {
    const v = ctx.validateEntity<Record<string, any>>(vaultSchema, entry, path, []);
    if (typeof v.prefix !== 'string' || typeof v.name !== 'string') return;
    const id = ctx.id(v.id, `vaults:${v.prefix}`);
    if (ctx.unique('vaults', 'prefix', v.prefix, path, entities) || ctx.unique('vaults', 'id', id, path, entities)) return;
    const config = { prefix: v.config?.prefix ?? null };
    entities.push(ctx.stamped('vaults', v, { id, name: v.name, prefix: v.prefix, description: v.description ?? null, config, tags: v.tags ?? null }));
    byPrefix.set(v.prefix, { prefix: config.prefix ?? '' });
  });
  return { entities, byPrefix };
}

/** Kong's `is_reference`: `{vault://…}`. */
export function isVaultReference(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('{vault://') && value.endsWith('}');
}

/**
 * The record with the references in the fields `schema` marks `referenceable` (in nested records and
 * lists too) replaced by their values, or undefined when one cannot be resolved: that is reported at its
 * field, and the entity is left out. What the schema would refuse is left as it is, for it to report;
 * a record without references comes back as it was given (the same object).
 */
export function resolveReferences(
  record: Record<string, any>,
  schema: RecordSchema,
  path: Path,
  vaults: Vaults,
  ctx: Pick<BuildContext, 'issue'>,
): Record<string, any> | undefined {
  let resolvedAll = true;
  const resolveIn = (field: FieldSchema, value: unknown, at: Path): unknown => {
    if (field.type === 'string' && field.referenceable && isVaultReference(value)) {
      const resolved = resolveReference(value, vaults);
      if ('value' in resolved) return resolved.value;
      ctx.issue(at, `cannot resolve ${value}: ${resolved.error}`);
      resolvedAll = false;
      return value;
    }
    if (field.type === 'record' && isPlainObject(value)) {
      return changedOnly(
        value,
        Object.entries(value).map(([key, v]) => [
          key,
          Object.hasOwn(field.fields, key) ? resolveIn(field.fields[key], v, [...at, key]) : v,
        ]),
      );
    }
    if ((field.type === 'array' || field.type === 'set') && Array.isArray(value)) {
      const resolved = value.map((v, i) => resolveIn(field.elements, v, [...at, i]));
      return resolved.every((v, i) => v === value[i]) ? value : resolved;
    }
    if (field.type === 'map' && isPlainObject(value)) return changedOnly(value, Object.entries(value).map(([key, v]) => [key, resolveIn(field.values, v, [...at, key])]));
    return value;
  };
  const out = resolveIn(schema, record, path) as Record<string, any>;
  return resolvedAll ? out : undefined;
}

/** `record` itself when none of `entries` (its own, some resolved) differs from it, else the record they make. */
function changedOnly(record: Record<string, unknown>, entries: [string, unknown][]): Record<string, unknown> {
  return entries.every(([key, v]) => v === record[key]) ? record : Object.fromEntries(entries);
}

function resolveReference(reference: string, vaults: Vaults): { value: string } | { error: string } {
  let url: URL;
  try {
    url = new URL(reference.slice(1, -1));
  } catch {
    return { error: 'not a valid reference' };
  }
  const vault = vaults.get(url.hostname);
  if (!vault) return { error: `no vault with prefix '${url.hostname}'` };
  const parts = url.pathname.slice(1).split('/').map(decodeURIComponent);
  if (parts[0] === '') return { error: 'the reference names no secret' };
  // `<resource>/<key>`: the resource holds a JSON object, the key one of its strings (a trailing `/` names a directory).
  const key = parts.length > 1 && parts.at(-1) !== '' ? parts.pop() : undefined;
  const version = url.hash ? Number(url.hash.slice(1)) : undefined;
  if (version !== undefined && !Number.isInteger(version)) return { error: 'invalid version' };
  // Kong's env vault: the prefix (a `?prefix=` of the reference first), then the resource, upper-cased.
  const prefix = url.searchParams.get('prefix') ?? vault.prefix;
  const variable = (prefix + parts.join('/')).toUpperCase() + (version === 2 ? '_PREVIOUS' : '');
  const value = process.env[variable];
  if (value === undefined) return { error: `environment variable ${variable} is not set` };
  return key === undefined ? { value } : valueAtKey(value, key, variable);
}

function valueAtKey(json: string, key: string, variable: string): { value: string } | { error: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return { error: `environment variable ${variable} does not hold a JSON object` };
  }
  const value = typeof parsed === 'object' && parsed !== null && Object.hasOwn(parsed, key) ? (parsed as Record<string, unknown>)[key] : undefined;
  if (value === undefined) return { error: `subfield ${key} not found in JSON secret` };
  if (typeof value !== 'string') return { error: `unexpected ${typeof value} value in JSON secret for subfield ${key}` };
  return { value };
}

/**
 * Kong's `/schemas/...` endpoints (kong/api/routes/kong.lua): each entity's schema and each plugin's, in
 * Kong's JSON shape (`{fields: [{<name>: {type, required, default, ...}}], entity_checks: [...]}`,
 * kong/api/api_helpers.lua `schema_to_jsonable`; a plugin's checks at its top, on `config.` fields), and `POST .../validate`, which checks a body with the validator gateway.yaml is
 * read with and answers as Kong does (200 `schema validation successful`, or 400 schema violation).
 */
import { CORE_ENTITY_SCHEMAS } from '../config/entity-schemas.ts';
import { pluginEntitySchema } from '../config/entities.ts';
import { validate, type FieldSchema, type Issue, type RecordSchema } from '../config/schema.ts';
import type { AdminReply, AdminRoute, EntityDefinition, PluginRegistry } from '../pdk/types.ts';
import { HttpError } from '../pipeline/http-error.ts';
import { SchemaViolationError } from '../toolkit/admin-errors.ts';

type KongField = Record<string, unknown>;

/** The foreign keys Tollgate's schemas accept as `{id}` records of any shape (typed `any`). */
const FOREIGN: Readonly<Record<string, string>> = { route: 'routes', service: 'services', consumer: 'consumers' };

/** Fields the admin API sets itself on the entities plugins add (src/toolkit/entity-admin.ts). */
const AUTO_FIELDS: Readonly<Record<string, FieldSchema>> = { id: { type: 'string' }, created_at: { type: 'integer' } };

interface EntitySchema {
  schema: RecordSchema;
  /** Present on the body, validated apart from `schema` (a credential's consumer, its id). */
  outside: string[];
  json(): KongField;
}

export function schemaAdminRoutes(registry: PluginRegistry): AdminRoute[] {
  const entities = entitySchemas(registry);
  const entityNamed = (name: string): EntitySchema => {
    const entity = entities.get(name);
    if (!entity) throw new HttpError(404, `No entity named '${name}'`);
    return entity;
  };
  return [
    { method: 'GET', path: '/schemas/:name', handler: (req) => ({ status: 200, body: entityNamed(req.params.name).json() }) },
    {
      method: 'GET',
      path: '/schemas/plugins/:name',
      handler: (req) => {
        const plugin = registry.get(req.params.name);
        if (!plugin) throw new HttpError(404, `No plugin named '${req.params.name}'`);
        return { status: 200, body: pluginJson(plugin.configSchema, plugin.noConsumer === true) };
      },
    },
    { method: 'POST', path: '/schemas/plugins/validate', handler: (req) => validationAnswer(pluginIssues(req.body, registry)) },
    {
      method: 'POST',
      path: '/schemas/:name/validate',
      handler: (req) => {
        const { schema, outside } = entityNamed(req.params.name);
        const body = Object.fromEntries(Object.entries(req.body).filter(([field]) => !outside.includes(field)));
        return validationAnswer(validate(schema, body).issues);
      },
    },
  ];
}

function validationAnswer(issues: Issue[]): AdminReply {
  if (issues.length > 0) throw new SchemaViolationError(issues);
  return { status: 200, body: { message: 'schema validation successful' } };
}

function entitySchemas(registry: PluginRegistry): Map<string, EntitySchema> {
  const entities = new Map<string, EntitySchema>();
  for (const [name, schema] of Object.entries(CORE_ENTITY_SCHEMAS)) entities.set(name, { schema, outside: [], json: () => recordJson(schema) });
  for (const plugin of registry.values()) {
    for (const definition of plugin.entities ?? []) entities.set(definition.name, pluginEntitySchemaOf(definition));
  }
  return entities;
}

/** An entity a plugin adds: its schema, plus the id and parent the admin API handles (as Kong's DAO shows them). */
function pluginEntitySchemaOf(definition: EntityDefinition): EntitySchema {
  const parent = definition.parent;
  const outside = ['id', 'created_at', 'ttl', ...(parent ? [parent.field] : [])];
  const parentJson = parent ? [{ [parent.field]: { type: 'foreign', reference: parent.entity, required: parent.required ?? false } }] : [];
  const json = () => ({ fields: [...fieldsJson(AUTO_FIELDS), ...parentJson, ...fieldsJson(definition.schema.fields)] });
  return { schema: definition.schema, outside, json };
}

/** Kong's plugin subschema: the scope's foreign keys, protocols, and the plugin's `config`, whose checks Kong writes at the top. */
function pluginJson(configSchema: RecordSchema, noConsumer: boolean): KongField {
  const consumer = { type: 'foreign', reference: 'consumers', ...(noConsumer ? { eq: null } : {}) };
  const { entity_checks: configChecks, ...config } = fieldJson('config', configSchema);
  const fields = [
    { consumer },
    { service: { type: 'foreign', reference: 'services' } },
    { route: { type: 'foreign', reference: 'routes' } },
    { protocols: fieldJson('protocols', pluginEntitySchema.fields.protocols) },
    { config: { ...config, required: true } },
  ];
  return withChecks({ fields }, ((configChecks as KongField[] | undefined) ?? []).map((check) => withFieldPrefix(check, 'config.')));
}

/** Keys of Kong's entity checks that name fields, alone or in lists. */
const FIELD_KEYS = new Set(['if_field', 'then_field']);
const FIELD_LIST_KEYS = new Set(['at_least_one_of', 'only_one_of', 'mutually_required', 'mutually_exclusive', 'field_sources']);

/** A check on a record's fields, as its parent names them (`config.allow`). */
function withFieldPrefix(check: KongField, prefix: string): KongField {
  return Object.fromEntries(
    Object.entries(check).map(([key, value]) => {
      if (FIELD_KEYS.has(key)) return [key, prefix + String(value)];
      if (FIELD_LIST_KEYS.has(key)) return [key, (value as string[]).map((field) => prefix + field)];
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return [key, withFieldPrefix(value as KongField, prefix)];
      return [key, value];
    }),
  );
}

function withChecks(json: KongField, checks: KongField[]): KongField {
  return checks.length > 0 ? { ...json, entity_checks: checks } : json;
}

/** A plugin instance as `/plugins` takes it: the entity's fields, and `config` by the named plugin's schema. */
function pluginIssues(body: Record<string, any>, registry: PluginRegistry): Issue[] {
  const { config, ...entity } = body;
  const issues = validate(pluginEntitySchema, entity).issues;
  const plugin = typeof body.name === 'string' ? registry.get(body.name) : undefined;
  if (plugin) issues.push(...validate(plugin.configSchema, config ?? {}, ['config']).issues);
  else if (typeof body.name === 'string') {
    issues.push({ path: ['name'], message: `plugin '${body.name}' not enabled; add it to the 'plugins' configuration property` });
  }
  return issues;
}

function recordJson(schema: RecordSchema): KongField {
  return withChecks({ fields: fieldsJson(schema.fields) }, (schema.entity_checks ?? []).flatMap((check) => check.kong ?? []));
}

function fieldsJson(fields: Readonly<Record<string, FieldSchema>>): KongField[] {
  return Object.entries(fields).map(([name, field]) => ({ [name]: fieldJson(name, field) }));
}

/** One field as Kong shows it. Checks written as code (`custom`, entity checks not `describedAs`) have no JSON form and are left out. */
function fieldJson(name: string, field: FieldSchema): KongField {
  if (field.type === 'any') return FOREIGN[name] ? { type: 'foreign', reference: FOREIGN[name] } : { type: 'json' };
  const json: KongField = { type: field.type };
  if (field.required) json.required = true;
  if (field.default !== undefined && typeof field.default !== 'function') json.default = field.default;
  if (field.type === 'string') {
    Object.assign(json, defined({ one_of: field.one_of, len_min: field.len_min, len_max: field.len_max, referenceable: field.referenceable }));
  }
  if (field.type === 'integer' || field.type === 'number') Object.assign(json, defined({ between: field.between, gt: field.gt }));
  if (field.type === 'array' || field.type === 'set') Object.assign(json, defined({ elements: fieldJson(name, field.elements), len_min: field.len_min }));
  if (field.type === 'map') Object.assign(json, defined({ keys: field.keys && fieldJson(name, field.keys), values: fieldJson(name, field.values) }));
  if (field.type === 'record') Object.assign(json, recordJson(field));
  return json;
}

function defined(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}

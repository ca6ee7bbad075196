/**
 * Meters: their shape, and the create/update validation rules of OpenMeter's meter service with its
 * messages (reference §3.2), shared by the HTTP API and the `meters:` entity of gateway.yaml.
 */
import { isPlainObject } from '../../../src/pdk/index.ts';
import type { InvalidParameter } from '../shared/errors.ts';
import { compileJsonPath } from '../shared/jsonpath.ts';
import { KEY_PATTERN, MAX_DIMENSIONS, MAX_IDENTIFIER_LENGTH, MAX_JSONPATH_LENGTH, MAX_NAME_LENGTH } from '../shared/limits.ts';
import { formatUtc, isPrintable, parseRfc3339, PRINTABLE_FROM, PRINTABLE_TO } from '../shared/time.ts';

export const AGGREGATIONS = ['sum', 'count', 'unique_count', 'avg', 'min', 'max', 'latest'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];

const DIMENSION_NAME_PATTERN = /^[a-zA-Z_][0-9a-zA-Z_]*$/;
/** Query dimensions that always mean the event's own attributes. */
export const RESERVED_DIMENSIONS = ['subject', 'customer_id'];

export interface MeterDefinition {
  key: string;
  name: string;
  description: string | null;
  labels: Record<string, string>;
  aggregation: Aggregation;
  event_type: string;
  events_from: string | null;
  value_property: string | null;
  dimensions: Record<string, string>;
}

export interface Meter extends MeterDefinition {
  id: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

const CREATE_FIELDS = ['key', 'name', 'description', 'labels', 'aggregation', 'event_type', 'events_from', 'value_property', 'dimensions'];
const UPDATE_FIELDS = ['name', 'description', 'labels', 'dimensions'];

function problem(field: string, reason: string, rule = 'invalid'): InvalidParameter {
  return { field, reason, rule, source: 'body' };
}

function unknownFields(body: Record<string, unknown>, allowed: string[]): InvalidParameter[] {
  return Object.keys(body)
    .filter((k) => !allowed.includes(k))
    .map((k) => problem(k, 'unknown property', 'unknown_property'));
}

function checkString(body: Record<string, unknown>, field: string, max: number, out: InvalidParameter[]): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== 'string') out.push(problem(field, 'must be a string', 'is_string'));
  else if (v.length > max) out.push({ ...problem(field, `length must be at most ${max}`, 'max_length'), maximum: max });
}

function checkName(body: Record<string, unknown>, required: boolean, out: InvalidParameter[]): void {
  checkString(body, 'name', 256, out);
  if (required && (body.name === undefined || body.name === null || body.name === '')) out.push(problem('name', 'name is required', 'required'));
}

function checkDescription(body: Record<string, unknown>, out: InvalidParameter[]): void {
  checkString(body, 'description', 1024, out);
  if (body.description === '') out.push(problem('description', 'description must not be empty string'));
}

function checkLabels(body: Record<string, unknown>, out: InvalidParameter[]): void {
  const labels = body.labels;
  if (labels === undefined || labels === null) return;
  if (!isPlainObject(labels)) return void out.push(problem('labels', 'must be an object of strings', 'type'));
  if (Object.keys(labels).length > 50) out.push(problem('labels', 'at most 50 labels are allowed', 'max_items'));
  for (const [k, v] of Object.entries(labels)) {
    if (k.length === 0 || k.length > MAX_NAME_LENGTH) out.push(tooLong(`labels.${k}`, 'a label key', MAX_NAME_LENGTH));
    if (typeof v !== 'string') out.push(problem(`labels.${k}`, 'must be a string', 'is_string'));
    else if (v.length === 0 || v.length > MAX_NAME_LENGTH) out.push(tooLong(`labels.${k}`, 'a label value', MAX_NAME_LENGTH));
  }
}

function tooLong(field: string, what: string, max: number): InvalidParameter {
  return { ...problem(field, `${what} must be 1 to ${max} characters long`, 'max_length'), maximum: max };
}

function checkValueProperty(body: Record<string, unknown>, out: InvalidParameter[]): void {
  const aggregation = body.aggregation;
  const vp = body.value_property;
  const present = vp !== undefined && vp !== null;
  if (present && typeof vp !== 'string') return void out.push(problem('value_property', 'must be a string', 'is_string'));
  if (aggregation === 'count') {
    if (present) out.push(problem('value_property', 'invalid meter aggregation: meter value property is not allowed when the aggregation is count'));
    return;
  }
  if (!(AGGREGATIONS as readonly unknown[]).includes(aggregation)) return;
  if (!present) out.push(problem('value_property', 'invalid meter aggregation: meter value property is required when the aggregation is not count', 'required'));
  else if (vp === '') out.push(problem('value_property', 'invalid meter aggregation: meter value property cannot be empty when the aggregation is not count'));
  else if (!vp.startsWith('$')) out.push(problem('value_property', 'invalid meter aggregation: meter value property must start with $'));
  else if (vp.length > MAX_JSONPATH_LENGTH) out.push(tooLong('value_property', 'a JSONPath', MAX_JSONPATH_LENGTH));
  else if (!compileJsonPath(vp)) out.push(problem('value_property', `invalid JSONPath: ${vp}`));
}

function checkDimensions(body: Record<string, unknown>, valueProperty: unknown, out: InvalidParameter[]): void {
  const dims = body.dimensions;
  if (dims === undefined || dims === null) return;
  if (!isPlainObject(dims)) return void out.push(problem('dimensions', 'must be an object mapping names to JSONPath', 'type'));
  const names = Object.keys(dims);
  if (names.length > MAX_DIMENSIONS) return void out.push({ ...problem('dimensions', `at most ${MAX_DIMENSIONS} dimensions are allowed`, 'max_items'), maximum: MAX_DIMENSIONS });
  for (const [name, path] of Object.entries(dims)) {
    const field = `dimensions.${name}`;
    if (name.trim() === '') out.push(problem(field, 'meter group by key cannot be empty'));
    else if (name.length > MAX_NAME_LENGTH) out.push(tooLong(field, 'a dimension name', MAX_NAME_LENGTH));
    else if (!DIMENSION_NAME_PATTERN.test(name)) {
      out.push(problem(field, `meter group by key ${name} is invalid, only alphanumeric and underscore characters are allowed`));
    } else if (RESERVED_DIMENSIONS.includes(name)) out.push(problem(field, `dimension ${name} is reserved`, 'reserved_dimension'));
    if (typeof path !== 'string') out.push(problem(field, 'must be a string', 'is_string'));
    else if (!path.startsWith('$')) out.push(problem(field, `invalid meter group by: meter group by value must start with $ for key ${name}`));
    else if (path === valueProperty) out.push(problem(field, `meter group by value ${name} cannot be the same as value property`));
    else if (path.length > MAX_JSONPATH_LENGTH) out.push(tooLong(field, 'a JSONPath', MAX_JSONPATH_LENGTH));
    else if (!compileJsonPath(path)) out.push(problem(field, `invalid JSONPath for ${name} group by: ${path}`));
  }
}

/** Every problem of a `POST /meters` body (or a gateway.yaml meter when `nameDefaultsToKey`). */
export function validateMeterCreate(body: unknown, options: { nameDefaultsToKey?: boolean; sealed?: boolean } = {}): InvalidParameter[] {
  if (!isPlainObject(body)) return [problem('', 'request body must be a JSON object', 'type')];
  const out: InvalidParameter[] = options.sealed === false ? [] : unknownFields(body, CREATE_FIELDS);
  const key = body.key;
  if (key === undefined || key === null || key === '') out.push(problem('key', 'key is required', 'required'));
  else if (typeof key !== 'string') out.push(problem('key', 'must be a string', 'is_string'));
  else if (key.length > 64) out.push({ ...problem('key', 'length must be at most 64', 'max_length'), maximum: 64 });
  else if (!KEY_PATTERN.test(key)) out.push(problem('key', `must match pattern ${KEY_PATTERN.source}`, 'matches_regex'));
  checkName(body, !options.nameDefaultsToKey, out);
  checkDescription(body, out);
  checkLabels(body, out);
  const aggregation = body.aggregation;
  if (aggregation === undefined || aggregation === null || aggregation === '') out.push(problem('aggregation', 'meter aggregation is required', 'required'));
  else if (!(AGGREGATIONS as readonly unknown[]).includes(aggregation)) {
    out.push({ ...problem('aggregation', `must be one of: ${AGGREGATIONS.join(', ')}`, 'enum'), choices: AGGREGATIONS });
  }
  const eventType = body.event_type;
  if (eventType === undefined || eventType === null || eventType === '') out.push(problem('event_type', 'meter event type is required', 'required'));
  else if (typeof eventType !== 'string') out.push(problem('event_type', 'must be a string', 'is_string'));
  else if (eventType.length > MAX_IDENTIFIER_LENGTH) out.push(tooLong('event_type', 'an event type', MAX_IDENTIFIER_LENGTH));
  const from = body.events_from;
  if (from !== undefined && from !== null) {
    const at = typeof from === 'string' ? parseRfc3339(from) : undefined;
    if (at === undefined) out.push(problem('events_from', 'must be an RFC 3339 date-time', 'is_date_time'));
    else if (at === 0) out.push(problem('events_from', 'meter event from must not be zero'));
    else if (!isPrintable(at)) out.push(problem('events_from', `must be between ${formatUtc(PRINTABLE_FROM)} and ${formatUtc(PRINTABLE_TO)}`, 'range'));
  }
  checkValueProperty(body, out);
  checkDimensions(body, body.value_property, out);
  return out;
}

/** Every problem of a `PUT /meters/{id}` body (only name, description, labels, dimensions change). */
export function validateMeterUpdate(body: unknown, current: Meter): InvalidParameter[] {
  if (!isPlainObject(body)) return [problem('', 'request body must be a JSON object', 'type')];
  const out = unknownFields(body, UPDATE_FIELDS);
  checkName(body, true, out);
  checkDescription(body, out);
  checkLabels(body, out);
  checkDimensions(body, current.value_property, out);
  return out;
}

/** The definition a valid create body describes, normalized. */
export function meterDefinitionFrom(body: Record<string, any>): MeterDefinition {
  return {
    key: body.key,
    name: body.name ?? body.key,
    description: body.description ?? null,
    labels: body.labels ?? {},
    aggregation: body.aggregation,
    event_type: body.event_type,
    events_from: body.events_from ? formatUtc(parseRfc3339(body.events_from)!) : null,
    value_property: body.value_property ?? null,
    dimensions: body.dimensions ?? {},
  };
}

/** True when two definitions aggregate events identically (so stored aggregates stay valid). */
export function sameAggregation(a: MeterDefinition, b: MeterDefinition): boolean {
  return (
    a.aggregation === b.aggregation &&
    a.event_type === b.event_type &&
    a.events_from === b.events_from &&
    a.value_property === b.value_property &&
    JSON.stringify(a.dimensions) === JSON.stringify(b.dimensions)
  );
}

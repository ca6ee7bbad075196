/**
 * What a meter reads from an event: its dimension values and its value, with OpenMeter's rules
 * (ClickHouse `JSON_VALUE` text; values as `toDecimal128OrNull(…, 19)` reads them, see quantity.ts),
 * what it cannot take (refused at ingest), and the per-event validation messages of OpenMeter's
 * `meter.ParseEvent` (openmeter/meter/parse.go) shown by the event list.
 */
import { createHash } from 'node:crypto';
import { compileJsonPath, jsonValueText, lookup, MISSING, type PathStep } from '../shared/jsonpath.ts';
import { MAX_DIMENSION_VALUE_LENGTH } from '../shared/limits.ts';
import type { Aggregation, Meter } from './meter-model.ts';
import { DECIMAL_TEXT, isOutOfRange, MAX_INTEGER_DIGITS, OUT_OF_RANGE, parseQuantity, SCALE, type Quantity } from '../shared/quantity.ts';
import { parseRfc3339 } from '../shared/time.ts';

export interface CompiledMeter {
  meter: Meter;
  /** Where this meter's aggregates live (`<id>.<gen>`). */
  space: string;
  aggregation: Aggregation;
  valuePath: PathStep[] | null;
  dimensionNames: string[];
  dimensionPaths: PathStep[][];
  /** Where the value and each dimension sit in an event, for error messages (`data.tokens`). */
  valueField: string;
  dimensionFields: string[];
  /** Lower bound of aggregated event times, seconds (0 when none). */
  eventsFrom: number;
}

export function compileMeter(meter: Meter, gen: number): CompiledMeter {
  const dimensionNames = Object.keys(meter.dimensions).sort();
  return {
    meter,
    space: `${meter.id}.${gen}`,
    aggregation: meter.aggregation,
    valuePath: meter.value_property ? compileJsonPath(meter.value_property)! : null,
    dimensionNames,
    dimensionPaths: dimensionNames.map((n) => compileJsonPath(meter.dimensions[n])!),
    valueField: meter.value_property ? eventField(meter.value_property) : '',
    dimensionFields: dimensionNames.map((n) => eventField(meter.dimensions[n])),
    eventsFrom: meter.events_from ? parseRfc3339(meter.events_from)! : 0,
  };
}

/** `$.a['b c']` -> `data.a['b c']`. */
function eventField(path: string): string {
  return 'data' + path.slice(1);
}

/** The usable value of a raw `JSON_VALUE` (undefined: ignored, as one beyond the exact range). */
function numericValue(raw: unknown): Quantity | undefined {
  const value = parseQuantity(raw);
  return value === OUT_OF_RANGE ? undefined : value;
}

/** What one event contributes to a meter. */
export interface Reading {
  /** Dimension values in `dimensionNames` order. */
  dimensions: string[];
  /** Value for sum/avg/min/max/latest (undefined: ignored). */
  numeric?: Quantity;
  /** Distinct-value text for unique_count (undefined: ignored, i.e. null). */
  distinct?: string;
}

/**
 * The text of dimension `index` (in `dimensionNames` order) of an event. Ingest refuses longer values
 * for the meters it knows; an event stored before its meter (or that dimension) existed may still hold
 * one, and then counts under a stand-in of bounded length: the value's start and a hash of all of it.
 */
export function dimensionText(m: CompiledMeter, index: number, data: unknown): string {
  return boundedText(jsonValueText(lookup(data, m.dimensionPaths[index])));
}

/** Characters of a SHA-256 in base64url. */
const HASH_LENGTH = 43;

/**
 * `text` (a subject or dimension value), or when longer than `max` its stand-in of `max` characters: its
 * start, `…#` and a hash of all of it, so that two long values stay apart and one value always reads the same.
 */
export function boundedText(text: string, max = MAX_DIMENSION_VALUE_LENGTH): string {
  if (text.length <= max) return text;
  let cut = max - HASH_LENGTH - 2;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--; // never split a surrogate pair
  return `${text.slice(0, cut)}…#${createHash('sha256').update(text, 'utf16le').digest('base64url')}`;
}

/** The value for sum/avg/min/max/latest (undefined: ignored, and always for count and unique_count). */
export function numericReading(m: CompiledMeter, data: unknown): Quantity | undefined {
  return m.valuePath && m.aggregation !== 'unique_count' ? numericValue(lookup(data, m.valuePath)) : undefined;
}

/** The distinct-value text for unique_count (undefined: ignored, i.e. null, and for every other aggregation). */
export function distinctReading(m: CompiledMeter, data: unknown): string | undefined {
  if (!m.valuePath || m.aggregation !== 'unique_count') return undefined;
  const text = jsonValueText(lookup(data, m.valuePath));
  return text === 'null' ? undefined : text;
}

/** Why a meter cannot take an event (`problem(field, reason, rule)` for each reason): it is refused at ingest. */
export function readingProblems(m: CompiledMeter, data: unknown, problem: (field: string, reason: string, rule: string) => void): void {
  for (let i = 0; i < m.dimensionPaths.length; i++) {
    const raw = lookup(data, m.dimensionPaths[i]);
    if (typeof raw === 'string' && raw.length > MAX_DIMENSION_VALUE_LENGTH) {
      problem(m.dimensionFields[i], `dimension ${m.dimensionNames[i]} of meter ${m.meter.key}: longer than ${MAX_DIMENSION_VALUE_LENGTH} characters`, 'max_length');
    }
  }
  if (m.valuePath && m.aggregation !== 'unique_count' && isOutOfRange(lookup(data, m.valuePath))) {
    problem(m.valueField, `value of meter ${m.meter.key}: ${RANGE}`, 'range');
  }
}

const RANGE = `out of range: a value has at most ${MAX_INTEGER_DIGITS} digits before the decimal point and ${SCALE} after it`;

/** Every dimension's text, in `dimensionNames` order. */
export function dimensionTexts(m: CompiledMeter, data: unknown): string[] {
  return m.dimensionPaths.map((_, i) => dimensionText(m, i, data));
}

export function readEvent(m: CompiledMeter, data: unknown): Reading {
  return {
    dimensions: dimensionTexts(m, data),
    numeric: numericReading(m, data),
    distinct: distinctReading(m, data),
  };
}

/** Go's strconv.ParseFloat, as far as the messages need it. */
function goParseFloat(text: string): number | undefined {
  if (DECIMAL_TEXT.test(text)) return Number(text);
  if (/^[+-]?(inf|infinity)$/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(text)) return NaN;
  return undefined;
}

function goTypeName(value: unknown): string {
  if (typeof value === 'boolean') return 'bool';
  if (Array.isArray(value)) return '[]interface {}';
  return 'map[string]interface {}';
}

/** The validation error of an event for a meter (meter.ParseEvent), or undefined when usable. */
export function eventProblem(meter: Meter, data: unknown): string | undefined {
  if (meter.aggregation === 'count' || !meter.value_property) return undefined;
  if (data === undefined || data === null) return 'invalid event: null and missing value property';
  const raw = lookup(data, compileJsonPath(meter.value_property) ?? []);
  if (raw === MISSING) return `invalid event: missing value property: "${meter.value_property}"`;
  if (raw === null) return 'invalid event: value cannot be null';
  if (meter.aggregation === 'unique_count') return undefined;
  let n: number;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string') {
    const parsed = goParseFloat(raw);
    if (parsed === undefined) return `invalid event: value cannot be parsed as float64: ${raw}`;
    n = parsed;
  } else return `invalid event: unsupported value property type: ${goTypeName(raw)}`;
  if (Number.isNaN(n)) return 'invalid event: value cannot be NaN';
  if (typeof raw === 'string' && !Number.isFinite(n) && !DECIMAL_TEXT.test(raw)) return 'invalid event: value cannot be infinity';
  if (isOutOfRange(raw)) return `invalid event: value ${RANGE}`;
  return undefined;
}

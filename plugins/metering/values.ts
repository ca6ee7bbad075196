/**
 * What a meter reads from an event: its dimension values and its value, with OpenMeter's rules
 * (reference §3.3/3.4: ClickHouse `JSON_VALUE` text, `toFloat64OrNull`, finite values only), and
 * the per-event validation messages of `meter.ParseEvent` shown by the event list (§1.7).
 */
import { compileJsonPath, jsonValueText, lookup, MISSING, type PathStep } from './jsonpath.ts';
import type { Aggregation, Meter } from './meter-model.ts';
import { parseRfc3339 } from './time.ts';

export interface CompiledMeter {
  meter: Meter;
  /** Where this meter's aggregates live (`<id>.<gen>`). */
  space: string;
  aggregation: Aggregation;
  valuePath: PathStep[] | null;
  dimensionNames: string[];
  dimensionPaths: PathStep[][];
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
    eventsFrom: meter.events_from ? parseRfc3339(meter.events_from)! : 0,
  };
}

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** ClickHouse `ifNotFinite(toFloat64OrNull(JSON_VALUE(...)), null)`: undefined when not a usable number. */
export function numericValue(raw: unknown): number | undefined {
  let n: number;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string' && DECIMAL.test(raw)) n = Number(raw);
  else return undefined;
  return Number.isFinite(n) ? n : undefined;
}

/** What one event contributes to a meter. */
export interface Reading {
  /** Dimension values in `dimensionNames` order. */
  dimensions: string[];
  /** Numeric value for sum/avg/min/max/latest (undefined: ignored). */
  numeric?: number;
  /** Distinct-value text for unique_count (undefined: ignored, i.e. null). */
  distinct?: string;
}

/** The text of dimension `index` (in `dimensionNames` order) of an event. */
export function dimensionText(m: CompiledMeter, index: number, data: unknown): string {
  return jsonValueText(lookup(data, m.dimensionPaths[index]));
}

/** The numeric value for sum/avg/min/max/latest (undefined: ignored, and always for count and unique_count). */
export function numericReading(m: CompiledMeter, data: unknown): number | undefined {
  return m.valuePath && m.aggregation !== 'unique_count' ? numericValue(lookup(data, m.valuePath)) : undefined;
}

/** The distinct-value text for unique_count (undefined: ignored, i.e. null, and for every other aggregation). */
export function distinctReading(m: CompiledMeter, data: unknown): string | undefined {
  if (!m.valuePath || m.aggregation !== 'unique_count') return undefined;
  const text = jsonValueText(lookup(data, m.valuePath));
  return text === 'null' ? undefined : text;
}

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
  if (DECIMAL.test(text)) return Number(text);
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
  if (!Number.isFinite(n)) return 'invalid event: value cannot be infinity';
  return undefined;
}

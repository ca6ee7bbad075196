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

export function readEvent(m: CompiledMeter, data: unknown): Reading {
  const dimensions = m.dimensionPaths.map((p) => jsonValueText(lookup(data, p)));
  if (!m.valuePath) return { dimensions };
  const raw = lookup(data, m.valuePath);
  if (m.aggregation === 'unique_count') {
    const text = jsonValueText(raw);
    return text === 'null' ? { dimensions } : { dimensions, distinct: text };
  }
  return { dimensions, numeric: numericValue(raw) };
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

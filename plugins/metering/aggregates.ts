/**
 * Aggregate state per (meter, bucket, subject, dimension values), mergeable so that a window is the
 * merge of the buckets covering it: event count, first/last event time, count/sum/min/max of the
 * usable values (AVG = sum / count), and the latest value by event time (ties: later ingest wins).
 * UNIQUE_COUNT keeps its distinct values as separate keys (exact, see keys.ts).
 */
import type { Aggregation } from './meter-model.ts';

/**
 * Roll-up levels, coarsest first, each dividing the next. UTC days serve UTC calendars directly; the
 * binary ladder below (8, 4, 2, 1 hours; 30 and 15 minutes) covers a day of any other zone in a few
 * blocks (Los Angeles: 3–6, Kolkata: 7) instead of 24 hours; 15 minutes aligns with every offset in
 * use (…:30, …:45); minutes are the base.
 */
export const LEVELS = [
  { name: 'd', size: 86_400 },
  { name: 'h8', size: 28_800 },
  { name: 'h4', size: 14_400 },
  { name: 'h2', size: 7_200 },
  { name: 'h1', size: 3_600 },
  { name: 'm30', size: 1_800 },
  { name: 'm15', size: 900 },
  { name: 'm1', size: 60 },
] as const;
export type LevelName = (typeof LEVELS)[number]['name'];
export const BASE_SIZE = 60;

export interface State {
  /** Events. */
  c: number;
  /** First and last event time, seconds. */
  f: number;
  l: number;
  /** Usable values, their sum, min and max. */
  n: number;
  s: number;
  mn: number;
  mx: number;
  /** Latest usable value: its time (-1: none), value and ingest sequence. */
  lt: number;
  lv: number;
  lq: number;
}

export function emptyState(): State {
  return { c: 0, f: Infinity, l: -Infinity, n: 0, s: 0, mn: Infinity, mx: -Infinity, lt: -1, lv: 0, lq: 0 };
}

export function eventState(time: number, seq: number, numeric: number | undefined): State {
  const s = emptyState();
  s.c = 1;
  s.f = s.l = time;
  if (numeric !== undefined) {
    s.n = 1;
    s.s = s.mn = s.mx = s.lv = numeric;
    s.lt = time;
    s.lq = seq;
  }
  return s;
}

/** Adds one event to a state in place (as merging eventState() would, without the allocation). */
export function addEvent(s: State, time: number, seq: number, numeric: number | undefined): void {
  s.c++;
  if (time < s.f) s.f = time;
  if (time > s.l) s.l = time;
  if (numeric === undefined) return;
  s.n++;
  s.s += numeric;
  if (numeric < s.mn) s.mn = numeric;
  if (numeric > s.mx) s.mx = numeric;
  if (time > s.lt || (time === s.lt && seq > s.lq)) {
    s.lt = time;
    s.lv = numeric;
    s.lq = seq;
  }
}

/** Merges `b` into `a`. */
export function merge(a: State, b: State): State {
  a.c += b.c;
  if (b.f < a.f) a.f = b.f;
  if (b.l > a.l) a.l = b.l;
  a.n += b.n;
  a.s += b.s;
  if (b.mn < a.mn) a.mn = b.mn;
  if (b.mx > a.mx) a.mx = b.mx;
  if (b.lt > a.lt || (b.lt === a.lt && b.lt >= 0 && b.lq > a.lq)) {
    a.lt = b.lt;
    a.lv = b.lv;
    a.lq = b.lq;
  }
  return a;
}

export function encodeState(s: State): string {
  return s.n === 0 ? `[${s.c},${s.f},${s.l}]` : JSON.stringify([s.c, s.f, s.l, s.n, s.s, s.mn, s.mx, s.lt, s.lv, s.lq]);
}

export function decodeState(text: string): State {
  return stateOfArray(JSON.parse(text) as number[]);
}

export function stateOfArray(a: number[]): State {
  const s = emptyState();
  s.c = a[0];
  s.f = a[1];
  s.l = a[2];
  if (a.length > 3) [s.n, s.s, s.mn, s.mx, s.lt, s.lv, s.lq] = a.slice(3);
  return s;
}

/** Merges an encoded state into `a` (decodeState + merge without the intermediate object). */
export function mergeEncoded(a: State, text: string): void {
  mergeArray(a, JSON.parse(text) as number[]);
}

/** Merges a parsed encoded state (the array form) into `a`. */
export function mergeArray(a: State, v: number[]): void {
  a.c += v[0];
  if (v[1] < a.f) a.f = v[1];
  if (v[2] > a.l) a.l = v[2];
  if (v.length === 3) return;
  a.n += v[3];
  a.s += v[4];
  if (v[5] < a.mn) a.mn = v[5];
  if (v[6] > a.mx) a.mx = v[6];
  if (v[7] > a.lt || (v[7] === a.lt && v[7] >= 0 && v[9] > a.lq)) {
    a.lt = v[7];
    a.lv = v[8];
    a.lq = v[9];
  }
}

/**
 * Rows: for the roll-up levels above the base, every series of a bucket also lives in one value
 * (`r/<space>/<level>/<bucket>`), so a long query reads one row per bucket instead of one key per
 * series. A row leads with the total of its series (`<state>|`), so a query that neither filters
 * nor groups reads a few numbers per bucket instead of every series. A bucket with more than
 * ROW_MAX_SERIES series is marked as overflowing (`!`: read series by series, its total still
 * kept). Only the series of overflowing rows (and of the base level) have keys of their own: per
 * batch that is ~95 aggregate writes instead of ~650 in the benchmark's load. Stores written before kept
 * per-series keys beside every row; those are not read, and are rewritten when their row overflows.
 */
export const ROW_MAX_SERIES = 512;
export const ROW_OVERFLOW = '!';
export const ROW_LEVELS: ReadonlySet<string> = new Set(LEVELS.filter((l) => l.size > BASE_SIZE).map((l) => l.name));

export interface Row {
  /** Null only in an overflowing row written before totals existed. */
  total: State | null;
  series: Map<string, State> | typeof ROW_OVERFLOW;
}

export function emptyRow(): Row {
  return { total: emptyState(), series: new Map() };
}

export function copyRow(row: Row): Row {
  return { total: row.total && { ...row.total }, series: row.series === ROW_OVERFLOW ? ROW_OVERFLOW : new Map(row.series) };
}

export function encodeRow(row: Row): string {
  const total = row.total ? encodeState(row.total) + '|' : '';
  if (row.series === ROW_OVERFLOW) return total + ROW_OVERFLOW;
  let text = '{';
  for (const [series, state] of row.series) text += (text.length > 1 ? ',' : '') + JSON.stringify(series) + ':' + encodeState(state);
  return total + text + '}';
}

/** A stored row's parts, undecoded: its total (undefined in rows written before totals) and its series. */
export function splitRow(text: string): { total?: string; series: string } {
  if (text[0] !== '[') return { series: text };
  const bar = text.indexOf('|');
  return { total: text.slice(0, bar), series: text.slice(bar + 1) };
}

export function decodeRow(text: string): Row {
  const parts = splitRow(text);
  if (parts.series === ROW_OVERFLOW) return { total: parts.total === undefined ? null : decodeState(parts.total), series: ROW_OVERFLOW };
  const series = new Map<string, State>();
  for (const [name, array] of Object.entries(JSON.parse(parts.series) as Record<string, number[]>)) series.set(name, stateOfArray(array));
  return { total: parts.total === undefined ? totalOf(series.values()) : decodeState(parts.total), series };
}

function totalOf(states: Iterable<State>): State {
  const total = emptyState();
  for (const state of states) merge(total, state);
  return total;
}

/** The aggregate value, or undefined when the group has no usable value (dropped from results). */
export function valueOf(aggregation: Aggregation, s: State, distinct?: number): number | undefined {
  switch (aggregation) {
    case 'count':
      return s.c;
    case 'unique_count':
      return distinct ?? 0;
    case 'sum':
      return s.n > 0 ? s.s : undefined;
    case 'avg':
      return s.n > 0 ? s.s / s.n : undefined;
    case 'min':
      return s.n > 0 ? s.mn : undefined;
    case 'max':
      return s.n > 0 ? s.mx : undefined;
    case 'latest':
      return s.lt >= 0 ? s.lv : undefined;
  }
}

/** A decimal string without exponent (Konnect `^-?[0-9]+(\.[0-9]+)?$`). */
export function formatDecimal(value: number): string {
  if (Object.is(value, -0) || value === 0) return '0';
  const text = String(value);
  if (!/e/i.test(text)) return text;
  const [mantissa, exponentText] = text.split(/e/i);
  const exponent = Number(exponentText);
  const negative = mantissa.startsWith('-');
  const [intPart, fracPart = ''] = mantissa.replace('-', '').split('.');
  const digits = intPart + fracPart;
  const point = intPart.length + exponent;
  let out: string;
  if (point <= 0) out = '0.' + '0'.repeat(-point) + digits;
  else if (point >= digits.length) out = digits + '0'.repeat(point - digits.length);
  else out = digits.slice(0, point) + '.' + digits.slice(point);
  out = out.includes('.') ? out.replace(/\.?0+$/, '') : out;
  return (negative ? '-' : '') + out;
}

/**
 * Aggregate state per (meter, bucket, subject, dimension values), mergeable so that a window is the
 * merge of the buckets covering it: event count, first/last event time, count/sum/min/max of the
 * usable values (AVG = sum / count), and the latest value by event time (ties: later ingest wins).
 * UNIQUE_COUNT keeps its distinct values as separate keys (exact, see keys.ts).
 */
import type { Aggregation } from '../meter/port.ts';
import { addQuantities, compareQuantities, decodeQuantity, divideQuantity, formatQuantity, type Quantity } from '../shared/quantity.ts';

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
  /** Usable values, and (when there is one) their exact sum, min and max. */
  n: number;
  s: Quantity;
  mn: Quantity;
  mx: Quantity;
  /** Latest usable value: its time (-1: none), value and ingest sequence. */
  lt: number;
  lv: Quantity;
  lq: number;
}

export function emptyState(): State {
  return { c: 0, f: Infinity, l: -Infinity, n: 0, s: 0, mn: 0, mx: 0, lt: -1, lv: 0, lq: 0 };
}

export function eventState(time: number, seq: number, value: Quantity | undefined): State {
  const s = emptyState();
  addEvent(s, time, seq, value);
  return s;
}

/** Adds one event to a state in place (as merging eventState() would, without the allocation). */
export function addEvent(s: State, time: number, seq: number, value: Quantity | undefined): void {
  s.c++;
  if (time < s.f) s.f = time;
  if (time > s.l) s.l = time;
  if (value === undefined) return;
  addValues(s, 1, value, value, value);
  if (time > s.lt || (time === s.lt && seq > s.lq)) {
    s.lt = time;
    s.lv = value;
    s.lq = seq;
  }
}

/** Adds `count` usable values with this sum, min and max. */
function addValues(s: State, count: number, sum: Quantity, min: Quantity, max: Quantity): void {
  if (s.n === 0) {
    s.mn = min;
    s.mx = max;
  } else {
    if (compareQuantities(min, s.mn) < 0) s.mn = min;
    if (compareQuantities(max, s.mx) > 0) s.mx = max;
  }
  s.n += count;
  s.s = addQuantities(s.s, sum);
}

/** Merges `b` into `a`. */
export function merge(a: State, b: State): State {
  a.c += b.c;
  if (b.f < a.f) a.f = b.f;
  if (b.l > a.l) a.l = b.l;
  if (b.n > 0) addValues(a, b.n, b.s, b.mn, b.mx);
  if (b.lt > a.lt || (b.lt === a.lt && b.lt >= 0 && b.lq > a.lq)) {
    a.lt = b.lt;
    a.lv = b.lv;
    a.lq = b.lq;
  }
  return a;
}

/** `[c,f,l]`, or with values `[c,f,l,n,s,mn,mx,lt,lv,lq]`, quantities as safe-integer numbers or decimal text. */
export function encodeState(s: State): string {
  if (s.n === 0) return `[${s.c},${s.f},${s.l}]`;
  return `[${s.c},${s.f},${s.l},${s.n},${quantityJson(s.s)},${quantityJson(s.mn)},${quantityJson(s.mx)},${s.lt},${quantityJson(s.lv)},${s.lq}]`;
}

function quantityJson(q: Quantity): string {
  return typeof q === 'number' ? String(q) : `"${formatQuantity(q)}"`;
}

/** A stored state as JSON.parse reads it (quantities: see decodeQuantity). */
export type StoredState = (number | string | null)[];

export function decodeState(text: string): State {
  return stateOfArray(JSON.parse(text) as StoredState);
}

export function stateOfArray(a: StoredState): State {
  const s = emptyState();
  mergeArray(s, a);
  return s;
}

/** Merges an encoded state into `a` (decodeState + merge without the intermediate object). */
export function mergeEncoded(a: State, text: string): void {
  mergeArray(a, JSON.parse(text) as StoredState);
}

/** Merges a parsed encoded state (the array form) into `a`. */
export function mergeArray(a: State, v: StoredState): void {
  const [c, f, l, n, , , , lt, , lq] = v as number[];
  a.c += c;
  if (f < a.f) a.f = f;
  if (l > a.l) a.l = l;
  if (v.length === 3) return;
  if (n > 0) addValues(a, n, decodeQuantity(v[4]), decodeQuantity(v[5]), decodeQuantity(v[6]));
  if (lt > a.lt || (lt === a.lt && lt >= 0 && lq > a.lq)) {
    a.lt = lt;
    a.lv = decodeQuantity(v[8]);
    a.lq = lq;
  }
}

/**
 * Rows: for the roll-up levels above the base, every series of a bucket also lives in one value
 * (`r/<space>/<level>/<bucket>`), so a long query reads one row per bucket instead of one key per
 * series. A row leads with the total of its series (`<state>|`), so a query that neither filters
 * nor groups reads a few numbers per bucket instead of every series. A bucket with more than
 * ROW_MAX_SERIES series, or whose row would be longer than ROW_MAX_BYTES, is marked as overflowing
 * (`!`: read series by series, its total still kept): a batch rewrites the rows it touches, so what
 * a row holds must not grow with history. Only the series of overflowing rows (and of the base level) have keys of their own: per
 * batch that is ~95 aggregate writes instead of ~650 in the benchmark's load. Stores written before kept
 * per-series keys beside every row; those are not read, and are rewritten when their row overflows.
 */
export const ROW_MAX_SERIES = 512;
/** 512 series of ~120 characters each; a row of a few very long series overflows sooner. */
export const ROW_MAX_BYTES = 64 * 1024;
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

/**
 * The stored text of a row. One that holds too many series or too many bytes becomes overflowing
 * first: each of its series is handed to `keySeries` (to be written under its own key).
 */
export function boundedRowText(row: Row, keySeries: (series: string, state: State) => void): string {
  const text = encodeRow(row);
  if (row.series === ROW_OVERFLOW || (row.series.size <= ROW_MAX_SERIES && text.length <= ROW_MAX_BYTES)) return text;
  for (const [series, state] of row.series) keySeries(series, state);
  row.series = ROW_OVERFLOW;
  return encodeRow(row);
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
  for (const [name, array] of Object.entries(JSON.parse(parts.series) as Record<string, StoredState>)) series.set(name, stateOfArray(array));
  return { total: parts.total === undefined ? totalOf(series.values()) : decodeState(parts.total), series };
}

function totalOf(states: Iterable<State>): State {
  const total = emptyState();
  for (const state of states) merge(total, state);
  return total;
}

/** The aggregate value as decimal text, or undefined when the group has no usable value (dropped from results). */
export function valueOf(aggregation: Aggregation, s: State, distinct?: number): string | undefined {
  switch (aggregation) {
    case 'count':
      return String(s.c);
    case 'unique_count':
      return String(distinct ?? 0);
    case 'sum':
      return s.n > 0 ? formatQuantity(s.s) : undefined;
    case 'avg':
      return s.n > 0 ? formatQuantity(divideQuantity(s.s, s.n)) : undefined;
    case 'min':
      return s.n > 0 ? formatQuantity(s.mn) : undefined;
    case 'max':
      return s.n > 0 ? formatQuantity(s.mx) : undefined;
    case 'latest':
      return s.lt >= 0 ? formatQuantity(s.lv) : undefined;
  }
}

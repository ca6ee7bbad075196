/**
 * Answering usage queries (the request is validated in query-request.ts): windows covered by roll-up
 * buckets (see windows.ts), sub-minute edges of `from`/`to` read from raw events, groups by subject and
 * dimensions, dimension filters; rows as JSON (CSV: csv.ts).
 */
import type { Store, StoreProcedure } from '../../../src/pdk/index.ts';
import {
  BASE_SIZE, ceilMinute, coverSpan, emptyState, eventState, floorMinute, LEVELS, merge, mergeArray, mergeEncoded,
  ROW_LEVELS, ROW_OVERFLOW, splitRow, valueOf, windowEnd, windowStart, type Granularity, type LevelRange, type State,
  type StoredState,
} from '../aggregation/port.ts';
import type { StoredEvent } from '../shared/events.ts';
import { aggregatePrefix, bucketOf, distinctPart, escapePart, padTime, rowPrefix, seriesOf, uniquePrefix, unescapePart } from '../shared/keys.ts';
import { CUSTOMER_DIMENSION, matches, type MeterQuery } from './query-request.ts';
import { JournaledEvents, KeyedEvents, type StoredEvents } from '../storage/stored-events.ts';
import { formatInZone } from '../shared/time.ts';
import { boundedText, compileMeter, readEvent, type CompiledMeter, type MeterRecord } from '../meter/port.ts';

export interface QueryRow {
  value: string;
  from: string;
  to: string;
  dimensions: Record<string, string>;
}

export interface QueryResult {
  from?: string;
  to?: string;
  data: QueryRow[];
}

interface Group {
  window: number;
  dimensions: Record<string, string>;
  state: State;
  distinct?: Set<string>;
}

/** Where a series goes: excluded by the filters, or its output dimensions and groups by window. */
type SeriesPlacement = { dimensions: Record<string, string>; byWindow: Map<number, Group> } | null;

class Accumulator {
  /** Groups by their dimension values, then by window start. */
  private readonly groupSets = new Map<string, Map<number, Group>>();
  private readonly placements = new Map<string, SeriesPlacement>();

  constructor(
    private readonly meter: CompiledMeter,
    private readonly query: MeterQuery,
  ) {}

  /** `values` = [subject, ...dimension values in meter order]. */
  place(series: string, values?: string[]): SeriesPlacement {
    let placement = this.placements.get(series);
    if (placement !== undefined) return placement;
    const parts = values ?? series.split('/').map(unescapePart);
    const customerOf = this.query.customerOf;
    const valueOf = (name: string) => {
      if (name === 'subject') return parts[0];
      if (name === CUSTOMER_DIMENSION) return customerOf && Object.hasOwn(customerOf, parts[0]) ? customerOf[parts[0]] : '';
      return parts[1 + this.meter.dimensionNames.indexOf(name)] ?? '';
    };
    placement = null;
    if (Object.entries(this.query.filters).every(([name, f]) => matches(valueOf(name), f))) {
      const dimensions: Record<string, string> = {};
      for (const name of this.query.groupBy) dimensions[name] = valueOf(name);
      // Usage of subjects no customer claims is one group without a customer (v3 drops null dimensions).
      if (dimensions[CUSTOMER_DIMENSION] === '') delete dimensions[CUSTOMER_DIMENSION];
      const key = JSON.stringify(this.query.groupBy.map(valueOf));
      let byWindow = this.groupSets.get(key);
      if (!byWindow) this.groupSets.set(key, (byWindow = new Map()));
      placement = { dimensions, byWindow };
    }
    this.placements.set(series, placement);
    return placement;
  }

  /** The one placement of every series when the query neither filters nor groups (a row's total then stands for its series). */
  wholePlacement(): NonNullable<SeriesPlacement> | undefined {
    if (this.query.groupBy.length > 0 || Object.keys(this.query.filters).length > 0) return undefined;
    return this.place('', []) ?? undefined;
  }

  group(window: number, placement: NonNullable<SeriesPlacement>): Group {
    let g = placement.byWindow.get(window);
    if (!g) {
      g = { window, dimensions: placement.dimensions, state: emptyState() };
      if (this.meter.aggregation === 'unique_count') g.distinct = new Set();
      placement.byWindow.set(window, g);
    }
    return g;
  }

  groups(): Group[] {
    const all: Group[] = [];
    for (const byWindow of this.groupSets.values()) for (const g of byWindow.values()) all.push(g);
    return all;
  }
}

/** Exact spans of one level, for scans that bridge small gaps between them. */
interface ScanPlan {
  level: string;
  size: number;
  start: number;
  end: number;
  /** [start, end) pairs inside, sorted and disjoint. */
  spans: number[][];
}

/**
 * Series levels (a bucket may be many keys): ranges closer than this many buckets share one scan,
 * which skips what lies between. Row levels (a bucket is one key) gather all their ranges in one
 * plan: scattered buckets are then read by key, which costs far less than a scan each.
 */
const BRIDGE_SERIES_BUCKETS = 2;
/** Most row keys read by key in one query level (beyond, each span is scanned). */
const MAX_ROW_LOOKUPS = 50_000;
const LOOKUP_CHUNK = 5_000;

function planScans(ranges: LevelRange[]): ScanPlan[] {
  const plans: ScanPlan[] = [];
  for (const level of LEVELS) {
    const mine = ranges.filter((r) => r.level === level.name).sort((a, b) => a.start - b.start);
    const bridge = ROW_LEVELS.has(level.name) ? Infinity : BRIDGE_SERIES_BUCKETS;
    let plan: ScanPlan | undefined;
    for (const r of mine) {
      if (plan && r.start - plan.end <= bridge * level.size) {
        const last = plan.spans[plan.spans.length - 1];
        if (last[1] === r.start) last[1] = r.end;
        else plan.spans.push([r.start, r.end]);
        plan.end = r.end;
      } else {
        plan = { level: level.name, size: level.size, start: r.start, end: r.end, spans: [[r.start, r.end]] };
        plans.push(plan);
      }
    }
  }
  return plans;
}

function inSpans(spans: number[][], t: number): boolean {
  if (spans.length === 1) return t >= spans[0][0] && t < spans[0][1];
  let lo = 0;
  let hi = spans.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (t < spans[mid][0]) hi = mid - 1;
    else if (t >= spans[mid][1]) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Query windows, sorted and disjoint: [start, end) pairs (not necessarily contiguous). */
type Windows = [number, number][];

/** Index of the window starting at or before t. */
function windowIndex(windows: Windows, t: number): number {
  let lo = 0;
  let hi = windows.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (windows[mid][0] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

const DAY = 86_400;

export class QueryEngine {
  constructor(
    private readonly store: Store,
    private readonly events: StoredEvents,
  ) {}

  /** First and last minute bucket holding events of the meter, or undefined when none. */
  private async extent(meter: CompiledMeter): Promise<[number, number] | undefined> {
    const prefix = aggregatePrefix(meter.space, 'm1');
    let first: number | undefined;
    let last: number | undefined;
    for await (const [key] of this.store.scan({ prefix, limit: 1 })) first = bucketOf(key, prefix.length);
    for await (const [key] of this.store.scan({ prefix, limit: 1, reverse: true })) last = bucketOf(key, prefix.length);
    return first === undefined || last === undefined ? undefined : [first, last + BASE_SIZE];
  }

  /** `oldest`: start of the retention period, seconds; older events never count, purged yet or not. */
  async run(meter: CompiledMeter, query: MeterQuery, oldest = 1): Promise<QueryResult> {
    const result: QueryResult = { data: [] };
    if (query.from !== undefined) result.from = formatInZone(query.from, query.timeZone);
    if (query.to !== undefined) result.to = formatInZone(query.to, query.timeZone);
    const acc = new Accumulator(meter, query);
    const lowest = Math.max(query.from ?? -Infinity, meter.eventsFrom, oldest, 1);
    let lo = lowest;
    let hi = query.to ?? Infinity;
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) {
      const extent = await this.extent(meter);
      if (extent) {
        lo = Math.max(lo, extent[0]);
        hi = Math.min(hi, extent[1]);
      } else hi = lo;
    }
    let windows: Windows = [[lo, hi]];
    if (lo < hi) {
      if (query.granularity && query.granularity !== 'PT1M') windows = await this.windowsWithData(meter, query, lo, hi);
      await this.collect(meter, query, acc, windows, lo, hi);
    }
    result.data = this.rows(meter, query, acc, windows);
    return result;
  }

  /**
   * The windows of [lo, hi) that hold data: generated around the UTC days that have a bucket, so the
   * cost follows the stored data, not the width of the range (1970..9999 is fine).
   */
  private async windowsWithData(meter: CompiledMeter, query: MeterQuery, lo: number, hi: number): Promise<Windows> {
    const granularity = query.granularity as Granularity;
    const prefix = rowPrefix(meter.space, 'd');
    const windows: Windows = [];
    for await (const [key] of this.store.scan({ gte: prefix + padTime(lo - (lo % DAY)), lt: prefix + padTime(hi) })) {
      const day = bucketOf(key, prefix.length);
      const until = Math.min(day + DAY, hi);
      let start = windowStart(Math.max(day, lo), granularity, query.timeZone);
      const last = windows[windows.length - 1];
      if (last && start < last[1]) start = last[1];
      while (start < until) {
        const end = windowEnd(start, granularity, query.timeZone);
        windows.push([start, end]);
        start = end;
      }
    }
    return windows;
  }

  private async collect(meter: CompiledMeter, query: MeterQuery, acc: Accumulator, windows: Windows, lo: number, hi: number): Promise<void> {
    const perMinute = query.granularity === 'PT1M';
    const windowOf = perMinute ? floorMinute : (t: number) => windows[windowIndex(windows, t)][0];
    const ranges: LevelRange[] = [];
    const rawEdges: [number, number][] = [];
    const levels = perMinute ? LEVELS.filter((l) => l.size === BASE_SIZE) : LEVELS;
    const windowCount = perMinute ? 1 : windows.length;
    for (let i = 0; i < windowCount; i++) {
      const a = Math.max(perMinute ? lo : windows[i][0], lo);
      const b = Math.min(perMinute ? hi : windows[i][1], hi);
      if (a >= b) continue;
      const a1 = ceilMinute(a);
      const b1 = floorMinute(b);
      if (a1 >= b1) {
        rawEdges.push([a, b]);
        continue;
      }
      if (a < a1) rawEdges.push([a, a1]);
      if (b1 < b) rawEdges.push([b1, b]);
      coverSpan(a1, b1, (r) => ranges.push(r), levels);
    }
    const unique = meter.aggregation === 'unique_count';
    for (const plan of planScans(ranges)) {
      await this.scanStates(meter, acc, plan, windowOf);
      if (unique) await this.scanDistinct(meter, acc, plan, windowOf);
    }
    for (const [a, b] of rawEdges) await this.scanRaw(meter, acc, a, b, windowOf);
  }

  private async scanStates(meter: CompiledMeter, acc: Accumulator, plan: ScanPlan, windowOf: (t: number) => number): Promise<void> {
    if (!ROW_LEVELS.has(plan.level)) return this.scanSeries(meter, acc, plan, windowOf);
    const prefix = rowPrefix(meter.space, plan.level);
    const buckets = plan.spans.reduce((n, [a, b]) => n + (b - a) / plan.size, 0);
    if (plan.spans.length > 1 && buckets <= MAX_ROW_LOOKUPS) {
      const wanted: number[] = [];
      for (const [a, b] of plan.spans) for (let t = a; t < b; t += plan.size) wanted.push(t);
      for (let i = 0; i < wanted.length; i += LOOKUP_CHUNK) {
        const chunk = wanted.slice(i, i + LOOKUP_CHUNK);
        const values = await this.store.getMany(chunk.map((t) => prefix + padTime(t)));
        for (let j = 0; j < chunk.length; j++) {
          if (values[j] !== undefined) await this.readRow(meter, acc, plan, chunk[j], values[j]!, windowOf);
        }
      }
      return;
    }
    for (const [a, b] of plan.spans) {
      for await (const [key, value] of this.store.scan({ gte: prefix + padTime(a), lt: prefix + padTime(b) })) {
        await this.readRow(meter, acc, plan, bucketOf(key, prefix.length), value, windowOf);
      }
    }
  }

  /** Merges one row: its total when the query neither filters nor groups, else its series (one by one when the row overflowed). */
  private async readRow(meter: CompiledMeter, acc: Accumulator, plan: ScanPlan, bucket: number, value: string, windowOf: (t: number) => number): Promise<void> {
    const window = windowOf(bucket);
    const { total, series } = splitRow(value);
    const whole = acc.wholePlacement();
    if (whole && total !== undefined) return mergeArray(acc.group(window, whole).state, JSON.parse(total) as StoredState);
    if (series === ROW_OVERFLOW) {
      await this.scanSeries(meter, acc, { ...plan, start: bucket, end: bucket + plan.size, spans: [[bucket, bucket + plan.size]] }, windowOf);
      return;
    }
    const row = JSON.parse(series) as Record<string, StoredState>;
    for (const name in row) {
      const placement = acc.place(name);
      if (placement) mergeArray(acc.group(window, placement).state, row[name]);
    }
  }

  /** Reads the per-series states of a plan (minute level, or buckets whose row overflowed). */
  private async scanSeries(meter: CompiledMeter, acc: Accumulator, plan: ScanPlan, windowOf: (t: number) => number): Promise<void> {
    const prefix = aggregatePrefix(meter.space, plan.level);
    const bridged = plan.spans.length > 1;
    for await (const [key, value] of this.store.scan({ gte: prefix + padTime(plan.start), lt: prefix + padTime(plan.end) })) {
      const bucket = bucketOf(key, prefix.length);
      if (bridged && !inSpans(plan.spans, bucket)) continue;
      const placement = acc.place(seriesOf(key, prefix.length));
      if (!placement) continue;
      mergeEncoded(acc.group(windowOf(bucket), placement).state, value);
    }
  }

  private async scanDistinct(meter: CompiledMeter, acc: Accumulator, plan: ScanPlan, windowOf: (t: number) => number): Promise<void> {
    const prefix = uniquePrefix(meter.space, plan.level);
    const bridged = plan.spans.length > 1;
    for await (const [key] of this.store.scan({ gte: prefix + padTime(plan.start), lt: prefix + padTime(plan.end) })) {
      const bucket = bucketOf(key, prefix.length);
      if (bridged && !inSpans(plan.spans, bucket)) continue;
      const rest = seriesOf(key, prefix.length);
      const cut = rest.lastIndexOf('/');
      const placement = acc.place(rest.slice(0, cut));
      if (!placement) continue;
      acc.group(windowOf(bucket), placement).distinct!.add(rest.slice(cut + 1));
    }
  }

  /** Aggregates raw events in [a, b) (a sub-minute edge of the range). */
  private async scanRaw(meter: CompiledMeter, acc: Accumulator, a: number, b: number, windowOf: (t: number) => number): Promise<void> {
    const rows = await this.events.inRange({ from: a, to: b, typeEscaped: escapePart(meter.meter.event_type) });
    for (const { seq, json } of rows) {
      const event = JSON.parse(json) as StoredEvent;
      if (event.time < meter.eventsFrom) continue;
      const reading = readEvent(meter, event.data);
      const parts = [boundedText(event.subject), ...reading.dimensions];
      const placement = acc.place(parts.map(escapePart).join('/'), parts);
      if (!placement) continue;
      const group = acc.group(windowOf(event.time), placement);
      merge(group.state, eventState(event.time, seq, reading.numeric));
      if (reading.distinct !== undefined) group.distinct!.add(distinctPart(reading.distinct));
    }
  }

  private rows(meter: CompiledMeter, query: MeterQuery, acc: Accumulator, windows: Windows): QueryRow[] {
    const tz = query.timeZone;
    const groups = acc.groups().sort((x, y) => x.window - y.window || compareDims(x.dimensions, y.dimensions));
    const rows: QueryRow[] = [];
    for (const g of groups) {
      const value = valueOf(meter.aggregation, g.state, g.distinct?.size);
      if (value === undefined) continue;
      let from: number;
      let to: number;
      if (!query.granularity) {
        from = query.from ?? floorMinute(g.state.f);
        to = query.to ?? floorMinute(g.state.l) + BASE_SIZE;
      } else if (query.granularity === 'PT1M') {
        from = g.window;
        to = g.window + BASE_SIZE;
      } else {
        [from, to] = windows[windowIndex(windows, g.window)];
      }
      rows.push({ value, from: formatInZone(from, tz), to: formatInZone(to, tz), dimensions: g.dimensions });
    }
    // A total without any grouping of a count has a row even when nothing matched (as ClickHouse).
    const countLike = meter.aggregation === 'count' || meter.aggregation === 'unique_count';
    if (rows.length === 0 && !query.granularity && query.groupBy.length === 0 && countLike) {
      rows.push({ value: '0', from: formatInZone(query.from ?? 0, tz), to: formatInZone(query.to ?? 0, tz), dimensions: {} });
    }
    return rows;
  }
}

function compareDims(a: Record<string, string>, b: Record<string, string>): number {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The store procedure `metering.query` (Store.nearData): a query run where the aggregates are. On a node
 * of workers that is the primary, so the thousands of reads of a year's query never cross its socket.
 */
const queryNearData: StoreProcedure = (store, args) => {
  const [record, query, oldest] = args as [MeterRecord, MeterQuery, number];
  const journal = store.journal();
  const events = journal ? new JournaledEvents(journal) : new KeyedEvents(store);
  return new QueryEngine(store, events).run(compileMeter(record, record.gen), query, oldest);
};

/** The plugin's store procedures (PluginDefinition.storeProcedures): `metering.<key>`. */
export const meteringProcedures = { query: queryNearData };

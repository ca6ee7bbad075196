/**
 * Turns events into aggregate updates: the writes that go into the same atomic batch as the events.
 * LevelDB has no merge operator, so each update is read-merge-write; only the writer (single, serial)
 * calls this, and a cache of committed states saves most reads. The cache only ever holds committed
 * values, so it needs no recovery: after a restart it starts empty.
 */
import type { BatchOp, Store, WriteBatch } from '../../../src/pdk/index.ts';
import {
  addEvent as addToState, BASE_SIZE, copyRow, decodeRow, decodeState, emptyRow, emptyState, encodeState, eventState, LEVELS, merge,
  boundedRowText, ROW_LEVELS, ROW_OVERFLOW, type Row, type State,
} from './aggregates.ts';
import type { StoredEvent } from '../shared/events.ts';
import { distinctPart, escapePart, padTime, TIME_WIDTH } from '../shared/keys.ts';
import {
  boundedText, dimensionText, dimensionTexts, distinctReading, numericReading, type CompiledMeter,
  type MeterRegistry,
} from '../meter/port.ts';
import type { BatchAggregates, NumberedEvent } from '../storage/writer.ts';

/** Aggregate updates of a group of events in one minute and series, at the base level; prepare() rolls them up. */
interface MinuteDelta {
  space: string;
  minute: number;
  series: string;
  state: State;
  /** Distinct values seen (unique_count), escaped. */
  distinct: Set<string> | null;
}

/** Subject, then each dimension value, down to the series' delta: finding it builds no string. */
type SeriesTree = Map<string, SeriesTree | MinuteDelta>;

export interface Delta {
  minutes: MinuteDelta[];
  /** By meter space and minute. */
  trees: Map<string, Map<number, SeriesTree>>;
  events: number;
}

export function newDelta(): Delta {
  return { minutes: [], trees: new Map(), events: 0 };
}

/** Series key part: subject and dimension values (escaped, so '/' separates them). */
export function seriesKey(subject: string, dimensions: string[]): string {
  let key = escapePart(subject);
  for (const d of dimensions) key += '/' + escapePart(d);
  return key;
}

function seriesTree(delta: Delta, space: string, minute: number): SeriesTree {
  let minutes = delta.trees.get(space);
  if (!minutes) delta.trees.set(space, (minutes = new Map()));
  let tree = minutes.get(minute);
  if (!tree) minutes.set(minute, (tree = new Map()));
  return tree;
}

/** Adds one event's contribution to a meter into the delta (runs per event and meter: allocates only for a new series). */
export function addEvent(delta: Delta, m: CompiledMeter, seq: number, event: StoredEvent): void {
  if (event.time < m.eventsFrom) return;
  const minute = event.time - (event.time % BASE_SIZE);
  let node = seriesTree(delta, m.space, minute);
  const subject = boundedText(event.subject);
  let part = subject;
  for (let i = 0; i < m.dimensionPaths.length; i++) {
    let next = node.get(part) as SeriesTree | undefined;
    if (!next) node.set(part, (next = new Map()));
    node = next;
    part = dimensionText(m, i, event.data);
  }
  const numeric = numericReading(m, event.data);
  let entry = node.get(part) as MinuteDelta | undefined;
  if (entry) addToState(entry.state, event.time, seq, numeric);
  else {
    entry = { space: m.space, minute, series: seriesKey(subject, dimensionTexts(m, event.data)), state: eventState(event.time, seq, numeric), distinct: null };
    node.set(part, entry);
    delta.minutes.push(entry);
  }
  const distinct = distinctReading(m, event.data);
  if (distinct !== undefined) (entry.distinct ??= new Set()).add(distinctPart(distinct));
  delta.events++;
}

/** The delta at every roll-up level, by aggregate key; and the distinct-value keys. */
export function rollUp(delta: Delta): { states: Map<string, State>; uniques: Set<string> } {
  const states = new Map<string, State>();
  const uniques = new Set<string>();
  for (const e of delta.minutes) {
    for (const level of LEVELS) {
      const bucket = padTime(e.minute - (e.minute % level.size));
      const key = `a/${e.space}/${level.name}/${bucket}/${e.series}`;
      const existing = states.get(key);
      if (existing) merge(existing, e.state);
      else states.set(key, merge(emptyState(), e.state));
      if (e.distinct) for (const value of e.distinct) uniques.add(`u/${e.space}/${level.name}/${bucket}/${e.series}/${value}`);
    }
  }
  return { states, uniques };
}

/**
 * A two-generation cache: recent entries in `young`, the previous generation in `old`; when `young`
 * is full it becomes `old`. Near-LRU behaviour at the cost of two Map operations, with no per-entry
 * bookkeeping for the garbage collector to chase.
 */
class GenerationalCache<V> {
  private young = new Map<string, V>();
  private old = new Map<string, V>();

  constructor(private readonly generationSize: number) {}

  get(key: string): V | undefined {
    const hit = this.young.get(key);
    if (hit !== undefined) return hit;
    const aged = this.old.get(key);
    if (aged !== undefined) this.set(key, aged);
    return aged;
  }

  set(key: string, value: V): void {
    if (this.young.size >= this.generationSize && !this.young.has(key)) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }

  delete(key: string): void {
    this.young.delete(key);
    this.old.delete(key);
  }

  clear(): void {
    this.young = new Map();
    this.old = new Map();
  }
}

/** `a/<space>/<level>/<bucket>/<series>` -> its row key and series, when its level has rows. */
function rowPlace(key: string): { rowKey: string; series: string } | undefined {
  const spaceEnd = key.indexOf('/', 2);
  const levelEnd = key.indexOf('/', spaceEnd + 1);
  if (!ROW_LEVELS.has(key.slice(spaceEnd + 1, levelEnd))) return undefined;
  const bucketEnd = levelEnd + 1 + TIME_WIDTH;
  return { rowKey: 'r' + key.slice(1, bucketEnd), series: key.slice(bucketEnd + 1) };
}

/** The per-series key of a series of a row: `r/<space>/<level>/<bucket>` -> `a/<space>/<level>/<bucket>/<series>`. */
function seriesKeyOf(rowKey: string, series: string): string {
  return 'a' + rowKey.slice(1) + '/' + series;
}

/** Rolled-up states split into rows (series by row, and the sum of their changes) and the base-level ones. */
function splitByRow(states: Map<string, State>): { byRow: Map<string, { series: Map<string, State>; change: State }>; unrowed: string[] } {
  const byRow = new Map<string, { series: Map<string, State>; change: State }>();
  const unrowed: string[] = [];
  for (const [key, state] of states) {
    const place = rowPlace(key);
    if (!place) {
      unrowed.push(key);
      continue;
    }
    let row = byRow.get(place.rowKey);
    if (!row) byRow.set(place.rowKey, (row = { series: new Map(), change: emptyState() }));
    row.series.set(place.series, state);
    merge(row.change, state);
  }
  return { byRow, unrowed };
}

/** Committed values in a cache, values of prepared-not-yet-committed batches pinned beside it. */
class Versioned<V> {
  private readonly cache: GenerationalCache<V>;
  private readonly pending = new Map<string, { value: V; token: symbol }>();

  constructor(cacheEntries: number) {
    this.cache = new GenerationalCache(cacheEntries);
  }

  get(key: string): V | undefined {
    return this.pending.get(key)?.value ?? this.cache.get(key);
  }

  /** Pins a prepared value until `commitAll(token)`. */
  pin(key: string, value: V, token: symbol): void {
    this.pending.set(key, { value, token });
  }

  /** Moves the values pinned with `token` to the cache, except those a later batch replaced. */
  commitAll(token: symbol): void {
    for (const [key, entry] of this.pending) {
      if (entry.token !== token) continue;
      this.pending.delete(key);
      this.cache.set(key, entry.value);
    }
  }

  delete(key: string): void {
    this.pending.delete(key);
    this.cache.delete(key);
  }

  clear(): void {
    this.pending.clear();
    this.cache.clear();
  }
}

export class AggregateLedger {
  private readonly states: Versioned<State>;
  private readonly rows: Versioned<Row>;

  constructor(
    private readonly store: Store,
    cacheEntries = 100_000,
  ) {
    this.states = new Versioned(cacheEntries);
    this.rows = new Versioned(Math.max(100, cacheEntries / 50));
  }

  /** Current values of keys: pinned or cached, else read (decoded; `empty` when absent). */
  private async currentValues<V>(
    keys: Iterable<string>,
    known: Versioned<V>,
    decode: (text: string) => V,
    empty: () => V,
    copy: (v: V) => V,
  ): Promise<Map<string, V>> {
    const current = new Map<string, V>();
    const missing: string[] = [];
    for (const key of keys) {
      const value = known.get(key);
      if (value !== undefined) current.set(key, copy(value));
      else missing.push(key);
    }
    const stored = await this.store.getMany(missing);
    missing.forEach((k, i) => current.set(k, stored[i] === undefined ? empty() : decode(stored[i]!)));
    return current;
  }

  /**
   * Adds the writes of a delta to `batch`; returns what to call once the batch is committed. Until
   * then the new states and rows are pending: a batch prepared while this one is being written
   * builds on them (they are never evicted, unlike cached ones). Must run inside the writer's serial
   * section. A batch this failed to fill must be discarded.
   */
  async prepare(delta: Delta, batch: WriteBatch): Promise<{ committed: () => void }> {
    const { states, uniques } = rollUp(delta);
    const { byRow, unrowed } = splitByRow(states);
    const rows = await this.currentValues(byRow.keys(), this.rows, decodeRow, emptyRow, copyRow);
    // Per-series keys: at the base level, and in rows that already overflow.
    const keyed = [...unrowed];
    for (const [rowKey, changes] of byRow) {
      if (rows.get(rowKey)!.series === ROW_OVERFLOW)
        for (const series of changes.series.keys()) keyed.push(seriesKeyOf(rowKey, series));
    }
    const current = await this.currentValues(keyed, this.states, decodeState, emptyState, (v) => ({ ...v }));
    const token = Symbol('batch');
    const putState = (key: string, state: State) => {
      this.states.pin(key, state, token);
      batch.put(key, encodeState(state));
    };
    for (const key of keyed) putState(key, merge(current.get(key)!, states.get(key)!));
    for (const [rowKey, changes] of byRow) {
      const row = rows.get(rowKey)!;
      if (row.total) merge(row.total, changes.change);
      if (row.series !== ROW_OVERFLOW) {
        for (const [series, change] of changes.series)
          row.series.set(series, merge({ ...(row.series.get(series) ?? emptyState()) }, change));
      }
      // From the overflow on, the bucket is read series by series: each gets its own key.
      batch.put(
        rowKey,
        boundedRowText(row, (series, state) => putState(seriesKeyOf(rowKey, series), state)),
      );
      this.rows.pin(rowKey, row, token);
    }
    for (const key of uniques) batch.put(key, '');
    return {
      committed: () => {
        this.states.commitAll(token);
        this.rows.commitAll(token);
      },
    };
  }

  /** Drops every pending and cached state (after a failed write nothing later can be trusted). */
  clear(): void {
    this.states.clear();
    this.rows.clear();
  }

  /** Drops cached states and rows (their keys were deleted). */
  forget(keys: Iterable<string>): void {
    for (const key of keys) {
      this.states.delete(key);
      this.rows.delete(key);
    }
  }
}

/** The single writer's aggregates: each event counted by the meters that aggregate its type. */
export function writerAggregates(ledger: AggregateLedger, meters: MeterRegistry): BatchAggregates {
  return {
    prepare(events: readonly NumberedEvent[], batch: WriteBatch) {
      const delta = newDelta();
      for (const { seq, record } of events) for (const m of meters.aggregating(record.type)) addEvent(delta, m, seq, record);
      return ledger.prepare(delta, batch);
    },
    clear: () => ledger.clear(),
  };
}

/** The writes of a delta into an aggregate space that holds nothing yet (bulk seeding, e.g. benchmarks). */
export function writesIntoEmptySpace(delta: Delta): BatchOp[] {
  const { states, uniques } = rollUp(delta);
  const { byRow, unrowed } = splitByRow(states);
  const ops: BatchOp[] = unrowed.map((key) => ({ type: 'put', key, value: encodeState(states.get(key)!) }));
  for (const [rowKey, { series, change }] of byRow) {
    const text = boundedRowText({ total: change, series }, (name, state) => ops.push({ type: 'put', key: seriesKeyOf(rowKey, name), value: encodeState(state) }));
    ops.push({ type: 'put', key: rowKey, value: text });
  }
  for (const key of uniques) ops.push({ type: 'put', key, value: '' });
  return ops;
}

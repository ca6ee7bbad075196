/**
 * Turns events into aggregate updates: the writes that go into the same atomic batch as the events.
 * LevelDB has no merge operator, so each update is read-merge-write; only the writer (single, serial)
 * calls this, and a cache of committed states saves most reads. The cache only ever holds committed
 * values, so it needs no recovery: after a restart it starts empty.
 */
import { LRUCache } from 'lru-cache';
import type { BatchOp, Store } from '../../src/pipeline/plugin-api.ts';
import { decodeState, emptyState, encodeState, eventState, LEVELS, merge, type State } from './aggregates.ts';
import type { StoredEvent } from './events.ts';
import { escapePart, padTime } from './keys.ts';
import { readEvent, type CompiledMeter } from './values.ts';

/** The aggregate updates of a group of events. */
export interface Delta {
  states: Map<string, State>;
  uniques: Set<string>;
  events: number;
}

export function newDelta(): Delta {
  return { states: new Map(), uniques: new Set(), events: 0 };
}

/** Series key part: subject and dimension values (escaped, so '/' separates them). */
export function seriesKey(subject: string, dimensions: string[]): string {
  let key = escapePart(subject);
  for (const d of dimensions) key += '/' + escapePart(d);
  return key;
}

/** Adds one event's contribution to a meter into the delta. */
export function addEvent(delta: Delta, m: CompiledMeter, seq: number, event: StoredEvent): void {
  if (event.time < m.eventsFrom) return;
  const reading = readEvent(m, event.data);
  const series = seriesKey(event.subject, reading.dimensions);
  const contribution = eventState(event.time, seq, reading.numeric);
  const distinct = reading.distinct === undefined ? undefined : escapePart(reading.distinct);
  delta.events++;
  for (const level of LEVELS) {
    const bucket = padTime(event.time - (event.time % level.size));
    const key = `a/${m.space}/${level.name}/${bucket}/${series}`;
    const existing = delta.states.get(key);
    if (existing) merge(existing, contribution);
    else delta.states.set(key, merge(emptyState(), contribution));
    if (distinct !== undefined) delta.uniques.add(`u/${m.space}/${level.name}/${bucket}/${series}/${distinct}`);
  }
}

export class AggregateLedger {
  private readonly cache: LRUCache<string, State>;

  constructor(
    private readonly store: Store,
    cacheEntries = 200_000,
  ) {
    this.cache = new LRUCache({ max: cacheEntries });
  }

  /**
   * The writes for a delta, and a function to call once they are committed (fills the cache).
   * Must run inside the writer's serial section.
   */
  async prepare(delta: Delta): Promise<{ ops: BatchOp[]; committed: () => void }> {
    const keys = [...delta.states.keys()];
    const missing = keys.filter((k) => !this.cache.has(k));
    const stored = await this.store.getMany(missing);
    const current = new Map<string, State>();
    missing.forEach((k, i) => current.set(k, stored[i] === undefined ? emptyState() : decodeState(stored[i]!)));
    const ops: BatchOp[] = [];
    const merged = new Map<string, State>();
    for (const [key, change] of delta.states) {
      const base = current.get(key) ?? { ...this.cache.get(key)! };
      const next = merge(base, change);
      merged.set(key, next);
      ops.push({ type: 'put', key, value: encodeState(next) });
    }
    for (const key of delta.uniques) ops.push({ type: 'put', key, value: '' });
    return { ops, committed: () => merged.forEach((state, key) => this.cache.set(key, state)) };
  }

  /** Drops cached states (their keys were deleted). */
  forget(keys: Iterable<string>): void {
    for (const key of keys) this.cache.delete(key);
  }
}

/**
 * Where the stored events are read and purged, in either of the two layouts, so that listing, raw
 * reads, backfill and purge do not know which one they run on:
 * - keys (LevelDB, alone or shared by a node's workers): the single writer puts each event under three
 *   keys in its batch (`e/`, `t/`, `d/`: keys.ts), beside the aggregates it changes;
 * - a journal (PostgreSQL): every process appends its events, one row each, whose key (the dedupe hash)
 *   the database keeps unique; the aggregator folds them in order and writes aggregates only
 *   (aggregation/aggregator.ts). Written once instead of three times and checked for duplicates in
 *   the same statement, which is what lets several nodes take events at the rate of plain inserts.
 *
 * Both number events in commit order (`seq`) and index them by event time, so cursors and backfill
 * ranges mean the same in each.
 */
import type { BatchOp, Journal, Store } from '../../../src/pdk/index.ts';
import { dedupeKey, eventKey, eventTypePrefix, padSeq, padTime, parseSeq, parseTimeIndexValue, parseTimeKey, TIME_PREFIX } from '../shared/keys.ts';

/** A stored event: its number, its JSON (StoredEvent) and when it was stored (ms). */
export interface EventRow {
  seq: number;
  json: string;
  storedAt: number;
  /** Where a listing continues after this event (`<time>/<seq>`, both padded): the same in both layouts. */
  cursor: string;
}

export interface EventRange {
  /** Event time, seconds: [from, to). */
  from: number;
  to?: number;
  /** Only events of this type (escaped: keys.escapePart). */
  typeEscaped?: string;
}

export interface StoredEvents {
  /** Newest event time first, strictly after the listing cursor `after` when given. */
  newestFirst(range: EventRange, after?: string): AsyncIterable<EventRow>;
  /** Every event of the range, in time order (raw reads of a query's sub-minute edges). */
  inRange(range: EventRange & { typeEscaped: string }): Promise<EventRow[]>;
  /**
   * Backfill: events of a type numbered in (after, upTo], at most `limit`, in order; `through` is how
   * far that is complete (the next chunk starts after it; upTo: done).
   */
  ofType(typeEscaped: string, after: number, upTo: number, limit: number): Promise<{ events: EventRow[]; through: number }>;
  /**
   * Retention: deletes at most `limit` events dated before `cutoff` (seconds), with what indexes them,
   * now or through `ops` (written with the purge's batch); returns how many.
   */
  purge(cutoff: number, limit: number, ops: BatchOp[]): Promise<number>;
}

const PAGE = 256;

/** A listing cursor's parts (`<time>/<seq>`). */
function parseCursor(cursor: string): [time: number, seq: number] {
  const { time, seq } = parseTimeKey(TIME_PREFIX + cursor);
  return [time, seq];
}

/** The key layout: the time index `t/` points at `e/` entries. */
export class KeyedEvents implements StoredEvents {
  constructor(private readonly store: Store) {}

  async *newestFirst(range: EventRange, after?: string): AsyncIterable<EventRow> {
    let upper = TIME_PREFIX + (range.to === undefined ? '\u{10FFFF}' : padTime(range.to));
    if (after !== undefined && TIME_PREFIX + after < upper) upper = TIME_PREFIX + after;
    let page: { timeKey: string; seq: number; storedAt: number; typeEscaped: string }[] = [];
    const rows = async () => {
      const values = await this.store.getMany(page.map((p) => eventKey(p.typeEscaped, p.seq)));
      const out: EventRow[] = [];
      page.forEach((p, i) => {
        if (values[i] !== undefined) out.push({ seq: p.seq, json: values[i]!, storedAt: p.storedAt, cursor: p.timeKey.slice(TIME_PREFIX.length) });
      });
      page = [];
      return out;
    };
    for await (const [key, value] of this.store.scan({ gte: TIME_PREFIX + padTime(range.from), lt: upper, reverse: true })) {
      const { typeEscaped, storedAt } = parseTimeIndexValue(value);
      if (range.typeEscaped !== undefined && typeEscaped !== range.typeEscaped) continue;
      page.push({ timeKey: key, seq: parseTimeKey(key).seq, storedAt, typeEscaped });
      if (page.length >= PAGE) yield* await rows();
    }
    if (page.length > 0) yield* await rows();
  }

  async inRange(range: EventRange & { typeEscaped: string }): Promise<EventRow[]> {
    const found: { seq: number; storedAt: number; cursor: string }[] = [];
    const upper = TIME_PREFIX + (range.to === undefined ? '\u{10FFFF}' : padTime(range.to));
    for await (const [key, value] of this.store.scan({ gte: TIME_PREFIX + padTime(range.from), lt: upper })) {
      const index = parseTimeIndexValue(value);
      if (index.typeEscaped === range.typeEscaped) found.push({ seq: parseTimeKey(key).seq, storedAt: index.storedAt, cursor: key.slice(TIME_PREFIX.length) });
    }
    const values = await this.store.getMany(found.map((f) => eventKey(range.typeEscaped, f.seq)));
    return found.flatMap((f, i) => (values[i] === undefined ? [] : [{ ...f, json: values[i]! }]));
  }

  async ofType(typeEscaped: string, after: number, upTo: number, limit: number): Promise<{ events: EventRow[]; through: number }> {
    const prefix = eventTypePrefix(typeEscaped);
    const events: EventRow[] = [];
    for await (const [key, json] of this.store.scan({ gte: prefix + padSeq(after + 1), lt: prefix + padSeq(upTo + 1), limit })) {
      // Backfill reads neither the time nor the stored time of an event.
      events.push({ seq: parseSeq(key.slice(prefix.length)), json, storedAt: 0, cursor: '' });
    }
    return { events, through: events.length < limit ? upTo : events[events.length - 1].seq };
  }

  /** The oldest events by time, at most `limit`, with their keys (moving them into a journal: journal-inbox.ts). */
  async oldestFirst(limit: number): Promise<(EventRow & { dedupe: string; typeEscaped: string; keys: string[] })[]> {
    const found: { seq: number; dedupe: string; typeEscaped: string; storedAt: number; timeKey: string }[] = [];
    for await (const [key, value] of this.store.scan({ prefix: TIME_PREFIX, limit }))
      found.push({ ...parseTimeIndexValue(value), seq: parseTimeKey(key).seq, timeKey: key });
    const values = await this.store.getMany(found.map((f) => eventKey(f.typeEscaped, f.seq)));
    return found.flatMap((f, i) => {
      const keys = [f.timeKey, eventKey(f.typeEscaped, f.seq), dedupeKey(f.dedupe)];
      return values[i] === undefined ? [] : [{ ...f, json: values[i]!, cursor: f.timeKey.slice(TIME_PREFIX.length), keys }];
    });
  }

  async purge(cutoff: number, limit: number, ops: BatchOp[]): Promise<number> {
    let deleted = 0;
    for await (const [key, value] of this.store.scan({ gte: TIME_PREFIX, lt: TIME_PREFIX + padTime(cutoff), limit })) {
      const { seq } = parseTimeKey(key);
      const { typeEscaped, dedupe } = parseTimeIndexValue(value);
      ops.push({ type: 'del', key }, { type: 'del', key: eventKey(typeEscaped, seq) }, { type: 'del', key: dedupeKey(dedupe) });
      deleted++;
    }
    return deleted;
  }
}

/** The journal layout: one entry per event, its key the dedupe hash, its kind the escaped type. */
export class JournaledEvents implements StoredEvents {
  constructor(private readonly journal: Journal) {}

  newestFirst(range: EventRange, after?: string): AsyncIterable<EventRow> {
    return this.byTime(range, true, after === undefined ? undefined : parseCursor(after));
  }

  async inRange(range: EventRange & { typeEscaped: string }): Promise<EventRow[]> {
    const rows: EventRow[] = [];
    for await (const row of this.byTime(range, false)) rows.push(row);
    return rows;
  }

  /** The range's events in time order (or newest first), read page by page after `position`. */
  private async *byTime(range: EventRange, reverse: boolean, position?: [number, number]): AsyncIterable<EventRow> {
    for (;;) {
      const entries = await this.journal.byTime({ from: range.from, to: range.to, kind: range.typeEscaped, after: position, reverse, limit: PAGE });
      for (const e of entries) yield journaledRow(e);
      if (entries.length < PAGE) return;
      const last = entries[entries.length - 1];
      position = [last.time, last.seq];
    }
  }

  async ofType(typeEscaped: string, after: number, upTo: number, limit: number): Promise<{ events: EventRow[]; through: number }> {
    const read = await this.journal.read(after, { kind: typeEscaped, upTo, limit });
    return { events: read.entries.map(journaledRow), through: read.through };
  }

  purge(cutoff: number, limit: number): Promise<number> {
    return this.journal.deleteBefore(cutoff, limit);
  }
}

function journaledRow(e: { seq: number; time: number; value: string; storedAt: number }): EventRow {
  return { seq: e.seq, json: e.value, storedAt: e.storedAt, cursor: `${padTime(e.time)}/${padSeq(e.seq)}` };
}

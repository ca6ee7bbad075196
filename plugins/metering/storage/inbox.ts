/**
 * The inboxes ingest puts events into on a store several processes share, for the elected aggregator
 * (aggregation/aggregator.ts) to drain through its single writer: the timings every inbox keeps, and the
 * inbox of keys (LevelDB shared by a node's workers); on PostgreSQL the journal is the inbox
 * (journal-inbox.ts).
 */
import type { Store } from '../../../src/pdk/index.ts';
import type { PreparedEvent } from '../shared/events.ts';
import { escapePart, INBOX_PREFIX, inboxBodyKey, inboxKey } from '../shared/keys.ts';
import { AggregationLagError, QueueFullError } from '../shared/errors.ts';
import type { Inbox, Writer } from './writer.ts';

/** Notice topic: an inbox entry was written (the aggregator drains at once instead of at its next poll). */
export const INBOX_TOPIC = 'metering-inbox';
/** The aggregator looks at the inbox this often when no notice came, backing off while it stays empty. */
export const POLL_MS = 50;
/** How often a process looks whether its oldest inbox entries were drained (only while it has some). */
export const BACKLOG_CHECK_MS = 100;
/** Inbox entries read per drain round. */
const ROUND_ENTRIES = 1_000;
/** Events per drain round, in batches of the writer's batch size: enough to keep its pipeline full. */
export const ROUND_BATCHES = 4;
/** How long a read waits for acknowledged events to be aggregated (well beyond a fail-over). */
export const DRAIN_WAIT_MS = 30_000;
/**
 * Ingest is refused while a process's oldest acknowledged entry has waited this long to be aggregated.
 * A read waits until what was acknowledged before it is aggregated: about this lag times the ratio of
 * the ingest rate to the aggregation rate (up to 2–3 on PostgreSQL), which must stay well below
 * DRAIN_WAIT_MS. A fail-over takes longer (the aggregator's LEASE_TTL_MS and a rebuild): producers are asked to retry
 * (503, Retry-After) for the rest of it, as they are while a loaded machine aggregates slowly.
 */
export const MAX_LAG_MS = 5_000;
/** A process's inbox may hold this many times queue_max_events not yet aggregated before ingest answers 503. */
export const INBOX_BACKLOG_FACTOR = 10;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * This process's inbox: each group commit of its writer becomes one entry. It keeps its entries not yet
 * drained (oldest first, as the aggregator drains them) to bound the backlog: whether the oldest are
 * gone is checked at most every BACKLOG_CHECK_MS while there are some.
 */
export class ProcessInbox implements Inbox {
  private entries = 0;
  /** Oldest first; `at`: when it was filled (performance.now()). */
  private readonly undrained: { key: string; events: number; at: number }[] = [];
  private undrainedEvents = 0;
  private checking: Promise<void> | undefined;
  private checkedAt = 0;

  constructor(
    private readonly store: Store,
    private readonly processId: string,
  ) {}

  async refusal(adding: number, queueLimit: number): Promise<Error | undefined> {
    if (this.undrained.length === 0) return undefined;
    const stale = performance.now() - this.checkedAt >= BACKLOG_CHECK_MS;
    if (!this.exceeded(adding, queueLimit)) {
      if (stale) void this.checkDrained();
      return undefined;
    }
    // Refuse on what the store holds now: after a quiet spell the entries may be long drained.
    if (stale) await this.checkDrained();
    return this.exceeded(adding, queueLimit);
  }

  private exceeded(adding: number, queueLimit: number): Error | undefined {
    if (this.undrained.length === 0) return undefined;
    if (this.undrainedEvents + adding > INBOX_BACKLOG_FACTOR * queueLimit) return new QueueFullError();
    if (performance.now() - this.undrained[0].at > MAX_LAG_MS) return new AggregationLagError();
    return undefined;
  }

  /** Counted later, by the aggregator: none now. */
  async put(events: readonly PreparedEvent[]): Promise<undefined> {
    const key = inboxKey(Date.now(), this.processId, ++this.entries);
    const batch = this.store.writeBatch();
    batch.put(key, String(events.length));
    batch.put(inboxBodyKey(key), linesOf(events));
    // Counted before the write: an entry whose write failed is forgotten by the next check.
    this.undrained.push({ key, events: events.length, at: performance.now() });
    this.undrainedEvents += events.length;
    await batch.write({ sync: true });
    this.store.notices.publish(INBOX_TOPIC, '');
    return undefined;
  }

  /** Forgets the oldest entries that are gone (drained, or never written: their batch failed); one check at a time. */
  private checkDrained(): Promise<void> {
    this.checking ??= (async () => {
      try {
        const oldest = this.undrained.slice(0, ROUND_ENTRIES);
        const stored = await this.store.getMany(oldest.map((entry) => entry.key));
        let gone = 0;
        while (gone < oldest.length && stored[gone] === undefined) this.undrainedEvents -= oldest[gone++].events;
        this.undrained.splice(0, gone);
      } catch {
        // Checked again on the next ingest.
      } finally {
        this.checking = undefined;
        this.checkedAt = performance.now();
      }
    })();
    return this.checking;
  }

}

/** An inbox entry's body, or a hand-off to the primary (hand-off.ts): a line per event, its dedupe hash and its JSON. */
export function linesOf(events: readonly PreparedEvent[]): string {
  let lines = '';
  for (const e of events) lines += (lines ? '\n' : '') + e.dedupe + ' ' + e.json;
  return lines;
}

/** The events of an inbox entry's body (JSON never holds a raw newline, so lines split it). */
export function eventsOf(body: string | undefined): PreparedEvent[] {
  if (!body) return [];
  return body.split('\n').map((line) => {
    const space = line.indexOf(' ');
    const json = line.slice(space + 1);
    const record = JSON.parse(json);
    return { record, json, typeEscaped: escapePart(record.type), dedupe: line.slice(0, space) };
  });
}

/**
 * Read-your-writes: resolves once every inbox entry that exists now has been drained. Entries drain
 * in key order and keys start with their time, so it is enough to watch the first remaining key pass
 * the last one seen now. Throws AggregationLagError after DRAIN_WAIT_MS (no aggregator, or far behind).
 */
export async function awaitDrained(store: Store, waitMs = DRAIN_WAIT_MS): Promise<void> {
  let last: string | undefined;
  for await (const [key] of store.scan({ prefix: INBOX_PREFIX, reverse: true, limit: 1 })) last = key;
  if (last === undefined) return;
  const deadline = performance.now() + waitMs;
  for (let pause = 2; ; pause = Math.min(pause * 2, POLL_MS)) {
    let pending = false;
    for await (const _ of store.scan({ prefix: INBOX_PREFIX, lt: last + '\u0000', limit: 1 })) pending = true;
    if (!pending) return;
    if (performance.now() > deadline) throw new AggregationLagError();
    await sleep(pause);
  }
}

/** Drains the oldest inbox entries (a few batches of `batchEvents`) through `writer`; returns how many. */
export async function drainInboxRound(store: Store, writer: Writer, batchEvents: number): Promise<number> {
  const budget = ROUND_BATCHES * batchEvents;
  const keys: string[] = [];
  let events = 0;
  for await (const [key, count] of store.scan({ prefix: INBOX_PREFIX, limit: ROUND_ENTRIES })) {
    keys.push(key);
    events += Number(count);
    if (events >= budget) break;
  }
  if (keys.length === 0) return 0;
  const bodies = await store.getMany(keys.map(inboxBodyKey));
  // Every submit settles before the next round reads the inbox again: none is drained twice at once.
  const results = await Promise.allSettled(keys.map((key, i) => writer.submit(eventsOf(bodies[i]), Infinity, { inboxKeys: [key, inboxBodyKey(key)] })));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return keys.length;
}

/**
 * Metering on a store with a journal (PostgreSQL), design (a) of OpenMeter's sink worker:
 * - ingest: every process appends its validated events to the journal in its group commit, one row
 *   per event, and acknowledges once that append committed; the journal's unique key (the dedupe hash)
 *   drops a duplicate in the same statement, whichever node took it first;
 * - aggregation: the elected aggregator (aggregation/aggregator.ts) reads the journal in commit order after
 *   `meta/seq`, and its journaled writer folds each round into aggregates, writing `meta/seq` with them
 *   under its lease's fence: a crash or a fail-over resumes exactly after the last committed round;
 * - reads are read-your-writes: a query waits until `meta/seq` reaches the journal's last number as it
 *   was when the query started (awaitFolded).
 *
 * In memory, per process: the backlog samples of JournalInbox (when this process saw which journal
 * number; only for refusing ingest). Everything else is in the store.
 *
 * A store written by an earlier version keeps its events in keys (`e/`, `t/`, `d/`) and maybe inbox
 * entries: until the aggregator has moved both into the journal (moveKeyedEvents), ingest is refused
 * with a retry, since the journal could not yet tell their duplicates.
 */
import type { Journal, JournalEntry, Store } from '../../../src/pdk/index.ts';
import { BACKLOG_CHECK_MS, DRAIN_WAIT_MS, eventsOf, INBOX_BACKLOG_FACTOR, INBOX_TOPIC, MAX_LAG_MS, POLL_MS, ROUND_BATCHES, sleep } from './inbox.ts';
import { AggregationLagError, JournalNotReadyError, QueueFullError } from '../shared/errors.ts';
import type { PreparedEvent, StoredEvent } from '../shared/events.ts';
import { INBOX_PREFIX, inboxBodyKey, JOURNAL_READY_KEY, parseSeq, SEQ_KEY, subjectKey, TIME_PREFIX } from '../shared/keys.ts';
import { KeyedEvents } from './stored-events.ts';
import type { Inbox, Writer } from './writer.ts';

/** Keyed events moved into the journal per round. */
const MOVE_CHUNK = 1_000;

/** The journal as this process's inbox: appends, and refuses ingest while the aggregator lags. */
export class JournalInbox implements Inbox {
  private ready = false;
  /** The journal's last number as seen at a moment (performance.now()), oldest first, while not folded. */
  private readonly unfolded: { last: number; at: number }[] = [];
  private backlog = 0;
  private checking: Promise<void> | undefined;
  private checkedAt = -Infinity;

  constructor(
    private readonly store: Store,
    private readonly journal: Journal,
  ) {}

  async refusal(adding: number, queueLimit: number): Promise<Error | undefined> {
    this.ready ||= (await this.store.get(JOURNAL_READY_KEY)) !== undefined;
    if (!this.ready) return new JournalNotReadyError();
    const stale = performance.now() - this.checkedAt >= BACKLOG_CHECK_MS;
    if (stale) {
      const check = this.check();
      // Refuse on what the store holds now: after a quiet spell the backlog may be long folded.
      if (this.exceeded(adding, queueLimit)) await check;
    }
    return this.exceeded(adding, queueLimit);
  }

  private exceeded(adding: number, queueLimit: number): Error | undefined {
    if (this.backlog + adding > INBOX_BACKLOG_FACTOR * queueLimit) return new QueueFullError();
    if (this.unfolded.length > 0 && performance.now() - this.unfolded[0].at > MAX_LAG_MS) return new AggregationLagError();
    return undefined;
  }

  /** How far the aggregator is behind the journal, and since when (by this process's clock); one check at a time. */
  private check(): Promise<void> {
    this.checking ??= (async () => {
      try {
        const [folded, last] = await Promise.all([foldedThrough(this.store), this.journal.last()]);
        const at = performance.now();
        if (last > folded && (this.unfolded.length === 0 || this.unfolded[this.unfolded.length - 1].last < last)) this.unfolded.push({ last, at });
        while (this.unfolded.length > 0 && this.unfolded[0].last <= folded) this.unfolded.shift();
        this.backlog = last - folded;
      } catch {
        // Checked again on the next ingest.
      } finally {
        this.checking = undefined;
        this.checkedAt = performance.now();
      }
    })();
    return this.checking;
  }

  async put(events: readonly PreparedEvent[]): Promise<void> {
    await this.journal.append(
      events.map((e) => ({ key: e.dedupe, time: e.record.time, kind: e.typeEscaped, value: e.json })),
      Date.now(),
    );
    // Counted until the next check reads the backlog from the store: the bound holds between checks too.
    this.backlog += events.length;
    this.store.notices.publish(INBOX_TOPIC, '');
  }
}

/** Every process, at start: a store with nothing to move into the journal is ready for appends at once. */
export async function prepareJournal(store: Store, journal: Journal): Promise<void> {
  if ((await store.get(JOURNAL_READY_KEY)) !== undefined) return;
  if ((await holdsAny(store, TIME_PREFIX)) || (await holdsAny(store, INBOX_PREFIX))) return;
  // Appends number after every event this store ever counted (all of them may have been purged).
  await journal.import([], await foldedThrough(store));
  await store.put(JOURNAL_READY_KEY, '1', { sync: true });
}

async function holdsAny(store: Store, prefix: string): Promise<boolean> {
  for await (const _ of store.scan({ prefix, limit: 1 })) return true;
  return false;
}

/** Every journal number up to this one is aggregated. */
async function foldedThrough(store: Store): Promise<number> {
  const seq = await store.get(SEQ_KEY);
  return seq === undefined ? 0 : parseSeq(seq);
}

/** The aggregator's rounds on a journal: first what an earlier version left in keys, then the journal. */
export class JournalDrain {
  private moved = false;

  constructor(
    /** The term's (fenced) store. */
    private readonly store: Store,
    private readonly journal: Journal,
  ) {}

  /** One round; returns how many events it moved or folded (0: nothing to do). */
  async round(writer: Writer, batchEvents: number): Promise<number> {
    if (!this.moved) {
      const moved = await this.moveKeyedEvents();
      if (moved > 0) return moved;
      this.moved = true;
    }
    return foldJournalRound(this.journal, writer, batchEvents);
  }

  /**
   * Moves a chunk of an earlier version's keyed events into the journal with their numbers (they are
   * aggregated: `meta/seq` covers them), then its inbox entries as new appends (folded next), then
   * says the journal is ready. Each step can run again after a crash: imports and appends skip the keys
   * the journal holds, deletions are of keys moved.
   */
  private async moveKeyedEvents(): Promise<number> {
    if ((await this.store.get(JOURNAL_READY_KEY)) !== undefined) return 0;
    const keyed: JournalEntry[] = [];
    const ops: { type: 'del'; key: string }[] = [];
    for (const row of await new KeyedEvents(this.store).oldestFirst(MOVE_CHUNK)) {
      const event = JSON.parse(row.json) as StoredEvent;
      keyed.push({ seq: row.seq, key: row.dedupe, time: event.time, kind: row.typeEscaped, storedAt: row.storedAt, value: row.json });
      ops.push(...row.keys.map((key) => ({ type: 'del' as const, key })));
    }
    if (keyed.length > 0) {
      await this.journal.import(keyed, await foldedThrough(this.store));
      const subjects = new Set(keyed.map((e) => (JSON.parse(e.value) as StoredEvent).subject));
      await this.store.batch([...ops, ...[...subjects].map((s) => ({ type: 'put' as const, key: subjectKey(s), value: '' }))], { sync: true });
      return keyed.length;
    }
    const inbox: string[] = [];
    for await (const [key] of this.store.scan({ prefix: INBOX_PREFIX, limit: MOVE_CHUNK })) inbox.push(key);
    if (inbox.length > 0) {
      const bodies = await this.store.getMany(inbox.map(inboxBodyKey));
      const events = bodies.flatMap((body) => eventsOf(body));
      await this.journal.import([], await foldedThrough(this.store));
      await this.journal.append(events.map((e) => ({ key: e.dedupe, time: e.record.time, kind: e.typeEscaped, value: e.json })), Date.now());
      await this.store.batch(inbox.flatMap((key) => [{ type: 'del' as const, key }, { type: 'del' as const, key: inboxBodyKey(key) }]), { sync: true });
      return Math.max(events.length, 1);
    }
    await this.journal.import([], await foldedThrough(this.store));
    await this.store.put(JOURNAL_READY_KEY, '1', { sync: true });
    return 0;
  }
}

/** Folds the journal's next entries (a few batches of `batchEvents`) through the journaled `writer`; returns how many. */
async function foldJournalRound(journal: Journal, writer: Writer, batchEvents: number): Promise<number> {
  const after = writer.lastSeq;
  const read = await journal.read(after, { limit: ROUND_BATCHES * batchEvents });
  if (read.through <= after) return 0;
  const events = read.entries.map(journaledEvent);
  const submits: Promise<unknown>[] = [];
  for (let i = 0; i < events.length || submits.length === 0; i += batchEvents) {
    const chunk = events.slice(i, i + batchEvents);
    const through = i + batchEvents >= events.length ? read.through : chunk[chunk.length - 1].seq!;
    submits.push(writer.submit(chunk, Infinity, { through }));
  }
  // Every submit settles before the next round reads after the writer's number: none is folded twice.
  const failed = (await Promise.allSettled(submits)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return Math.max(events.length, 1);
}

function journaledEvent(entry: JournalEntry): PreparedEvent {
  return { record: JSON.parse(entry.value) as StoredEvent, json: entry.value, typeEscaped: entry.kind, dedupe: entry.key, seq: entry.seq };
}

/**
 * Read-your-writes: resolves once every event the journal held when called is aggregated. Throws
 * AggregationLagError after DRAIN_WAIT_MS (no aggregator, or far behind).
 */
export async function awaitFolded(store: Store, journal: Journal, waitMs = DRAIN_WAIT_MS): Promise<void> {
  const last = await journal.last();
  const deadline = performance.now() + waitMs;
  for (let pause = 2; (await foldedThrough(store)) < last; pause = Math.min(pause * 2, POLL_MS)) {
    if (performance.now() > deadline) throw new AggregationLagError();
    await sleep(pause);
  }
}

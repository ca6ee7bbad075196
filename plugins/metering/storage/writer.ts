/**
 * The single writer: a bounded queue between the HTTP handlers and the store, and group commit.
 * Requests enqueue validated events and wait; a flush commits whole requests in one atomic LevelDB
 * batch written with sync: the raw events, their time index, their dedupe keys, the sequence number
 * and the aggregate updates of every matching meter. The promise of each request settles only after
 * that commit.
 *
 * Pipelining: while one batch is being written (fsync), the next one is prepared (dedupe lookups,
 * aggregate read-merge) on top of the first one's results: the in-flight dedupe keys, the next
 * sequence numbers and the cached aggregate states are taken as if the first had committed. Writes
 * stay strictly ordered (each starts after the previous one resolved), so the store never holds a
 * later batch without the earlier one; if a write fails, every batch prepared on top of it fails
 * too and the optimistic state is dropped before anything else is prepared.
 *
 * Everything else that writes aggregates or meters (backfill, clean-up, purge, meter changes) runs in
 * `exclusive`, after every pending write has settled, so the read-merge-write of aggregates never races.
 *
 * On a store with a journal (PostgreSQL) the aggregator's writer is `journaled`: its events were stored
 * and numbered by the journal, deduplicated there, so it writes only aggregates, subjects and how far
 * it has folded (`meta/seq`, then the journal's number).
 */
import type { Logger } from 'pino';
import type { Store, WriteBatch } from '../../../src/pdk/index.ts';
import type { PreparedEvent, StoredEvent } from '../shared/events.ts';
import { dedupeKey, eventKey, padSeq, SEQ_KEY, subjectKey, timeIndexValue, timeKey } from '../shared/keys.ts';
import { DedupeFilter } from './dedupe-filter.ts';
import { EarlierBatchFailedError, QueueFullError, WriterClosedError } from '../shared/errors.ts';

export type CommittedListener = (events: readonly PreparedEvent[]) => void;

/** An event with the sequence number the writer gave it (or the journal's). */
export interface NumberedEvent {
  seq: number;
  record: StoredEvent;
}

/**
 * What the writer adds to each batch besides the events: the aggregates of the meters that count them
 * (the aggregation's ledger), read and merged on top of the batches still in flight.
 */
export interface BatchAggregates {
  /** Puts the aggregate changes of `events` into `batch`; `committed` is called once the batch is durable. */
  prepare(events: readonly NumberedEvent[], batch: WriteBatch): Promise<{ committed: () => void }>;
  /** Drops what was prepared on top of writes that failed. */
  clear(): void;
}

/**
 * Where the processes of a shared store put their events for the aggregator: an inbox of keys, or the
 * journal (inbox.ts, journal-inbox.ts).
 */
export interface Inbox {
  /**
   * Why `adding` more events must be refused now, because the events acknowledged are not being
   * aggregated fast enough (the aggregator is down, or slower than ingest), or undefined.
   */
  refusal(adding: number, queueLimit: number): Promise<Error | undefined>;
  /**
   * Stores `events` durably for the aggregator, and tells it. Resolves with the events counted by then
   * (handed to a writer that committed them: the committed listeners get those), or with nothing when
   * the aggregator counts them later.
   */
  put(events: readonly PreparedEvent[]): Promise<readonly PreparedEvent[] | void>;
  /**
   * Set when puts may be in flight together (a hand-off: the writer it goes to orders and deduplicates
   * them); otherwise each put waits for the one before.
   */
  readonly concurrentPuts?: number;
}

export interface WriterOptions {
  batchMaxEvents: number;
  batchMaxWaitMs: number;
}

/** How a writer is set up, beyond its settings (see the class). */
export interface WriterSetup {
  dedupeFilterCapacity?: number;
  committedListeners?: Set<CommittedListener>;
  /** Set on the processes of a shared store: batches go to the inbox instead (see inbox.ts). */
  inbox?: Inbox;
  /** The aggregator's writer on a store with a journal: it folds journaled events (numbered, unique). */
  journaled?: boolean;
}

/** What a drain of the aggregator hands the writer besides events. */
export interface Drained {
  /** Inbox keys the events were drained from, deleted in the same batch. */
  inboxKeys?: readonly string[];
  /** Journaled: every journal number up to this one is in the events or was never stored (a duplicate). */
  through?: number;
}

interface Waiting extends Drained {
  events: PreparedEvent[];
  /** With the events of this request that were counted (not duplicates). */
  resolve(counted: readonly PreparedEvent[]): void;
  reject(err: unknown): void;
}

/** At most this many batches written or waiting to be written (one writing, one prepared). */
const MAX_WRITES_IN_FLIGHT = 2;
/**
 * A batch is prepared during another one's write only when this many events wait: preparing a
 * handful early would cost them a whole fsync of their own instead of joining the next group.
 */
const PIPELINE_MIN_EVENTS = 500;

/** A batch whose write was launched, and the events it counts (known once written). */
interface Launched {
  written: Promise<void>;
  counted(): readonly PreparedEvent[];
}

/** Resolves each request of a written group with its own events among `counted` (a subsequence of the group's, in order). */
function settle(group: readonly Waiting[], counted: readonly PreparedEvent[]): void {
  let next = 0;
  for (const waiting of group) {
    const own: PreparedEvent[] = [];
    for (const event of waiting.events) if (counted[next] === event) own.push(counted[next++]);
    waiting.resolve(own);
  }
}

export class Writer {
  private waiting: Waiting[] = [];
  private waitingEvents = 0;
  private timer: NodeJS.Timeout | null = null;
  private preparing = false;
  private writesInFlight = 0;
  /** Serial section (prepare steps and exclusive work), FIFO. */
  private tail: Promise<unknown> = Promise.resolve();
  /** The last launched write, and the same settled-safe. */
  private lastWrite: Promise<void> = Promise.resolve();
  private writeTail: Promise<void> = Promise.resolve();
  /** A write failed: later prepared batches fail, optimistic state must be dropped. */
  private chainBroken = false;
  /** Dedupe keys of prepared batches not yet written. */
  private readonly inFlightDedupe = new Set<string>();
  /** Which dedupe keys need a lookup in the store at all. */
  readonly dedupeFilter: DedupeFilter;
  private closed = false;
  /** Last sequence number committed. */
  lastSeq = 0;
  /** Called with each batch of events once it is committed (e.g. billing's entitlement usage); must not throw. */
  readonly committedListeners: Set<CommittedListener>;
  /** Last sequence number handed out (≥ lastSeq while batches are in flight). */
  private preparedSeq = 0;
  private readonly inbox: Inbox | null;
  private readonly journaled: boolean;
  /** Batches written or waiting to be written at once. */
  private readonly maxWritesInFlight: number;
  /** The last failure logged: a store that refuses every write (a full disk) fails each batch alike, logged once. */
  private lastFailureLogged = '';

  constructor(
    private readonly store: Store,
    private readonly aggregates: BatchAggregates,
    private readonly log: Logger,
    public options: WriterOptions,
    setup: WriterSetup = {},
  ) {
    this.dedupeFilter = new DedupeFilter(store, log, setup.dedupeFilterCapacity);
    this.committedListeners = setup.committedListeners ?? new Set();
    this.inbox = setup.inbox ?? null;
    this.maxWritesInFlight = this.inbox?.concurrentPuts ?? MAX_WRITES_IN_FLIGHT;
    this.journaled = setup.journaled ?? false;
  }

  async open(): Promise<void> {
    const seq = await this.store.get(SEQ_KEY);
    this.lastSeq = this.preparedSeq = seq === undefined ? 0 : parseInt(seq, 16);
    // Sized for twice the events ever stored (more than are kept): room to grow before a reload.
    // A journaled writer looks up nothing: the journal refused the duplicates.
    if (!this.journaled) this.dedupeFilter.startLoad(2 * this.lastSeq);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Runs `fn` alone among all writes, once every launched write has settled (FIFO). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.serial(async () => {
      await this.settleWrites();
      return fn();
    });
  }

  /** Waits for launched writes; drops optimistic state if one failed. Serial section only. */
  private async settleWrites(): Promise<void> {
    await this.writeTail;
    if (this.chainBroken) {
      this.chainBroken = false;
      this.preparedSeq = this.lastSeq;
      this.inFlightDedupe.clear();
      this.aggregates.clear();
    }
  }

  /** Events accepted and waiting for their batch (the queue `queue_max_events` bounds). */
  get queuedEvents(): number {
    return this.waitingEvents;
  }

  /**
   * Resolves once every event is durably committed (or was a duplicate), with the ones counted now
   * (not duplicates; none when they went into an inbox). Throws QueueFullError when `queueLimit` events
   * already wait (a lone request larger than the limit still gets through).
   */
  async submit(events: PreparedEvent[], queueLimit: number, drained: Drained = {}): Promise<readonly PreparedEvent[]> {
    if (this.closed) throw new WriterClosedError();
    if (this.waitingEvents > 0 && this.waitingEvents + events.length > queueLimit) throw new QueueFullError();
    if (this.inbox) {
      const refusal = await this.inbox.refusal(events.length, queueLimit);
      if (refusal) throw refusal;
      if (this.closed) throw new WriterClosedError();
    }
    return new Promise<readonly PreparedEvent[]>((resolve, reject) => {
      this.waiting.push({ events, ...drained, resolve, reject });
      this.waitingEvents += events.length;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.waiting.length === 0 || this.preparing || this.writesInFlight >= this.maxWritesInFlight) return;
    if (this.writesInFlight > 0) {
      // The waiting events are already waiting for that write; prepare them early only when they are many.
      if (this.waitingEvents >= Math.min(this.options.batchMaxEvents, PIPELINE_MIN_EVENTS)) this.startFlush();
    } else if (this.waitingEvents >= this.options.batchMaxEvents || this.options.batchMaxWaitMs === 0) {
      this.startFlush();
    } else if (!this.timer) {
      this.timer = setTimeout(() => this.startFlush(), this.options.batchMaxWaitMs);
    }
  }

  private startFlush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.waiting.length === 0 || this.preparing || this.writesInFlight >= this.maxWritesInFlight) return;
    if (this.writesInFlight > 0 && this.waitingEvents < Math.min(this.options.batchMaxEvents, PIPELINE_MIN_EVENTS) && !this.closed) return;
    const group: Waiting[] = [];
    let count = 0;
    while (this.waiting.length > 0 && (group.length === 0 || count + this.waiting[0].events.length <= this.options.batchMaxEvents)) {
      const next = this.waiting.shift()!;
      group.push(next);
      count += next.events.length;
    }
    this.waitingEvents -= count;
    this.preparing = true;
    const fail = (err: unknown) => {
      if ((err as Error).message !== this.lastFailureLogged) this.log.error({ err }, 'metering: committing events failed');
      this.lastFailureLogged = (err as Error).message;
      group.forEach((w) => w.reject(err));
    };
    const events = group.flatMap((w) => w.events);
    const inboxKeys = group.flatMap((w) => w.inboxKeys ?? []);
    const through = Math.max(0, ...group.map((w) => w.through ?? 0));
    this.serial(() => (this.inbox ? this.launchIntoInbox(events) : this.prepareAndLaunch(events, { inboxKeys, through }))).then(
      ({ written, counted }) => {
        this.preparing = false;
        this.writesInFlight++;
        written
          .then(() => settle(group, counted()), fail)
          .finally(() => {
            this.writesInFlight--;
            this.schedule();
          });
        this.schedule();
      },
      (err) => {
        this.preparing = false;
        fail(err);
        this.schedule();
      },
    );
  }

  /**
   * Prepares the batch of `events` on top of every launched write and launches its write after
   * them. First of each (source, id) wins; known ones are skipped. Serial section only.
   */
  private async prepareAndLaunch(events: PreparedEvent[], drained: Required<Drained>): Promise<Launched> {
    if (this.chainBroken) await this.settleWrites();
    const accepted = this.journaled ? events : await this.withoutStored(this.firstOfEach(events));
    // Only duplicates: done when their originals are (a failure of the last write may be spurious
    // for them, which is safe: a retry is acknowledged as a duplicate).
    if (accepted.length === 0 && drained.inboxKeys.length === 0 && drained.through <= this.preparedSeq) return { written: this.lastWrite, counted: () => [] };
    const storedAt = Date.now();
    // Filled now, while the previous batch is being written: only the write itself waits for it.
    const batch = this.store.writeBatch();
    const numbered: NumberedEvent[] = [];
    let seq = this.preparedSeq;
    let committed: () => void;
    // Written again with every batch that names them: a put, never a lookup.
    const subjects = new Set<string>();
    try {
      for (const e of accepted) {
        subjects.add(e.record.subject);
        if (this.journaled) seq = e.seq!;
        else this.putEvent(batch, e, ++seq, storedAt);
        numbered.push({ seq, record: e.record });
      }
      if (this.journaled) seq = Math.max(seq, drained.through);
      for (const subject of subjects) batch.put(subjectKey(subject), '');
      for (const key of drained.inboxKeys) batch.del(key);
      batch.put(SEQ_KEY, padSeq(seq));
      ({ committed } = await this.aggregates.prepare(numbered, batch));
    } catch (err) {
      await batch.discard();
      throw err;
    }
    // Optimistic from here on: the next batch builds on this one.
    this.preparedSeq = seq;
    const hashes = this.journaled ? [] : accepted.map((e) => e.dedupe);
    if (hashes.length > 0) {
      for (const hash of hashes) {
        this.inFlightDedupe.add(hash);
        this.dedupeFilter.add(hash);
      }
      this.dedupeFilter.growIfFull(this.inFlightDedupe);
    }
    const { written } = this.launch(batch, () => {
      this.lastSeq = seq;
      committed();
      this.fireCommitted(accepted);
      for (const hash of hashes) this.inFlightDedupe.delete(hash);
    });
    return { written, counted: () => accepted };
  }

  private fireCommitted(events: readonly PreparedEvent[]): void {
    if (events.length > 0) for (const listener of this.committedListeners) listener(events);
  }

  /** Each (source, id) once, and none whose write is in flight. */
  private firstOfEach(events: PreparedEvent[]): PreparedEvent[] {
    const fresh: PreparedEvent[] = [];
    const seen = new Set<string>();
    for (const e of events) {
      if (seen.has(e.dedupe) || this.inFlightDedupe.has(e.dedupe)) continue;
      seen.add(e.dedupe);
      fresh.push(e);
    }
    return fresh;
  }

  /** The event, its time index and its dedupe key (the key layout of stored-events.ts). */
  private putEvent(batch: WriteBatch, e: PreparedEvent, seq: number, storedAt: number): void {
    const padded = padSeq(seq);
    batch.put(eventKey(e.typeEscaped, seq, padded), e.json);
    batch.put(timeKey(e.record.time, seq, padded), timeIndexValue(e.typeEscaped, e.dedupe, storedAt));
    batch.put(dedupeKey(e.dedupe), padded);
  }

  /** Writes `batch` (durably) after every launched write; a failure breaks the chain. Serial section only. */
  private launch(batch: Pick<WriteBatch, 'write' | 'discard'>, afterCommit: () => void): { written: Promise<void> } {
    const written = this.writeTail.then(async () => {
      if (this.chainBroken) {
        await batch.discard();
        throw new EarlierBatchFailedError();
      }
      try {
        await batch.write({ sync: true });
      } catch (err) {
        this.chainBroken = true;
        throw err;
      }
      afterCommit();
    });
    this.lastWrite = written;
    this.writeTail = written.catch(() => undefined);
    return { written };
  }

  /** Puts the events into the inbox, durably: the aggregator counts them then (a hand-off) or later. */
  private async launchIntoInbox(events: PreparedEvent[]): Promise<Launched> {
    const inbox = this.inbox!;
    let counted: readonly PreparedEvent[] = [];
    if (inbox.concurrentPuts) {
      const written = inbox.put(events).then((put) => this.fireCommitted((counted = put ?? [])));
      return { written, counted: () => counted };
    }
    if (this.chainBroken) await this.settleWrites();
    const write = async () => void (counted = (await inbox.put(events)) ?? []);
    const { written } = this.launch({ write, discard: async () => undefined }, () => this.fireCommitted(counted));
    return { written, counted: () => counted };
  }

  /** The events whose dedupe keys are not stored, asking the store only where the filter cannot tell. */
  private async withoutStored(events: PreparedEvent[]): Promise<PreparedEvent[]> {
    const lookedUp = events.filter((e) => this.dedupeFilter.mayContain(e.dedupe));
    if (lookedUp.length === 0) return events;
    const stored = await this.store.getMany(lookedUp.map((e) => dedupeKey(e.dedupe)));
    const known = new Set(lookedUp.filter((_, i) => stored[i] !== undefined));
    return known.size === 0 ? events : events.filter((e) => !known.has(e));
  }

  /** Commits everything queued, then refuses new events. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.waiting.length > 0 || this.preparing || this.writesInFlight > 0) {
      this.startFlush();
      await new Promise((r) => setTimeout(r, 2));
    }
    await this.idle();
    await this.dedupeFilter.stop();
  }

  /** Resolves when no serial work is running or queued and every launched write has settled. */
  async idle(): Promise<void> {
    let tail;
    do {
      tail = this.tail;
      await tail;
      await this.writeTail;
    } while (tail !== this.tail);
  }
}

/**
 * Metering on a store several processes share (worker_processes above 1, or PostgreSQL with several
 * nodes): an inbox per process and one elected aggregator, the shape of OpenMeter's sink worker
 * (ingest acknowledges once the events are durable; one consumer folds them into aggregates in order).
 * This file is the election, the fencing and the inbox of keys (LevelDB shared by a node's workers); on
 * PostgreSQL the journal is the inbox and the events' storage at once (journal-inbox.ts).
 *
 * - Ingest: each process's writer group-commits validated events into its inbox (`i/` entry + `ib/`
 *   events, one atomic durable write) and acknowledges; no dedupe at this step.
 * - Aggregation: the processes that use metering (a metering route, a declared meter, events from
 *   another plugin) take part in an election; the one holding the lease (a store key with a TTL, renewed
 *   every second through commitIf) runs the single writer of writer.ts over the inbox: dedupe, events,
 *   time index, aggregates, and the deletion of the drained inbox entries, all in one atomic batch. A crash
 *   re-drains at most what was not committed; the dedupe keys make that re-drain count nothing twice.
 * - Reads are read-your-writes: a query first waits until every inbox entry that existed when it
 *   started is drained (bounded; see awaitDrained), so an event acknowledged before is counted.
 * - Meter changes and the maintenance of aggregates (backfill, clean-up, purge) run in the aggregator
 *   only: other processes hand meter changes over through the store (meter-commands.ts).
 *
 * The in-memory state of the single writer, and how a second process or node shares it:
 * - sequence number (Writer.lastSeq/preparedSeq): the aggregator's only; read from `meta/seq` when it
 *   takes the lease;
 * - dedupe Bloom filter and in-flight dedupe keys (DedupeFilter, Writer.inFlightDedupe): the
 *   aggregator's only; the filter is reloaded from the `d/` keys when it takes the lease (every hash is
 *   looked up in the store until then), the in-flight set starts empty; on a journal there is none (the
 *   journal's unique key deduplicates);
 * - aggregate cache (AggregateLedger): the aggregator's only, starts empty with each lease;
 * - meter registry (MeterRegistry, with backfill progress): the aggregator's is the truth (loaded when
 *   it takes the lease, changed only by it); every other process reloads it from the store on the
 *   aggregator's notice, every second, and before every read;
 * - backfill readiness waiters: per process, released when that process's registry sees the backfill
 *   done;
 * - the ingest queue (Writer.waiting): per process, in front of its own inbox;
 * - the inbox backlog (ProcessInbox.undrained, or JournalInbox.unfolded): per process, what it saw not
 *   yet aggregated, checked against the store; ingest is refused past ten times queue_max_events, or
 *   while the oldest has waited MAX_LAG_MS;
 * - committed listeners (billing's local usage, ingest metrics): fire in the aggregator's process
 *   only; billing's access cache in the other processes re-reads usage every second;
 * - maintenance timers (purge, backfill loop): run in the aggregator only.
 *
 * Fencing: every write of a term is made under the lease (Lease.fence): the store checks that the lease
 * still holds this term's value in the same atomic step as the write (a fenced write batch, see the
 * store contract), serialised with the renewals and take-overs that change it. A write that arrives
 * after the lease expired or passed to another process (its process was paused, or PostgreSQL held
 * the statement) is refused whole, so two aggregators never both commit: no assumption on clocks or
 * pauses is needed for exactly-once. Clocks only decide when a lease counts as expired (by the
 * reader's clock), i.e. how soon a fail-over starts.
 */
import type { Logger } from 'pino';
import type { BatchOp, Expectation, Store, WriteBatch } from '../../../src/pdk/index.ts';

type WriteOptions = Parameters<Store['batch']>[1];
import type { PreparedEvent } from '../ingest/events.ts';
import { AGGREGATOR_LEASE_KEY, AGGREGATOR_STATUS_KEY, escapePart, INBOX_PREFIX, inboxBodyKey, inboxKey } from '../shared/keys.ts';
import { AggregationLagError, LeaseLostError, QueueFullError } from '../shared/errors.ts';
import type { Inbox, Writer } from '../ingest/writer.ts';

/**
 * The lease lasts this long after its last renewal; another process takes over only after it. A loaded
 * machine whose event loop stalls for a few seconds must not lose it; a fail-over takes this long plus
 * the rebuild.
 */
export const LEASE_TTL_MS = 6_000;
const RENEW_EVERY_MS = 1_000;
/** Notice topic: an inbox entry was written (the aggregator drains at once instead of at its next poll). */
export const INBOX_TOPIC = 'metering-inbox';
/** The aggregator looks at the inbox this often when no notice came, backing off to IDLE_POLL_MS while it stays empty. */
export const POLL_MS = 50;
/** How often a process looks whether its oldest inbox entries were drained (only while it has some). */
export const BACKLOG_CHECK_MS = 100;
const IDLE_POLL_MS = 1_000;
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
 * DRAIN_WAIT_MS. A fail-over takes longer (LEASE_TTL_MS and a rebuild): producers are asked to retry
 * (503, Retry-After) for the rest of it, as they are while a loaded machine aggregates slowly.
 */
export const MAX_LAG_MS = 5_000;
/** A process's inbox may hold this many times queue_max_events not yet aggregated before ingest answers 503. */
export const INBOX_BACKLOG_FACTOR = 10;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * A lease on one key, renewed through commitIf. Its value names the holder and the term, and stays the
 * same while the holder renews it: `fence` is the expectation each write of the term is made under.
 */
export class Lease {
  private held: string | undefined;
  private terms = 0;

  constructor(
    private readonly store: Store,
    private readonly key: string,
    private readonly holder: string,
    private readonly ttlMs = LEASE_TTL_MS,
  ) {}

  /**
   * Renews the lease, or takes it when it is free. 'taken' means it was not held continuously up to
   * now (it expired, maybe another process held it meanwhile): whatever was kept in memory under the
   * earlier lease must be rebuilt.
   */
  async hold(): Promise<'renewed' | 'taken' | 'lost'> {
    const held = this.held;
    const current = await this.store.get(this.key);
    const renewing = held !== undefined && current === held;
    const next = renewing ? held : `${this.holder}#${++this.terms}`;
    if ((current !== undefined && !renewing) || !(await this.store.commitIf([{ key: this.key, value: current }], [{ type: 'put', key: this.key, value: next, ttlMs: this.ttlMs }]))) {
      this.held = undefined;
      return 'lost';
    }
    this.held = next;
    return renewing ? 'renewed' : 'taken';
  }

  /**
   * The expectation that the current term still holds the lease: checked by the store in the same step
   * as each write it guards, so no write lands once the lease expired or passed on, however late.
   */
  fence(): Expectation {
    if (this.held === undefined) throw new LeaseLostError();
    return { key: this.key, value: this.held };
  }

  /** Hands the lease over at once (a graceful stop), instead of making the next holder wait for the TTL. */
  async release(): Promise<void> {
    const held = this.held;
    this.held = undefined;
    if (held !== undefined) await this.store.commitIf([{ key: this.key, value: held }], [{ type: 'del', key: this.key }]);
  }
}

/**
 * The store as the aggregator writes it during one term: every write is made under the term's fence (a
 * fenced write batch, or commitIf with the fence among its expectations) and fails with LeaseLostError
 * once the lease is no longer the term's. It has no namespaces: the fence is a key of its own.
 */
export class FencedStore implements Store {
  constructor(
    private readonly inner: Store,
    /** The term's: a later term of the same process has another value, so a stale write is refused too. */
    private readonly fence: Expectation,
  ) {}

  get notices() {
    return this.inner.notices;
  }

  get(key: string) {
    return this.inner.get(key);
  }

  getMany(keys: string[]) {
    return this.inner.getMany(keys);
  }

  scan(options: Parameters<Store['scan']>[0]) {
    return this.inner.scan(options);
  }

  put(key: string, value: string, options: Parameters<Store['put']>[2] = {}): Promise<void> {
    return this.batch([{ type: 'put', key, value, ttlMs: options.ttlMs }], options);
  }

  del(key: string, options?: WriteOptions): Promise<void> {
    return this.batch([{ type: 'del', key }], options);
  }

  async batch(ops: BatchOp[], options?: WriteOptions): Promise<void> {
    const batch = this.writeBatch();
    for (const op of ops) {
      if (op.type === 'put') batch.put(op.key, op.value, { ttlMs: op.ttlMs });
      else batch.del(op.key);
    }
    await batch.write(options);
  }

  async commitIf(expectations: Expectation[], ops: BatchOp[], options?: WriteOptions): Promise<boolean> {
    if (await this.inner.commitIf([this.fence, ...expectations], ops, options)) return true;
    await this.checkFence();
    return false;
  }

  /** After a refused write: LeaseLostError if the fence is what failed. */
  private async checkFence(): Promise<void> {
    if ((await this.inner.get(this.fence.key)) !== this.fence.value) throw new LeaseLostError();
  }

  writeBatch(): WriteBatch {
    const batch = this.inner.writeBatch();
    const writeIf = async (expectations: Expectation[], options?: WriteOptions) => {
      if (await batch.writeIf([this.fence, ...expectations], options)) return true;
      await this.checkFence();
      return false;
    };
    return {
      put: (key, value, options) => batch.put(key, value, options),
      del: (key) => batch.del(key),
      write: async (options) => {
        if (!(await writeIf([], options))) throw new LeaseLostError();
      },
      writeIf,
      discard: () => batch.discard(),
    };
  }

  /** Not fenced: journal appends are every process's, and the aggregator only imports into it what is idempotent. */
  journal() {
    return this.inner.journal();
  }

  /** Reads only: nothing to fence. */
  nearData(procedure: string, args: unknown[]) {
    return this.inner.nearData(procedure, args);
  }

  namespace(): Store {
    throw new Error('the aggregator\'s fenced store has no namespaces: its fence is a key of its own namespace');
  }
}

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

  async put(events: readonly PreparedEvent[]): Promise<void> {
    const key = inboxKey(Date.now(), this.processId, ++this.entries);
    let lines = '';
    for (const e of events) lines += (lines ? '\n' : '') + e.dedupe + ' ' + e.json;
    const batch = this.store.writeBatch();
    batch.put(key, String(events.length));
    batch.put(inboxBodyKey(key), lines);
    // Counted before the write: an entry whose write failed is forgotten by the next check.
    this.undrained.push({ key, events: events.length, at: performance.now() });
    this.undrainedEvents += events.length;
    await batch.write({ sync: true });
    this.store.notices.publish(INBOX_TOPIC, '');
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

/** What /metering/status shows of the aggregator on every process. */
export interface AggregatorStatus {
  aggregator: { node_id: string; pid: number };
  dedupe_filter: { hashes: number; bytes: number };
}

/** The node and pid of a process id (`<node id>.<pid>.<ulid>`, see MeteringService). */
export function processOf(processId: string): { node_id: string; pid: number } {
  const [nodeId, pid] = processId.split('.');
  return { node_id: nodeId, pid: Number(pid) };
}

/** What a process does while it holds the lease: built anew for each term, on the fenced store. */
export interface Term {
  /** The single writer of this term (opened, i.e. its state rebuilt from the store). */
  writer: Writer;
  /** Commits what is in flight and stops the term's background work. */
  end(): Promise<void>;
}

/**
 * Takes part in the election of the store's aggregator and, while elected, drains every process's
 * inbox through the term's writer.
 */
export class Aggregator {
  private readonly lease: Lease;
  private term: Term | null = null;
  private draining: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private electing: Promise<void> = Promise.resolve();
  private stopped = false;
  private wake: (() => void) | null = null;
  private unsubscribe: () => void = () => undefined;

  constructor(
    private readonly store: Store,
    private readonly processId: string,
    /** Starts a term on the fenced store (the registry reloaded, the writer opened, maintenance started). */
    private readonly startTerm: (fenced: Store) => Promise<Term>,
    private readonly log: Logger,
    /** Folds the oldest events not yet aggregated through the term's writer; returns how many rounds' worth it found (0: none). */
    private readonly drainRound: (writer: Writer) => Promise<number>,
  ) {
    this.lease = new Lease(store, AGGREGATOR_LEASE_KEY, processId);
  }

  /** Runs for the lease now and then every second. */
  async start(): Promise<void> {
    if (this.stopped) return;
    this.unsubscribe = this.store.notices.subscribe(INBOX_TOPIC, () => this.wake?.());
    await this.elect();
    this.timer = setInterval(() => void this.elect(), RENEW_EVERY_MS);
    this.timer.unref();
  }

  /** Renews or takes the lease; starts or ends this process's term accordingly (one at a time). */
  private elect(): Promise<void> {
    this.electing = this.electing.then(async () => {
      if (this.stopped) return;
      let lease: 'renewed' | 'taken' | 'lost';
      try {
        lease = await this.lease.hold();
      } catch (err) {
        // Whether it was renewed is unknown; if it was not, the store refuses this term's writes.
        this.log.warn({ err }, 'metering: renewing the aggregator lease failed');
        return;
      }
      if (lease !== 'renewed' && this.term) await this.endTerm('metering: this process stopped aggregating (the lease passed or lapsed)');
      if (lease !== 'lost' && !this.term) await this.begin();
    });
    return this.electing;
  }

  private async begin(): Promise<void> {
    try {
      this.term = await this.startTerm(new FencedStore(this.store, this.lease.fence()));
    } catch (err) {
      this.log.error({ err }, 'metering: starting aggregation failed; retrying');
      await this.lease.release().catch(() => undefined);
      return;
    }
    this.log.info('metering: this process aggregates the events of every process');
    this.draining = this.drainWhileHeld(this.term);
  }

  private async endTerm(message: string): Promise<void> {
    const term = this.term!;
    this.term = null;
    this.wake?.();
    await this.draining;
    await term.end().catch((err) => this.log.warn({ err }, 'metering: ending aggregation'));
    this.log.info(message);
  }

  private async drainWhileHeld(term: Term): Promise<void> {
    let idlePoll = POLL_MS;
    for (let first = true; this.term === term; first = false) {
      let drained = 0;
      try {
        drained = await this.drainRound(term.writer);
        if (drained > 0 || first) await this.report(term.writer);
      } catch (err) {
        if (err instanceof LeaseLostError) {
          this.log.warn({ code: err.code }, 'metering: a batch was not written: this process no longer holds the aggregator lease');
        } else this.log.error({ err }, 'metering: aggregating inbox entries failed; retrying');
        await sleep(POLL_MS);
      }
      idlePoll = drained > 0 ? POLL_MS : Math.min(idlePoll * 2, IDLE_POLL_MS);
      if (drained === 0 && this.term === term) await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, idlePoll).unref();
      });
      this.wake = null;
    }
  }

  /** Says what the other processes' /metering/status shows of the aggregator (written when its term starts and after each round that drained). */
  private report(writer: Writer): Promise<void> {
    const status: AggregatorStatus = { aggregator: processOf(this.processId), dedupe_filter: writer.dedupeFilter.size };
    return this.store.put(AGGREGATOR_STATUS_KEY, JSON.stringify(status));
  }

  /** Ends this process's part: the term (handing the lease over) and the election. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe();
    await this.electing;
    if (this.term) {
      await this.endTerm('metering: aggregation stopped');
      await this.lease.release().catch(() => undefined);
    }
  }
}

/**
 * Metering on a store several processes share (worker_processes above 1, or PostgreSQL with several
 * nodes): an inbox per process and one elected aggregator, the shape of OpenMeter's sink worker
 * (ingest acknowledges once the events are durable; one consumer folds them into aggregates in order).
 * This file is the election and the fencing; the inboxes are storage's: on PostgreSQL the journal, the
 * inbox and the events' storage at once (storage/journal-inbox.ts); on LevelDB shared by a node's workers
 * the primary is the only candidate and the workers hand their events to its writer (storage/hand-off.ts),
 * with an inbox of keys each (storage/inbox.ts) for while it does not aggregate.
 *
 * - Ingest: each process's writer group-commits validated events into its inbox (`i/` entry + `ib/`
 *   events, one atomic durable write; or a journal row each) and acknowledges; no dedupe at this step. A
 *   LevelDB worker's hand-off is committed by the primary's writer (dedupe included) before it acknowledges.
 * - Aggregation: the processes that use metering (a metering route, a declared meter, events from
 *   another plugin) take part in an election; the one holding the lease (a store key with a TTL, renewed
 *   every second through commitIf) runs the single writer (storage/writer.ts) over the inbox: dedupe, events,
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

import { AGGREGATOR_LEASE_KEY, AGGREGATOR_STATUS_KEY } from '../shared/keys.ts';
import { LeaseLostError } from '../shared/errors.ts';
import { INBOX_TOPIC, POLL_MS, sleep } from '../storage/inbox.ts';
import type { Writer } from '../storage/writer.ts';

type WriteOptions = Parameters<Store['batch']>[1];

/**
 * The lease lasts this long after its last renewal; another process takes over only after it. A loaded
 * machine whose event loop stalls for a few seconds must not lose it; a fail-over takes this long plus
 * the rebuild.
 */
export const LEASE_TTL_MS = 6_000;
const RENEW_EVERY_MS = 1_000;
const IDLE_POLL_MS = 1_000;

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

/**
 * A queue of entries (JSON texts) bound for a remote receiver, kept on disk (disk-queue.ts) so that a
 * restart resumes it and every process sharing the store works on the same queue, then sent in batches
 * with Kong's queue semantics (settings.ts): a batch goes once it holds `max_batch_size` entries or
 * `max_coalescing_delay` after its oldest entry; a failed batch is retried with a doubling delay until
 * `max_retry_time`; a full queue (`max_entries`, `max_bytes`) drops its oldest entries. The request path
 * only appends to memory; what the requests of the last PERSIST_DELAY_MS produced goes to disk in one
 * write (so a kill -9 loses at most those; a SIGTERM none). Delivery is at least once: a batch
 * acknowledged just before a crash is sent again after it.
 *
 * What a batch is sent as, and what becomes of one that is refused or given up, is the plugin's: a
 * subclass implements `post` and `expired` (and, for receivers that refuse some entries, `refuses` and
 * `refused`).
 */
import type { Logger } from 'pino';
import { StoreUnwritableError } from '../store/errors.ts';
import type { BatchOp, Store } from '../store/store.ts';
import { DiskQueue, type Claim, type Depth } from './disk-queue.ts';
import { FullQueueLog, retryDelayMs, type QueueSettings } from './settings.ts';

/** Added to a lease beyond the request timeout: clocks of processes sharing the store differ a little. */
const LEASE_MARGIN_MS = 2000;
/** How often the disk queue is looked at for entries of other processes and claims whose owner died. */
const POLL_MS = 1000;
/** A full queue is counted again at most this often; between counts this process's own tally is used. */
const RECOUNT_MS = 1000;
/** How long entries wait in memory to share a write to the disk queue: the few milliseconds a kill -9 may lose. */
export const PERSIST_DELAY_MS = 10;
/** `concurrency_limit: -1` (unlimited, in Kong): at most this many batches in flight per process. */
const MAX_PARALLEL = 16;

/** What the queue reads of its plugin's config: the queue settings and the timeout of one send (ms). */
export interface PersistentQueueSettings {
  queue: QueueSettings;
  timeout: number;
}

/** The queue's figures, for the plugin's metrics. */
export interface QueueCounters {
  /** Entries dropped: `queue_full` (the oldest, making room), `store` (the disk queue could not be written), `retry_time` (given up by the plugin). */
  dropped(reason: 'queue_full' | 'store' | 'retry_time', count: number): void;
  /** A failed attempt, retried after a backoff. */
  retried(): void;
  /** A batch the receiver took. */
  delivered(): void;
}

export interface QueueDepth {
  queue: string;
  /** Entries waiting in memory for their write to disk. */
  memory: number;
  /** Entries in the on-disk queue, as this process last counted them. */
  disk: number;
}

export abstract class PersistentQueue<Settings extends PersistentQueueSettings = PersistentQueueSettings> {
  protected readonly disk: DiskQueue;
  private readonly fullLog: FullQueueLog;
  /** Entries of the last requests, waiting for their write to disk. */
  private pending: string[] = [];
  private persisting: Promise<void> = Promise.resolve();
  private persistScheduled = false;
  /** The disk queue as this process last counted it, kept up to date with its own writes and claims. */
  protected depthOnDisk: Depth = { events: 0, bytes: 0 };
  private countedAt = 0;
  private inFlight = 0;
  /** This process's last claim: claims are made one at a time (see claimNext). */
  private claiming: Promise<unknown> = Promise.resolve();
  private wakeTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Claims this process holds, with a way to stop their current attempt (at close). */
  private readonly held = new Map<string, AbortController>();
  private readonly sending = new Set<Promise<void>>();
  /** The store refused the last write to the disk queue (a full disk: StoreUnwritableError). */
  cannotRecord = false;

  constructor(
    readonly name: string,
    store: Store,
    protected settings: Settings,
    protected readonly counters: QueueCounters,
    protected readonly log: Logger,
    /** What the queue's own log lines start with (`request metering`, `http-log`). */
    private readonly label: string,
  ) {
    this.disk = new DiskQueue(store, name);
    this.fullLog = new FullQueueLog(name, log, (count) => counters.dropped('queue_full', count));
  }

  /** Sends a batch (`count` entries, one JSON per line); resolves to undefined once the receiver took it, else to why not. */
  protected abstract post(entries: string, count: number, signal: AbortSignal): Promise<Error | undefined>;

  /** A batch still undelivered after max_retry_time: the claim is the subclass's to settle (drop it, keep it elsewhere). */
  protected abstract expired(claim: Claim, failure: Error): Promise<void>;

  /** The receiver refused the entries themselves: retrying the same batch cannot help (see `refused`). */
  protected refuses(_failure: Error): boolean {
    return false;
  }

  protected refused(_claim: Claim, _failure: Error): Promise<void> {
    throw new Error('a queue whose receiver refuses entries settles them itself');
  }

  /** Work of the subclass done on every poll. */
  protected async polled(): Promise<void> {}

  /** Releases what sending holds (connections). */
  protected async closeTransport(): Promise<void> {}

  protected get queue(): QueueSettings {
    return this.settings.queue;
  }

  /** Resumes what the disk holds (this process's earlier life, or others'). */
  async start(): Promise<void> {
    this.depthOnDisk = await this.disk.count();
    this.countedAt = Date.now();
    if (this.depthOnDisk.events > 0) this.log.info({ queue: this.name, events: this.depthOnDisk.events }, `${this.label}: resuming the queue`);
    this.poll();
  }

  /** New settings of the plugin instances using the queue (a reload); it takes any. */
  reconfigure(settings: Settings): boolean {
    this.settings = settings;
    return true;
  }

  /** Until when a claim made or renewed `now` is this process's: a send's timeout, and a margin. */
  protected leaseFrom(now: number): number {
    return now + this.settings.timeout + LEASE_MARGIN_MS;
  }

  depth(): QueueDepth {
    return { queue: this.name, memory: this.pending.length, disk: this.depthOnDisk.events };
  }

  /** Queues entries, each a JSON text (no raw line feed). */
  enqueue(entries: string[]): void {
    if (this.closed) return;
    for (const entry of entries) this.pending.push(entry);
    // A store slow to take the writes must not let memory grow: max_entries holds here too.
    const over = this.pending.length - this.queue.max_entries;
    if (over > 0) {
      this.pending.splice(0, over);
      this.fullLog.dropped(over);
    }
    if (this.persistScheduled) return;
    this.persistScheduled = true;
    // The requests of the next few milliseconds share one store write.
    setTimeout(() => {
      this.persistScheduled = false;
      this.persisting = this.persisting.then(() => this.persist());
    }, PERSIST_DELAY_MS);
  }

  /**
   * The write that queues `entry` inside a commit of the caller's own, so the entry is on disk exactly
   * when what it delivers is stored (no kill -9 can keep one without the other); once that commit
   * succeeded, `committed` sends it in its turn. `max_entries` is not applied to it.
   */
  entryWrite(entry: string, now = Date.now()): BatchOp {
    return this.disk.chunk(entry, now);
  }

  /** Entries made by `entryWrite` were committed. */
  committed(writes: BatchOp[]): void {
    for (const write of writes) {
      this.depthOnDisk.events++;
      this.depthOnDisk.bytes += write.type === 'put' ? write.value.length + 1 : 0;
    }
    this.wake(this.depthOnDisk.events >= this.queue.max_batch_size ? 0 : this.queue.max_coalescing_delay * 1000);
  }

  private async persist(): Promise<void> {
    const entries = this.pending;
    if (entries.length === 0) return;
    this.pending = [];
    const adding: Depth = { events: entries.length, bytes: entries.reduce((n, e) => n + e.length + 1, 0) };
    try {
      await this.makeRoom(entries, adding);
      if (entries.length === 0) return;
      await this.disk.append(entries, this.queue.max_batch_size);
    } catch (err) {
      this.cannotRecord = err instanceof StoreUnwritableError;
      this.counters.dropped('store', entries.length);
      this.log.error({ queue: this.name, err, events: entries.length }, `${this.label}: events could not be queued on disk`);
      return;
    }
    this.cannotRecord = false;
    this.depthOnDisk.events += adding.events;
    this.depthOnDisk.bytes += adding.bytes;
    this.wake(this.depthOnDisk.events >= this.queue.max_batch_size ? 0 : this.queue.max_coalescing_delay * 1000);
  }

  /**
   * Kong's full queue: the oldest entries are dropped to make room for new ones (`max_entries`, and
   * `max_bytes` when set). `entries` itself loses its oldest when it alone exceeds the limits.
   */
  private async makeRoom(entries: string[], adding: Depth): Promise<void> {
    const { max_entries: maxEntries, max_bytes: maxBytes } = this.queue;
    const over = () => Math.max(this.depthOnDisk.events + adding.events - maxEntries, maxBytes ? this.overBytes(adding, maxBytes) : 0);
    if (over() <= 0) return;
    if (Date.now() - this.countedAt > RECOUNT_MS) {
      this.depthOnDisk = await this.disk.count();
      this.countedAt = Date.now();
    }
    let excess = over();
    if (excess <= 0) return;
    let dropped = 0;
    while (excess > 0 && this.depthOnDisk.events > 0) {
      const removed = await this.disk.dropOldest(Math.min(excess, this.depthOnDisk.events));
      if (removed === 0) break;
      this.depthOnDisk.events -= removed;
      // Bytes of dropped entries are not known without reading them: the next count corrects it.
      this.depthOnDisk.bytes = Math.max(0, this.depthOnDisk.bytes - (removed * this.depthOnDisk.bytes) / (this.depthOnDisk.events + removed));
      dropped += removed;
      excess = over();
    }
    while (excess > 0 && entries.length > 0) {
      const entry = entries.shift()!;
      adding.events--;
      adding.bytes -= entry.length + 1;
      dropped++;
      excess = over();
    }
    this.fullLog.dropped(dropped);
  }

  private overBytes(adding: Depth, maxBytes: number): number {
    const excess = this.depthOnDisk.bytes + adding.bytes - maxBytes;
    if (excess <= 0) return 0;
    // In entries: the average entry size says how many must go.
    const average = (this.depthOnDisk.bytes + adding.bytes) / Math.max(1, this.depthOnDisk.events + adding.events);
    return Math.ceil(excess / Math.max(1, average));
  }

  /** Looks for a batch to send in `ms` (0: now), unless an earlier look is already planned. */
  protected wake(ms: number): void {
    if (this.closed) return;
    if (ms === 0) {
      clearTimeout(this.wakeTimer);
      this.wakeTimer = undefined;
      return void this.deliverNext();
    }
    this.wakeTimer ??= setTimeout(() => {
      this.wakeTimer = undefined;
      void this.deliverNext();
    }, ms);
  }

  private get parallel(): number {
    return this.queue.concurrency_limit === -1 ? MAX_PARALLEL : 1;
  }

  /** Claims the next batch that is ready (full, or its oldest entry waited long enough) and sends it. */
  private async deliverNext(): Promise<void> {
    if (this.closed || this.inFlight >= this.parallel) return;
    this.inFlight++;
    let claim: Claim | undefined;
    try {
      const now = Date.now();
      const delay = this.queue.max_coalescing_delay * 1000;
      // A batch that cannot be full yet is not read (a claim reads every entry it takes): only its oldest entry's age is.
      if (this.depthOnDisk.events < this.queue.max_batch_size) {
        const oldest = await this.disk.oldest();
        if (oldest === undefined) return;
        if (oldest > now - delay) return this.wake(Math.max(1, oldest + delay - now));
      }
      claim = await this.claimNext(this.leaseFrom(now), now - delay);
      if (!claim) return;
      this.depthOnDisk.events = Math.max(0, this.depthOnDisk.events - claim.state.count);
      this.depthOnDisk.bytes = Math.max(0, this.depthOnDisk.bytes - claim.events.length - 1);
    } catch (err) {
      this.log.error({ queue: this.name, err }, `${this.label}: reading the queue failed`);
      return;
    } finally {
      if (!claim) this.inFlight--;
    }
    // With concurrency_limit -1 a next full batch goes out beside this one.
    if (this.inFlight < this.parallel && this.depthOnDisk.events >= this.queue.max_batch_size) void this.deliverNext();
    await this.track(this.send(claim));
    this.inFlight--;
    void this.deliverNext();
  }

  /**
   * The next batch, claimed after this process's earlier claims settled: claims made together would
   * read the same oldest chunks, and all but one would fail and read again (measured with a full
   * queue and 16 batches in flight: 63 of 74 claims lost, each having read a batch's entries).
   */
  private claimNext(leaseUntil: number, olderThan: number): Promise<Claim | undefined> {
    const claim = () => this.disk.claim(this.queue.max_batch_size, leaseUntil, { olderThan });
    const next = this.claiming.then(claim, claim);
    this.claiming = next.catch(() => undefined);
    return next;
  }

  private track(sending: Promise<void>): Promise<void> {
    this.sending.add(sending);
    return sending.finally(() => this.sending.delete(sending));
  }

  /**
   * Sends a claimed batch until the receiver takes it, refuses its entries, the retry time runs out,
   * or the claim is lost.
   */
  protected async send(initial: Claim): Promise<void> {
    let claim: Claim | undefined = initial;
    const abort = new AbortController();
    this.held.set(claim.id, abort);
    try {
      while (claim && !this.closed) {
        const failure = await this.post(claim.events, claim.state.count, abort.signal);
        if (failure === undefined) return await this.delivered(claim);
        if (this.closed) break;
        if (this.refuses(failure)) return await this.refused(claim, failure);
        const now = Date.now();
        const { attempts, first_try: firstTry } = claim.state;
        if (now - firstTry > this.queue.max_retry_time * 1000) return await this.expired(claim, failure);
        this.counters.retried();
        this.log.warn({ queue: this.name, err: failure }, `queue ${this.name}: handler could not process entries`);
        const delay = retryDelayMs(this.queue, attempts);
        claim = await this.disk.update(claim, { attempts: attempts + 1, next_try: now + delay, lease_until: this.leaseFrom(now + delay) });
        if (claim) await sleep(delay, abort.signal);
      }
      // Closing: the claim is let go at once, so the next start (or another process) sends it without waiting for the lease.
      if (claim) await this.disk.update(claim, { lease_until: 0, next_try: 0 });
    } catch (err) {
      this.log.error({ queue: this.name, err }, `${this.label}: a batch could not be settled; it is sent again once its lease runs out`);
    } finally {
      this.held.delete(initial.id);
    }
  }

  private async delivered(claim: Claim): Promise<void> {
    await this.disk.complete(claim);
    this.counters.delivered();
    this.fullLog.resumed();
  }

  /** Claims of other processes (or of this one before a crash) whose lease ran out, and entries they queued. */
  private poll(): void {
    if (this.closed) return;
    void (async () => {
      try {
        const now = Date.now();
        for (const claim of await this.disk.takeOverExpired(this.leaseFrom(now), now)) {
          this.inFlight++;
          void this.track(this.send(claim)).then(() => this.inFlight--);
        }
        await this.deliverNext();
        await this.recountShared();
        await this.polled();
      } catch (err) {
        this.log.error({ queue: this.name, err }, `${this.label}: polling the queue failed`);
      }
      if (!this.closed) this.pollTimer = setTimeout(() => this.poll(), POLL_MS);
    })();
  }

  /**
   * The node's other processes claim and drop entries this one counted: its tally is counted again while
   * it says there is something (at most every RECOUNT_MS), once no write of this process is under way.
   */
  private async recountShared(): Promise<void> {
    if (this.depthOnDisk.events === 0 || Date.now() - this.countedAt < RECOUNT_MS) return;
    await this.persisting;
    if (this.persistScheduled) return;
    this.depthOnDisk = await this.disk.count();
    this.countedAt = Date.now();
  }

  /** Writes what requests produced until now to disk (the next start sends it), lets go of its claims, and stops. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.wakeTimer);
    clearTimeout(this.pollTimer);
    await this.persisting;
    await this.persist();
    for (const abort of this.held.values()) abort.abort();
    await Promise.all([...this.sending]);
    await this.closeTransport();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

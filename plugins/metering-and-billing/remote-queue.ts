/**
 * Events for a remote OpenMeter-compatible endpoint (`ingest_endpoint`: OpenMeter, Konnect, another
 * Tollgate): queued on disk (see disk-queue.ts), then POSTed in batches (endpoint.ts), retried with
 * Kong's backoff. The request path only appends to memory; what the requests of the last
 * PERSIST_DELAY_MS produced goes to disk in one write (so a kill -9 loses at most those; a SIGTERM
 * none). Delivery is at least once: a batch acknowledged just before a crash is sent again after it,
 * and the receiver's (source, id) dedupe makes that harmless.
 *
 * No batch blocks the queue for good, and none is dropped: a batch whose events the endpoint refuses is
 * split until the refused events stand alone, each then kept as a dead letter (dead-letters.ts) while
 * the rest is delivered; a batch still undelivered after `max_retry_time` becomes a dead letter whole.
 */
import type { Logger } from 'pino';
import { StoreUnwritableError, type Store } from '../../src/pdk/index.ts';
import type { DeadLetter, DeadLetterCause, DeadLetterStore } from './dead-letters.ts';
import { DiskQueue, type Claim, type Depth } from './disk-queue.ts';
import { EventsRefusedError, IngestEndpoint, type DeliveryError } from './endpoint.ts';
import type { MeteringEvent } from './events.ts';
import type { QueueDepth, RequestMeteringMetrics } from './metrics.ts';
import { FullQueueLog, retryDelayMs, type EventQueue } from './queue.ts';
import type { QueueConfig, RequestMeteringConfig } from './schema.ts';

/** Added to a lease beyond the request timeout: clocks of processes sharing the store differ a little. */
const LEASE_MARGIN_MS = 2000;
/** How often the disk queue is looked at for entries of other processes and claims whose owner died. */
const POLL_MS = 1000;
/** A full queue is counted again at most this often; between counts this process's own tally is used. */
const RECOUNT_MS = 1000;
/** How long events wait in memory to share a write to the disk queue: the few milliseconds a kill -9 may lose. */
export const PERSIST_DELAY_MS = 10;
/** `concurrency_limit: -1` (unlimited, in Kong): at most this many batches in flight per process. */
const MAX_PARALLEL = 16;

export class RemoteQueue implements EventQueue {
  private readonly disk: DiskQueue;
  private readonly fullLog: FullQueueLog;
  private config: RequestMeteringConfig;
  private readonly endpoint: IngestEndpoint;
  /** Events of the last requests, as JSON, waiting for their write to disk. */
  private pending: string[] = [];
  private persisting: Promise<void> = Promise.resolve();
  private persistScheduled = false;
  /** The disk queue as this process last counted it, kept up to date with its own writes and claims. */
  private depthOnDisk: Depth = { events: 0, bytes: 0 };
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
  cannotRecord = false;

  constructor(
    readonly name: string,
    store: Store,
    config: RequestMeteringConfig,
    private readonly deadLetters: DeadLetterStore,
    private readonly metrics: RequestMeteringMetrics,
    private readonly log: Logger,
  ) {
    this.disk = new DiskQueue(store, name);
    this.fullLog = new FullQueueLog(name, log, metrics);
    this.config = config;
    this.endpoint = new IngestEndpoint(config);
  }

  private get queue(): QueueConfig {
    return this.config.queue;
  }

  /** Resumes what the disk holds (this process's earlier life, or others'). */
  async start(): Promise<void> {
    this.depthOnDisk = await this.disk.count();
    this.countedAt = Date.now();
    if (this.depthOnDisk.events > 0) this.log.info({ queue: this.name, events: this.depthOnDisk.events }, 'request metering: resuming the queue');
    this.poll();
  }

  reconfigure(config: RequestMeteringConfig): void {
    this.config = config;
    this.endpoint.configure(config);
  }

  /** Until when a claim made or renewed `now` is this process's: a POST's timeout, and a margin. */
  private leaseFrom(now: number): number {
    return now + this.config.timeout + LEASE_MARGIN_MS;
  }

  depth(): QueueDepth {
    return { queue: this.name, memory: this.pending.length, disk: this.depthOnDisk.events };
  }

  add(events: MeteringEvent[]): void {
    if (this.closed) return;
    for (const event of events) this.pending.push(JSON.stringify(event));
    if (this.persistScheduled) return;
    this.persistScheduled = true;
    // The requests of the next few milliseconds share one store write.
    setTimeout(() => {
      this.persistScheduled = false;
      this.persisting = this.persisting.then(() => this.persist());
    }, PERSIST_DELAY_MS);
  }

  private async persist(): Promise<void> {
    const events = this.pending;
    if (events.length === 0) return;
    this.pending = [];
    const adding: Depth = { events: events.length, bytes: events.reduce((n, e) => n + e.length + 1, 0) };
    try {
      await this.makeRoom(events, adding);
      if (events.length === 0) return;
      await this.disk.append(events, this.queue.max_batch_size);
    } catch (err) {
      this.cannotRecord = err instanceof StoreUnwritableError;
      this.metrics.dropped.inc({ queue: this.name, reason: 'store' }, events.length);
      this.log.error({ queue: this.name, err, events: events.length }, 'request metering: events could not be queued on disk');
      return;
    }
    this.cannotRecord = false;
    this.depthOnDisk.events += adding.events;
    this.depthOnDisk.bytes += adding.bytes;
    this.wake(this.depthOnDisk.events >= this.queue.max_batch_size ? 0 : this.queue.max_coalescing_delay * 1000);
  }

  /**
   * Kong's full queue: the oldest events are dropped to make room for new ones (`max_entries`, and
   * `max_bytes` when set). `events` itself loses its oldest when it alone exceeds the limits.
   */
  private async makeRoom(events: string[], adding: Depth): Promise<void> {
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
      // Bytes of dropped events are not known without reading them: the next count corrects it.
      this.depthOnDisk.bytes = Math.max(0, this.depthOnDisk.bytes - (removed * this.depthOnDisk.bytes) / (this.depthOnDisk.events + removed));
      dropped += removed;
      excess = over();
    }
    while (excess > 0 && events.length > 0) {
      const event = events.shift()!;
      adding.events--;
      adding.bytes -= event.length + 1;
      dropped++;
      excess = over();
    }
    this.fullLog.dropped(dropped);
  }

  private overBytes(adding: Depth, maxBytes: number): number {
    const excess = this.depthOnDisk.bytes + adding.bytes - maxBytes;
    if (excess <= 0) return 0;
    // In events: the average event size says how many must go.
    const average = (this.depthOnDisk.bytes + adding.bytes) / Math.max(1, this.depthOnDisk.events + adding.events);
    return Math.ceil(excess / Math.max(1, average));
  }

  /** Looks for a batch to send in `ms` (0: now), unless an earlier look is already planned. */
  private wake(ms: number): void {
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

  /** Claims the next batch that is ready (full, or its oldest event waited long enough) and sends it. */
  private async deliverNext(): Promise<void> {
    if (this.closed || this.inFlight >= this.parallel) return;
    this.inFlight++;
    let claim: Claim | undefined;
    try {
      const now = Date.now();
      const delay = this.queue.max_coalescing_delay * 1000;
      // A batch that cannot be full yet is not read (a claim reads every event it takes): only its oldest event's age is.
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
      this.log.error({ queue: this.name, err }, 'request metering: reading the queue failed');
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
   * queue and 16 batches in flight: 63 of 74 claims lost, each having read a batch's events).
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
   * Sends a claimed batch until the endpoint takes it, refuses its events (see isolate), the retry time
   * runs out (a dead letter), or the claim is lost.
   */
  private async send(initial: Claim): Promise<void> {
    let claim: Claim | undefined = initial;
    const abort = new AbortController();
    this.held.set(claim.id, abort);
    try {
      while (claim && !this.closed) {
        const failure = await this.endpoint.post(claim.events, claim.state.count, abort.signal);
        if (failure === undefined) return await this.delivered(claim);
        if (this.closed) break;
        if (failure instanceof EventsRefusedError) return await this.isolate(claim, failure);
        const now = Date.now();
        const { attempts, first_try: firstTry } = claim.state;
        if (now - firstTry > this.queue.max_retry_time * 1000) return await this.deadLetter(claim, failure, 'retry_time');
        this.metrics.retries.inc({ queue: this.name });
        this.log.warn({ queue: this.name, err: failure }, `queue ${this.name}: handler could not process entries`);
        const delay = retryDelayMs(this.queue, attempts);
        claim = await this.disk.update(claim, { attempts: attempts + 1, next_try: now + delay, lease_until: this.leaseFrom(now + delay) });
        if (claim) await sleep(delay, abort.signal);
      }
      // Closing: the claim is let go at once, so the next start (or another process) sends it without waiting for the lease.
      if (claim) await this.disk.update(claim, { lease_until: 0, next_try: 0 });
    } catch (err) {
      this.log.error({ queue: this.name, err }, 'request metering: a batch could not be settled; it is sent again once its lease runs out');
    } finally {
      this.held.delete(initial.id);
    }
  }

  private async delivered(claim: Claim): Promise<void> {
    await this.disk.complete(claim);
    this.metrics.deliveries.inc({ queue: this.name });
    this.fullLog.resumed();
  }

  /**
   * The endpoint refused the events of the batch. One event alone becomes a dead letter. A batch is split,
   * in one step on disk, into the events the answer names (each alone) and the rest, or without names
   * into halves; each part is then sent in turn like a batch of its own, so what the endpoint takes is
   * delivered and every refused event ends up alone. Each part is smaller than the batch, so it ends.
   */
  private async isolate(claim: Claim, refusal: EventsRefusedError): Promise<void> {
    const { count } = claim.state;
    if (count === 1) return this.deadLetter(claim, refusal, 'refused');
    const parts = splitRefused(claim.events.split('\n'), refusal.named);
    this.log.warn(
      { queue: this.name, status: refusal.status, reason: refusal.reason, events: count, parts: parts.length },
      `queue ${this.name}: the ingest endpoint refused a batch of ${count} events (${refusal.status}): split to isolate the refused ones`,
    );
    for (const part of (await this.disk.split(claim, parts, this.leaseFrom(Date.now()))) ?? []) {
      // A part waits for those before it: its lease is renewed when its turn comes (undefined: taken over meanwhile).
      const renewed = await this.disk.update(part, { lease_until: this.leaseFrom(Date.now()) });
      if (renewed) await this.send(renewed);
    }
  }

  /** The claim's events become a dead letter, written in the same step that removes the claim. */
  private async deadLetter(claim: Claim, failure: DeliveryError, cause: DeadLetterCause): Promise<void> {
    const { count, attempts, first_try: firstTry } = claim.state;
    const dropped = await this.deadLetters.makeRoom(this.name, count, this.queue.max_entries);
    if (dropped > 0) {
      this.metrics.dropped.inc({ queue: this.name, reason: 'dead_letter_full' }, dropped);
      const full = `the dead letters hold max_entries (${this.queue.max_entries}) events`;
      this.log.error({ queue: this.name, dropped }, `queue ${this.name}: ${full}: the oldest ${dropped} were dropped`);
    }
    const { letter, ops } = this.deadLetters.letter(
      { queue: this.name, status: failure.status, reason: failure.reason, cause, first_failure: firstTry, last_failure: Date.now() },
      claim.events,
    );
    // False: another process took the claim over meanwhile, and settles it.
    if (!(await this.disk.complete(claim, ops))) return;
    this.deadLetters.stored(letter);
    this.metrics.deadLettered.inc({ queue: this.name, reason: cause, status: String(failure.status ?? 'none') }, count);
    // Kong's line for a batch given up, saying where the entries went instead of "were lost".
    const what = cause === 'refused' ? `the ingest endpoint refused an event (${failure.status})` : `could not send entries, giving up after ${attempts} retries`;
    const kept = `${count} queue entries kept as dead letter ${letter.id}`;
    this.log.error({ queue: this.name, dead_letter: letter.id, err: failure }, `queue ${this.name}: ${what}. ${kept}`);
  }

  /** Puts a dead letter's events back at the head of this queue; undefined when the letter is gone. */
  async redeliver(id: string): Promise<DeadLetter | undefined> {
    const letter = await this.deadLetters.take(id, (_, events) => [this.disk.headChunk(events)]);
    if (!letter) return undefined;
    this.depthOnDisk.events += letter.event_count;
    this.log.info({ queue: this.name, dead_letter: id, events: letter.event_count }, `queue ${this.name}: dead letter ${id} re-delivered`);
    this.wake(0);
    return letter;
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
        await this.deadLetters.recount();
      } catch (err) {
        this.log.error({ queue: this.name, err }, 'request metering: polling the queue failed');
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

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.wakeTimer);
    clearTimeout(this.pollTimer);
    // What requests produced until now is written to disk: the next start sends it.
    await this.persisting;
    await this.persist();
    for (const abort of this.held.values()) abort.abort();
    await Promise.all([...this.sending]);
    await this.endpoint.close();
  }
}

/** The events a refusal names, each alone, after the rest; without names, two halves. Every part is smaller than the batch. */
export function splitRefused(events: string[], named: number[]): string[][] {
  if (named.length === 0) {
    const half = Math.ceil(events.length / 2);
    return [events.slice(0, half), events.slice(half)];
  }
  const alone = new Set(named);
  const rest = events.filter((_, i) => !alone.has(i));
  return [...(rest.length > 0 ? [rest] : []), ...named.map((i) => [events[i]])];
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

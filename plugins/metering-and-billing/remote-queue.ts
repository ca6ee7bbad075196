/**
 * Events for a remote OpenMeter-compatible endpoint (`ingest_endpoint`: OpenMeter, Konnect, another
 * Tollgate): the core's persistent queue (src/queue/persistent-queue.ts: on disk, shared by the node's
 * processes, Kong's batching and backoff), POSTed in batches (endpoint.ts). Delivery is at least once:
 * a batch acknowledged just before a crash is sent again after it, and the receiver's (source, id)
 * dedupe makes that harmless.
 *
 * No batch blocks the queue for good, and none is dropped: a batch whose events the endpoint refuses is
 * split until the refused events stand alone, each then kept as a dead letter (dead-letters.ts) while
 * the rest is delivered; a batch still undelivered after `max_retry_time` becomes a dead letter whole.
 */
import type { Logger } from 'pino';
import { PersistentQueue, type QueueClaim, type Store } from '../../src/pdk/index.ts';
import type { DeadLetter, DeadLetterCause, DeadLetterStore } from './dead-letters.ts';
import { EventsRefusedError, IngestEndpoint, type DeliveryError } from './endpoint.ts';
import type { MeteringEvent } from './events.ts';
import type { RequestMeteringMetrics } from './metrics.ts';
import type { EventQueue } from './queue.ts';
import type { RequestMeteringConfig } from './schema.ts';

export class RemoteQueue extends PersistentQueue<RequestMeteringConfig> implements EventQueue {
  private readonly endpoint: IngestEndpoint;

  constructor(
    name: string,
    store: Store,
    config: RequestMeteringConfig,
    private readonly deadLetters: DeadLetterStore,
    private readonly metrics: RequestMeteringMetrics,
    log: Logger,
  ) {
    super(name, store, config, metrics.queueCounters(name), log, 'request metering');
    this.endpoint = new IngestEndpoint(config);
  }

  add(events: MeteringEvent[]): void {
    this.enqueue(events.map((event) => JSON.stringify(event)));
  }

  override reconfigure(config: RequestMeteringConfig): boolean {
    this.endpoint.configure(config);
    return super.reconfigure(config);
  }

  protected post(events: string, count: number, signal: AbortSignal): Promise<DeliveryError | undefined> {
    return this.endpoint.post(events, count, signal);
  }

  protected override refuses(failure: Error): boolean {
    return failure instanceof EventsRefusedError;
  }

  protected expired(claim: QueueClaim, failure: Error): Promise<void> {
    return this.deadLetter(claim, failure as DeliveryError, 'retry_time');
  }

  /**
   * The endpoint refused the events of the batch. One event alone becomes a dead letter. A batch is split,
   * in one step on disk, into the events the answer names (each alone) and the rest, or without names
   * into halves; each part is then sent in turn like a batch of its own, so what the endpoint takes is
   * delivered and every refused event ends up alone. Each part is smaller than the batch, so it ends.
   */
  protected override async refused(claim: QueueClaim, failure: Error): Promise<void> {
    const refusal = failure as EventsRefusedError;
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
  private async deadLetter(claim: QueueClaim, failure: DeliveryError, cause: DeadLetterCause): Promise<void> {
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

  protected override polled(): Promise<void> {
    return this.deadLetters.recount();
  }

  protected override closeTransport(): Promise<void> {
    return this.endpoint.close();
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

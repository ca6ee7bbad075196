/**
 * Webhook deliveries: one queue per channel, the core's persistent queue (on disk in the store, shared
 * by every process and node, resumed after a restart or a kill -9; a claim whose process died is taken
 * over once its lease runs out). A queue entry is one event; it is written in the same commit as the
 * event (notifications.ts), so an event is never stored without its deliveries. Each channel having its
 * own queue, a receiver that is down or slow holds up only its own deliveries; within a channel up to
 * 16 events are in flight per process, so one event a receiver keeps refusing does not hold up the next.
 *
 * An attempt POSTs the event's payload signed with the Standard Webhooks headers (signature.ts) and the
 * channel's custom headers; a 2xx delivers it, anything else is retried with a doubling delay (1 s up to
 * 10 min) for 48 hours (OpenMeter's sending timeout), then the delivery is FAILED. Every attempt is
 * recorded in the event's delivery status.
 */
import type { Logger } from 'pino';
import { Agent } from 'undici';
import {
  boundedText, PersistentQueue, reconcileResources, retryDelayMs, type BatchOp, type QueueClaim, type QueueCounters, type QueueSettings, type Store,
} from '../../../src/pdk/index.ts';
import { keys } from './keys.ts';
import type { Channel, DeliveryAttempt, DeliveryState, DeliveryStatus, NotificationEvent } from './model.ts';
import { signatureHeaders } from './signature.ts';

const QUEUE: QueueSettings = {
  max_batch_size: 1,
  max_coalescing_delay: 0,
  max_entries: 100_000,
  max_retry_time: 48 * 3600,
  initial_retry_delay: 1,
  max_retry_delay: 600,
  concurrency_limit: -1,
};
/** How long one attempt may take, ms (Svix allows 15 s). */
const ATTEMPT_TIMEOUT_MS = 10_000;
/** How much of a receiver's answer an attempt keeps. */
const MAX_RESPONSE_KEPT = 1_000;
/** Attempts kept per delivery status (the latest). */
const MAX_ATTEMPTS_KEPT = 20;

interface Settings {
  queue: QueueSettings;
  timeout: number;
}

const SETTINGS: Settings = { queue: QUEUE, timeout: ATTEMPT_TIMEOUT_MS };

class DeliveryError extends Error {
  override readonly name = 'DeliveryError';
  readonly code = 'METERING_ERR_NOTIFICATION_DELIVERY';
}

/** The answer of one attempt, or why there was none. */
interface Outcome {
  statusCode?: number;
  body: string;
}

/** One channel's queue: each entry is `{"event": id}`; the channel and the event are read when it is sent. */
class ChannelQueue extends PersistentQueue<Settings> {
  constructor(
    readonly channelId: string,
    private readonly store: Store,
    private readonly http: Agent,
    counters: QueueCounters,
    log: Logger,
  ) {
    super(keys.queueName(channelId), store, SETTINGS, counters, log, 'notifications');
  }

  protected async post(entry: string, _count: number, stop: AbortSignal): Promise<Error | undefined> {
    const eventId = (JSON.parse(entry) as { event: string }).event;
    const [channelText, eventText] = await this.store.getMany([keys.channel(this.channelId), keys.event(eventId)]);
    const channel = channelText === undefined ? undefined : (JSON.parse(channelText) as Channel);
    if (!channel || channel.deletedAt || channel.disabled || eventText === undefined) {
      // Nothing to send to any more: the delivery ends here, as OpenMeter's does for a disabled or missing channel.
      await this.record(eventId, 'FAILED', 'channel is disabled or deleted; no retry will be attempted');
      return undefined;
    }
    const event = JSON.parse(eventText) as NotificationEvent;
    const started = Date.now();
    const outcome = await this.attempt(channel, event, stop);
    const attempt: DeliveryAttempt = {
      state: outcome.statusCode !== undefined && outcome.statusCode < 300 ? 'SUCCESS' : 'FAILED',
      timestamp: new Date(started).toISOString(),
      response: { ...outcome, durationMs: Date.now() - started, url: channel.url },
    };
    if (attempt.state === 'SUCCESS') {
      await this.record(eventId, 'SUCCESS', 'delivered', attempt);
      return undefined;
    }
    const reason = outcome.statusCode === undefined ? outcome.body : `the receiver answered ${outcome.statusCode}`;
    await this.record(eventId, 'SENDING', `${reason}; retrying`, attempt, true);
    return new DeliveryError(`notification ${eventId} to channel ${this.channelId}: ${reason}`);
  }

  private async attempt(channel: Channel, event: NotificationEvent, stop: AbortSignal): Promise<Outcome> {
    const body = JSON.stringify(event.payload);
    const url = new URL(channel.url);
    try {
      const response = await this.http.request({
        origin: url.origin,
        path: url.pathname + url.search,
        method: 'POST',
        headers: { ...channel.customHeaders, 'content-type': 'application/json', ...signatureHeaders(channel.signingSecret, event.id, body) },
        body,
        signal: AbortSignal.any([stop, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]),
      });
      return { statusCode: response.statusCode, body: await boundedText(response.body, MAX_RESPONSE_KEPT) };
    } catch (err) {
      return { body: `the receiver could not be reached: ${(err as Error).message}` };
    }
  }

  /** Writes the delivery's status (only the holder of its queue claim writes it). */
  private async record(eventId: string, state: DeliveryState, reason: string, attempt?: DeliveryAttempt, retrying = false): Promise<void> {
    const key = keys.status(eventId, this.channelId);
    const text = await this.store.get(key);
    const previous = text === undefined ? undefined : (JSON.parse(text) as DeliveryStatus);
    const attempts = [...(previous?.attempts ?? []), ...(attempt ? [attempt] : [])].slice(-MAX_ATTEMPTS_KEPT);
    const now = Date.now();
    const status: DeliveryStatus = { channelId: this.channelId, state, reason, updatedAt: new Date(now).toISOString(), attempts };
    if (retrying) status.nextAttempt = new Date(now + retryDelayMs(QUEUE, attempts.length - 1)).toISOString();
    await this.store.put(key, JSON.stringify(status));
  }

  /** Retried for max_retry_time: the delivery fails for good. */
  protected async expired(claim: QueueClaim, failure: Error): Promise<void> {
    if (!(await this.disk.complete(claim))) return;
    const eventId = (JSON.parse(claim.events) as { event: string }).event;
    await this.record(eventId, 'FAILED', `${failure.message}; retried for ${QUEUE.max_retry_time / 3600} hours, no retry will be attempted`);
    this.counters.dropped('retry_time', 1);
  }
}

/** The queues of every live channel, in this process: made and closed as channels come and go. */
export class Deliveries {
  private readonly queues = new Map<string, ChannelQueue>();
  private readonly http = new Agent({ connect: { timeout: ATTEMPT_TIMEOUT_MS }, headersTimeout: ATTEMPT_TIMEOUT_MS, bodyTimeout: ATTEMPT_TIMEOUT_MS });
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly counters: (channelId: string) => QueueCounters,
    private readonly log: Logger,
  ) {}

  /** Keeps one started queue per live channel (a deleted or disabled channel's queue stops here). */
  async sync(channels: readonly Channel[]): Promise<void> {
    if (this.closed) return;
    const wanted = new Map(channels.filter((c) => !c.deletedAt).map((c) => [c.id, SETTINGS]));
    await reconcileResources(this.queues, wanted, async (id) => {
      const queue = new ChannelQueue(id, this.store, this.http, this.counters(id), this.log);
      await queue.start();
      return queue;
    });
  }

  /** The write that queues `eventId` on the channel's queue, inside the caller's commit. */
  entryWrite(channelId: string, eventId: string, now: number): BatchOp {
    return this.queueOf(channelId).entryWrite(JSON.stringify({ event: eventId }), now);
  }

  /** The caller's commit holding `writes` succeeded: this process sends them now (another one would on its next poll). */
  committed(channelId: string, writes: BatchOp[]): void {
    this.queues.get(channelId)?.committed(writes);
  }

  /** A channel's queue; one not synced yet (made by another process a moment ago) is made here for its writes. */
  private queueOf(channelId: string): ChannelQueue {
    return this.queues.get(channelId) ?? new ChannelQueue(channelId, this.store, this.http, this.counters(channelId), this.log);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
    await this.http.close();
  }
}

/**
 * The notification domain's composition: the service (channels, rules, events), the delivery queues of
 * this process and the evaluator, over the notification namespace of the metering plugin's store. One
 * per gateway process; everything decisive is in the store, so any number of processes and nodes run it
 * side by side.
 */
import type { Logger } from 'pino';
import type { QueueCounters, Store } from '../../../src/pdk/index.ts';
import { Deliveries } from './delivery.ts';
import { Evaluator, type BillingFacts } from './evaluator.ts';
import { CHANGES_TOPIC } from './keys.ts';
import { NotificationService } from './notifications.ts';

/** Channels are re-read this often even without a notice (a lost notice delays a new channel's queue at most this long). */
const RESYNC_MS = 5_000;

export class Notifications {
  readonly service: NotificationService;
  readonly evaluator: Evaluator;
  private readonly deliveries: Deliveries;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: () => void = () => undefined;
  private syncing: Promise<void> = Promise.resolve();

  constructor(store: Store, facts: BillingFacts, counters: (channelId: string) => QueueCounters, private readonly log: Logger) {
    this.deliveries = new Deliveries(store, counters, log);
    this.service = new NotificationService(store, this.deliveries);
    this.evaluator = new Evaluator(this.service, facts, log);
  }

  async open(): Promise<void> {
    this.unsubscribe = this.service.store.notices.subscribe(CHANGES_TOPIC, () => {
      this.evaluator.rulesChanged();
      return this.sync();
    });
    await this.sync();
    this.timer = setInterval(() => void this.sync(), RESYNC_MS);
    this.timer.unref();
    this.evaluator.start();
  }

  /** Brings this process's delivery queues in line with the live channels (one sync at a time). */
  private sync(): Promise<void> {
    this.syncing = this.syncing
      .then(async () => this.deliveries.sync(await this.service.listChannels({ includeDisabled: true })))
      .catch((err) => this.log.warn({ err }, 'notifications: syncing the channels\' queues failed; retrying'));
    return this.syncing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe();
    await this.evaluator.stop();
    await this.syncing;
    await this.deliveries.close();
  }
}

/** The plugin's series on `GET /metrics`, registered once per process and summed over the node's; `queue` is the queue's name (bounded by the config). */
import type { PluginMetrics, QueueCounters, QueueDepth } from '../../src/pdk/index.ts';
import type { HeldLetters } from './dead-letters.ts';

export class RequestMeteringMetrics {
  readonly events;
  readonly noSubject;
  readonly gatewayAnswers;
  readonly dropped;
  readonly deliveries;
  readonly retries;
  readonly deadLettered;

  constructor(metrics: PluginMetrics, depths: () => QueueDepth[], deadLetters: () => HeldLetters[]) {
    this.events = metrics.counter({
      name: 'tollgate_request_metering_events_total',
      help: 'Events produced from requests, by event type',
      labelNames: ['type'],
    });
    this.noSubject = metrics.counter({
      name: 'tollgate_request_metering_no_subject_total',
      help: 'Requests not metered because they carried no subject (no consumer, header or query value), by route',
      labelNames: ['route'],
    });
    this.gatewayAnswers = metrics.counter({
      name: 'tollgate_request_metering_gateway_answers_total',
      help: 'Requests not metered because the gateway answered them itself (a plugin refused them, or the upstream could not be reached), by route',
      labelNames: ['route'],
    });
    this.dropped = metrics.counter({
      name: 'tollgate_request_metering_dropped_events_total',
      help:
        'Events dropped: queue_full (max_entries or max_bytes reached: the oldest go), retry_time (max_retry_time passed, local store), refused (invalid for the metering store), ' +
        'store (the on-disk queue could not be written), dead_letter_full (the oldest dead letters, making room for new ones), deleted (dead letters deleted on the admin API)',
      labelNames: ['queue', 'reason'],
    });
    this.deliveries = metrics.counter({
      name: 'tollgate_request_metering_deliveries_total',
      help: 'Batches handed over: to the ingest endpoint (acknowledged with a 2xx) or committed to the local metering store',
      labelNames: ['queue'],
    });
    this.retries = metrics.counter({
      name: 'tollgate_request_metering_retries_total',
      help: 'Failed attempts to hand a batch over, each retried after a backoff',
      labelNames: ['queue'],
    });
    this.deadLettered = metrics.counter({
      name: 'tollgate_request_metering_dead_lettered_events_total',
      help:
        'Events kept as dead letters instead of being delivered: refused (the ingest endpoint refused them) or retry_time ' +
        "(max_retry_time passed), with the endpoint's last status (none: it never answered)",
      labelNames: ['queue', 'reason', 'status'],
    });
    metrics.gauge({
      name: 'tollgate_request_metering_dead_letter_events',
      help: 'Events held as dead letters, waiting to be re-delivered or deleted (shared by the processes of the node)',
      labelNames: ['queue'],
      // Every process counts the same stored letters.
      aggregate: 'max',
      read: () => deadLetters().map((held) => ({ labels: { queue: held.queue }, value: held.events })),
    });
    metrics.gauge({
      name: 'tollgate_request_metering_queue_events',
      help: 'Events waiting to be handed over, in memory (the fullest process) and in the on-disk queue (shared by the processes of the node)',
      labelNames: ['queue', 'where'],
      // Every process counts the one shared on-disk queue: the node's figure is the largest count, not their sum.
      aggregate: 'max',
      read: () =>
        depths().flatMap((d) => [
          { labels: { queue: d.queue, where: 'memory' }, value: d.memory },
          { labels: { queue: d.queue, where: 'disk' }, value: d.disk },
        ]),
    });
  }

  /** What a remote queue counts, under its name. */
  queueCounters(queue: string): QueueCounters {
    return {
      dropped: (reason, count) => this.dropped.inc({ queue, reason }, count),
      retried: () => this.retries.inc({ queue }),
      delivered: () => this.deliveries.inc({ queue }),
    };
  }
}

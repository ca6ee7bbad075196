/** The plugin runtime: one metering service (and its billing) per process, answering every request under its routes. */
import type { Logger } from 'pino';
import type { PluginApi, PluginRuntime, QueueCounters, Store } from '../../src/pdk/index.ts';
import { meteringAdminRoutes } from './http/admin.ts';
import { Billing, DeclaredSync, NodeLedger, parseCollectionPeriod, ProcessLedger, StoreLedger, type AdmissionLedger } from './billing/port.ts';
import { BillingHttp } from './billing/http/http.ts';
import { Collectors, Ingestion, mappingLimits } from './ingest/port.ts';
import { MeterUsage, UsageQueries } from './query/port.ts';
import { CollectorsHttp } from './http/collectors-http.ts';
import { MeteringHttp } from './http/http.ts';
import { openMeterV1 } from './http/v1/index.ts';
import { NotificationsV1Http } from './http/notifications-v1.ts';
import { billingFacts } from './notification-facts.ts';
import { Notifications } from './notification/port.ts';
import { backfillRatio } from './meter/port.ts';
import type { MeteringConfig } from './schema.ts';
import { MeteringService, type LocalIngest } from './service.ts';
import { MeterRejections, summed, type Rejections } from './aggregation/port.ts';

/** The node exchange topic of each process's meter rejections (summed for /metering/status). */
const REJECTIONS_TOPIC = 'metering.rejections';

export async function createRuntime(api: PluginApi): Promise<PluginRuntime<MeteringConfig>> {
  const service = new MeteringService(api);
  await service.open();
  const log = api.log.child({ domain: 'billing' });
  const billingStore = api.store.namespace('billing');
  const billing = new Billing(billingStore, new MeterUsage(service), log, { ledger: admissionLedger(api, billingStore, log), alone: !api.sharedStore });
  await billing.open();
  api.services.provide('billing.entitlements', billing.access);
  api.services.provide<LocalIngest>('metering.ingest', { ingest: (events) => service.ingestLocal(events) });
  const notifications = new Notifications(api.store.namespace('notification'), billingFacts(billing), notificationCounters(api), api.log.child({ domain: 'notifications' }));
  await notifications.open();
  // The aggregator's process (or a process alone on its store) hears every commit: thresholds are looked at at once.
  service.committedListeners.add((events) => {
    if (notifications.evaluator.watchingUsage) notifications.evaluator.usageCommitted(new Set(events.map((e) => e.record.subject)));
  });
  const declared = new DeclaredSync(billing, log);
  const collectors = new Collectors(api.store, api.log.child({ domain: 'collectors' }));
  await collectors.open();
  const ingestion = new Ingestion(service, collectors);
  const queries = new UsageQueries(service, billing.customers.directory());
  const v1 = openMeterV1(service, ingestion, queries, billing, new NotificationsV1Http(notifications.service, () => billing.features.list()));
  const http = new MeteringHttp(service, ingestion, queries, [new BillingHttp(billing), new CollectorsHttp(collectors, ingestion), v1], v1);
  const ingested = api.metrics.counter({
    name: 'tollgate_metering_events_ingested_total',
    help: 'Events committed to the metering store (duplicates of stored events are not counted)',
  });
  const batchEvents = api.metrics.histogram({
    name: 'tollgate_metering_batch_events',
    help: 'Events per committed batch (group commit: one fsync for the whole batch)',
    buckets: [1, 10, 100, 500, 1000, 2000, 5000],
  });
  const rejected = api.metrics.counter({
    name: 'tollgate_metering_meter_rejected_values_total',
    help: 'Events whose value a meter could not use (value_missing, value_invalid), left out of its sum, avg, min, max or latest, by meter and reason',
    labelNames: ['meter', 'reason'],
  });
  const rejections = new MeterRejections(service.meters, (r) => rejected.inc(r));
  api.node.offer(REJECTIONS_TOPIC, () => rejections.snapshot());
  service.committedListeners.add((events) => {
    ingested.inc(events.length);
    batchEvents.observe(events.length);
    rejections.record(events);
  });
  api.metrics.gauge({
    name: 'tollgate_metering_queue_events',
    help: 'Events accepted and waiting for their commit (producers get 503 past queue_max_events)',
    read: () => [{ value: service.writer.queuedEvents }],
  });
  api.metrics.gauge({
    name: 'tollgate_metering_dedupe_filter_hashes',
    help: 'Stored (source, id) hashes the in-memory dedupe filter holds',
    read: () => [{ value: service.dedupeFilterSize.hashes }],
    // One filter per node (or per store), shown by each process that knows it.
    aggregate: 'max',
  });
  api.metrics.gauge({
    name: 'tollgate_metering_dedupe_filter_bytes',
    help: 'Memory of the in-memory dedupe filter, in bytes',
    read: () => [{ value: service.dedupeFilterSize.bytes }],
    // One filter per node (or per store), shown by each process that knows it.
    aggregate: 'max',
  });
  api.metrics.gauge({
    name: 'tollgate_metering_backfill_progress_ratio',
    help: 'Share of the events stored before a meter was created that its backfill has aggregated (0 to 1), per meter being backfilled',
    labelNames: ['meter'],
    read: () => service.meters.pendingBackfills().map(({ key, backfill }) => ({ labels: { meter: key }, value: backfillRatio(backfill!) })),
  });
  // The admin API answers with the settings of the first metering route that is no portal (limits, how long a query waits for a backfill).
  let routeConfig: MeteringConfig | undefined;
  return {
    configure: async (view) => {
      await service.configure(view);
      collectors.configure(view.entities('collectors'), mappingLimits(view.instances.map((i) => i.config)));
      // A portal route (config.portal) serves the portal's read alone: the admin API mounts a metering route's settings.
      routeConfig = (view.instances.find((i) => !i.config.portal) ?? view.instances[0])?.config;
      const periods = view.instances.map((i) => parseCollectionPeriod(i.config.billing.collection_period)!);
      billing.scheduler.collectionMs = periods.length ? Math.max(...periods) : 3_600_000;
      await declared.sync(view.entities);
    },
    access: (ctx, config) => http.handle(ctx, config),
    adminRoutes: meteringAdminRoutes({
      service,
      http,
      routeConfig: () => routeConfig,
      rejections: async () => summed((await api.node.gather(REJECTIONS_TOPIC)) as Rejections[][]),
    }),
    close: async () => {
      collectors.close();
      await notifications.close();
      await billing.close();
      await service.close();
    },
  };
}

/** Where metered limits count admissions: wherever every process that may admit a customer's request reaches. */
function admissionLedger(api: PluginApi, store: Store, log: Logger): AdmissionLedger {
  if (api.nodesShareStore) return new StoreLedger(store, log);
  if (api.processesOnNode > 1) return new NodeLedger(api.node, log);
  return new ProcessLedger();
}

/** The delivery queues' series on `GET /metrics`, by channel. */
function notificationCounters(api: PluginApi): (channelId: string) => QueueCounters {
  const dropped = api.metrics.counter({
    name: 'tollgate_notification_deliveries_dropped_total',
    help: 'Notification deliveries given up: retry_time (retried for 48 hours), queue_full, store',
    labelNames: ['channel', 'reason'],
  });
  const delivered = api.metrics.counter({ name: 'tollgate_notification_deliveries_total', help: 'Notification deliveries a receiver acknowledged with a 2xx', labelNames: ['channel'] });
  const retried = api.metrics.counter({ name: 'tollgate_notification_retries_total', help: 'Failed delivery attempts, each retried after a backoff', labelNames: ['channel'] });
  return (channel) => ({
    dropped: (reason, count) => dropped.inc({ channel, reason }, count),
    retried: () => retried.inc({ channel }),
    delivered: () => delivered.inc({ channel }),
  });
}

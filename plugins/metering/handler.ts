/** The plugin runtime: one metering service (and its billing) per process, answering every request under its routes. */
import type { PluginApi, PluginRuntime } from '../../src/pipeline/plugin-api.ts';
import { meteringAdminRoutes } from './admin.ts';
import { Billing } from './billing/billing.ts';
import { parseCollectionPeriod } from './billing/calendar.ts';
import { DeclaredSync } from './billing/declared.ts';
import { BillingHttp } from './billing/http.ts';
import { MeteringHttp } from './http.ts';
import { backfillRatio } from './registry.ts';
import type { MeteringConfig } from './schema.ts';
import { MeteringService } from './service.ts';
import { MeterUsage } from './usage.ts';

export async function createRuntime(api: PluginApi): Promise<PluginRuntime<MeteringConfig>> {
  const service = new MeteringService(api);
  await service.open();
  const log = api.log.child({ domain: 'billing' });
  const billing = new Billing(api.store.namespace('billing'), new MeterUsage(service), log);
  await billing.open();
  api.services.provide('billing.entitlements', billing.access);
  const declared = new DeclaredSync(billing, log);
  const http = new MeteringHttp(service, new BillingHttp(billing));
  api.metrics.gauge({
    name: 'tollgate_metering_queue_events',
    help: 'Events accepted and waiting for their commit (producers get 503 past queue_max_events)',
    read: () => [{ value: service.writer.queuedEvents }],
  });
  api.metrics.gauge({
    name: 'tollgate_metering_dedupe_filter_hashes',
    help: 'Stored (source, id) hashes the in-memory dedupe filter holds',
    read: () => [{ value: service.writer.dedupeFilter.size.hashes }],
  });
  api.metrics.gauge({
    name: 'tollgate_metering_dedupe_filter_bytes',
    help: 'Memory of the in-memory dedupe filter, in bytes',
    read: () => [{ value: service.writer.dedupeFilter.size.bytes }],
  });
  api.metrics.gauge({
    name: 'tollgate_metering_backfill_progress_ratio',
    help: 'Share of the events stored before a meter was created that its backfill has aggregated (0 to 1), per meter being backfilled',
    labelNames: ['meter'],
    read: () => service.meters.pendingBackfills().map(({ key, backfill }) => ({ labels: { meter: key }, value: backfillRatio(backfill!) })),
  });
  // The admin API answers with the settings of the first metering route (limits, how long a query waits for a backfill).
  let routeConfig: MeteringConfig | undefined;
  return {
    configure: async (view) => {
      await service.configure(view);
      routeConfig = view.instances[0]?.config;
      const periods = view.instances.map((i) => parseCollectionPeriod(i.config.billing.collection_period)!);
      billing.scheduler.collectionMs = periods.length ? Math.max(...periods) : 3_600_000;
      await declared.sync(view.entities);
    },
    access: (ctx, config) => http.handle(ctx, config),
    adminRoutes: meteringAdminRoutes({ service, http, routeConfig: () => routeConfig }),
    close: async () => {
      await billing.close();
      await service.close();
    },
  };
}

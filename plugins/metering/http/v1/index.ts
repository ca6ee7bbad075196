/** OpenMeter's v1 API: the router and every area's route table, one line each. */
import type { Billing } from '../../billing/port.ts';
import type { Ingestion } from '../../ingest/port.ts';
import type { UsageQueries } from '../../query/port.ts';
import type { MeteringService } from '../../service.ts';
import { CatalogV1 } from '../../billing/http/v1/catalog.ts';
import { CustomersV1 } from '../../billing/http/v1/customers.ts';
import { EntitlementsV1 } from '../../billing/http/v1/entitlements.ts';
import { infoRoutes } from '../../billing/http/v1/info.ts';
import { InvoicesV1 } from '../../billing/http/v1/invoices.ts';
import { SubjectsV1 } from '../../billing/http/v1/subjects.ts';
import { SubscriptionsV1 } from '../../billing/http/v1/subscriptions.ts';
import { MeteringV1 } from './metering.ts';
import { PortalV1 } from './portal.ts';
import { OpenMeterV1Http } from './router.ts';
import type { NotificationsV1Http } from '../notifications-v1.ts';

export function openMeterV1(
  service: MeteringService,
  ingestion: Ingestion,
  queries: UsageQueries,
  billing: Billing,
  notifications: NotificationsV1Http,
): OpenMeterV1Http {
  const metering = new MeteringV1(service, ingestion, queries);
  return new OpenMeterV1Http([
    metering.routes(),
    new SubjectsV1(service, billing).routes(),
    new CustomersV1(billing).routes(),
    new EntitlementsV1(billing).routes(),
    new CatalogV1(billing).routes(),
    new InvoicesV1(billing).routes(),
    infoRoutes(),
    new PortalV1(billing, metering).routes(),
    new SubscriptionsV1(billing).routes(),
    notifications.routes(),
  ]);
}

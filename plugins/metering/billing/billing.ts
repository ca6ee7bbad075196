/**
 * Billing, the domain beside ingest and query: customers, features, plans, subscriptions, invoices and
 * entitlements, over its own namespace of the metering plugin's store, reaching usage only through
 * the metering query service (UsageSource). One instance per gateway process; everything decisive is
 * in the store, so several processes or nodes can run it side by side.
 */
import type { Logger } from 'pino';
import type { Store } from '../../../src/pdk/index.ts';
import { AccessCache, EntitlementService, ProcessLedger, type AdmissionLedger } from './entitlement/port.ts';
import { CustomerService, PortalTokenService, SubjectService } from './customer/port.ts';
import { FeatureService, PlanService, type Feature } from './productcatalog/port.ts';
import { InvoiceService } from './invoice/port.ts';
import { Scheduler } from './scheduler.ts';
import { BillingStore, type Transaction } from './shared/store.ts';
import { SubscriptionService, subscriptionStatus } from './subscription/port.ts';
import type { UsageSource } from './shared/usage.ts';

export class Billing {
  readonly db: BillingStore;
  readonly customers: CustomerService;
  /** OpenMeter v1's subject records (display names and metadata of usage subjects). */
  readonly subjects: SubjectService;
  /** Consumer portal tokens: a subject's read-only access to its own usage. */
  readonly portalTokens: PortalTokenService;
  readonly features: FeatureService;
  readonly plans: PlanService;
  readonly subscriptions: SubscriptionService;
  readonly invoices: InvoiceService;
  readonly entitlements: EntitlementService;
  readonly scheduler: Scheduler;
  /** The in-memory decisions the `entitlement-enforcement` plugin uses. */
  readonly access: AccessCache;

  /**
   * `admissions`: where metered limits count their admissions (this process's memory when it is alone), and
   * whether this process is alone on its store (then it commits every event itself).
   */
  constructor(
    store: Store,
    usage: UsageSource,
    log: Logger,
    admissions: { ledger: AdmissionLedger; alone: boolean } = { ledger: new ProcessLedger(), alone: true },
  ) {
    this.db = new BillingStore(store);
    this.customers = new CustomerService(this.db, (tx, customerId, currency) =>
      this.subscriptions.inOtherCurrency(tx, customerId, currency),
    );
    this.subjects = new SubjectService(this.db);
    this.portalTokens = new PortalTokenService(this.db);
    this.features = new FeatureService(this.db, usage, (tx, feature) => this.featureUser(tx, feature));
    this.plans = new PlanService(this.db, this.features);
    this.subscriptions = new SubscriptionService(this.db, this.customers, this.plans, this.features);
    this.invoices = new InvoiceService(this.db, usage, this.customers, this.subscriptions);
    this.entitlements = new EntitlementService(usage, this.customers, this.subscriptions, this.features);
    this.scheduler = new Scheduler(this.db, this.invoices, log);
    this.access = new AccessCache(
      this.customers,
      this.subscriptions,
      this.entitlements,
      usage,
      store.notices,
      admissions.ledger,
      admissions.alone,
      log,
    );
  }

  async open(): Promise<void> {
    await this.access.start();
    this.scheduler.start();
  }

  async close(): Promise<void> {
    this.access.stop();
    await this.scheduler.stop();
  }

  /** What still uses a feature: an active plan version, or a subscription that has not ended. */
  private async featureUser(tx: Transaction, feature: Feature): Promise<string | undefined> {
    const uses = (cards: { feature: { id: string | null } | null }[]) =>
      cards.some((c) => c.feature?.id === feature.id);
    const plan = (await this.plans.activeVersions(tx)).find((p) => p.phases.some((phase) => uses(phase.rate_cards)));
    if (plan) return `active plan ${plan.key} v${plan.version}`;
    const live = (await this.subscriptions.list()).find(
      (s) => subscriptionStatus(s) !== 'inactive' && uses(s.items.map((i) => i.card)),
    );
    return live && `subscription ${live.id}`;
  }
}

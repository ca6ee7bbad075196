/**
 * Billing's facts as the notification domain reads them (its BillingFacts): the metered entitlements of
 * active subscriptions with their values computed by billing's entitlement service (the usage, limit and
 * balance the gateway enforces, exact decimals), and the issued invoices. Composition: it joins two
 * domains through their ports.
 */
import type { Billing } from './billing/port.ts';
import type { BillingFacts, EntitlementSnapshot, IssuedInvoice } from './notification/port.ts';
import { stableId } from './shared/ids.ts';

type Subscription = Awaited<ReturnType<Billing['subscriptions']['list']>>[number];

/** The subscriptions active at `now` whose subjects include one of `subjects` (each looked up by its index), or all. */
async function activeSubscriptions(billing: Billing, now: number, subjects?: ReadonlySet<string>): Promise<Subscription[]> {
  const customers = subjects ? await Promise.all([...subjects].map((s) => billing.customers.resolve(s))) : await billing.customers.list();
  const out = new Map<string, Subscription>();
  for (const customer of customers) {
    if (!customer || customer.deleted_at || out.has(customer.id)) continue;
    const subscription = await billing.subscriptions.activeAt(customer.id, now);
    if (subscription && (!subjects || subscription.subjects.some((s) => subjects.has(s)))) out.set(customer.id, subscription);
  }
  return [...out.values()];
}

export function billingFacts(billing: Billing): BillingFacts {
  return {
    async entitlements(now, subjects) {
      const subscriptions = await activeSubscriptions(billing, now, subjects);
      if (subscriptions.length === 0) return [];
      const features = new Map((await billing.features.list()).map((f) => [f.key, f]));
      const out: EntitlementSnapshot[] = [];
      for (const s of subscriptions) {
        const customer = await billing.customers.get(s.customer.id);
        for (const value of await billing.entitlements.values(customer, now)) {
          const item = s.items.find((i) => i.card.feature?.key === value.feature_key);
          const feature = features.get(value.feature_key);
          if (value.type !== 'metered' || !value.period || !item || !feature) continue;
          const template = item.card.entitlement as { usage_period?: string | null } | null;
          out.push({
            id: stableId(`tollgate-entitlement:${s.id}:${value.feature_key}`),
            customer: { id: customer.id, key: customer.key, name: customer.name },
            subjects: s.subjects,
            feature: { id: feature.id, key: feature.key, name: feature.name },
            value: {
              usage: value.usage!,
              limit: value.limit!,
              balance: value.balance!,
              overage: value.overage!,
              hasAccess: value.has_access,
              isSoftLimit: value.is_soft_limit ?? false,
            },
            period: value.period,
            activeFrom: s.active_from,
            usagePeriod: template?.usage_period ?? item.card.billing_cadence ?? s.billing_cadence,
          });
        }
      }
      return out;
    },
    async invoices() {
      const issued: IssuedInvoice[] = [];
      for (const invoice of await billing.invoices.list()) {
        if (invoice.status === 'issued' && invoice.issued_at) {
          issued.push({ id: invoice.id, issuedAt: invoice.issued_at, customerKey: invoice.customer.key, data: invoice as unknown as Record<string, unknown> });
        }
      }
      return issued;
    },
  };
}

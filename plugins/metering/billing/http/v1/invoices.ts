/**
 * OpenMeter v1's invoices (`/api/v1/billing/invoices`): the issued invoices of the invoice service, and
 * a customer's `gathering` invoice — the upcoming invoice of its current billing period, as OpenMeter
 * lists it — when the list names the customer. Tollgate's invoices are issued automatically and never
 * change, so the actions on a draft (advance, approve, void, …) are answered 501.
 */
import type { Billing } from '../../port.ts';
import type { Invoice } from '../../invoice/port.ts';
import { BillingError, validationFailed } from '../../shared/errors.ts';
import { notSupported } from '../../../shared/errors.ts';
import type { MeteringRequest } from '../../../http/http.ts';
import { operation, type V1Handler, type V1Routes } from '../../../http/v1/router.ts';
import { pageOf, paginated, queryList, toV1 } from '../../../http/v1/shapes.ts';

/** Customers one list may ask the upcoming invoice of (each is computed from its usage). */
const MAX_CUSTOMERS = 100;
const ZERO_TOTALS = { chargesTotal: '0', discountsTotal: '0', creditsTotal: '0', taxesInclusiveTotal: '0', taxesExclusiveTotal: '0', taxesTotal: '0' };

/** A customer without an active subscription has no upcoming invoice (the customer exists: checked before). */
function withoutSubscription(err: unknown): undefined {
  if (err instanceof BillingError && err.kind === 'notFound') return undefined;
  throw err;
}

export function v1Invoice(invoice: Invoice): Record<string, unknown> {
  const { lines, totals, issued_at: issuedAt, subscription, ...rest } = invoice;
  const at = issuedAt ?? invoice.period.from;
  return {
    ...toV1(rest),
    type: 'standard',
    ...(issuedAt ? { issuedAt } : {}),
    createdAt: at,
    updatedAt: at,
    statusDetails: { immutable: invoice.status === 'issued', failed: false, extendedStatus: invoice.status, availableActions: {} },
    totals: { ...ZERO_TOTALS, amount: totals.amount, total: totals.total },
    lines: lines.map((line) => ({
      ...toV1(line),
      type: line.feature_key === null ? 'flat_fee' : 'usage_based',
      subscription: { subscriptionId: subscription.id },
      totals: { ...ZERO_TOTALS, amount: line.amount, total: line.amount },
    })),
  };
}

export class InvoicesV1 {
  constructor(private readonly billing: Billing) {}

  routes(): V1Routes {
    const billing = (handle: V1Handler) => operation('billing', handle);
    const refuse = (what: string): V1Handler => () => {
      throw notSupported(what, 'Tollgate issues invoices at the end of each billing period (plus the collection period) and never changes them');
    };
    const actions = Object.fromEntries(
      ['advance', 'approve', 'retry', 'void', 'snapshot-quantities', 'taxes/recalculate'].map((action) => [`v1/billing/invoices/*/${action}`, { POST: billing(refuse(`${action} of an invoice`)) }]),
    );
    return {
      'v1/billing/invoices': { GET: billing((ctx) => this.list(ctx)) },
      'v1/billing/invoices/*': {
        GET: billing(async (ctx, _c, [id]) => ctx.respond(200, v1Invoice(await this.billing.invoices.get(id)))),
        PUT: billing(refuse('updating an invoice')),
        DELETE: billing(refuse('deleting an invoice')),
      },
      ...actions,
    };
  }

  /** Issued invoices in number order, then the named customers' gathering invoices (`customers`, `statuses`). */
  private async list(ctx: MeteringRequest): Promise<void> {
    const page = pageOf(ctx)!;
    const customers = queryList(ctx, 'customers');
    const statuses = queryList(ctx, 'statuses');
    if (customers.length > MAX_CUSTOMERS) throw validationFailed([{ field: 'customers', reason: `at most ${MAX_CUSTOMERS} customers`, rule: 'max_items', source: 'query' }]);
    const wants = (status: Invoice['status']) => statuses.length === 0 || statuses.includes(status);
    const invoices: Invoice[] = [];
    if (wants('issued')) {
      if (customers.length === 0) invoices.push(...(await this.billing.invoices.list()));
      for (const customer of customers) invoices.push(...(await this.billing.invoices.list(customer)));
    }
    if (wants('gathering')) {
      for (const customer of customers) {
        await this.billing.customers.get(customer);
        const upcoming = await this.billing.invoices.upcoming(customer).catch(withoutSubscription);
        if (upcoming) invoices.push(upcoming);
      }
    }
    ctx.respond(200, paginated(invoices, page, v1Invoice));
  }
}

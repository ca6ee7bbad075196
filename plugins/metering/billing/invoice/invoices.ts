/**
 * Invoices: what a subscription owes for a billing period, with a line per rate card (tier details
 * for tiered prices), quantities read from usage, amounts rounded per line. In-advance flat fees are
 * invoiced at the start of their period; usage and in-arrears fees at its end plus the collection
 * period, when the quantities are frozen into an issued invoice that never changes. Each invoice has a
 * deterministic id (subscription, period, kind) and is written whole in one commit that requires it
 * to be absent, so it is issued exactly once however many processes try, and a crash leaves it
 * either absent or complete.
 */
import { stableId } from '../../shared/ids.ts';
import { eventSeconds, formatInstant, type Period } from '../shared/calendar.ts';
import type { CustomerService } from '../customer/port.ts';
import { notFound } from '../shared/errors.ts';
import { currencyOf, formatDecimal, sum, Decimal, type Currency } from '../shared/money.ts';
import type { Price } from '../productcatalog/port.ts';
import { rateFlat, rateUsage, type RatedTier } from './rating.ts';
import { keys, PREFIXES, type BillingStore, type Transaction } from '../shared/store.ts';
import { billingPeriodAt, type BillingPeriod, type Item, type Subscription, type SubscriptionService } from '../subscription/port.ts';
import type { UsageSource } from '../shared/usage.ts';

export type InvoiceKind = 'in_advance' | 'in_arrears';

export interface InvoiceLine {
  name: string;
  rate_card_key: string;
  feature_key: string | null;
  payment_term: InvoiceKind;
  period: { from: string; to: string };
  quantity: string;
  price: Price;
  amount: string;
  tiers?: RatedTier[];
}

export interface Invoice {
  id: string;
  number: string | null;
  status: 'gathering' | 'issued';
  customer: { id: string; key: string };
  subscription: { id: string };
  currency: string;
  period: { from: string; to: string };
  issued_at: string | null;
  lines: InvoiceLine[];
  totals: { amount: string; total: string };
}

const NUMBER_PREFIX = 'INV-';
const formatNumber = (sequence: number) => `${NUMBER_PREFIX}${String(sequence).padStart(6, '0')}`;
/** An issued invoice's place in the sequence of numbers (compared as text, INV-1000000 would sort before INV-999999). */
const sequenceOf = (invoice: Invoice) => Number(invoice.number!.slice(NUMBER_PREFIX.length));

export const invoiceId = (subscriptionId: string, kind: InvoiceKind, period: number) => stableId(`tollgate-invoice:${subscriptionId}:${kind}:${period}`);

const span = (p: Period) => ({ from: formatInstant(p.from), to: formatInstant(p.to) });

/** Does the rate card bill in this kind of invoice for this period? One-time cards bill in the first period only. */
function billsIn(item: Item, kind: InvoiceKind, period: BillingPeriod): boolean {
  const { card } = item;
  if (card.price.type === 'free') return false;
  if (card.billing_cadence === null && period.index > 0) return false;
  const usage = card.price.type !== 'flat';
  return kind === 'in_arrears' ? usage || card.payment_term === 'in_arrears' : !usage && card.payment_term === 'in_advance';
}

/** A usage line of a period without usage and without a charge (a first tier's flat price is one). */
function nothingUsedOrOwed(line: InvoiceLine): boolean {
  return line.quantity === '0' && line.amount === '0';
}

export class InvoiceService {
  constructor(
    private readonly db: BillingStore,
    private readonly usage: UsageSource,
    private readonly customers: CustomerService,
    private readonly subscriptions: SubscriptionService,
  ) {}

  /** The invoice of `kind` for a period as it stands now (quantities read from usage so far). */
  async compute(s: Subscription, period: BillingPeriod, kind: InvoiceKind, status: Invoice['status']): Promise<Invoice> {
    const currency = currencyOf(s.currency) as Currency;
    const lines: InvoiceLine[] = [];
    for (const item of s.items) {
      if (!billsIn(item, kind, period)) continue;
      const line = await this.line(s, item, period, kind, currency);
      // The live invoice shows every metered line from the start; an issued one only what was used or owed.
      if (line && (status === 'gathering' || !nothingUsedOrOwed(line))) lines.push(line);
    }
    const total = formatDecimal(sum(lines.map((l) => new Decimal(l.amount))));
    return {
      id: invoiceId(s.id, kind, period.index),
      number: null,
      status,
      customer: s.customer,
      subscription: { id: s.id },
      currency: s.currency,
      period: span(period),
      issued_at: null,
      lines,
      totals: { amount: total, total },
    };
  }

  private async line(s: Subscription, item: Item, period: BillingPeriod, kind: InvoiceKind, currency: Currency): Promise<InvoiceLine | undefined> {
    const { card } = item;
    const base = {
      name: card.name,
      rate_card_key: card.key,
      feature_key: card.feature?.key ?? null,
      payment_term: kind,
      period: span(period),
      price: card.price,
    };
    if (card.price.type === 'flat') {
      // A one-time fee is never prorated; a recurring one by the part of its period served (a zero fee is no line).
      const prorate = s.pro_rating_enabled && card.billing_cadence !== null;
      const amount = rateFlat(card.price.amount, period.to - period.from, period.full.to - period.full.from, prorate, currency);
      return amount.isZero() ? undefined : { ...base, quantity: '1', amount: formatDecimal(amount) };
    }
    if (card.price.type === 'free') return undefined;
    const quantity = item.meter ? await this.quantity(s, item, period) : '0';
    const rated = rateUsage(card.price, new Decimal(quantity), currency);
    return { ...base, quantity: formatDecimal(new Decimal(quantity)), amount: formatDecimal(rated.amount), ...(rated.tiers ? { tiers: rated.tiers } : {}) };
  }

  /** The feature's usage by the subscription's subjects, by event time within the period. */
  private quantity(s: Subscription, item: Item, period: Period): Promise<string> {
    const { from, to } = eventSeconds(period);
    return this.usage.quantity({ meterId: item.meter!.id, subjects: s.subjects, filters: item.meter!.filters, from, to });
  }

  /** The customer's live invoice for the current billing period (usage and in-arrears fees so far). */
  async upcoming(customerIdOrKey: string, now = Date.now()): Promise<Invoice> {
    const customer = await this.customers.get(customerIdOrKey);
    const s = await this.subscriptions.activeAt(customer.id, now);
    const period = s && billingPeriodAt(s, now);
    if (!s || !period) throw notFound('upcoming invoice: no active subscription for customer', customer.key);
    return this.compute(s, period, 'in_arrears', 'gathering');
  }

  /**
   * Issues `draft` (computed by `compute`) unless an invoice with its id exists, in one commit with
   * its customer index entry, the next invoice number and whatever `alsoWrite` adds (the scheduler's
   * progress). Returns false when it already existed.
   */
  issue(draft: Invoice, alsoWrite: (tx: Transaction) => Promise<void>): Promise<boolean> {
    return this.db.transact(async (tx) => {
      if ((await tx.text(keys.invoice(draft.id))) !== undefined) {
        await alsoWrite(tx);
        return false;
      }
      const number = Number((await tx.text(keys.invoiceCounter)) ?? '0') + 1;
      const issued: Invoice = { ...draft, number: formatNumber(number), status: 'issued', issued_at: formatInstant(Date.now()) };
      tx.put(keys.invoice(draft.id), issued);
      tx.put(keys.customerInvoice(draft.customer.id, draft.id), '1');
      tx.put(keys.invoiceCounter, String(number));
      await alsoWrite(tx);
      return true;
    }, 'invoice');
  }

  async get(id: string): Promise<Invoice> {
    const invoice = /^[0-9A-Z]{26}$/.test(id) ? await this.db.get<Invoice>(keys.invoice(id)) : undefined;
    if (!invoice) throw notFound('invoice', id);
    return invoice;
  }

  /**
   * Issued invoices, of one customer or all, in number order: the order they were issued in (an in-advance
   * invoice of the next period comes before the last period's usage invoice), and the order pages stay
   * stable in, as each new invoice comes last.
   */
  async list(customerIdOrKey?: string): Promise<Invoice[]> {
    let invoices: Invoice[];
    if (customerIdOrKey === undefined) invoices = await this.db.list<Invoice>(PREFIXES.invoices);
    else {
      const customer = await this.customers.get(customerIdOrKey);
      const ids = await this.db.keysUnder(keys.customerInvoices(customer.id));
      invoices = (await this.db.getMany<Invoice>(ids.map(keys.invoice))).filter((i): i is Invoice => i !== undefined);
    }
    return invoices.sort((a, b) => sequenceOf(a) - sequenceOf(b));
  }
}

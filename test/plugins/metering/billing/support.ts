/**
 * Shared fixture of the billing tests: the metering route (oauth2 + metering with a short collection
 * period) with a few declared meters, and a client for the billing API under it that authenticates as
 * a real caller does. Cadences are PT1M (the shortest the contract allows); a subscription's first
 * period is made to end within seconds by anchoring it just under a minute in the past, so whole
 * billing cycles run in the suite without waiting a minute each.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { MeteringApi, meteringConfig, sleep, type Reply } from '../catalogue-support.ts';

export { assertProblem, sleep, unique } from '../catalogue-support.ts';
export type { Reply };

export const METERS = [
  { key: 'api_calls', name: 'API calls', event_type: 'request', aggregation: 'count', dimensions: { route: '$.route', method: '$.method' } },
  { key: 'tokens', name: 'Tokens', event_type: 'prompt', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model' } },
  { key: 'latency_avg', name: 'Average latency', event_type: 'request', aggregation: 'avg', value_property: '$.latency' },
  { key: 'seats', name: 'Seats', event_type: 'seats', aggregation: 'latest', value_property: '$.count' },
];

export interface BillingFixtureOptions {
  /** `config.billing.collection_period` (default PT1S). */
  collectionPeriod?: string;
  /** Extra top-level entities (customers, features, plans, services, consumers…). */
  extra?: Record<string, unknown>;
  metering?: Record<string, unknown>;
}

export function billingConfig(options: BillingFixtureOptions = {}): Record<string, any> {
  const base = meteringConfig({ meters: METERS, metering: { billing: { collection_period: options.collectionPeriod ?? 'PT1S' }, ...options.metering } }) as Record<string, any>;
  const extra = options.extra ?? {};
  return { ...base, ...extra, consumers: [...base.consumers, ...((extra.consumers as unknown[]) ?? [])] };
}

/** A name no other test in the same gateway uses, valid as a resource key. */
export function key(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 10)}`;
}

/** An anchor that makes the current PT1M period end `ms` from now (for a subscription created now). */
export function anchorEndingIn(ms: number): string {
  return new Date(Date.now() + ms - 60_000).toISOString();
}

export type Card = Record<string, unknown>;

/** A one-phase plan body on PT1M in USD with the given rate cards. */
export function planBody(planKey: string, cards: Card[], fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { key: planKey, name: `Plan ${planKey}`, currency: 'USD', billing_cadence: 'PT1M', phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: cards }], ...fields };
}

/** The billing API under the metering route. */
/** A gateway with billing (billingConfig) and a client of its billing API. */
export async function startBillingGateway(options: BillingFixtureOptions = {}): Promise<{ gateway: TestGateway; api: BillingApi }> {
  const gateway = await startGateway(billingConfig(options));
  return { gateway, api: await BillingApi.connect(gateway.https) };
}

export class BillingApi extends MeteringApi {
  static override async connect(httpsBase: string): Promise<BillingApi> {
    const api = await MeteringApi.connect(httpsBase);
    return new BillingApi(api.base, api.token);
  }

  get(path: string): Promise<Reply> {
    return this.send('GET', path);
  }

  post(path: string, body?: unknown): Promise<Reply> {
    return body === undefined ? this.send('POST', path) : this.sendJson('POST', path, body);
  }

  put(path: string, body: unknown): Promise<Reply> {
    return this.sendJson('PUT', path, body);
  }

  del(path: string): Promise<Reply> {
    return this.send('DELETE', path);
  }

  /** Sends and insists on `status`; returns the parsed body. */
  async ok(status: number, res: Promise<Reply>): Promise<any> {
    const r = await res;
    assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text}`);
    return r.text ? r.json() : undefined;
  }

  customer(fields: Record<string, unknown> = {}): Promise<any> {
    const k = (fields.key as string) ?? key('cust');
    return this.ok(201, this.post('/customers', { key: k, name: `Customer ${k}`, ...fields }));
  }

  feature(meterKey: string | null, fields: Record<string, unknown> = {}): Promise<any> {
    const k = (fields.key as string) ?? key('feat');
    return this.ok(201, this.post('/features', { key: k, name: `Feature ${k}`, ...(meterKey ? { meter: { key: meterKey } } : {}), ...fields }));
  }

  /** Creates and publishes a plan; returns the published version. */
  async activePlan(cards: Card[], fields: Record<string, unknown> = {}): Promise<any> {
    const plan = await this.ok(201, this.post('/plans', planBody((fields.key as string) ?? key('plan'), cards, fields)));
    return this.ok(200, this.post(`/plans/${plan.id}/publish`));
  }

  subscribe(customerKey: string, planKey: string, extra: Record<string, unknown> = {}): Promise<any> {
    return this.ok(201, this.post('/subscriptions', { customer: { key: customerKey }, plan: { key: planKey }, ...extra }));
  }

  /** Posts events of `type` for `subject` (202 expected). */
  async usage(subject: string, type: string, count: number, data: Record<string, unknown> = {}, time?: string): Promise<void> {
    const events = Array.from({ length: count }, () => ({ specversion: '1.0', id: randomUUID(), source: 'billing-test', type, subject, ...(time ? { time } : {}), data }));
    await this.ingestOk(events, 'application/cloudevents-batch+json');
  }

  invoices(customerKey: string): Promise<any[]> {
    return this.ok(200, this.get(`/invoices?customer=${encodeURIComponent(customerKey)}&page[size]=1000`)).then((r) => r.data);
  }

  /** The customer's issued invoices once there are `count` of them. */
  invoicesWhen(customerKey: string, count: number, timeoutMs = 20_000): Promise<any[]> {
    return waitFor(async () => {
      const list = await this.invoices(customerKey);
      return list.length >= count ? list : undefined;
    }, `${count} invoices of ${customerKey}`, timeoutMs);
  }
}

/** A card pricing a metered feature by unit. */
export function unitCard(featureKey: string, amount: string, extra: Card = {}): Card {
  return { key: featureKey, name: `Usage of ${featureKey}`, feature_key: featureKey, price: { type: 'unit', amount }, ...extra };
}

/** A flat fee card, recurring at planBody's cadence (PT1M) unless `extra` says otherwise (a flat card without a cadence is a one-time fee). */
export function flatCard(cardKey: string, amount: string, term: 'in_advance' | 'in_arrears' = 'in_advance', extra: Card = {}): Card {
  return { key: cardKey, name: `Fee ${cardKey}`, price: { type: 'flat', amount }, payment_term: term, billing_cadence: 'PT1M', ...extra };
}

/** Waits until events sent now fall after the subscription's start (event times are whole seconds). */
export async function afterStart(subscription: { active_from: string }): Promise<void> {
  const firstCountedSecond = Math.ceil(Date.parse(subscription.active_from) / 1000) * 1000;
  const wait = firstCountedSecond - Date.now() + 20;
  if (wait > 0) await sleep(wait);
}

/**
 * Fixture of the notification tests: the billing gateway, `@openmeter/sdk` pointed at its metering
 * route (as a user would, unmodified), a webhook receiver that checks every signature (the example's,
 * examples/webhook-receiver.ts, written apart from the gateway's signer), and a customer subscribed to
 * a metered entitlement with a channel and a rule watching it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { OpenMeter } from '@openmeter/sdk';
import { WebhookReceiver, type Delivery } from '../../../../examples/webhook-receiver.ts';
import { waitFor } from '../../../helpers/support.ts';
import { afterStart, key, unitCard, type BillingApi } from '../billing/support.ts';

export { WebhookReceiver, type Delivery };

/** Every channel of the tests signs with this secret, which the receiver knows. */
export const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

export { sdkClient } from '../openmeter-sdk-support.ts';

type ChannelRecord = Parameters<OpenMeter['notifications']['channels']['update']>[1];

/** The SDK types a channel's create and update bodies as a whole channel (id and times included); what it sends is the request body. */
export function channelBody(body: Omit<ChannelRecord, 'id' | 'createdAt' | 'updatedAt'>): ChannelRecord {
  return body as ChannelRecord;
}

export function createChannel(client: OpenMeter, body: Omit<ChannelRecord, 'id' | 'createdAt' | 'updatedAt'>) {
  return client.notifications.channels.create(channelBody(body));
}

export interface Watched {
  customer: any;
  feature: any;
  subscription: any;
  channel: any;
  rule: any;
}

export interface WatchOptions {
  limit?: string;
  usagePeriod?: string;
  billingAnchor?: string;
  thresholds?: { value: number; type: 'usage_percentage' | 'usage_value' | 'balance_value' }[];
  ruleType?: 'entitlements.balance.threshold' | 'entitlements.reset' | 'invoice.created';
  cards?: Record<string, unknown>[];
}

/** A customer on a plan with a metered entitlement to api_calls, and a channel (to `url`) and rule created through the SDK. */
export async function watchedCustomer(api: BillingApi, client: OpenMeter, url: string, options: WatchOptions = {}): Promise<Watched> {
  const feature = await api.feature('api_calls');
  const entitlement = { type: 'metered', limit: options.limit ?? '10', usage_period: options.usagePeriod ?? 'P1D' };
  const plan = await api.activePlan([unitCard(feature.key, '0.1', { entitlement }), ...(options.cards ?? [])]);
  const customer = await api.customer({ currency: 'USD' });
  const channel = await createChannel(client, { type: 'WEBHOOK', name: `hook ${customer.key}`, url, signingSecret: SECRET });
  const type = options.ruleType ?? 'entitlements.balance.threshold';
  const scope = type === 'invoice.created' ? {} : { features: [feature.key] };
  const thresholds = type === 'entitlements.balance.threshold' ? { thresholds: options.thresholds ?? [{ value: 80, type: 'usage_percentage' }, { value: 100, type: 'usage_percentage' }] } : {};
  const rule = await client.notifications.rules.create({ type, name: `rule ${customer.key}`, channels: [channel!.id], ...scope, ...thresholds } as any);
  const subscription = await api.subscribe(customer.key, plan.key, options.billingAnchor ? { billing_anchor: options.billingAnchor } : {});
  await afterStart(subscription);
  return { customer, feature, subscription, channel, rule };
}

/** Usage of the customer (its key is its usage subject). */
export function use(api: BillingApi, w: Watched, count: number): Promise<void> {
  return api.usage(w.customer.key, 'request', count, { route: '/notify' });
}

/** The receiver's distinct deliveries of this rule, once there are `count`. */
export function deliveriesOf(receiver: WebhookReceiver, w: Watched, count: number, timeoutMs = 20_000): Promise<Delivery[]> {
  const mine = () => receiver.distinct().filter((d) => deliveredFor(d, w));
  return waitFor(() => (mine().length >= count ? mine() : undefined), `${count} deliveries for ${w.customer.key}`, timeoutMs);
}

function deliveredFor(d: Delivery, w: Watched): boolean {
  const data = d.payload.data;
  return data?.customer?.key === w.customer.key || data?.customer?.id === w.customer.id;
}

/** The usage thresholds delivered for a customer, in delivery order. */
export function thresholdsOf(receiver: WebhookReceiver, w: Watched): number[] {
  return receiver.distinct().filter((d) => deliveredFor(d, w) && d.type === 'entitlements.balance.threshold').map((d) => d.payload.data.threshold.value);
}

/** Every delivery of the same id carried the same payload (a re-send is the same event). */
export function assertSameOnEveryAttempt(receiver: WebhookReceiver): void {
  const byId = new Map<string, string>();
  for (const d of receiver.deliveries) {
    const body = JSON.stringify(d.payload);
    assert.equal(byId.get(d.id) ?? body, body, `delivery ${d.id} is the same on every attempt`);
    byId.set(d.id, body);
    assert.equal(d.payload.id, d.id, 'the payload id is the webhook id');
  }
}

export { key };

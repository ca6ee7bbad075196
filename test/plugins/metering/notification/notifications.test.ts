/**
 * Usage notifications end to end, driven by `@openmeter/sdk`: channels and rules made and changed through
 * the SDK; entitlement usage posted to the gateway; a local receiver that checks every Standard Webhooks
 * signature counts what arrives. Proves: 80 % and 100 % thresholds fire once per usage period (not per
 * event, not again on the sweeps that follow), usage jumping past both fires only the higher, concurrent
 * ingest crossing a threshold fires it once (run on TOLLGATE_TEST_WORKERS=2 too), a usage-period reset and
 * an issued invoice notify, events are listed with their delivery status, and a receiver that is down is
 * retried until it is back, with the same id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HTTPError, type OpenMeter } from '@openmeter/sdk';
import { waitFor } from '../../../helpers/support.ts';
import { anchorEndingIn, flatCard, sleep, startBillingGateway, type BillingApi } from '../billing/support.ts';
import { inParallel } from '../catalogue-support.ts';
import { request, type TestGateway } from '../../../helpers/gateway.ts';
import {
  assertSameOnEveryAttempt, channelBody, createChannel, deliveriesOf, sdkClient, SECRET, thresholdsOf, use, watchedCustomer, WebhookReceiver,
} from './support.ts';

/** Longer than the evaluator's sweep (3 s): whatever a sweep would add has been added. */
const SWEEPS = 3_500;

let gateway: TestGateway;
let api: BillingApi;
let client: OpenMeter;
let receiver: WebhookReceiver;
before(async () => {
  ({ gateway, api } = await startBillingGateway());
  client = sdkClient(gateway.https, api.token);
  receiver = await WebhookReceiver.start(SECRET);
});
after(async () => {
  await receiver.close();
  await gateway.stop();
});

describe('channels and rules through the SDK', () => {
  test('create, get, list, update, delete; a channel in use cannot be deleted', async () => {
    const channel = (await createChannel(client, { type: 'WEBHOOK', name: 'ops', url: receiver.url, customHeaders: { 'x-team': 'ops' } }))!;
    assert.match(channel.signingSecret!, /^whsec_/, 'a secret is made when none is given');
    assert.equal((await client.notifications.channels.get(channel.id))!.url, receiver.url);
    const updated = (await client.notifications.channels.update(channel.id, channelBody({ type: 'WEBHOOK', name: 'ops2', url: receiver.url })))!;
    assert.equal(updated.name, 'ops2');
    assert.equal(updated.signingSecret, channel.signingSecret, 'an update without a secret keeps it');
    assert.ok((await client.notifications.channels.list())!.items.some((c) => c.id === channel.id));

    const rule = (await client.notifications.rules.create({ type: 'invoice.created', name: 'invoices', channels: [channel.id] }))!;
    assert.deepEqual(rule.channels.map((c) => c.id), [channel.id]);
    assert.equal((await client.notifications.rules.get(rule.id))!.name, 'invoices');
    await assert.rejects(client.notifications.channels.delete(channel.id), (err: unknown) => err instanceof HTTPError && err.status === 409);
    await client.notifications.rules.delete(rule.id);
    await assert.rejects(client.notifications.rules.get(rule.id), (err: unknown) => err instanceof HTTPError && err.status === 404);
    await client.notifications.channels.delete(channel.id);
    assert.ok(!(await client.notifications.channels.list())!.items.some((c) => c.id === channel.id));
  });

  test('bad input is refused with the fields named', async () => {
    const refused = async (call: Promise<unknown>, field: RegExp) =>
      assert.rejects(call, (err: unknown) => err instanceof HTTPError && err.status === 400 && field.test(JSON.stringify(err.getField('invalidParameters')) + err.message));
    await refused(createChannel(client, { type: 'WEBHOOK', name: 'x', url: 'ftp://nope' }), /url/);
    await refused(createChannel(client, { type: 'WEBHOOK', name: 'x', url: receiver.url, signingSecret: 'whsec_short' }), /signingSecret/);
    await refused(createChannel(client, { type: 'WEBHOOK', name: 'x', url: receiver.url, customHeaders: { 'webhook-id': 'x' } }), /customHeaders/);
    await refused(client.notifications.rules.create({ type: 'entitlements.balance.threshold', name: 'x', channels: ['01NOPE'], thresholds: [{ value: 80, type: 'usage_percentage' }] }), /channels/);
    await refused(client.notifications.rules.create({ type: 'entitlements.balance.threshold', name: 'x', channels: [], thresholds: [] } as any), /thresholds/);
  });
});

describe('balance thresholds', () => {
  test('80 % and 100 % of a limit fire once each in the usage period, signed, with exact values', async () => {
    const w = await watchedCustomer(api, client, receiver.url);
    await use(api, w, 7);
    await sleep(SWEEPS);
    assert.deepEqual(thresholdsOf(receiver, w), [], 'nothing below 80 %');
    await use(api, w, 1);
    const [at80] = await deliveriesOf(receiver, w, 1);
    assert.equal(at80.payload.data.threshold.value, 80);
    assert.equal(at80.payload.data.value.usage, 8);
    assert.equal(at80.payload.data.value.balance, 2);
    assert.equal(at80.payload.data.feature.key, w.feature.key);
    await use(api, w, 1);
    await sleep(SWEEPS);
    assert.deepEqual(thresholdsOf(receiver, w), [80], '9 of 10 fires nothing new');
    await use(api, w, 1);
    await deliveriesOf(receiver, w, 2);
    await use(api, w, 3);
    await sleep(SWEEPS);
    assert.deepEqual(thresholdsOf(receiver, w), [80, 100], 'past the limit, nothing fires again');
    assert.equal(receiver.refused, 0, 'every delivery was signed with the channel secret');
    assertSameOnEveryAttempt(receiver);

    const events = (await client.notifications.events.list({ rule: [w.rule.id] }))!;
    assert.equal(events.totalCount, 2);
    for (const event of events.items) {
      assert.equal(event.deliveryStatus[0].state, 'SUCCESS');
      assert.equal(event.deliveryStatus[0].channel.id, w.channel.id);
      assert.equal(event.deliveryStatus[0].attempts.length, 1);
    }
    const one = (await client.notifications.events.get(events.items[0].id))!;
    assert.equal(one.rule.id, w.rule.id);
    // The console's source: the same list on the admin API, read-only.
    const admin = await request(`${gateway.admin}/metering/api/v1/notification/events?rule=${w.rule.id}`);
    assert.equal(admin.status, 200);
    assert.deepEqual(admin.json().items.map((e: any) => e.id), events.items.map((e) => e.id));

    // A resend is the same event again: same id, same payload.
    const before = receiver.deliveries.length;
    await client.notifications.events.resend(one.id);
    await waitFor(() => receiver.deliveries.length > before, 'the resent delivery');
    assert.equal(receiver.deliveries.at(-1)!.id, one.id);
    assertSameOnEveryAttempt(receiver);
    assert.deepEqual(thresholdsOf(receiver, w), [80, 100], 'no new event');
  });

  test('usage jumping past both thresholds fires only 100 %', async () => {
    const w = await watchedCustomer(api, client, receiver.url);
    await use(api, w, 10);
    await deliveriesOf(receiver, w, 1);
    await sleep(SWEEPS);
    assert.deepEqual(thresholdsOf(receiver, w), [100]);
  });

  test('concurrent ingest crossing a threshold fires it once', async () => {
    const w = await watchedCustomer(api, client, receiver.url, { limit: '40', thresholds: [{ value: 100, type: 'usage_percentage' }] });
    await inParallel([...Array(40).keys()], 10, () => use(api, w, 1));
    await deliveriesOf(receiver, w, 1);
    await sleep(SWEEPS);
    assert.deepEqual(thresholdsOf(receiver, w), [100]);
    assert.equal((await client.notifications.events.list({ rule: [w.rule.id] }))!.totalCount, 1);
  });
});

describe('resets and invoices', () => {
  test('a usage-period reset notifies once', async () => {
    const w = await watchedCustomer(api, client, receiver.url, { ruleType: 'entitlements.reset', usagePeriod: 'PT1M', billingAnchor: anchorEndingIn(4_000) });
    const [reset] = await deliveriesOf(receiver, w, 1, 20_000);
    assert.equal(reset.type, 'entitlements.reset');
    assert.equal(reset.payload.data.entitlement.currentUsagePeriod.from, reset.payload.data.entitlement.lastReset);
    await sleep(SWEEPS);
    assert.equal(receiver.distinct().filter((d) => d.type === 'entitlements.reset' && d.payload.data.customer.key === w.customer.key).length, 1);
  });

  test('an issued invoice notifies invoice.created', async () => {
    const w = await watchedCustomer(api, client, receiver.url, { ruleType: 'invoice.created', cards: [flatCard('base', '5')] });
    const [created] = await deliveriesOf(receiver, w, 1);
    assert.equal(created.type, 'invoice.created');
    assert.equal(created.payload.data.status, 'issued');
    assert.equal(created.payload.data.totals.total, '5');
  });
});

test('a receiver that is down is retried until it is back, with the same id', async () => {
  const down = await WebhookReceiver.start(SECRET);
  const url = down.url;
  const port = Number(new URL(url).port);
  await down.close();
  const w = await watchedCustomer(api, client, url);
  await use(api, w, 8);
  const event = await waitFor(async () => (await client.notifications.events.list({ rule: [w.rule.id] }))!.items[0], 'the 80 % event');
  await waitFor(async () => {
    const status = (await client.notifications.events.get(event.id))!.deliveryStatus[0];
    return status.state === 'SENDING' && status.attempts.length >= 2;
  }, 'two failed attempts', 15_000);
  const back = await WebhookReceiver.start(SECRET, port);
  try {
    const [delivered] = await deliveriesOf(back, w, 1, 30_000);
    assert.equal(delivered.id, event.id, 'the webhook id is the event id');
    await waitFor(async () => (await client.notifications.events.get(event.id))!.deliveryStatus[0].state === 'SUCCESS', 'the delivery status');
    assertSameOnEveryAttempt(back);
  } finally {
    await back.close();
  }
});

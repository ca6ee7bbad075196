/**
 * Deliveries survive the gateway: an event made while its receiver is down is still pending when the
 * gateway stops (SIGTERM) or is killed (kill -9); after a restart on the same data directory, with the
 * receiver back, it arrives, under the event's id, and anything delivered twice carries that same id.
 * The gateway runs as its own process (spawned), as in production.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { spawnGateway, tempDir, type SpawnedGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { BillingApi, billingConfig } from '../billing/support.ts';
import { crash } from '../catalogue-support.ts';
import { assertSameOnEveryAttempt, deliveriesOf, sdkClient, SECRET, use, watchedCustomer, WebhookReceiver } from './support.ts';

const running: SpawnedGateway[] = [];
after(async () => {
  for (const g of running) await crash(g);
});

/** A port nothing listens on now, where the receiver comes back later. */
async function downReceiverUrl(): Promise<{ url: string; port: number }> {
  const probe = await WebhookReceiver.start(SECRET);
  await probe.close();
  return { url: probe.url, port: Number(new URL(probe.url).port) };
}

for (const stop of ['SIGTERM', 'SIGKILL'] as const) {
  test(`a delivery pending at ${stop} is delivered after the restart, under the same id`, { timeout: 90_000 }, async () => {
    const dataDir = tempDir();
    const config = billingConfig();
    let gateway = await spawnGateway(config, { dataDir });
    running.push(gateway);
    let api = await BillingApi.connect(gateway.https);
    let client = sdkClient(gateway.https, api.token);
    const { url, port } = await downReceiverUrl();
    const w = await watchedCustomer(api, client, url);
    await use(api, w, 8);
    const event = await waitFor(async () => (await client.notifications.events.list({ rule: [w.rule.id] }))!.items[0], 'the 80 % event');
    assert.notEqual(event.deliveryStatus[0].state, 'SUCCESS');

    if (stop === 'SIGKILL') await crash(gateway);
    else {
      gateway.kill('SIGTERM');
      assert.equal(await gateway.exited, 0);
    }
    const receiver = await WebhookReceiver.start(SECRET, port);
    try {
      gateway = await spawnGateway(config, { dataDir });
      running.push(gateway);
      api = await BillingApi.connect(gateway.https);
      client = sdkClient(gateway.https, api.token);
      // A claim held by the killed process is taken over once its lease runs out (the attempt timeout and a margin).
      const [delivered] = await deliveriesOf(receiver, w, 1, 40_000);
      assert.equal(delivered.id, event.id);
      assert.equal(delivered.payload.data.threshold.value, 80);
      await waitFor(async () => (await client.notifications.events.get(event.id))!.deliveryStatus[0].state === 'SUCCESS', 'SUCCESS after the restart');
      assert.equal(receiver.distinct().length, 1, 'one event, however often it was sent');
      assert.equal(receiver.refused, 0);
      assertSameOnEveryAttempt(receiver);
      assert.equal((await client.notifications.events.list({ rule: [w.rule.id] }))!.totalCount, 1, 'the restart made no second event');
    } finally {
      await receiver.close();
    }
  });
}

/**
 * The scheduler and exactly-once issuing, on the real components without a gateway (a LevelDB store,
 * the metering service, billing over it), so time can be moved forward by passing `now`:
 * - after ten periods of downtime one pass catches up: ten invoices, in order, contiguous periods,
 *   sequential numbers, and a second pass adds nothing;
 * - two billing instances sharing the store (as two processes do) issue each period once, whether
 *   their schedulers run at the same time or they race to issue the same invoice.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { Billing } from '../../../../plugins/metering/billing/billing.ts';
import { flatCard, planBody, unitCard } from './support.ts';
import { parsePlan } from '../../../../plugins/metering/billing/productcatalog/plan-model.ts';
import { billingPeriod } from '../../../../plugins/metering/billing/subscription/subscriptions.ts';
import { prepareEvents } from '../../../../plugins/metering/ingest/events.ts';
import { meterDefinitionFrom } from '../../../../plugins/metering/meter/meter-model.ts';
import { MeteringService } from '../../../../plugins/metering/service.ts';
import { MeterUsage } from '../../../../plugins/metering/query/usage.ts';
import { LevelStore } from '../../../../src/store/level.ts';
import { tempDir } from '../../../helpers/gateway.ts';

const log = pino({ level: 'silent' });
const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function open(): Promise<{ service: MeteringService; store: LevelStore }> {
  const store = new LevelStore(`${tempDir()}/store`);
  await store.open();
  const service = new MeteringService({ store: store.namespace('plugin.metering'), log });
  await service.open();
  closers.push(async () => {
    await service.close();
    await store.close();
  });
  return { service, store };
}

function billingOver(store: LevelStore, service: MeteringService): Billing {
  const billing = new Billing(store.namespace('plugin.metering').namespace('billing'), new MeterUsage(service), log);
  billing.scheduler.collectionMs = 1_000;
  return billing;
}

/** A customer on a PT1M plan pricing api calls by unit plus a fee in arrears (a line every period), with `events` calls in its first period. */
async function setUp(service: MeteringService, billing: Billing, events: number) {
  await service.catalogue.createMeter(meterDefinitionFrom({ key: 'calls', event_type: 'call', aggregation: 'count' }));
  const feature = await billing.features.create({ key: 'calls', name: 'Calls', description: null, labels: {}, meter: { idOrKey: 'calls', filters: {} } });
  const plan = await billing.plans.create(parsePlan(planBody('usage', [unitCard(feature.key, '0.1'), flatCard('base', '1', 'in_arrears')])).definition!);
  await billing.plans.publish(plan.id);
  const customer = await billing.customers.create({ key: 'acme', name: 'Acme', description: null, labels: {}, usage_attribution: { subject_keys: [] }, currency: null, primary_email: null });
  const subscription = await billing.subscriptions.create({ key: customer.key }, { key: 'usage' });
  const time = new Date(Math.ceil(Date.parse(subscription.active_from) / 1000) * 1000 + 1000).toISOString();
  const raw = Array.from({ length: events }, () => ({ specversion: '1.0', id: randomUUID(), source: 'test', type: 'call', subject: 'acme', time }));
  const now = Date.now();
  await service.ingest(prepareEvents(raw, true, { now, retentionStart: Math.floor(now / 1000) - 86_400, retentionDays: 1 }), { queue_max_events: 1000 } as any);
  return subscription;
}

describe('billing scheduler', () => {
  test('after ten periods of downtime one pass issues the ten invoices in order; a second pass adds none', async () => {
    const { service, store } = await open();
    const billing = billingOver(store, service);
    const subscription = await setUp(service, billing, 7);
    const later = Date.parse(subscription.active_from) + 10 * 60_000 + 5_000;
    await billing.scheduler.pass(later);
    const invoices = await billing.invoices.list('acme');
    assert.equal(invoices.length, 10);
    invoices.forEach((invoice, i) => {
      const period = billingPeriod(subscription, i)!;
      assert.deepEqual([Date.parse(invoice.period.from), Date.parse(invoice.period.to)], [period.from, period.to]);
      assert.equal(invoice.number, `INV-${String(i + 1).padStart(6, '0')}`);
      // The calls of the first period; later periods have no usage line, only the fee.
      assert.deepEqual(invoice.lines.map((l) => [l.rate_card_key, l.quantity]), i === 0 ? [['calls', '7'], ['base', '1']] : [['base', '1']]);
    });
    assert.equal(invoices[0].totals.total, '1.7');
    await billing.scheduler.pass(later + 1_000);
    assert.equal((await billing.invoices.list('acme')).length, 10);
  });

  test('two billing instances on one store: concurrent passes and racing issues give one invoice per period', async () => {
    const { service, store } = await open();
    const first = billingOver(store, service);
    const second = billingOver(store, service);
    const subscription = await setUp(service, first, 3);
    const later = Date.parse(subscription.active_from) + 3 * 60_000 + 5_000;
    // The lease lets one of them work; both passes finish with every due invoice issued once.
    await Promise.all([first.scheduler.pass(later), second.scheduler.pass(later)]);
    assert.equal((await first.invoices.list('acme')).length, 3);
    // Without the lease (two issuers of the same invoice at once): exactly one writes it.
    const period = billingPeriod(subscription, 3)!;
    const draft = await first.invoices.compute(subscription, period, 'in_arrears', 'issued');
    const results = await Promise.all([first, second, first, second].map((b) => b.invoices.issue(draft, async () => undefined)));
    assert.deepEqual(results.filter(Boolean).length, 1);
    const all = await second.invoices.list('acme');
    assert.equal(all.length, 4);
    assert.equal(new Set(all.map((i) => i.number)).size, 4);
  });
});

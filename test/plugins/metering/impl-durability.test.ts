/**
 * State that must survive: restart on the same data directory (events, meters, dedupe keys, sequence),
 * backfill of a new meter exactly once while events keep arriving, a backfill interrupted by a stop
 * and resumed by the next start, the retention purge of expired events and their aggregates, and
 * aggregates stored as doubles by earlier versions.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { request, startGateway, tempDir, TEST_DATABASE } from '../../helpers/gateway.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { decodeEvents, prepareEvents } from '../../../plugins/metering/ingest/events.ts';
import { parseQuery } from '../../../plugins/metering/query/query-request.ts';
import { MeteringService } from '../../../plugins/metering/service.ts';
import { meterDefinitionFrom } from '../../../plugins/metering/meter/meter-model.ts';

const PATH = '/v3/metering';

function gatewayConfig(metering: Record<string, unknown> = {}) {
  return {
    routes: [{ name: 'metering', paths: [PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true, ...metering } }] }],
  };
}

function ce(fields: Record<string, unknown> = {}) {
  return { specversion: '1.0', id: randomUUID(), source: 'impl-durable', type: 'durable', subject: 'acme', time: new Date().toISOString(), ...fields };
}

const post = (base: string, path: string, body: unknown, type = 'application/json') =>
  request(base + PATH + path, { method: 'POST', headers: { 'content-type': type }, body: JSON.stringify(body) });

async function total(base: string, meter: string): Promise<number> {
  const res = await post(base, `/meters/${meter}/query`, {});
  assert.equal(res.status, 200, res.text);
  const rows = res.json().data;
  return rows.length ? Number(rows[0].value) : 0;
}

/** The metering service alone on a LevelDB store in `dir` (no gateway), as the plugin runs it. */
async function openService(dir: string, options: ConstructorParameters<typeof MeteringService>[1]) {
  const store = new LevelStore(dir);
  await store.open();
  const service = new MeteringService({ store: store.namespace('plugin.metering'), log: pino({ level: 'silent' }) }, options);
  await service.open();
  return { store, service };
}

/** Set where a test writes an earlier version's rows into the LevelDB files itself. */
const levelFiles = TEST_DATABASE === 'postgres' && 'writes rows of an earlier version into the LevelDB files';

describe('metering durability', () => {
  test('events, meters and dedupe keys survive a restart on the same data directory', async () => {
    const dataDir = tempDir();
    const resent = ce({ id: 'kept-once' });
    let gw = await startGateway(gatewayConfig(), { dataDir });
    assert.equal((await post(gw.http, '/meters', { key: 'durable_count', name: 'count', event_type: 'durable', aggregation: 'count' })).status, 201);
    assert.equal((await post(gw.http, '/events', [resent, ce(), ce()], 'application/cloudevents-batch+json')).status, 202);
    await gw.stop();

    gw = await startGateway(gatewayConfig(), { dataDir });
    try {
      assert.equal(await total(gw.http, 'durable_count'), 3);
      assert.equal((await post(gw.http, '/events', [resent, ce()], 'application/cloudevents-batch+json')).status, 202);
      assert.equal(await total(gw.http, 'durable_count'), 4);
      const listed = await request(`${gw.http}${PATH}/events?type=durable`, {});
      assert.equal(listed.json().data.length, 4, 'new events do not overwrite old ones (sequence continues)');
    } finally {
      await gw.stop();
    }
  });

  test('aggregate rows written before rows carried totals are still read and updated right', { skip: levelFiles }, async () => {
    const dataDir = tempDir();
    // Hourly from 00:30 local time on 2024-03-09 (PST) to 22:30 on 2024-03-10 (PDT): across a DST change, all inside `day`.
    const events = Array.from({ length: 46 }, (_, i) => ce({ time: new Date(Date.UTC(2024, 2, 9, 8, 30) + i * 3_600_000).toISOString(), subject: `s${i % 4}`, data: { n: i } }));
    const day = { from: '2024-03-09T00:00:00-08:00', to: '2024-03-11T00:00:00-07:00', granularity: 'P1D', time_zone: 'America/Los_Angeles' };
    const queries = [day, { ...day, group_by_dimensions: ['subject'] }, { from: day.from, to: day.to }];
    const answers = async (base: string) => Promise.all(queries.map(async (q) => (await post(base, '/meters/old_rows_sum/query', q)).json().data));
    let gw = await startGateway(gatewayConfig({ retention_days: 3650 }), { dataDir });
    let expected;
    try {
      assert.equal((await post(gw.http, '/meters', { key: 'old_rows_sum', name: 'sum', event_type: 'durable', aggregation: 'sum', value_property: '$.n' })).status, 201);
      assert.equal((await post(gw.http, '/events', events.slice(0, 40), 'application/cloudevents-batch+json')).status, 202);
      expected = await answers(gw.http);
      assert.equal(expected[2][0].value, String((39 * 40) / 2));
    } finally {
      await gw.stop();
    }

    // The previous row format: the series only, no leading total.
    const store = new LevelStore(`${dataDir}/store`);
    await store.open();
    const space = store.namespace('plugin.metering');
    const rewritten: { type: 'put'; key: string; value: string }[] = [];
    for await (const [key, value] of space.scan({ prefix: 'r/' })) rewritten.push({ type: 'put', key, value: value.slice(value.indexOf('|') + 1) });
    assert.ok(rewritten.length > 0 && rewritten.every((op) => op.value.startsWith('{')));
    await space.batch(rewritten);
    await store.close();

    gw = await startGateway(gatewayConfig({ retention_days: 3650 }), { dataDir });
    try {
      assert.deepEqual(await answers(gw.http), expected);
      assert.equal((await post(gw.http, '/events', events.slice(40), 'application/cloudevents-batch+json')).status, 202);
      const [days, , whole] = await answers(gw.http);
      assert.equal(whole[0].value, String((45 * 46) / 2));
      assert.equal(days.reduce((sum: number, r: { value: string }) => sum + Number(r.value), 0), (45 * 46) / 2);
    } finally {
      await gw.stop();
    }
  });

  test('a meter created while events keep arriving counts every stored event exactly once', async () => {
    const gw = await startGateway(gatewayConfig());
    try {
      const batch = (n: number) => Array.from({ length: n }, () => ce({ type: 'busy', data: { v: 1 } }));
      for (let i = 0; i < 12; i++) assert.equal((await post(gw.http, '/events', batch(1000), 'application/cloudevents-batch+json')).status, 202);
      let sent = 12_000;
      const producing = (async () => {
        for (let i = 0; i < 30; i++) {
          const res = await post(gw.http, '/events', batch(100), 'application/cloudevents-batch+json');
          assert.equal(res.status, 202);
          sent += 100;
        }
      })();
      const created = await post(gw.http, '/meters', { key: 'busy_sum', name: 'sum', event_type: 'busy', aggregation: 'sum', value_property: '$.v' });
      assert.equal(created.status, 201);
      await producing;
      assert.equal(await total(gw.http, 'busy_sum'), sent);
      assert.equal(sent, 15_000);
    } finally {
      await gw.stop();
    }
  });

  test('a backfill interrupted by a stop resumes on the next start and counts each event once', async () => {
    const dir = tempDir();
    const open = () => openService(dir, { backfillChunk: 100 });
    let { store, service } = await open();
    const body = Buffer.from(JSON.stringify(Array.from({ length: 2_000 }, () => ce({ type: 'resume' }))));
    const { events, batch } = decodeEvents('application/cloudevents-batch+json', body);
    const config = { queue_max_events: 100_000 } as Parameters<MeteringService['ingest']>[1];
    await service.ingest(prepareEvents(events, batch, { now: Date.now(), retentionStart: 0, retentionDays: 730 }), config);
    const meter = await service.catalogue.createMeter(meterDefinitionFrom({ key: 'resume_count', name: 'n', event_type: 'resume', aggregation: 'count' }));
    await service.close();
    await store.close();

    ({ store, service } = await open());
    try {
      const record = service.catalogue.find('resume_count');
      assert.ok(record.backfill, 'the backfill was still in progress when stopped');
      assert.ok(record.backfill.cursor > 0, 'and had committed some progress');
      const compiled = service.meters.compiledOf(record);
      const result = await service.query(record, parseQuery({}, compiled).query!, 30_000);
      assert.equal(result.data[0].value, '2000');
      assert.equal(service.catalogue.find(meter.id).backfill, null);
    } finally {
      await service.close();
      await store.close();
    }
  });

  test('the dedupe filter in front of the store: re-sent events count once before, during and after its loads, across a restart', async () => {
    const dir = tempDir();
    const config = { queue_max_events: 100_000 } as Parameters<MeteringService['ingest']>[1];
    // A filter sized for 100 hashes: the first 300 events make it reload larger while events keep coming.
    const open = () => openService(dir, { dedupeFilterCapacity: 100 });
    const send = (service: MeteringService, events: unknown[]) =>
      service.ingest(prepareEvents(events, true, { now: Date.now(), retentionStart: 0, retentionDays: 730 }), config);
    const count = async (service: MeteringService) => {
      const record = service.catalogue.find('filtered_count');
      return Number((await service.query(record, parseQuery({}, service.meters.compiledOf(record)).query!, 30_000)).data[0]?.value ?? 0);
    };
    const sent = Array.from({ length: 600 }, () => ce({ type: 'filtered' }));
    let { store, service } = await open();
    try {
      await service.catalogue.createMeter(meterDefinitionFrom({ key: 'filtered_count', name: 'n', event_type: 'filtered', aggregation: 'count' }));
      await service.writer.dedupeFilter.loaded();
      for (let i = 0; i < 300; i += 20) await send(service, sent.slice(i, i + 20));
      // Re-sent while the larger filter loads, then after.
      await Promise.all([send(service, sent.slice(0, 300)), send(service, sent.slice(300, 400))]);
      await service.writer.dedupeFilter.loaded();
      await send(service, sent.slice(0, 400));
      assert.equal(await count(service), 400);
    } finally {
      await service.close();
      await store.close();
    }

    ({ store, service } = await open());
    try {
      // Right after the start the filter may still be loading; then it is loaded.
      await send(service, sent.slice(0, 500));
      assert.equal(await count(service), 500);
      await service.writer.dedupeFilter.loaded();
      await send(service, sent);
      assert.equal(await count(service), 600);
    } finally {
      await service.close();
      await store.close();
    }
  });

  test('expired events and their fully expired buckets are purged in the background', async () => {
    const dataDir = tempDir();
    let gw = await startGateway(gatewayConfig({ retention_days: 30 }), { dataDir });
    const old = ce({ type: 'aging', time: new Date(Date.now() - 20 * 86_400_000).toISOString() });
    const recent = ce({ type: 'aging', time: new Date(Date.now() - 86_400_000).toISOString() });
    assert.equal((await post(gw.http, '/meters', { key: 'aging_count', name: 'n', event_type: 'aging', aggregation: 'count' })).status, 201);
    assert.equal((await post(gw.http, '/events', [old, recent], 'application/cloudevents-batch+json')).status, 202);
    assert.equal(await total(gw.http, 'aging_count'), 2);
    await gw.stop();

    // Retention lowered by the operator: the purge that runs shortly after start removes the old event.
    gw = await startGateway(gatewayConfig({ retention_days: 10 }), { dataDir });
    try {
      const deadline = Date.now() + 15_000;
      while ((await total(gw.http, 'aging_count')) !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.equal(await total(gw.http, 'aging_count'), 1);
      const listed = (await request(`${gw.http}${PATH}/events?type=aging`, {})).json().data;
      assert.deepEqual(listed.map((i: any) => i.event.id), [recent.id]);
      const again = await post(gw.http, '/events', old, 'application/cloudevents+json');
      assert.equal(again.status, 400, 'the expired event is now outside retention');
    } finally {
      await gw.stop();
    }
  });
  test('aggregates stored as doubles by earlier versions read as before, and exact values add to them', { skip: levelFiles }, async () => {
    const dataDir = tempDir();
    let gw = await startGateway(gatewayConfig(), { dataDir });
    assert.equal((await post(gw.http, '/meters', { key: 'legacy_sum', name: 'sum', event_type: 'legacy', aggregation: 'sum', value_property: '$.value' })).status, 201);
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000);
    const at = (s: number) => new Date(minute.getTime() + s * 1000).toISOString();
    const events = [ce({ type: 'legacy', time: at(1), data: { value: 3 } }), ce({ type: 'legacy', time: at(2), data: { value: '5.001' } })];
    assert.equal((await post(gw.http, '/events', events, 'application/cloudevents-batch+json')).status, 202);
    // Read once, so that the states are stored (on worker nodes, acknowledged events wait in an inbox until aggregated).
    assert.equal(await total(gw.http, 'legacy_sum'), 8.001);
    await gw.stop();
    // What the float states held: the sum 5.001 + 3 in binary floating point, the values as JSON numbers.
    const store = new LevelStore(`${dataDir}/store`);
    await store.open();
    const space = store.namespace('plugin.metering');
    const rewrites: { type: 'put'; key: string; value: string }[] = [];
    for (const prefix of ['a/', 'r/']) {
      for await (const [key, value] of space.scan({ prefix })) {
        rewrites.push({ type: 'put', key, value: value.replaceAll('"8.001"', String(5.001 + 3)).replaceAll('"5.001"', '5.001') });
      }
    }
    assert.ok(rewrites.some((w) => w.value.includes('8.001000000000001')), 'the stored states were rewritten as doubles');
    await space.batch(rewrites);
    await store.close();

    gw = await startGateway(gatewayConfig(), { dataDir });
    try {
      const query = async (body: Record<string, unknown>) => (await post(gw.http, '/meters/legacy_sum/query', body)).json().data.map((r: { value: string }) => r.value);
      assert.deepEqual(await query({}), ['8.001000000000001']);
      assert.deepEqual(await query({ granularity: 'PT1M' }), ['8.001000000000001']);
      assert.equal((await post(gw.http, '/events', ce({ type: 'legacy', time: at(3), data: { value: '0.999' } }))).status, 202);
      assert.deepEqual(await query({ granularity: 'P1D' }), ['9.000000000000001']);
    } finally {
      await gw.stop();
    }
  });
});

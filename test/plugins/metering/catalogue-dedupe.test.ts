/**
 * OpenMeter catalogue §7.2 (deduplication), ported to Tollgate's v3 API. INTERFACE §5: events are unique by
 * (source, id) for the whole retention period; a re-sent event is acknowledged (202) and counted once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CloudEvent, HTTP } from 'cloudevents';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, DAY, event, inParallel, MeteringApi, meteringConfig, sleep, totalOf, unique } from './catalogue-support.ts';

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(
    meteringConfig({ meters: [{ key: 'dedupe', name: 'Dedupe', event_type: 'dedupe', aggregation: 'count' }] }),
  );
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

async function countMeter(eventType: string): Promise<string> {
  await api.createMeterOk({ key: eventType, name: eventType, event_type: eventType, aggregation: 'count' });
  return eventType;
}

/**
 * The settled total of a meter whose expected value is small: waits for at least `atLeast`, then gives
 * a late (wrongly double-counted) event a moment to show up before the caller asserts the exact value.
 */
async function settledTotal(key: string, atLeast: number): Promise<number> {
  await api.totalWhen(key, atLeast);
  await sleep(200);
  return totalOf(await api.queryOk(key));
}

describe('§7.2 deduplication', () => {
  test('DED-01 1000 posts of one (source, id) at random times are all accepted and count once', async () => {
    const now = Date.now();
    const sends = Array.from({ length: 1000 }, (_, i) => i);
    await inParallel(sends, 16, async () => {
      const ce = new CloudEvent({
        id: '52f44f66-020f-4fa9-a733-102a8ef6f515',
        source: 'my-app',
        type: 'dedupe',
        subject: 'customer-1',
        time: new Date(now + (Math.random() * 2 - 1) * 30 * DAY).toISOString(),
        data: {},
      });
      const message = HTTP.structured(ce);
      const res = await api.send('POST', '/events', String(message.body), message.headers as Record<string, string>);
      assert.equal(res.status, 202, res.text);
    });
    assert.equal(await settledTotal('dedupe', 1), 1);
    const listed = await api.listAllEvents({ id: '52f44f66-020f-4fa9-a733-102a8ef6f515', source: 'my-app' });
    assert.equal(listed.length, 1, 'stored once');
  });

  test('DED-02 the same (source, id) with another type is dropped: the first type keeps it', async () => {
    const first = await countMeter(unique('some_type'));
    const second = await countMeter(unique('some_other_type'));
    const id = unique('id');
    await api.ingestOk(event({ id, source: 'source', type: first }));
    await api.ingestOk(event({ id, source: 'source', type: second }));
    assert.equal(await settledTotal(first, 1), 1);
    assert.equal(totalOf(await api.queryOk(second)), 0);
  });

  test('DED-03 the same id from two sources is two events', async () => {
    const meter = await countMeter(unique('ded03'));
    const id = unique('id');
    await api.ingestOk(event({ id, source: 'a', type: meter }));
    await api.ingestOk(event({ id, source: 'b', type: meter }));
    assert.equal(await settledTotal(meter, 2), 2);
  });

  test('DED-04 two identical events inside one batch count once', async () => {
    const meter = await countMeter(unique('ded04'));
    const twin = event({ type: meter });
    await api.ingestOk([twin, { ...twin }]);
    assert.equal(await settledTotal(meter, 1), 1);
  });

  test('DED-05 first write wins: id X with 50 then 100 sums to 50', async () => {
    const meter = unique('ded05');
    await api.createMeterOk({ key: meter, name: meter, event_type: meter, aggregation: 'sum', value_property: '$.value' });
    const id = unique('x');
    await api.ingestOk(event({ id, source: 'ded05', type: meter, data: { value: 50 } }));
    await api.ingestOk(event({ id, source: 'ded05', type: meter, data: { value: 100 } }));
    assert.equal(await settledTotal(meter, 50), 50);
    const [item] = await api.eventsWhen({ id, source: 'ded05' }, 1);
    assert.deepEqual(item.event.data, { value: 50 }, 'the stored event is the first one');
  });

  test('DED-06 a rejected request claims no id: the corrected event with the same id is counted', async () => {
    const meter = await countMeter(unique('ded06'));
    const id = unique('y');
    const invalid = event({ id, source: 'ded06', type: meter });
    delete invalid.subject;
    assertProblem(await api.ingest(invalid), 400, 'subject');
    await api.ingestOk(event({ id, source: 'ded06', type: meter }));
    assert.equal(await settledTotal(meter, 1), 1);
  });

  test('a duplicate across a single request and a later batch counts once; new ids in the batch count', async () => {
    const meter = await countMeter(unique('cross'));
    const first = event({ type: meter });
    await api.ingestOk(first);
    await api.ingestOk([{ ...first }, event({ type: meter }), event({ type: meter })]);
    assert.equal(await settledTotal(meter, 3), 3);
  });

  test('duplicates across concurrent large batches (committed back to back) count once', async () => {
    const meter = await countMeter(unique('overlap'));
    // Request k carries ids [500k, 500k + 1000): each overlaps its neighbours by half, 4500 distinct ids.
    const requests = Array.from({ length: 8 }, (_, k) =>
      Array.from({ length: 1000 }, (_, i) => event({ id: `overlap-${500 * k + i}`, source: 'overlap', type: meter })),
    );
    await Promise.all(requests.map((batch) => api.ingestOk(batch)));
    assert.equal(await settledTotal(meter, 4500), 4500);
  });

  test('a meter created after the events counts each stored event once', async () => {
    const type = unique('late');
    const sameEvent = event({ type });
    await api.ingestOk([sameEvent, event({ type })]);
    await api.ingestOk(sameEvent);
    await countMeter(type);
    assert.equal(await settledTotal(type, 2), 2);
  });
});

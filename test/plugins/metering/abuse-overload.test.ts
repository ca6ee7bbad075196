/**
 * Overload: when the ingest queue is full the answer is 503 with Retry-After, and nothing is
 * dropped silently: every acknowledged event counts exactly once, no refused event is stored, and the
 * refused ones are accepted when retried.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, event, inParallel, MeteringApi, meteringConfig, sleep, totalOf } from './catalogue-support.ts';

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(
    meteringConfig({
      // A tiny queue and a commit that waits for company make the queue fill up under 64 concurrent producers.
      metering: { queue_max_events: 20, batch_max_wait_ms: 50 },
      meters: [{ key: 'overload', name: 'Overload', event_type: 'overload', aggregation: 'count' }],
    }),
  );
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

test('a full queue answers 503 with Retry-After; acknowledged events count once, refused ones are not stored', async () => {
  const batches = Array.from({ length: 150 }, () => Array.from({ length: 5 }, () => event({ type: 'overload' })));
  const refused: typeof batches = [];
  let acknowledged = 0;
  await inParallel(batches, 64, async (batch) => {
    const res = await api.ingest(batch);
    if (res.status === 503) {
      assertProblem(res, 503);
      assert.match(String(res.headers['retry-after']), /^\d+$/, 'Retry-After in seconds');
      refused.push(batch);
    } else {
      assert.equal(res.status, 202, res.text);
      acknowledged += batch.length;
    }
  });
  assert.ok(refused.length > 0, 'the queue filled up');
  assert.equal(await api.totalWhen('overload', acknowledged), acknowledged);
  await sleep(200);
  assert.equal(totalOf(await api.queryOk('overload')), acknowledged, 'nothing refused was counted');
  const stored = await api.listAllEvents({ type: 'overload' });
  assert.equal(stored.length, acknowledged, 'nothing refused was stored');

  for (const batch of refused) {
    let res = await api.ingest(batch);
    while (res.status === 503) {
      await sleep(20);
      res = await api.ingest(batch);
    }
    assert.equal(res.status, 202, res.text);
  }
  const all = batches.length * 5;
  assert.equal(await api.totalWhen('overload', all), all);
});

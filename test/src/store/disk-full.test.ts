/**
 * The disk under the embedded store fills up (a small tmpfs of the test's own). Metering ingest answers
 * a clear 503 for what it cannot store, the gateway stays up and keeps proxying, and every event it
 * acknowledged is there, exactly, after the space is freed and the gateway restarted. Before, a write
 * torn half-way by the full disk made LevelDB drop, at the next start, events acknowledged after it.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { request, spawnGateway, startUpstream, type SpawnedGateway } from '../../helpers/gateway.ts';
import { mountSmallDisk } from '../../helpers/small-disk.ts';
import { assertProblem, event, MeteringApi, meteringConfig, totalOf } from '../../plugins/metering/catalogue-support.ts';

const disk = mountSmallDisk(16 << 20);
const skip = typeof disk === 'string' ? disk : false;
const cleanups: (() => Promise<unknown> | void)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  if (typeof disk !== 'string') disk.unmount();
});

async function stopped(gateway: SpawnedGateway): Promise<number | null> {
  gateway.kill('SIGTERM');
  return gateway.exited;
}

describe('a full disk under metering ingest', { skip }, () => {
  for (const workers of [1, 2]) {
    test(`${workers} process(es): 503 while full, nothing acknowledged lost, ingest again after a restart`, async () => {
      if (typeof disk === 'string') return;
      const upstream = await startUpstream();
      cleanups.push(() => upstream.close());
      const config = {
        ...meteringConfig({ gateway: { worker_processes: workers }, meters: [{ key: 'filled', name: 'Filled', event_type: 'fill', aggregation: 'count' }] }),
        services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
      };
      const dataDir = `${disk.dir}/data-${workers}`;
      const first = await spawnGateway(config, { dataDir });
      cleanups.push(() => first.kill('SIGKILL'));
      const api = await MeteringApi.connect(first.https);

      disk.fill(512 << 10);
      cleanups.push(() => disk.free());
      const acknowledged: string[] = [];
      let refused;
      for (let batch = 0; batch < 100 && !refused; batch++) {
        const events = Array.from({ length: 100 }, (_, i) => event({ type: 'fill', id: `${batch}-${i}`, data: { padding: 'x'.repeat(200) } }));
        const res = await api.ingest(events);
        if (res.status === 202) acknowledged.push(...events.map((e) => e.id));
        else refused = res;
      }
      assert.ok(refused, 'the disk filled up');
      const problem = assertProblem(refused, 503);
      assert.match(problem.detail, /storage is full or failing: nothing of this request was stored/);
      assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After');
      assert.ok(acknowledged.length > 0, 'events were acknowledged before the disk filled up');

      assert.equal((await request(`${first.http}/echo/still-up`)).status, 200, 'the gateway still proxies');
      // Freed, the store still refuses writes: what LevelDB's log holds after a torn write would be dropped at the next start.
      disk.free();
      assertProblem(await api.ingest([event({ type: 'fill', id: 'after-freeing' })]), 503);
      assert.equal(await stopped(first), 0, 'a stop still exits 0');

      const second = await spawnGateway(config, { dataDir });
      cleanups.push(() => second.kill('SIGKILL'));
      const restarted = await MeteringApi.connect(second.https);
      await restarted.ingestOk([event({ type: 'fill', id: 'after-restart' })]);
      const stored = (await restarted.listAllEvents({ type: 'fill' })).map((item) => item.event.id as string);
      assert.deepEqual(stored.sort(), [...acknowledged, 'after-restart'].sort(), 'exactly the acknowledged events are stored');
      assert.equal(await restarted.totalWhen('filled', stored.length), stored.length);
      assert.equal(totalOf(await restarted.queryOk('filled')), acknowledged.length + 1);
      assert.equal(await stopped(second), 0);
    });
  }
});

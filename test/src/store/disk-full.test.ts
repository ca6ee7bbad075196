/**
 * The disk under the embedded store fills up (a small tmpfs of the test's own). Metering ingest answers
 * a clear 503 for what it cannot store, the gateway stays up and keeps proxying, and every event it
 * acknowledged is there, exactly, after the space is freed and the gateway restarted. Before, a write
 * torn half-way by the full disk made LevelDB drop, at the next start, events acknowledged after it.
 * Request metering: once its events cannot be stored, the metered routes answer 503 instead of serving
 * unbilled (before, they kept serving and the events were dropped); other routes keep serving.
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

/** The gateway's echo service on `upstream`: `/echo` plain, `/metered` with request metering by the `x-customer` header. */
function withEcho(config: Record<string, unknown>, upstreamUrl: string): Record<string, unknown> {
  const metering = { name: 'metering-and-billing', config: { subject: { look_up_value_in: 'header', field: 'x-customer' }, queue: { max_coalescing_delay: 0 } } };
  return {
    ...config,
    services: [
      { name: 'echo', url: upstreamUrl, routes: [{ name: 'echo', paths: ['/echo'] }] },
      { name: 'metered', url: upstreamUrl, routes: [{ name: 'metered', paths: ['/metered'] }], plugins: [metering] },
    ],
  };
}

describe('a full disk under metering ingest', { skip }, () => {
  for (const workers of [1, 2]) {
    test(`${workers} process(es): 503 while full, nothing acknowledged lost, ingest again after a restart`, async () => {
      if (typeof disk === 'string') return;
      const upstream = await startUpstream();
      cleanups.push(() => upstream.close());
      const config = withEcho(meteringConfig({ gateway: { worker_processes: workers }, meters: [{ key: 'filled', name: 'Filled', event_type: 'fill', aggregation: 'count' }] }), upstream.url);
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

describe('a full disk under request metering', { skip }, () => {
  for (const workers of [1, 2]) {
    test(`${workers} process(es): metered routes answer 503 once usage cannot be stored; others keep serving`, async () => {
      if (typeof disk === 'string') return;
      const upstream = await startUpstream();
      cleanups.push(() => upstream.close());
      const config = withEcho(meteringConfig({ gateway: { worker_processes: workers } }), upstream.url);
      const dataDir = `${disk.dir}/metered-${workers}`;
      const first = await spawnGateway(config, { dataDir });
      cleanups.push(() => first.kill('SIGKILL'));
      const metered = () => request(`${first.http}/metered/call`, { headers: { 'x-customer': 'acme' } });
      const servedBeforeFull = (await metered()).headers['x-kong-request-id'];

      disk.fill(64 << 10);
      cleanups.push(() => disk.free());
      let refused;
      for (let i = 0; i < 5000 && !refused; i++) {
        const res = await metered();
        if (res.status !== 200) refused = res;
      }
      assert.ok(refused, 'metered requests are refused once their usage cannot be stored');
      assert.equal(refused.status, 503, refused.text);
      assert.match(refused.json().message, /usage cannot be recorded right now \(storage is full or failing\)/);
      assert.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After');
      // Each worker's queue finds out at its next hand-over: within a few requests, every one is refused.
      let refusedInARow = 0;
      for (let i = 0; i < 200 && refusedInARow < 5; i++) refusedInARow = (await metered()).status === 503 ? refusedInARow + 1 : 0;
      assert.equal(refusedInARow, 5, 'refused by every process');
      assert.equal((await request(`${first.http}/echo/unmetered`)).status, 200, 'unmetered routes keep serving');

      disk.free();
      assert.equal(await stopped(first), 0);
      const second = await spawnGateway(config, { dataDir });
      cleanups.push(() => second.kill('SIGKILL'));
      assert.equal((await request(`${second.http}/metered/again`, { headers: { 'x-customer': 'acme' } })).status, 200, 'served again after a restart');
      const api = await MeteringApi.connect(second.https);
      const stored = await api.eventsWhen({ type: 'kong.api_request', subject: 'acme' }, 2);
      assert.ok(stored.some((item) => item.event.id === servedBeforeFull), 'a request served before the disk filled up is billed');
      assert.ok(stored.some((item) => item.event.data.request_uri === '/metered/again'), 'and one served after the restart');
      assert.equal(await stopped(second), 0);
    });
  }
});

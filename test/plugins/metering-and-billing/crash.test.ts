/**
 * What a stop loses, with the gateway as a real child process: SIGTERM loses no request event (the
 * local queue hands everything to the metering writer before it closes); `kill -9` on the local path
 * loses at most the events not yet committed — those of requests that ended within
 * max_coalescing_delay (plus the commit) before the kill, never older ones; `kill -9` mid-traffic
 * with a remote endpoint: after a restart every request the client saw answered before the kill is
 * delivered to the second Tollgate exactly once.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { spawnGateway, startGateway, startUpstream, tempDir, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { ALICE, call, fixtureConfig, meteringApi, metric, ROUTE_PATH, tokenOf, type MeteringApi } from './support.ts';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

interface Answered {
  id: string;
  at: number;
}

/** Requests as alice from `workers` loops until `stop()`; what each got answered, and when. */
function traffic(base: string, token: string, workers: number): { answered: Answered[]; stop(): Promise<void> } {
  const answered: Answered[] = [];
  let running = true;
  const loops = [...Array(workers)].map(async () => {
    while (running) {
      try {
        const res = await call(base, token);
        if (res.status === 200) answered.push({ id: res.headers['x-kong-request-id'] as string, at: Date.now() });
      } catch {
        // The gateway was killed under the request.
        return;
      }
    }
  });
  return {
    answered,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

async function storedIds(api: MeteringApi): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const item of await api.listAllEvents({ type: 'kong.api_request' })) counts.set(item.event.id, (counts.get(item.event.id) ?? 0) + 1);
  return counts;
}

test('SIGTERM: every request event is committed before the gateway exits', async () => {
  const dataDir = tempDir();
  // Nothing would be handed over for an hour: only the shutdown does it.
  const config = fixtureConfig({ upstream: upstream.url, plugin: { queue: { max_batch_size: 100_000, max_coalescing_delay: 3600 } } });
  const gw = await spawnGateway(config, { dataDir });
  const token = await tokenOf(gw.https, ALICE);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push((await call(gw.http, token)).headers['x-kong-request-id'] as string);
  gw.kill('SIGTERM');
  assert.equal(await gw.exited, 0);
  const again = await startGateway(config, { dataDir });
  try {
    const stored = await storedIds(await meteringApi(again.https));
    for (const id of ids) assert.equal(stored.get(id), 1, `event of request ${id}`);
  } finally {
    await again.stop();
  }
});

test('kill -9 on the local path loses only events of the last max_coalescing_delay (plus their commit)', async () => {
  const dataDir = tempDir();
  const delayMs = 300;
  const config = fixtureConfig({ upstream: upstream.url, plugin: { queue: { max_batch_size: 1000, max_coalescing_delay: delayMs / 1000 } } });
  const gw = await spawnGateway(config, { dataDir });
  const token = await tokenOf(gw.https, ALICE);
  const load = traffic(gw.http, token, 2);
  // Long enough that many requests lie well before the window, on a loaded machine too.
  const started = Date.now();
  while (Date.now() - started < 1500 || (load.answered.length < 150 && Date.now() - started < 20_000)) await new Promise((r) => setTimeout(r, 50));
  const killedAt = Date.now();
  gw.kill('SIGKILL');
  await gw.exited;
  await load.stop();
  const again = await startGateway(config, { dataDir });
  try {
    const stored = await storedIds(await meteringApi(again.https));
    const lost = load.answered.filter((a) => !stored.has(a.id));
    // The bound: a request's event is committed at most max_coalescing_delay after it ended, plus the
    // commit itself (an fsync; 200 ms of slack for a loaded machine).
    const bound = killedAt - delayMs - 200;
    for (const a of lost) assert.ok(a.at > bound, `request ${a.id} answered ${killedAt - a.at} ms before the kill was lost`);
    assert.ok(lost.length <= 1000, `at most one batch lost, ${lost.length}`);
    for (const count of stored.values()) assert.equal(count, 1);
    assert.ok(load.answered.length - lost.length > 50, `requests before the window were metered (${load.answered.length} answered, ${lost.length} lost)`);
  } finally {
    await again.stop();
  }
});

test('kill -9 mid-traffic with a remote endpoint: after a restart every answered request is delivered once', async () => {
  const receiver = await startGateway(fixtureConfig({
    upstream: upstream.url,
    plugin: null,
    meters: [{ key: 'api_requests', name: 'API requests', event_type: 'kong.api_request', aggregation: 'count' }],
  }));
  const receiverApi = await meteringApi(receiver.https);
  const dataDir = tempDir();
  // A short request timeout keeps the lease of a batch in flight at the kill short (timeout + 2 s).
  const config = fixtureConfig({
    upstream: upstream.url,
    // One process: the drained queue is read from /metrics (see remote.test.ts).
    gateway: { worker_processes: 1 },
    plugin: {
      ingest_endpoint: `${receiver.https}${ROUTE_PATH}/events`, api_token: receiverApi.token, ssl_verify: false, timeout: 1000,
      queue: { max_batch_size: 50, max_coalescing_delay: 0.05 },
    },
  });
  const sender = await spawnGateway(config, { dataDir });
  try {
    const token = await tokenOf(sender.https, ALICE);
    const load = traffic(sender.http, token, 4);
    await new Promise((r) => setTimeout(r, 1500));
    const killedAt = Date.now();
    sender.kill('SIGKILL');
    await sender.exited;
    await load.stop();
    const restarted = await spawnGateway(config, { dataDir });
    try {
      // Everything answered before the kill, but for the last turn of the event loop (its events were
      // being written to the disk queue): 50 ms of slack.
      const expected = load.answered.filter((a) => a.at < killedAt - 50).map((a) => a.id);
      assert.ok(expected.length > 50, `${expected.length} requests answered`);
      await waitFor(() => metric(restarted.admin, 'tollgate_request_metering_queue_events'), 'the restarted sender to drain its queue', 20_000, (n) => n === 0);
      // Batches the killed process had claimed arrive once their lease runs out, maybe after the others:
      // the stored events and the meter are read together until every answered request is there and the
      // meter agrees with what is stored (a meter that counted twice never would).
      const { stored, total } = await waitFor(
        async () => {
          const stored = await storedIds(receiverApi);
          const total = Number((await receiverApi.queryOk('api_requests', {})).data[0]?.value ?? 0);
          return { stored, total };
        },
        'every answered request at the receiver, counted once by the meter',
        20_000,
        ({ stored, total }) => expected.every((id) => stored.has(id)) && total === stored.size,
      );
      for (const [id, count] of stored) assert.equal(count, 1, `event ${id} stored once`);
      assert.equal(total, stored.size, 'the meter counts each request once');
    } finally {
      restarted.kill('SIGTERM');
      await restarted.exited;
    }
  } finally {
    await receiver.stop();
  }
});

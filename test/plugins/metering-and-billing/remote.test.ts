/**
 * Request metering to a remote endpoint, here a second Tollgate's metering route (its oauth2 token as
 * api_token): events delivered as CloudEvents batches with source tollgate/<node id of the sender>,
 * queued on disk while the endpoint is away and retried with backoff, resumed by a restart, delivered
 * once even when an acknowledgement is lost and the batch is sent again after a restart, a full queue
 * dropping its oldest events (counted and logged as Kong's queue does), a batch kept as a dead letter
 * after max_retry_time (dead-letters.test.ts has the rest of the dead letters), and Kong's own
 * configuration loading unchanged.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { spawnGateway, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { ALICE, call, fixtureConfig, meteringApi, metric, nodeIdOf, ROUTE_PATH, tokenOf, type MeteringApi } from './support.ts';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * The receiving Tollgate. Its first start takes any free https port (0: a port picked beforehand could be
 * taken by a concurrent test before the gateway binds it); a restart names the port it had, so that it
 * comes back at the same address.
 */
async function startReceiver(port = 0, dataDir = tempDir()): Promise<TestGateway> {
  return startGateway(
    fixtureConfig({
      upstream: upstream.url,
      plugin: null,
      gateway: { proxy_listen: ['127.0.0.1:0', `127.0.0.1:${port} ssl http2`], admin_listen: ['127.0.0.1:0'] },
      meters: [{ key: 'api_requests', name: 'API requests', event_type: 'kong.api_request', aggregation: 'count' }],
    }),
    { dataDir },
  );
}

function remotePlugin(endpoint: string, token: string, queue: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  return {
    ingest_endpoint: endpoint,
    api_token: token,
    ssl_verify: false,
    timeout: 2000,
    queue: {
      max_coalescing_delay: 0.05,
      max_batch_size: 50,
      initial_retry_delay: 0.05,
      max_retry_delay: 0.2,
      ...queue,
    },
    ...extra,
  };
}

function httpsPort(gateway: TestGateway): number {
  return Number(new URL(gateway.https).port);
}

async function received(receiver: MeteringApi, ids: string[]): Promise<Map<string, number>> {
  const items = await receiver.listAllEvents({ type: 'kong.api_request' });
  const counts = new Map<string, number>();
  for (const item of items) if (ids.includes(item.event.id)) counts.set(item.event.id, (counts.get(item.event.id) ?? 0) + 1);
  return counts;
}

describe('delivery to a second Tollgate', () => {
  let receiver: TestGateway;
  let sender: TestGateway;
  let receiverApi: MeteringApi;
  before(async () => {
    receiver = await startReceiver();
    receiverApi = await meteringApi(receiver.https);
    sender = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: remotePlugin(`${receiver.https}${ROUTE_PATH}/events`, receiverApi.token) }));
  });
  after(async () => {
    await sender.stop();
    await receiver.stop();
  });

  test('events arrive as the sender built them, once each', async () => {
    const token = await tokenOf(sender.https, ALICE);
    const replies = await Promise.all([...Array(20)].map(() => call(sender.http, token)));
    const ids = replies.map((r) => r.headers['x-kong-request-id'] as string);
    const counts = await waitFor(() => received(receiverApi, ids), '20 events at the receiver', 10_000, (c) => c.size === 20);
    assert.deepEqual([...counts.values()], Array(20).fill(1));
    const [item] = await receiverApi.listAllEvents({ id: ids[0] });
    assert.equal(item.event.source, `tollgate/${await nodeIdOf(sender.admin)}`);
    assert.equal(item.event.subject, 'alice');
    assert.equal(item.event.data.route_name, 'api');
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_queue_events'), 'an empty queue', 10_000, (n) => n === 0);
    // Counted once the batch is marked done in the queue, a moment after the receiver took it.
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_deliveries_total'), 'a delivery counted', 10_000, (n) => n >= 1);
  });
});

test('an endpoint that is away: queued on disk, retried with backoff, delivered once it is back', async () => {
  const receiverDir = tempDir();
  let receiver = await startReceiver(0, receiverDir);
  const port = httpsPort(receiver);
  const token = (await meteringApi(receiver.https)).token;
  await receiver.stop();
  const sender = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: remotePlugin(`https://127.0.0.1:${port}${ROUTE_PATH}/events`, token, { max_retry_time: 60 }) }));
  try {
    const alice = await tokenOf(sender.https, ALICE);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await call(sender.http, alice)).headers['x-kong-request-id'] as string);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_retries_total'), 'retries', 10_000, (n) => n >= 3);
    receiver = await startReceiver(port, receiverDir);
    const api = await meteringApi(receiver.https);
    const counts = await waitFor(() => received(api, ids), 'the 10 events at the receiver', 10_000, (c) => c.size === 10);
    assert.deepEqual([...counts.values()], Array(10).fill(1));
  } finally {
    await sender.stop();
    await receiver.stop();
  }
});

/**
 * A proxy in front of the receiver that forwards each POST and, while `dropAnswers` holds, cuts the
 * connection instead of relaying the receiver's 202: the batch is stored, its acknowledgement lost.
 */
async function lossyProxy(target: number): Promise<{ port: number; posts: number; dropAnswers: boolean; close(): Promise<void> }> {
  const state = { port: 0, posts: 0, dropAnswers: true, close: async () => {} };
  const server = http.createServer((req, res) => {
    state.posts++;
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const forward = (https as typeof import('node:https')).request(
        { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers, rejectUnauthorized: false },
        (answer) => {
          answer.resume();
          answer.on('end', () => {
            if (state.dropAnswers) res.socket?.destroy();
            else res.writeHead(answer.statusCode ?? 502).end();
          });
        },
      );
      forward.on('error', () => res.socket?.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.port = (server.address() as AddressInfo).port;
  state.close = () => new Promise((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
  return state;
}
const https = await import('node:https');

test('a batch whose acknowledgement was lost, sent again after a restart, is metered once', async () => {
  const receiver = await startReceiver();
  const api = await meteringApi(receiver.https);
  const proxy = await lossyProxy(httpsPort(receiver));
  const senderDir = tempDir();
  // Every batch in flight at once: on a loaded machine the five requests may make more batches than a
  // node has processes, and with one batch per process the last would wait behind the retried ones.
  const queue = { max_retry_delay: 0.5, concurrency_limit: -1 };
  const config = fixtureConfig({ upstream: upstream.url, plugin: remotePlugin(`http://127.0.0.1:${proxy.port}${ROUTE_PATH}/events`, api.token, queue) });
  let sender = await startGateway(config, { dataDir: senderDir });
  try {
    const alice = await tokenOf(sender.https, ALICE);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await call(sender.http, alice)).headers['x-kong-request-id'] as string);
    // Stored by the receiver, never acknowledged: the sender keeps retrying.
    await waitFor(() => received(api, ids), 'the receiver to store them', 10_000, (c) => c.size === 5);
    await waitFor(() => Promise.resolve(proxy.posts), 'a retried batch', 10_000, (n) => n >= 2);
    await sender.stop();
    proxy.dropAnswers = false;
    const postsBefore = proxy.posts;
    sender = await startGateway(config, { dataDir: senderDir });
    await waitFor(() => Promise.resolve(proxy.posts), 'the batch sent again after the restart', 10_000, (n) => n > postsBefore);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_queue_events'), 'an empty queue', 10_000, (n) => n === 0);
    const counts = await received(api, ids);
    assert.deepEqual([...counts.values()], Array(5).fill(1));
    const total = await api.queryOk('api_requests', { filters: { dimensions: { subject: { eq: 'alice' } } } });
    assert.equal(total.data[0].value, '5');
  } finally {
    await sender.stop();
    await proxy.close();
    await receiver.stop();
  }
});

test('a full queue drops its oldest events, counted and logged as Kong does', async () => {
  const receiverDir = tempDir();
  let receiver = await startReceiver(0, receiverDir);
  const port = httpsPort(receiver);
  const token = (await meteringApi(receiver.https)).token;
  await receiver.stop();
  const sender = await spawnGateway(fixtureConfig({
    upstream: upstream.url,
    // One process: the queue's counts are read from /metrics while they move (a node of several
    // workers answers a scrape with each worker's last report).
    gateway: { log_level: 'info', worker_processes: 1 },
    plugin: remotePlugin(`https://127.0.0.1:${port}${ROUTE_PATH}/events`, token, { max_entries: 5, max_batch_size: 5, max_coalescing_delay: 3600, max_retry_time: 600 }),
  }));
  try {
    const alice = await tokenOf(sender.https, ALICE);
    const ids: string[] = [];
    // The endpoint is away: the first batch of five is claimed and retried, what follows waits on disk.
    for (let i = 0; i < 5; i++) ids.push((await call(sender.http, alice)).headers['x-kong-request-id'] as string);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_retries_total'), 'the first batch claimed', 10_000, (n) => n >= 1);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_queue_events'), 0);
    for (let i = 0; i < 8; i++) ids.push((await call(sender.http, alice)).headers['x-kong-request-id'] as string);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_dropped_events_total', { reason: 'queue_full' }), '3 dropped', 10_000, (n) => n === 3);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_queue_events', { where: 'disk' }), 5);
    assert.match(sender.output(), /queue full, dropping old entries until processing is successful again/);
    assert.equal(sender.output().match(/queue full, dropping/g)!.length, 1, 'one line per episode');
    receiver = await startReceiver(port, receiverDir);
    const api = await meteringApi(receiver.https);
    // The claimed batch (the first five) and the five newest arrive; the three between them were the oldest waiting.
    const counts = await waitFor(() => received(api, ids), '10 events at the receiver', 10_000, (c) => c.size === 10);
    assert.deepEqual([...counts.keys()].sort(), [...ids.slice(0, 5), ...ids.slice(8)].sort());
    await waitFor(() => Promise.resolve(sender.output()), 'the log line of the recovery', 10_000, (out) => /queue resumed processing/.test(out));
  } finally {
    sender.kill('SIGTERM');
    await sender.exited;
    await receiver.stop();
  }
});

test('a batch that keeps failing is kept as a dead letter after max_retry_time, not dropped', async () => {
  const port = await freePort();
  const sender = await startGateway(fixtureConfig({
    upstream: upstream.url,
    plugin: remotePlugin(`https://127.0.0.1:${port}${ROUTE_PATH}/events`, 'token', { max_retry_time: 0.3, max_batch_size: 10 }),
  }));
  try {
    const alice = await tokenOf(sender.https, ALICE);
    await Promise.all([...Array(4)].map(() => call(sender.http, alice)));
    // The endpoint never answered: no status.
    const deadLettered = () => metric(sender.admin, 'tollgate_request_metering_dead_lettered_events_total', { reason: 'retry_time', status: 'none' });
    await waitFor(deadLettered, '4 dead-lettered', 10_000, (n) => n === 4);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dropped_events_total'), 0);
    // On a node of several processes, one that queued events learns within a second that another took them.
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_queue_events'), 'the queue empty', 10_000, (n) => n === 0);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_dead_letter_events'), '4 events held as dead letters', 10_000, (n) => n === 4);
  } finally {
    await sender.stop();
  }
});

test("Kong's own configuration loads unchanged", async () => {
  const gw = await startGateway({
    ...fixtureConfig({ upstream: upstream.url, plugin: null }),
    plugins: [
      {
        name: 'metering-and-billing',
        config: {
          ingest_endpoint: 'https://us.api.konghq.com/v3/openmeter/events',
          api_token: 'spat_example',
          meter_api_requests: true,
          meter_ai_token_usage: false,
          subject: { look_up_value_in: 'consumer' },
          attributes: [{ source: 'header', look_up_value_in: 'x-department', event_property_name: 'department' }],
          timeout: 10000,
          keepalive: 60000,
          ssl_verify: true,
          queue: {
            max_batch_size: 1,
            max_coalescing_delay: 1,
            max_entries: 10000,
            max_bytes: null,
            max_retry_time: 60,
            initial_retry_delay: 0.01,
            max_retry_delay: 60,
            concurrency_limit: 1,
          },
        },
      },
    ],
  });
  await gw.stop();
});

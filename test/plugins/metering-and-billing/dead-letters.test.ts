/**
 * A poison batch never blocks the others: a receiver (a real HTTP server) that refuses every batch
 * holding an event of bob with 400 still gets every event of alice promptly, even those batched with
 * bob's, because the refused batch is split until bob's event stands alone; that event is kept as a dead
 * letter with the receiver's status and reason, listed on the admin API, counted on /metrics, re-delivered
 * exactly once after the receiver is fixed, or deleted. A problem+json answer naming the refused position
 * isolates it without halving. A refusal of the endpoint itself (401) is retried, never split, and after
 * max_retry_time the whole batch becomes one dead letter instead of being dropped (re-delivered once its
 * queue is served again). The letters are bounded by the queue's max_entries: the oldest go, counted and
 * logged; the admin API lists them as Kong lists entities.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { ALICE, BOB, call, fixtureConfig, metric, tokenOf } from './support.ts';

const LETTERS = '/metering-and-billing/dead-letters';

interface CloudEvent {
  id: string;
  subject: string;
}

type Answer = (events: CloudEvent[]) => { status: number; body?: unknown } | undefined;

/** Refuses (400, plain text) every batch that holds an event of bob, as a receiver validating subjects would. */
const refuseBob: Answer = (events) => (events.some((e) => e.subject === 'bob') ? { status: 400, body: 'subject bob is not known here' } : undefined);

/** The same refusal as problem+json naming the refused positions, as Tollgate's and Konnect's ingest answer. */
const refuseBobNamingIt: Answer = (events) => {
  const named = events.flatMap((e, index) => (e.subject === 'bob' ? [{ field: `[${index}].subject`, index, reason: 'unknown subject', source: 'body' }] : []));
  if (named.length === 0) return undefined;
  return { status: 400, body: { status: 400, title: 'Bad Request', detail: 'invalid event: unknown subject', invalid_parameters: named } };
};

/** An ingest endpoint: `answer` decides each batch (undefined: 202); every POST's event ids and what it accepted are kept. */
interface Receiver {
  url: string;
  answer: Answer;
  /** The ids of each POST, in order. */
  posts: string[][];
  /** How many times each event id was accepted. */
  accepted: Map<string, number>;
  close(): Promise<void>;
}

async function startReceiver(answer: Answer): Promise<Receiver> {
  const receiver: Receiver = { url: '', answer, posts: [], accepted: new Map(), close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const events = JSON.parse(Buffer.concat(chunks).toString('utf8')) as CloudEvent[];
      receiver.posts.push(events.map((e) => e.id));
      const refusal = receiver.answer(events);
      if (refusal) {
        const text = typeof refusal.body === 'string';
        res.writeHead(refusal.status, { 'content-type': text ? 'text/plain' : 'application/problem+json' });
        res.end(text ? refusal.body : JSON.stringify(refusal.body));
        return;
      }
      for (const { id } of events) receiver.accepted.set(id, (receiver.accepted.get(id) ?? 0) + 1);
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
  receiver.close = () => new Promise((r) => server.close(() => r()));
  return receiver;
}

function remotePlugin(endpoint: string, queue: Record<string, unknown> = {}) {
  return {
    ingest_endpoint: endpoint,
    api_token: 'token',
    timeout: 2000,
    queue: { name: 'billing', max_batch_size: 50, max_coalescing_delay: 0.2, initial_retry_delay: 0.05, max_retry_delay: 0.2, ...queue },
  };
}

/** Requests as `token`'s consumer, all at once (so that they share batches); their request ids. */
async function requestsAs(gw: { http: string }, token: string, count: number): Promise<string[]> {
  const replies = await Promise.all([...Array(count)].map(() => call(gw.http, token)));
  return replies.map((r) => {
    assert.equal(r.status, 200);
    return r.headers['x-kong-request-id'] as string;
  });
}

async function letters(admin: string, query = ''): Promise<any[]> {
  const reply = await request(`${admin}${LETTERS}${query}`);
  assert.equal(reply.status, 200, reply.text);
  return reply.json().data;
}

const allAccepted = (receiver: Receiver, ids: string[]) => Promise.resolve(ids.filter((id) => receiver.accepted.has(id)).length);

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

describe('a receiver that refuses the events of one subject', () => {
  let receiver: Receiver;
  let sender: TestGateway;
  let alice: string;
  let bob: string;
  /** Bob's event of the first test, kept as a dead letter. */
  let bobId: string;
  before(async () => {
    receiver = await startReceiver(refuseBob);
    sender = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: remotePlugin(receiver.url) }));
    [alice, bob] = await Promise.all([tokenOf(sender.https, ALICE), tokenOf(sender.https, BOB)]);
  });
  after(async () => {
    await sender.stop();
    await receiver.close();
  });

  test("the others' events are delivered while the refused one becomes a dead letter, with the receiver's reason", async () => {
    let aliceIds: string[];
    [aliceIds, [bobId]] = await Promise.all([requestsAs(sender, alice, 10), requestsAs(sender, bob, 1)]);
    await waitFor(() => allAccepted(receiver, aliceIds), "alice's 10 events at the receiver", 10_000, (n) => n === 10);
    assert.ok(receiver.posts.some((ids) => ids.includes(bobId) && ids.length > 1), "bob's event was first sent in a batch with others");
    // The queue goes on: later events get through as well.
    const later = await requestsAs(sender, alice, 3);
    await waitFor(() => allAccepted(receiver, later), 'the later events at the receiver', 10_000, (n) => n === 3);

    const [letter] = await waitFor(() => letters(sender.admin), 'a dead letter', 10_000, (l) => l.length === 1);
    assert.equal(letter.queue, 'billing');
    assert.equal(letter.event_count, 1);
    assert.equal(letter.status, 400);
    assert.equal(letter.cause, 'refused');
    assert.equal(letter.reason, 'subject bob is not known here');
    assert.ok(Date.parse(letter.first_failure) <= Date.parse(letter.last_failure));
    const shown = await request(`${sender.admin}${LETTERS}/${letter.id}`);
    assert.equal(shown.status, 200);
    assert.deepEqual(shown.json().events.map((e: CloudEvent) => [e.id, e.subject]), [[bobId, 'bob']]);
    assert.equal(receiver.accepted.has(bobId), false);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dead_lettered_events_total', { reason: 'refused', status: '400' }), 1);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_dead_letter_events', { queue: 'billing' }), 'the dead-letter gauge', 10_000, (n) => n === 1);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dropped_events_total'), 0, 'nothing dropped');
  });

  test('re-delivered once the receiver takes it: delivered exactly once, and the letter is gone', async () => {
    const [letter] = await letters(sender.admin);
    receiver.answer = () => undefined;
    const reply = await request(`${sender.admin}${LETTERS}/${letter.id}/redeliver`, { method: 'POST' });
    assert.equal(reply.status, 202, reply.text);
    assert.equal(reply.json().id, letter.id);
    await waitFor(() => Promise.resolve(receiver.accepted.get(bobId)), "bob's event at the receiver", 10_000, (n) => n !== undefined);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_queue_events'), 'an empty queue', 10_000, (n) => n === 0);
    assert.equal(receiver.accepted.get(bobId), 1);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}`)).status, 404);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}/redeliver`, { method: 'POST' })).status, 404, 'a letter is re-delivered once');
    assert.deepEqual(await letters(sender.admin), []);
    await waitFor(() => metric(sender.admin, 'tollgate_request_metering_dead_letter_events', { queue: 'billing' }), 'the gauge back to 0', 10_000, (n) => n === 0);
    assert.equal(receiver.accepted.get(bobId), 1, 'sent once');
    receiver.answer = refuseBob;
  });

  test('a deleted letter is gone for good, counted as dropped', async () => {
    const [id] = await requestsAs(sender, bob, 1);
    const [letter] = await waitFor(() => letters(sender.admin), 'a dead letter', 10_000, (l) => l.length === 1);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}`)).json().events[0].id, id);
    const reply = await request(`${sender.admin}${LETTERS}/${letter.id}`, { method: 'DELETE' });
    assert.equal(reply.status, 204);
    assert.deepEqual(await letters(sender.admin), []);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}`)).status, 404);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}`, { method: 'DELETE' })).status, 404);
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}/redeliver`, { method: 'POST' })).status, 404);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dropped_events_total', { reason: 'deleted' }), 1);
    assert.equal(receiver.accepted.has(id), false);
  });

  test('an answer naming the refused position isolates the event without halving the batch', async () => {
    receiver.answer = refuseBobNamingIt;
    const [aliceIds, [id]] = await Promise.all([requestsAs(sender, alice, 10), requestsAs(sender, bob, 1)]);
    await waitFor(() => allAccepted(receiver, aliceIds), "alice's events at the receiver", 10_000, (n) => n === 10);
    const [letter] = await waitFor(() => letters(sender.admin), 'a dead letter', 10_000, (l) => l.length === 1);
    assert.equal(letter.reason, 'invalid event: unknown subject');
    // Sent in its batch, then alone: halving a batch of several would have sent it again with others.
    assert.deepEqual(receiver.posts.filter((ids) => ids.includes(id)).map((ids) => ids.length > 1), [true, false]);
    await request(`${sender.admin}${LETTERS}/${letter.id}`, { method: 'DELETE' });
    receiver.answer = refuseBob;
  });
});

test('an endpoint that refuses the token is retried, not split; after max_retry_time the batch is a dead letter, not dropped', async () => {
  const receiver = await startReceiver(() => ({ status: 401, body: { message: 'Unauthorized' } }));
  const config = (queue: Record<string, unknown>) =>
    fixtureConfig({ upstream: upstream.url, plugin: remotePlugin(receiver.url, { max_retry_time: 0.5, max_batch_size: 10, ...queue }) });
  const sender = await startGateway(config({}));
  try {
    const ids = await requestsAs(sender, await tokenOf(sender.https, ALICE), 4);
    const [letter] = await waitFor(() => letters(sender.admin), 'a dead letter', 10_000, (l) => l.length > 0);
    assert.deepEqual(
      { events: letter.event_count, status: letter.status, cause: letter.cause, reason: letter.reason },
      { events: 4, status: 401, cause: 'retry_time', reason: 'Unauthorized' },
    );
    assert.ok(receiver.posts.length >= 2 && receiver.posts.every((posted) => posted.length === 4), 'retried whole, never split');
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dead_lettered_events_total', { reason: 'retry_time', status: '401' }), 4);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dropped_events_total'), 0);
    // While no instance sends the queue any more, a re-delivery is refused: its events would wait for ever.
    assert.ok(await sender.reload(config({ name: 'another' })));
    const unserved = await request(`${sender.admin}${LETTERS}/${letter.id}/redeliver`, { method: 'POST' });
    assert.deepEqual([unserved.status, unserved.json().code], [409, 'TOLLGATE_ERR_DEAD_LETTER_QUEUE_NOT_SERVED']);
    // The queue back and the token fixed: re-delivered, all four arrive.
    assert.ok(await sender.reload(config({})));
    receiver.answer = () => undefined;
    assert.equal((await request(`${sender.admin}${LETTERS}/${letter.id}/redeliver`, { method: 'POST' })).status, 202);
    await waitFor(() => allAccepted(receiver, ids), 'the 4 events at the receiver', 10_000, (n) => n === 4);
    assert.deepEqual(await letters(sender.admin), []);
  } finally {
    await sender.stop();
    await receiver.close();
  }
});

test("the dead letters are bounded by the queue's max_entries: the oldest go, counted and logged", async () => {
  const receiver = await startReceiver(refuseBob);
  const sender = await spawnGateway(fixtureConfig({
    upstream: upstream.url,
    // One process: two dead-lettering at once may each make room for their own letter only.
    gateway: { log_level: 'info', worker_processes: 1 },
    plugin: remotePlugin(receiver.url, { max_entries: 3, max_batch_size: 1, max_coalescing_delay: 0 }),
  }));
  try {
    const bob = await tokenOf(sender.https, BOB);
    const ids: string[] = [];
    // One at a time: max_entries bounds the live queue too, which must not drop any of them.
    for (let i = 1; i <= 5; i++) {
      ids.push(...(await requestsAs(sender, bob, 1)));
      await waitFor(() => metric(sender.admin, 'tollgate_request_metering_dead_lettered_events_total'), `${i} events dead-lettered`, 10_000, (n) => n === i);
    }
    const kept = await letters(sender.admin);
    assert.equal(kept.length, 3);
    const keptIds = await Promise.all(kept.map(async (l) => (await request(`${sender.admin}${LETTERS}/${l.id}`)).json().events[0].id));
    assert.deepEqual(new Set(keptIds), new Set(ids.slice(2)), 'the newest three');
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dropped_events_total', { reason: 'dead_letter_full' }), 2);
    assert.equal(await metric(sender.admin, 'tollgate_request_metering_dead_letter_events'), 3);
    assert.match(sender.output(), /the dead letters hold max_entries \(3\) events: the oldest 1 were dropped/);

    // Listed as Kong lists: pages of `size`, `next` to the rest, Kong's errors for a bad size or offset.
    const first = (await request(`${sender.admin}${LETTERS}?size=2`)).json();
    assert.deepEqual(first.data.map((l: { id: string }) => l.id), kept.slice(0, 2).map((l) => l.id));
    const rest = (await request(`${sender.admin}${first.next}`)).json();
    assert.deepEqual([rest.data.map((l: { id: string }) => l.id), rest.next], [[kept[2].id], null]);
    assert.deepEqual(await letters(sender.admin, '?queue=another'), []);
    assert.equal((await letters(sender.admin, '?queue=billing')).length, 3);
    assert.equal((await request(`${sender.admin}${LETTERS}?size=0`)).json().name, 'invalid size');
    assert.equal((await request(`${sender.admin}${LETTERS}?offset=x!`)).json().name, 'invalid offset');
  } finally {
    sender.kill('SIGTERM');
    await sender.exited;
    await receiver.close();
  }
});


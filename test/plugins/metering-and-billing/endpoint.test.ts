/**
 * What an ingest endpoint's answer means for a batch: a 4xx about the events (400, 413, 415, 422, …) is a
 * refusal of the events, split and dead-lettered; a 4xx about the endpoint or the token (401, 403, 404,
 * 405, …) and "later" answers (408, 429, 5xx) are retried. The reason kept is the problem's detail or
 * message, else the body, bounded; positions a problem+json answer names are a hint within the batch;
 * and a refused batch splits into parts that are all smaller than it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  EndpointRefusedError,
  EndpointUnavailableError,
  EventsRefusedError,
  failureOf,
  MAX_REASON_LENGTH,
} from '../../../plugins/metering-and-billing/endpoint.ts';
import { splitRefused } from '../../../plugins/metering-and-billing/remote-queue.ts';

test('statuses: the events refused, the endpoint refused, or try later', () => {
  const kind = (status: number) => failureOf(status, 'text/plain', 'no', 3).constructor;
  for (const status of [400, 409, 413, 415, 422]) assert.equal(kind(status), EventsRefusedError, String(status));
  for (const status of [401, 403, 404, 405, 410]) assert.equal(kind(status), EndpointRefusedError, String(status));
  for (const status of [408, 429, 500, 502, 503, 504, 301]) assert.equal(kind(status), EndpointUnavailableError, String(status));
  const refused = failureOf(422, 'text/plain', 'no', 3);
  assert.deepEqual([refused.code, refused.status], ['TOLLGATE_ERR_INGEST_EVENTS_REFUSED', 422]);
});

test("the reason: a problem's detail, Kong's message, else the body, bounded", () => {
  assert.equal(failureOf(400, 'application/problem+json', '{"title":"Bad Request","detail":"invalid event"}', 1).reason, 'invalid event');
  assert.equal(failureOf(401, 'application/json; charset=utf-8', '{"message":"Unauthorized"}', 1).reason, 'Unauthorized');
  assert.equal(failureOf(400, 'text/html', '  <h1>Bad</h1>\n', 1).reason, '<h1>Bad</h1>');
  const long = failureOf(400, 'text/plain', 'x'.repeat(10_000), 1).reason;
  assert.equal(long.length, MAX_REASON_LENGTH);
  assert.ok(long.endsWith('…'));
});

test('positions named by invalid_parameters: indexes or [n] fields, within the batch only', () => {
  const named = (problem: unknown, count = 5) => (failureOf(400, 'application/problem+json', JSON.stringify(problem), count) as EventsRefusedError).named;
  assert.deepEqual(named({ invalid_parameters: [{ field: '[3].subject', index: 3 }, { field: '[1].time', index: 1 }, { field: '[3].id', index: 3 }] }), [1, 3]);
  assert.deepEqual(named({ invalid_parameters: [{ field: '[2].subject' }] }), [2]);
  assert.deepEqual(named({ invalid_parameters: [{ field: '[7].subject' }, { field: 'body' }, { index: -1 }] }), []);
  assert.deepEqual(named({ detail: 'no list' }), []);
  assert.deepEqual((failureOf(400, 'text/plain', '{"invalid_parameters":[{"index":1}]}', 5) as EventsRefusedError).named, [], 'only a JSON answer is read');
});

test('a refused batch splits into smaller parts: the named events alone after the rest, else halves', () => {
  const events = ['a', 'b', 'c', 'd', 'e'];
  assert.deepEqual(splitRefused(events, []), [['a', 'b', 'c'], ['d', 'e']]);
  assert.deepEqual(splitRefused(events, [1, 3]), [['a', 'c', 'e'], ['b'], ['d']]);
  assert.deepEqual(splitRefused(['a', 'b'], [0, 1]), [['a'], ['b']]);
});

/**
 * The repository's own gateway.yaml, served as shipped (only the listeners and the data directory moved
 * for the test): the metering API requires the scope of each operation, so a token granted for another
 * route's `read` cannot manage meters or read usage, and the README walk-through's token can do what the
 * walk-through does with it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { request, startGateway, type TestGateway } from '../helpers/gateway.ts';

const shipped = parse(readFileSync(resolve(import.meta.dirname, '../../gateway.yaml'), 'utf8'));
let gw: TestGateway;

before(async () => {
  gw = await startGateway({ ...shipped, gateway: { trusted_ips: shipped.gateway.trusted_ips } });
});
after(() => gw?.stop());

/** A client-credentials token of the shipped consumer, from the token endpoint under `route`. */
async function token(route: string, scope: string): Promise<string> {
  const reply = await request(`${gw.https}${route}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'acme-app', client_secret: 'acme-secret-change-me', scope }).toString(),
  });
  assert.equal(reply.status, 200, reply.text);
  return reply.json().access_token;
}

function metering(method: string, path: string, bearer: string, body?: unknown, type = 'application/json') {
  return request(`${gw.https}/v3/metering${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': type }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

test("a token for another route's `read` scope can neither manage meters nor read usage nor ingest", async () => {
  const other = await token('/protected', 'read');
  const meter = { key: 'stolen', name: 'Stolen', event_type: 'x', aggregation: 'count' };
  assert.equal((await metering('POST', '/meters', other, meter)).status, 403);
  assert.equal((await metering('DELETE', '/meters/api_calls', other)).status, 403);
  assert.equal((await metering('POST', '/meters/api_calls/query', other, {})).status, 403);
  assert.equal((await metering('GET', '/events', other)).status, 403);
  const event = { specversion: '1.0', id: 'e-1', source: 'test', type: 'request', subject: 's', data: {} };
  assert.equal((await metering('POST', '/events', other, event, 'application/cloudevents+json')).status, 403);
});

test('the README walk-through token (`events:write usage:read`) ingests and queries; managing meters needs `meters:write`', async () => {
  const walkthrough = await token('/v3/metering', 'events:write usage:read');
  const event = { specversion: '1.0', id: 'evt-1', source: 'walkthrough', type: 'request', subject: 'customer-1', data: { route: '/orders' } };
  assert.equal((await metering('POST', '/events', walkthrough, event, 'application/cloudevents+json')).status, 202);
  const query = await metering('POST', '/meters/api_calls/query', walkthrough, { granularity: 'P1D', time_zone: 'Europe/Paris', group_by_dimensions: ['subject', 'route'] });
  assert.equal(query.status, 200, query.text);
  assert.equal(query.json().data[0].value, '1');
  assert.equal((await metering('POST', '/meters', walkthrough, { key: 'm', name: 'M', event_type: 'x', aggregation: 'count' })).status, 403);
  const manager = await token('/v3/metering', 'meters:write');
  assert.equal((await metering('POST', '/meters', manager, { key: 'm', name: 'M', event_type: 'x', aggregation: 'count' })).status, 201);
});

/**
 * OpenMeter's consumer portal through the official `@openmeter/sdk`: tokens made, listed and
 * invalidated through the v1 API, and the SDK's portal client reading with one — on a route of its own
 * (`config.portal`, no authentication plugin) — only its subject's usage of the meters it allows.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { OpenMeter } from '@openmeter/sdk';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { meteringConfig, MeteringApi, ROUTE_PATH } from './catalogue-support.ts';
import { closeSdkClients, portalClient, sdkClient, sdkError } from './openmeter-sdk-support.ts';

const PORTAL_PATH = '/portal';

let gw: TestGateway;
let v3: MeteringApi;
let client: OpenMeter;
before(async () => {
  const config = meteringConfig({
    meters: [
      { key: 'tokens', name: 'Tokens', event_type: 'prompt', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model' } },
      { key: 'calls', name: 'Calls', event_type: 'call', aggregation: 'count' },
    ],
  }) as { routes: unknown[] };
  config.routes.push({ name: 'portal', paths: [PORTAL_PATH], protocols: ['https'], strip_path: false, plugins: [{ name: 'metering', config: { portal: true } }] });
  gw = await startGateway(config);
  v3 = await MeteringApi.connect(gw.https);
  client = sdkClient(gw.https, v3.token);
  const time = '2026-11-20T10:00:00Z';
  await v3.ingestOk([
    { specversion: '1.0', id: 'p1', source: 't', type: 'prompt', subject: 'alice', time, data: { tokens: 5, model: 'a' } },
    { specversion: '1.0', id: 'p2', source: 't', type: 'prompt', subject: 'alice', time, data: { tokens: 7, model: 'b' } },
    { specversion: '1.0', id: 'p3', source: 't', type: 'prompt', subject: 'bob', time, data: { tokens: 100, model: 'a' } },
    { specversion: '1.0', id: 'c1', source: 't', type: 'call', subject: 'alice', time },
  ]);
  await v3.totalWhen('tokens', 112);
});
after(async () => {
  await gw.stop();
  await closeSdkClients();
});

test('a portal token reads only its subject\'s usage of the meters it allows', async () => {
  const created = (await client.portal.create({ subject: 'alice', allowedMeterSlugs: ['tokens'] }))!;
  assert.equal(created.subject, 'alice');
  assert.equal(typeof created.token, 'string');
  assert.equal(created.expired, false);
  const portal = portalClient(`${gw.https}${PORTAL_PATH}`, created.token!);

  const total = await portal.query('tokens', {});
  assert.deepEqual(total.data.map((r) => [r.subject, r.value]), [['alice', 12]]);
  const byModel = await portal.query('tokens', { groupBy: ['model'], subject: ['bob'] } as any);
  assert.deepEqual(byModel.data.map((r) => [r.subject, r.groupBy.model, r.value]).sort(), [['alice', 'a', 5], ['alice', 'b', 7]], 'another subject cannot be asked for');
  await sdkError(portal.query('calls', {}), 403);

  const listed = (await client.portal.list())!;
  assert.deepEqual(listed.map((t) => [t.id, t.subject, t.token]), [[created.id, 'alice', undefined]], 'the secret is shown once');

  await client.portal.invalidate({ id: created.id });
  await sdkError(portal.query('tokens', {}), 401);
  assert.equal((await client.portal.list())![0].expired, true);
});

test('a token without allowed meters reads every meter; nothing else answers on the portal route', async () => {
  const { token } = (await client.portal.create({ subject: 'bob' }))!;
  const portal = portalClient(`${gw.https}${PORTAL_PATH}`, token!);
  assert.equal((await portal.query('tokens', {})).data[0].value, 100);
  assert.deepEqual((await portal.query('calls', {})).data, [], 'bob made no calls (grouped by subject: no row)');
  await sdkError(portalClient(`${gw.https}${PORTAL_PATH}`, 'om_portal_forged').query('tokens', {}), 401);

  const bearer = { authorization: `Bearer ${token}` };
  for (const [method, path] of [['GET', '/api/v1/meters'], ['POST', '/events'], ['GET', '/customers'], ['GET', '/api/v1/portal/tokens']]) {
    const res = await request(`${gw.https}${PORTAL_PATH}${path}`, { method, headers: bearer, body: method === 'POST' ? '[]' : undefined });
    assert.equal(res.status, 404, `${method} ${path} on the portal route`);
  }
  const onMain = await request(`${gw.https}${ROUTE_PATH}/api/v1/portal/meters/tokens/query`, { headers: { authorization: `Bearer ${v3.token}` } });
  assert.equal(onMain.status, 404, 'the portal read is served on portal routes only');
});

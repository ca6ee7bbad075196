/**
 * Gateway nodes sharing one PostgreSQL (a throwaway cluster, an ordinary role with a password): each
 * keeps its own node_id; runtime consumers created or deleted on one node are served by the other
 * within db_update_frequency; a username is taken once even when two nodes are asked at once;
 * `/status` reports the database and `/status/ready` turns 503 while it is gone, with proxying going
 * on; and a second node is refused while a plugin that keeps state in one node is configured.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { startWithRegistry, waitFor } from '../../helpers/support.ts';

const skip = postgresSkipReason();

describe('nodes on one PostgreSQL', { skip }, () => {
  const suite = postgresForSuite();
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  const config = (schema: string, extra: Record<string, unknown> = {}) => ({
    gateway: suite.pg.settings({ pg_schema: schema, db_update_frequency: 0.2 }),
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }],
    ...extra,
  });
  const node = async (schema: string, extra?: Record<string, unknown>) => {
    const gw = await startGateway(config(schema, extra));
    suite.track(() => gw.stop());
    return gw;
  };
  const nodes = async (extra?: Record<string, unknown>) => {
    const schema = suite.schema('nodes');
    return [await node(schema, extra), await node(schema, extra)];
  };

  test('each node keeps its own node_id, and says it runs on PostgreSQL', async () => {
    const [a, b] = await nodes();
    const infoA = (await request(a.admin + '/')).json();
    const idB = (await request(b.admin + '/')).json().node_id;
    assert.match(infoA.node_id, /^[0-9a-f-]{36}$/);
    assert.notEqual(infoA.node_id, idB);
    assert.equal(infoA.configuration.database, 'postgres');
  });

  test('a consumer created on one node is served by the other, and its deletion too', async () => {
    const [a, b] = await nodes();
    const created = await request(a.admin + '/consumers', { method: 'POST', body: { username: 'alice', custom_id: 'c-1' } });
    assert.equal(created.status, 201);
    const id = created.json().id;
    await waitFor(async () => (await request(b.admin + '/consumers/alice')).status === 200, 'node B to serve alice', 2000);
    assert.equal((await request(b.admin + '/consumers/' + id)).json().custom_id, 'c-1');
    assert.equal((await request(b.admin + '/consumers', { method: 'POST', body: { username: 'alice' } })).status, 409, 'B knows the name is taken');
    assert.equal((await request(b.admin + '/consumers/' + id, { method: 'DELETE' })).status, 204);
    await waitFor(async () => (await request(a.admin + '/consumers/alice')).status === 404, 'node A to forget alice', 2000);
    assert.equal((await request(a.admin + '/consumers', { method: 'POST', body: { username: 'alice' } })).status, 201, 'the name is free again');
  });

  test('one username asked of both nodes at once is created once', async () => {
    const [a, b] = await nodes();
    for (let round = 0; round < 5; round++) {
      const body = { username: `racer-${round}` };
      const replies = await Promise.all([a, b, a, b].map((g) => request(g.admin + '/consumers', { method: 'POST', body })));
      assert.deepEqual(replies.map((r) => r.status).sort(), [201, 409, 409, 409], `round ${round}`);
    }
  });

  test('/status reports the database; while it is gone /status/ready is 503 and proxying goes on', async () => {
    const [a] = await nodes();
    const status = (await request(a.admin + '/status')).json();
    assert.deepEqual(status.database, { reachable: true });
    assert.equal((await request(a.admin + '/status/ready')).status, 200);
    await suite.pg.pause();
    try {
      assert.deepEqual((await request(a.admin + '/status')).json().database, { reachable: false });
      const ready = await request(a.admin + '/status/ready');
      assert.equal(ready.status, 503);
      assert.equal(ready.json().message, 'failed to connect to database');
      assert.equal((await request(a.http + '/echo/x')).status, 200, 'a route that needs no store is still proxied');
    } finally {
      await suite.pg.resume();
    }
    await waitFor(async () => (await request(a.admin + '/status/ready')).status === 200, 'ready again', 10_000);
  });

  test('a plugin that keeps state in one node lets one node run on the database, and the next after it stops', async () => {
    // A plugin of the test's own: the bundled ones become multi-process one after the other.
    const single: PluginDefinition = { name: 'single-node', version: '1', priority: 1, configSchema: { type: 'record', fields: {} }, create: () => ({}) };
    const registry = new Map([...bundledPlugins, [single.name, single]]);
    const withSingle = config(suite.schema('sole'), { plugins: [{ name: single.name }] });
    const first = await startWithRegistry(withSingle, registry);
    try {
      await assert.rejects(startWithRegistry(withSingle, registry), /another gateway node is running on this database, and plugin 'single-node' keeps state in one node/);
    } finally {
      await first.stop();
    }
    const second = await startWithRegistry(withSingle, registry);
    try {
      assert.equal((await request(second.admin + '/status/ready')).status, 200);
    } finally {
      await second.stop();
    }
  });
});

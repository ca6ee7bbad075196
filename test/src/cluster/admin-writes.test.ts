/**
 * Kong's traditional mode on real processes: services, routes and plugins written through the admin API
 * of one node are served by every worker of every node sharing the store, within db_update_frequency —
 * on a node of two workers (LevelDB owned by the primary) and on two nodes of two workers on one
 * PostgreSQL (a schema of their own per test). A change applies whole (a plugin's config never half
 * old, half new); upstreams and targets balance the other node's requests; deleting a service with
 * routes is Kong's 400, and a route's, service's, consumer's plugins and an upstream's targets go along;
 * a certificate created on one node is presented by the other for its SNIs, its key never shown;
 * concurrent conflicting PATCHes are each applied whole or refused with 409; gateway.yaml's entities
 * are read-only and their names taken; a refused change changes nothing; a node whose store is its own
 * keeps Kong DB-less's answer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { writeFileSync } from 'node:fs';
import tls from 'node:tls';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { request, runTollgate, spawnGateway, startUpstream, tempDir, writeConfig, type Reply, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { portOf, servedByBoth, servingPids, waitFor } from '../../helpers/support.ts';
import { testPki } from '../../fixtures/tls.ts';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

/** The time a node is given to apply what another process wrote: db_update_frequency is 0.5 s, the rest is slack for a loaded machine. */
const APPLY_TIMEOUT_MS = 10_000;

const gatewayYaml = (gateway: Record<string, unknown>) => ({
  gateway: { worker_processes: 2, db_update_frequency: 0.5, log_level: 'info', ...gateway },
  services: [{ name: 'declared', url: upstream.url, routes: [{ name: 'declared', paths: ['/declared'] }] }],
});

const write = (gw: SpawnedGateway, method: string, path: string, body?: Record<string, unknown>) => request(gw.admin + path, { method, body });

/** A declarative file for config:db_import: a service named `name` with a route at `/<name>`. */
function importFile(name: string): string {
  const file = join(tempDir('tollgate-import-'), 'kong.yaml');
  writeFileSync(file, stringify({ _format_version: '3.0', services: [{ name, url: upstream.url, routes: [{ name, paths: [`/${name}`] }] }] }));
  return file;
}

/** The subject alternative names of the certificate node `gw` presents for `servername`. */
function presentedNames(gw: SpawnedGateway, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portOf(gw.https), servername, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()?.subjectAltName ?? '');
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** What the echo upstream saw of the headers `names` (request-transformer adds them). */
const seen = (reply: Reply, ...names: string[]) => names.map((n) => reply.json().headers[n]);

/**
 * Requests under `base` on node `gw` (a path of their own each), every answer passing `check`, until both
 * of its workers have given one that `applied` accepts (their access log lines say which worker gave
 * which): another node's workers each apply a change within db_update_frequency, not at the same instant.
 */
async function appliedByBoth(gw: SpawnedGateway, base: string, applied: (reply: Reply) => boolean, check: (reply: Reply) => void = () => {}): Promise<void> {
  const accepted = new Set<string>();
  let sent = 0;
  await waitFor(async () => {
    const path = `${base}/${++sent}`;
    const reply = await request(gw.http + path);
    check(reply);
    if (applied(reply)) accepted.add(path);
    const pids = [...accepted].flatMap((p) => [...servingPids(gw, p)]);
    return new Set(pids).size === 2;
  }, `both workers of a node to apply the change under ${base}`, APPLY_TIMEOUT_MS);
}

/** The scenarios, on node `a` and node `b` (the same node of two workers when the store is LevelDB). */
function scenarios(nodes: () => Promise<[SpawnedGateway, SpawnedGateway]>): void {
  test('a service and route created through A are proxied by every worker of B; a plugin PATCHed on A applies whole there', async () => {
    const [a, b] = await nodes();
    const service = await write(a, 'POST', '/services', { name: 'orders', url: upstream.url });
    assert.equal(service.status, 201, service.text);
    assert.equal(service.json().port, upstream.port, 'the url is expanded');
    const route = await write(a, 'POST', '/services/orders/routes', { name: 'orders', paths: ['/orders'] });
    assert.equal(route.status, 201, route.text);
    assert.deepEqual(route.json().service, { id: service.json().id });
    await appliedByBoth(b, '/orders/created', (reply) => reply.status === 200);
    await servedByBoth(b, '/orders/everywhere');

    const plugin = await write(a, 'POST', '/routes/orders/plugins', { name: 'request-transformer', config: { add: { headers: ['x-a:1', 'x-b:1'] } } });
    assert.equal(plugin.status, 201, plugin.text);
    await waitFor(async () => seen(await request(b.http + '/orders'), 'x-a')[0] === '1', 'node B to run the plugin', APPLY_TIMEOUT_MS);
    const patched = await write(a, 'PATCH', `/plugins/${plugin.json().id}`, { config: { add: { headers: ['x-a:2', 'x-b:2'] } } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json().config.remove.headers.length, 0, 'the rest of the config keeps its defaults');
    // Every answer meanwhile carries the old pair or the new one, never one of each.
    await appliedByBoth(
      b,
      '/orders/patched',
      (reply) => seen(reply, 'x-a')[0] === '2',
      (reply) => {
        assert.equal(reply.status, 200, 'no request fails while the change spreads');
        const [x, y] = seen(reply, 'x-a', 'x-b');
        assert.equal(x, y, 'one configuration per request');
      },
    );
    await servedByBoth(b, '/orders/patched-everywhere', (reply) => assert.deepEqual(seen(reply, 'x-a', 'x-b'), ['2', '2']));
    const listed = (await request(b.admin + `/routes/${route.json().id}/plugins`)).json().data;
    assert.deepEqual(listed.map((p: { id: string }) => p.id), [plugin.json().id]);
  });

  test("deleting a service with routes is Kong's 400; a route's plugins go with it; then the service goes", async () => {
    const [a, b] = await nodes();
    const service = (await write(a, 'POST', '/services', { name: 'billing', url: upstream.url })).json();
    const route = (await write(a, 'POST', '/routes', { name: 'billing', paths: ['/billing'], service: { name: 'billing' } })).json();
    const plugin = (await write(a, 'POST', `/services/${service.id}/plugins`, { name: 'request-termination', config: { status_code: 418 } })).json();
    await waitFor(async () => (await request(b.http + '/billing')).status === 418, 'node B to run the service plugin', APPLY_TIMEOUT_MS);

    const refused = await write(b, 'DELETE', '/services/billing');
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.json(), {
      code: 4,
      name: 'foreign key violation',
      message: "an existing 'routes' entity references this 'services' entity",
      fields: { '@referenced_by': 'routes' },
    });
    assert.equal((await write(a, 'DELETE', `/routes/${route.id}`)).status, 204);
    assert.equal((await write(a, 'DELETE', '/services/billing')).status, 204);
    await appliedByBoth(b, '/billing', (reply) => reply.status === 404);
    await waitFor(async () => (await request(b.admin + `/plugins/${plugin.id}`)).status === 404, "the service's plugin to go with it", APPLY_TIMEOUT_MS);
    assert.equal((await write(b, 'DELETE', '/services/billing')).status, 204, 'deleting what is gone is a 204, as in Kong');
  });

  test("a plugin on a consumer created through the API runs on B, and goes with the consumer", async () => {
    const [a, b] = await nodes();
    await write(a, 'POST', '/services', { name: 'members', url: upstream.url });
    await write(a, 'POST', '/services/members/routes', { name: 'members', paths: ['/members'] });
    assert.equal((await write(a, 'POST', '/routes/members/plugins', { name: 'key-auth' })).status, 201);
    assert.equal((await write(a, 'POST', '/consumers', { username: 'alice' })).status, 201);
    assert.equal((await write(a, 'POST', '/consumers/alice/key-auth', { key: 'alice-key' })).status, 201);
    const plugin = await write(a, 'POST', '/consumers/alice/plugins', { name: 'request-termination', config: { status_code: 418 } });
    assert.equal(plugin.status, 201, plugin.text);
    const withKey = () => request(b.http + '/members', { headers: { apikey: 'alice-key' } });
    await waitFor(async () => (await withKey()).status === 418, "node B to run alice's plugin", APPLY_TIMEOUT_MS);
    const listed = async () => (await request(b.admin + '/consumers/alice/plugins')).json().data.map((p: { id: string }) => p.id);
    await waitFor(listed, "node B to list alice's plugin", APPLY_TIMEOUT_MS, (ids) => ids.join() === plugin.json().id);

    assert.equal((await write(a, 'DELETE', '/consumers/alice')).status, 204);
    assert.equal((await request(a.admin + `/plugins/${plugin.json().id}`)).status, 404, "the consumer's plugin went with it");
    await waitFor(async () => (await withKey()).status === 401, 'node B to forget alice', APPLY_TIMEOUT_MS);
  });

  test('an upstream and its targets created on A balance the requests of B; deleting the upstream takes its targets', async () => {
    const [a, b] = await nodes();
    const second = await startUpstream();
    try {
      assert.equal((await write(a, 'POST', '/upstreams', { name: 'pool' })).status, 201);
      const first = await write(a, 'POST', '/upstreams/pool/targets', { target: `127.0.0.1:${upstream.port}` });
      assert.equal(first.status, 201, first.text);
      assert.equal((await write(b, 'POST', '/upstreams/pool/targets', { target: `127.0.0.1:${upstream.port}` })).status, 409, 'an address once per upstream');
      await write(a, 'POST', '/services', { name: 'pooled', host: 'pool', port: 80 });
      await write(a, 'POST', '/services/pooled/routes', { name: 'pooled', paths: ['/pooled'] });
      await appliedByBoth(b, '/pooled/first', (reply) => reply.status === 200);

      assert.equal((await write(b, 'POST', '/upstreams/pool/targets', { target: `127.0.0.1:${second.port}` })).status, 201);
      await waitFor(async () => {
        await request(b.http + '/pooled/second');
        return second.requests.some((r) => r.path === '/second');
      }, 'node B to balance onto the second target', APPLY_TIMEOUT_MS);
      const patched = await write(a, 'PATCH', `/upstreams/pool/targets/127.0.0.1:${upstream.port}`, { weight: 0 });
      assert.deepEqual([patched.status, patched.json().weight], [200, 0]);

      assert.equal((await write(a, 'DELETE', '/upstreams/pool')).status, 204);
      await waitFor(async () => (await request(b.admin + '/upstreams/pool')).status === 404, 'node B to forget the upstream', APPLY_TIMEOUT_MS);
      assert.equal((await write(a, 'PATCH', `/upstreams/pool/targets/${first.json().id}`, { weight: 1 })).status, 404, 'its targets went with it');
    } finally {
      await second.close();
    }
  });

  test('a certificate created on A is presented by B for its SNIs, never showing its key; it goes with its SNIs once unused', async () => {
    const [a, b] = await nodes();
    const pair = await (await testPki()).named('api.test');
    const created = await write(a, 'POST', '/certificates', { cert: pair.cert, key: pair.key, snis: ['api.test'] });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual([created.json().snis, created.json().key], [['api.test'], undefined]);
    const id = created.json().id;
    await waitFor(async () => (await presentedNames(b, 'api.test')).includes('DNS:api.test'), 'node B to present the certificate', APPLY_TIMEOUT_MS);
    assert.equal((await write(b, 'POST', `/certificates/${id}/snis`, { name: 'api.test' })).status, 409);

    const client = await write(a, 'POST', '/services', { name: 'mtls', url: 'https://127.0.0.1:9', client_certificate: { id } });
    assert.equal(client.status, 201, client.text);
    assert.equal((await write(a, 'DELETE', `/certificates/${id}`)).json().message, "an existing 'services' entity references this 'certificates' entity");
    assert.equal((await write(a, 'DELETE', '/services/mtls')).status, 204);
    assert.equal((await write(a, 'DELETE', `/certificates/${id}`)).status, 204);
    await waitFor(async () => (await request(b.admin + '/snis/api.test')).status === 404, 'node B to forget the SNI', APPLY_TIMEOUT_MS);
  });

  test('20 concurrent conflicting PATCHes: each is applied whole or refused with 409', async () => {
    const [a, b] = await nodes();
    await write(a, 'POST', '/services', { name: 'race', url: upstream.url });
    await write(a, 'POST', '/services/race/routes', { name: 'race', paths: ['/race'] });
    const plugin = (await write(a, 'POST', '/routes/race/plugins', { name: 'request-transformer', config: { add: { headers: ['x-a:0', 'x-b:0'] } } })).json();
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        write(i % 2 ? a : b, 'PATCH', `/plugins/${plugin.id}`, { config: { add: { headers: [`x-a:${i + 1}`, `x-b:${i + 1}`] } } }),
      ),
    );
    for (const reply of replies) assert.ok([200, 409].includes(reply.status), `${reply.status} ${reply.text}`);
    const applied = replies.flatMap((r, i) => (r.status === 200 ? [String(i + 1)] : []));
    assert.ok(applied.length > 0, 'at least one PATCH lands');
    // Whichever process answers, it shows one acknowledged PATCH whole, and both nodes come to the same one.
    const pair = (headers: string[]) => headers.map((h) => h.split(':')[1]);
    await waitFor(async () => {
      const [x, y] = pair((await request(a.admin + `/plugins/${plugin.id}`)).json().config.add.headers);
      assert.equal(x, y, 'the stored config is one PATCH, whole');
      assert.ok(applied.includes(x), `the stored config is an acknowledged PATCH's (${x} of ${applied})`);
      const [p, q] = seen(await request(b.http + '/race'), 'x-a', 'x-b');
      assert.equal(p, q, 'node B runs one PATCH, whole');
      return p === x;
    }, 'nodes A and B to run the same PATCH', APPLY_TIMEOUT_MS);
  });

  test("gateway.yaml's entities are read-only and their names taken; a refused change changes nothing", async () => {
    const [a, b] = await nodes();
    const taken = await write(a, 'POST', '/services', { name: 'declared', url: upstream.url });
    assert.equal(taken.status, 409);
    assert.deepEqual(taken.json().fields, { name: 'declared' });
    assert.equal((await write(b, 'POST', '/routes', { name: 'declared', paths: ['/other'] })).status, 409, "a route can't take a declared route's name");
    const readOnly = await write(a, 'PATCH', '/services/declared', { port: 1 });
    assert.equal(readOnly.status, 405);
    assert.match(readOnly.json().message, /declared in gateway\.yaml/);
    assert.equal((await write(a, 'DELETE', '/routes/declared')).status, 405);

    const before = (await request(a.admin + '/status')).json().configuration_hash;
    const invalid = await write(a, 'POST', '/routes', { name: 'broken', paths: ['no-slash'] });
    assert.equal(invalid.status, 400);
    assert.equal(invalid.json().name, 'schema violation');
    assert.ok(invalid.json().fields.paths, invalid.text);
    const unknownPlugin = await write(a, 'POST', '/routes/declared/plugins', { name: 'no-such-plugin' });
    assert.equal(unknownPlugin.status, 400);
    assert.equal((await request(a.admin + '/status')).json().configuration_hash, before, 'nothing changed');
    assert.equal((await request(b.admin + '/routes/broken')).status, 404);
    // A route attached to a declared service is the API's own, and the declared service can then not go.
    const attached = await write(b, 'POST', '/services/declared/routes', { name: 'attached', paths: ['/attached'] });
    assert.equal(attached.status, 201, attached.text);
    await waitFor(async () => (await request(a.http + '/attached')).status === 200, 'node A to proxy /attached', APPLY_TIMEOUT_MS);
  });
}

describe('a node of two workers on LevelDB', () => {
  const started: SpawnedGateway[] = [];
  after(async () => {
    for (const gw of started) gw.kill('SIGKILL');
  });
  scenarios(async () => {
    const node = await spawnGateway(gatewayYaml({}));
    started.push(node);
    return [node, node];
  });

  test("Kong's shapes: PUT upserts by name, forms, nested paths under nothing, fields the API does not take", async () => {
    const node = await spawnGateway(gatewayYaml({}));
    started.push(node);
    const created = await write(node, 'PUT', '/services/upserted', { url: upstream.url });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().name, 'upserted');
    const replaced = await write(node, 'PUT', '/services/upserted', { host: '127.0.0.1', port: upstream.port, retries: 1 });
    assert.equal(replaced.status, 200);
    assert.deepEqual([replaced.json().id, replaced.json().retries, replaced.json().created_at], [created.json().id, 1, created.json().created_at]);
    assert.equal((await write(node, 'PUT', '/services/declared', { url: upstream.url })).status, 405);

    const form = await request(node.admin + '/routes', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=formed&paths[]=/formed&strip_path=false&service.name=upserted',
    });
    assert.equal(form.status, 201, form.text);
    assert.deepEqual([form.json().strip_path, form.json().service.id], [false, created.json().id]);
    assert.equal((await request(node.http + '/formed/x')).json().path, '/formed/x');

    assert.equal((await write(node, 'POST', '/services/nothing/routes', { paths: ['/n'] })).status, 404);
    assert.equal((await write(node, 'PATCH', '/routes/nothing', { paths: ['/n'] })).status, 404);
    const nested = await write(node, 'POST', '/services', { name: 'nested', url: upstream.url, routes: [{ paths: ['/n'] }] });
    assert.deepEqual([nested.status, nested.json().fields], [400, { routes: 'unknown field' }]);
    const badId = await write(node, 'POST', '/services', { id: 'not-a-uuid', url: upstream.url });
    assert.deepEqual([badId.status, badId.json().fields], [400, { id: 'expected a valid UUID' }]);
    const dangling = await write(node, 'POST', '/routes', { paths: ['/d'], service: { name: 'nothing' } });
    assert.deepEqual([dangling.status, dangling.json().name], [400, 'foreign key violation']);

    // Who changed what: one log line per write, and the node's counter.
    const lines = node.output().split('\n').filter((l) => l.includes('"msg":"admin API changed the configuration"')).map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => [l.method, l.entity, l.operation]), [['PUT', 'services', 'create'], ['PUT', 'services', 'update'], ['POST', 'routes', 'create']]);
    assert.equal(lines[0].id, created.json().id);
    assert.match(lines[0].client, /^127\.0\.0\.1:\d+$/);
    const metrics = (await request(node.admin + '/metrics')).text;
    assert.match(metrics, /tollgate_admin_entity_writes_total\{entity="services",operation="create"\} 1\n/);
    assert.match(metrics, /tollgate_admin_entity_writes_total\{entity="services",operation="update"\} 1\n/);
  });

  test('config:db_import fills the store of a stopped node, config:db_export writes it back (also as Kong spells them); a clashing import changes nothing', async () => {
    const dataDir = tempDir();
    const configFile = writeConfig(gatewayYaml({}), dataDir);
    const imported = await runTollgate(['config:db_import', '--file', importFile('imported'), '--config', configFile]);
    assert.equal(imported.code, 0, imported.output);
    assert.match(imported.output, /imported 1 services, 1 routes, 0 plugins, .* into the store \(version 1\)/);
    const clash = await runTollgate(['config:db_import', '--file', importFile('declared'), '--config', configFile]);
    assert.equal(clash.code, 1, clash.output);
    assert.match(clash.output, /uniqueness violation: 'services' entity with name set to 'declared'/);

    const node = await spawnGateway(gatewayYaml({}), { dataDir });
    started.push(node);
    await servedByBoth(node, '/imported');
    assert.equal((await write(node, 'POST', '/services', { name: 'later', url: upstream.url })).status, 201);
    node.kill('SIGTERM');
    assert.equal(await node.exited, 0);
    const exportFile = join(tempDir(), 'export.yaml');
    const exported = await runTollgate(['config:db_export', '--file', exportFile, '--config', configFile]);
    assert.equal(exported.code, 0, exported.output);
    assert.match(exported.output, /exported 2 services, 1 routes, 0 plugins, .* \(version 2\)/);
    // Kong's spelling, the file positional, does the same.
    const again = await runTollgate(['config', 'db_import', exportFile, '--config', configFile]);
    assert.equal(again.code, 0, `the export loads as it is: ${again.output}`);
    assert.match(again.output, /imported 2 services, 1 routes/);
  });

  test("a node whose store is its own keeps Kong DB-less's answer", async () => {
    const single = await spawnGateway(gatewayYaml({ worker_processes: 1 }));
    started.push(single);
    const refused = await write(single, 'POST', '/services', { name: 'x', url: upstream.url });
    assert.equal(refused.status, 405);
    assert.equal(refused.json().message, "cannot create 'services' entities when not using a database");
    assert.equal((await write(single, 'POST', '/services/declared/routes', { paths: ['/x'] })).status, 405);
  });
});

describe('two nodes of two workers on one PostgreSQL', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();
  const nodesOn = async (yaml: Record<string, any>) => {
    const nodes = [await spawnGateway(yaml), await spawnGateway(yaml)] as [SpawnedGateway, SpawnedGateway];
    for (const node of nodes) suite.track(async () => node.kill('SIGKILL'));
    return nodes;
  };
  scenarios(() => nodesOn(gatewayYaml(suite.pg.settings({ pg_schema: suite.schema('writes') }))));

  test('config:db_import into a running cluster is applied by every worker of its nodes', async () => {
    const yaml = gatewayYaml(suite.pg.settings({ pg_schema: suite.schema('import') }));
    const [, b] = await nodesOn(yaml);
    const imported = await runTollgate(['config:db_import', '--file', importFile('imported'), '--config', writeConfig(yaml, tempDir())]);
    assert.equal(imported.code, 0, imported.output);
    await appliedByBoth(b, '/imported', (reply) => reply.status === 200);
  });
});

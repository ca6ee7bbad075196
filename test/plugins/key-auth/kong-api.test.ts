/**
 * Kong's key-auth admin API cases (spec/03-plugins/09-key-auth/01-api_spec.lua), on the API the toolkit
 * generates from the `keyauth_credentials` entity: `/consumers/{c}/key-auth[/{id or key}]`,
 * `/key-auths[/{id or key}[/consumer]]`, create, upsert, update, delete, paging, ttl, Kong's errors; keys
 * of gateway.yaml are read-only, and a key is shown only in the answer that created or changed it (it is
 * stored as its digest).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfigText } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';

let gw: TestGateway;
let upstream: Upstream;
let bob: Record<string, any>;

before(async () => {
  upstream = await startUpstream();
  gw = await startGateway({
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'keyed', paths: ['/keyed'], plugins: [{ name: 'key-auth' }] }] }],
    consumers: [{ username: 'declared', keyauth_credentials: [{ key: 'declared-key' }] }],
  });
  bob = (await admin('POST', '/consumers', { username: 'bob' })).json();
  await admin('POST', '/consumers', { username: 'alice' });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

function admin(method: string, path: string, body?: Record<string, unknown> | string, headers?: Record<string, string>): Promise<Reply> {
  return request(gw.admin + path, { method, body, headers });
}

const call = (key: string) => request(`${gw.http}/keyed/x`, { headers: { apikey: key } });

async function create(consumer: string, body: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const reply = await admin('POST', `/consumers/${consumer}/key-auth`, body);
  assert.equal(reply.status, 201, reply.text);
  return reply.json();
}

describe('Kong key-auth API: /consumers/{c}/key-auth', () => {
  it('KP01 POST with a key', async () => {
    const created = await create('bob', { key: '1234' });
    assert.equal(created.consumer.id, bob.id);
    assert.equal(created.key, '1234');
    assert.equal((await call('1234')).status, 200);
  });

  it('KP02 POST without a key: a random one, different each time, shown in the answer', async () => {
    const first = await create('bob');
    const second = await create('bob');
    assert.match(first.key, /^[A-Za-z0-9]{32}$/);
    assert.notEqual(first.key, second.key);
    assert.equal((await call(first.key)).status, 200);
  });

  it('KP03 POST with tags; and as a form (curl -d), values read by the schema', async () => {
    const created = await create('bob', { key: 'keyauth-with-tags', tags: ['tag1', 'tag2'] });
    assert.deepEqual(created.tags, ['tag1', 'tag2']);
    const form = await admin('POST', '/consumers/bob/key-auth', 'key=form-key&tags=solo&ttl=100', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 201, form.text);
    assert.deepEqual(form.json().tags, ['solo']);
    assert.ok(form.json().ttl > 90);
  });

  it('KP04 POST with a ttl: gone once it has run out', async () => {
    const created = await create('bob', { ttl: 1 });
    assert.equal(typeof created.key, 'string');
    await new Promise((r) => setTimeout(r, 1300));
    assert.equal((await admin('GET', `/consumers/bob/key-auth/${created.id}`)).status, 404);
  });

  it('KP05 POST for an unknown consumer is 404; a key already taken is 409', async () => {
    assert.equal((await admin('POST', '/consumers/nobody/key-auth', { key: 'x' })).status, 404);
    await create('bob', { key: 'taken-key' });
    const taken = await admin('POST', '/consumers/alice/key-auth', { key: 'taken-key' });
    assert.equal(taken.status, 409, taken.text);
    assert.equal(taken.json().name, 'unique constraint violation');
    assert.ok(!taken.text.includes('taken-key'), 'the conflict does not echo the key');
    assert.equal((await admin('POST', '/consumers/alice/key-auth', { key: 'declared-key' })).status, 409, 'declared keys are taken too');
  });

  it('KP06 GET lists the consumer\'s keys (values never shown again); entries with a ttl carry it', async () => {
    await admin('POST', '/consumers', { username: 'lister' });
    for (let i = 0; i < 3; i++) await create('lister', { ttl: 100 });
    const listed = await admin('GET', '/consumers/lister/key-auth');
    assert.equal(listed.status, 200);
    assert.equal(listed.json().data.length, 3);
    for (const credential of listed.json().data) {
      assert.equal(credential.key, null);
      assert.ok(credential.ttl > 0 && credential.ttl <= 100);
    }
  });
});

describe('Kong key-auth API: /consumers/{c}/key-auth/{id or key}', () => {
  let credential: Record<string, any>;
  before(async () => {
    credential = await create('bob', { key: 'by-key-1' });
  });

  it('KP07 GET by id and by key', async () => {
    for (const key of [credential.id, 'by-key-1']) {
      const reply = await admin('GET', `/consumers/bob/key-auth/${key}`);
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.json().id, credential.id);
    }
  });

  it("KP08 GET only if the credential belongs to that consumer", async () => {
    assert.equal((await admin('GET', `/consumers/alice/key-auth/${credential.id}`)).status, 404);
    assert.equal((await admin('GET', '/consumers/alice/key-auth/by-key-1')).status, 404);
  });

  it('KP09 PUT by key creates it (200); PUT by id without a key generates one', async () => {
    const byKey = await admin('PUT', '/consumers/bob/key-auth/put-key', {});
    assert.equal(byKey.status, 200, byKey.text);
    assert.equal(byKey.json().key, 'put-key');
    const id = crypto.randomUUID();
    const byId = await admin('PUT', `/consumers/bob/key-auth/${id}`, {});
    assert.equal(byId.status, 200, byId.text);
    assert.equal(byId.json().id, id);
    assert.match(byId.json().key, /^[A-Za-z0-9]{32}$/);
  });

  it('KP10 PATCH by id and by key', async () => {
    const patched = await admin('PATCH', `/consumers/bob/key-auth/${credential.id}`, { key: '4321' });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json().key, '4321');
    const again = await admin('PATCH', '/consumers/bob/key-auth/4321', { key: 'by-key-1' });
    assert.equal(again.status, 200, again.text);
    assert.equal((await call('4321')).status, 401);
    assert.equal((await call('by-key-1')).status, 200);
  });

  it('KP11 PATCH with invalid input', async () => {
    const reply = await admin('PATCH', `/consumers/bob/key-auth/${credential.id}`, { key: 123 });
    assert.equal(reply.status, 400);
    assert.deepEqual(reply.json(), { code: 2, name: 'schema violation', message: 'schema violation (key: expected a string)', fields: { key: 'expected a string' } });
  });

  it('KP12 DELETE, then 404 for it, for a bad key and an unknown id', async () => {
    const doomed = await create('bob');
    assert.equal((await admin('DELETE', `/consumers/bob/key-auth/${doomed.id}`)).status, 204);
    assert.equal((await call(doomed.key)).status, 401);
    assert.equal((await admin('DELETE', '/consumers/bob/key-auth/blah')).status, 404);
    assert.equal((await admin('DELETE', '/consumers/bob/key-auth/00000000-0000-0000-0000-000000000000')).status, 404);
  });
});

describe('Kong key-auth API: /key-auths', () => {
  it('KP13 GET all, with or without a trailing slash', async () => {
    const count = (await admin('GET', '/key-auths')).json().data.length;
    assert.ok(count >= 3);
    assert.equal((await admin('GET', '/key-auths/')).json().data.length, count);
  });

  it('KP14 paginates with size and next', async () => {
    const first = (await admin('GET', '/key-auths?size=3')).json();
    assert.equal(first.data.length, 3);
    assert.match(first.next, /^\/key-auths\?offset=/);
    const second = (await admin('GET', first.next)).json();
    assert.notDeepEqual(second.data, first.data);
    assert.equal((await admin('GET', '/key-auths?size=0')).json().name, 'invalid size');
  });

  it('KP15 POST needs a consumer; with {id} or {username} it creates', async () => {
    const missing = await admin('POST', '/key-auths', { key: 'top-level' });
    assert.equal(missing.status, 400);
    assert.equal(missing.json().message, 'schema violation (consumer: required field missing)');
    const unknown = await admin('POST', '/key-auths', { key: 'top-level', consumer: { id: crypto.randomUUID() } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json().name, 'foreign key violation');
    const created = await admin('POST', '/key-auths', { key: 'top-level', consumer: { id: bob.id } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().consumer.id, bob.id);
    assert.equal((await admin('POST', '/key-auths', { key: 'top-level-2', consumer: { username: 'alice' } })).status, 201);
  });

  it('KP16 PUT /key-auths/{key} needs a consumer; with one it creates', async () => {
    const missing = await admin('PUT', '/key-auths/1234-put', {});
    assert.equal(missing.status, 400);
    assert.equal(missing.json().message, 'schema violation (consumer: required field missing)');
    const created = await admin('PUT', '/key-auths/1234-put', { consumer: { id: bob.id } });
    assert.equal(created.status, 200, created.text);
    assert.equal(created.json().key, '1234-put');
  });

  it("KP17 /key-auths/{id or key}/consumer is the credential's consumer; 404 for unknown ones", async () => {
    const credential = await create('bob', { key: 'owner-lookup' });
    for (const key of [credential.id, 'owner-lookup']) assert.deepEqual((await admin('GET', `/key-auths/${key}/consumer`)).json(), bob);
    assert.equal((await admin('GET', `/key-auths/${crypto.randomUUID()}/consumer`)).status, 404);
    assert.equal((await admin('GET', '/key-auths/no-such-key/consumer')).status, 404);
  });

  it('KP18 GET /key-auths?key= finds a credential by its key', async () => {
    const found = (await admin('GET', '/key-auths?key=owner-lookup')).json().data;
    assert.equal(found.length, 1);
    assert.equal(found[0].consumer.id, bob.id);
    assert.deepEqual((await admin('GET', '/key-auths?key=nothing')).json().data, []);
  });

  it('KP19 keys of gateway.yaml are read-only (405), and work', async () => {
    assert.equal((await admin('GET', '/key-auths/declared-key')).status, 200);
    for (const [method, body] of [['PATCH', { key: 'x' }], ['PUT', { consumer: { id: bob.id } }], ['DELETE', undefined]] as const) {
      const reply = await admin(method, '/key-auths/declared-key', body);
      assert.equal(reply.status, 405, `${method} ${reply.text}`);
      assert.equal(reply.json().name, 'operation unsupported');
    }
    assert.equal((await call('declared-key')).status, 200);
  });

  it('KP20 the top-level DELETE of an unknown key is 204, as Kong', async () => {
    assert.equal((await admin('DELETE', '/key-auths/never-was')).status, 204);
  });
});

describe('Kong key-auth: config schema', () => {
  const load = (config: Record<string, unknown>) =>
    loadConfigText(JSON.stringify({ _format_version: '3.0', routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'key-auth', config }] }] }), '/tmp/key-auth.yaml', bundledPlugins);

  it("KP21 key_names are header names (Kong's message)", () => {
    const bad = load({ key_names: ['hello\\world'] });
    assert.equal(bad.ok, false);
    assert.match(String(!bad.ok && bad.errors[0]), /config\.key_names\[0\]: bad header name 'hello\\world', allowed characters are A-Z, a-z, 0-9, '_', and '-'/);
    assert.equal(load({ key_names: ['hello-world'] }).ok, true);
  });

  it("KP22 Kong's defaults", () => {
    const loaded = load({});
    assert.ok(loaded.ok);
    assert.deepEqual(loaded.config.plugins[0].config, {
      key_names: ['apikey'],
      hide_credentials: false,
      key_in_header: true,
      key_in_query: true,
      key_in_body: false,
      run_on_preflight: true,
    });
  });

  it('KP23 a key declared twice is refused without being echoed', () => {
    const loaded = loadConfigText(
      JSON.stringify({ _format_version: '3.0', consumers: [{ username: 'a', keyauth_credentials: [{ key: 'dup-secret' }, { key: 'dup-secret' }] }] }),
      '/tmp/key-auth.yaml',
      bundledPlugins,
    );
    assert.equal(loaded.ok, false);
    const message = String(!loaded.ok && loaded.errors[0]);
    assert.match(message, /uniqueness violation: 'keyauth_credentials' entity with key already declared/);
    assert.ok(!message.includes('dup-secret'));
  });
});

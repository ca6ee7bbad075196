/**
 * Kong's hmac-auth admin API and schema cases (spec/03-plugins/19-hmac-auth/01-schema_spec.lua and
 * 02-api_spec.lua) on the API the core generates from `hmacauth_credentials`:
 * `/consumers/{c}/hmac-auth[/{id or username}]`, `/hmac-auths[/{id or username}[/consumer]]`, create (a secret
 * generated when none is given), upsert, update, delete, paging, Kong's errors; credentials of gateway.yaml are
 * read-only, their secret may be read from the environment (`{vault://env/…}`) and they change on reload; a
 * credential written here signs requests at once, and no longer once deleted.
 */
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { loadConfigText } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';

let gw: TestGateway;
let upstream: Upstream;
let bob: Record<string, any>;

/** The file: a credential with its secret, and one whose secret is read from the environment. */
function declaring(secret: string): Record<string, any> {
  return {
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'signed', paths: ['/signed'], plugins: [{ name: 'hmac-auth' }] }] }],
    consumers: [
      {
        username: 'declared',
        hmacauth_credentials: [
          { username: 'declared-signer', secret },
          { username: 'vaulted-signer', secret: '{vault://env/tollgate_test_hmac_secret}' },
        ],
      },
    ],
  };
}

before(async () => {
  // Worker processes inherit the environment the vault reference reads.
  process.env.TOLLGATE_TEST_HMAC_SECRET = 'from-the-environment';
  upstream = await startUpstream();
  gw = await startGateway(declaring('declared-secret'));
  bob = (await admin('POST', '/consumers', { username: 'bob', custom_id: '1234' })).json();
  await admin('POST', '/consumers', { username: 'alice' });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(gw.admin + path, { method, body });
}

async function create(consumer: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const reply = await admin('POST', `/consumers/${consumer}/hmac-auth`, body);
  assert.equal(reply.status, 201, reply.text);
  return reply.json();
}

/** A request to the signed route, signed over its Date by `username` with `secret`. */
function signedCall(username: string, secret: string): Promise<Reply> {
  const date = new Date().toUTCString();
  const signature = createHmac('sha256', secret).update(`date: ${date}`).digest('base64');
  const authorization = `hmac username="${username}",algorithm="hmac-sha256",headers="date",signature="${signature}"`;
  return request(`${gw.http}/signed/x`, { headers: { date, authorization } });
}

describe('Kong hmac-auth API: /consumers/{c}/hmac-auth', () => {
  it('HP01 POST creates a credential for the consumer, which signs requests at once', async () => {
    const created = await create('bob', { username: 'bob', secret: '1234' });
    assert.equal(created.consumer.id, bob.id);
    assert.equal(created.secret, '1234');
    assert.equal(typeof created.created_at, 'number');
    assert.equal((await signedCall('bob', '1234')).status, 200);
    assert.equal((await signedCall('bob', 'wrong')).status, 401);
  });

  it('HP02 POST without a secret generates one, shown and usable', async () => {
    const created = await create('bob', { username: 'bob-random' });
    assert.match(created.secret, /^[A-Za-z0-9]{32}$/);
    assert.notEqual((await create('bob', { username: 'bob-random-2' })).secret, created.secret);
    assert.equal((await signedCall('bob-random', created.secret)).status, 200);
  });

  it('HP03 POST with tags', async () => {
    const created = await create('bob', { username: 'bobby', tags: ['tag1', 'tag2'] });
    assert.equal(created.consumer.id, bob.id);
    assert.deepEqual(created.tags, ['tag1', 'tag2']);
  });

  it('HP04 errors: username required; a username taken is 409, also by another consumer', async () => {
    const empty = await admin('POST', '/consumers/bob/hmac-auth', {});
    assert.equal(empty.status, 400);
    assert.deepEqual(empty.json().fields, { username: 'required field missing' });
    assert.equal((await admin('POST', '/consumers/alice/hmac-auth', { username: 'bob' })).status, 409);
    assert.equal((await admin('POST', '/consumers/nobody/hmac-auth', { username: 'x' })).status, 404);
  });

  it("HP05 GET lists the consumer's credentials", async () => {
    await admin('POST', '/consumers', { username: 'lister' });
    await create('lister', { username: 'lister-1' });
    const list = (await admin('GET', '/consumers/lister/hmac-auth')).json();
    assert.equal(list.data.length, 1);
    assert.equal(list.data[0].username, 'lister-1');
  });
});

describe('Kong hmac-auth API: /consumers/{c}/hmac-auth/{id or username}', () => {
  let credential: Record<string, any>;
  before(async () => {
    credential = await create('bob', { username: 'alice-cred' });
  });

  it('HP06 GET by id and by username, under its own consumer only', async () => {
    for (const key of [credential.id, 'alice-cred']) assert.equal((await admin('GET', `/consumers/bob/hmac-auth/${key}`)).json().id, credential.id);
    assert.equal((await admin('GET', `/consumers/alice/hmac-auth/${credential.id}`)).status, 404);
  });

  it('HP07 PATCH by id and by username; an empty username is refused', async () => {
    const byId = await admin('PATCH', `/consumers/bob/hmac-auth/${credential.id}`, { username: 'alice' });
    assert.equal(byId.status, 200, byId.text);
    assert.equal(byId.json().username, 'alice');
    const byName = await admin('PATCH', '/consumers/bob/hmac-auth/alice', { username: 'aliceUPD', secret: 'changed' });
    assert.equal(byName.json().username, 'aliceUPD');
    assert.equal((await signedCall('aliceUPD', 'changed')).status, 200);
    const bad = await admin('PATCH', `/consumers/bob/hmac-auth/${credential.id}`, { username: '' });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json().fields, { username: 'length must be at least 1' });
  });

  it('HP08 PUT by username creates it; a secret that is no string is refused', async () => {
    const put = await admin('PUT', '/consumers/bob/hmac-auth/foo', { secret: '1234' });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().username, 'foo');
    assert.equal(put.json().consumer.id, bob.id);
    const bad = await admin('PUT', '/consumers/bob/hmac-auth/foo', { secret: 123 });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.json().fields, { secret: 'expected a string' });
  });

  it('HP09 DELETE; then it no longer signs; a missing username or id is 404', async () => {
    await create('bob', { username: 'doomed', secret: 'doomed-secret' });
    assert.equal((await signedCall('doomed', 'doomed-secret')).status, 200);
    assert.equal((await admin('DELETE', '/consumers/bob/hmac-auth/doomed')).status, 204);
    assert.equal((await signedCall('doomed', 'doomed-secret')).status, 401);
    assert.equal((await admin('DELETE', '/consumers/bob/hmac-auth/blah')).status, 404);
    assert.equal((await admin('DELETE', `/consumers/bob/hmac-auth/${randomUUID()}`)).status, 404);
  });
});

describe('Kong hmac-auth API: /hmac-auths', () => {
  it('HP10 GET all, with or without a trailing slash, and pages', async () => {
    const all = (await admin('GET', '/hmac-auths')).json().data.length;
    assert.ok(all >= 3);
    assert.equal((await admin('GET', '/hmac-auths/')).json().data.length, all);
    const first = (await admin('GET', '/hmac-auths?size=1')).json();
    assert.equal(first.data.length, 1);
    const second = (await admin('GET', first.next)).json();
    assert.equal(second.data.length, 1);
    assert.notDeepEqual(second.data, first.data);
  });

  it('HP11 POST and PUT need a consumer; with one they create', async () => {
    const missing = await admin('POST', '/hmac-auths', { username: 'bob-top' });
    assert.equal(missing.status, 400);
    assert.equal(missing.json().message, 'schema violation (consumer: required field missing)');
    const created = await admin('POST', '/hmac-auths', { username: 'bob-top', consumer: { id: bob.id } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().username, 'bob-top');
    const putMissing = await admin('PUT', '/hmac-auths/bob-put', {});
    assert.equal(putMissing.json().message, 'schema violation (consumer: required field missing)');
    const put = await admin('PUT', '/hmac-auths/bob-put', { consumer: { id: bob.id } });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().username, 'bob-put');
  });

  it("HP12 /hmac-auths/{id or username}/consumer is the credential's consumer; 404 for unknown ones", async () => {
    const credential = await create('bob', { username: 'owned' });
    for (const key of [credential.id, 'owned']) assert.deepEqual((await admin('GET', `/hmac-auths/${key}/consumer`)).json(), bob);
    assert.equal((await admin('GET', `/hmac-auths/${randomUUID()}/consumer`)).status, 404);
    assert.equal((await admin('GET', '/hmac-auths/nobody-at-all/consumer')).status, 404);
  });

  it('HP13 credentials of gateway.yaml are read-only (405), and sign', async () => {
    assert.equal((await admin('GET', '/hmac-auths/declared-signer')).json().secret, 'declared-secret');
    const reply = await admin('PATCH', '/hmac-auths/declared-signer', { secret: 'x' });
    assert.equal(reply.status, 405, reply.text);
    assert.equal((await signedCall('declared-signer', 'declared-secret')).status, 200);
  });

  it('HP14 a secret of the file read from the environment ({vault://env/…}), again on reload; the file itself changed on reload', async () => {
    assert.equal((await signedCall('vaulted-signer', 'from-the-environment')).status, 200);
    assert.equal((await signedCall('vaulted-signer', '{vault://env/tollgate_test_hmac_secret}')).status, 401);
    assert.equal(await gw.reload(declaring('declared-secret-2')), true);
    assert.equal((await signedCall('declared-signer', 'declared-secret')).status, 401);
    assert.equal((await signedCall('declared-signer', 'declared-secret-2')).status, 200);
    assert.equal((await signedCall('vaulted-signer', 'from-the-environment')).status, 200);
  });

  it('HP15 deleting the consumer deletes its credentials', async () => {
    await admin('POST', '/consumers', { username: 'leaving' });
    await create('leaving', { username: 'leaving-signer', secret: 'bye' });
    assert.equal((await admin('DELETE', '/consumers/leaving')).status, 204);
    assert.equal((await admin('GET', '/hmac-auths/leaving-signer')).status, 404);
    assert.equal((await signedCall('leaving-signer', 'bye')).status, 401);
  });
});

describe('Kong hmac-auth: config schema', () => {
  const load = (config: Record<string, unknown>) =>
    loadConfigText(JSON.stringify({ _format_version: '3.0', routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'hmac-auth', config }] }] }), '/tmp/hmac-auth.yaml', bundledPlugins);
  const errorsOf = (config: Record<string, unknown>) => {
    const loaded = load(config);
    return loaded.ok ? [] : loaded.errors.map(String);
  };

  it("HP16 Kong's defaults; a clock skew of 10 is accepted", () => {
    const loaded = load({});
    assert.ok(loaded.ok);
    assert.deepEqual(loaded.config.plugins[0].config, {
      hide_credentials: false,
      clock_skew: 300,
      validate_request_body: false,
      enforce_headers: [],
      algorithms: ['hmac-sha1', 'hmac-sha256', 'hmac-sha384', 'hmac-sha512'],
    });
    assert.deepEqual(errorsOf({ clock_skew: 10 }), []);
  });

  it("HP17 Kong's messages: a negative clock skew, an unknown algorithm", () => {
    assert.match(errorsOf({ clock_skew: -10 }).join('\n'), /config\.clock_skew: value must be greater than 0/);
    assert.match(errorsOf({ algorithms: ['sha1024'] }).join('\n'), /config\.algorithms\[0\]: expected one of: hmac-sha1, hmac-sha256, hmac-sha384, hmac-sha512/);
  });

  it('HP18 a username declared twice is refused', () => {
    const loaded = loadConfigText(
      JSON.stringify({ _format_version: '3.0', consumers: [{ username: 'a', hmacauth_credentials: [{ username: 'twice' }] }, { username: 'b', hmacauth_credentials: [{ username: 'twice' }] }] }),
      '/tmp/hmac-auth.yaml',
      bundledPlugins,
    );
    assert.equal(loaded.ok, false);
    assert.match(String(!loaded.ok && loaded.errors[0]), /uniqueness violation: 'hmacauth_credentials' entity with username set to 'twice' already declared/);
  });

  it('HP19 a secret referring to an unset variable is an error at its field', () => {
    const loaded = loadConfigText(
      JSON.stringify({ _format_version: '3.0', consumers: [{ username: 'a', hmacauth_credentials: [{ username: 'u', secret: '{vault://env/tollgate_test_unset_hmac}' }] }] }),
      '/tmp/hmac-auth.yaml',
      bundledPlugins,
    );
    assert.equal(loaded.ok, false);
    assert.match(String(!loaded.ok && loaded.errors[0]), /consumers\[0\]\.hmacauth_credentials\[0\]\.secret: cannot resolve \{vault:\/\/env\/tollgate_test_unset_hmac\}: environment variable TOLLGATE_TEST_UNSET_HMAC is not set/);
  });
});

/**
 * Kong's admin API cases (reference §7.13): the endpoints of INTERFACE §6 (`POST /consumers`,
 * `POST /consumers/{c}/oauth2`, `GET|POST /oauth2`, `GET /oauth2?client_id=`, `GET|PATCH|DELETE /oauth2/{id or
 * client_id}`, `GET|DELETE /oauth2_tokens[/{id}]`) and Kong's others that Tollgate also serves (PUT upserts,
 * consumer-scoped routes, token writes). Tokens are stored hashed: their values show only when created here.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { request, startGateway } from '../../helpers/gateway.ts';
import {
  GOOGLE,
  KONG_PHC,
  KongClient,
  PROVISION_KEY,
  admin,
  adminConfig,
  assertTokenResponse,
  createConsumer,
  createCredential,
  adminFixtureAroundTests,
  verifyKongSecret,
} from './kong-fixture.ts';

let bob: Record<string, any>;
let sally: Record<string, any>;
const fx = adminFixtureAroundTests(async ({ gw }) => {
  bob = await createConsumer(gw, 'bob');
  sally = await createConsumer(gw, 'sally');
});

const call = (method: string, path: string, body?: unknown) => admin(fx.gw, method, path, body);

function assertFieldErrors(res: Awaited<ReturnType<typeof call>>, fields: Record<string, unknown>) {
  assert.equal(res.status, 400, res.text);
  assert.deepEqual(res.json().fields, fields);
}

async function clientCredentialsToken(clientId: string, secret: string) {
  return fx.client.token(
    { client_id: clientId, client_secret: secret, scope: 'email', grant_type: 'client_credentials' },
    { host: 'oauth2.com' },
  );
}

describe('Kong §7.13 admin API: oauth2 credentials', () => {
  it('AD01 create a credential for a consumer', async () => {
    const res = await call('POST', '/consumers/bob/oauth2', { name: 'Test APP', redirect_uris: ['http://google.test/'] });
    assert.equal(res.status, 201, res.text);
    const cred = res.json();
    assert.equal(cred.consumer.id, bob.id);
    assert.equal(cred.name, 'Test APP');
    assert.deepEqual(cred.redirect_uris, ['http://google.test/']);
    assert.equal(cred.client_type, 'confidential');
    assert.match(cred.client_id, /^[A-Za-z0-9]{32}$/);
  });

  it('AD02 redirect_uris are optional (null)', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    assert.equal(cred.redirect_uris, null);
  });

  it('AD03 tags', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP', tags: ['tag1', 'tag2'] });
    assert.deepEqual(cred.tags, ['tag1', 'tag2']);
  });

  it('AD04 several redirect_uris', async () => {
    const uris = ['http://google.test/', 'http://google.example/'];
    assert.deepEqual((await createCredential(fx.gw, 'bob', { name: 'Test APP', redirect_uris: uris })).redirect_uris, uris);
  });

  it('AD05 the same secret for two consumers', async () => {
    await createCredential(fx.gw, 'bob', { name: 'Test APP', client_secret: 'secret123' });
    await createCredential(fx.gw, 'sally', { name: 'Test APP', client_secret: 'secret123' });
  });

  it("AD06 hash_secret without a secret: the generated secret is stored as Kong's PBKDF2 hash", async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP', hash_secret: true });
    assert.equal(cred.hash_secret, true);
    assert.match(cred.client_secret, KONG_PHC);
  });

  it('AD07 hash_secret with a secret: the hash verifies that secret only', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP', client_secret: 'test', hash_secret: true });
    assert.match(cred.client_secret, KONG_PHC);
    assert.equal(verifyKongSecret('test', cred.client_secret), true);
    assert.equal(verifyKongSecret('invalid', cred.client_secret), false);
  });

  it('AD08 without hash_secret: a generated plain-text secret', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    assert.equal(cred.hash_secret, false);
    assert.match(cred.client_secret, /^[A-Za-z0-9]{32}$/);
  });

  it('AD09 a given plain-text secret is kept', async () => {
    assert.equal((await createCredential(fx.gw, 'bob', { name: 'Test APP', client_secret: 'test' })).client_secret, 'test');
  });

  it('AD10 name is required', async () => {
    assertFieldErrors(await call('POST', '/consumers/bob/oauth2', {}), { name: 'required field missing' });
  });

  it('AD11 an unparsable redirect_uri', async () => {
    assertFieldErrors(await call('POST', '/consumers/bob/oauth2', { name: 'Test APP', redirect_uris: ['not-valid'] }), {
      redirect_uris: ["cannot parse 'not-valid'"],
    });
  });

  it('AD12 a redirect_uri with a fragment', async () => {
    const res = await call('POST', '/consumers/bob/oauth2', { name: 'Test APP', redirect_uris: ['http://test.test/#with-fragment'] });
    assertFieldErrors(res, { redirect_uris: ["fragment not allowed in 'http://test.test/#with-fragment'"] });
  });

  it('AD13 errors are reported per element', async () => {
    const res = await call('POST', '/consumers/bob/oauth2', { name: 'Test APP', redirect_uris: ['http://valid.test', 'not-valid'] });
    assertFieldErrors(res, { redirect_uris: [null, "cannot parse 'not-valid'"] });
  });

  it('AD14 a fragment in the second element', async () => {
    const res = await call('POST', '/consumers/bob/oauth2', {
      name: 'Test APP',
      redirect_uris: ['http://valid.test', 'http://test.test/#with-fragment'],
    });
    assertFieldErrors(res, { redirect_uris: [null, "fragment not allowed in 'http://test.test/#with-fragment'"] });
  });

  it('AD15 PUT /consumers/bob/oauth2/client_one creates, then replaces', async () => {
    const first = await call('PUT', '/consumers/bob/oauth2/client_one', { name: 'Test APP', redirect_uris: ['http://google.test/'] });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json().client_id, 'client_one');
    assert.equal(first.json().consumer.id, bob.id);
    assert.deepEqual(first.json().redirect_uris, ['http://google.test/']);
    const second = await call('PUT', '/consumers/bob/oauth2/client_one', { name: 'Test APP' });
    assert.equal(second.status, 200, second.text);
    assert.equal(second.json().id, first.json().id);
    assert.equal(second.json().redirect_uris, null);
  });

  it('AD16 PUT without name', async () => {
    assertFieldErrors(await call('PUT', '/consumers/bob/oauth2/client_two', {}), { name: 'required field missing' });
  });

  it("AD17 a consumer's credentials (GET /consumers/{c}/oauth2), also in the global list", async () => {
    const consumer = await createConsumer(fx.gw, 'get_test');
    for (let i = 0; i < 3; i++) await createCredential(fx.gw, 'get_test', { name: `app ${i}` });
    const scoped = await call('GET', '/consumers/get_test/oauth2');
    assert.equal(scoped.status, 200, scoped.text);
    assert.equal(scoped.json().data.length, 3);
    const all = (await call('GET', '/oauth2')).json().data.filter((c: any) => c.consumer.id === consumer.id);
    assert.equal(all.length, 3);
  });

  it('AD18 a credential by id and by client_id', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    for (const key of [cred.id, cred.client_id]) {
      const res = await call('GET', `/oauth2/${key}`);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().id, cred.id);
    }
  });

  it('AD19 a credential under another consumer is 404, by id or client_id', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    assert.equal((await call('GET', `/consumers/bob/oauth2/${cred.id}`)).status, 200);
    for (const key of [cred.id, cred.client_id]) {
      const res = await call('GET', `/consumers/sally/oauth2/${key}`);
      assert.equal(res.status, 404, res.text);
      assert.deepEqual(res.json(), { message: 'Not found' });
    }
  });

  it('AD20 PATCH a name by id and by client_id', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    for (const [key, name] of [[cred.id, '4321'], [cred.client_id, '1234']]) {
      const res = await call('PATCH', `/oauth2/${key}`, { name });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().name, name);
      assert.equal((await call('GET', `/oauth2/${cred.id}`)).json().name, name);
    }
  });

  it('AD21 PATCH an invalid redirect_uri', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    assertFieldErrors(await call('PATCH', `/oauth2/${cred.id}`, { redirect_uris: ['not-valid'] }), {
      redirect_uris: ["cannot parse 'not-valid'"],
    });
  });

  it('AD22 PATCH client_secret or hash_secret alone', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    for (const body of [{ client_secret: 'test' }, { hash_secret: true }]) {
      assertFieldErrors(await call('PATCH', `/oauth2/${cred.id}`, body), {
        '@entity': ["all or none of these fields must be set: 'hash_secret', 'client_secret'"],
      });
    }
  });

  it('AD22b PATCH both rehashes the new secret, which then authenticates', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP', client_secret: 'old' });
    const res = await call('PATCH', `/oauth2/${cred.id}`, { client_secret: 'new-secret', hash_secret: true });
    assert.equal(res.status, 200, res.text);
    assert.match(res.json().client_secret, KONG_PHC);
    assertTokenResponse(await clientCredentialsToken(cred.client_id, 'new-secret'), { refresh: false, expiresIn: 7200 });
    assert.equal((await clientCredentialsToken(cred.client_id, 'old')).status, 400);
  });

  it("AD23 DELETE a credential; unknown ones are 404 under a consumer (Kong's spec), 204 at the top level (Kong's generated endpoint)", async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Test APP' });
    assert.equal((await call('DELETE', `/oauth2/${cred.id}`)).status, 204);
    assert.equal((await call('GET', `/oauth2/${cred.id}`)).status, 404);
    assert.equal((await call('DELETE', '/consumers/bob/oauth2/blah')).status, 404);
    assert.equal((await call('DELETE', '/consumers/bob/oauth2/00000000-0000-0000-0000-000000000000')).status, 404);
    assert.equal((await call('DELETE', '/oauth2/blah')).status, 204);
  });

  it('AD24 POST /oauth2 needs a consumer', async () => {
    const res = await call('POST', '/oauth2', { name: 'Test APP', redirect_uris: [GOOGLE] });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json().message, 'schema violation (consumer: required field missing)');
    const created = await call('POST', '/oauth2', { name: 'Test APP', redirect_uris: [GOOGLE], consumer: { id: bob.id } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().consumer.id, bob.id);
  });

  it('AD25 PUT /oauth2/client-1 needs a consumer', async () => {
    const res = await call('PUT', '/oauth2/client-1', { name: 'Test APP', redirect_uris: [GOOGLE] });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json().message, 'schema violation (consumer: required field missing)');
    const created = await call('PUT', '/oauth2/client-1', { name: 'Test APP', redirect_uris: [GOOGLE], consumer: { id: bob.id } });
    assert.equal(created.status, 200, created.text);
    assert.equal(created.json().client_id, 'client-1');
  });

  it('AD34 GET /oauth2?client_id= gives the application and developer names', async () => {
    const cred = await createCredential(fx.gw, 'sally', { name: 'Sally Analytics', redirect_uris: [GOOGLE] });
    const res = await call('GET', `/oauth2?client_id=${cred.client_id}`);
    assert.equal(res.status, 200, res.text);
    const [found, ...rest] = res.json().data;
    assert.equal(rest.length, 0);
    assert.equal(found.id, cred.id);
    assert.equal(found.name, 'Sally Analytics');
    assert.equal(found.consumer.id, sally.id);
    assert.equal(found.consumer.username, 'sally');
  });

  it('AD35 GET /oauth2?client_id= with an unknown client: an empty list', async () => {
    const res = await call('GET', '/oauth2?client_id=nobody');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json().data, []);
  });

  it('AD36 a credential declared in gateway.yaml is read-only (405)', async () => {
    assert.equal((await call('GET', '/oauth2/yaml-client')).status, 200);
    assert.equal((await call('PATCH', '/oauth2/yaml-client', { name: 'changed' })).status, 405);
    assert.equal((await call('DELETE', '/oauth2/yaml-client')).status, 405);
    assert.equal((await call('GET', '/oauth2/yaml-client')).json().name, 'Declared App');
  });

  it('AD37 a runtime credential authenticates at once', async () => {
    const cred = await createCredential(fx.gw, 'bob', { name: 'Runtime App', client_secret: 'runtime-secret', hash_secret: true });
    assertTokenResponse(await clientCredentialsToken(cred.client_id, 'runtime-secret'), { refresh: false, expiresIn: 7200 });
  });

  it('AD38 a duplicate client_id is refused', async () => {
    await createCredential(fx.gw, 'bob', { name: 'Test APP', client_id: 'dup-client' });
    const res = await call('POST', '/consumers/sally/oauth2', { name: 'Test APP', client_id: 'dup-client' });
    assert.equal(res.status, 409, res.text);
  });

  it('AD39 a credential for an unknown consumer is 404', async () => {
    assert.equal((await call('POST', '/consumers/nobody/oauth2', { name: 'Test APP' })).status, 404);
  });

  it('AD40 a malformed JSON body is a clean 400', async () => {
    const res = await request(fx.gw.admin + '/consumers/bob/oauth2', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name": ',
    });
    assert.equal(res.status, 400, res.text);
  });
});

describe('Kong §7.13 admin API: oauth2 tokens', () => {
  let tokenCredential: Record<string, any>;
  const issued: Record<string, any>[] = [];
  before(async () => {
    tokenCredential = await createCredential(fx.gw, 'bob', { name: 'Token APP', client_secret: 'token-secret' });
    for (let i = 0; i < 3; i++) {
      issued.push(assertTokenResponse(await clientCredentialsToken(tokenCredential.client_id, 'token-secret'), { refresh: false, expiresIn: 7200 }));
    }
  });

  const tokensOf = async (credentialId: string) => {
    const res = await call('GET', '/oauth2_tokens');
    assert.equal(res.status, 200, res.text);
    return res.json().data.filter((t: any) => t.credential.id === credentialId);
  };

  const serviceId = async () => (await call('GET', '/services')).json().data[0].id as string;

  it('AD26 POST /oauth2_tokens issues a token, shown once', async () => {
    const res = await call('POST', '/oauth2_tokens', { credential: { id: tokenCredential.id }, service: { id: await serviceId() }, expires_in: 10 });
    assert.equal(res.status, 201, res.text);
    const token = res.json();
    assert.match(token.access_token, /^\w{32,}$/);
    assert.equal(token.refresh_token, null);
    assert.equal(token.token_type, 'bearer');
    assert.equal(token.service.id, await serviceId());
    const api = await fx.client.proxy('/request', { host: 'oauth2.com', headers: { authorization: `bearer ${token.access_token}` } });
    assert.equal(api.status, 200, api.text);
    // Stored hashed: a later read has no value to show.
    assert.notEqual((await call('GET', `/oauth2_tokens/${token.id}`)).json().access_token, token.access_token);
    await call('DELETE', `/oauth2_tokens/${token.id}`);
  });

  it('AD27 POST /oauth2_tokens without credential and expires_in', async () => {
    assertFieldErrors(await call('POST', '/oauth2_tokens', {}), { expires_in: 'required field missing', credential: 'required field missing' });
  });

  it('AD28 the list holds the issued tokens, never their values (hashed at rest)', async () => {
    const res = await call('GET', '/oauth2_tokens');
    const mine = (await tokensOf(tokenCredential.id)) as any[];
    assert.equal(mine.length, 3);
    for (const token of mine) {
      assert.equal(token.token_type, 'bearer');
      assert.equal(token.expires_in, 7200);
      assert.equal(token.scope, 'email');
    }
    for (const { access_token } of issued) assert.ok(!res.text.includes(access_token), 'a plain access token in the admin API');
  });

  it('AD29 a token by id and by its access token', async () => {
    const [first] = await tokensOf(tokenCredential.id);
    const res = await call('GET', `/oauth2_tokens/${first.id}`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().id, first.id);
    const byValue = await Promise.all(issued.map(({ access_token }) => call('GET', `/oauth2_tokens/${access_token}`)));
    assert.ok(byValue.some((r) => r.status === 200 && r.json().id === first.id));
  });

  it('AD30 a chosen access token value (Kong: PUT /oauth2_tokens/foobar; here POST with access_token)', async () => {
    const res = await call('POST', '/oauth2_tokens', { credential: { id: tokenCredential.id }, service: { id: await serviceId() }, expires_in: 10, access_token: 'foobar' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json().access_token, 'foobar');
    assert.equal(res.json().refresh_token, null);
    assert.equal((await call('GET', '/oauth2_tokens/foobar')).json().id, res.json().id);
    assert.equal((await call('POST', '/oauth2_tokens', { credential: { id: tokenCredential.id }, expires_in: 10, access_token: 'foobar' })).status, 409);
    await call('DELETE', `/oauth2_tokens/${res.json().id}`);
  });

  it('AD31 PATCH expires_in by id and by access token', async () => {
    const created = (await call('POST', '/oauth2_tokens', { credential: { id: tokenCredential.id }, expires_in: 10 })).json();
    for (const [key, expires_in] of [[created.id, 20], [created.access_token, 30]] as const) {
      const res = await call('PATCH', `/oauth2_tokens/${key}`, { expires_in });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().expires_in, expires_in);
    }
    await call('DELETE', `/oauth2_tokens/${created.id}`);
  });

  it('AD32 PATCH expires_in "hello"', async () => {
    const [first] = await tokensOf(tokenCredential.id);
    assertFieldErrors(await call('PATCH', `/oauth2_tokens/${first.id}`, { expires_in: 'hello' }), { expires_in: 'expected an integer' });
  });

  it('AD33 DELETE a token; unknown ones are 204 too (Kong)', async () => {
    const [first] = await tokensOf(tokenCredential.id);
    assert.equal((await call('DELETE', `/oauth2_tokens/${first.id}`)).status, 204);
    assert.equal((await call('GET', `/oauth2_tokens/${first.id}`)).status, 404);
    assert.equal((await call('DELETE', '/oauth2_tokens/blah')).status, 204);
    assert.equal((await call('DELETE', '/oauth2_tokens/00000000-0000-0000-0000-000000000000')).status, 204);
  });
});

describe('runtime entities persist across restarts', () => {
  it('AD41 a consumer and credential created at runtime are there after a restart', async () => {
    const upstream = fx.upstream;
    const first = await startGateway(adminConfig(upstream.url));
    const dataDir = first.dataDir;
    let restarted: Awaited<ReturnType<typeof startGateway>> | undefined;
    try {
      await createConsumer(first, 'persisted');
      const cred = await createCredential(first, 'persisted', { name: 'Persisted App', client_secret: 'p-secret', hash_secret: true });
      await first.stop();
      restarted = await startGateway(adminConfig(upstream.url), { dataDir });
      const res = await admin(restarted, 'GET', `/oauth2/${cred.client_id}`);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().name, 'Persisted App');
      const lookup = await admin(restarted, 'GET', `/oauth2?client_id=${cred.client_id}`);
      assert.equal(lookup.json().data[0].consumer.username, 'persisted');
    } finally {
      await (restarted ?? first).stop().catch(() => {});
    }
  });

  it('AD42 issued tokens and refresh tokens survive a restart', async () => {
    const first = await startGateway(adminConfig(fx.upstream.url));
    let restarted: Awaited<ReturnType<typeof startGateway>> | undefined;
    try {
      const client = new KongClient(first);
      const authorized = await client.authorize(
        { provision_key: PROVISION_KEY, client_id: 'yaml-client', scope: 'email', response_type: 'code', authenticated_userid: 'u1' },
        { host: 'oauth2.com' },
      );
      const code = new URL(authorized.json().redirect_uri).searchParams.get('code');
      const issued = await client.token(
        { code, client_id: 'yaml-client', client_secret: 'yaml-secret', grant_type: 'authorization_code' },
        { host: 'oauth2.com' },
      );
      const { access_token, refresh_token } = assertTokenResponse(issued, { refresh: true, expiresIn: 7200 });
      await first.stop();
      restarted = await startGateway(adminConfig(fx.upstream.url), { dataDir: first.dataDir });
      const after = new KongClient(restarted);
      const api = await after.proxy('/request', { host: 'oauth2.com', headers: { authorization: `bearer ${access_token}` } });
      assert.equal(api.status, 200, api.text);
      const refreshed = await after.token(
        { refresh_token, client_id: 'yaml-client', client_secret: 'yaml-secret', grant_type: 'refresh_token' },
        { host: 'oauth2.com' },
      );
      assertTokenResponse(refreshed, { refresh: true, expiresIn: 7200 });
    } finally {
      await (restarted ?? first).stop().catch(() => {});
    }
  });
});

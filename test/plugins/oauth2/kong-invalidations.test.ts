/**
 * Kong's cache invalidation cases (reference §7.15, Host oauth2.com): changes made through the admin API take
 * effect on the very next request.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  GOOGLE,
  PROVISION_KEY,
  admin,
  adminConfig,
  assertInvalidToken,
  assertOAuthError,
  createConsumer,
  createCredential,
  adminFixtureAroundTests,
} from './kong-fixture.ts';

const fx = adminFixtureAroundTests(async ({ gw }) => {
  await createConsumer(gw, 'bob');
});

const ON = { host: 'oauth2.com' };
let serial = 0;

/** A fresh runtime credential of bob (so each case owns its tokens). */
async function newCredential() {
  serial += 1;
  return createCredential(fx.gw, 'bob', {
    name: `app ${serial}`,
    client_id: `clientid123-${serial}`,
    client_secret: 'secret123',
    redirect_uris: [GOOGLE],
  });
}

const authorize = (clientId: string) =>
  fx.client.authorize(
    { provision_key: PROVISION_KEY, client_id: clientId, scope: 'email', response_type: 'code', authenticated_userid: 'userid123' },
    ON,
  );

async function tokenFor(clientId: string, secret = 'secret123'): Promise<string> {
  const res = await authorize(clientId);
  assert.equal(res.status, 200, res.text);
  const code = new URL(res.json().redirect_uri).searchParams.get('code');
  const token = await fx.client.token({ code, client_id: clientId, client_secret: secret, grant_type: 'authorization_code' }, ON);
  assert.equal(token.status, 200, token.text);
  return token.json().access_token;
}

const useToken = (token: string) => fx.client.proxy('/request', { ...ON, headers: { authorization: `bearer ${token}` } });

describe('Kong §7.15 cache invalidation', () => {
  it('IV01 a deleted credential can no longer authorize nor get tokens', async () => {
    const cred = await newCredential();
    await tokenFor(cred.client_id);
    assert.equal((await admin(fx.gw, 'DELETE', `/oauth2/${cred.id}`)).status, 204);
    assertOAuthError(await authorize(cred.client_id), 400, 'invalid_client', 'Invalid client authentication');
    const res = await fx.client.token({ client_id: cred.client_id, client_secret: 'secret123', scope: 'email', grant_type: 'client_credentials' }, ON);
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('IV02 a changed client_id: the new one works, the old one fails', async () => {
    const cred = await newCredential();
    assert.equal((await authorize(cred.client_id)).status, 200);
    const res = await admin(fx.gw, 'PATCH', `/oauth2/${cred.id}`, { client_id: `updated_${cred.client_id}` });
    assert.equal(res.status, 200, res.text);
    assert.equal((await authorize(`updated_${cred.client_id}`)).status, 200);
    assertOAuthError(await authorize(cred.client_id), 400, 'invalid_client', 'Invalid client authentication');
  });

  it('IV03 a deleted runtime consumer: its client can no longer get tokens, its tokens are refused', async () => {
    await createConsumer(fx.gw, 'short-lived');
    const cred = await createCredential(fx.gw, 'short-lived', { name: 'Short', client_id: 'short-lived-app', client_secret: 'secret123', redirect_uris: [GOOGLE] });
    const token = await tokenFor(cred.client_id);
    assert.equal((await useToken(token)).status, 200);
    assert.equal((await admin(fx.gw, 'DELETE', '/consumers/short-lived')).status, 204);
    const res = await fx.client.token({ client_id: cred.client_id, client_secret: 'secret123', scope: 'email', grant_type: 'client_credentials' }, ON);
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    assertInvalidToken(await useToken(token));
    assert.equal((await admin(fx.gw, 'GET', `/oauth2/${cred.id}`)).status, 404);
  });

  it('IV03b a consumer declared in gateway.yaml cannot be deleted (405)', async () => {
    assert.equal((await admin(fx.gw, 'DELETE', '/consumers/yaml-user')).status, 405);
  });

  it('IV04 a token deleted through the admin API is refused', async () => {
    const cred = await newCredential();
    const token = await tokenFor(cred.client_id);
    assert.equal((await useToken(token)).status, 200);
    const list = (await admin(fx.gw, 'GET', '/oauth2_tokens')).json().data.filter((t: any) => t.credential.id === cred.id);
    assert.equal(list.length, 1);
    assert.equal((await admin(fx.gw, 'DELETE', `/oauth2_tokens/${list[0].id}`)).status, 204);
    assertInvalidToken(await useToken(token));
  });

  it('IV05 a token whose value is changed through the admin API: the new value works, the old one is refused', async () => {
    const cred = await newCredential();
    const token = await tokenFor(cred.client_id);
    const [row] = (await admin(fx.gw, 'GET', '/oauth2_tokens')).json().data.filter((t: any) => t.credential.id === cred.id);
    const res = await admin(fx.gw, 'PATCH', `/oauth2_tokens/${row.id}`, { access_token: `updated_token_${serial}` });
    assert.equal(res.status, 200, res.text);
    assert.equal((await fx.client.proxy(`/request?access_token=updated_token_${serial}`, ON)).status, 200);
    assertInvalidToken(await useToken(token));
  });

  it("IV06 a deleted credential's tokens are refused", async () => {
    const cred = await newCredential();
    const token = await tokenFor(cred.client_id);
    assert.equal((await useToken(token)).status, 200);
    assert.equal((await admin(fx.gw, 'DELETE', `/oauth2/${cred.id}`)).status, 204);
    assertInvalidToken(await useToken(token));
  });

  it("IV07 a deleted credential's pending codes and refresh tokens are refused", async () => {
    const cred = await newCredential();
    const authorized = await authorize(cred.client_id);
    const code = new URL(authorized.json().redirect_uri).searchParams.get('code');
    const token = await fx.client.token({ code, client_id: cred.client_id, client_secret: 'secret123', grant_type: 'authorization_code' }, ON);
    const { refresh_token } = token.json();
    const second = await authorize(cred.client_id);
    const pendingCode = new URL(second.json().redirect_uri).searchParams.get('code');
    assert.equal((await admin(fx.gw, 'DELETE', `/oauth2/${cred.id}`)).status, 204);
    // The client itself is gone, so the client authentication fails first.
    const refresh = await fx.client.token({ refresh_token, client_id: cred.client_id, client_secret: 'secret123', grant_type: 'refresh_token' }, ON);
    assertOAuthError(refresh, 400, 'invalid_client', 'Invalid client authentication');
    const exchange = await fx.client.token({ code: pendingCode, client_id: cred.client_id, client_secret: 'secret123', grant_type: 'authorization_code' }, ON);
    assertOAuthError(exchange, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('IV08 a changed secret takes effect at once', async () => {
    const cred = await newCredential();
    const patch = await admin(fx.gw, 'PATCH', `/oauth2/${cred.id}`, { client_secret: 'rotated', hash_secret: true });
    assert.equal(patch.status, 200, patch.text);
    const body = { client_id: cred.client_id, scope: 'email', grant_type: 'client_credentials' };
    assertOAuthError(await fx.client.token({ ...body, client_secret: 'secret123' }, ON), 400, 'invalid_client', 'Invalid client authentication');
    assert.equal((await fx.client.token({ ...body, client_secret: 'rotated' }, ON)).status, 200);
  });

  it('IV09 a changed redirect_uri takes effect at once', async () => {
    const cred = await newCredential();
    const patch = await admin(fx.gw, 'PATCH', `/oauth2/${cred.id}`, { redirect_uris: ['http://new.test/cb'] });
    assert.equal(patch.status, 200, patch.text);
    const res = await authorize(cred.client_id);
    assert.equal(res.status, 200, res.text);
    assert.match(res.json().redirect_uri, /^http:\/\/new\.test\/cb\?code=\w{32,}$/);
  });

  it('IV10 a config reload that drops a declared credential ends its tokens; other tokens live on', async () => {
    const config = adminConfig(fx.upstream.url);
    config.consumers[0].oauth2_credentials.push({ name: 'Doomed App', client_id: 'doomed', client_secret: 'secret123', redirect_uris: [GOOGLE] });
    assert.equal(await fx.gw.reload(config), true);
    const doomed = await tokenFor('doomed');
    const survivor = await tokenFor('yaml-client', 'yaml-secret');
    assert.equal(await fx.gw.reload(adminConfig(fx.upstream.url)), true);
    assertInvalidToken(await useToken(doomed));
    assertOAuthError(await authorize('doomed'), 400, 'invalid_client', 'Invalid client authentication');
    assert.equal((await useToken(survivor)).status, 200);
  });
});

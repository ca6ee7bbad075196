/**
 * Kong's refresh token cases (reference §7.10), with INTERFACE §4's `invalid_grant` for unknown and foreign
 * refresh tokens.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  GOOGLE,
  PROVISION_KEY,
  assertInvalidToken,
  assertNoCache,
  assertOAuthError,
  assertTokenResponse,
  echoed,
  pkcePair,
  sleep,
  kongFixtureAroundTests,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests((config) => {
  const ttlRoute = (name: string, refresh_token_ttl: number, extra: Record<string, unknown> = {}) => ({
    name,
    url: config.services[0].url,
    routes: [
      {
        name: `route-${name}`,
        hosts: [`${name}.refresh.test`],
        protocols: ['http', 'https'],
        plugins: [
          {
            name: 'oauth2',
            config: {
              enable_authorization_code: true,
              mandatory_scope: false,
              provision_key: PROVISION_KEY,
              global_credentials: false,
              refresh_token_ttl,
              ...extra,
            },
          },
        ],
      },
    ],
  });
  config.services.push(ttlRoute('oauth2_21', 2), ttlRoute('oauth2_22', 0), ttlRoute('oauth2_zero', 1209600, { token_expiration: 0 }));
  config.consumers.push({
    username: 'bobo',
    oauth2_credentials: [{ name: 'app-7890', client_id: 'clientid7890', client_secret: 'secret7890', redirect_uris: [GOOGLE] }],
  });
});

const C123 = { client_id: 'clientid123', client_secret: 'secret123', grant_type: 'refresh_token' };
const bearer = (token: string, host = 'oauth2.test') =>
  fx.client.proxy('/request', { host, method: 'POST', headers: { authorization: `bearer ${token}` } });

describe('Kong §7.10 refresh token', () => {
  it('RF01 an unknown refresh token: invalid_grant (Kong: invalid_request "Invalid refresh_token")', async () => {
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: 'hello' }), 400, 'invalid_grant');
  });

  it('RF02 a refresh', async () => {
    const issued = await fx.client.provisionToken();
    assertTokenResponse(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }), { refresh: true });
  });

  it('RF03 a public client refreshes without a secret', async () => {
    const { verifier, challenge } = pkcePair();
    const issued = await fx.client.provisionToken({ clientId: 'clientid11211', secret: null, challenge, verifier });
    const res = await fx.client.token({ refresh_token: issued.refresh_token, client_id: 'clientid11211', grant_type: 'refresh_token' });
    assertTokenResponse(res, { refresh: true });
  });

  it('RF04 a public client must not send a secret', async () => {
    const { verifier, challenge } = pkcePair();
    const issued = await fx.client.provisionToken({ clientId: 'clientid11211', secret: null, challenge, verifier });
    const res = await fx.client.token({
      refresh_token: issued.refresh_token,
      client_id: 'clientid11211',
      client_secret: 'secret11211',
      grant_type: 'refresh_token',
    });
    assertOAuthError(res, 400, 'invalid_request', 'client_secret is disallowed for public clients');
  });

  it('RF05 a confidential client without its secret', async () => {
    const issued = await fx.client.provisionToken();
    const res = await fx.client.token({ refresh_token: issued.refresh_token, client_id: 'clientid123', grant_type: 'refresh_token' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it("RF06 another client's refresh token: invalid_grant (Kong: invalid_client)", async () => {
    const issued = await fx.client.provisionToken({ clientId: 'clientid333', secret: 'secret333' });
    const res = await fx.client.token({ ...C123, refresh_token: issued.refresh_token });
    assertOAuthError(res, 400, 'invalid_grant');
    assertNoCache(res);
    // The failed attempt by another client leaves the owner's refresh token usable.
    const owner = await fx.client.token({ refresh_token: issued.refresh_token, client_id: 'clientid333', client_secret: 'secret333', grant_type: 'refresh_token' });
    assertTokenResponse(owner, { refresh: true });
  });

  it('RF07 an expired access token is refreshed; the old pair dies', async () => {
    const issued = await fx.client.provisionToken();
    assert.equal((await bearer(issued.access_token)).status, 200);
    await sleep(6000);
    assertInvalidToken(await bearer(issued.access_token));
    const res = await fx.client.token({ ...C123, refresh_token: issued.refresh_token }, { headers: { authorization: `bearer ${issued.access_token}` } });
    const refreshed = assertTokenResponse(res, { refresh: true });
    assert.notEqual(refreshed.access_token, issued.access_token);
    assert.notEqual(refreshed.refresh_token, issued.refresh_token);
    assert.equal((await bearer(refreshed.access_token)).status, 200);
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }), 400, 'invalid_grant');
  });

  it('RF08 rotation: a new refresh token, the old access token dies at once', async () => {
    const issued = await fx.client.provisionToken();
    const refreshed = await fx.client.refresh(issued.refresh_token);
    assert.notEqual(refreshed.refresh_token, issued.refresh_token);
    assertInvalidToken(await bearer(issued.access_token));
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }), 400, 'invalid_grant');
  });

  it('RF09 reuse_refresh_token keeps the refresh token through expiry', async () => {
    const host = 'oauth2_13.test';
    const issued = await fx.client.provisionToken({ host });
    const first = await fx.client.refresh(issued.refresh_token, host);
    assert.equal(first.refresh_token, issued.refresh_token);
    assert.notEqual(first.access_token, issued.access_token);
    assertInvalidToken(await bearer(issued.access_token, host));
    await sleep(6000);
    assertInvalidToken(await bearer(first.access_token, host));
    const second = await fx.client.refresh(issued.refresh_token, host);
    assert.equal(second.refresh_token, issued.refresh_token);
    const { headers } = echoed(await bearer(second.access_token, host));
    assert.equal(headers['authorization'], `bearer ${second.access_token}`);
  });

  it('RF10 refresh_token_ttl ends the refresh token', async () => {
    const host = 'oauth2_21.refresh.test';
    const issued = await fx.client.provisionToken({ host, clientId: 'clientid7890', secret: 'secret7890' });
    await sleep(3500);
    const res = await fx.client.token(
      { refresh_token: issued.refresh_token, client_id: 'clientid7890', client_secret: 'secret7890', grant_type: 'refresh_token' },
      { host },
    );
    assertOAuthError(res, 400, 'invalid_grant');
  });

  it('RF11 refresh_token_ttl 0 keeps it', async () => {
    const host = 'oauth2_22.refresh.test';
    const issued = await fx.client.provisionToken({ host, clientId: 'clientid7890', secret: 'secret7890' });
    await sleep(2200);
    const res = await fx.client.token(
      { refresh_token: issued.refresh_token, client_id: 'clientid7890', client_secret: 'secret7890', grant_type: 'refresh_token' },
      { host },
    );
    assertTokenResponse(res, { refresh: true, expiresIn: 7200, scope: null });
  });

  it('RF17 token_expiration 0: a token that never expires, without expires_in nor refresh token (§1)', async () => {
    const host = 'oauth2_zero.refresh.test';
    const code = await fx.client.provisionCode({ host, clientId: 'clientid7890' });
    const res = await fx.client.token({ code, client_id: 'clientid7890', client_secret: 'secret7890', grant_type: 'authorization_code' }, { host });
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    assert.equal(body.expires_in, undefined);
    assert.equal(body.refresh_token, undefined);
    assert.equal((await bearer(body.access_token, host)).status, 200);
  });

  it('RF18 ten concurrent refreshes with one refresh token: exactly one succeeds (rotation under concurrency)', async () => {
    const issued = await fx.client.provisionToken();
    const results = await Promise.all(Array.from({ length: 10 }, () => fx.client.token({ ...C123, refresh_token: issued.refresh_token })));
    assert.equal(results.filter((r) => r.status === 200).length, 1);
    for (const r of results.filter((r) => r.status !== 200)) assertOAuthError(r, 400, 'invalid_grant');
  });

  it('RF12 a refresh token of another service', async () => {
    const issued = await fx.client.provisionToken();
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }, { host: 'oauth2_3.test' }), 400, 'invalid_grant');
  });

  it("RF19 a service-bound refresh token is foreign at another service's global plugin (Kong makes it a global token)", async () => {
    const issued = await fx.client.provisionToken();
    // Kong 3.x skips the service check when the plugin has global_credentials and issues a *global* token: a
    // grant for one service would turn into access to every global service. INTERFACE §4: foreign → invalid_grant.
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }, { host: 'oauth2_8.test' }), 400, 'invalid_grant');
    // Still good where it belongs.
    assertTokenResponse(await fx.client.token({ ...C123, refresh_token: issued.refresh_token }), { refresh: true });
  });

  it('RF13 an access token is not a refresh token', async () => {
    const issued = await fx.client.provisionToken();
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.access_token }), 400, 'invalid_grant');
  });

  it('RF14 a refresh token is not an access token', async () => {
    const issued = await fx.client.provisionToken();
    assertInvalidToken(await bearer(issued.refresh_token));
  });

  it('RF15 the refreshed token keeps the user and scope', async () => {
    const issued = await fx.client.provisionToken();
    const refreshed = await fx.client.refresh(issued.refresh_token);
    assert.equal(refreshed.scope, 'email');
    const { headers } = echoed(await bearer(refreshed.access_token));
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-authenticated-scope'], 'email');
  });

  it('RF20 a refresh may not ask for a scope that was never granted (RFC 6749 §6); the granted one or less is fine', async () => {
    const issued = await fx.client.provisionToken();
    assertOAuthError(await fx.client.token({ ...C123, refresh_token: issued.refresh_token, scope: 'email profile' }), 400, 'invalid_scope');
    const same = await fx.client.token({ ...C123, refresh_token: issued.refresh_token, scope: 'email' });
    assert.equal(same.status, 200, same.text);
    assert.equal(same.json().scope, 'email');
  });

  it('RF16 client_credentials tokens have no refresh token to use', async () => {
    const res = await fx.client.token(
      { client_id: 'clientid123', client_secret: 'secret123', scope: 'email', grant_type: 'client_credentials' },
      { host: 'oauth2_4.test' },
    );
    assertTokenResponse(res, { refresh: false });
  });
});

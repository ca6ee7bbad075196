/**
 * Kong's password grant cases (reference §7.5, Host oauth2_5.test with realm "test-oauth2").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PROVISION_KEY,
  assertMissingToken,
  assertOAuthError,
  assertTokenResponse,
  echoed,
  kongFixtureAroundTests,
  type CallOptions,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const ON = { host: 'oauth2_5.test' };
const CLIENT = { client_id: 'clientid123', client_secret: 'secret123' };
const VALID = { provision_key: PROVISION_KEY, authenticated_userid: 'id123', ...CLIENT, scope: 'email', grant_type: 'password' };
const GOOD_BASIC = { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTIz' };
const token = (body: Record<string, unknown>, options: CallOptions = {}) => fx.client.token(body, { ...ON, ...options });

describe('Kong §7.5 token endpoint: password grant', () => {
  it('PW01 no token on a route without realm: plain Bearer challenge', async () => {
    assertMissingToken(await fx.client.proxy('/request', { host: 'oauth2_4.test' }));
  });

  it('PW02 no token on a route with a realm', async () => {
    assertMissingToken(await fx.client.proxy('/request', ON), 'test-oauth2');
  });

  it('PW03 no secret: invalid_client', async () => {
    assertOAuthError(await token({ client_id: 'clientid123', scope: 'email', response_type: 'token' }), 400, 'invalid_client', 'Invalid client authentication');
  });

  it('PW04 no grant_type', async () => {
    assertOAuthError(await token({ ...CLIENT, scope: 'email', response_type: 'token' }), 400, 'unsupported_grant_type', 'Invalid grant_type');
  });

  it('PW05 password grant without provision_key (with response_type)', async () => {
    const res = await token({ ...CLIENT, scope: 'email', response_type: 'token', grant_type: 'password' });
    assertOAuthError(res, 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('PW06 password grant without provision_key', async () => {
    assertOAuthError(await token({ ...CLIENT, scope: 'email', grant_type: 'password' }), 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('PW07 no authenticated_userid', async () => {
    const res = await token({ ...CLIENT, scope: 'email', grant_type: 'password', provision_key: PROVISION_KEY });
    assertOAuthError(res, 400, 'invalid_authenticated_userid', 'Missing authenticated_userid parameter');
  });

  it('PW08 a token with a refresh token', async () => {
    assertTokenResponse(await token(VALID), { refresh: true });
  });

  it('PW09 client credentials in a Basic header', async () => {
    const { client_id, client_secret, ...body } = VALID;
    assertTokenResponse(await token(body, { headers: GOOD_BASIC }), { refresh: true });
  });

  it('PW10 wrong secret in a Basic header: 401 with a Basic challenge', async () => {
    const { client_id, client_secret, ...body } = VALID;
    const res = await token(body, { headers: { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTI0' } });
    assertOAuthError(res, 401, 'invalid_client', 'Invalid client authentication');
    assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
  });

  it('PW11 the token reaches the upstream with the consumer headers', async () => {
    const { client_id, client_secret, ...body } = VALID;
    const issued = assertTokenResponse(await token(body, { headers: GOOD_BASIC }), { refresh: true });
    const headers = echoed(await fx.client.proxy(`/request?access_token=${issued.access_token}`, ON)).headers;
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-authenticated-userid'], 'id123');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
  });

  for (const scope of [['email'], 123, false]) {
    it(`PW12 scope ${JSON.stringify(scope)} is not a string`, async () => {
      assertOAuthError(await token({ ...VALID, scope }), 400, 'invalid_scope', 'scope must be a string');
    });
  }

  it('PW13 wrong secret with a code: invalid_client', async () => {
    const code = await fx.client.provisionCode();
    const res = await token({ ...VALID, client_secret: 'bogus', code });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('PW14 blank authenticated_userid counts as missing', async () => {
    const res = await token({ ...VALID, authenticated_userid: '  ' });
    assertOAuthError(res, 400, 'invalid_authenticated_userid', 'Missing authenticated_userid parameter');
  });

  it('PW15 wrong provision_key', async () => {
    assertOAuthError(await token({ ...VALID, provision_key: 'nope' }), 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('PW16 password grant where it is not enabled', async () => {
    assertOAuthError(await fx.client.token(VALID), 400, 'unsupported_grant_type', 'Invalid grant_type');
  });

  it('PW17 the refresh token of a password grant works', async () => {
    const issued = assertTokenResponse(await token(VALID), { refresh: true });
    const res = await token({ ...CLIENT, refresh_token: issued.refresh_token, grant_type: 'refresh_token' });
    const refreshed = assertTokenResponse(res, { refresh: true });
    assert.notEqual(refreshed.access_token, issued.access_token);
  });
});

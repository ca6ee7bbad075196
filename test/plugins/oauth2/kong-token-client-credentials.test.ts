/**
 * Kong's client_credentials cases (reference §7.4, Host oauth2_4.test), plus INTERFACE §4's RFC corrections.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  PROVISION_KEY,
  assertOAuthError,
  assertTokenResponse,
  echoed,
  kongFixtureAroundTests,
  type CallOptions,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const ON = { host: 'oauth2_4.test' };
const VALID = { client_id: 'clientid123', client_secret: 'secret123', scope: 'email', grant_type: 'client_credentials' };
const token = (body: Record<string, unknown> | undefined, options: CallOptions = {}) => fx.client.token(body, { ...ON, ...options });

describe('Kong §7.4 token endpoint: client_credentials', () => {
  it('CC01 no secret and no grant_type: invalid_client', async () => {
    assertOAuthError(await token({ client_id: 'clientid123', scope: 'email', response_type: 'token' }), 400, 'invalid_client', 'Invalid client authentication');
  });

  it('CC02 empty client_id and secret', async () => {
    const res = await token({ client_id: '', client_secret: '', scope: 'email', response_type: 'token', grant_type: 'client_credentials' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('CC03 no client credentials at all', async () => {
    const res = await token({ scope: 'email', response_type: 'token', grant_type: 'client_credentials' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('CC04 GET is not allowed', async () => {
    const res = await fx.client.send('/oauth2/token?client_id=clientid123&grant_type=client_credentials&client_secret=secret123', {
      ...ON,
      method: 'GET',
    });
    const description = 'The HTTP method GET is invalid for the token endpoint';
    assertOAuthError(res, 405, 'invalid_method', description);
    assert.equal(res.headers['www-authenticate'], `Bearer error="invalid_method", error_description="${description}"`);
  });

  it('CC05 the 405 challenge carries the realm', async () => {
    const res = await fx.client.send('/oauth2/token?client_id=clientid123&grant_type=client_credentials&client_secret=secret123', {
      host: 'oauth2_5.test',
      method: 'GET',
    });
    const description = 'The HTTP method GET is invalid for the token endpoint';
    assertOAuthError(res, 405, 'invalid_method', description);
    assert.equal(res.headers['www-authenticate'], `Bearer realm="test-oauth2", error="invalid_method", error_description="${description}"`);
  });

  it('CC06 no grant_type: unsupported_grant_type', async () => {
    const res = await token({ client_id: 'clientid123', client_secret: 'secret123', scope: 'email', response_type: 'token' });
    assertOAuthError(res, 400, 'unsupported_grant_type', 'Invalid grant_type');
  });

  it('CC07 plain HTTP is refused', async () => {
    assertOAuthError(await token(VALID, { transport: 'http' }), 400, 'access_denied', 'You must use HTTPS');
  });

  it('CC08 authenticated_userid without provision_key', async () => {
    assertOAuthError(await token({ ...VALID, authenticated_userid: 'user123' }), 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('CC09 authenticated_userid with a wrong provision_key', async () => {
    const res = await token({ ...VALID, authenticated_userid: 'user123', provision_key: 'hello' });
    assertOAuthError(res, 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('CC10 a token, without a refresh token, with the granted scope', async () => {
    assertTokenResponse(await token(VALID), { refresh: false });
  });

  it('CC11 another client', async () => {
    assertTokenResponse(await token({ ...VALID, client_id: 'clientid456', client_secret: 'secret456' }), { refresh: false });
  });

  it('CC12 redirect_uri is not checked for client_credentials', async () => {
    const res = await token({ ...VALID, client_id: 'clientid456', client_secret: 'secret456', redirect_uri: 'http://two.test/two' });
    assertTokenResponse(res, { refresh: false });
  });

  it('CC13 a client without redirect_uris', async () => {
    assertTokenResponse(await token({ ...VALID, client_id: 'clientid10112', client_secret: 'secret10112' }), { refresh: false });
  });

  it('CC14 with authenticated_userid and provision_key', async () => {
    assertTokenResponse(await token({ ...VALID, authenticated_userid: 'hello', provision_key: PROVISION_KEY }), { refresh: false });
  });

  it('CC15 client credentials in a Basic header', async () => {
    const res = await token({ scope: 'email', grant_type: 'client_credentials' }, { headers: { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTIz' } });
    assertTokenResponse(res, { refresh: false });
  });

  it('CC16 Basic header plus a body client_id', async () => {
    const res = await token(
      { client_id: 'clientid123', scope: 'email', grant_type: 'client_credentials' },
      { headers: { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTIz' } },
    );
    assertTokenResponse(res, { refresh: false });
  });

  it('CC17 wrong secret in a Basic header: 401 with a Basic challenge', async () => {
    const res = await token({ scope: 'email', grant_type: 'client_credentials' }, { headers: { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTI0' } });
    assertOAuthError(res, 401, 'invalid_client', 'Invalid client authentication');
    assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
  });

  it('CC17b wrong secret in the body: 400 (hashed secret compared)', async () => {
    assertOAuthError(await token({ ...VALID, client_secret: 'secret124' }), 400, 'invalid_client', 'Invalid client authentication');
  });

  it('CC17c wrong secret of a plain-text secret client', async () => {
    const res = await token({ ...VALID, client_id: 'clientid456', client_secret: 'secret45' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('CC18 the token reaches the upstream with the consumer headers', async () => {
    const issued = assertTokenResponse(await token({ ...VALID, authenticated_userid: 'hello', provision_key: PROVISION_KEY }), { refresh: false });
    const headers = echoed(await fx.client.proxy(`/request?access_token=${issued.access_token}`, ON)).headers;
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-authenticated-userid'], 'hello');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
    assert.ok(headers['x-consumer-id']);
  });

  it('CC19 multipart token request, then a multipart access_token', async () => {
    const res = await fx.client.send('/oauth2/token', {
      ...ON,
      body: { multipart: { ...VALID, authenticated_userid: 'hello', provision_key: PROVISION_KEY } },
    });
    const issued = assertTokenResponse(res, { refresh: false });
    const proxied = await fx.client.proxy('/request', { ...ON, method: 'POST', body: { multipart: { access_token: issued.access_token } } });
    assert.equal(proxied.status, 200, proxied.text);
  });

  it('CC20 form-encoded token request (RFC 6749 §4.4.2)', async () => {
    assertTokenResponse(await fx.client.send('/oauth2/token', { ...ON, body: { form: VALID } }), { refresh: false });
  });

  it('CC21 public clients are refused: unauthorized_client (RFC 6749 §4.4; Kong issues them a token)', async () => {
    const res = await token({ client_id: 'clientid11211', scope: 'email', grant_type: 'client_credentials' });
    assertOAuthError(res, 400, 'unauthorized_client');
  });

  it('CC22 client_credentials where it is not enabled', async () => {
    assertOAuthError(await fx.client.token(VALID), 400, 'unsupported_grant_type', 'Invalid grant_type');
  });

  it('CC23 mandatory scope missing', async () => {
    const res = await token({ client_id: 'clientid123', client_secret: 'secret123', grant_type: 'client_credentials' });
    assertOAuthError(res, 400, 'invalid_scope', 'You must specify a scope');
  });

  it('CC23b an empty scope does not satisfy mandatory_scope (RFC 6749 §3.2; Kong lets it through)', async () => {
    assertOAuthError(await token({ ...VALID, scope: '' }), 400, 'invalid_scope', 'You must specify a scope');
  });

  it('CC24 unknown scope', async () => {
    assertOAuthError(await token({ ...VALID, scope: 'wot' }), 400, 'invalid_scope', '"wot" is an invalid scope');
  });

  it('CC25 two scopes are granted and returned space-separated', async () => {
    assertTokenResponse(await token({ ...VALID, scope: 'email profile' }), { refresh: false, scope: 'email profile' });
  });

  it('CC26 state is echoed', async () => {
    assertTokenResponse(await token({ ...VALID, state: 'xyz' }), { refresh: false, state: 'xyz' });
  });

  it('CC27 a garbage Basic header is a clean 401 with a Basic challenge (RFC 6749 §5.2; Kong answers 400 for this grant)', async () => {
    const res = await token({ scope: 'email', grant_type: 'client_credentials' }, { headers: { authorization: 'Basic %%%not-base64' } });
    assertOAuthError(res, 401, 'invalid_client', 'Invalid client authentication');
    assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
  });
});

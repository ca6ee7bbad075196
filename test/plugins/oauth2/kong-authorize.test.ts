/**
 * Kong's authorization endpoint cases (reference §7.2 code grant, §7.3 implicit grant), on Kong's fixture.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startGateway } from '../../helpers/gateway.ts';
import {
  GOOGLE,
  KongClient,
  kongConfig,
  KONG_TOKEN,
  PROVISION_KEY,
  assertNoCache,
  assertOAuthError,
  echoed,
  kongFixtureAroundTests,
  type Fixture,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const CODE = /^http:\/\/google\.test\/kong\?code=\w{32,}$/;
const VALID = { provision_key: PROVISION_KEY, authenticated_userid: 'id123', client_id: 'clientid123', scope: 'email', response_type: 'code' };
const INVALID_REDIRECT =
  'error=invalid_request&error_description=Invalid%20redirect_uri%20that%20does%20not%20match%20with%20any%20redirect_uri%20created%20with%20the%20application';

function redirectOf(res: Awaited<ReturnType<Fixture['client']['authorize']>>): string {
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['redirect_uri'], res.text);
  return body.redirect_uri;
}

/** Exchanges a code of clientid123 on oauth2.test and returns what the upstream saw with the token. */
async function upstreamViewOfCode(code: string) {
  const token = await fx.client.token({ code, client_id: 'clientid123', client_secret: 'secret123', grant_type: 'authorization_code' });
  assert.equal(token.status, 200, token.text);
  const res = await fx.client.proxy('/request', { headers: { authorization: `bearer ${token.json().access_token}` } });
  return echoed(res).headers;
}

describe('Kong §7.2 authorization endpoint: code grant', () => {
  it('AZ01 no body: invalid_provision_key', async () => {
    const res = await fx.client.authorize(undefined);
    assertOAuthError(res, 400, 'invalid_provision_key', 'Invalid provision_key');
    assertNoCache(res);
  });

  // AZ02 (a gRPC call without credentials) is in kong-proxy.test.ts, with the gRPC upstream.

  it('AZ03 provision_key only: missing authenticated_userid', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY });
    assertOAuthError(res, 400, 'invalid_authenticated_userid', 'Missing authenticated_userid parameter');
  });

  it('AZ03b blank authenticated_userid counts as missing', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY, authenticated_userid: '   ' });
    assertOAuthError(res, 400, 'invalid_authenticated_userid', 'Missing authenticated_userid parameter');
  });

  it('AZ04 no client_id: invalid_client without a redirect', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY, authenticated_userid: 'id123' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    assertNoCache(res);
  });

  it('AZ04b unknown client_id: invalid_client without a redirect', async () => {
    const res = await fx.client.authorize({ ...VALID, client_id: 'nope' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('AZ04c client without redirect_uris: invalid_client', async () => {
    const res = await fx.client.authorize({ ...VALID, client_id: 'clientid10112' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
  });

  it('AZ05 missing mandatory scope: error in the redirect', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY, authenticated_userid: 'id123', client_id: 'clientid123' });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=invalid_scope&error_description=You%20must%20specify%20a%20scope`);
  });

  it('AZ06 unknown scope', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY, authenticated_userid: 'id123', client_id: 'clientid123', scope: 'wot' });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=invalid_scope&error_description=%22wot%22%20is%20an%20invalid%20scope`);
  });

  it('AZ07 no response_type', async () => {
    const res = await fx.client.authorize({ provision_key: PROVISION_KEY, authenticated_userid: 'id123', client_id: 'clientid123', scope: 'email' });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=unsupported_response_type&error_description=Invalid%20response_type`);
  });

  it('AZ08 error redirect carries the state', async () => {
    const res = await fx.client.authorize({
      provision_key: PROVISION_KEY,
      authenticated_userid: 'id123',
      client_id: 'clientid123',
      scope: 'email',
      state: 'somestate',
    });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=unsupported_response_type&error_description=Invalid%20response_type&state=somestate`);
  });

  it('AZ09 unregistered redirect_uri: error sent to the first registered one', async () => {
    const res = await fx.client.authorize({ ...VALID, redirect_uri: 'http://hello.test/' });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?${INVALID_REDIRECT}`);
  });

  it('AZ10 HTTP + X-Forwarded-Proto from a trusted IP; registered query args are kept', async () => {
    const res = await fx.client.authorize(
      { ...VALID, client_id: 'clientid789' },
      { host: 'oauth2_6.test', transport: 'http', headers: { 'x-forwarded-proto': 'https' } },
    );
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/google\.test\/kong\?code=\w{32,}&foo=bar$/);
  });

  it('AZ11 first of several redirect_uris by default', async () => {
    const res = await fx.client.authorize(
      { ...VALID, client_id: 'clientid456' },
      { host: 'oauth2_6.test', transport: 'http', headers: { 'x-forwarded-proto': 'https' } },
    );
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/one\.test\/one\/\?code=\w{32,}$/);
  });

  it('AZ11b the second registered redirect_uri when asked for', async () => {
    const res = await fx.client.authorize({ ...VALID, client_id: 'clientid456', redirect_uri: 'http://two.test/two' }, { host: 'oauth2_6.test' });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/two\.test\/two\?code=\w{32,}$/);
  });

  it('AZ12 plain HTTP is refused', async () => {
    const res = await fx.client.authorize(VALID, { transport: 'http' });
    assertOAuthError(res, 400, 'access_denied', 'You must use HTTPS');
  });

  it('AZ12b several X-Forwarded-Proto values are refused', async () => {
    const res = await fx.client.authorize(VALID, { host: 'oauth2_6.test', transport: 'http', headers: { 'x-forwarded-proto': 'https, http' } });
    assertOAuthError(res, 400, 'access_denied', 'Only one X-Forwarded-Proto header allowed');
  });

  it('AZ13 HTTP + X-Forwarded-Proto https accepted on oauth2_6.test', async () => {
    const res = await fx.client.authorize(VALID, { host: 'oauth2_6.test', transport: 'http', headers: { 'x-forwarded-proto': 'https' } });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), CODE);
  });

  it('AZ14 X-Forwarded-Proto is ignored without accept_http_if_already_terminated', async () => {
    const res = await fx.client.authorize(VALID, { transport: 'http', headers: { 'x-forwarded-proto': 'https' } });
    assertOAuthError(res, 400, 'access_denied', 'You must use HTTPS');
  });

  it('AZ14b X-Forwarded-Proto from a peer outside trusted_ips is ignored even with the flag', async () => {
    const config = kongConfig(fx.upstream.url);
    delete config.gateway.trusted_ips;
    const untrusting = await startGateway(config);
    try {
      const res = await new KongClient(untrusting).authorize(VALID, { host: 'oauth2_6.test', transport: 'http', headers: { 'x-forwarded-proto': 'https' } });
      assertOAuthError(res, 400, 'access_denied', 'You must use HTTPS');
    } finally {
      await untrusting.stop();
    }
  });

  it('AZ15 a valid code request', async () => {
    const res = await fx.client.authorize(VALID);
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), CODE);
  });

  it('AZ16 wrong provision_key', async () => {
    const res = await fx.client.authorize({ ...VALID, provision_key: 'provision123a' }, { host: 'example-path.test' });
    assertOAuthError(res, 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('AZ17 any path prefix: /somepath/oauth2/authorize without a Host', async () => {
    const res = await fx.client.send('/somepath/oauth2/authorize', { host: null, body: { json: VALID } });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), CODE);
  });

  it('AZ18 trailing slash', async () => {
    const res = await fx.client.send('/oauth2/authorize/', { body: { json: VALID } });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), CODE);
  });

  it('AZ19 state is returned, with no-cache headers', async () => {
    const res = await fx.client.authorize({ ...VALID, state: 'hello' });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/google\.test\/kong\?code=\w{32,}&state=hello$/);
    assertNoCache(res);
  });

  it('AZ20 the code carries authenticated_userid, scope and credential', async () => {
    const code = await fx.client.provisionCode();
    const headers = await upstreamViewOfCode(code);
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
    assert.equal(headers['x-consumer-username'], 'bob');
  });

  it('AZ21 scope user.email', async () => {
    const code = await fx.client.provisionCode({ scope: 'user.email' });
    const headers = await upstreamViewOfCode(code);
    assert.equal(headers['x-authenticated-scope'], 'user.email');
  });

  it('AZ21b repeated whitespace in scope is normalized', async () => {
    const code = await fx.client.provisionCode({ scope: 'email   profile' });
    const headers = await upstreamViewOfCode(code);
    // Kong forwards the stored scope space-separated; INTERFACE §4 documents X-Authenticated-Scope comma-separated.
    assert.equal(headers['x-authenticated-scope'], 'email,profile');
  });

  const publicClient = { provision_key: PROVISION_KEY, authenticated_userid: 'id123', client_id: 'clientid11211', scope: 'user.email', response_type: 'code', state: 'hello' };

  it('AZ22 unsupported code_challenge_method', async () => {
    const res = await fx.client.authorize({ ...publicClient, code_challenge: '1234', code_challenge_method: 'foo' });
    assert.equal(res.status, 400);
    assert.equal(
      redirectOf(res),
      `${GOOGLE}?error=invalid_request&error_description=code_challenge_method%20is%20not%20supported%2c%20must%20be%20S256&state=hello`,
    );
  });

  it('AZ22b plain is not supported either', async () => {
    const res = await fx.client.authorize({ ...publicClient, code_challenge: '1234', code_challenge_method: 'plain' });
    assert.equal(res.status, 400);
    assert.match(redirectOf(res), /error_description=code_challenge_method%20is%20not%20supported%2c%20must%20be%20S256/);
  });

  it('AZ23 code_challenge_method without code_challenge', async () => {
    const res = await fx.client.authorize({ ...publicClient, code_challenge_method: 'H256' });
    assert.equal(res.status, 400);
    assert.equal(
      redirectOf(res),
      `${GOOGLE}?error=invalid_request&error_description=code_challenge%20is%20required%20when%20code_method%20is%20present&state=hello`,
    );
  });

  it('AZ24 public client without a challenge (pkce lax)', async () => {
    const res = await fx.client.authorize(publicClient);
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=invalid_request&error_description=code_challenge%20is%20required%20for%20public%20clients&state=hello`);
  });

  it('AZ25 confidential client without a challenge (pkce strict)', async () => {
    const res = await fx.client.authorize({ ...publicClient, client_id: 'clientid123' }, { host: 'oauth2_15.test' });
    assert.equal(res.status, 400);
    assert.equal(
      redirectOf(res),
      `${GOOGLE}?error=invalid_request&error_description=code_challenge%20is%20required%20for%20confidential%20clients&state=hello`,
    );
  });

  it('AZ26 public client without a challenge (pkce none)', async () => {
    const res = await fx.client.authorize(publicClient, { host: 'oauth2_14.test' });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/google\.test\/kong\?code=\w{32,}&state=hello$/);
  });

  /** A code issued with a challenge must ask for a verifier at /token (the challenge and S256 were stored). */
  async function assertCodeRequiresVerifier(res: Awaited<ReturnType<Fixture['client']['authorize']>>) {
    assert.equal(res.status, 200, res.text);
    const code = new URL(redirectOf(res)).searchParams.get('code');
    const token = await fx.client.token({ code, client_id: 'clientid11211', grant_type: 'authorization_code' });
    assertOAuthError(token, 400, 'invalid_request', 'code_verifier is required for PKCE authorization requests');
  }

  it('AZ27 challenge without a method defaults to S256', async () => {
    await assertCodeRequiresVerifier(await fx.client.authorize({ ...publicClient, code_challenge: '1234' }));
  });

  it('AZ28 challenge with method S256', async () => {
    await assertCodeRequiresVerifier(await fx.client.authorize({ ...publicClient, code_challenge: '1234', code_challenge_method: 'S256' }));
  });

  it('AZ29 lower-case s256 is accepted', async () => {
    await assertCodeRequiresVerifier(await fx.client.authorize({ ...publicClient, code_challenge: '1234', code_challenge_method: 's256' }));
  });

  it('AZ30 GET is not allowed', async () => {
    const res = await fx.client.send('/oauth2/authorize', { method: 'GET' });
    const description = 'The HTTP method GET is invalid for the authorization endpoint';
    assertOAuthError(res, 405, 'invalid_method', description);
    assert.equal(res.headers['www-authenticate'], `Bearer error="invalid_method", error_description="${description}"`);
  });

  it('AZ31 form-encoded parameters work as JSON ones do', async () => {
    const res = await fx.client.send('/oauth2/authorize', { body: { form: VALID } });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), CODE);
  });

  it('AZ33 response_type code is refused where enable_authorization_code is false', async () => {
    const res = await fx.client.authorize(VALID, { host: 'oauth2_4.test' });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=unsupported_response_type&error_description=Invalid%20response_type`);
  });

  for (const clientId of [true, '', 123, ['clientid123', 'clientid456'], { id: 'clientid123' }]) {
    it(`AZ34 client_id ${JSON.stringify(clientId)} is a clean invalid_client (Kong #4728, #6311)`, async () => {
      const res = await fx.client.authorize({ ...VALID, client_id: clientId });
      assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    });
  }

  it('AZ35 a scope that is not a string', async () => {
    const res = await fx.client.authorize({ ...VALID, scope: ['email'] });
    assert.equal(res.status, 400);
    assert.equal(redirectOf(res), `${GOOGLE}?error=invalid_scope&error_description=scope%20must%20be%20a%20string`);
  });

  for (const scope of ['', '   ']) {
    it(`AZ38 scope ${JSON.stringify(scope)} does not satisfy mandatory_scope (RFC 6749 §3.1; Kong lets it through)`, async () => {
      const res = await fx.client.authorize({ ...VALID, scope });
      assert.equal(res.status, 400);
      assert.equal(redirectOf(res), `${GOOGLE}?error=invalid_scope&error_description=You%20must%20specify%20a%20scope`);
    });
  }

  it('AZ36 a provision_key that is not a string', async () => {
    assertOAuthError(await fx.client.authorize({ ...VALID, provision_key: [PROVISION_KEY] }), 400, 'invalid_provision_key', 'Invalid provision_key');
  });

  it('AZ37 a JSON body that is not an object', async () => {
    for (const raw of ['[1,2]', 'null', '"text"']) {
      const res = await fx.client.send('/oauth2/authorize', { body: { raw, contentType: 'application/json' } });
      assert.equal(res.status, 400, `${raw}: ${res.text}`);
    }
  });

  it("AZ38 a state with reserved and non-ASCII characters comes back intact, escaped Kong's way", async () => {
    const state = 'a b&c=d/é?#%.-_~';
    const res = await fx.client.authorize({ ...VALID, state });
    assert.equal(res.status, 200, res.text);
    const redirect = redirectOf(res);
    assert.equal(new URL(redirect).searchParams.get('state'), state);
    // LuaSocket's url.escape: every byte outside [A-Za-z0-9_] as lower-case %xx.
    assert.ok(redirect.endsWith('&state=a%20b%26c%3dd%2f%c3%a9%3f%23%25%2e%2d_%7e'), redirect);
  });

  it('AZ32 malformed JSON body is a clean 400', async () => {
    const res = await fx.client.send('/oauth2/authorize', { body: { raw: '{"provision_key": ', contentType: 'application/json' } });
    assert.equal(res.status, 400, res.text);
  });
});

describe('Kong §7.3 authorization endpoint: implicit grant', () => {
  const implicit = { ...VALID, response_type: 'token' };
  // Kong's IMPL regex has no `scope`; INTERFACE §4 (RFC 6749 §4.2.2) puts the granted scope in the token response.
  const IMPL = /^http:\/\/google\.test\/kong#access_token=\w{32,}&expires_in=5&scope=email&token_type=bearer$/;

  it('IM01 token in the fragment, no-cache', async () => {
    const res = await fx.client.authorize(implicit);
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), IMPL);
    assertNoCache(res);
  });

  it('IM02 with state', async () => {
    const res = await fx.client.authorize({ ...implicit, state: 'wot' });
    assert.equal(res.status, 200, res.text);
    assert.match(redirectOf(res), /^http:\/\/google\.test\/kong#access_token=\w{32,}&expires_in=5&scope=email&state=wot&token_type=bearer$/);
  });

  it('IM03 expires_in 5 and no refresh token', async () => {
    const res = await fx.client.authorize(implicit);
    const fragment = new URLSearchParams(new URL(redirectOf(res)).hash.slice(1));
    assert.equal(fragment.get('expires_in'), '5');
    assert.equal(fragment.get('refresh_token'), null);
  });

  it('IM04 + IM05 scope "email  profile" is normalized and reaches the upstream', async () => {
    const res = await fx.client.authorize({ ...implicit, scope: 'email  profile', authenticated_userid: 'userid123' });
    assert.equal(res.status, 200, res.text);
    const fragment = new URLSearchParams(new URL(redirectOf(res)).hash.slice(1));
    const accessToken = fragment.get('access_token')!;
    assert.match(accessToken, KONG_TOKEN);
    assert.equal(fragment.get('scope'), 'email profile');
    assert.equal(fragment.get('refresh_token'), null);
    const headers = echoed(await fx.client.proxy(`/request?access_token=${accessToken}`)).headers;
    assert.ok(headers['x-consumer-id']);
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-authenticated-scope'], 'email,profile');
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
  });

  it('IM07 errors of an implicit request go in the fragment, like its token (RFC 6749 §4.2.2.1; Kong: the query)', async () => {
    const res = await fx.client.authorize({ ...implicit, scope: 'wot', state: 'wot' });
    assert.equal(res.status, 400, res.text);
    const target = new URL(redirectOf(res));
    assert.equal(target.search, '');
    const fragment = new URLSearchParams(target.hash.slice(1));
    assert.equal(fragment.get('error'), 'invalid_scope');
    assert.equal(fragment.get('state'), 'wot');
  });

  it('IM06 token_expiration of the route (7)', async () => {
    const res = await fx.client.authorize({ ...implicit, client_id: 'clientid1011' }, { host: 'oauth2_11.test' });
    assert.equal(res.status, 200, res.text);
    const fragment = new URLSearchParams(new URL(redirectOf(res)).hash.slice(1));
    assert.equal(fragment.get('expires_in'), '7');
    assert.equal(fragment.get('refresh_token'), null);
  });
});

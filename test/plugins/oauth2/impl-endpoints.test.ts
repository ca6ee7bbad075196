/**
 * Tollgate's own oauth2 behaviour beyond Kong's catalogue, end to end on a real gateway and upstream:
 * the RFC corrections of INTERFACE §4, introspection (RFC 7662), revocation (RFC 7009), metadata
 * (RFC 8414), Kong-hashed secrets, identity headers, service-less routes, bad input.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';
import { parseRaw, portOf, rawExchange } from '../../helpers/support.ts';

const KONG_VECTOR_HASH = '$pbkdf2-sha512$i=10000,l=32$YSBsaXR0ZSBiaXQsIGp1c3QgYSBsaXR0bGUgYml0$z6ysNworexAhDELywIDi0ba0B0T7F/MBZ6Ige9lWRYI';
const CALLBACK = 'https://acme.example/cb';
const OTHER_CALLBACK = 'https://acme.example/other';

function config(upstreamUrl: string): Record<string, any> {
  const oauth = { enable_client_credentials: true, enable_authorization_code: true, scopes: ['read', 'write'], provision_key: 'pk-orders' };
  return {
    services: [
      {
        name: 'orders',
        url: upstreamUrl,
        routes: [{ name: 'orders', paths: ['/orders'], plugins: [{ name: 'oauth2', config: oauth }] }],
      },
      {
        name: 'billing',
        url: upstreamUrl,
        routes: [{ name: 'billing', paths: ['/billing'], plugins: [{ name: 'oauth2', config: { ...oauth, provision_key: 'pk-billing' } }] }],
      },
    ],
    routes: [
      {
        name: 'issuer-only',
        paths: ['/issuer'],
        strip_path: false,
        plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk-issuer' } }],
      },
    ],
    consumers: [
      {
        username: 'acme',
        custom_id: 'cust-42',
        oauth2_credentials: [
          { name: 'Acme Billing App', client_id: 'acme-app', client_secret: 'acme-secret', redirect_uris: [CALLBACK, OTHER_CALLBACK] },
          { name: 'Moved from Kong', client_id: 'kong-app', client_secret: KONG_VECTOR_HASH, hash_secret: true, redirect_uris: [CALLBACK] },
          { name: 'Acme SPA', client_id: 'acme-spa', client_type: 'public', redirect_uris: [CALLBACK] },
        ],
      },
      {
        username: 'globex',
        oauth2_credentials: [{ name: 'Globex', client_id: 'globex-app', client_secret: 'globex-secret' }],
      },
    ],
  };
}

const fx = gatewayOnEchoUpstreamAroundTests(config);

function post(path: string, body: Record<string, any>, headers: Record<string, string> = {}): Promise<Reply> {
  return request(fx.gw.https + path, { method: 'POST', body, headers });
}

function basic(id: string, secret: string): string {
  return 'Basic ' + Buffer.from(`${id}:${secret}`).toString('base64');
}

async function clientCredentialsToken(path = '/orders', clientId = 'acme-app', secret = 'acme-secret', scope = 'read write'): Promise<string> {
  const res = await post(`${path}/oauth2/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: secret, scope });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

function callOrders(token: string, headers: Record<string, string> = {}): Promise<Reply> {
  return request(fx.gw.http + '/orders/items', { headers: { authorization: `Bearer ${token}`, ...headers } });
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

async function authorizeCode(fields: Record<string, any> = {}): Promise<string> {
  const res = await post('/orders/oauth2/authorize', {
    provision_key: 'pk-orders',
    authenticated_userid: 'user-7',
    client_id: 'acme-app',
    response_type: 'code',
    scope: 'read',
    ...fields,
  });
  assert.equal(res.status, 200, res.text);
  return new URL(res.json().redirect_uri).searchParams.get('code')!;
}

describe('client_credentials and the identity headers', () => {
  it('issues a token with scope in the response, secret in the body or as HTTP Basic', async () => {
    const body = await post('/orders/oauth2/token', { grant_type: 'client_credentials', client_id: 'acme-app', client_secret: 'acme-secret', scope: 'read write' });
    assert.equal(body.status, 200, body.text);
    assert.equal(body.headers['cache-control'], 'no-store');
    const json = body.json();
    assert.deepEqual(Object.keys(json).sort(), ['access_token', 'expires_in', 'scope', 'token_type']);
    assert.equal(json.scope, 'read write');
    assert.equal(json.token_type, 'bearer');
    assert.equal(json.expires_in, 7200);
    const viaBasic = await post('/orders/oauth2/token', { grant_type: 'client_credentials', scope: 'read' }, { authorization: basic('acme-app', 'acme-secret') });
    assert.equal(viaBasic.status, 200, viaBasic.text);
    assert.equal(viaBasic.json().scope, 'read');
  });

  it('sends the identity headers upstream and drops client-sent copies', async () => {
    const token = await clientCredentialsToken();
    const res = await callOrders(token, {
      'x-consumer-username': 'mallory',
      'x-authenticated-userid': 'admin',
      'x-anonymous-consumer': 'true',
      'x-consumer-custom-id': 'evil',
    });
    assert.equal(res.status, 200, res.text);
    const seen = fx.upstream.requests.at(-1)!.headers;
    assert.match(String(seen['x-consumer-id']), /^[0-9a-f-]{36}$/);
    assert.equal(seen['x-consumer-username'], 'acme');
    assert.equal(seen['x-consumer-custom-id'], 'cust-42');
    assert.equal(seen['x-credential-identifier'], 'acme-app');
    assert.equal(seen['x-authenticated-scope'], 'read,write');
    assert.equal(seen['x-authenticated-userid'], undefined);
    assert.equal(seen['x-anonymous-consumer'], undefined);
  });

  it('HTTP Basic credentials are form-urldecoded (RFC 6749 §2.3.1)', async () => {
    const res = await post('/orders/oauth2/token', { grant_type: 'client_credentials' }, { authorization: basic('acme%2Dapp', 'acme%2dsecret') });
    assert.equal(res.status, 200, res.text);
  });

  it('the Basic scheme is case-insensitive and must open the header (RFC 7235 §2.1)', async () => {
    const credentials = basic('acme-app', 'acme-secret').slice('Basic '.length);
    const upper = await post('/orders/oauth2/token', { grant_type: 'client_credentials' }, { authorization: `BASIC ${credentials}` });
    assert.equal(upper.status, 200, upper.text);
    const insideBearer = await post('/orders/oauth2/token', { grant_type: 'client_credentials' }, { authorization: `Bearer basic${credentials}` });
    assert.equal(insideBearer.json().error, 'invalid_client', insideBearer.text);
  });

  it('accepts a form-encoded body', async () => {
    const res = await request(fx.gw.https + '/orders/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret&scope=write',
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().scope, 'write');
  });

  it('a secret hashed by Kong (PBKDF2 PHC string) authenticates its client', async () => {
    const ok = await post('/orders/oauth2/token', { grant_type: 'client_credentials', client_id: 'kong-app', client_secret: 'tofu' });
    assert.equal(ok.status, 200, ok.text);
    const wrong = await post('/orders/oauth2/token', { grant_type: 'client_credentials' }, { authorization: basic('kong-app', 'tofu!') });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
    assert.deepEqual(wrong.json(), { error: 'invalid_client', error_description: 'Invalid client authentication' });
  });

  it('an unknown client over HTTP Basic gets 401 with a Basic challenge (RFC 6749 §5.2)', async () => {
    const res = await post('/orders/oauth2/token', { grant_type: 'client_credentials' }, { authorization: basic('nobody', 'acme-secret') });
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
    assert.deepEqual(res.json(), { error: 'invalid_client', error_description: 'Invalid client authentication' });
  });

  it('a public client cannot use client_credentials (RFC 6749 §4.4): unauthorized_client', async () => {
    const res = await post('/orders/oauth2/token', { grant_type: 'client_credentials', client_id: 'acme-spa', state: 's1' });
    assert.equal(res.status, 400);
    assert.equal(res.json().error, 'unauthorized_client');
    assert.equal(res.json().state, 's1');
  });

  it('token endpoints answer only over HTTPS', async () => {
    const res = await request(fx.gw.http + '/orders/oauth2/token', {
      method: 'POST',
      body: { grant_type: 'client_credentials', client_id: 'acme-app', client_secret: 'acme-secret' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'access_denied', error_description: 'You must use HTTPS' });
  });

  it('a token of one service is refused on another', async () => {
    const token = await clientCredentialsToken();
    const res = await request(fx.gw.http + '/billing/x', { headers: { authorization: `bearer ${token}` } });
    assert.equal(res.status, 401);
    assert.equal(res.json().error, 'invalid_token');
  });
});

describe('authorization_code with the RFC corrections', () => {
  it('PKCE S256 code flow, then the code is single use: invalid_grant', async () => {
    const { verifier, challenge } = pkce();
    const code = await authorizeCode({ code_challenge: challenge, code_challenge_method: 'S256' });
    const exchange = { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code, code_verifier: verifier };
    const first = await post('/orders/oauth2/token', exchange);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json().scope, 'read');
    assert.ok(first.json().refresh_token);
    const res = await callOrders(first.json().access_token);
    assert.equal(res.status, 200);
    assert.equal(fx.upstream.requests.at(-1)!.headers['x-authenticated-userid'], 'user-7');
    const again = await post('/orders/oauth2/token', exchange);
    assert.equal(again.status, 400);
    assert.deepEqual(again.json(), { error: 'invalid_grant', error_description: 'Invalid code' });
  });

  it('a wrong verifier is invalid_grant', async () => {
    const { challenge } = pkce();
    const code = await authorizeCode({ code_challenge: challenge });
    const res = await post('/orders/oauth2/token', {
      grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code, code_verifier: pkce().verifier,
    });
    assert.equal(res.status, 400);
    assert.equal(res.json().error, 'invalid_grant');
  });

  it('a verifier with characters outside the unreserved set is invalid_request (RFC 7636 §4.1)', async () => {
    const verifier = 'a'.repeat(42) + '+/= ';
    const code = await authorizeCode({ code_challenge: createHash('sha256').update(verifier).digest('base64url') });
    const res = await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code, code_verifier: verifier });
    assert.equal(res.status, 400);
    assert.equal(res.json().error, 'invalid_request', res.text);
  });

  it('a verifier for a code issued without a challenge is invalid_grant (PKCE downgrade, RFC 9700 §2.1.1)', async () => {
    const code = await authorizeCode();
    const res = await post('/orders/oauth2/token', {
      grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code, code_verifier: pkce().verifier,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'invalid_grant', error_description: 'Invalid code' });
  });

  it('a code is redeemable only with the redirect_uri it was issued for (RFC 6749 §4.1.3), and a failed try spends it', async () => {
    const code = await authorizeCode({ redirect_uri: OTHER_CALLBACK });
    const base = { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code };
    const withoutUri = await post('/orders/oauth2/token', base);
    assert.equal(withoutUri.status, 400);
    assert.equal(withoutUri.json().error, 'invalid_grant');
    const retried = await post('/orders/oauth2/token', { ...base, redirect_uri: OTHER_CALLBACK });
    assert.equal(retried.json().error, 'invalid_grant', retried.text);
    const fresh = { ...base, code: await authorizeCode({ redirect_uri: OTHER_CALLBACK }) };
    const withUri = await post('/orders/oauth2/token', { ...fresh, redirect_uri: OTHER_CALLBACK });
    assert.equal(withUri.status, 200, withUri.text);
  });

  it('a code of another client or another service is invalid_grant', async () => {
    const code = await authorizeCode();
    const otherService = await post('/billing/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code });
    assert.equal(otherService.json().error, 'invalid_grant');
    const otherClient = await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'kong-app', client_secret: 'tofu', code });
    assert.equal(otherClient.json().error, 'invalid_grant');
  });

  it('the public client must use PKCE (lax) and gets tokens without a secret', async () => {
    const refused = await post('/orders/oauth2/authorize', {
      provision_key: 'pk-orders', authenticated_userid: 'u', client_id: 'acme-spa', response_type: 'code', scope: 'read', state: 'x y',
    });
    assert.equal(refused.status, 400);
    assert.equal(refused.json().redirect_uri, `${CALLBACK}?error=invalid_request&error_description=code_challenge%20is%20required%20for%20public%20clients&state=x%20y`);
    const { verifier, challenge } = pkce();
    const code = await authorizeCode({ client_id: 'acme-spa', code_challenge: challenge });
    const res = await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-spa', code, code_verifier: verifier });
    assert.equal(res.status, 200, res.text);
  });
});

describe('refresh tokens', () => {
  it('rotation: new pair, the old access and refresh tokens die; reuse is invalid_grant', async () => {
    const code = await authorizeCode();
    const issued = (await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code })).json();
    const refresh = { grant_type: 'refresh_token', client_id: 'acme-app', client_secret: 'acme-secret', refresh_token: issued.refresh_token };
    const renewed = await post('/orders/oauth2/token', refresh);
    assert.equal(renewed.status, 200, renewed.text);
    assert.notEqual(renewed.json().refresh_token, issued.refresh_token);
    assert.equal(renewed.json().scope, 'read');
    assert.equal((await callOrders(issued.access_token)).status, 401);
    assert.equal((await callOrders(renewed.json().access_token)).status, 200);
    const replay = await post('/orders/oauth2/token', refresh);
    assert.deepEqual(replay.json(), { error: 'invalid_grant', error_description: 'Invalid refresh_token' });
  });

  it("another client's refresh token is invalid_grant", async () => {
    const code = await authorizeCode();
    const issued = (await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code })).json();
    const res = await post('/orders/oauth2/token', { grant_type: 'refresh_token', client_id: 'kong-app', client_secret: 'tofu', refresh_token: issued.refresh_token });
    assert.equal(res.json().error, 'invalid_grant');
  });
});

describe('introspection (RFC 7662)', () => {
  it('describes a live token to an authenticated client', async () => {
    const token = await clientCredentialsToken();
    const res = await post('/orders/oauth2/introspect', { token }, { authorization: basic('kong-app', 'tofu') });
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    assert.equal(body.active, true);
    assert.equal(body.client_id, 'acme-app');
    assert.equal(body.scope, 'read write');
    assert.equal(body.username, 'acme');
    assert.equal(body.token_type, 'bearer');
    assert.equal(body.exp - body.iat, 7200);
  });

  it('unknown, foreign-service and revoked tokens are inactive', async () => {
    const auth = { authorization: basic('acme-app', 'acme-secret') };
    assert.deepEqual((await post('/orders/oauth2/introspect', { token: 'nope' }, auth)).json(), { active: false });
    const billing = await clientCredentialsToken('/billing');
    assert.deepEqual((await post('/orders/oauth2/introspect', { token: billing }, auth)).json(), { active: false });
  });

  it('refuses unauthenticated callers and plain HTTP', async () => {
    const token = await clientCredentialsToken();
    const wrong = await post('/orders/oauth2/introspect', { token }, { authorization: basic('acme-app', 'nope') });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json().error, 'invalid_client');
    const insecure = await request(fx.gw.http + '/orders/oauth2/introspect', { method: 'POST', body: { token }, headers: { authorization: basic('acme-app', 'acme-secret') } });
    assert.equal(insecure.json().error, 'access_denied');
    const get = await request(fx.gw.https + '/orders/oauth2/introspect');
    assert.equal(get.status, 405);
  });

  it('invalid client credentials in the body are 401 too (RFC 7662 §2.3)', async () => {
    const token = await clientCredentialsToken();
    for (const body of [{ token, client_id: 'acme-app', client_secret: 'nope' }, { token }]) {
      const res = await post('/orders/oauth2/introspect', body);
      assert.equal(res.status, 401, res.text);
      assert.equal(res.json().error, 'invalid_client');
      assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2.0"');
    }
  });

  it('a public client sees only its own tokens', async () => {
    const token = await clientCredentialsToken();
    const res = await post('/orders/oauth2/introspect', { token, client_id: 'acme-spa' });
    assert.deepEqual(res.json(), { active: false });
  });
});

describe('revocation (RFC 7009)', () => {
  it('revoking an access token ends it at once (and its refresh token)', async () => {
    const code = await authorizeCode();
    const issued = (await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code })).json();
    assert.equal((await callOrders(issued.access_token)).status, 200);
    const res = await post('/orders/oauth2/revoke', { token: issued.access_token, client_id: 'acme-app', client_secret: 'acme-secret' });
    assert.equal(res.status, 200);
    assert.equal((await callOrders(issued.access_token)).status, 401);
    const refresh = await post('/orders/oauth2/token', { grant_type: 'refresh_token', client_id: 'acme-app', client_secret: 'acme-secret', refresh_token: issued.refresh_token });
    assert.equal(refresh.json().error, 'invalid_grant');
  });

  it("revoking by refresh token works; another client's token is left alone; unknown answers 200", async () => {
    const code = await authorizeCode();
    const issued = (await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code })).json();
    const foreign = await post('/orders/oauth2/revoke', { token: issued.access_token }, { authorization: basic('kong-app', 'tofu') });
    assert.equal(foreign.status, 200);
    assert.equal((await callOrders(issued.access_token)).status, 200);
    const byRefresh = await post('/orders/oauth2/revoke', { token: issued.refresh_token, token_type_hint: 'refresh_token' }, { authorization: basic('acme-app', 'acme-secret') });
    assert.equal(byRefresh.status, 200);
    assert.equal((await callOrders(issued.access_token)).status, 401);
    const unknown = await post('/orders/oauth2/revoke', { token: 'never-issued' }, { authorization: basic('acme-app', 'acme-secret') });
    assert.equal(unknown.status, 200);
  });
});

describe('authorization server metadata (RFC 8414)', () => {
  it('is served under the route prefix and at the RFC 8414 §3.1 location', async () => {
    const underRoute = await request(fx.gw.https + '/orders/.well-known/oauth-authorization-server', { headers: { host: 'api.example' } });
    assert.equal(underRoute.status, 200, underRoute.text);
    const doc = underRoute.json();
    assert.equal(doc.issuer, 'https://api.example/orders');
    assert.equal(doc.token_endpoint, 'https://api.example/orders/oauth2/token');
    assert.equal(doc.introspection_endpoint, 'https://api.example/orders/oauth2/introspect');
    assert.equal(doc.revocation_endpoint, 'https://api.example/orders/oauth2/revoke');
    assert.deepEqual(doc.grant_types_supported, ['authorization_code', 'client_credentials', 'refresh_token']);
    assert.deepEqual(doc.response_types_supported, ['code']);
    assert.deepEqual(doc.scopes_supported, ['read', 'write']);
    assert.deepEqual(doc.code_challenge_methods_supported, ['S256']);
    const wellKnown = await request(fx.gw.https + '/.well-known/oauth-authorization-server/orders', { headers: { host: 'api.example' } });
    assert.equal(wellKnown.status, 200, wellKnown.text);
    assert.deepEqual(wellKnown.json(), doc);
    const issuerOnly = await request(fx.gw.https + '/.well-known/oauth-authorization-server/issuer', { headers: { host: 'api.example' } });
    assert.equal(issuerOnly.json().issuer, 'https://api.example/issuer');
    assert.deepEqual(issuerOnly.json().grant_types_supported, ['client_credentials']);
    const unknown = await request(fx.gw.https + '/.well-known/oauth-authorization-server/nothing');
    assert.equal(unknown.status, 404);
  });

  it('names the issuer with the port the client used, as discovery requires (RFC 8414 §3.3)', async () => {
    const headers = { host: 'api.example:8443' };
    const underRoute = await request(fx.gw.https + '/orders/.well-known/oauth-authorization-server', { headers });
    assert.equal(underRoute.json().issuer, 'https://api.example:8443/orders');
    assert.equal(underRoute.json().token_endpoint, 'https://api.example:8443/orders/oauth2/token');
    const wellKnown = await request(fx.gw.https + '/.well-known/oauth-authorization-server/orders', { headers });
    assert.equal(wellKnown.json().issuer, 'https://api.example:8443/orders');
  });

  it('takes the issuer from an absolute-form target, as routing does (RFC 9112 §3.2.2: it stands for Host)', async () => {
    for (const path of ['/orders/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server/orders']) {
      const raw = await rawExchange(portOf(fx.gw.https), `GET https://api.example:8443${path} HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n`, undefined, { tls: true });
      const reply = parseRaw(raw);
      assert.equal(reply.status, 200, raw);
      assert.equal(JSON.parse(reply.body).issuer, 'https://api.example:8443/orders', path);
    }
  });
});

describe('service-less routes', () => {
  it('issue tokens bound to the route itself', async () => {
    const token = await clientCredentialsToken('/issuer', 'globex-app', 'globex-secret', '');
    const own = await post('/issuer/oauth2/introspect', { token, client_id: 'globex-app', client_secret: 'globex-secret' });
    assert.equal(own.json().active, true);
    const elsewhere = await post('/orders/oauth2/introspect', { token, client_id: 'globex-app', client_secret: 'globex-secret' });
    assert.equal(elsewhere.json().active, false);
  });
});

describe('bad input never breaks the endpoints', () => {
  const cases: [string, Record<string, string>, string][] = [
    ['malformed JSON', { 'content-type': 'application/json' }, '{"grant_type": '],
    ['a JSON array', { 'content-type': 'application/json' }, '[1,2,3]'],
    ['broken percent escapes', { 'content-type': 'application/x-www-form-urlencoded' }, 'grant_type=%zz&client_id=%'],
    ['a broken multipart body', { 'content-type': 'multipart/form-data; boundary=x' }, '--x\r\nnonsense'],
  ];
  for (const [name, headers, body] of cases) {
    it(`${name}: a 4xx OAuth error`, async () => {
      const res = await request(fx.gw.https + '/orders/oauth2/token', { method: 'POST', headers, body });
      assert.ok(res.status === 400 || res.status === 401, `${res.status} ${res.text}`);
      assert.equal(typeof res.json().error, 'string');
    });
  }

  it('a repeated parameter is invalid_request on every endpoint (RFC 6749 §3.1, §3.2, §5.2)', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const sendForm = (path: string, body: string) => request(fx.gw.https + path, { method: 'POST', headers: form, body });
    const twice = await sendForm('/orders/oauth2/token', 'grant_type=client_credentials&grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret');
    assert.equal(twice.status, 400);
    assert.deepEqual(twice.json(), { error: 'invalid_request', error_description: 'The grant_type parameter must not be sent more than once' });
    const inQuery = await sendForm('/orders/oauth2/introspect?token=a&token=b', 'client_id=acme-app&client_secret=acme-secret');
    assert.equal(inQuery.json().error, 'invalid_request', inQuery.text);
    assert.equal(inQuery.json().error_description, 'The token parameter must not be sent more than once', inQuery.text);
    const authorize = await sendForm('/orders/oauth2/authorize', 'provision_key=pk-orders&authenticated_userid=u&client_id=acme-app&response_type=code&scope=read&redirect_uri=x&redirect_uri=y');
    assert.equal(authorize.status, 400);
    assert.equal(authorize.json().error, 'invalid_request', authorize.text);
    assert.equal(authorize.json().error_description, 'The redirect_uri parameter must not be sent more than once', authorize.text);
  });

  it('non-string values where strings are expected', async () => {
    const res = await post('/orders/oauth2/token', { grant_type: ['client_credentials'], client_id: { a: 1 }, client_secret: 5, scope: 7 });
    assert.equal(res.status, 400);
    const authorize = await post('/orders/oauth2/authorize', { provision_key: 'pk-orders', authenticated_userid: 'u', client_id: 12, redirect_uri: [], code_challenge: {} });
    assert.equal(authorize.status, 400);
    const verifier = await post('/orders/oauth2/token', { grant_type: 'authorization_code', client_id: 'acme-app', client_secret: 'acme-secret', code: await authorizeCode({ code_challenge: 'abc' }), code_verifier: 12 });
    assert.deepEqual(verifier.json(), { error: 'invalid_request', error_description: 'code_verifier is not a string' });
  });

  it('a multipart token request is accepted', async () => {
    const form = new FormData();
    form.set('grant_type', 'client_credentials');
    form.set('client_id', 'acme-app');
    form.set('client_secret', 'acme-secret');
    const encoded = new Response(form);
    const res = await request(fx.gw.https + '/orders/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': encoded.headers.get('content-type')! },
      body: Buffer.from(await encoded.arrayBuffer()),
    });
    assert.equal(res.status, 200, res.text);
  });
});

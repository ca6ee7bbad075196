/**
 * Complete OAuth flows driven by a real client library (oauth4webapi) against a real gateway: discovery through
 * RFC 8414 metadata (also as OIDC clients reach it, after openid-configuration is not found), client credentials, authorization code + PKCE (the authorize step as an operator back end
 * does it), refresh rotation, expiry, introspection (RFC 7662) and revocation (RFC 7009).
 *
 * The authorization server is `https://auth.test/api` (and `/short`, with 2-second tokens); a custom fetch sends
 * every request for `https://auth.test` to the gateway's HTTPS listener with `Host: auth.test`.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as oauth from 'oauth4webapi';
import * as openid from 'openid-client';
import { request, startGateway, startUpstream } from '../../helpers/gateway.ts';

const PROVISION_KEY = 'client-library-provision-key';
const HOST = 'auth.test';
const ISSUER = new URL(`https://${HOST}/api`);
const SHORT_ISSUER = new URL(`https://${HOST}/short`);

let upstream: Awaited<ReturnType<typeof startUpstream>>;
let gw: Awaited<ReturnType<typeof startGateway>>;
let callback: { server: Server; url: string; hits: URL[] };

/** The client's redirect_uri: a real local server that records what the browser would have brought it. */
async function startCallbackServer() {
  const hits: URL[] = [];
  const server = createServer((req, res) => {
    hits.push(new URL(req.url ?? '/', 'http://127.0.0.1'));
    res.end('signed in');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/cb`, hits };
}

function config(redirectUri: string) {
  const plugin = (extra: Record<string, unknown>) => ({
    name: 'oauth2',
    config: {
      enable_client_credentials: true,
      enable_authorization_code: true,
      scopes: ['read', 'write'],
      provision_key: PROVISION_KEY,
      ...extra,
    },
  });
  return {
    _format_version: '3.0',
    services: [
      {
        name: 'orders',
        url: upstream.url,
        routes: [
          { name: 'api', hosts: [HOST], paths: ['/api'], protocols: ['https'], plugins: [plugin({})] },
          { name: 'short', hosts: [HOST], paths: ['/short'], protocols: ['https'], plugins: [plugin({ token_expiration: 2 })] },
        ],
      },
    ],
    consumers: [
      {
        username: 'acme',
        custom_id: 'cust-42',
        oauth2_credentials: [
          { name: 'Acme Billing', client_id: 'acme-app', client_secret: 'acme-secret', hash_secret: true, redirect_uris: [redirectUri] },
          { name: 'Acme SPA', client_id: 'acme-spa', client_type: 'public', redirect_uris: [redirectUri] },
        ],
      },
    ],
  };
}

/** oauth4webapi's fetch hook: `https://auth.test/...` goes to the gateway's TLS listener. */
async function gatewayFetch(url: string, options: { method: string; headers: Record<string, string>; body?: unknown }): Promise<Response> {
  const target = new URL(url);
  assert.equal(target.host, HOST, `the client library went to ${url}`);
  const body = options.body === undefined || options.body === null ? undefined : String(options.body);
  const res = await request(gw.https + target.pathname + target.search, {
    method: options.method,
    headers: { ...options.headers, host: HOST },
    body,
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined) headers.append(name, String(v));
  }
  const nullBody = res.status === 204 || res.status === 304;
  return new Response(nullBody ? null : new Uint8Array(res.body), { status: res.status, headers });
}

const http = { [oauth.customFetch]: gatewayFetch } as const;

const confidential: oauth.Client = { client_id: 'acme-app' };
/** client_secret_post for the flows; client_secret_basic has its own case (it form-urlencodes id and secret). */
const confidentialAuth = oauth.ClientSecretPost('acme-secret');
const spa: oauth.Client = { client_id: 'acme-spa', token_endpoint_auth_method: 'none' };

async function discover(issuer: URL): Promise<oauth.AuthorizationServer> {
  const res = await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...http });
  return oauth.processDiscoveryResponse(issuer, res);
}

/** Calls the protected upstream through the route of `issuer`; returns what the upstream saw. */
async function callApi(issuer: URL, accessToken: string) {
  const res = await oauth.protectedResourceRequest(accessToken, 'GET', new URL(`${issuer.href}/orders`), new Headers(), null, http);
  assert.equal(res.status, 200);
  return (await res.json()) as { path: string; headers: Record<string, string> };
}

/** The operator back end's authorize call (provision_key + authenticated_userid), then the browser's redirect. */
async function authorizeAndFollow(issuer: URL, params: Record<string, string>): Promise<URL> {
  const res = await request(`${gw.https}${issuer.pathname}/oauth2/authorize`, {
    method: 'POST',
    headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ provision_key: PROVISION_KEY, authenticated_userid: 'user-42', response_type: 'code', ...params }).toString(),
  });
  assert.equal(res.status, 200, res.text);
  const redirect = res.json().redirect_uri as string;
  assert.ok(redirect.startsWith(callback.url), redirect);
  const before = callback.hits.length;
  const landed = await fetch(redirect);
  assert.equal(landed.status, 200);
  assert.equal(callback.hits.length, before + 1);
  return new URL(`${callback.url}${callback.hits[before].search}`);
}

async function codeFlow(as: oauth.AuthorizationServer, issuer: URL, client: oauth.Client, auth: oauth.ClientAuth, scope = 'read write') {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const landed = await authorizeAndFollow(issuer, {
    client_id: client.client_id,
    redirect_uri: callback.url,
    scope,
    state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  });
  const params = oauth.validateAuthResponse(as, client, landed, state);
  const res = await oauth.authorizationCodeGrantRequest(as, client, auth, params, callback.url, verifier, http);
  return oauth.processAuthorizationCodeResponse(as, client, res);
}

async function expectOAuthError(promise: Promise<unknown>, error: string) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof oauth.ResponseBodyError, String(err));
    assert.equal(err.error, error);
    return true;
  });
}

before(async () => {
  upstream = await startUpstream();
  callback = await startCallbackServer();
  gw = await startGateway(config(callback.url));
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
  callback?.server.close();
});

describe('OpenID Connect clients fall back to RFC 8414 metadata', () => {
  const openidFetch = { [openid.customFetch]: gatewayFetch } as const;

  /** What OIDC clients do: OpenID Connect discovery first, RFC 8414 when that document is not found. */
  async function discoverLikeOidcClients(issuer: URL): Promise<openid.Configuration> {
    try {
      return await openid.discovery(issuer, 'acme-app', 'acme-secret', undefined, openidFetch);
    } catch (err) {
      const response = (err as { cause?: unknown }).cause;
      assert.ok(response instanceof Response, `discovery failed without a response: ${String(err)}`);
      assert.equal(response.status, 404, 'openid-configuration must be "not found", not a bearer challenge');
      return openid.discovery(issuer, 'acme-app', 'acme-secret', undefined, { ...openidFetch, algorithm: 'oauth2' });
    }
  }

  it('openid-configuration at the issuer answers 404 JSON naming the RFC 8414 document', async () => {
    const res = await oauth.discoveryRequest(ISSUER, { algorithm: 'oidc', ...http });
    assert.equal(res.status, 404);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('www-authenticate'), null);
    assert.match((await res.json()).message, /https:\/\/auth\.test\/api\/\.well-known\/oauth-authorization-server/);
  });

  it('openid-client discovers, gets a client_credentials token and calls the API', async () => {
    const config = await discoverLikeOidcClients(ISSUER);
    assert.equal(config.serverMetadata().issuer, ISSUER.href);
    const tokens = await openid.clientCredentialsGrant(config, { scope: 'read' });
    assert.equal(tokens.scope, 'read');
    const seen = await callApi(ISSUER, tokens.access_token);
    assert.equal(seen.headers['x-credential-identifier'], 'acme-app');
  });
});

describe('oauth4webapi against the gateway', () => {
  let as: oauth.AuthorizationServer;
  before(async () => {
    as = await discover(ISSUER);
  });

  it('discovers the authorization server through RFC 8414 metadata', () => {
    assert.equal(as.issuer, ISSUER.href);
    assert.equal(as.token_endpoint, `${ISSUER.href}/oauth2/token`);
    assert.equal(as.authorization_endpoint, `${ISSUER.href}/oauth2/authorize`);
    assert.equal(as.introspection_endpoint, `${ISSUER.href}/oauth2/introspect`);
    assert.equal(as.revocation_endpoint, `${ISSUER.href}/oauth2/revoke`);
    assert.ok(as.grant_types_supported?.includes('client_credentials'));
    assert.ok(as.grant_types_supported?.includes('authorization_code'));
    assert.ok(as.grant_types_supported?.includes('refresh_token'));
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(as.scopes_supported, ['read', 'write']);
  });

  it('serves the same metadata under the route prefix too', async () => {
    const res = await gatewayFetch(`${ISSUER.href}/.well-known/oauth-authorization-server`, { method: 'GET', headers: {} });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), as);
  });

  it('client credentials with client_secret_basic, then the protected API', async () => {
    // oauth4webapi sends Basic base64(urlencode(id) ":" urlencode(secret)) as RFC 6749 §2.3.1 says: "acme%2Dapp".
    const res = await oauth.clientCredentialsGrantRequest(as, confidential, oauth.ClientSecretBasic('acme-secret'), { scope: 'read' }, http);
    const tokens = await oauth.processClientCredentialsResponse(as, confidential, res);
    assert.equal(tokens.token_type, 'bearer');
    assert.equal(tokens.scope, 'read');
    assert.equal(tokens.expires_in, 7200);
    assert.equal(tokens.refresh_token, undefined);
    const seen = await callApi(ISSUER, tokens.access_token);
    assert.equal(seen.headers['x-consumer-username'], 'acme');
    assert.equal(seen.headers['x-consumer-custom-id'], 'cust-42');
    assert.equal(seen.headers['x-credential-identifier'], 'acme-app');
    assert.equal(seen.headers['x-authenticated-scope'], 'read');
  });

  it('client credentials with client_secret_post', async () => {
    const res = await oauth.clientCredentialsGrantRequest(as, confidential, confidentialAuth, { scope: 'read write' }, http);
    const tokens = await oauth.processClientCredentialsResponse(as, confidential, res);
    assert.equal(tokens.scope, 'read write');
    assert.equal((await callApi(ISSUER, tokens.access_token)).headers['x-authenticated-scope'], 'read,write');
  });

  it('a wrong secret is invalid_client', async () => {
    const res = await oauth.clientCredentialsGrantRequest(as, confidential, oauth.ClientSecretPost('nope'), { scope: 'read' }, http);
    await expectOAuthError(oauth.processClientCredentialsResponse(as, confidential, res), 'invalid_client');
  });

  it('a public client cannot use client credentials (unauthorized_client)', async () => {
    const res = await oauth.clientCredentialsGrantRequest(as, spa, oauth.None(), { scope: 'read' }, http);
    await expectOAuthError(oauth.processClientCredentialsResponse(as, spa, res), 'unauthorized_client');
  });

  it('authorization code + PKCE S256 for a confidential client', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth);
    assert.equal(tokens.scope, 'read write');
    assert.ok(tokens.refresh_token);
    const seen = await callApi(ISSUER, tokens.access_token);
    assert.equal(seen.headers['x-authenticated-userid'], 'user-42');
    assert.equal(seen.headers['x-authenticated-scope'], 'read,write');
  });

  it('authorization code + PKCE S256 for a public client', async () => {
    const tokens = await codeFlow(as, ISSUER, spa, oauth.None(), 'read');
    assert.equal(tokens.scope, 'read');
    assert.equal((await callApi(ISSUER, tokens.access_token)).headers['x-credential-identifier'], 'acme-spa');
  });

  it('a code cannot be redeemed twice (invalid_grant)', async () => {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const landed = await authorizeAndFollow(ISSUER, {
      client_id: 'acme-app',
      redirect_uri: callback.url,
      scope: 'read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const params = oauth.validateAuthResponse(as, confidential, landed, state);
    const first = await oauth.authorizationCodeGrantRequest(as, confidential, confidentialAuth, params, callback.url, verifier, http);
    await oauth.processAuthorizationCodeResponse(as, confidential, first);
    const second = await oauth.authorizationCodeGrantRequest(as, confidential, confidentialAuth, params, callback.url, verifier, http);
    await expectOAuthError(oauth.processAuthorizationCodeResponse(as, confidential, second), 'invalid_grant');
  });

  it('a wrong PKCE verifier is invalid_grant', async () => {
    const state = oauth.generateRandomState();
    const landed = await authorizeAndFollow(ISSUER, {
      client_id: 'acme-app',
      redirect_uri: callback.url,
      scope: 'read',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
      code_challenge_method: 'S256',
    });
    const params = oauth.validateAuthResponse(as, confidential, landed, state);
    const res = await oauth.authorizationCodeGrantRequest(as, confidential, confidentialAuth, params, callback.url, oauth.generateRandomCodeVerifier(), http);
    await expectOAuthError(oauth.processAuthorizationCodeResponse(as, confidential, res), 'invalid_grant');
  });

  it('refresh rotation: new tokens, the old refresh token is spent', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth);
    const res = await oauth.refreshTokenGrantRequest(as, confidential, confidentialAuth, tokens.refresh_token!, http);
    const refreshed = await oauth.processRefreshTokenResponse(as, confidential, res);
    assert.notEqual(refreshed.access_token, tokens.access_token);
    assert.notEqual(refreshed.refresh_token, tokens.refresh_token);
    assert.equal(refreshed.scope, 'read write');
    await callApi(ISSUER, refreshed.access_token);
    const again = await oauth.refreshTokenGrantRequest(as, confidential, confidentialAuth, tokens.refresh_token!, http);
    await expectOAuthError(oauth.processRefreshTokenResponse(as, confidential, again), 'invalid_grant');
  });

  it('introspection (RFC 7662): active token, then unknown token', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth, 'read');
    const res = await oauth.introspectionRequest(as, confidential, confidentialAuth, tokens.access_token, http);
    const info = await oauth.processIntrospectionResponse(as, confidential, res);
    assert.equal(info.active, true);
    assert.equal(info.scope, 'read');
    assert.equal(info.client_id, 'acme-app');
    assert.equal(info.token_type, 'bearer');
    assert.equal(typeof info.exp, 'number');
    assert.ok(info.exp! > Date.now() / 1000);
    const unknown = await oauth.introspectionRequest(as, confidential, confidentialAuth, 'not-a-token', http);
    assert.deepEqual(await oauth.processIntrospectionResponse(as, confidential, unknown), { active: false });
  });

  it('introspection fields (RFC 7662 §2.2), and a public client only learns about its own tokens', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth, 'read');
    const info = await oauth.processIntrospectionResponse(
      as,
      confidential,
      await oauth.introspectionRequest(as, confidential, confidentialAuth, tokens.access_token, http),
    );
    assert.equal(typeof info.iat, 'number');
    assert.equal(info.exp! - info.iat!, 7200);
    assert.ok(info.iat! <= Date.now() / 1000 + 1);
    const spaTokens = await codeFlow(as, ISSUER, spa, oauth.None(), 'read');
    const own = await oauth.introspectionRequest(as, spa, oauth.None(), spaTokens.access_token, http);
    assert.equal((await oauth.processIntrospectionResponse(as, spa, own)).active, true);
    const others = await oauth.introspectionRequest(as, spa, oauth.None(), tokens.access_token, http);
    assert.deepEqual(await oauth.processIntrospectionResponse(as, spa, others), { active: false });
  });

  it('introspection needs client authentication (RFC 7662 §2.1)', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth, 'read');
    const posted = await oauth.introspectionRequest(as, confidential, oauth.ClientSecretPost('wrong'), tokens.access_token, http);
    assert.equal(((await posted.json()) as { error: string }).error, 'invalid_client');
    // A failed Authorization header is a 401 with a Basic challenge (RFC 6749 §5.2).
    const res = await request(`${gw.https}/api/oauth2/introspect`, {
      method: 'POST',
      headers: { host: HOST, authorization: `Basic ${Buffer.from('acme-app:wrong').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: tokens.access_token }).toString(),
    });
    assert.equal(res.status, 401, res.text);
    assert.equal(res.json().error, 'invalid_client');
    assert.match(String(res.headers['www-authenticate']), /^Basic /);
  });

  it('revocation (RFC 7009) of an access token: the API refuses it, introspection says inactive', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth, 'read');
    await callApi(ISSUER, tokens.access_token);
    const res = await oauth.revocationRequest(as, confidential, confidentialAuth, tokens.access_token, http);
    await oauth.processRevocationResponse(res);
    await assert.rejects(callApi(ISSUER, tokens.access_token), (err: unknown) => {
      assert.ok(err instanceof oauth.WWWAuthenticateChallengeError, String(err));
      assert.equal(err.status, 401);
      return true;
    });
    const info = await oauth.processIntrospectionResponse(
      as,
      confidential,
      await oauth.introspectionRequest(as, confidential, confidentialAuth, tokens.access_token, http),
    );
    assert.equal(info.active, false);
  });

  it('revocation of a refresh token ends the refresh and its access token (RFC 7009 §2.1)', async () => {
    const tokens = await codeFlow(as, ISSUER, confidential, confidentialAuth, 'read');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, confidential, confidentialAuth, tokens.refresh_token!, http));
    const res = await oauth.refreshTokenGrantRequest(as, confidential, confidentialAuth, tokens.refresh_token!, http);
    await expectOAuthError(oauth.processRefreshTokenResponse(as, confidential, res), 'invalid_grant');
    await assert.rejects(callApi(ISSUER, tokens.access_token), oauth.WWWAuthenticateChallengeError);
  });

  it("revoking an unknown token or another client's token is a quiet 200 that changes nothing", async () => {
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, confidential, confidentialAuth, 'not-a-token', http));
    const spaTokens = await codeFlow(as, ISSUER, spa, oauth.None(), 'read');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, confidential, confidentialAuth, spaTokens.access_token, http));
    await callApi(ISSUER, spaTokens.access_token);
  });
});

describe('oauth4webapi: expiry', () => {
  it('a 2-second token expires; its refresh token gets a new one', async () => {
    const as = await discover(SHORT_ISSUER);
    const tokens = await codeFlow(as, SHORT_ISSUER, confidential, confidentialAuth, 'read');
    assert.equal(tokens.expires_in, 2);
    await callApi(SHORT_ISSUER, tokens.access_token);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await assert.rejects(callApi(SHORT_ISSUER, tokens.access_token), (err: unknown) => {
      assert.ok(err instanceof oauth.WWWAuthenticateChallengeError, String(err));
      const [challenge] = err.cause;
      assert.equal(challenge?.scheme, 'bearer');
      assert.equal(challenge?.parameters.error, 'invalid_token');
      return true;
    });
    const introspected = await oauth.processIntrospectionResponse(
      as,
      confidential,
      await oauth.introspectionRequest(as, confidential, confidentialAuth, tokens.access_token, http),
    );
    assert.equal(introspected.active, false);
    const res = await oauth.refreshTokenGrantRequest(as, confidential, confidentialAuth, tokens.refresh_token!, http);
    const refreshed = await oauth.processRefreshTokenResponse(as, confidential, res);
    await callApi(SHORT_ISSUER, refreshed.access_token);
  });

  it('a token issued at one route works on another route of the same service (Kong binds tokens to services)', async () => {
    const as = await discover(SHORT_ISSUER);
    const res = await oauth.clientCredentialsGrantRequest(as, confidential, confidentialAuth, { scope: 'read' }, http);
    const tokens = await oauth.processClientCredentialsResponse(as, confidential, res);
    // Kong binds tokens to the service; both routes share it, so the token works on both.
    await callApi(ISSUER, tokens.access_token);
  });
});

describe('the token endpoint and the API over HTTP/2', () => {
  it('client credentials and a protected call on one h2 session', async () => {
    const session = connect(gw.https, { rejectUnauthorized: false });
    try {
      const call = (headers: Record<string, string>, body?: string) =>
        new Promise<{ status: number; json: any }>((resolve, reject) => {
          const stream = session.request({ ':authority': HOST, ...headers });
          let status = 0;
          let text = '';
          stream.on('response', (h) => (status = Number(h[':status'])));
          stream.on('data', (chunk) => (text += chunk));
          stream.on('end', () => resolve({ status, json: JSON.parse(text) }));
          stream.on('error', reject);
          stream.end(body);
        });
      const token = await call(
        { ':method': 'POST', ':path': '/api/oauth2/token', 'content-type': 'application/x-www-form-urlencoded' },
        new URLSearchParams({ grant_type: 'client_credentials', client_id: 'acme-app', client_secret: 'acme-secret', scope: 'read' }).toString(),
      );
      assert.equal(token.status, 200, JSON.stringify(token.json));
      assert.equal(token.json.scope, 'read');
      const api = await call({ ':method': 'GET', ':path': '/api/orders', authorization: `Bearer ${token.json.access_token}` });
      assert.equal(api.status, 200);
      assert.equal(api.json.headers['x-consumer-username'], 'acme');
      const refused = await call({ ':method': 'GET', ':path': '/api/orders', authorization: 'Bearer nope' });
      assert.equal(refused.status, 401);
      assert.equal(refused.json.error, 'invalid_token');
    } finally {
      session.close();
    }
  });
});

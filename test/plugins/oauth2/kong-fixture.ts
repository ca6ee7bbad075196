/**
 * The fixture of Kong's `spec/03-plugins/25-oauth2/03-access_spec.lua`, as a
 * gateway.yaml-shaped object, plus the request helpers Kong's spec uses (PC, PT, RT, PKCE) and the shared
 * assertions ("TOK200", "CC200", "NC", "WWW-INV"). Every `kong-*.test.ts` file starts its own gateway on it.
 *
 * Tollgate follows the RFCs where INTERFACE §4 says so; the helpers expect that (e.g. `scope` in token responses).
 */
import assert from 'node:assert/strict';
import { createHash, pbkdf2Sync, randomInt } from 'node:crypto';
import { aroundTests, request, startGatewayOnEchoUpstream, type GatewayOnEchoUpstream, type TestGateway } from '../../helpers/gateway.ts';

export type Reply = Awaited<ReturnType<typeof request>>;

export const PROVISION_KEY = 'provision123';
export const BOB_ID = '6a1b2c3d-0000-4000-8000-00000000b0b0';
export const NO_BODY_ID = '6a1b2c3d-0000-4000-8000-000000000ab0';
/** oauth2_10.test names an anonymous consumer that does not exist. */
export const MISSING_CONSUMER_ID = '6a1b2c3d-0000-4000-8000-00000000dead';

/**
 * Codes, access and refresh tokens. Kong's are 32 characters of `\w` (its spec matches `\w{32}`); Tollgate's
 * random strings may be longer (more entropy), so the catalogue's patterns read `\w{32,}`.
 */
export const KONG_TOKEN = /^\w{32,}$/;
export const GOOGLE = 'http://google.test/kong';

/** Kong's `admin_api.oauth2_plugins` blueprint. */
const BASE = {
  scopes: ['email', 'profile'],
  enable_authorization_code: true,
  mandatory_scope: true,
  provision_key: PROVISION_KEY,
  token_expiration: 5,
  enable_implicit_grant: true,
};
export const S3 = { scopes: ['email', 'profile', 'user.email'] };

/** An oauth2 plugin entry: Kong's blueprint config with `overrides`. */
export function oauth2Plugin(overrides: Record<string, unknown>) {
  return { name: 'oauth2', config: { ...BASE, ...overrides } };
}
const GLOBAL = { ...S3, global_credentials: true };

/** Effective plugin config per route host (Kong deep-merges arrays index by index: hence scope18 + profile). */
export const ROUTE_CONFIGS: Record<string, Record<string, unknown>> = {
  'oauth2.test': S3,
  'example-path.test': {},
  'oauth2_3.test': { hide_credentials: true },
  'oauth2_4.test': { enable_client_credentials: true, enable_authorization_code: false },
  'oauth2_5.test': { enable_password_grant: true, enable_authorization_code: false, realm: 'test-oauth2' },
  'oauth2_6.test': { ...S3, accept_http_if_already_terminated: true },
  'oauth2_7.test': { ...S3, anonymous: NO_BODY_ID },
  'oauth2_8.test': GLOBAL,
  'oauth2_9.test': GLOBAL,
  'oauth2_10.test': { ...GLOBAL, anonymous: MISSING_CONSUMER_ID },
  'oauth2_11.test': { ...GLOBAL, token_expiration: 7, auth_header_name: 'custom_header_name' },
  'oauth2_12.test': { ...GLOBAL, auth_header_name: 'custom_header_name', hide_credentials: true },
  'oauth2_13.test': { ...GLOBAL, reuse_refresh_token: true },
  'oauth2__c.test': { ...S3, anonymous: 'no-body' },
  'oauth2_14.test': { ...GLOBAL, pkce: 'none' },
  'oauth2_15.test': { ...GLOBAL, pkce: 'strict' },
  'oauth2_16.test': { ...GLOBAL, pkce: 'lax' },
  'oauth2_17.test': GLOBAL,
  'oauth2_18.test': { scopes: ['scope18', 'profile'], global_credentials: true },
  'oauth2_19.test': { scopes: ['scope19', 'profile'], global_credentials: true },
  'oauth2_20.test': { scopes: ['scope20', 'profile'], global_credentials: true },
  'oauth2_21.test': { scopes: ['scope20', 'scope21'], global_credentials: true },
};

export interface CredentialSpec {
  client_id: string;
  client_secret: string;
  hash_secret: boolean;
  redirect_uris: string[] | null;
  client_type: 'confidential' | 'public';
}

const credential = (
  n: string,
  hash_secret: boolean,
  redirect_uris: string[] | null,
  client_type: 'confidential' | 'public' = 'confidential',
): CredentialSpec & { name: string } => ({
  name: `testapp${n}`,
  client_id: `clientid${n}`,
  client_secret: `secret${n}`,
  hash_secret,
  redirect_uris,
  client_type,
});

export const CREDENTIALS = [
  credential('123', true, [GOOGLE]),
  credential('789', false, ['http://google.test/kong?foo=bar&code=123']),
  credential('333', true, [GOOGLE]),
  credential('456', false, ['http://one.test/one/', 'http://two.test/two']),
  credential('1011', true, [GOOGLE]),
  credential('10112', false, null),
  credential('11211', false, [GOOGLE], 'public'),
];

function withoutNullRedirects(cred: CredentialSpec & { name: string }): Record<string, unknown> {
  const { redirect_uris, ...rest } = cred;
  return redirect_uris ? { ...cred } : rest;
}

/** One service (echo upstream) + one http/https route per host, each with its oauth2 plugin. */
export function kongConfig(upstreamUrl: string): Record<string, any> {
  const route = (name: string, match: Record<string, unknown>, overrides: Record<string, unknown>) => ({
    name: `svc-${name}`,
    url: upstreamUrl,
    routes: [
      {
        name: `route-${name}`,
        ...match,
        protocols: ['http', 'https'],
        plugins: [oauth2Plugin(overrides)],
      },
    ],
  });
  const services = Object.entries(ROUTE_CONFIGS).map(([host, overrides]) =>
    route(host.replace(/\W/g, '-'), { hosts: [host] }, overrides),
  );
  services.push(route('somepath', { paths: ['/somepath'] }, {}));
  return {
    _format_version: '3.0',
    gateway: { trusted_ips: ['127.0.0.1/32'] },
    services,
    consumers: [
      { id: BOB_ID, username: 'bob', oauth2_credentials: CREDENTIALS.map(withoutNullRedirects) },
      { id: NO_BODY_ID, username: 'no-body' },
    ],
  };
}

export interface Fixture extends GatewayOnEchoUpstream {
  client: KongClient;
}

/** Starts an echo upstream and a gateway on Kong's fixture; `edit` may add routes, consumers, ... */
export function startKongFixture(edit?: (config: Record<string, any>) => void): Promise<Fixture> {
  return startFixture((url) => {
    const config = kongConfig(url);
    edit?.(config);
    return config;
  });
}

/**
 * Kong's fixture (startKongFixture, `edit` applied) for the tests of the enclosing file or `describe`, `setUp` run on it
 * first (see aroundTests).
 */
export function kongFixtureAroundTests(edit?: (config: Record<string, any>) => void, setUp?: (fx: Fixture) => Promise<void>): Fixture {
  return aroundTests(() => startKongFixture(edit), setUp);
}

/** An echo upstream and a gateway on the config `configFor(upstream url)` builds. */
async function startFixture(configFor: (upstreamUrl: string) => Record<string, any>): Promise<Fixture> {
  const started = await startGatewayOnEchoUpstream(configFor);
  return { ...started, client: new KongClient(started.gw) };
}

export type Body =
  | { json: unknown }
  | { form: Record<string, string> }
  | { multipart: Record<string, string> }
  | { raw: string; contentType?: string };

export interface CallOptions {
  host?: string | null;
  /** `https` for the token endpoints (default), `http` for the plain proxy port. */
  transport?: 'http' | 'https';
  method?: string;
  headers?: Record<string, string | string[]>;
  body?: Body;
}

const MULTIPART_BOUNDARY = '----tollgate-kong-spec-boundary';

function encodeBody(body: Body | undefined): { payload?: string; contentType?: string } {
  if (!body) return {};
  if ('json' in body) return { payload: JSON.stringify(body.json), contentType: 'application/json' };
  if ('form' in body) return { payload: new URLSearchParams(body.form).toString(), contentType: 'application/x-www-form-urlencoded' };
  if ('multipart' in body) {
    const parts = Object.entries(body.multipart).map(
      ([name, value]) => `--${MULTIPART_BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
    );
    return { payload: parts.join('') + `--${MULTIPART_BOUNDARY}--\r\n`, contentType: `multipart/form-data; boundary=${MULTIPART_BOUNDARY}` };
  }
  return { payload: body.raw, contentType: body.contentType };
}

/** Kong's spec helpers, against the gateway's real listeners. */
export class KongClient {
  constructor(readonly gw: TestGateway) {}

  send(path: string, options: CallOptions = {}): Promise<Reply> {
    const { host = 'oauth2.test', transport = 'https', method = 'POST', body } = options;
    const { payload, contentType } = encodeBody(body);
    const headers: Record<string, string | string[]> = {};
    if (host) headers.host = host;
    if (contentType) headers['content-type'] = contentType;
    Object.assign(headers, options.headers);
    const base = transport === 'https' ? this.gw.https : this.gw.http;
    return request(base + path, { method, headers, body: payload });
  }

  /** `POST /oauth2/authorize` with a JSON body (Kong's spec sends JSON). */
  authorize(json: Record<string, unknown> | undefined, options: CallOptions = {}): Promise<Reply> {
    return this.send('/oauth2/authorize', { body: json === undefined ? undefined : { json }, ...options });
  }

  token(json: Record<string, unknown> | undefined, options: CallOptions = {}): Promise<Reply> {
    return this.send('/oauth2/token', { body: json === undefined ? undefined : { json }, ...options });
  }

  /** A request to the protected upstream over plain HTTP (Kong's spec uses the proxy port). */
  proxy(path: string, options: CallOptions = {}): Promise<Reply> {
    return this.send(path, { transport: 'http', method: 'GET', ...options });
  }

  /** Kong's `provision_code`: a code for `userid123` with scope `email` and state `hello`. */
  async provisionCode(
    options: { host?: string; clientId?: string; challenge?: string; scope?: string; redirectUri?: string } = {},
  ): Promise<string> {
    const { host = 'oauth2.test', clientId = 'clientid123', challenge, scope = 'email' } = options;
    const body: Record<string, unknown> = {
      provision_key: PROVISION_KEY,
      client_id: clientId,
      scope,
      response_type: 'code',
      state: 'hello',
      authenticated_userid: 'userid123',
    };
    if (challenge) Object.assign(body, { code_challenge: challenge, code_method: 'S256' });
    if (options.redirectUri) body.redirect_uri = options.redirectUri;
    const res = await this.authorize(body, { host });
    assert.equal(res.status, 200, `authorize on ${host}: ${res.text}`);
    const redirect = new URL(res.json().redirect_uri);
    assert.equal(redirect.searchParams.get('state'), 'hello');
    const code = redirect.searchParams.get('code');
    assert.match(code ?? '', KONG_TOKEN);
    return code!;
  }

  /** Kong's `provision_token`: provisionCode then the authorization_code exchange; returns the token JSON. */
  async provisionToken(
    options: {
      host?: string;
      clientId?: string;
      secret?: string | null;
      challenge?: string;
      verifier?: string;
      headers?: Record<string, string>;
    } = {},
  ): Promise<Record<string, any>> {
    const { host = 'oauth2.test', clientId = 'clientid123', secret = 'secret123', challenge, verifier } = options;
    const code = await this.provisionCode({ host, clientId, challenge });
    const body: Record<string, unknown> = { code, client_id: clientId, grant_type: 'authorization_code' };
    if (secret !== null) body.client_secret = secret;
    if (verifier) body.code_verifier = verifier;
    const res = await this.token(body, { host, headers: options.headers });
    assert.equal(res.status, 200, `token on ${host}: ${res.text}`);
    return res.json();
  }

  /** Kong's `refresh_token` helper: as clientid123/secret123. */
  async refresh(refreshToken: string, host = 'oauth2.test'): Promise<Record<string, any>> {
    const res = await this.token(
      { refresh_token: refreshToken, client_id: 'clientid123', client_secret: 'secret123', grant_type: 'refresh_token' },
      { host },
    );
    assert.equal(res.status, 200, `refresh on ${host}: ${res.text}`);
    return res.json();
  }
}

/** Kong's PKCE helper: a 50-letter verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = Array.from({ length: 50 }, () => String.fromCharCode(65 + randomInt(26))).join('');
  return { verifier, challenge: s256(verifier) };
}

export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** "NC": the no-cache headers of every token/authorize answer. */
export function assertNoCache(res: Reply): void {
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers['pragma'], 'no-cache');
}

/**
 * An OAuth error answer. `description` undefined = any string (used where Tollgate's INTERFACE changes Kong's
 * error code and leaves the wording open).
 */
export function assertOAuthError(
  res: Reply,
  status: number,
  error: string,
  description?: string,
  extra: Record<string, unknown> = {},
): void {
  assert.equal(res.status, status, res.text);
  const body = res.json();
  if (description === undefined) {
    assert.equal(body.error, error, res.text);
    assert.equal(typeof body.error_description, 'string');
    for (const [key, value] of Object.entries(extra)) assert.deepEqual(body[key], value);
  } else {
    assert.deepEqual(body, { error, error_description: description, ...extra });
  }
}

/** Kong's `WWW-INV` challenge, plus an optional realm. */
export function invalidTokenChallenge(realm?: string): string {
  const parts = realm ? [`realm="${realm}"`] : [];
  parts.push('error="invalid_token"', 'error_description="The access token is invalid or has expired"');
  return 'Bearer ' + parts.join(', ');
}

export function assertInvalidToken(res: Reply, description = 'The access token is invalid or has expired'): void {
  assertOAuthError(res, 401, 'invalid_token', description);
  assert.equal(res.headers['www-authenticate'], invalidTokenChallenge());
}

export function assertMissingToken(res: Reply, realm?: string): void {
  assertOAuthError(res, 401, 'invalid_request', 'The access token is missing');
  assert.equal(res.headers['www-authenticate'], realm ? `Bearer realm="${realm}"` : 'Bearer');
}

/**
 * "TOK200"/"CC200": a bearer token of Kong's format, `expires_in`, a refresh token when one is due, and (RFC 6749
 * §5.1, INTERFACE §4) the granted `scope`.
 */
export function assertTokenResponse(
  res: Reply,
  expected: { refresh: boolean; expiresIn?: number; scope?: string | null; state?: string },
): Record<string, any> {
  assert.equal(res.status, 200, res.text);
  assertNoCache(res);
  const body = res.json();
  assert.equal(body.token_type, 'bearer');
  assert.match(body.access_token, KONG_TOKEN);
  assert.equal(body.expires_in, expected.expiresIn ?? 5);
  if (expected.refresh) assert.match(body.refresh_token, KONG_TOKEN);
  else assert.equal(body.refresh_token, undefined);
  const scope = expected.scope === undefined ? 'email' : expected.scope;
  if (scope === null) assert.equal(body.scope, undefined);
  else assert.equal(body.scope, scope);
  assert.equal(body.state, expected.state);
  return body;
}

/** The echo upstream's view of a proxied request: `{ method, path, query, headers, body }`. */
export function echoed(res: Reply): { method: string; path: string; query: Record<string, any>; headers: Record<string, any>; body: any } {
  assert.equal(res.status, 200, res.text);
  return res.json();
}

export function basic(value: string): string {
  return 'Basic ' + Buffer.from(value).toString('base64');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The smaller setup of Kong's 02-api and 04-invalidations specs: one route `oauth2.com` with the code and
 * client_credentials grants, and one consumer declared in gateway.yaml (read-only through the admin API).
 */
export function adminConfig(upstreamUrl: string): Record<string, any> {
  return {
    _format_version: '3.0',
    services: [
      {
        name: 'svc-admin',
        url: upstreamUrl,
        routes: [
          {
            name: 'route-oauth2-com',
            hosts: ['oauth2.com'],
            protocols: ['http', 'https'],
            plugins: [
              {
                name: 'oauth2',
                config: {
                  scopes: ['email', 'profile'],
                  enable_authorization_code: true,
                  enable_client_credentials: true,
                  provision_key: PROVISION_KEY,
                },
              },
            ],
          },
        ],
      },
    ],
    consumers: [
      {
        username: 'yaml-user',
        oauth2_credentials: [{ name: 'Declared App', client_id: 'yaml-client', client_secret: 'yaml-secret', redirect_uris: [GOOGLE] }],
      },
    ],
  };
}

export function startAdminFixture(): Promise<Fixture> {
  return startFixture(adminConfig);
}

/** The admin API cases' fixture (startAdminFixture) for the tests of the enclosing file, `setUp` run on it first (see aroundTests). */
export function adminFixtureAroundTests(setUp?: (fx: Fixture) => Promise<void>): Fixture {
  return aroundTests(startAdminFixture, setUp);
}

/** A JSON call to the admin API. */
export function admin(gw: TestGateway, method: string, path: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  return request(gw.admin + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Creates a consumer at runtime and returns it. */
export async function createConsumer(gw: TestGateway, username: string): Promise<Record<string, any>> {
  const res = await admin(gw, 'POST', '/consumers', { username });
  assert.equal(res.status, 201, res.text);
  return res.json();
}

/** Creates an oauth2 credential for a consumer at runtime and returns it. */
export async function createCredential(gw: TestGateway, consumer: string, fields: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await admin(gw, 'POST', `/consumers/${consumer}/oauth2`, fields);
  assert.equal(res.status, 201, res.text);
  return res.json();
}

/** Kong's PHC string for PBKDF2 client secrets, checked independently of the gateway's code. */
export const KONG_PHC = /^\$pbkdf2-sha512\$i=10000,l=32\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/;

export function verifyKongSecret(secret: string, phc: string): boolean {
  const [, algorithm, params, salt, hash] = phc.split('$');
  assert.equal(algorithm, 'pbkdf2-sha512');
  const { i, l } = Object.fromEntries(params.split(',').map((kv) => kv.split('='))) as Record<string, string>;
  const derived = pbkdf2Sync(secret, Buffer.from(salt, 'base64'), Number(i), Number(l), 'sha512');
  return derived.toString('base64').replace(/=+$/, '') === hash;
}

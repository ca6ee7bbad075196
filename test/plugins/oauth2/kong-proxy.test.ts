/**
 * Kong's "Making a request" cases (reference §7.7): tokens on protected routes, custom auth headers, anonymous
 * consumers, and scope checks on refresh across plugins; and oauth2 with key-auth and jwt on one route (the
 * multiple-authentication suite of Kong's spec/03-plugins/25-oauth2/03-access_spec.lua).
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { request } from '../../helpers/gateway.ts';
import { echoClient, grpc, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import {
  MISSING_CONSUMER_ID,
  S3,
  oauth2Plugin,
  NO_BODY_ID,
  PROVISION_KEY,
  BOB_ID,
  assertInvalidToken,
  assertMissingToken,
  assertOAuthError,
  assertTokenResponse,
  echoed,
  kongFixtureAroundTests,
  startKongFixture,
  type Fixture,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const C1011 = { host: 'oauth2_11.test', clientId: 'clientid1011', secret: 'secret1011' };

describe('Kong §7.7 making a request', () => {
  it('RQ01 no token: 401 with a Bearer challenge', async () => {
    assertMissingToken(await fx.client.proxy('/request', { method: 'POST', headers: { 'content-type': 'application/json' } }));
  });

  it('RQ02 access_token in the query', async () => {
    const { access_token } = await fx.client.provisionToken();
    assert.equal((await fx.client.proxy(`/request?access_token=${access_token}`)).status, 200);
  });

  it('RQ03 a custom auth header name', async () => {
    const { access_token } = await fx.client.provisionToken(C1011);
    const res = await fx.client.proxy('/request', { host: C1011.host, headers: { custom_header_name: `bearer ${access_token}` } });
    assert.equal(res.status, 200, res.text);
  });

  it('RQ04 the custom header sent twice', async () => {
    const { access_token } = await fx.client.provisionToken(C1011);
    const value = `bearer ${access_token}`;
    const res = await fx.client.proxy('/request', { host: C1011.host, headers: { custom_header_name: [value, value] } });
    assert.equal(res.status, 200, res.text);
  });

  it('RQ05 an empty custom header: token missing', async () => {
    assertMissingToken(await fx.client.proxy('/request', { host: C1011.host, headers: { custom_header_name: '' } }));
  });

  it('RQ06 the authorization header is not read when a custom header name is set', async () => {
    const { access_token } = await fx.client.provisionToken(C1011);
    assertMissingToken(await fx.client.proxy('/request', { host: C1011.host, headers: { authorization: `bearer ${access_token}` } }));
  });

  it("RQ07 a token of another service (oauth2_3.test)", async () => {
    const { access_token } = await fx.client.provisionToken();
    assertInvalidToken(await fx.client.proxy(`/request?access_token=${access_token}`, { host: 'oauth2_3.test' }));
  });

  it("RQ08 a token of another service (oauth2_4.test)", async () => {
    const { access_token } = await fx.client.provisionToken();
    assertInvalidToken(await fx.client.proxy(`/request?access_token=${access_token}`, { host: 'oauth2_4.test' }));
  });

  it('RQ09 access_token in a JSON body', async () => {
    const { access_token } = await fx.client.provisionToken();
    const res = await fx.client.proxy('/request', { method: 'POST', body: { json: { access_token } } });
    assert.equal(res.status, 200, res.text);
  });

  it('RQ10 access_token in the query of a GET without body', async () => {
    const { access_token } = await fx.client.provisionToken();
    assert.equal((await fx.client.proxy(`/request?access_token=${access_token}`)).status, 200);
  });

  it('RQ11 + RQ12 a bearer header, and the consumer headers upstream', async () => {
    const { access_token } = await fx.client.provisionToken();
    const res = await fx.client.proxy('/request', { method: 'POST', headers: { authorization: `bearer ${access_token}` } });
    const { headers } = echoed(res);
    assert.equal(headers['x-consumer-id'], BOB_ID);
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('RQ14 anonymous set: a valid token still authenticates the real consumer', async () => {
    const { access_token } = await fx.client.provisionToken({ host: 'oauth2_7.test' });
    const res = await fx.client.proxy('/request', { host: 'oauth2_7.test', method: 'POST', headers: { authorization: `bearer ${access_token}` } });
    const { headers } = echoed(res);
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-anonymous-consumer'], undefined);
    assert.equal(headers['x-credential-identifier'], 'clientid123');
  });

  it('RQ15 anonymous by id: no token lets the request through as the anonymous consumer', async () => {
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2_7.test', method: 'POST' }));
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-consumer-username'], 'no-body');
    assert.equal(headers['x-consumer-id'], NO_BODY_ID);
    assert.equal(headers['x-credential-identifier'], undefined);
  });

  it('RQ16 anonymous by username', async () => {
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2__c.test', method: 'POST' }));
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-consumer-username'], 'no-body');
  });

  it('RQ17 an anonymous consumer that does not exist: 500', async () => {
    const res = await fx.client.proxy('/request', { host: 'oauth2_10.test' });
    assert.equal(res.status, 500);
    // Kong 3's error bodies also carry a `request_id`.
    assert.equal(res.json().message, `anonymous consumer ${MISSING_CONSUMER_ID} is configured but doesn't exist`);
  });

  it('RQ18 a rejected token is not negatively cached', async () => {
    const { access_token } = await fx.client.provisionToken();
    assertInvalidToken(await fx.client.proxy(`/request?access_token=${access_token}`, { host: 'oauth2_3.test' }));
    assert.equal((await fx.client.proxy(`/request?access_token=${access_token}`)).status, 200);
  });

  /** A code for scope `scope` on `host`, exchanged there with an explicit redirect_uri; returns the token JSON. */
  async function scopedToken(host: string, scope: string) {
    const authorize = await fx.client.authorize(
      { provision_key: PROVISION_KEY, client_id: 'clientid123', response_type: 'code', scope, state: 'hello', authenticated_userid: 'userid123' },
      { host },
    );
    assert.equal(authorize.status, 200, authorize.text);
    const code = new URL(authorize.json().redirect_uri).searchParams.get('code');
    const res = await fx.client.token(
      { code, client_id: 'clientid123', client_secret: 'secret123', grant_type: 'authorization_code', redirect_uri: 'http://google.test/kong' },
      { host },
    );
    return assertTokenResponse(res, { refresh: true, scope });
  }

  const refreshOn = (host: string, refresh_token: string) =>
    fx.client.token({ refresh_token, client_id: 'clientid123', client_secret: 'secret123', grant_type: 'refresh_token' }, { host });

  it("RQ19 refresh at a plugin whose scopes do not include the token's: Scope mismatch", async () => {
    const issued = await scopedToken('oauth2_18.test', 'scope18');
    assertOAuthError(await refreshOn('oauth2_19.test', issued.refresh_token), 400, 'invalid_scope', 'Scope mismatch');
  });

  it("RQ20 refresh at another global plugin that allows the token's scope", async () => {
    const issued = await scopedToken('oauth2_20.test', 'scope20');
    assertTokenResponse(await refreshOn('oauth2_21.test', issued.refresh_token), { refresh: true, scope: 'scope20' });
  });

  it('RQ21 a header without scheme is used as the token', async () => {
    const { access_token } = await fx.client.provisionToken();
    assert.equal((await fx.client.proxy('/request', { headers: { authorization: access_token } })).status, 200);
  });

  it('RQ22 the "token" scheme is accepted as "bearer"', async () => {
    const { access_token } = await fx.client.provisionToken();
    assert.equal((await fx.client.proxy('/request', { headers: { authorization: `Token ${access_token}` } })).status, 200);
  });

  it('RQ23 a Basic header is not a token', async () => {
    assertInvalidToken(await fx.client.proxy('/request', { headers: { authorization: 'Basic Y2xpZW50aWQxMjM6c2VjcmV0MTIz' } }));
  });

  it('RQ24 client-sent identity headers never reach the upstream', async () => {
    const { access_token } = await fx.client.provisionToken();
    const spoofed = {
      authorization: `bearer ${access_token}`,
      'x-consumer-username': 'admin',
      'x-consumer-custom-id': 'admin',
      'x-authenticated-scope': 'all-access',
      'x-authenticated-userid': 'admin',
      'x-anonymous-consumer': 'true',
    };
    const { headers } = echoed(await fx.client.proxy('/request', { headers: spoofed }));
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-consumer-custom-id'], undefined);
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('RQ25 an anonymous request cannot claim a scope or user id', async () => {
    const spoofed = { 'x-authenticated-scope': 'all-access', 'x-authenticated-userid': 'admin', 'x-credential-identifier': 'clientid123' };
    const { headers } = echoed(await fx.client.proxy('/request', { host: 'oauth2_7.test', headers: spoofed }));
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-authenticated-scope'], undefined);
    assert.equal(headers['x-authenticated-userid'], undefined);
    assert.equal(headers['x-credential-identifier'], undefined);
  });

  it("RQ27 the custom header's name is case-insensitive and '-' matches '_' (nginx underscores_in_headers)", async () => {
    const { access_token } = await fx.client.provisionToken(C1011);
    const res = await fx.client.proxy('/request', { host: C1011.host, headers: { 'Custom-Header-Name': `bearer ${access_token}` } });
    assert.equal(res.status, 200, res.text);
  });

  it('RQ28 introspection and revocation refuse plain HTTP and other methods, as the token endpoint', async () => {
    const { access_token } = await fx.client.provisionToken();
    const form = { token: access_token, client_id: 'clientid123', client_secret: 'secret123' };
    for (const [endpoint, name] of [['introspect', 'introspection'], ['revoke', 'revocation']]) {
      const plain = await fx.client.send(`/oauth2/${endpoint}`, { transport: 'http', body: { form } });
      assertOAuthError(plain, 400, 'access_denied', 'You must use HTTPS');
      const get = await fx.client.send(`/oauth2/${endpoint}`, { method: 'GET' });
      assertOAuthError(get, 405, 'invalid_method', `The HTTP method GET is invalid for the ${name} endpoint`);
      // RFC 7662 §2.3: introspection answers a client that failed to authenticate with 401.
      const unauthenticated = await fx.client.send(`/oauth2/${endpoint}`, { body: { form: { token: access_token } } });
      assertOAuthError(unauthenticated, endpoint === 'introspect' ? 401 : 400, 'invalid_client', 'Invalid client authentication');
    }
    // Nothing was revoked on the way.
    assert.equal((await fx.client.proxy(`/request?access_token=${access_token}`)).status, 200);
  });

  it('RQ26 a repeated access_token query parameter is not a token', async () => {
    assertMissingToken(await fx.client.proxy('/request?access_token=a&access_token=b'));
  });
});

describe('Kong: multiple authentication plugins (logical AND / OR with key-auth and jwt)', () => {
  const ANONYMOUS = '6a1b2c3d-0000-4000-8000-0000000a0001';
  const MICKEY = '6a1b2c3d-0000-4000-8000-0000000a0002';
  const JWT_SECRET = 'mickey-jwt-secret';
  let mickeyKeyId: string;
  const spoofed = { 'X-Authenticated-Scope': 'all-access', 'X-Authenticated-UserId': 'admin' };
  const multi = kongFixtureAroundTests((config) => {
    const url = `${config.services[0].url}/request`;
    const service = (name: string, plugins: Record<string, unknown>[]) => ({ name, url, routes: [{ name, hosts: [`${name}.test`], plugins }] });
    config.services.push(
      service('logical-and', [oauth2Plugin(S3), { name: 'key-auth' }]),
      service('logical-or', [oauth2Plugin({ ...S3, anonymous: ANONYMOUS }), { name: 'key-auth', config: { anonymous: ANONYMOUS } }]),
      service('logical-or-jwt', [oauth2Plugin({ ...S3, anonymous: ANONYMOUS, realm: 'test-oauth2' }), { name: 'jwt', config: { anonymous: ANONYMOUS } }]),
    );
    config.consumers.push(
      { id: ANONYMOUS, username: 'Anonymous' },
      { id: MICKEY, username: 'Mickey', keyauth_credentials: [{ key: 'Mouse' }], jwt_secrets: [{ key: 'mickey-jwt', secret: JWT_SECRET }] },
      { username: 'Aladdin', oauth2_credentials: [{ name: 'Aladdin app', client_id: 'clientid4567', client_secret: 'secret4567', redirect_uris: ['http://google.test/kong'] }] },
    );
  }, async ({ gw }) => {
    mickeyKeyId = (await request(`${gw.admin}/key-auths/Mouse`)).json().id;
  });

  const aladdinToken = async (host: string) => (await multi.client.provisionToken({ host, clientId: 'clientid4567', secret: 'secret4567' })).access_token as string;
  const call = (host: string, headers: Record<string, string> = {}) => multi.client.proxy('/', { host, headers });

  it('MA01 AND: a key and a token: not anonymous, the key-auth credential (it runs last) tells who', async () => {
    const headers = echoed(await call('logical-and.test', { apikey: 'Mouse', authorization: `bearer ${await aladdinToken('logical-and.test')}` })).headers;
    assert.equal(headers['x-anonymous-consumer'], undefined);
    assert.equal(headers['x-consumer-id'], MICKEY);
    assert.equal(headers['x-credential-identifier'], mickeyKeyId);
  });

  it('MA02 AND: the key only is refused by oauth2', async () => {
    const reply = await call('logical-and.test', { apikey: 'Mouse' });
    assert.equal(reply.status, 401);
    assert.equal(reply.headers['www-authenticate'], 'Bearer');
  });

  it('MA03 AND: the token only is refused by key-auth', async () => {
    const reply = await call('logical-and.test', { authorization: `bearer ${await aladdinToken('logical-and.test')}` });
    assert.equal(reply.status, 401);
    assert.equal(reply.headers['www-authenticate'], 'Key');
  });

  it('MA04 AND: nothing', async () => {
    const reply = await call('logical-and.test');
    assert.equal(reply.status, 401);
    assert.equal(reply.headers['www-authenticate'], 'Bearer');
  });

  it('MO01 OR: a key and a token: oauth2 (first) identifies the caller, key-auth lets it be', async () => {
    const headers = echoed(await call('logical-or.test', { apikey: 'Mouse', authorization: `bearer ${await aladdinToken('logical-or.test')}` })).headers;
    assert.equal(headers['x-anonymous-consumer'], undefined);
    assert.equal(headers['x-credential-identifier'], 'clientid4567');
  });

  it("MO02 OR: a key and spoofed token headers: Mickey's key, no X-Authenticated-* upstream", async () => {
    const headers = echoed(await call('logical-or.test', { apikey: 'Mouse', ...spoofed })).headers;
    assert.equal(headers['x-consumer-id'], MICKEY);
    assert.equal(headers['x-credential-identifier'], mickeyKeyId);
    assert.equal(headers['x-authenticated-scope'], undefined);
    assert.equal(headers['x-authenticated-userid'], undefined);
  });

  it('MO03 OR with jwt: a valid JWT (it runs before oauth2) and spoofed token headers', async () => {
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const input = `${part({ typ: 'JWT', alg: 'HS256' })}.${part({ iss: 'mickey-jwt' })}`;
    const jwt = `${input}.${createHmac('sha256', JWT_SECRET).update(input).digest('base64url')}`;
    const headers = echoed(await call('logical-or-jwt.test', { authorization: `Bearer ${jwt}`, ...spoofed })).headers;
    assert.equal(headers['x-consumer-id'], MICKEY);
    assert.equal(headers['x-credential-identifier'], 'mickey-jwt');
    assert.equal(headers['x-authenticated-scope'], undefined);
    assert.equal(headers['x-authenticated-userid'], undefined);
  });

  it('MO04 OR: the token only', async () => {
    const headers = echoed(await call('logical-or.test', { authorization: `bearer ${await aladdinToken('logical-or.test')}` })).headers;
    assert.equal(headers['x-consumer-username'], 'Aladdin');
    assert.equal(headers['x-credential-identifier'], 'clientid4567');
  });

  it('MO05 OR: nothing: the anonymous consumer, no credential', async () => {
    const headers = echoed(await call('logical-or.test')).headers;
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-consumer-id'], ANONYMOUS);
    assert.equal(headers['x-credential-identifier'], undefined);
  });
});

describe('Kong §7.2 AZ02 and §7.7 RQ13: gRPC (oauth2_grpc.test)', () => {
  let grpcFx: Fixture;
  let echo: GrpcEcho;
  let client: EchoClient;
  before(async () => {
    echo = await startGrpcEcho();
    grpcFx = await startKongFixture((config) => {
      // One service, two routes: https for the token endpoints, grpc for the calls. Protocols do not take part
      // in Kong's route matching, so the gRPC route gets the service's path to be the more specific match.
      config.services.push({
        name: 'svc-grpc',
        url: `grpc://127.0.0.1:${echo.port}`,
        routes: [
          { name: 'route-grpc-tokens', hosts: ['oauth2_grpc.test'], protocols: ['https'], plugins: [oauth2Plugin(S3)] },
          { name: 'route-grpc', hosts: ['oauth2_grpc.test'], paths: ['/tollgate.test.Echo/'], protocols: ['grpc'], plugins: [oauth2Plugin(S3)] },
        ],
      });
    });
    client = echoClient(new URL(grpcFx.gw.h2c).host, { channel: { 'grpc.default_authority': 'oauth2_grpc.test' } });
  });
  after(async () => {
    client?.close();
    await grpcFx?.close();
    await echo?.close();
  });

  it('AZ02 a gRPC call without credentials is UNAUTHENTICATED', async () => {
    await assert.rejects(unary(client, { message: 'hello' }), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      return true;
    });
  });

  it('RQ13 a gRPC call with a bearer token in its metadata', async () => {
    const { access_token } = await grpcFx.client.provisionToken({ host: 'oauth2_grpc.test' });
    const { reply } = await unary(client, { message: 'hello noname' }, { metadata: { authorization: `bearer ${access_token}` } });
    assert.equal(reply.message, 'hello noname');
    assert.equal(reply.metadata['x-consumer-username'], 'bob');
    assert.equal(reply.metadata['x-credential-identifier'], 'clientid123');
  });

  it('RQ13b an unknown token over gRPC is UNAUTHENTICATED', async () => {
    await assert.rejects(unary(client, { message: 'x' }, { metadata: { authorization: 'bearer invalid' } }), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      return true;
    });
  });
});

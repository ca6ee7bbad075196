/**
 * Kong's basic-auth cases (spec/03-plugins/10-basic-auth/01-crypto, 03-access, 04-invalidations and
 * 05-declarative) against a real gateway and real upstreams: Authorization and Proxy-Authorization, Kong's
 * messages and realm, malformed and partial credentials, gRPC, the identity headers, hide_credentials,
 * anonymous; Kong's SHA-1 password hashes imported from a Kong export (`_transform: false`) and plain
 * passwords of gateway.yaml transformed as Kong does; runtime passwords stored as PBKDF2, checked once
 * on the worker pool and remembered; a flood of wrong passwords locks the address it comes from, never the user.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../fixtures/grpc-echo.ts';
import { gatewayOnHttpAndGrpcEchoAroundTests } from '../../fixtures/http-and-grpc-echo.ts';
import { request, startGateway, type Reply, type RequestOptions } from '../../helpers/gateway.ts';
import { kongPasswordHash } from '../../../plugins/basic-auth/schema.ts';

const ANONYMOUS_ID = '5b1c7a52-0000-4000-8000-00000000a0a0';
const MISSING_ANONYMOUS = '5b1c7a52-0000-4000-8000-00000000dead';
/** The consumer of Kong's 05-declarative_spec, whose exported hash is imported untouched. */
const ANDRU_ID = 'ad06b77c-0d2f-407a-8d6d-07f272a92d6a';

const basic = (userPass: string) => `Basic ${Buffer.from(userPass).toString('base64')}`;

function route(n: number | string, config: Record<string, unknown> = {}) {
  return { name: `basic-auth${n}`, hosts: [`basic-auth${n}.test`], plugins: [{ name: 'basic-auth', config }] };
}

function config(upstreamUrl: string, grpcTarget: string): Record<string, any> {
  return {
    // Kong's exports say `_transform: false`: their password hashes are taken as they are.
    _transform: false,
    services: [
      {
        name: 'echo',
        url: upstreamUrl,
        routes: [
          route(1, { realm: 'test-realm' }),
          route(2, { hide_credentials: true }),
          route(3, { anonymous: ANONYMOUS_ID }),
          route(4, { anonymous: MISSING_ANONYMOUS }),
          route(5, { anonymous: 'no-body' }),
          route('default'),
        ],
      },
      {
        name: 'grpc',
        url: `grpc://${grpcTarget}`,
        routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [{ name: 'basic-auth' }] }],
      },
    ],
    consumers: [
      { id: ANONYMOUS_ID, username: 'no-body' },
      { id: ANDRU_ID, username: 'andru', custom_id: 'donalds', basicauth_credentials: [{ username: 'bond', password: kongPasswordHash(ANDRU_ID, 'MI6') }] },
    ],
  };
}

const fx = gatewayOnHttpAndGrpcEchoAroundTests(config, async () => {
  // Kong's fixture: bob/kong, user123/password123, user321/password:123, created through the admin API.
  await admin('POST', '/consumers', { username: 'bob' });
  await admin('POST', '/consumers', { username: 'user123' });
  for (const [consumer, username, password] of [['bob', 'bob', 'kong'], ['user123', 'user123', 'password123'], ['user123', 'user321', 'password:123']]) {
    const created = await admin('POST', `/consumers/${consumer}/basic-auth`, { username, password });
    assert.equal(created.status, 201, created.text);
  }
});

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(fx.gw.admin + path, { method, body });
}

function proxy(host: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  return request(fx.gw.http + path, { ...options, headers: { host, ...options.headers } });
}

function echoed(reply: Reply): { headers: Record<string, string | undefined> } {
  assert.equal(reply.status, 200, reply.text);
  return reply.json();
}

function assertRefused(reply: Reply, realm = 'test-realm') {
  assert.equal(reply.status, 401, reply.text);
  assert.equal(reply.json().message, 'Unauthorized');
  assert.equal(reply.headers['www-authenticate'], `Basic realm="${realm}"`);
}

describe("Kong basic-auth: Kong's password hash (01-crypto)", () => {
  it('BA01 SHA-1 of the password and the consumer id, 40 hex digits; no password hashes as an empty one', () => {
    assert.match(kongPasswordHash('id123', 'pass123'), /^[0-9a-f]{40}$/);
    assert.equal(kongPasswordHash('id123', 'pass123'), kongPasswordHash('id123', 'pass123'));
    assert.equal(kongPasswordHash('id123', undefined), kongPasswordHash('id123', ''));
  });
});

describe('Kong basic-auth: unauthorized', () => {
  it('BA02 missing credentials: the configured realm, or "service" by default', async () => {
    assertRefused(await proxy('basic-auth1.test', '/status/200'));
    assertRefused(await proxy('basic-authdefault.test', '/status/200'), 'service');
  });

  it('BA03 invalid credentials in Authorization or Proxy-Authorization', async () => {
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: 'foobar' } }));
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { 'proxy-authorization': 'foobar' } }));
  });

  it('BA04 a password only, or a username only', async () => {
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: 'Basic a29uZw==' } }));
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: 'Basic Ym9i' } }));
  });

  it('BA05 what is not Base64 is no credential', async () => {
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: 'Basic adXNlcjEyMzpwYXNzd29yZDEyMw==' } }));
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: 'Basic Ym9iOmtvbmc=!' } }));
  });

  it('BA06 a wrong password', async () => {
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: basic('bob:wrong') } }));
  });
});

describe('Kong basic-auth: gRPC', () => {
  it('BA07 a call without credentials is UNAUTHENTICATED; with them it passes', async () => {
    await assert.rejects(unary(fx.grpcClient, { message: 'hello' }), (err: grpc.ServiceError) => err.code === 16);
    const { reply } = await unary(fx.grpcClient, { message: 'hello noname' }, { metadata: { authorization: basic('bob:kong') } });
    assert.equal(reply.metadata['x-consumer-username'], 'bob');
  });
});

describe('Kong basic-auth: authorized', () => {
  it('BA08 valid credentials in Authorization; a password containing ":"', async () => {
    echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic Ym9iOmtvbmc=' } }));
    assert.equal(echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic dXNlcjEyMzpwYXNzd29yZDEyMw==' } })).headers['x-consumer-username'], 'user123');
    assert.equal(echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic dXNlcjMyMTpwYXNzd29yZDoxMjM=' } })).headers['x-credential-identifier'], 'user321');
  });

  it('BA09 valid credentials in Proxy-Authorization', async () => {
    echoed(await proxy('basic-auth1.test', '/request', { headers: { 'proxy-authorization': 'Basic Ym9iOmtvbmc=' } }));
  });

  it('BA10 the identity headers: consumer and credential username, not anonymous', async () => {
    const got = echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic Ym9iOmtvbmc=' } })).headers;
    assert.match(got['x-consumer-id']!, /^[0-9a-f-]{36}$/);
    assert.equal(got['x-consumer-username'], 'bob');
    assert.equal(got['x-credential-identifier'], 'bob');
    assert.equal(got['x-anonymous-consumer'], undefined);
  });

  it('BA11 hide_credentials false sends the header upstream; true keeps it back', async () => {
    assert.equal(echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic Ym9iOmtvbmc=' } })).headers.authorization, 'Basic Ym9iOmtvbmc=');
    assert.equal(echoed(await proxy('basic-auth2.test', '/request', { headers: { authorization: 'Basic Ym9iOmtvbmc=' } })).headers.authorization, undefined);
    assert.equal(echoed(await proxy('basic-auth2.test', '/request', { headers: { 'proxy-authorization': 'Basic Ym9iOmtvbmc=' } })).headers['proxy-authorization'], undefined);
  });
});

describe('Kong basic-auth: anonymous', () => {
  it('BA12 right credentials with anonymous: the credential owner', async () => {
    const got = echoed(await proxy('basic-auth3.test', '/request', { headers: { authorization: 'Basic dXNlcjEyMzpwYXNzd29yZDEyMw==' } })).headers;
    assert.equal(got['x-consumer-username'], 'user123');
    assert.equal(got['x-anonymous-consumer'], undefined);
  });

  it('BA13 wrong credentials with anonymous by id or by username', async () => {
    for (const host of ['basic-auth3.test', 'basic-auth5.test']) {
      const got = echoed(await proxy(host, '/request', { headers: { authorization: basic('bob:wrong') } })).headers;
      assert.equal(got['x-anonymous-consumer'], 'true');
      assert.equal(got['x-consumer-username'], 'no-body');
      assert.equal(got['x-credential-identifier'], undefined);
    }
  });

  it("BA14 an anonymous consumer that does not exist is a 500 with Kong's message", async () => {
    const reply = await proxy('basic-auth4.test', '/request');
    assert.equal(reply.status, 500);
    assert.equal(reply.json().message, `anonymous consumer ${MISSING_ANONYMOUS} is configured but doesn't exist`);
  });
});

describe('Kong basic-auth: passwords moved between Kong and Tollgate (05-declarative)', () => {
  it("BA15 a Kong export's SHA-1 hash (with _transform: false) authenticates its password", async () => {
    const got = echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: basic('bond:MI6') } })).headers;
    assert.equal(got['x-consumer-username'], 'andru');
    assert.equal(got['x-consumer-custom-id'], 'donalds');
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: basic('bond:MI5') } }));
    assert.equal((await admin('GET', '/basic-auths/bond')).json().password, kongPasswordHash(ANDRU_ID, 'MI6'));
  });

  it("BA16 a plain password of gateway.yaml (_transform, Kong's default) is stored in memory as Kong's hash and authenticates", async () => {
    const plain = await startGateway({
      services: [{ name: 'echo', url: fx.upstream.url, routes: [route(1, { realm: 'test-realm' })] }],
      consumers: [{ id: ANDRU_ID, username: 'andru', basicauth_credentials: [{ username: 'james', password: 'secret' }] }],
    });
    try {
      const reply = await request(`${plain.http}/request`, { headers: { host: 'basic-auth1.test', authorization: basic('james:secret') } });
      assert.equal(reply.status, 200, reply.text);
      assert.equal((await request(`${plain.admin}/basic-auths/james`)).json().password, kongPasswordHash(ANDRU_ID, 'secret'));
    } finally {
      await plain.stop();
    }
  });
});

describe('Kong basic-auth: runtime credentials (04-invalidations) and hashing', () => {
  it('BA17 a runtime password is stored as PBKDF2 and works at once; a new password retires the old; deletion ends it', async () => {
    await admin('POST', '/consumers', { username: 'carol' });
    const created = await admin('POST', '/consumers/carol/basic-auth', { username: 'carol', password: 'first' });
    assert.match(created.json().password, /^\$pbkdf2-sha512\$i=10000,l=32\$/);
    echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: basic('carol:first') } }));
    assert.equal((await admin('PATCH', '/basic-auths/carol', { password: 'second' })).status, 200);
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: basic('carol:first') } }));
    echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: basic('carol:second') } }));
    assert.equal((await admin('DELETE', '/consumers/carol')).status, 204);
    assertRefused(await proxy('basic-auth1.test', '/status/200', { headers: { authorization: basic('carol:second') } }));
  });

  it("BA18 a deleted anonymous consumer: requests relying on it get Kong's 500", async () => {
    const second = await startGateway({
      services: [{ name: 'echo', url: fx.upstream.url, routes: [route(1, { anonymous: 'temporary-anonymous' })] }],
    }, { dataDir: fx.gw.dataDir + '-anon' });
    try {
      assert.equal((await request(`${second.http}/request`, { headers: { host: 'basic-auth1.test' } })).status, 500, 'no such consumer yet');
      const create = await request(`${second.admin}/consumers`, { method: 'POST', body: { username: 'temporary-anonymous' } });
      assert.equal(create.status, 201, create.text);
      assert.equal((await request(`${second.http}/request`, { headers: { host: 'basic-auth1.test' } })).status, 200);
      assert.equal((await request(`${second.admin}/consumers/temporary-anonymous`, { method: 'DELETE' })).status, 204);
      assert.equal((await request(`${second.http}/request`, { headers: { host: 'basic-auth1.test' } })).status, 500);
    } finally {
      await second.stop();
    }
  });

  it('BA19 wrong passwords lock the address they come from (429, Retry-After), never the user: its right password gets in', async () => {
    await admin('POST', '/consumers', { username: 'target' });
    await admin('POST', '/consumers/target/basic-auth', { username: 'target', password: 'right' });
    // The guesser is another loopback address: the gateway sees it as another client.
    const guess = (password: string) => proxy('basic-auth1.test', '/status/200', { headers: { authorization: basic(`target:${password}`) }, localAddress: '127.0.0.19' });
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await guess(`guess-${i}`)).status);
    assert.deepEqual(statuses, Array(10).fill(401));
    const locked = await guess('guess-x');
    assert.equal(locked.status, 429, locked.text);
    assert.ok(Number(locked.headers['retry-after']) > 0);
    // Never checked before, the right password is checked now.
    echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: basic('target:right') } }));
    echoed(await proxy('basic-auth1.test', '/request', { headers: { authorization: 'Basic Ym9iOmtvbmc=' } }));
  });
});

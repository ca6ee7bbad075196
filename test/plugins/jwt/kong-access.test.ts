/**
 * Kong's jwt cases (spec/03-plugins/16-jwt/02-api, 03-access and 06-schema) against a real gateway and
 * real upstreams, with tokens signed by an independent implementation (jose): where a token is found
 * (query, cookies, custom headers) and Kong's refusals and challenges; HS256/384/512, RS256/384/512,
 * ES256/384/512, PS256/384/512, EdDSA (Ed25519 and Ed448); key_claim_name in the claims or the header;
 * secret_is_base64; claims_to_verify; maximum_expiration; anonymous; gRPC; and the jwt_secrets admin API.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { SignJWT } from 'jose';
import { loadConfigText } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { unary } from '../../fixtures/grpc-echo.ts';
import { gatewayOnHttpAndGrpcEchoAroundTests } from '../../fixtures/http-and-grpc-echo.ts';
import { request, type Reply, type RequestOptions } from '../../helpers/gateway.ts';

const ANONYMOUS_ID = '7c1c7a52-0000-4000-8000-00000000a0a0';
const MISSING_ANONYMOUS = '7c1c7a52-0000-4000-8000-00000000dead';
const HS_SECRET = 'shared-hmac-secret-for-jwt-tests';

type AsymmetricAlg = 'RS256' | 'RS384' | 'RS512' | 'ES256' | 'ES384' | 'ES512' | 'PS256' | 'PS384' | 'PS512';
const ASYMMETRIC: [AsymmetricAlg, () => { publicKey: KeyObject; privateKey: KeyObject }][] = [
  ['RS256', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
  ['RS384', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
  ['RS512', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
  ['ES256', () => generateKeyPairSync('ec', { namedCurve: 'P-256' })],
  ['ES384', () => generateKeyPairSync('ec', { namedCurve: 'P-384' })],
  ['ES512', () => generateKeyPairSync('ec', { namedCurve: 'P-521' })],
  ['PS256', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
  ['PS384', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
  ['PS512', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
];
const keys = new Map<string, { publicKey: KeyObject; privateKey: KeyObject }>(ASYMMETRIC.map(([alg, make]) => [alg, make()]));
keys.set('Ed25519', generateKeyPairSync('ed25519'));
keys.set('Ed448', generateKeyPairSync('ed448'));
const pem = (key: KeyObject) => key.export({ type: 'spki', format: 'pem' }).toString();

function route(n: number | string, config: Record<string, unknown> = {}) {
  return { name: `jwt${n}`, hosts: [`jwt${n}.test`], plugins: [{ name: 'jwt', config }] };
}

function config(upstreamUrl: string, grpcTarget: string): Record<string, any> {
  const asymmetric = [...ASYMMETRIC.map(([alg]) => [alg, alg]), ['EdDSA', 'Ed25519'], ['EdDSA', 'Ed448']].map(([alg, key]) => ({
    username: `consumer-${key}`,
    jwt_secrets: [{ key: `key-${key}`, algorithm: alg, rsa_public_key: pem(keys.get(key)!.publicKey) }],
  }));
  return {
    services: [
      {
        name: 'echo',
        url: upstreamUrl,
        routes: [
          route(1),
          route(2, { uri_param_names: ['token', 'jwt'] }),
          route(3, { claims_to_verify: ['nbf', 'exp'] }),
          route(4, { key_claim_name: 'aud' }),
          route(5, { secret_is_base64: true }),
          route(6, { anonymous: ANONYMOUS_ID }),
          route(7, { anonymous: MISSING_ANONYMOUS }),
          route(8, { run_on_preflight: false }),
          route(9, { cookie_names: ['silly', 'crumble'], realm: 'test-jwt' }),
          route(10, { key_claim_name: 'kid' }),
          route(11, { claims_to_verify: ['nbf', 'exp'], maximum_expiration: 300 }),
          route(12, { header_names: ['CustomAuthorization'] }),
          route(13, { anonymous: 'no-body' }),
        ],
      },
      { name: 'grpc', url: `grpc://${grpcTarget}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [{ name: 'jwt' }] }] },
    ],
    consumers: [
      { id: ANONYMOUS_ID, username: 'no-body' },
      { username: 'jwt_tests_consumer', jwt_secrets: [{ key: 'hs256-key', secret: HS_SECRET }] },
      { username: 'jwt_tests_base64_consumer', jwt_secrets: [{ key: 'base64-key', secret: Buffer.from(HS_SECRET).toString('base64') }] },
      { username: 'jwt_tests_hs384', jwt_secrets: [{ key: 'hs384-key', algorithm: 'HS384', secret: HS_SECRET }] },
      { username: 'jwt_tests_hs512', jwt_secrets: [{ key: 'hs512-key', algorithm: 'HS512', secret: HS_SECRET }] },
      ...asymmetric,
    ],
  };
}

const fx = gatewayOnHttpAndGrpcEchoAroundTests(config);

const now = () => Math.floor(Date.now() / 1000);

/** A token of `claims`, signed with `alg` by jose; `header` adds fields to the protected header. */
async function sign(claims: Record<string, unknown>, alg: string, key: KeyObject | Uint8Array, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ typ: 'JWT', ...header, alg }).sign(key);
}

const hs = (claims: Record<string, unknown>, alg = 'HS256', header: Record<string, unknown> = {}) => sign(claims, alg, new TextEncoder().encode(HS_SECRET), header);
const payload = (iss?: string) => ({ ...(iss === undefined ? {} : { iss }), nbf: now(), iat: now(), exp: now() + 3600 });

function proxy(host: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  return request(fx.gw.http + path, { ...options, headers: { host, ...options.headers } });
}

function echoed(reply: Reply): Record<string, string | undefined> {
  assert.equal(reply.status, 200, reply.text);
  return reply.json().headers;
}

/** Kong's jwt answers with kong.response.exit: the exact body, `{"message": ...}` or the claim errors, no request_id. */
function assertRefused(reply: Reply, body: Record<string, string> | string, challenge = 'Bearer error="invalid_token"') {
  assert.equal(reply.status, 401, reply.text);
  assert.equal(reply.text, JSON.stringify(typeof body === 'string' ? { message: body } : body));
  assert.equal(reply.headers['www-authenticate'], challenge);
}

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe('Kong jwt: refusals', () => {
  it('JW01 no token: 401 with a bare Bearer challenge', async () => {
    assertRefused(await proxy('jwt1.test', '/request'), 'Unauthorized', 'Bearer');
  });

  it('JW02 the claims lack the key claim, or it is empty', async () => {
    assertRefused(await proxy('jwt1.test', '/request', bearer(await sign(payload(), 'HS256', new TextEncoder().encode('foo')))), "No mandatory 'iss' in claims");
    assertRefused(await proxy('jwt1.test', '/request', bearer(await sign(payload(''), 'HS256', new TextEncoder().encode('foo')))), "Invalid 'iss' in claims");
  });

  it('JW03 the iss names no credential', async () => {
    assertRefused(await proxy('jwt1.test', '/request', bearer(await hs(payload('123456789')))), "No credentials found for given 'iss'");
  });

  it('JW04 a signature made with another secret', async () => {
    assertRefused(await proxy('jwt1.test', '/request', bearer(await sign(payload('hs256-key'), 'HS256', new TextEncoder().encode('foo')))), 'Invalid signature');
  });

  it("JW05 an alg other than the credential's", async () => {
    // HS384 over the right secret: the credential fixes HS256.
    assertRefused(await proxy('jwt1.test', '/request', bearer(await hs(payload('hs256-key'), 'HS384'))), 'Invalid algorithm');
    // An RS256 header over an HMAC signature (the "alg confusion" forgery).
    const [, body, signature] = (await hs(payload('hs256-key'))).split('.');
    const forged = `${Buffer.from(JSON.stringify({ typ: 'JWT', alg: 'RS256' })).toString('base64url')}.${body}.${signature}`;
    assertRefused(await proxy('jwt1.test', '/request', bearer(forged)), 'Invalid algorithm');
    // `none` is no algorithm at all.
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${body}.`;
    assertRefused(await proxy('jwt1.test', '/request', bearer(unsigned)), 'Bad token; invalid alg');
  });

  it('JW06 OPTIONS passes when run_on_preflight is false, is checked otherwise', async () => {
    assert.equal((await proxy('jwt8.test', '/request', { method: 'OPTIONS' })).status, 200);
    assertRefused(await proxy('jwt1.test', '/request', { method: 'OPTIONS' }), 'Unauthorized', 'Bearer');
  });

  it('JW07 maximum_expiration: a token living longer is refused, one within passes', async () => {
    const long = await hs({ iss: 'hs256-key', exp: now() + 3600, nbf: now() - 30 });
    assertRefused(await proxy('jwt11.test', `/request/?jwt=${long}`), { exp: 'exceeds maximum allowed expiration' });
    const short = await hs({ iss: 'hs256-key', exp: now() + 270, nbf: now() - 30 });
    echoed(await proxy('jwt11.test', `/request/?jwt=${short}`));
  });

  it('JW08 a gRPC call without a token is UNAUTHENTICATED', async () => {
    await assert.rejects(unary(fx.grpcClient, { message: 'hello' }), (err: grpc.ServiceError) => err.code === 16);
  });

  it('JW09 two different tokens are refused', async () => {
    const token = await hs(payload('hs256-key'));
    assertRefused(await proxy('jwt1.test', `/request?jwt=${token}`, bearer('invalid.jwt.token')), 'Multiple tokens provided');
    // The same token twice is one token.
    echoed(await proxy('jwt1.test', `/request?jwt=${token}`, bearer(token)));
  });

  it('JW10 what does not decode', async () => {
    assertRefused(await proxy('jwt1.test', '/request', bearer('no-way-this-works')), 'Bad token; invalid JSON');
    assertRefused(await proxy('jwt1.test', '/request', bearer('a.b.c')), 'Bad token; invalid JSON');
    const [head, body] = (await hs(payload('hs256-key'))).split('.');
    assertRefused(await proxy('jwt1.test', '/request', bearer(`${head}.${body}.!!!`)), 'Bad token; invalid signature');
  });
});

describe('Kong jwt: HS256', () => {
  it('JW11 a verified token: the consumer and the secret key reach the upstream, the token too', async () => {
    const token = await hs(payload('hs256-key'));
    const headers = echoed(await proxy('jwt1.test', '/request', bearer(token)));
    assert.equal(headers.authorization, `Bearer ${token}`);
    assert.equal(headers['x-consumer-username'], 'jwt_tests_consumer');
    assert.equal(headers['x-credential-identifier'], 'hs256-key');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('JW12 gRPC with a token in its metadata', async () => {
    const { reply } = await unary(fx.grpcClient, { message: 'hello noname' }, { metadata: { authorization: `Bearer ${await hs(payload('hs256-key'))}` } });
    assert.equal(reply.metadata['x-consumer-username'], 'jwt_tests_consumer');
  });

  it('JW13 the key in the header (kid) or in another claim (aud)', async () => {
    echoed(await proxy('jwt10.test', '/request', bearer(await hs(payload(), 'HS256', { kid: 'hs256-key' }))));
    const headers = echoed(await proxy('jwt4.test', '/request', bearer(await hs({ ...payload(), aud: 'hs256-key' }))));
    assert.equal(headers['x-credential-identifier'], 'hs256-key');
  });

  it('JW14 secret_is_base64: the stored secret is decoded before use', async () => {
    const headers = echoed(await proxy('jwt5.test', '/request', bearer(await hs(payload('base64-key')))));
    assert.equal(headers['x-consumer-username'], 'jwt_tests_base64_consumer');
  });

  it('JW15 cookies: either configured cookie; an unknown issuer or a corrupted token in one; none at all', async () => {
    const token = await hs(payload('hs256-key'));
    for (const name of ['crumble', 'silly']) echoed(await proxy('jwt9.test', '/request', { headers: { cookie: `${name}=${token}; path=/;domain=.jwt9.test` } }));
    const challenge = 'Bearer realm="test-jwt", error="invalid_token"';
    assertRefused(await proxy('jwt9.test', '/request', { headers: { cookie: `silly=${await hs(payload('incorrect-issuer'))}` } }), "No credentials found for given 'iss'", challenge);
    assertRefused(await proxy('jwt9.test', '/request', { headers: { cookie: `silly=no-way-this-works${token}` } }), 'Bad token; invalid JSON', challenge);
    echoed(await proxy('jwt9.test', '/request', bearer(token)));
    assertRefused(await proxy('jwt9.test', '/request'), 'Unauthorized', 'Bearer realm="test-jwt"');
  });

  it('JW16 a custom header, its first occurrence when sent twice', async () => {
    const token = await hs(payload('hs256-key'));
    echoed(await proxy('jwt12.test', '/request', { headers: { CustomAuthorization: `Bearer ${token}` } }));
    echoed(await proxy('jwt12.test', '/request', { headers: { CustomAuthorization: [`Bearer ${token}`, 'Bearer other-token'] } }));
  });

  it('JW17 a URL parameter, or a custom one', async () => {
    const token = await hs(payload('hs256-key'));
    echoed(await proxy('jwt1.test', `/request/?jwt=${token}`));
    echoed(await proxy('jwt2.test', `/request/?token=${token}`));
  });
});

describe('Kong jwt: the other algorithms', () => {
  for (const alg of ['HS384', 'HS512']) {
    it(`JW18 ${alg}`, async () => {
      const headers = echoed(await proxy('jwt1.test', '/request', bearer(await hs(payload(`${alg.toLowerCase()}-key`), alg))));
      assert.equal(headers['x-consumer-username'], `jwt_tests_${alg.toLowerCase()}`);
    });
  }

  for (const [alg] of ASYMMETRIC) {
    it(`JW19 ${alg}: verifies the token and identifies the consumer; another key's signature fails`, async () => {
      const headers = echoed(await proxy('jwt1.test', '/request', bearer(await sign(payload(`key-${alg}`), alg, keys.get(alg)!.privateKey))));
      assert.equal(headers['x-consumer-username'], `consumer-${alg}`);
      assert.equal(headers['x-credential-identifier'], `key-${alg}`);
      const another = ASYMMETRIC.find(([a]) => a === alg)![1]();
      assertRefused(await proxy('jwt1.test', '/request', bearer(await sign(payload(`key-${alg}`), alg, another.privateKey))), 'Invalid signature');
    });
  }

  it('JW20 EdDSA with an Ed25519 key', async () => {
    const headers = echoed(await proxy('jwt1.test', '/request', bearer(await sign(payload('key-Ed25519'), 'EdDSA', keys.get('Ed25519')!.privateKey))));
    assert.equal(headers['x-consumer-username'], 'consumer-Ed25519');
  });

  it('JW20b EdDSA with an Ed448 key (signed with node:crypto: jose signs Ed25519 only)', async () => {
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const input = `${part({ typ: 'JWT', alg: 'EdDSA' })}.${part(payload('key-Ed448'))}`;
    const token = `${input}.${cryptoSign(null, Buffer.from(input), keys.get('Ed448')!.privateKey).toString('base64url')}`;
    assert.equal(echoed(await proxy('jwt1.test', '/request', bearer(token)))['x-consumer-username'], 'consumer-Ed448');
  });
});

describe('Kong jwt: registered claims', () => {
  it('JW21 claims to verify must be there, as numbers', async () => {
    assertRefused(await proxy('jwt3.test', `/request/?jwt=${await hs({ iss: 'hs256-key' })}`), { nbf: 'must be a number', exp: 'must be a number' });
  });

  it('JW22 exp in the past: token expired; nbf ahead: not valid yet', async () => {
    assertRefused(await proxy('jwt3.test', `/request/?jwt=${await hs({ iss: 'hs256-key', exp: now() - 10, nbf: now() - 10 })}`), { exp: 'token expired' });
    assertRefused(await proxy('jwt3.test', `/request/?jwt=${await hs({ iss: 'hs256-key', exp: now() + 10, nbf: now() + 5 })}`), { nbf: 'token not valid yet' });
  });

  it('JW23 without claims_to_verify, an expired token passes (Kong)', async () => {
    echoed(await proxy('jwt1.test', '/request', bearer(await hs({ iss: 'hs256-key', exp: now() - 10 }))));
  });
});

describe('Kong jwt: anonymous', () => {
  it('JW24 right credentials with anonymous: the secret owner', async () => {
    const headers = echoed(await proxy('jwt6.test', '/request', bearer(await hs(payload('hs256-key')))));
    assert.equal(headers['x-consumer-username'], 'jwt_tests_consumer');
    assert.equal(headers['x-credential-identifier'], 'hs256-key');
    assert.equal(headers['x-anonymous-consumer'], undefined);
  });

  it('JW25 no credentials with anonymous by id or username', async () => {
    for (const host of ['jwt6.test', 'jwt13.test']) {
      const headers = echoed(await proxy(host, '/request'));
      assert.equal(headers['x-anonymous-consumer'], 'true');
      assert.equal(headers['x-consumer-username'], 'no-body');
      assert.equal(headers['x-credential-identifier'], undefined);
    }
  });

  it("JW26 an anonymous consumer that does not exist is a 500 with Kong's message", async () => {
    const reply = await proxy('jwt7.test', '/request');
    assert.equal(reply.status, 500);
    assert.equal(reply.json().message, `anonymous consumer ${MISSING_ANONYMOUS} is configured but doesn't exist`);
  });
});

describe('Kong jwt: the jwt_secrets admin API (02-api)', () => {
  const admin = (
    method: string,
    path: string,
    body?: Record<string, unknown> | string,
    headers?: Record<string, string>,
  ) => request(fx.gw.admin + path, { method, body, headers });

  it('JW27 POST creates a secret with a generated key and secret, or given ones; duplicate secrets are fine', async () => {
    await admin('POST', '/consumers', { username: 'bob' });
    const generated = await admin('POST', '/consumers/bob/jwt', {});
    assert.equal(generated.status, 201, generated.text);
    assert.match(generated.json().key, /^[A-Za-z0-9]{32}$/);
    assert.equal(generated.json().secret.length, 32);
    assert.equal(generated.json().algorithm, 'HS256');
    const given = await admin('POST', '/consumers/bob/jwt', { key: 'bob2', secret: 'tooshort' });
    assert.equal(given.json().key, 'bob2');
    assert.equal(given.json().secret, 'tooshort');
    assert.equal((await admin('POST', '/consumers/bob/jwt', { key: 'bob3', secret: 'tooshort' })).status, 201);
  });

  it('JW28 an RS256 secret needs a valid public key (JSON or form)', async () => {
    const missing = await admin('POST', '/consumers/bob/jwt', { algorithm: 'RS256' });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.json().fields, { rsa_public_key: 'required field missing' });
    const invalid = await admin('POST', '/consumers/bob/jwt', { algorithm: 'RS256', rsa_public_key: 'foo' });
    assert.deepEqual(invalid.json().fields, { rsa_public_key: 'invalid key' });
    const publicKey = pem(keys.get('RS256')!.publicKey);
    const form = await admin('POST', '/consumers/bob/jwt', new URLSearchParams({ key: 'bob-rs-form', algorithm: 'RS256', rsa_public_key: publicKey }).toString(), { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 201, form.text);
    assert.equal(form.json().rsa_public_key, publicKey);
  });

  it('JW29 a secret created at runtime signs at once; PATCH a new secret; DELETE ends it; /jwts/{key}/consumer', async () => {
    const created = (await admin('POST', '/consumers/bob/jwt', { key: 'runtime-key', secret: 'runtime-secret' })).json();
    const token = await sign(payload('runtime-key'), 'HS256', new TextEncoder().encode('runtime-secret'));
    assert.equal(echoed(await proxy('jwt1.test', '/request', bearer(token)))['x-consumer-username'], 'bob');
    assert.equal((await admin('PATCH', `/jwts/runtime-key`, { secret: 'newsecret' })).json().secret, 'newsecret');
    assertRefused(await proxy('jwt1.test', '/request', bearer(token)), 'Invalid signature');
    assert.equal((await admin('GET', '/jwts/runtime-key/consumer')).json().username, 'bob');
    assert.equal((await admin('DELETE', `/consumers/bob/jwt/${created.id}`)).status, 204);
    assertRefused(await proxy('jwt1.test', '/request', bearer(token)), "No credentials found for given 'iss'");
    assert.equal((await admin('DELETE', '/consumers/bob/jwt/blah')).status, 404);
  });

  it('JW30 /jwts lists and pages; POST needs a consumer', async () => {
    const first = (await admin('GET', '/jwts?size=1')).json();
    assert.equal(first.data.length, 1);
    assert.ok(first.next);
    assert.equal((await admin('POST', '/jwts', { key: 'x' })).json().message, 'schema violation (consumer: required field missing)');
  });
});

describe('Kong jwt: config schema (06-schema)', () => {
  const load = (config: Record<string, unknown>) =>
    loadConfigText(JSON.stringify({ _format_version: '3.0', routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'jwt', config }] }] }), '/tmp/jwt.yaml', bundledPlugins);

  it('JW31 maximum_expiration within 0..31536000, and only with exp verified', () => {
    assert.equal(load({ maximum_expiration: 60, claims_to_verify: ['exp', 'nbf'] }).ok, true);
    for (const claims of [['exp', 'nbf'], ['nbf']]) {
      const negative = load({ maximum_expiration: -1, claims_to_verify: claims });
      assert.match(String(!negative.ok && negative.errors[0]), /config\.maximum_expiration: value should be between 0 and 31536000/);
    }
    const withoutExp = load({ maximum_expiration: 60, claims_to_verify: ['nbf'] });
    assert.match(String(!withoutExp.ok && withoutExp.errors[0]), /config\.claims_to_verify: expected to contain: exp/);
  });
});

/**
 * Kong's basic-auth admin API cases (spec/03-plugins/10-basic-auth/02-api_spec.lua) on the API generated
 * from `basicauth_credentials`. One difference, on purpose: a password written here is stored as a PBKDF2
 * hash (Kong's own PHC format, as its oauth2 `hash_secret`), not Kong's SHA-1 salted with the consumer id (fast to guess), so the
 * assertions check that the stored hash verifies the password rather than equal Kong's SHA-1.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { verifySecret } from '../../../src/toolkit/secrets.ts';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';

let gw: TestGateway;
let upstream: Upstream;
let bob: Record<string, any>;

before(async () => {
  upstream = await startUpstream();
  gw = await startGateway({ services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'basic-auth' }] }] }] });
  bob = (await admin('POST', '/consumers', { username: 'bob' })).json();
  await admin('POST', '/consumers', { username: 'alice' });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(gw.admin + path, { method, body });
}

async function create(consumer: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const reply = await admin('POST', `/consumers/${consumer}/basic-auth`, body);
  assert.equal(reply.status, 201, reply.text);
  return reply.json();
}

describe('Kong basic-auth API: /consumers/{c}/basic-auth', () => {
  it('BP01 POST creates a credential for the consumer, with tags', async () => {
    const created = await create('bob', { username: 'bob', password: 'kong', tags: ['tag1', 'tag2'] });
    assert.equal(created.consumer.id, bob.id);
    assert.equal(created.username, 'bob');
    assert.deepEqual(created.tags, ['tag1', 'tag2']);
  });

  it('BP02 the password is hashed, whitespace included', async () => {
    const plain = await create('bob', { username: 'bob-hash', password: 'kong' });
    assert.notEqual(plain.password, 'kong');
    assert.equal(verifySecret('kong', plain.password), true);
    const spaced = await create('bob', { username: 'bob-spaced', password: ' kong ' });
    assert.equal(verifySecret(' kong ', spaced.password), true);
    assert.equal(verifySecret('kong', spaced.password), false);
  });

  it('BP03 errors: required fields; two identical usernames', async () => {
    const empty = await admin('POST', '/consumers/bob/basic-auth', {});
    assert.equal(empty.status, 400);
    assert.deepEqual(empty.json().fields, { username: 'required field missing', password: 'required field missing' });
    await create('bob', { username: 'bob-dup', password: 'kong' });
    assert.equal((await admin('POST', '/consumers/alice/basic-auth', { username: 'bob-dup', password: 'kong' })).status, 409);
  });

  it("BP04 GET lists the consumer's credentials", async () => {
    await admin('POST', '/consumers', { username: 'three' });
    for (let i = 0; i < 3; i++) await create('three', { username: `three-${i}`, password: 'p' });
    assert.equal((await admin('GET', '/consumers/three/basic-auth')).json().data.length, 3);
  });
});

describe('Kong basic-auth API: /consumers/{c}/basic-auth/{id or username}', () => {
  let credential: Record<string, any>;
  before(async () => {
    credential = await create('bob', { username: 'tyrion', password: 'kong' });
  });

  it('BP05 GET by id and by username, under its own consumer only', async () => {
    for (const key of [credential.id, 'tyrion']) assert.equal((await admin('GET', `/consumers/bob/basic-auth/${key}`)).json().id, credential.id);
    assert.equal((await admin('GET', `/consumers/alice/basic-auth/${credential.id}`)).status, 404);
  });

  it('BP06 PUT by username creates it; without a password it is refused', async () => {
    const put = await admin('PUT', '/consumers/bob/basic-auth/robert', { password: 'kong' });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().username, 'robert');
    assert.equal(put.json().consumer.id, bob.id);
    const missing = await admin('PUT', '/consumers/bob/basic-auth/robert', {});
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.json().fields, { password: 'required field missing' });
  });

  it('BP07 PATCH a password (rehashed) or only the username (the hash stays), by id or by username', async () => {
    const previous = (await admin('GET', `/basic-auths/${credential.id}`)).json().password;
    const newPassword = await admin('PATCH', `/consumers/bob/basic-auth/${credential.id}`, { password: '4321' });
    assert.notEqual(newPassword.json().password, previous);
    const hash = newPassword.json().password;
    const renamed = await admin('PATCH', `/consumers/bob/basic-auth/${credential.id}`, { username: 'Tyrion Lannister' });
    assert.equal(renamed.json().username, 'Tyrion Lannister');
    assert.equal(renamed.json().password, hash);
    const byName = await admin('PATCH', '/consumers/bob/basic-auth/Tyrion Lannister'.replace(' ', '%20'), { password: 'again' });
    assert.equal(byName.status, 200, byName.text);
    assert.notEqual(byName.json().password, hash);
  });

  it('BP08 PATCH with invalid input', async () => {
    const reply = await admin('PATCH', `/consumers/bob/basic-auth/${credential.id}`, { username: 123 });
    assert.equal(reply.status, 400);
    assert.deepEqual(reply.json().fields, { username: 'expected a string' });
  });

  it('BP09 DELETE; a missing username or id is 404', async () => {
    const doomed = await create('bob', { username: 'doomed', password: 'x' });
    assert.equal((await admin('DELETE', `/consumers/bob/basic-auth/${doomed.id}`)).status, 204);
    assert.equal((await admin('DELETE', '/consumers/bob/basic-auth/blah')).status, 404);
    assert.equal((await admin('DELETE', '/consumers/bob/basic-auth/00000000-0000-0000-0000-000000000000')).status, 404);
  });
});

describe('Kong basic-auth API: /basic-auths', () => {
  it('BP10 GET all with or without a trailing slash, and pages', async () => {
    const all = (await admin('GET', '/basic-auths')).json().data.length;
    assert.ok(all >= 3);
    assert.equal((await admin('GET', '/basic-auths/')).json().data.length, all);
    const first = (await admin('GET', '/basic-auths?size=1')).json();
    assert.equal(first.data.length, 1);
    const second = (await admin('GET', first.next)).json();
    assert.notDeepEqual(second.data, first.data);
  });

  it('BP11 POST needs a consumer', async () => {
    const missing = await admin('POST', '/basic-auths', { username: 'top', password: 'x' });
    assert.equal(missing.json().message, 'schema violation (consumer: required field missing)');
    const created = await admin('POST', '/basic-auths', { username: 'top', password: 'x', consumer: { id: bob.id } });
    assert.equal(created.status, 201, created.text);
  });

  it("BP12 /basic-auths/{id or username}/consumer", async () => {
    const credential = await create('bob', { username: 'owned', password: 'x' });
    for (const key of [credential.id, 'owned']) assert.deepEqual((await admin('GET', `/basic-auths/${key}/consumer`)).json(), bob);
    assert.equal((await admin('GET', `/basic-auths/${crypto.randomUUID()}/consumer`)).status, 404);
  });
});

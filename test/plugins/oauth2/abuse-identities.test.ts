/**
 * What was issued to a deleted identity never comes back under another one. Deleting a runtime consumer
 * deletes its credentials, their tokens and codes (Kong's cascade); a stored id is looked up as an id
 * only, so a consumer whose username is a deleted consumer's id inherits nothing; a UUID-shaped admin key
 * or `anonymous` value names an id, never a username (Kong's endpoint-key rule); a credential deleted and
 * created again under the same id starts with no tokens or codes. Codes are spent by their client's first
 * redemption, so a wrong PKCE verifier cannot be followed by another guess.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const CALLBACK = 'https://app.example/cb';
const MISSING_ANONYMOUS = '6f0c1e2d-3b4a-4c5d-8e6f-7a8b9c0d1e2f';
const OAUTH = { enable_client_credentials: true, enable_authorization_code: true, provision_key: 'pk' };

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [
    { name: 'api', url: upstreamUrl, routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: OAUTH }] }] },
    {
      name: 'guest',
      url: upstreamUrl,
      routes: [{ name: 'guest', paths: ['/guest'], plugins: [{ name: 'oauth2', config: { ...OAUTH, anonymous: MISSING_ANONYMOUS } }] }],
    },
  ],
  consumers: [{ username: 'declared', oauth2_credentials: [{ name: 'Other', client_id: 'other-app', client_secret: 'other-secret', redirect_uris: [CALLBACK] }] }],
}));

const admin = (path: string, options?: Parameters<typeof request>[1]) => request(fx.gw.admin + path, options);

async function createConsumer(username: string): Promise<{ id: string; username: string }> {
  const res = await admin('/consumers', { method: 'POST', body: { username } });
  assert.equal(res.status, 201, res.text);
  return res.json();
}

async function createCredential(consumer: string, fields: Record<string, unknown>): Promise<{ id: string; client_id: string }> {
  const res = await admin(`/consumers/${consumer}/oauth2`, { method: 'POST', body: { name: 'App', client_secret: 'app-secret', redirect_uris: [CALLBACK], ...fields } });
  assert.equal(res.status, 201, res.text);
  return res.json();
}

function post(path: string, fields: Record<string, string>): Promise<Reply> {
  return request(`${fx.gw.https}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });
}

async function clientToken(clientId: string): Promise<string> {
  const res = await post('/api/oauth2/token', { grant_type: 'client_credentials', client_id: clientId, client_secret: 'app-secret' });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

async function authorizeCode(clientId: string, extra: Record<string, string> = {}): Promise<string> {
  const res = await post('/api/oauth2/authorize', { provision_key: 'pk', authenticated_userid: 'user-1', client_id: clientId, response_type: 'code', ...extra });
  assert.equal(res.status, 200, res.text);
  return new URL(res.json().redirect_uri).searchParams.get('code')!;
}

const call = (path: string, token: string) => request(`${fx.gw.http}${path}`, { headers: { authorization: `Bearer ${token}` } });

describe('deleting a runtime consumer', () => {
  it("a consumer named after the deleted one's id inherits none of its tokens", async () => {
    const victim = await createConsumer(`victim-${randomUUID()}`);
    const app = await createCredential(victim.id, { client_id: `victim-app-${randomUUID()}` });
    const token = await clientToken(app.client_id);
    assert.equal((await call('/api/x', token)).status, 200);

    assert.equal((await admin(`/consumers/${victim.id}`, { method: 'DELETE' })).status, 204);
    const impostor = await createConsumer(victim.id);
    const res = await call('/api/x', token);
    assert.equal(res.status, 401, `the old token answered as ${fx.upstream.requests.at(-1)?.headers['x-consumer-username']}`);
    // Kong's rule: a UUID-shaped key is an id, so the old id finds nobody, and the impostor only by its own id.
    assert.equal((await admin(`/consumers/${victim.id}`)).status, 404);
    assert.equal((await admin(`/consumers/${impostor.id}`)).json().username, victim.id);
  });

  it('its credentials go with it: their client_id is free again and their codes are gone', async () => {
    const owner = await createConsumer(`owner-${randomUUID()}`);
    const clientId = `cascade-app-${randomUUID()}`;
    const first = await createCredential(owner.username, { client_id: clientId });
    const code = await authorizeCode(clientId);
    assert.equal((await admin(`/consumers/${owner.username}`, { method: 'DELETE' })).status, 204);

    assert.equal((await admin(`/oauth2/${first.id}`)).status, 404);
    const heir = await createConsumer(`heir-${randomUUID()}`);
    await createCredential(heir.username, { id: first.id, client_id: clientId });
    const redeemed = await post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: clientId, client_secret: 'app-secret', code });
    assert.equal(redeemed.status, 400, redeemed.text);
    assert.equal(redeemed.json().error, 'invalid_grant');
  });
});

describe('a credential deleted and created again under the same id', () => {
  it('starts without the tokens and codes of the deleted one', async () => {
    const owner = await createConsumer(`reuser-${randomUUID()}`);
    const clientId = `reused-app-${randomUUID()}`;
    const credential = await createCredential(owner.id, { client_id: clientId });
    const token = await clientToken(clientId);
    const code = await authorizeCode(clientId);
    assert.equal((await admin(`/oauth2/${credential.id}`, { method: 'DELETE' })).status, 204);

    const again = await admin(`/oauth2/${credential.id}`, { method: 'PUT', body: { consumer: { id: owner.id }, name: 'Again', client_id: clientId, client_secret: 'app-secret', redirect_uris: [CALLBACK] } });
    assert.equal(again.status, 200, again.text);
    assert.equal((await call('/api/x', token)).status, 401);
    const redeemed = await post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: clientId, client_secret: 'app-secret', code });
    assert.equal(redeemed.json().error, 'invalid_grant', redeemed.text);
  });
});

describe('references by id or username', () => {
  it('an anonymous consumer configured by id is not stood in for by a consumer with that username', async () => {
    await createConsumer(MISSING_ANONYMOUS);
    const res = await request(`${fx.gw.http}/guest/x`);
    assert.equal(res.status, 500, res.text);
    assert.match(res.json().message, /anonymous consumer .* is configured but doesn't exist/);
  });

  it('a credential body naming {username} or {id} resolves that field only', async () => {
    const holder = await createConsumer(`holder-${randomUUID()}`);
    const byName = await admin('/oauth2', { method: 'POST', body: { consumer: { username: holder.username }, name: 'By name' } });
    assert.equal(byName.status, 201, byName.text);
    assert.equal(byName.json().consumer.id, holder.id);
    const lookalike = await createConsumer(randomUUID());
    const byId = await admin('/oauth2', { method: 'POST', body: { consumer: { id: lookalike.username }, name: 'By id' } });
    assert.equal(byId.status, 400, byId.text);
  });
});

describe('authorization codes', () => {
  function pkce() {
    const verifier = randomBytes(48).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  }

  it('a wrong PKCE verifier spends the code: the right one afterwards gets invalid_grant', async () => {
    const { verifier, challenge } = pkce();
    const code = await authorizeCode('other-app', { code_challenge: challenge, code_challenge_method: 'S256' });
    const redeem = (codeVerifier: string) => post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: 'other-app', client_secret: 'other-secret', code, code_verifier: codeVerifier });
    const wrong = await redeem(pkce().verifier);
    assert.equal(wrong.json().error, 'invalid_grant', wrong.text);
    const right = await redeem(verifier);
    assert.equal(right.status, 400, right.text);
    assert.equal(right.json().error, 'invalid_grant');
  });

  it('a code presented by another client stays good for its own', async () => {
    const owner = await createConsumer(`coder-${randomUUID()}`);
    const thief = await createCredential(owner.id, { client_id: `thief-${randomUUID()}` });
    const code = await authorizeCode('other-app');
    const stolen = await post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: thief.client_id, client_secret: 'app-secret', code });
    assert.equal(stolen.json().error, 'invalid_grant', stolen.text);
    const own = await post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: 'other-app', client_secret: 'other-secret', code });
    assert.equal(own.status, 200, own.text);
  });

  it('of concurrent redemptions of one code exactly one succeeds', async () => {
    const code = await authorizeCode('other-app');
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => post('/api/oauth2/token', { grant_type: 'authorization_code', client_id: 'other-app', client_secret: 'other-secret', code })),
    );
    assert.equal(replies.filter((r) => r.status === 200).length, 1, replies.map((r) => r.text).join('\n'));
  });
});

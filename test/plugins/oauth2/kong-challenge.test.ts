/**
 * Kong's authentication challenge cases (reference §7.9): 401s and their `WWW-Authenticate` headers.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertInvalidToken, assertMissingToken, invalidTokenChallenge, sleep, kongFixtureAroundTests } from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

describe('Kong §7.9 authentication challenge', () => {
  it('CH01 no credentials', async () => {
    assertMissingToken(await fx.client.proxy('/request', { method: 'POST' }));
  });

  it('CH02 an unknown token in the query', async () => {
    assertInvalidToken(await fx.client.proxy('/request?access_token=invalid'));
  });

  it('CH03 an unknown bearer token', async () => {
    assertInvalidToken(await fx.client.proxy('/request', { headers: { authorization: 'bearer invalid' } }));
  });

  it('CH04 an expired token (token_expiration 5)', async () => {
    const { access_token } = await fx.client.provisionToken();
    assert.equal((await fx.client.proxy(`/request?access_token=${access_token}`)).status, 200);
    await sleep(6000);
    assertInvalidToken(await fx.client.proxy(`/request?access_token=${access_token}`));
  });

  it('CH05 the realm is part of the invalid_token challenge', async () => {
    const res = await fx.client.proxy('/request', { host: 'oauth2_5.test', headers: { authorization: 'bearer invalid' } });
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], invalidTokenChallenge('test-oauth2'));
  });

  it('CH06 an empty bearer header is a missing token', async () => {
    assertMissingToken(await fx.client.proxy('/request', { headers: { authorization: '' } }));
  });

  it('CH07 a very long token is refused cleanly', async () => {
    assertInvalidToken(await fx.client.proxy('/request', { headers: { authorization: `bearer ${'a'.repeat(4000)}` } }));
  });
});

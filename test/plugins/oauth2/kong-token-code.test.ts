/**
 * Kong's authorization_code grant cases (reference §7.6, Host oauth2.test unless noted), with INTERFACE §4's RFC
 * corrections: bad/reused/foreign codes are `invalid_grant`, and a code is bound to its redirect_uri.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  assertNoCache,
  assertOAuthError,
  assertTokenResponse,
  basic,
  echoed,
  pkcePair,
  s256,
  kongFixtureAroundTests,
  type Fixture,
} from './kong-fixture.ts';

const fx = kongFixtureAroundTests();

const SECRET = { client_id: 'clientid123', client_secret: 'secret123' };
const GRANT = { grant_type: 'authorization_code' };
const PUBLIC = { client_id: 'clientid11211', ...GRANT };

/** RFC 6749 §5.2 via INTERFACE §4; Kong answers `invalid_request` "Invalid code" for these. */
function assertInvalidGrant(res: Awaited<ReturnType<Fixture['client']['token']>>, extra: Record<string, unknown> = {}) {
  assertOAuthError(res, 400, 'invalid_grant', undefined, extra);
}

const VERIFIER_LENGTH = 'code_verifier must be between 43 and 128 characters';
const VERIFIER_REQUIRED = 'code_verifier is required for PKCE authorization requests';

describe('Kong §7.6 token endpoint: authorization_code', () => {
  it('AC01 no body: invalid_client', async () => {
    const res = await fx.client.token(undefined);
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    assertNoCache(res);
  });

  it('AC02 code only', async () => {
    const code = await fx.client.provisionCode();
    const res = await fx.client.token({ code });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    assertNoCache(res);
  });

  it('AC03 code and secret, no client_id', async () => {
    const code = await fx.client.provisionCode();
    const res = await fx.client.token({ code, client_secret: 'secret123' });
    assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    assertNoCache(res);
  });

  it('AC04 no grant_type', async () => {
    const code = await fx.client.provisionCode();
    assertOAuthError(await fx.client.token({ code, ...SECRET }), 400, 'unsupported_grant_type', 'Invalid grant_type');
  });

  it('AC05 unknown code: invalid_grant', async () => {
    const code = await fx.client.provisionCode();
    assertInvalidGrant(await fx.client.token({ code: code + 'hello', ...SECRET, ...GRANT }));
  });

  it('AC06 a valid exchange', async () => {
    const code = await fx.client.provisionCode();
    assertTokenResponse(await fx.client.token({ code, ...SECRET, ...GRANT }), { refresh: true });
  });

  it('AC07 state is echoed', async () => {
    const code = await fx.client.provisionCode();
    assertTokenResponse(await fx.client.token({ code, ...SECRET, ...GRANT, state: 'wot' }), { refresh: true, state: 'wot' });
  });

  it("AC08 another client's code: invalid_grant, state echoed", async () => {
    const code = await fx.client.provisionCode({ clientId: 'clientid333' });
    assertInvalidGrant(await fx.client.token({ code, ...SECRET, ...GRANT, state: 'wot' }), { state: 'wot' });
  });

  it('AC09 the token reaches the upstream with the consumer headers', async () => {
    const issued = await fx.client.provisionToken();
    const headers = echoed(await fx.client.proxy(`/request?access_token=${issued.access_token}`)).headers;
    assert.equal(headers['x-consumer-username'], 'bob');
    assert.equal(headers['x-authenticated-scope'], 'email');
    assert.equal(headers['x-authenticated-userid'], 'userid123');
    assert.equal(headers['x-credential-identifier'], 'clientid123');
  });

  it('AC10 a code is single-use', async () => {
    const code = await fx.client.provisionCode();
    assertTokenResponse(await fx.client.token({ code, ...SECRET, ...GRANT }), { refresh: true });
    assertInvalidGrant(await fx.client.token({ code, ...SECRET, ...GRANT }));
  });

  it('AC11 a code redeemed by another client', async () => {
    const code = await fx.client.provisionCode();
    assertInvalidGrant(await fx.client.token({ code, client_id: 'clientid789', client_secret: 'secret789', ...GRANT }));
  });

  it('AC12 a code redeemed on another service', async () => {
    const code = await fx.client.provisionCode();
    assertInvalidGrant(await fx.client.token({ code, ...SECRET, ...GRANT }, { host: 'oauth2_3.test' }));
  });

  describe('PKCE', () => {
    async function publicCode(challenge: string, host = 'oauth2.test') {
      return fx.client.provisionCode({ clientId: 'clientid11211', challenge, host });
    }

    it('AC13 public client with a verifier', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await publicCode(challenge);
      assertTokenResponse(await fx.client.token({ code, ...PUBLIC, code_verifier: verifier }), { refresh: true });
    });

    for (const [id, header] of [
      ['AC14', 'Basic Y2xpZW50aWQxMTIxMQ=='],
      ['AC15', 'Basic Y2xpZW50aWQxMTIxMTo='],
      ['AC16', 'Basic Y2xpZW50aWQxMTIxMTogICAg'],
    ]) {
      it(`${id} public client id in a Basic header (${Buffer.from(header.slice(6), 'base64').toString()})`, async () => {
        const { verifier, challenge } = pkcePair();
        const code = await publicCode(challenge);
        const res = await fx.client.token({ code, ...GRANT, code_verifier: verifier }, { headers: { authorization: header } });
        assertTokenResponse(res, { refresh: true });
      });
    }

    it('AC17 a secret from a public client', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await publicCode(challenge);
      const res = await fx.client.token({ code, ...PUBLIC, client_secret: 'secret11211', code_verifier: verifier });
      assertOAuthError(res, 400, 'invalid_request', 'client_secret is disallowed for public clients');
    });

    it('AC18 a secret from a public client in a Basic header: still 400', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await publicCode(challenge);
      const res = await fx.client.token({ code, ...GRANT, code_verifier: verifier }, { headers: { authorization: 'Basic Y2xpZW50aWQxMTIxMTpzZWNyZXQxMTIxMQ==' } });
      assertOAuthError(res, 400, 'invalid_request', 'client_secret is disallowed for public clients');
    });

    it('AC19 no verifier for a code with a challenge', async () => {
      const code = await publicCode(pkcePair().challenge);
      assertOAuthError(await fx.client.token({ code, ...PUBLIC }), 400, 'invalid_request', VERIFIER_REQUIRED);
    });

    it('AC20 pkce none: confidential client without PKCE', async () => {
      const code = await fx.client.provisionCode({ host: 'oauth2_14.test' });
      assertTokenResponse(await fx.client.token({ code, ...SECRET, ...GRANT }, { host: 'oauth2_14.test' }), { refresh: true });
    });

    it('AC21 a padded base64url challenge is normalized', async () => {
      const code = await publicCode('2aC4cMSkAsMRtZbhHhiZkDW3sddRf_iTRGil1r9gi8w=');
      const res = await fx.client.token({ code, ...PUBLIC, code_verifier: 'abcdelfhigklmnopqrstuvwxyz0123456789abcdefg' });
      assertTokenResponse(res, { refresh: true });
    });

    it('AC22 a standard base64 challenge is normalized', async () => {
      const code = await publicCode('0LoS6Gtrw16r07+ZXsCf8MeAi21QHmKc3LJdUCA5w/o=');
      const res = await fx.client.token({ code, ...PUBLIC, code_verifier: 'abcdelfhigklmnopqrstuvwxyz0123456789abcdefghijklmnop9' });
      assertTokenResponse(res, { refresh: true });
    });

    it('AC23 a verifier longer than 128 characters', async () => {
      const verifier = 'abc123'.repeat(30);
      const code = await publicCode(s256(verifier));
      assertOAuthError(await fx.client.token({ code, ...PUBLIC, code_verifier: verifier }), 400, 'invalid_request', VERIFIER_LENGTH);
    });

    it('AC24 a verifier shorter than 43 characters', async () => {
      const code = await publicCode(s256('abc123'));
      assertOAuthError(await fx.client.token({ code, ...PUBLIC, code_verifier: 'abc123' }), 400, 'invalid_request', VERIFIER_LENGTH);
    });

    it('AC25 a challenge and no verifier', async () => {
      const code = await publicCode(s256('abc123'));
      assertOAuthError(await fx.client.token({ code, ...PUBLIC }), 400, 'invalid_request', VERIFIER_REQUIRED);
    });

    it('AC26 an empty verifier', async () => {
      const code = await publicCode('abc123');
      assertOAuthError(await fx.client.token({ code, ...PUBLIC, code_verifier: '' }), 400, 'invalid_request', VERIFIER_LENGTH);
    });

    it('AC27 a verifier that is not a string', async () => {
      const code = await publicCode('abc123');
      assertOAuthError(await fx.client.token({ code, ...PUBLIC, code_verifier: 12 }), 400, 'invalid_request', 'code_verifier is not a string');
    });

    it('AC28 a verifier that does not match', async () => {
      const code = await publicCode('abc123');
      const res = await fx.client.token({ code, ...PUBLIC, code_verifier: 'abcdelfhigklmnopqrstuvwxyz0123456789abcdefg' });
      assertOAuthError(res, 400, 'invalid_grant', 'Invalid code');
    });

    it('AC29 pkce strict: wrong verifier of a confidential client', async () => {
      const code = await fx.client.provisionCode({ host: 'oauth2_15.test', challenge: pkcePair().challenge });
      const res = await fx.client.token({ code, ...SECRET, ...GRANT, code_verifier: pkcePair().verifier }, { host: 'oauth2_15.test' });
      assertOAuthError(res, 400, 'invalid_grant', 'Invalid code');
    });

    it('AC30 unknown code with a right verifier: invalid_grant', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await publicCode(challenge);
      assertInvalidGrant(await fx.client.token({ code: code + 'hello', ...PUBLIC, code_verifier: verifier }));
    });

    it('AC31 no code at all: invalid_request (RFC 6749 §5.2: a missing parameter)', async () => {
      assertOAuthError(await fx.client.token({ ...PUBLIC, code_verifier: 'verifier' }), 400, 'invalid_request');
    });

    it('AC32 a confidential client without its secret', async () => {
      const code = await fx.client.provisionCode();
      assertOAuthError(await fx.client.token({ code, client_id: 'clientid123', ...GRANT }), 400, 'invalid_client', 'Invalid client authentication');
    });

    for (const [id, host, mode] of [
      ['AC33', 'oauth2_15.test', 'strict'],
      ['AC34', 'oauth2_16.test', 'lax'],
      ['AC35', 'oauth2_14.test', 'none'],
    ]) {
      it(`${id} pkce ${mode}: a confidential code with a challenge needs its verifier`, async () => {
        const code = await fx.client.provisionCode({ host, challenge: pkcePair().challenge });
        assertOAuthError(await fx.client.token({ code, ...SECRET, ...GRANT }, { host }), 400, 'invalid_request', VERIFIER_REQUIRED);
      });
    }

    for (const [id, host, mode] of [
      ['AC36', 'oauth2_14.test', 'none'],
      ['AC37', 'oauth2_16.test', 'lax'],
    ]) {
      it(`${id} pkce ${mode}: a confidential code without a challenge`, async () => {
        const code = await fx.client.provisionCode({ host });
        assertTokenResponse(await fx.client.token({ code, ...SECRET, ...GRANT }, { host }), { refresh: true });
      });
    }

    it('AC37b pkce strict: a confidential code with its verifier', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await fx.client.provisionCode({ host: 'oauth2_15.test', challenge });
      const res = await fx.client.token({ code, ...SECRET, ...GRANT, code_verifier: verifier }, { host: 'oauth2_15.test' });
      assertTokenResponse(res, { refresh: true });
    });
  });

  it('AC38 a global code of one plugin redeemed at another global plugin: invalid_grant', async () => {
    const code = await fx.client.provisionCode({ host: 'oauth2_16.test' });
    assertInvalidGrant(await fx.client.token({ code, ...SECRET, ...GRANT }, { host: 'oauth2_17.test' }));
  });

  it('AC39 a code without a plugin id (pre-3.3 rows)', { skip: 'needs a database edit; Tollgate has no pre-3.3 codes' }, () => {});

  it('AC40 PUT is not allowed', async () => {
    const res = await fx.client.token({}, { method: 'PUT' });
    assertOAuthError(res, 405, 'invalid_method', 'The HTTP method PUT is invalid for the token endpoint');
  });

  describe('redirect_uri binding (RFC 6749 §4.1.3, INTERFACE §4; Kong only checks the registered list)', () => {
    const C456 = { client_id: 'clientid456', client_secret: 'secret456', ...GRANT };

    it('AC41 a code issued for one redirect_uri, redeemed with another registered one', async () => {
      const code = await fx.client.provisionCode({ clientId: 'clientid456', redirectUri: 'http://two.test/two' });
      assertInvalidGrant(await fx.client.token({ code, ...C456, redirect_uri: 'http://one.test/one/' }));
    });

    it('AC42 a code issued for an explicit redirect_uri, redeemed without one', async () => {
      const code = await fx.client.provisionCode({ clientId: 'clientid456', redirectUri: 'http://two.test/two' });
      assertInvalidGrant(await fx.client.token({ code, ...C456 }));
    });

    it('AC43 the same redirect_uri redeems the code', async () => {
      const code = await fx.client.provisionCode({ clientId: 'clientid456', redirectUri: 'http://two.test/two' });
      assertTokenResponse(await fx.client.token({ code, ...C456, redirect_uri: 'http://two.test/two' }), { refresh: true });
    });

    it('AC44 an unregistered redirect_uri at the token endpoint (Kong)', async () => {
      const code = await fx.client.provisionCode();
      const res = await fx.client.token({ code, ...SECRET, ...GRANT, redirect_uri: 'http://evil.test/' });
      assertOAuthError(
        res,
        400,
        'invalid_request',
        'Invalid redirect_uri that does not match with any redirect_uri created with the application',
      );
    });
  });

  describe('malformed input is a clean 4xx (Kong #3205, #4728, #6311)', () => {
    it('AC48 a malformed JSON body', async () => {
      const res = await fx.client.send('/oauth2/token', { body: { raw: '{"grant_type": "authorization_code"', contentType: 'application/json' } });
      assert.equal(res.status, 400, res.text);
    });

    for (const clientId of [true, ['clientid123'], { a: 1 }]) {
      it(`AC49 client_id ${JSON.stringify(clientId)}`, async () => {
        const code = await fx.client.provisionCode();
        const res = await fx.client.token({ code, client_id: clientId, client_secret: 'secret123', ...GRANT });
        assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
      });
    }

    for (const code of [123, ['x'], { code: 'x' }, null]) {
      it(`AC50 code ${JSON.stringify(code)}`, async () => {
        const res = await fx.client.token({ code, ...SECRET, ...GRANT });
        assert.equal(res.status, 400, res.text);
        assert.ok(['invalid_request', 'invalid_grant'].includes(res.json().error), res.text);
      });
    }

    it('AC51 a client_secret that is not a string', async () => {
      const code = await fx.client.provisionCode();
      const res = await fx.client.token({ code, client_id: 'clientid123', client_secret: ['secret123'], ...GRANT });
      assertOAuthError(res, 400, 'invalid_client', 'Invalid client authentication');
    });

    it('AC52 a refresh_token that is not a string', async () => {
      const res = await fx.client.token({ ...SECRET, refresh_token: { token: 'x' }, grant_type: 'refresh_token' });
      assert.equal(res.status, 400, res.text);
      assert.ok(['invalid_request', 'invalid_grant'].includes(res.json().error), res.text);
    });

    it('AC53 an oversized body is refused', async () => {
      const res = await fx.client.send('/oauth2/token', { body: { form: { ...SECRET, ...GRANT, code: 'x'.repeat(20 * 1024 * 1024) } } });
      assert.ok(res.status === 413 || res.status === 400, `${res.status} ${res.text.slice(0, 200)}`);
    });
  });

  it('AC54 ten concurrent redemptions of one code: exactly one token (single use under concurrency)', async () => {
    const code = await fx.client.provisionCode();
    const results = await Promise.all(Array.from({ length: 10 }, () => fx.client.token({ code, ...SECRET, ...GRANT })));
    assert.equal(results.filter((r) => r.status === 200).length, 1);
    for (const r of results.filter((r) => r.status !== 200)) assertInvalidGrant(r);
  });

  it('AC46 a form-encoded exchange (RFC 6749 §4.1.3)', async () => {
    const code = await fx.client.provisionCode();
    const res = await fx.client.send('/oauth2/token', { body: { form: { code, ...SECRET, ...GRANT } } });
    assertTokenResponse(res, { refresh: true });
  });

  it('AC47 a confidential client in a Basic header (RFC 6749 §2.3.1)', async () => {
    const code = await fx.client.provisionCode();
    const res = await fx.client.token({ code, ...GRANT }, { headers: { authorization: basic('clientid123:secret123') } });
    assertTokenResponse(res, { refresh: true });
  });
});

/**
 * Wrong client secrets cannot buy unbounded hashing: after ten failed authentications of a client whose
 * secret is PBKDF2-hashed, further unknown secrets for it are refused at once (429, Retry-After) at the
 * token, introspection and revocation endpoints, while the secret that last verified keeps working.
 * Clients with plain secrets cost no hashing and are never locked. (The worker pool's bounded queue is
 * proven in impl-units.test.ts; the store latency under a flood is measured by `npm run bench -- oauth2`.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const MAX_FAILURES = 10;

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [
    {
      name: 'api',
      url: upstreamUrl,
      routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk' } }] }],
    },
  ],
  consumers: [
    {
      username: 'acme',
      oauth2_credentials: [
        { name: 'Hashed', client_id: 'hashed-app', client_secret: 'right-secret', hash_secret: true },
        { name: 'Hashed, never used', client_id: 'idle-app', client_secret: 'right-secret', hash_secret: true },
        { name: 'Hashed, introspecting', client_id: 'introspect-app', client_secret: 'right-secret', hash_secret: true },
        { name: 'Plain', client_id: 'plain-app', client_secret: 'right-secret' },
      ],
    },
  ],
}));

function post(endpoint: string, clientId: string, secret: string, extra: Record<string, string> = {}): Promise<Reply> {
  const body = new URLSearchParams({ client_id: clientId, client_secret: secret, ...extra }).toString();
  return request(`${fx.gw.https}/api/oauth2/${endpoint}`, { method: 'POST', headers: FORM, body });
}

const token = (clientId: string, secret: string) => post('token', clientId, secret, { grant_type: 'client_credentials' });

async function failTimes(clientId: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await token(clientId, `wrong-${i}`);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json().error, 'invalid_client');
  }
}

function assertLocked(res: Reply): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.json().error, 'temporarily_unavailable');
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${res.headers['retry-after']}`);
}

describe('failed authentications of a hashed-secret client', () => {
  it('after ten failures, other secrets are refused unchecked; the secret that verified before still works', async () => {
    assert.equal((await token('hashed-app', 'right-secret')).status, 200);
    await failTimes('hashed-app', MAX_FAILURES);
    assertLocked(await token('hashed-app', 'wrong-again'));
    const res = await token('hashed-app', 'right-secret');
    assert.equal(res.status, 200, res.text);
  });

  it('a client whose secret never verified in this process waits out the window like a guesser', async () => {
    await failTimes('idle-app', MAX_FAILURES);
    assertLocked(await token('idle-app', 'right-secret'));
  });

  it('introspection and revocation share the limit', async () => {
    const issued = (await token('introspect-app', 'right-secret')).json().access_token;
    await failTimes('introspect-app', MAX_FAILURES);
    assertLocked(await post('introspect', 'introspect-app', 'wrong', { token: issued }));
    assertLocked(await post('revoke', 'introspect-app', 'wrong', { token: issued }));
    const introspected = await post('introspect', 'introspect-app', 'right-secret', { token: issued });
    assert.equal(introspected.json().active, true, introspected.text);
  });

  it('a plain-secret client is never locked: it costs no hashing', async () => {
    await failTimes('plain-app', MAX_FAILURES + 5);
    assert.equal((await token('plain-app', 'right-secret')).status, 200);
  });
});

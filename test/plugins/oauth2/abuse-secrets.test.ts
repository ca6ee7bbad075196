/**
 * Wrong client secrets neither buy unbounded hashing nor lock a client's owner out (issue 28, item 3:
 * client ids are not secret). Ten failed checks of PBKDF2-hashed secrets from one client address, over
 * every client id, lock that address: its further checks are refused at once (429
 * `temporarily_unavailable`, Retry-After) at the token, introspection and revocation endpoints, while the
 * owner, from its own address, gets tokens. Each client is a loopback address of its own (127.0.0.x).
 * Clients with plain secrets cost no hashing and are never throttled. (The worker pool's bounded queue is
 * proven in impl-units.test.ts; the store latency under a flood is measured by `npm run bench -- oauth2`;
 * the far higher bound per credential and restarts are basic-auth/abuse-guessing.test.ts's, on the same
 * SecretVerifier; workers and nodes sharing PostgreSQL are cluster.test.ts's.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
/** Failed checks one client address may make in a minute, over every client id. */
const MAX_FAILURES = 10;
/** The owners' address: owners never fail, so nothing is counted against it. */
const OWNER = '127.0.0.1';

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
        ...[1, 2, 3].map((n) => ({ name: `Hashed ${n}`, client_id: `rotated-${n}`, client_secret: 'right-secret', hash_secret: true })),
        { name: 'Hashed, introspecting', client_id: 'introspect-app', client_secret: 'right-secret', hash_secret: true },
        { name: 'Plain', client_id: 'plain-app', client_secret: 'right-secret' },
      ],
    },
  ],
}));

/** A POST to an endpoint from `from`, a loopback address standing for one client. */
function post(endpoint: string, clientId: string, secret: string, extra: Record<string, string>, from: string): Promise<Reply> {
  const body = new URLSearchParams({ client_id: clientId, client_secret: secret, ...extra }).toString();
  return request(`${fx.gw.https}/api/oauth2/${endpoint}`, { method: 'POST', headers: FORM, body, localAddress: from });
}

const token = (clientId: string, secret: string, from: string) => post('token', clientId, secret, { grant_type: 'client_credentials' }, from);

async function failTimes(clientId: string, times: number, from: string): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await token(clientId, `wrong-${i}`, from);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json().error, 'invalid_client');
  }
}

function assertIssued(res: Reply): void {
  assert.equal(res.status, 200, res.text);
  assert.ok(res.json().access_token);
}

function assertLocked(res: Reply): void {
  assert.equal(res.status, 429, res.text);
  assert.equal(res.json().error, 'temporarily_unavailable');
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${res.headers['retry-after']}`);
}

describe('failed authentications of hashed-secret clients', () => {
  it('ten wrong secrets from one address lock that address, not the client: its owner gets tokens from its own', async () => {
    const attacker = '127.0.0.2';
    await failTimes('hashed-app', MAX_FAILURES, attacker);
    assertLocked(await token('hashed-app', 'wrong-again', attacker));
    // No process has checked this secret yet (client ids are public, the lock was not the owner's to take).
    for (let i = 0; i < 3; i++) assertIssued(await token('hashed-app', 'right-secret', OWNER));
  });

  it('an attacker rotating through client ids locks its own address after ten failures in all; every owner gets tokens', async () => {
    const clients = ['rotated-1', 'rotated-2', 'rotated-3'];
    const statuses: number[] = [];
    for (let round = 0; round < 11; round++) for (const client of clients) statuses.push((await token(client, `wrong-${round}`, '127.0.0.3')).status);
    assert.deepEqual(statuses, [...Array(MAX_FAILURES).fill(400), ...Array(11 * clients.length - MAX_FAILURES).fill(429)]);
    for (const client of clients) assertIssued(await token(client, 'right-secret', OWNER));
  });

  it('introspection and revocation count failures and refuse a locked address as the token endpoint does', async () => {
    const attacker = '127.0.0.4';
    const issued = (await token('introspect-app', 'right-secret', OWNER)).json().access_token;
    for (let i = 0; i < MAX_FAILURES; i++) assert.equal((await post('introspect', 'introspect-app', `wrong-${i}`, { token: issued }, attacker)).status, 401);
    assertLocked(await token('introspect-app', 'wrong-again', attacker));
    assertLocked(await post('revoke', 'introspect-app', 'wrong', { token: issued }, attacker));
    const introspected = await post('introspect', 'introspect-app', 'right-secret', { token: issued }, OWNER);
    assert.equal(introspected.json().active, true, introspected.text);
  });

  it('a plain-secret client costs no hashing and is never throttled', async () => {
    await failTimes('plain-app', MAX_FAILURES + 5, '127.0.0.5');
    assertIssued(await token('plain-app', 'right-secret', '127.0.0.5'));
  });
});

/**
 * The oauth2 plugin on gateway nodes sharing one PostgreSQL (a throwaway cluster, a schema per test):
 * a token issued by one node is accepted by another at once; an admin deletion, an RFC 7009 revocation, a
 * credential's or a consumer's deletion on one node are refused on another within db_update_frequency;
 * an authorization code and a refresh token are redeemed once whichever nodes are asked at once; a client
 * created on one node works on another; and a token created with a chosen value through the admin API
 * becomes valid on a node that had looked it up (and found nothing) before. And the worker processes of
 * one node on LevelDB (the primary owns the store): a token deleted through one worker is refused by all
 * as soon as the admin API answers. Guessed secrets of a hashed client: ten failures from one address lock
 * that address whichever worker or node checks them, and the client's owner, from another address, gets
 * tokens from every worker and node (issue 28, item 3).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, type Reply, type SpawnedGateway, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { waitFor } from '../../helpers/support.ts';

const skip = postgresSkipReason();

const PROVISION_KEY = 'cluster-provision-key';
const REDIRECT_URI = 'https://app.test/cb';
const CLIENT = { client_id: 'app', client_secret: 'app-secret' };
const HASHED_CLIENT = { client_id: 'hashed-app', client_secret: 'right-secret' };
/** Failed checks one client address may make in a minute. */
const MAX_FAILURES = 10;
/** The owner's address, and a guesser's: loopback addresses of their own, seen by the gateway as peers. */
const OWNER = '127.0.0.2';
const GUESSER = '127.0.0.3';
/** Notices reach every node within db_update_frequency (0.2 s here); waits allow for a loaded machine. */
const WINDOW_MS = 5000;

/** One route protected by oauth2, and the client `app` of consumer alice. */
const oauth2Config = (upstream: Upstream, gateway: Record<string, unknown>, oauth2: Record<string, unknown> = {}) => ({
  gateway,
  services: [{ name: 'api', url: upstream.url, routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: { ...OAUTH2, ...oauth2 } }] }] }],
  consumers: [
    {
      username: 'alice',
      oauth2_credentials: [
        { name: 'App', ...CLIENT, redirect_uris: [REDIRECT_URI] },
        { name: 'Hashed', ...HASHED_CLIENT, hash_secret: true, redirect_uris: [REDIRECT_URI] },
      ],
    },
  ],
});

/** A client_credentials request for the hashed client with `secret`, from the loopback address `from`. */
function hashedClientToken(gw: { https: string }, secret: string, from: string): Promise<Reply> {
  const body = new URLSearchParams({ client_id: HASHED_CLIENT.client_id, client_secret: secret, grant_type: 'client_credentials' }).toString();
  return request(gw.https + '/api/oauth2/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body, localAddress: from });
}

const OAUTH2 = {
  scopes: ['read'],
  enable_authorization_code: true,
  enable_client_credentials: true,
  enable_password_grant: true,
  provision_key: PROVISION_KEY,
  token_expiration: 3600,
};

describe('oauth2 on nodes sharing one PostgreSQL', { skip }, () => {
  const suite = postgresForSuite();
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  /** `count` nodes on a fresh schema, one after the other (each migrates under the lock on start). */
  const nodes = async (count: number, oauth2: Record<string, unknown> = {}): Promise<TestGateway[]> => {
    const config = oauth2Config(upstream, suite.pg.settings({ pg_schema: suite.schema('oauth2'), db_update_frequency: 0.2 }), oauth2);
    const started: TestGateway[] = [];
    for (let i = 0; i < count; i++) started.push(await startGateway(config));
    for (const gw of started) suite.track(() => gw.stop());
    return started;
  };

  const form = (url: string, params: Record<string, string>) =>
    request(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });
  const tokenRequest = (gw: TestGateway, params: Record<string, string>) => form(gw.https + '/api/oauth2/token', { ...CLIENT, ...params });
  /** The status of a protected request carrying `token`. */
  const use = async (gw: TestGateway, token: string) => (await request(gw.http + '/api/hello', { headers: { authorization: `Bearer ${token}` } })).status;
  const granted = (reply: Reply) => {
    assert.equal(reply.status, 200, reply.text);
    return reply.json() as { access_token: string; refresh_token?: string };
  };
  const clientCredentials = async (gw: TestGateway) => granted(await tokenRequest(gw, { grant_type: 'client_credentials', scope: 'read' })).access_token;
  const passwordGrant = async (gw: TestGateway) =>
    granted(await tokenRequest(gw, { grant_type: 'password', provision_key: PROVISION_KEY, authenticated_userid: 'u-1', scope: 'read' }));
  const authorizationCode = async (gw: TestGateway) => {
    const reply = await form(gw.https + '/api/oauth2/authorize', {
      client_id: CLIENT.client_id,
      response_type: 'code',
      provision_key: PROVISION_KEY,
      authenticated_userid: 'u-1',
      scope: 'read',
    });
    assert.equal(reply.status, 200, reply.text);
    return new URL(reply.json().redirect_uri).searchParams.get('code')!;
  };
  /** Requests spread over the nodes in turn, all at once. */
  const spread = (gws: TestGateway[], count: number, send: (gw: TestGateway) => Promise<Reply>) =>
    Promise.all(Array.from({ length: count }, (_, i) => send(gws[i % gws.length])));

  test('a token issued by one node is accepted by the others at once', async () => {
    const [a, b, c] = await nodes(3);
    const token = await clientCredentials(a);
    assert.equal(await use(b, token), 200);
    assert.equal(await use(c, token), 200);
  });

  test("a token deleted through one node's admin API is refused by another that had it cached", async () => {
    const [a, b] = await nodes(2);
    const token = await clientCredentials(a);
    assert.equal(await use(b, token), 200, 'B caches the token');
    const { id } = (await request(a.admin + '/oauth2_tokens/' + token)).json();
    assert.equal((await request(a.admin + '/oauth2_tokens/' + id, { method: 'DELETE' })).status, 204);
    assert.equal(await use(a, token), 401);
    await waitFor(async () => (await use(b, token)) === 401, 'B to refuse the deleted token', WINDOW_MS);
  });

  test('a token revoked (RFC 7009) at one node is refused by another that had it cached', async () => {
    const [a, b] = await nodes(2);
    const token = await clientCredentials(a);
    assert.equal(await use(b, token), 200, 'B caches the token');
    const revoked = await form(a.https + '/api/oauth2/revoke', { ...CLIENT, token });
    assert.equal(revoked.status, 200, revoked.text);
    await waitFor(async () => (await use(b, token)) === 401, 'B to refuse the revoked token', WINDOW_MS);
  });

  test('50 concurrent redemptions of one authorization code spread over three nodes: exactly one gets a token', async () => {
    const gws = await nodes(3);
    const code = await authorizationCode(gws[0]);
    const replies = await spread(gws, 50, (gw) => tokenRequest(gw, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI }));
    assert.deepEqual(replies.filter((r) => r.status !== 200).map((r) => r.json().error), Array(49).fill('invalid_grant'));
    const [winner] = replies.filter((r) => r.status === 200);
    assert.equal(await use(gws[1], winner.json().access_token), 200);
  });

  test('concurrent redemptions of one refresh token spread over nodes: exactly one succeeds', async () => {
    const gws = await nodes(3);
    for (let round = 0; round < 3; round++) {
      const { refresh_token } = await passwordGrant(gws[round]);
      const replies = await spread(gws, 12, (gw) => tokenRequest(gw, { grant_type: 'refresh_token', refresh_token: refresh_token! }));
      assert.deepEqual(replies.map((r) => r.status).sort(), [200, ...Array(11).fill(400)], `round ${round}`);
      assert.ok(replies.every((r) => r.status === 200 || r.json().error === 'invalid_grant'));
    }
  });

  // The refresh token stays good, so redemptions one after the other all succeed; each renews the version
  // the previous one left, so of the access tokens handed out only the last is valid.
  test('with reuse_refresh_token, concurrent redemptions over nodes renew one after the other: one access token stays valid', async () => {
    const gws = await nodes(3, { reuse_refresh_token: true });
    const { access_token: first, refresh_token } = await passwordGrant(gws[0]);
    assert.equal(await use(gws[1], first), 200, 'node B caches the first access token');
    const replies = await spread(gws, 12, (gw) => tokenRequest(gw, { grant_type: 'refresh_token', refresh_token: refresh_token! }));
    const renewals = replies.filter((r) => r.status === 200).map((r) => r.json());
    assert.ok(renewals.length >= 1);
    assert.ok(replies.every((r) => r.status === 200 || r.json().error === 'invalid_grant'));
    assert.ok(renewals.every((r) => r.refresh_token === refresh_token));
    const handedOut = [first, ...renewals.map((r) => r.access_token)];
    // A node that served one of them may still have it cached until the renewal's notice arrives.
    const valid = async (gw: TestGateway) => (await Promise.all(handedOut.map((t) => use(gw, t)))).filter((s) => s === 200).length;
    for (const gw of gws) await waitFor(async () => (await valid(gw)) === 1, 'one valid access token on every node', WINDOW_MS);
  });

  test('a client created on one node gets tokens from another; deleted, its tokens and itself are refused there', async () => {
    const [a, b] = await nodes(2);
    const created = await request(a.admin + '/consumers/alice/oauth2', { method: 'POST', body: { name: 'New', client_id: 'new-app', client_secret: 'new-secret' } });
    assert.equal(created.status, 201, created.text);
    const newClient = { client_id: 'new-app', client_secret: 'new-secret', grant_type: 'client_credentials', scope: 'read' };
    let token = '';
    await waitFor(async () => {
      const reply = await form(b.https + '/api/oauth2/token', newClient);
      if (reply.status === 200) token = reply.json().access_token;
      return reply.status === 200;
    }, 'B to know the new client', WINDOW_MS);
    assert.equal(await use(b, token), 200);
    assert.equal((await request(a.admin + '/oauth2/new-app', { method: 'DELETE' })).status, 204);
    await waitFor(async () => (await use(b, token)) === 401, "B to refuse the deleted client's token", WINDOW_MS);
    assert.equal((await form(b.https + '/api/oauth2/token', newClient)).status, 400, 'B refuses the deleted client');
  });

  test("a consumer deleted on one node: another refuses its tokens", async () => {
    const [a, b] = await nodes(2);
    const consumer = await request(a.admin + '/consumers', { method: 'POST', body: { username: 'bob' } });
    assert.equal(consumer.status, 201, consumer.text);
    const client = { client_id: 'bob-app', client_secret: 'bob-secret' };
    assert.equal((await request(a.admin + '/consumers/bob/oauth2', { method: 'POST', body: { name: 'Bob', ...client } })).status, 201);
    const token = granted(await form(a.https + '/api/oauth2/token', { ...client, grant_type: 'client_credentials', scope: 'read' })).access_token;
    await waitFor(async () => (await use(b, token)) === 200, "B to accept bob's token", WINDOW_MS);
    assert.equal((await request(a.admin + '/consumers/bob', { method: 'DELETE' })).status, 204);
    await waitFor(async () => (await use(b, token)) === 401, "B to refuse the deleted consumer's token", WINDOW_MS);
  });

  test('wrong secrets of a hashed client through one node lock that address on the other; the owner gets tokens from both', async () => {
    const [a, b] = await nodes(2);
    const statuses: number[] = [];
    for (let i = 0; i < MAX_FAILURES; i++) statuses.push((await hashedClientToken(a, `wrong-${i}`, GUESSER)).status);
    assert.deepEqual(statuses, Array(MAX_FAILURES).fill(400));
    assert.equal((await hashedClientToken(b, 'wrong-again', GUESSER)).status, 429);
    for (const gw of [b, a]) {
      const issued = await hashedClientToken(gw, HASHED_CLIENT.client_secret, OWNER);
      assert.equal(issued.status, 200, issued.text);
    }
  });

  test('a token created with a chosen value on one node becomes valid on another that had found it missing', async () => {
    const [a, b] = await nodes(2);
    const chosen = 'chosen-token-value-1234567890';
    assert.equal(await use(b, chosen), 401, 'B looks the value up and finds nothing');
    const { id: credential } = (await request(a.admin + '/oauth2/app')).json();
    const { id: service } = (await request(a.admin + '/services/api')).json();
    const body = { credential: { id: credential }, service: { id: service }, access_token: chosen, expires_in: 3600, scope: 'read' };
    const created = await request(a.admin + '/oauth2_tokens', { method: 'POST', body });
    assert.equal(created.status, 201, created.text);
    await waitFor(async () => (await use(b, chosen)) === 200, 'B to accept the created token', WINDOW_MS);
  });
});

/**
 * Each worker's (pid's) latest status for `path` in the access log, from the `from`-th line of the output on;
 * only for requests from `clientIp` when given.
 */
function latestStatuses(gw: SpawnedGateway, path: string, from = 0, clientIp?: string): Map<number, number> {
  const latest = new Map<number, number>();
  for (const line of gw.output().split('\n').slice(from)) {
    if (!line.includes('"type":"access"')) continue;
    const entry = JSON.parse(line);
    if (entry.path === path && (clientIp === undefined || entry.client_ip === clientIp)) latest.set(entry.pid, entry.status);
  }
  return latest;
}

test('worker processes on LevelDB: a token deleted through one worker is refused by every worker; failed secrets lock an address for the node', async () => {
  const upstream = await startUpstream();
  // log_level info: spawnGateway learns the listeners from the log, and the access log names the worker.
  const config = oauth2Config(upstream, { worker_processes: 2, db_update_frequency: 0.2, log_level: 'info' });
  const gw = await spawnGateway(config);
  try {
    const issued = await request(gw.https + '/api/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...CLIENT, grant_type: 'client_credentials', scope: 'read' }).toString(),
    });
    assert.equal(issued.status, 200, issued.text);
    const token = issued.json().access_token;
    // Each request opens its own connection, which either worker may take from the shared socket.
    const useFromEveryWorker = () => Promise.all([1, 2, 3, 4].map(() => request(gw.http + '/api/hello', { headers: { authorization: `Bearer ${token}` } })));
    const workersAnswering = (status: number, from = 0) => async () => {
      await useFromEveryWorker();
      const latest = latestStatuses(gw, '/api/hello', from);
      return latest.size === 2 && [...latest.values()].every((s) => s === status);
    };
    await waitFor(workersAnswering(200), 'both workers to accept (and cache) the token', WINDOW_MS);
    const mark = gw.output().split('\n').length - 1;
    assert.equal((await request(gw.admin + '/oauth2_tokens/' + token, { method: 'DELETE' })).status, 204);
    // Answered once every worker dropped it: refused at once, whichever worker answers.
    assert.deepEqual((await useFromEveryWorker()).map((r) => r.status), [401, 401, 401, 401]);
    // The kernel hands each connection to either worker: four may all reach one, so ask again until both answered.
    await waitFor(workersAnswering(401, mark), 'both workers to have refused it (their access log lines)', WINDOW_MS);

    // Wrong secrets of a hashed client: ten failures from one address for the whole node, whichever worker checks them.
    const statuses: number[] = [];
    for (let i = 0; i < MAX_FAILURES + 4; i++) statuses.push((await hashedClientToken(gw, `wrong-${i}`, GUESSER)).status);
    assert.deepEqual(statuses, [...Array(MAX_FAILURES).fill(400), ...Array(4).fill(429)], 'locked after ten failures over both workers');
    await waitFor(() => latestStatuses(gw, '/api/oauth2/token', 0, GUESSER).size === 2, 'both workers to have checked secrets (their access log lines)', WINDOW_MS);
    // The owner, whose secret neither worker has checked yet, gets tokens from both.
    const ownerServedByBoth = async () => {
      const issued = await hashedClientToken(gw, HASHED_CLIENT.client_secret, OWNER);
      assert.equal(issued.status, 200, issued.text);
      return latestStatuses(gw, '/api/oauth2/token', 0, OWNER).size === 2;
    };
    await waitFor(ownerServedByBoth, 'both workers to have issued the owner a token', WINDOW_MS);
  } finally {
    gw.kill('SIGTERM');
    await gw.exited;
    await upstream.close();
  }
});

/**
 * The authentication and traffic plugins on several nodes sharing one PostgreSQL (a throwaway cluster,
 * two in-process gateway nodes per test on a schema of their own), and on one node of two worker
 * processes (LevelDB owned by the primary): a key-auth credential created on one node is accepted on the
 * other and, once deleted, refused there; one key asked of both nodes at once is created once; two PATCHes
 * of one credential racing on both nodes leave one key in force and the other free; a basic-auth password
 * changed on one node applies on the other; an acl group added on one node applies on the other;
 * rate-limiting's `cluster` policy admits exactly its limit of requests spread over both nodes at once,
 * and `local` exactly its limit over a node's workers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';
import { waitFor } from '../../helpers/support.ts';

const LIMIT = 10;
/** Notices reach the other node within db_update_frequency (0.2 s here); one second is the promise. */
const PROPAGATION_MS = 2000;

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

const routes = () => [
  {
    name: 'echo',
    url: upstream.url,
    routes: [
      { name: 'key', paths: ['/key'], plugins: [{ name: 'key-auth' }] },
      { name: 'basic', paths: ['/basic'], plugins: [{ name: 'basic-auth' }] },
      { name: 'gold', paths: ['/gold'], plugins: [{ name: 'key-auth' }, { name: 'acl', config: { allow: ['gold'] } }] },
      { name: 'limited', paths: ['/limited'], plugins: [{ name: 'rate-limiting', config: { hour: LIMIT, limit_by: 'ip', policy: 'cluster' } }] },
      { name: 'local', paths: ['/local'], plugins: [{ name: 'rate-limiting', config: { hour: LIMIT, limit_by: 'ip', policy: 'local' } }] },
    ],
  },
];

const withKey = (gw: { http: string }, path: string, key: string) => request(`${gw.http}${path}/x`, { headers: { apikey: key } });
const withBasic = (gw: { http: string }, user: string, password: string) =>
  request(`${gw.http}/basic/x`, { headers: { authorization: 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64') } });
const post = (gw: { admin: string }, path: string, body: Record<string, unknown>) => request(gw.admin + path, { method: 'POST', body });
const statuses = (replies: Reply[]) => replies.map((r) => r.status).sort();
const hourNow = () => Math.floor(Date.now() / 3_600_000);

/** `count` requests at once, each on its own connection, taking turns over `gateways`. */
function burst(gateways: { http: string }[], path: string, count: number): Promise<Reply[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => request(`${gateways[i % gateways.length].http}${path}/x`)));
}

describe('authentication and traffic plugins on two nodes of one PostgreSQL', { skip: postgresSkipReason() }, () => {
  let pg: ThrowawayPostgres;
  const gateways: TestGateway[] = [];
  let schemas = 0;

  before(async () => {
    pg = await startPostgres();
  });
  after(async () => {
    for (const g of gateways) await g.stop().catch(() => undefined);
    await pg.stop();
  });

  /** Two nodes on a fresh schema, and a consumer created on the first that the second knows too. */
  const nodes = async (username = 'alice') => {
    const config = { gateway: pg.settings({ pg_schema: `traffic_${++schemas}`, db_update_frequency: 0.2 }), services: routes() };
    const a = await startGateway(config);
    gateways.push(a);
    const b = await startGateway(config);
    gateways.push(b);
    assert.equal((await post(a, '/consumers', { username })).status, 201);
    await waitFor(async () => (await request(`${b.admin}/consumers/${username}`)).status === 200, 'node B to know the consumer', PROPAGATION_MS);
    return [a, b];
  };

  test('a key-auth credential created on A is accepted on B; deleted on A, it is refused on B', async () => {
    const [a, b] = await nodes();
    const created = await post(a, '/consumers/alice/key-auth', { key: 'alice-key' });
    assert.equal(created.status, 201);
    await waitFor(async () => (await withKey(b, '/key', 'alice-key')).status === 200, 'node B to accept the key', PROPAGATION_MS);
    assert.equal((await request(`${a.admin}/consumers/alice/key-auth/${created.json().id}`, { method: 'DELETE' })).status, 204);
    assert.equal((await withKey(a, '/key', 'alice-key')).status, 401, 'refused at once where it was deleted');
    await waitFor(async () => (await withKey(b, '/key', 'alice-key')).status === 401, 'node B to refuse the key', PROPAGATION_MS);
  });

  test('one key asked of both nodes at once is created once', async () => {
    const [a, b] = await nodes();
    for (let round = 0; round < 5; round++) {
      const body = { key: `racing-key-${round}` };
      const replies = await Promise.all([a, b, a, b].map((g) => post(g, '/consumers/alice/key-auth', body)));
      assert.deepEqual(statuses(replies), [201, 409, 409, 409], `round ${round}`);
    }
  });

  test('two PATCHes of one credential racing on both nodes leave one key in force, and the other key free', async () => {
    const [a, b] = await nodes();
    for (let round = 0; round < 3; round++) {
      const created = await post(a, '/consumers/alice/key-auth', { key: `before-${round}` });
      const id = created.json().id;
      await waitFor(async () => (await withKey(b, '/key', `before-${round}`)).status === 200, 'node B to accept the key', PROPAGATION_MS);
      const [fromA, fromB] = [`from-a-${round}`, `from-b-${round}`];
      const patched = await Promise.all([
        request(`${a.admin}/consumers/alice/key-auth/${id}`, { method: 'PATCH', body: { key: fromA } }),
        request(`${b.admin}/consumers/alice/key-auth/${id}`, { method: 'PATCH', body: { key: fromB } }),
      ]);
      assert.deepEqual(patched.map((r) => r.status), [200, 200], `round ${round}: both updates applied, one after the other`);
      // Both nodes settle on the key of the update that came last; the other key and the first are free.
      let winner = '';
      await waitFor(
        async () => {
          const accepted = await Promise.all([a, b].map(async (g) => [(await withKey(g, '/key', fromA)).status, (await withKey(g, '/key', fromB)).status]));
          const agreed = accepted.every(([sa, sb]) => sa !== sb) && accepted[0][0] === accepted[1][0];
          winner = accepted[0][0] === 200 ? fromA : fromB;
          return agreed;
        },
        'both nodes to accept the same one key',
        PROPAGATION_MS,
      );
      const loser = winner === fromA ? fromB : fromA;
      assert.equal((await post(a, '/consumers/alice/key-auth', { key: loser })).status, 201, `round ${round}: the overwritten key is free`);
      assert.equal((await post(b, '/consumers/alice/key-auth', { key: `before-${round}` })).status, 201, `round ${round}: the first key is free`);
      assert.equal((await post(b, '/consumers/alice/key-auth', { key: winner })).status, 409, `round ${round}: the key in force is taken`);
    }
  });

  test('a basic-auth password changed on A applies on B', async () => {
    const [a, b] = await nodes();
    const created = await post(a, '/consumers/alice/basic-auth', { username: 'alice', password: 'old-password' });
    assert.equal(created.status, 201);
    await waitFor(async () => (await withBasic(b, 'alice', 'old-password')).status === 200, 'node B to accept the password', PROPAGATION_MS);
    const changed = await request(`${a.admin}/consumers/alice/basic-auth/${created.json().id}`, { method: 'PATCH', body: { password: 'new-password' } });
    assert.equal(changed.status, 200);
    await waitFor(async () => (await withBasic(b, 'alice', 'new-password')).status === 200, 'node B to accept the new password', PROPAGATION_MS);
    assert.equal((await withBasic(b, 'alice', 'old-password')).status, 401, 'the old password, remembered by B, is refused');
  });

  test('an acl group added on A applies on B, and its removal too', async () => {
    const [a, b] = await nodes();
    assert.equal((await post(a, '/consumers/alice/key-auth', { key: 'alice-key' })).status, 201);
    await waitFor(async () => (await withKey(b, '/gold', 'alice-key')).status === 403, 'node B to know the key (no group yet)', PROPAGATION_MS);
    const group = await post(a, '/consumers/alice/acls', { group: 'gold' });
    assert.equal(group.status, 201);
    await waitFor(async () => (await withKey(b, '/gold', 'alice-key')).status === 200, 'node B to let the gold group in', PROPAGATION_MS);
    assert.equal((await request(`${a.admin}/consumers/alice/acls/gold`, { method: 'DELETE' })).status, 204);
    await waitFor(async () => (await withKey(b, '/gold', 'alice-key')).status === 403, 'node B to forget the group', PROPAGATION_MS);
  });

  test(`rate-limiting cluster: ${2 * LIMIT} requests at once over both nodes, exactly ${LIMIT} admitted`, async () => {
    const [a, b] = await nodes();
    const hour = hourNow();
    const replies = await burst([a, b], '/limited', 2 * LIMIT);
    if (hourNow() !== hour) return; // the hour turned during the burst: the counts restarted by design
    assert.deepEqual(statuses(replies), [...Array(LIMIT).fill(200), ...Array(LIMIT).fill(429)]);
    const remaining = replies.filter((r) => r.status === 200).map((r) => Number(r.headers['x-ratelimit-remaining-hour']));
    assert.deepEqual(remaining.sort((x, y) => x - y), Array.from({ length: LIMIT }, (_, i) => i), 'each admitted request saw its own place in the count');
    assert.equal((await request(`${a.http}/limited/x`)).status, 429, 'the limit holds afterwards on A');
    assert.equal((await request(`${b.http}/limited/x`)).status, 429, 'and on B');
  });
});

describe('rate-limiting local on a node of two worker processes (LevelDB)', () => {
  test(`the limit holds across the workers: ${4 * LIMIT} requests at once, exactly ${LIMIT} admitted`, async () => {
    const gw = await spawnGateway({ gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', worker_processes: 2 }, services: routes() });
    try {
      await waitFor(async () => (await request(gw.admin + '/')).json().pids.workers.length === 2, 'both workers to be listed');
      const hour = hourNow();
      const replies = await burst([gw], '/local', 4 * LIMIT);
      if (hourNow() !== hour) return;
      assert.deepEqual(statuses(replies), [...Array(LIMIT).fill(200), ...Array(3 * LIMIT).fill(429)]);
      // The kernel hands connections to the workers (SCHED_NONE), and may give one worker a whole burst.
      // Asked again until both have answered, every request is refused: each counting alone, a worker
      // that served none of the burst would admit LIMIT more.
      const servedBy = () => new Set(gw.output().split('\n').filter((l) => l.includes('"type":"access"') && l.includes('/local/x')).map((l) => JSON.parse(l).pid));
      for (let round = 0; round < 50 && servedBy().size < 2; round++) {
        if (hourNow() !== hour) return;
        assert.deepEqual(statuses(await burst([gw], '/local', 4)), Array(4).fill(429));
      }
      await waitFor(() => servedBy().size === 2, 'both workers to have answered (their access log lines)');
    } finally {
      gw.kill('SIGKILL');
    }
  });
});

/**
 * A node of several worker processes (real processes, `worker_processes: 2`): one set of listener
 * lines, one node_id, every worker serving; runtime consumers, credentials and acl groups applied by
 * every worker before the admin API answers; a worker killed
 * with SIGKILL under load is replaced while the other serves every request sent meanwhile; SIGHUP
 * reloads every worker; SIGTERM stops the whole node with exit 0; a killed primary takes its workers
 * with it. With LevelDB (the primary owns the
 * database) and with PostgreSQL (every worker a client).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { isAlive, request, spawnGateway, startUpstream, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';
import { servedByBoth, servingPids, waitFor } from '../../helpers/support.ts';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

/** Routes for `paths`, and /keyed (key-auth) and /club (key-auth, acl group club) for admin changes. */
const services = (...paths: string[]) => [
  {
    name: 'echo',
    url: upstream.url,
    routes: [
      ...paths.map((p) => ({ name: p.slice(1), paths: [p] })),
      { name: 'keyed', paths: ['/keyed'], plugins: [{ name: 'key-auth' }] },
      { name: 'club', paths: ['/club'], plugins: [{ name: 'key-auth' }, { name: 'acl', config: { allow: ['club'] } }] },
    ],
  },
];

const nodeInfo = async (gw: SpawnedGateway) => (await request(gw.admin + '/')).json();

/**
 * Four clients send requests without pause (a new connection each) while the first of `workers` is
 * killed with SIGKILL. Requests it held may fail; every request sent once it is gone must succeed,
 * served by the other worker until the replacement listens. Returns the replacement's pid.
 */
async function killWorkerUnderLoad(gw: SpawnedGateway, workers: number[]): Promise<number> {
  const victim = workers[0];
  let victimGone = false;
  let loading = true;
  let servedSinceKill = 0;
  const failedSinceKill: string[] = [];
  const client = async () => {
    while (loading) {
      const sentAfterKill = victimGone;
      const outcome = await request(gw.http + '/one/load').then((r) => (r.status === 200 ? 'ok' : `status ${r.status}`), (err: Error) => err.message);
      if (!sentAfterKill) continue;
      if (outcome === 'ok') servedSinceKill++;
      else failedSinceKill.push(outcome);
    }
  };
  const load = Promise.all([1, 2, 3, 4].map(client));
  try {
    await waitFor(() => servingPids(gw, '/one/load').size === 2, 'both workers to serve the load', 10_000);
    process.kill(victim, 'SIGKILL');
    await waitFor(() => !isAlive(victim), 'the killed worker to be gone');
    victimGone = true;
    const before = servedSinceKill;
    await waitFor(() => servedSinceKill > before + 20, 'requests served after the kill', 10_000);
    let now: number[] = [];
    await waitFor(async () => {
      now = (await nodeInfo(gw)).pids.workers;
      return now.length === 2 && !now.includes(victim);
    }, 'a replacement worker', 20_000);
    const after = servedSinceKill;
    await waitFor(() => servedSinceKill > after + 20, 'requests served with the replacement', 10_000);
    loading = false;
    await load;
    assert.deepEqual(failedSinceKill, [], 'no request sent after the kill fails');
    return now.find((pid) => !workers.includes(pid))!;
  } finally {
    loading = false;
    await load;
  }
}

/** Both workers serve, share the store and go on serving when one of them dies; then SIGHUP and SIGTERM act on all. */
async function exerciseNode(gw: SpawnedGateway, settings: Record<string, unknown>): Promise<void> {
  assert.equal(gw.output().match(/admin listening on/g)?.length, 1, 'the listeners are printed once for the node');
  assert.doesNotMatch(gw.output(), /aggregates the events/, 'a node that meters nothing elects no metering aggregator');
  await waitFor(async () => (await nodeInfo(gw)).pids.workers.length === 2, 'both workers to be listed');
  const info = await nodeInfo(gw);
  assert.equal(info.pids.master, gw.child.pid);
  const workers: number[] = info.pids.workers;
  for (let i = 0; i < 4; i++) assert.equal((await nodeInfo(gw)).node_id, info.node_id, 'one node id whichever worker answers');

  await servedByBoth(gw, '/one/x');

  assert.equal((await request(gw.admin + '/consumers', { method: 'POST', body: { username: 'shared' } })).status, 201);
  const everyWorkerKnows = async () => (await Promise.all([1, 2, 3, 4].map(() => request(gw.admin + '/consumers/shared')))).every((r) => r.status === 200);
  assert.ok(await everyWorkerKnows(), 'every worker knows the consumer once the admin API answered');
  for (let i = 0; i < 4; i++) assert.equal((await request(gw.admin + '/consumers', { method: 'POST', body: { username: 'shared' } })).status, 409);
  await adminChangesApplyAtOnce(gw);

  // A worker killed outright under load: the other keeps serving and a new one takes its place.
  const replacement = await killWorkerUnderLoad(gw, workers);
  await waitFor(() => servingPids(gw, '/one/load').has(replacement), 'the replacement to serve', 10_000);
  assert.ok(await everyWorkerKnows(), 'the replacement loaded the consumers');

  // SIGHUP: every worker switches to the new file.
  assert.equal((await request(gw.http + '/two/x')).status, 404);
  writeFileSync(gw.configFile, stringify({ _format_version: '3.0', services: services('/one', '/two'), gateway: settings }));
  gw.kill('SIGHUP');
  // The primary's own line, once every worker has answered (each worker also logs its own).
  await waitFor(() => /"msg":"configuration reloaded on every worker"/.test(gw.output()), 'the reload', 10_000);
  await servedByBoth(gw, '/two/x');

  const current: number[] = (await nodeInfo(gw)).pids.workers;
  gw.kill('SIGTERM');
  assert.equal(await gw.exited, 0);
  assert.ok(current.every((pid) => !isAlive(pid)), 'no worker outlives the node');
}

/**
 * An admin change is answered once every worker of the node applies it: the very next proxied
 * requests, on new connections that either worker may take, are decided on the new state.
 */
async function adminChangesApplyAtOnce(gw: SpawnedGateway): Promise<void> {
  const statuses = async (path: string, key: string) =>
    (await Promise.all([1, 2, 3, 4, 5, 6].map(() => request(gw.http + path, { headers: { apikey: key } })))).map(
      (r) => r.status,
    );
  const admin = (path: string, method: string, body?: Record<string, unknown>) => request(gw.admin + path, { method, body });
  for (let round = 0; round < 10; round++) {
    const user = `walker-${round}`;
    const key = `key-of-${user}`;
    assert.equal((await admin('/consumers', 'POST', { username: user })).status, 201);
    assert.equal((await admin(`/consumers/${user}/key-auth`, 'POST', { key })).status, 201);
    assert.deepEqual(await statuses('/keyed/x', key), [200, 200, 200, 200, 200, 200], 'a new key works at once on every worker');
    assert.deepEqual(await statuses('/club/x', key), [403, 403, 403, 403, 403, 403], 'not yet in the group');
    assert.equal((await admin(`/consumers/${user}/acls`, 'POST', { group: 'club' })).status, 201);
    assert.deepEqual(await statuses('/club/x', key), [200, 200, 200, 200, 200, 200], 'a new acl group counts at once on every worker');
    assert.equal((await admin(`/consumers/${user}/key-auth/${key}`, 'DELETE')).status, 204);
    assert.deepEqual(await statuses('/keyed/x', key), [401, 401, 401, 401, 401, 401], 'a deleted key is refused at once on every worker');
  }
  await waitFor(() => servingPids(gw, '/keyed/x').size === 2, 'both workers to have decided on the changes (their access log lines)');
}

const listeners = { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', worker_processes: 2 };

test('LevelDB: the primary owns the store and two workers serve from it', async () => {
  const gw = await spawnGateway({ gateway: listeners, services: services('/one') });
  try {
    await exerciseNode(gw, { ...listeners, data_dir: gw.dataDir });
  } finally {
    gw.kill('SIGKILL');
  }
});

test('/status and /metrics count the requests of every worker, whichever answers', async () => {
  const gw = await spawnGateway({ gateway: listeners, services: services('/one') });
  try {
    await servedByBoth(gw, '/one');
    const served = async () => Number((await request(`${gw.admin}/metrics`)).text.match(/^tollgate_http_requests_total\{route="one",service="echo",code="200"\} (\d+)$/m)?.[1]);
    const total = async () => (await request(`${gw.admin}/status`)).json().server.total_requests as number;
    const before = { served: await served(), total: await total() };
    // A new connection each: both workers take some.
    for (let i = 0; i < 8; i++) assert.equal((await request(`${gw.http}/one/${i}`)).status, 200);
    // Each read may be answered by either worker: every one must see all eight.
    for (let i = 0; i < 10; i++) {
      await waitFor(async () => (await served()) === before.served + 8, `${before.served + 8} requests of route one on /metrics`, 5_000);
      assert.equal(await total(), before.total + 8, '/status counts every worker\'s requests');
    }
  } finally {
    gw.kill('SIGKILL');
  }
});

test('a node whose primary is killed: each worker says why and exits at once, and the ports are free', async () => {
  const gw = await spawnGateway({ gateway: listeners, services: services('/one') });
  try {
    await servedByBoth(gw, '/one');
    const workers = servingPids(gw, '/one');
    process.kill(gw.child.pid!, 'SIGKILL'); // the primary alone (gw.kill would end the whole group)
    await waitFor(() => [...workers].every((pid) => !isAlive(pid)), 'both workers to exit');
    const said = gw.output().split('\n').filter((l) => l.includes("the node's primary process is gone: this worker exits"));
    assert.deepEqual(new Set(said.map((l) => JSON.parse(l).pid)), workers);
    await assert.rejects(request(`${gw.http}/one`), 'nothing listens on the proxy port any more');
  } finally {
    gw.kill('SIGKILL');
  }
});

const skip = postgresSkipReason();
describe('PostgreSQL', { skip }, () => {
  let pg: ThrowawayPostgres;
  before(async () => {
    pg = await startPostgres();
  });
  after(() => pg?.stop());

  test('every worker is a client of the database', async () => {
    const settings = { ...listeners, ...pg.settings({ db_update_frequency: 0.2 }) };
    const gw = await spawnGateway({ gateway: settings, services: services('/one') });
    try {
      await exerciseNode(gw, { ...settings, data_dir: gw.dataDir });
    } finally {
      gw.kill('SIGKILL');
    }
  });
});

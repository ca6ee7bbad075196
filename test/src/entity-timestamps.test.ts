/**
 * `created_at` / `updated_at` of the entities gateway.yaml declares (issue 30): those the file gives (a
 * Kong export has them) are shown as given; the others are the time an entity was first loaded, the same
 * in every process and after a restart, and a reload moves `updated_at` only for an entity whose content
 * changed. decK compares them in a diff: a reload must not make every entity look new.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request, startGateway, tempDir, TEST_WORKERS, type TestGateway } from '../helpers/gateway.ts';

const UPSTREAM = 'http://127.0.0.1:9';
const FROM_FILE = { id: '0f6f1b0e-3c1d-4c5e-9a7b-1c2d3e4f5a6b', created_at: 1700000000, updated_at: 1700000500 };

function config(ordersHost = '127.0.0.1'): Record<string, any> {
  return {
    services: [
      { name: 'orders', url: `http://${ordersHost}:9`, routes: [{ name: 'orders', paths: ['/orders'] }], plugins: [{ name: 'cors' }] },
      { name: 'users', url: UPSTREAM, routes: [{ name: 'users', paths: ['/users'] }] },
      { name: 'exported', url: UPSTREAM, ...FROM_FILE },
    ],
    consumers: [{ username: 'alice', keyauth_credentials: [{ key: 'alice-key' }] }],
    upstreams: [{ name: 'pool', targets: [{ target: '127.0.0.1:9001' }] }],
  };
}

const gateways: TestGateway[] = [];
after(async () => {
  for (const gw of gateways) await gw.stop();
});

async function start(dataDir: string): Promise<TestGateway> {
  const gw = await startGateway(config(), { dataDir });
  gateways.push(gw);
  return gw;
}

type Times = Record<string, { created_at: number; updated_at?: number }>;

/** Every listed entity's timestamps, by kind and name. */
async function times(gw: TestGateway): Promise<Times> {
  const out: Times = {};
  const listings: [string, (e: any) => string][] = [
    ['/services', (e) => e.name], ['/routes', (e) => e.name], ['/plugins', (e) => e.name], ['/consumers', (e) => e.username],
    ['/key-auths', () => 'alice-key'], ['/upstreams', (e) => e.name], ['/upstreams/pool/targets', (e) => e.target],
  ];
  for (const [path, name] of listings) {
    for (const entity of (await request(gw.admin + path)).json().data) {
      out[`${path} ${name(entity)}`] = { created_at: entity.created_at, ...('updated_at' in entity ? { updated_at: entity.updated_at } : {}) };
    }
  }
  return out;
}

test('every entity carries Kong’s timestamps; those of the file as given', async () => {
  const startedAt = Date.now() / 1000;
  const gw = await start(tempDir());
  const all = await times(gw);
  assert.equal(Object.keys(all).length, 10);
  for (const [entity, { created_at, updated_at }] of Object.entries(all)) {
    if (entity === '/services exported') continue;
    assert.ok(created_at >= Math.floor(startedAt) && created_at <= Date.now() / 1000, `${entity}: created_at ${created_at}`);
    // Kong's credentials have created_at alone.
    if (entity.startsWith('/key-auths')) assert.equal(updated_at, undefined);
    else assert.equal(updated_at, created_at, entity);
  }
  assert.deepEqual(all['/services exported'], { created_at: FROM_FILE.created_at, updated_at: FROM_FILE.updated_at });
  // Targets to the millisecond (Kong's auto_timestamp_ms), the others in whole seconds.
  assert.ok(Object.entries(all).every(([entity, t]) => entity.startsWith('/upstreams/pool/targets') || Number.isInteger(t.created_at)));
  await gw.stop();
  gateways.pop();
});

test('a reload keeps the times of unchanged entities and moves updated_at of a changed one; a restart keeps them all', async () => {
  const dataDir = tempDir();
  const gw = await start(dataDir);
  const first = await times(gw);
  // Every process of a node shows the same times (several requests reach several workers).
  for (let i = 0; i < 2 * Math.max(TEST_WORKERS, 1); i++) assert.deepEqual(await times(gw), first);

  // Let the clock pass a second, so a change shows in whole seconds.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.equal(await gw.reload(config('localhost')), true);
  const reloaded = await times(gw);
  const orders = reloaded['/services orders'];
  assert.equal(orders.created_at, first['/services orders'].created_at);
  assert.ok(orders.updated_at! > first['/services orders'].updated_at!, `updated_at ${orders.updated_at} after ${first['/services orders'].updated_at}`);
  const { ['/services orders']: _changed, ...unchanged } = reloaded;
  const { ['/services orders']: _before, ...unchangedBefore } = first;
  assert.deepEqual(unchanged, unchangedBefore);

  await gw.stop();
  gateways.pop();
  const restarted = await startGateway(config('localhost'), { dataDir });
  gateways.push(restarted);
  assert.deepEqual(await times(restarted), reloaded);
});

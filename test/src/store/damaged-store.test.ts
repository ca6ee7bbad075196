/**
 * A damaged embedded store at start (garbage or nothing in CURRENT, a garbage MANIFEST, a truncated,
 * empty or missing table): `tollgate start` exits once with code 3 and one line naming the store and
 * `tollgate store:repair` (a node of workers too, with no worker started again), systemd does not
 * restart it (RestartPreventExitStatus=3), and after the repair the gateway starts with what could be
 * read: every acknowledged event when only the index files were damaged. A torn tail of LevelDB's log
 * (a write cut by a crash) is no damage: the next start recovers every acknowledged event.
 */
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { before, describe, test } from 'node:test';
import { runTollgate, spawnGateway, tempDir, writeConfig } from '../../helpers/gateway.ts';
import { event, MeteringApi, meteringConfig } from '../../plugins/metering/catalogue-support.ts';

const STORE_DAMAGED = 3;
const config = (workers = 1) => meteringConfig({ gateway: { worker_processes: workers } });
const EVENTS = 50;

/** Starts a gateway on `dataDir`, ingests `count` new events and returns their ids; `stop` ends it. */
async function ingestInto(dataDir: string, count: number, stop: 'SIGTERM' | 'SIGKILL'): Promise<string[]> {
  const gateway = await spawnGateway(config(), { dataDir });
  const events = Array.from({ length: count }, () => event());
  await (await MeteringApi.connect(gateway.https)).ingestOk(events);
  gateway.kill(stop);
  await gateway.exited;
  return events.map((e) => e.id);
}

async function storedIds(dataDir: string): Promise<string[]> {
  const gateway = await spawnGateway(config(), { dataDir });
  const ids = (await (await MeteringApi.connect(gateway.https)).listAllEvents()).map((item) => item.event.id as string);
  gateway.kill('SIGTERM');
  assert.equal(await gateway.exited, 0);
  return ids.sort();
}

const storeFile = (dataDir: string, suffix: string) => join(dataDir, 'store', readdirSync(join(dataDir, 'store')).find((name) => name.endsWith(suffix))!);

const damages: Record<string, { damage: (dataDir: string) => void; keepsEverything: boolean }> = {
  'garbage in CURRENT': { damage: (d) => writeFileSync(join(d, 'store', 'CURRENT'), 'garbage\n'), keepsEverything: true },
  'an empty CURRENT': { damage: (d) => truncateSync(join(d, 'store', 'CURRENT'), 0), keepsEverything: true },
  'a garbage MANIFEST': { damage: (d) => writeFileSync(storeFile(d, 'MANIFEST-000004'), 'garbage'), keepsEverything: true },
  'a truncated table': { damage: (d) => truncateSync(storeFile(d, '.ldb'), 100), keepsEverything: false },
  'an empty table': { damage: (d) => truncateSync(storeFile(d, '.ldb'), 0), keepsEverything: false },
  'a missing table': { damage: (d) => rmSync(storeFile(d, '.ldb')), keepsEverything: false },
};

describe('a damaged store at start', { concurrency: 3 }, () => {
  // One store with a table (its events moved out of the log by a second start), copied for each damage.
  const pristine = tempDir();
  let acknowledged: string[] = [];
  before(async () => {
    acknowledged = (await ingestInto(pristine, EVENTS, 'SIGTERM')).sort();
    assert.deepEqual(await storedIds(pristine), acknowledged);
  });

  const damagedCopy = (damage: (dataDir: string) => void) => {
    const dataDir = tempDir();
    cpSync(pristine, dataDir, { recursive: true });
    damage(dataDir);
    return dataDir;
  };

  for (const [name, { damage, keepsEverything }] of Object.entries(damages)) {
    test(`${name}: exit code 3 with one line saying what to do; store:repair makes it start again`, async () => {
      const dataDir = damagedCopy(damage);
      const file = writeConfig(config(), dataDir);
      const start = await runTollgate(['start', '--config', file]);
      assert.equal(start.code, STORE_DAMAGED, start.output);
      const lines = start.output.trim().split('\n');
      assert.equal(lines.length, 1, start.output);
      assert.match(lines[0], new RegExp(`^tollgate: the store in ${join(dataDir, 'store')} is damaged or unreadable \\(.+\\): stop the gateway, then run 'tollgate store:repair --config FILE'`));

      const repair = await runTollgate(['store:repair', '--config', file]);
      assert.equal(repair.code, 0, repair.output);
      const ids = await storedIds(dataDir);
      if (keepsEverything) assert.deepEqual(ids, acknowledged, 'every acknowledged event kept');
      else assert.ok(ids.every((id) => acknowledged.includes(id)), 'nothing but acknowledged events');
    });
  }

  test('a node of workers exits once with code 3: no worker is started again', async () => {
    const dataDir = damagedCopy(damages['a truncated table'].damage);
    const start = await runTollgate(['start', '--config', writeConfig(config(2), dataDir)]);
    assert.equal(start.code, STORE_DAMAGED, start.output);
    assert.equal(start.output.match(/failed to start \(exit code 3\); stopping/g)?.length, 1, start.output);
    assert.ok(start.output.split('\n').filter((l) => l.includes('is damaged or unreadable')).length <= 2, 'at most one line per worker');
  });

  test('store:repair refuses while a gateway holds the store', async () => {
    const gateway = await spawnGateway(config(), { dataDir: damagedCopy(() => {}) });
    const repair = await runTollgate(['store:repair', '--config', gateway.configFile]);
    assert.equal(repair.code, 1, repair.output);
    assert.match(repair.output, /is in use \(is a gateway running on this data directory\?\): stop it first/);
    gateway.kill('SIGTERM');
    assert.equal(await gateway.exited, 0);
  });
});

test("a torn tail of LevelDB's log (a write cut by a crash) recovers every acknowledged event", async () => {
  const dataDir = tempDir();
  const acknowledged = await ingestInto(dataDir, EVENTS, 'SIGKILL');
  // A record header announcing 1000 bytes, and only 40 of them: what a crash in the middle of a write leaves.
  const header = Buffer.from([0x12, 0x34, 0x56, 0x78, 1000 & 0xff, 1000 >> 8, 1]);
  appendFileSync(storeFile(dataDir, '.log'), Buffer.concat([header, Buffer.alloc(40, 0x61)]));
  assert.deepEqual(await storedIds(dataDir), acknowledged.sort());
});

test('the systemd unit does not restart a gateway whose store is damaged', () => {
  const unit = readFileSync(resolve(import.meta.dirname, '../../../examples/tollgate.service'), 'utf8');
  assert.match(unit, new RegExp(`^RestartPreventExitStatus=${STORE_DAMAGED}$`, 'm'));
});

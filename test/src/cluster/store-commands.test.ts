/**
 * `npm run migrate` and `npm run store:copy` as an operator runs them (real processes, a throwaway
 * PostgreSQL): the schema created once and then reported up to date; an embedded store written by a
 * real gateway (a runtime consumer, an issued token, plus thousands of entries with and without
 * expiry) copied into PostgreSQL, interrupted with SIGKILL and resumed, verified by counts; and a
 * gateway started on PostgreSQL that serves that consumer and accepts that token.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { keyGroup } from '../../../src/store/copy.ts';
import { SCHEMA_VERSION } from '../../../src/store/postgres/schema.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { prepareEvents } from '../../../plugins/metering/ingest/events.ts';
import { request, runTollgate, startGateway, startUpstream, tempDir, type Upstream } from '../../helpers/gateway.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';
import { apiOf, config as meteringConfig, expectedOf, makeEvents, postUntilAcknowledged, TYPE, usageOn } from '../../plugins/metering/cluster-support.ts';

const cli = runTollgate;

function configFile(content: Record<string, unknown>): string {
  const file = join(tempDir('tollgate-config-'), 'gateway.yaml');
  writeFileSync(file, stringify({ _format_version: '3.0', ...content }));
  return file;
}

test('the key groups store:copy counts by: namespace and first key segment', () => {
  assert.equal(keyGroup('plugin.oauth2:acc:abc'), 'plugin.oauth2:acc:');
  assert.equal(keyGroup('plugin.metering:e/request/00000001'), 'plugin.metering:e/');
  assert.equal(keyGroup('core:consumers/1234'), 'core:consumers/');
  assert.equal(keyGroup('core:node_id'), 'core:node_id');
});

const skip = postgresSkipReason();
describe('with PostgreSQL', { skip }, () => {
  let pg: ThrowawayPostgres;
  let upstream: Upstream;
  before(async () => {
    pg = await startPostgres();
    upstream = await startUpstream();
  });
  after(async () => {
    await upstream?.close();
    await pg?.stop();
  });

  test('migrate creates the schema, then finds it up to date; a LevelDB config needs none; an unreachable database is one clear line', async () => {
    const file = configFile({ gateway: pg.settings({ pg_schema: 'migrated' }) });
    const first = await cli(['migrate', '--config', file]);
    assert.equal(first.code, 0, first.output);
    assert.match(first.output, new RegExp(`tollgate@127\\.0\\.0\\.1:\\d+/tollgate, schema migrated: created to version ${SCHEMA_VERSION}`));
    const again = await cli(['migrate', '--config', file]);
    assert.match(again.output, new RegExp(`schema migrated: up to date \\(version ${SCHEMA_VERSION}\\)`));
    const tables = await pg.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'migrated' ORDER BY table_name");
    assert.deepEqual(tables.map((t) => t.table_name), ['tollgate_journal', 'tollgate_journal_seq', 'tollgate_meta', 'tollgate_store']);

    const level = await cli(['migrate', '--config', configFile({})]);
    assert.equal(level.code, 0);
    assert.match(level.output, /database is leveldb; the embedded store needs no migration/);

    const nowhere = await cli(['migrate', '--config', configFile({ gateway: pg.settings({ pg_port: 1 }) })]);
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.output, /^tollgate: cannot connect to PostgreSQL at 127\.0\.0\.1:1 \(database tollgate, user tollgate\)/m);
  });

  test('store:copy moves a real embedded store, survives SIGKILL halfway, verifies counts, and a gateway on PostgreSQL serves it', async () => {
    const dataDir = tempDir();
    const services = [{ name: 'api', url: upstream.url, routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, scopes: ['read'] } }] }] }];
    const consumers = [{ username: 'acme', oauth2_credentials: [{ name: 'app', client_id: 'acme-app', client_secret: 'acme-secret' }] }];

    // 1. A gateway on LevelDB: a runtime consumer and an issued token.
    const embedded = await startGateway({ services, consumers }, { dataDir });
    assert.equal((await request(embedded.admin + '/consumers', { method: 'POST', body: { username: 'runtime-user' } })).status, 201);
    const issued = await request(embedded.https + '/api/oauth2/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret&scope=read',
    });
    assert.equal(issued.status, 200, issued.text);
    const token = issued.json().access_token;
    await embedded.stop();

    // 2. Bulk entries as a metering plugin writes them, some expiring, one already expired, odd characters.
    const level = new LevelStore(join(dataDir, 'store'));
    await level.open();
    const events = level.namespace('plugin.metering');
    const bulk = Array.from({ length: 20_000 }, (_, i) => ({ type: 'put' as const, key: `e/request/${String(i).padStart(12, '0')}`, value: JSON.stringify({ i }) }));
    await events.batch(bulk);
    await events.batch(Array.from({ length: 500 }, (_, i) => ({ type: 'put' as const, key: `d/hash${i}`, value: 'x', ttlMs: 3_600_000 })));
    await events.put('d/gone', 'x', { ttlMs: 1 });
    await events.put('odd/\u0000\u0001ü', 'v\u0000');
    await level.close();
    await new Promise((r) => setTimeout(r, 5));

    const file = configFile({ gateway: { ...pg.settings({ pg_schema: 'copied' }), data_dir: dataDir }, services, consumers });
    // 3. Interrupted as soon as it reports progress, then resumed.
    const interrupted = await cli(['store:copy', '--from', 'leveldb', '--to', 'postgres', '--config', file, '--batch-size', '50'], /copying entries: [1-9][\d,]*\//);
    assert.equal(interrupted.code, null, `killed halfway: ${interrupted.output}`);
    const resumed = await cli(['store:copy', '--from', 'leveldb', '--to', 'postgres', '--config', file, '--batch-size', '500']);
    assert.equal(resumed.code, 0, resumed.output);
    const after = Number(/resuming after (\d+) entries/.exec(resumed.output)?.[1]);
    assert.ok(after > 0 && after < 20_000, `resumed after ${after}: ${resumed.output}`);
    assert.match(resumed.output, /plugin\.metering:e\/\s+20000\s+20000\n/);
    assert.match(resumed.output, /plugin\.metering:d\/\s+500\s+500\n/, 'the expired entry is not copied');
    assert.match(resumed.output, /plugin\.oauth2:acc:\s+1\s+1\n/);
    assert.match(resumed.output, /core:consumers\/\s+1\s+1\n/);
    assert.match(resumed.output, /every key group matches/);
    const ttl = await pg.sql("SELECT count(*)::int AS n FROM copied.tollgate_store WHERE key LIKE 'plugin.metering:d/%' AND expires_at > 0");
    assert.equal(ttl[0].n, 500, 'expiry is carried over');

    const rerun = await cli(['store:copy', '--from', 'leveldb', '--to', 'postgres', '--config', file]);
    assert.equal(rerun.code, 0);
    assert.match(rerun.output, /already complete/);
    const intoUsed = await cli(['store:copy', '--from', 'leveldb', '--to', 'postgres', '--config', configFile({ gateway: { ...pg.settings({ pg_schema: 'copied' }), data_dir: tempDir() } })]);
    assert.equal(intoUsed.code, 1);
    assert.match(intoUsed.output, /holds a copy from .*, not .*: refusing to mix two stores/);
    const usage = await cli(['store:copy', '--from', 'postgres', '--to', 'leveldb', '--config', file]);
    assert.equal(usage.code, 2);

    // 4. A gateway on PostgreSQL (another data directory: another node) serves what was copied.
    const onPostgres = await startGateway({ gateway: pg.settings({ pg_schema: 'copied' }), services, consumers });
    try {
      assert.equal((await request(onPostgres.admin + '/consumers/runtime-user')).status, 200);
      const proxied = await request(onPostgres.http + '/api/hello', { headers: { authorization: `Bearer ${token}` } });
      assert.equal(proxied.status, 200, 'the token issued on LevelDB is accepted');
      assert.equal(JSON.parse(proxied.text).headers['x-consumer-username'], 'acme');
    } finally {
      await onPostgres.stop();
    }
  });

  test('metering events copied from LevelDB (stored, or left in an inbox) move into the journal on PostgreSQL: listed, counted, and one sent again counts once', async () => {
    const dataDir = tempDir();
    const events = makeEvents('copied', 601);
    const embedded = await startGateway(meteringConfig({ data_dir: dataDir, worker_processes: 1 }));
    try {
      await apiOf(embedded).ingestOk(events.slice(0, 400));
      assert.deepEqual((await usageOn(apiOf(embedded))).totals, expectedOf(events.slice(0, 400)));
    } finally {
      await embedded.stop();
    }
    // What a node of several workers leaves when stopped before aggregating: an inbox entry, here with
    // a new event and one already stored.
    const level = new LevelStore(join(dataDir, 'store'));
    await level.open();
    const now = Date.now();
    const context = { now, retentionStart: 0, retentionDays: 730, metersOf: () => [] };
    const left = prepareEvents([events[600], events[0]], true, context);
    const inboxKey = `i/${String(now).padStart(15, '0')}/earlier.1.x/000000000001`;
    await level.namespace('plugin.metering').batch([
      { type: 'put', key: inboxKey, value: '2' },
      { type: 'put', key: 'ib/' + inboxKey.slice(2), value: left.map((e) => `${e.dedupe} ${e.json}`).join('\n') },
    ]);
    await level.close();
    const schema = { ...pg.settings({ pg_schema: 'copied_events' }), db_update_frequency: 0.2, worker_processes: 1 };
    const copied = await cli(['store:copy', '--from', 'leveldb', '--to', 'postgres', '--config', configFile({ gateway: { ...schema, data_dir: dataDir } })]);
    assert.equal(copied.code, 0, copied.output);

    const onPostgres = await startGateway(meteringConfig(schema));
    try {
      const api = apiOf(onPostgres);
      // 100 copied events again (duplicates), and 200 new ones; the inbox held the last one.
      await postUntilAcknowledged(api, events.slice(300, 600));
      assert.deepEqual((await usageOn(api)).totals, expectedOf(events));
      const listed = await api.listAllEvents({ type: TYPE });
      assert.deepEqual(listed.map((item) => item.event.id).sort(), events.map((e) => e.id).sort(), 'each event listed once, copied ones included');
      const [{ n: keyed }] = await pg.sql("SELECT count(*)::int AS n FROM copied_events.tollgate_store WHERE key ~ '^plugin\\.metering:(e|t|d|i|ib)/'");
      assert.equal(keyed, 0, 'no event is left in keys or an inbox');
    } finally {
      await onPostgres.stop();
    }
  });
});

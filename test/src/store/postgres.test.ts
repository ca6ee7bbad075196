/**
 * The PostgreSQL store adapter on a throwaway cluster, as an ordinary role with a password: the store
 * contract with two instances on each location (as two nodes), then what is PostgreSQL's own: the
 * schema created once by nodes starting together, notices surviving a lost connection, clear errors
 * for an unreachable database or a schema newer than the code.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { StoreSchemaError, StoreUnavailableError } from '../../../src/store/errors.ts';
import type { PostgresSettings } from '../../../src/store/postgres/connection.ts';
import { PostgresStore } from '../../../src/store/postgres/store.ts';
import { SCHEMA_VERSION } from '../../../src/store/postgres/schema.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';
import { waitFor } from '../../helpers/support.ts';
import { storeContract } from './contract.ts';

const skip = postgresSkipReason();
let cluster: ThrowawayPostgres | undefined;
let schemas = 0;

async function theCluster(): Promise<ThrowawayPostgres> {
  cluster ??= await startPostgres();
  return cluster;
}

function settingsFor(c: ThrowawayPostgres, schema: string, extra: Partial<PostgresSettings> = {}): PostgresSettings {
  return {
    host: c.host,
    port: c.port,
    user: c.user,
    password: c.password,
    database: c.database,
    schema,
    ssl: false,
    sslVerify: true,
    updateFrequencyMs: 200,
    ...extra,
  };
}

async function openStore(settings: PostgresSettings): Promise<PostgresStore> {
  const store = new PostgresStore(settings);
  await store.open();
  return store;
}

/** A fresh schema (pg_schema) per location: every location is an empty store of its own. */
async function freshSchema(): Promise<string> {
  await theCluster();
  return `contract_${++schemas}`;
}

storeContract({
  name: 'PostgreSQL',
  shared: true,
  skip,
  location: async () => {
    const schema = await freshSchema();
    return { open: () => openStore(settingsFor(cluster!, schema)) };
  },
});

describe('PostgreSQL adapter', { skip }, () => {
  const opened: PostgresStore[] = [];
  const open = async (settings: PostgresSettings) => {
    const store = await openStore(settings);
    opened.push(store);
    return store;
  };

  before(theCluster);
  after(async () => {
    for (const s of opened) await s.close();
    await cluster?.stop();
  });

  test('nodes starting together on an empty database create the schema once, in their pg_schema', async () => {
    const settings = settingsFor(cluster!, 'starting_together');
    const stores = await Promise.all(Array.from({ length: 5 }, () => open(settings)));
    assert.equal(stores.filter((s) => s.migration!.from === 0).length, 1, 'one node created the schema, the others found it');
    assert.ok(stores.every((s) => s.migration!.to === SCHEMA_VERSION));
    const tables = await cluster!.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'starting_together' ORDER BY 1");
    assert.deepEqual(tables.map((t) => t.table_name), ['tollgate_journal', 'tollgate_journal_seq', 'tollgate_meta', 'tollgate_store']);
    const owner = await cluster!.sql("SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'starting_together'");
    assert.equal(owner[0].owner, 'tollgate', 'created by the ordinary role');
    await stores[0].put('k', 'v');
    assert.equal(await stores[4].get('k'), 'v');
  });

  test('a lost notice connection delivers null to every topic, and notices flow again once it is back', async () => {
    const settings = settingsFor(cluster!, 'reconnect');
    const a = await open(settings);
    const b = await open(settings);
    const got: (string | null)[] = [];
    a.namespace('oauth2').notices.subscribe('tokens', (m) => got.push(m));
    b.namespace('oauth2').notices.publish('tokens', 'before');
    await waitFor(() => got.includes('before'), 'the first notice');
    await cluster!.terminateSessions();
    await waitFor(() => got.includes(null), 'null after the connection was lost');
    // Once both are reconnected, a notice from b reaches a again.
    await waitFor(async () => a.notices.connected && b.notices.connected, 'both reconnected', 10_000);
    b.namespace('oauth2').notices.publish('tokens', 'after');
    await waitFor(() => got.includes('after'), 'a notice after the reconnection', 10_000);
    assert.equal(await a.get('anything'), undefined, 'the pool reconnects too');
  });

  test('a notice too large for NOTIFY arrives as null (drop the topic), never as a cut message', async () => {
    const settings = settingsFor(cluster!, 'large_notice');
    const a = await open(settings);
    const b = await open(settings);
    const got: (string | null)[] = [];
    a.notices.subscribe('big', (m) => got.push(m));
    b.notices.publish('big', 'x'.repeat(10_000));
    await waitFor(() => got.length > 0, 'the notice');
    assert.deepEqual(got, [null]);
  });

  test('an unreachable database is a clear error naming where it was looked for', async () => {
    const settings = settingsFor(cluster!, 'nowhere', { port: 1, updateFrequencyMs: 1000 });
    await assert.rejects(openStore(settings), (err: Error) => {
      assert.ok(err instanceof StoreUnavailableError);
      assert.equal((err as StoreUnavailableError).code, 'TOLLGATE_ERR_STORE_UNAVAILABLE');
      assert.match(err.message, /cannot connect to PostgreSQL at 127\.0\.0\.1:1 \(database tollgate, user tollgate\)/);
      return true;
    });
    await assert.rejects(openStore(settingsFor(cluster!, 'wrong_password', { password: 'wrong' })), /password authentication failed/);
  });

  test('a schema an earlier gateway made is upgraded in place, its rows kept', async () => {
    const settings = settingsFor(cluster!, 'from_the_past');
    const earlier = await openStore(settings);
    await earlier.put('kept', 'v');
    await earlier.close();
    // As the first version left it: the store table only.
    await cluster!.sql(`DROP TABLE from_the_past.tollgate_journal, from_the_past.tollgate_journal_seq; UPDATE from_the_past.tollgate_meta SET value = '1' WHERE name = 'schema_version'`);
    const upgraded = await open(settings);
    assert.deepEqual(upgraded.migration, { from: 1, to: SCHEMA_VERSION });
    assert.equal(await upgraded.get('kept'), 'v');
    await upgraded.journal().append([{ key: 'k', time: 1, kind: 'x', value: 'v' }], 1);
    assert.equal(await upgraded.journal().last(), 1);
  });

  test('a schema newer than this gateway is refused, not used', async () => {
    const settings = settingsFor(cluster!, 'from_the_future');
    const store = await openStore(settings);
    await store.close();
    await cluster!.sql(`UPDATE from_the_future.tollgate_meta SET value = '99' WHERE name = 'schema_version'`);
    await assert.rejects(openStore(settings), (err: Error) => err instanceof StoreSchemaError && /version 99, newer than this gateway knows/.test(err.message));
  });

  /** A transaction of another client holding a write lock on `key`'s row until `release` commits it. */
  async function rowHeld(schema: string, update: string, key: string, values: unknown[] = []) {
    const c = cluster!;
    const client = new pg.Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    await client.connect();
    await client.query('BEGIN');
    await client.query(`UPDATE ${schema}.tollgate_store SET ${update} WHERE key = $1`, [key, ...values]);
    return async () => {
      await client.query('COMMIT');
      await client.end();
    };
  }

  const waitingForLocks = (n: number) =>
    waitFor(async () => Number((await cluster!.sql('SELECT count(*) AS n FROM pg_locks WHERE NOT granted'))[0].n) >= n, `${n} statements waiting for a lock`);

  test('the sweep keeps a row that another node renewed while the sweep waited for it', async () => {
    const store = await open(settingsFor(cluster!, 'sweep_race'));
    await store.put('lease', 'old', { ttlMs: 1 });
    await new Promise((r) => setTimeout(r, 5));
    const release = await rowHeld('sweep_race', "value = 'new', expires_at = $2", 'lease', [Date.now() + 60_000]);
    const swept = store.sweepExpired();
    await waitingForLocks(1);
    await release();
    await swept;
    assert.equal(await store.get('lease'), 'new');
  });

  test('a fenced write held up inside PostgreSQL holds its fence: the fence changes only after it committed', async () => {
    const settings = settingsFor(cluster!, 'fence_race');
    const a = await open(settings);
    const b = await open(settings);
    await a.batch([
      { type: 'put', key: 'lease', value: 'term-1' },
      { type: 'put', key: 'busy', value: '' },
    ]);
    // Another transaction holds the row the fenced batch writes: the batch waits inside PostgreSQL.
    const release = await rowHeld('fence_race', "value = 'other'", 'busy');
    const order: string[] = [];
    const batch = a.writeBatch();
    batch.put('busy', 'written under term-1');
    const written = batch.writeIf([{ key: 'lease', value: 'term-1' }], { sync: true }).then((ok) => (order.push('fenced write'), ok));
    await waitingForLocks(1);
    // The other node takes the lease over meanwhile: it must wait for the fenced write to finish.
    const taken = b.commitIf([{ key: 'lease', value: 'term-1' }], [{ type: 'put', key: 'lease', value: 'term-2' }]).then((ok) => (order.push('lease taken'), ok));
    await waitingForLocks(2);
    await release();
    assert.equal(await written, true);
    assert.equal(await taken, true);
    assert.deepEqual(order, ['fenced write', 'lease taken']);
    assert.deepEqual(await b.getMany(['busy', 'lease']), ['written under term-1', 'term-2']);
    // Under the old term now, a write is refused whole.
    const late = a.writeBatch();
    late.put('busy', 'late');
    assert.equal(await late.writeIf([{ key: 'lease', value: 'term-1' }], { sync: true }), false);
    assert.equal(await b.get('busy'), 'written under term-1');
  });

  test('a database refusing more connections (too many for the role) is unavailable, as when it is down', async () => {
    await cluster!.sql("CREATE ROLE limited LOGIN PASSWORD 'limited-password'; GRANT CREATE ON DATABASE tollgate TO limited");
    const store = await open(settingsFor(cluster!, 'limited', { user: 'limited', password: 'limited-password' }));
    await store.put('k', 'v', { sync: true });
    await cluster!.sql("ALTER ROLE limited CONNECTION LIMIT 0; SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'limited'");
    try {
      // The pool's connections were ended; every new one is refused (53300).
      await waitFor(async () => {
        const err = await store.get('k').then(() => undefined, (e: unknown) => e);
        if (!err) return false;
        assert.ok(err instanceof StoreUnavailableError, `${(err as Error).name}: ${(err as Error).message}`);
        return /too many connections/.test((err as Error).message);
      }, 'a refused connection');
    } finally {
      await cluster!.sql('ALTER ROLE limited CONNECTION LIMIT -1');
    }
    await waitFor(async () => (await store.get('k').catch(() => undefined)) === 'v', 'the store to serve again');
  });

  test('a store opens at most poolSize connections for its queries, plus one for notices', async () => {
    await cluster!.sql("CREATE ROLE pooled LOGIN PASSWORD 'pooled-password'; GRANT CREATE ON DATABASE tollgate TO pooled");
    const store = await open(settingsFor(cluster!, 'pooled', { user: 'pooled', password: 'pooled-password', poolSize: 2 }));
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.put(`k${i}`, 'v', { sync: true })));
    const [{ count }] = await cluster!.sql("SELECT count(*)::int AS count FROM pg_stat_activity WHERE usename = 'pooled'");
    assert.ok(count <= 3, `${count} connections`);
    assert.equal((await store.getMany(['k0', 'k49'])).join(), 'v,v');
  });

  test('reachable() follows the database going away and coming back', async () => {
    const store = await open(settingsFor(cluster!, 'reachability'));
    assert.equal(await store.reachable(), true);
    await cluster!.pause();
    try {
      assert.equal(await store.reachable(), false);
      await assert.rejects(store.get('k'));
    } finally {
      await cluster!.resume();
    }
    await waitFor(() => store.reachable(), 'the database to be reachable again', 10_000);
    await store.put('k', 'v', { sync: true });
    assert.equal(await store.get('k'), 'v');
  });

  describe('journal', () => {
    const record = (key: string, time = 100, kind = 'request') => ({ key, time, kind, value: `{"key":"${key}"}` });

    test('a key is stored once however many nodes append it at the same time; numbers follow commit order', async () => {
      const schema = 'journal_race';
      const [a, b] = [await open(settingsFor(cluster!, schema)), await open(settingsFor(cluster!, schema))];
      const keys = Array.from({ length: 400 }, (_, i) => `k${i}`);
      // Both nodes append every key, in overlapping batches of 20, while a reader follows the journal.
      const batches = (offset: number) => Array.from({ length: 20 }, (_, i) => keys.slice(i * 20, i * 20 + 20 + offset).map((k) => record(k)));
      const read: string[] = [];
      let cursor = 0;
      let appending = true;
      const reader = (async () => {
        while (appending) {
          const page = await a.journal().read(cursor, { limit: 7 });
          for (const e of page.entries) assert.ok(e.seq > cursor, 'every entry is read after the cursor');
          read.push(...page.entries.map((e) => e.key));
          cursor = page.through;
        }
      })();
      await Promise.all([...batches(0).map((batch) => a.journal().append(batch, 1)), ...batches(5).map((batch) => b.journal().append(batch, 2))]);
      appending = false;
      await reader;
      for (let page; (page = await b.journal().read(cursor, { limit: 50 })).through > cursor; cursor = page.through)
        read.push(...page.entries.map((e) => e.key));
      assert.deepEqual([...read].sort(), [...keys].sort(), 'the reader saw each key exactly once');
      assert.equal(cursor, await a.journal().last(), 'the read is complete up to the last number used, duplicates included');
    });

    test('an append waits for the one before it to commit: a reader never sees a later number first', async () => {
      const schema = 'journal_order';
      const store = await open(settingsFor(cluster!, schema));
      await store.journal().append([record('first')], 1);
      const release = await rowHeldIn(`${schema}.tollgate_journal_seq`, 'last = last', 'log', '');
      const appended = store.journal().append([record('second')], 2);
      await waitingForLocks(1);
      assert.deepEqual((await store.journal().read(0, { limit: 10 })).entries.map((e) => e.key), ['first']);
      await release();
      await appended;
      const all = await store.journal().read(0, { limit: 10 });
      assert.deepEqual(all.entries.map((e) => [e.key, e.seq, e.storedAt]), [['first', 1, 1], ['second', 2, 2]]);
    });

    test('reads by kind, by time both ways, deletes by age, and imports with their numbers', async () => {
      const store = await open(settingsFor(cluster!, 'journal_reads'));
      const journal = store.namespace('plugin.x').journal()!;
      await journal.import([{ ...record('old', 50, 'a'), seq: 7, storedAt: 5 }], 10);
      await journal.append([record('t100', 100, 'a'), record('t200', 200, 'b'), record('t300', 300, 'a'), record('old', 1, 'a')], 9);
      assert.equal(await journal.last(), 14, 'appends number after the floor of the import');
      assert.equal(await store.journal().last(), 0, 'another namespace has a journal of its own');
      assert.deepEqual((await journal.read(0, { limit: 20, kind: 'a' })).entries.map((e) => e.seq), [7, 11, 13]);
      const rare = await journal.read(0, { limit: 2, kind: 'b' });
      assert.deepEqual([rare.entries.length, rare.through], [0, 2], 'a kind filter looks at `limit` numbers per read');
      assert.deepEqual((await journal.read(7, { limit: 10, upTo: 12 })).entries.map((e) => e.key), ['t100', 't200']);
      const newest = await journal.byTime({ from: 60, reverse: true, limit: 2 });
      assert.deepEqual(newest.map((e) => e.key), ['t300', 't200']);
      const rest = await journal.byTime({ from: 60, reverse: true, after: [newest[1].time, newest[1].seq], limit: 10 });
      assert.deepEqual(rest.map((e) => e.key), ['t100']);
      assert.deepEqual((await journal.byTime({ from: 0, to: 300, kind: 'a', limit: 10 })).map((e) => e.key), ['old', 't100']);
      assert.equal(await journal.deleteBefore(150, 10), 2);
      assert.deepEqual((await journal.read(0, { limit: 10 })).entries.map((e) => e.key), ['t200', 't300']);
    });
  });

  /** A transaction of another client holding a write lock on a row of `table` until `release` commits it. */
  async function rowHeldIn(table: string, update: string, column: string, value: string) {
    const c = cluster!;
    const client = new pg.Client({ host: c.host, port: c.port, user: c.user, password: c.password, database: c.database });
    await client.connect();
    await client.query('BEGIN');
    await client.query(`UPDATE ${table} SET ${update} WHERE ${column} = $1`, [value]);
    return async () => {
      await client.query('COMMIT');
      await client.end();
    };
  }
});

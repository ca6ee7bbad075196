/**
 * The PostgreSQL schema of the store and its upgrades. Every node runs `migrate` at start; a session
 * advisory lock makes nodes that start together take turns, so each step runs once. The version
 * reached is kept in `tollgate_meta`.
 *
 *   tollgate_store (key text COLLATE "C" PRIMARY KEY, value text, expires_at bigint)
 *     COLLATE "C" in a UTF-8 database orders keys by their UTF-8 bytes, as LevelDB does; expires_at is
 *     in ms since the epoch (NULL: never), judged by the reader's clock like every adapter's expiry.
 *   tollgate_meta (name text PRIMARY KEY, value text)
 *   tollgate_journal (log, seq, key, time, kind, stored_at, value)   journals (../store.ts, journal.ts):
 *     one per namespace (`log`); (log, seq) the primary key, (log, key) unique, (log, time, seq) indexed
 *   tollgate_journal_seq (log PRIMARY KEY, last)   the last sequence number each journal handed out; its
 *     row is locked by each append until it commits, which serialises the appends of a journal
 */
import { hash } from 'node:crypto';
import pg from 'pg';
import { StoreSchemaError } from '../errors.ts';

export interface SchemaNames {
  schema: string;
  store: string;
  meta: string;
  journal: string;
  journalSeq: string;
}

/** Quoted, schema-qualified names (pg_schema is an identifier the operator chose). */
export function schemaNames(schema: string): SchemaNames {
  const s = pg.escapeIdentifier(schema);
  return { schema: s, store: `${s}.tollgate_store`, meta: `${s}.tollgate_meta`, journal: `${s}.tollgate_journal`, journalSeq: `${s}.tollgate_journal_seq` };
}

/** Each step runs in its own transaction, in order; never edit a released step, add one. */
const MIGRATIONS: ((n: SchemaNames) => string)[] = [
  (n) => `
    CREATE TABLE ${n.store} (key text COLLATE "C" PRIMARY KEY, value text NOT NULL, expires_at bigint);
    CREATE INDEX tollgate_store_expiry ON ${n.store} (expires_at) WHERE expires_at IS NOT NULL;`,
  (n) => `
    CREATE TABLE ${n.journal} (
      log text COLLATE "C" NOT NULL, seq bigint NOT NULL, key text COLLATE "C" NOT NULL, time bigint NOT NULL,
      kind text COLLATE "C" NOT NULL, stored_at bigint NOT NULL, value text NOT NULL,
      PRIMARY KEY (log, seq), UNIQUE (log, key));
    CREATE INDEX tollgate_journal_time ON ${n.journal} (log, time, seq);
    CREATE TABLE ${n.journalSeq} (log text COLLATE "C" PRIMARY KEY, last bigint NOT NULL);`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** A 64-bit advisory lock key (as a decimal string) derived from `text`. */
export function lockKey(text: string): string {
  return hash('sha256', text, 'buffer').readBigInt64BE(0).toString();
}

export interface MigrationResult {
  from: number;
  to: number;
}

/** Creates or upgrades the schema on `client`, under a lock that other nodes migrating wait for. */
export async function migrate(client: pg.ClientBase, schema: string): Promise<MigrationResult> {
  const names = schemaNames(schema);
  const lock = lockKey(`tollgate-migrate:${schema}`);
  await client.query('SELECT pg_advisory_lock($1)', [lock]);
  try {
    await checkEncoding(client);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${names.schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${names.meta} (name text PRIMARY KEY, value text NOT NULL)`);
    const from = await schemaVersion(client, names);
    if (from > SCHEMA_VERSION) {
      throw new StoreSchemaError(`the database schema ${schema} is at version ${from}, newer than this gateway knows (${SCHEMA_VERSION}): upgrade the gateway`);
    }
    for (let version = from + 1; version <= SCHEMA_VERSION; version++) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version - 1](names));
        await client.query(`INSERT INTO ${names.meta} (name, value) VALUES ('schema_version', $1) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, [String(version)]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
    return { from, to: SCHEMA_VERSION };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [lock]);
  }
}

async function schemaVersion(client: pg.ClientBase, names: SchemaNames): Promise<number> {
  const { rows } = await client.query(`SELECT value FROM ${names.meta} WHERE name = 'schema_version'`);
  return rows.length === 0 ? 0 : Number(rows[0].value);
}

/** Key order and text storage rely on a UTF-8 database. */
async function checkEncoding(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query('SHOW server_encoding');
  const encoding = rows[0].server_encoding;
  if (encoding !== 'UTF8') throw new StoreSchemaError(`the database's encoding is ${encoding}; Tollgate needs a UTF8 database (CREATE DATABASE ... ENCODING 'UTF8')`);
}

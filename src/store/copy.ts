/**
 * `npm run store:copy -- --from leveldb --to postgres --config FILE`: moves a node's embedded store
 * (data_dir/store) into the PostgreSQL database the same file names (pg_*), every namespace and key
 * as it is, expiry included. The gateway must be stopped (LevelDB admits one process).
 *
 * Resumable: each batch is committed in one transaction together with the last key it copied, so an
 * interrupted copy (Ctrl-C, kill -9, a lost connection) continues after that key when run again.
 * Verified: at the end, the live entries of each key group (namespace and first key segment: e.g.
 * `plugin.oauth2:acc:`, `plugin.metering:e/`) are counted on both sides, as of the copy's start.
 */
import type pg from 'pg';
import type { PluginRegistry } from '../pdk/types.ts';
import { Progress } from '../progress.ts';
import { byteOrder } from './order.ts';
import { commandConfig, commandFailed } from './migrate.ts';
import { openEmbeddedStore, postgresSettings } from './open.ts';
import { connectedClient } from './postgres/connection.ts';
import { migrate, schemaNames, type SchemaNames } from './postgres/schema.ts';
import { decodeText, encodeText } from './postgres/text.ts';
import type { LevelStore } from './level.ts';

export const DEFAULT_COPY_BATCH = 1000;
const PROGRESS_KEY = 'store_copy';
/** Without a terminal, a progress line at most this often. */
const LOG_INTERVAL_MS = 2000;
const COUNT_PAGE = 10_000;

interface CopyState {
  state: 'copying' | 'done';
  /** The LevelDB directory copied from: a marker of another source is not resumed. */
  source: string;
  lastKey: string | null;
  copied: number;
}

/** Namespace and first key segment: `plugin.oauth2:acc:`, `plugin.metering:e/`, `core:consumers/`. */
export function keyGroup(key: string): string {
  const namespaceEnd = key.indexOf(':');
  const rest = key.slice(namespaceEnd + 1);
  const segment = rest.search(/[:/]/);
  return segment === -1 ? key : key.slice(0, namespaceEnd + 1 + segment + 1);
}

/** Copies the embedded store of the config `file` into the PostgreSQL database it names; resolves with the exit code. */
export async function copyStore(file: string, plugins: PluginRegistry, batchSize = DEFAULT_COPY_BATCH): Promise<number> {
  const config = await commandConfig(file, plugins);
  if (!config) return 1;
  let source: LevelStore | undefined;
  let client: pg.Client | undefined;
  try {
    source = await openEmbeddedStore(config.gateway.data_dir);
    client = await connectedClient(postgresSettings(config.gateway));
    await migrate(client, config.gateway.pg_schema);
    return await new Copy(source, client, schemaNames(config.gateway.pg_schema), config.gateway.data_dir, batchSize).run();
  } catch (err) {
    return commandFailed(err);
  } finally {
    await client?.end().catch(() => undefined);
    await source?.close().catch(() => undefined);
  }
}

class Copy {
  /** Expiry is judged as of the start, on both sides, so that counts agree however long the copy takes. */
  private readonly now = Date.now();

  constructor(
    private readonly source: LevelStore,
    private readonly client: pg.Client,
    private readonly names: SchemaNames,
    private readonly sourcePath: string,
    private readonly batchSize: number,
  ) {}

  async run(): Promise<number> {
    let progress = await this.progress();
    if (progress && progress.source !== this.sourcePath) {
      console.error(`tollgate: this schema holds a copy from ${progress.source}, not ${this.sourcePath}: refusing to mix two stores`);
      return 1;
    }
    if (!progress) {
      const present = await this.destinationCount();
      if (present > 0) {
        console.error(`tollgate: the destination schema already holds ${present} entries: refusing to copy into a store in use (choose another pg_schema or an empty database)`);
        return 1;
      }
      progress = { state: 'copying', source: this.sourcePath, lastKey: null, copied: 0 };
    }
    const expected = await this.sourceCounts();
    const total = [...expected.values()].reduce((a, b) => a + b, 0);
    if (progress.state === 'copying') {
      if (progress.copied > 0) console.log(`resuming after ${progress.copied} entries (last key ${JSON.stringify(progress.lastKey)})`);
      await this.copy(progress, total);
    } else console.log('the copy was already complete; checking the counts again');
    return this.verify(expected);
  }

  private async progress(): Promise<CopyState | undefined> {
    const { rows } = await this.client.query(`SELECT value FROM ${this.names.meta} WHERE name = $1`, [PROGRESS_KEY]);
    return rows.length === 0 ? undefined : (JSON.parse(rows[0].value) as CopyState);
  }

  private async destinationCount(): Promise<number> {
    const { rows } = await this.client.query(`SELECT count(*)::int AS n FROM ${this.names.store}`);
    return rows[0].n;
  }

  private async sourceCounts(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for await (const { key } of this.source.entries(undefined, this.now)) {
      const group = keyGroup(key);
      counts.set(group, (counts.get(group) ?? 0) + 1);
    }
    return counts;
  }

  private async copy(progress: CopyState, total: number): Promise<void> {
    const shown = new Progress('copying entries', total, { stream: process.stdout, lineEveryMs: LOG_INTERVAL_MS });
    if (progress.copied > 0) shown.advance(progress.copied);
    let batch: { key: string; value: string; expiresAt: number | null }[] = [];
    const flush = async () => {
      await this.writeBatch(batch, { ...progress, lastKey: batch[batch.length - 1].key, copied: progress.copied + batch.length });
      progress.copied += batch.length;
      progress.lastKey = batch[batch.length - 1].key;
      shown.advance(batch.length);
      batch = [];
    };
    for await (const entry of this.source.entries(progress.lastKey ?? undefined, this.now)) {
      batch.push(entry);
      if (batch.length >= this.batchSize) await flush();
    }
    if (batch.length > 0) await flush();
    progress.state = 'done';
    await this.client.query(`UPDATE ${this.names.meta} SET value = $2 WHERE name = $1`, [PROGRESS_KEY, JSON.stringify(progress)]);
    shown.finish();
  }

  /** The rows and the new resume point, in one transaction: an interruption loses neither without the other. */
  private async writeBatch(rows: { key: string; value: string; expiresAt: number | null }[], next: CopyState): Promise<void> {
    await this.client.query('BEGIN; SET LOCAL synchronous_commit TO on');
    try {
      await this.client.query(
        `INSERT INTO ${this.names.store} (key, value, expires_at) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
        [rows.map((r) => encodeText(r.key)), rows.map((r) => encodeText(r.value)), rows.map((r) => r.expiresAt)],
      );
      await this.client.query(
        `INSERT INTO ${this.names.meta} (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`,
        [PROGRESS_KEY, JSON.stringify(next)],
      );
      await this.client.query('COMMIT');
    } catch (err) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Counts live rows per key group on the destination and prints both sides; 0 when every group matches. */
  private async verify(expected: Map<string, number>): Promise<number> {
    const found = new Map<string, number>();
    let after = '';
    for (;;) {
      const { rows } = await this.client.query(
        `SELECT key FROM ${this.names.store} WHERE key > $1 AND (expires_at IS NULL OR expires_at > $2) ORDER BY key LIMIT $3`,
        [after, this.now, COUNT_PAGE],
      );
      for (const { key } of rows) {
        const group = keyGroup(decodeText(key));
        found.set(group, (found.get(group) ?? 0) + 1);
      }
      if (rows.length < COUNT_PAGE) break;
      after = rows[rows.length - 1].key;
    }
    const groups = [...new Set([...expected.keys(), ...found.keys()])].sort(byteOrder);
    const width = Math.max(10, ...groups.map((g) => g.length));
    console.log(`${'key group'.padEnd(width)}  ${'leveldb'.padStart(10)}  ${'postgres'.padStart(10)}`);
    let mismatches = 0;
    for (const group of groups) {
      const a = expected.get(group) ?? 0;
      const b = found.get(group) ?? 0;
      if (a !== b) mismatches++;
      console.log(`${group.padEnd(width)}  ${String(a).padStart(10)}  ${String(b).padStart(10)}${a === b ? '' : '  MISMATCH'}`);
    }
    const total = (m: Map<string, number>) => [...m.values()].reduce((x, y) => x + y, 0);
    console.log(`${'total'.padEnd(width)}  ${String(total(expected)).padStart(10)}  ${String(total(found)).padStart(10)}`);
    if (mismatches > 0) {
      console.error(`tollgate: ${mismatches} key groups differ between the two stores`);
      return 1;
    }
    console.log('every key group matches: the PostgreSQL store holds the embedded one');
    return 0;
  }
}

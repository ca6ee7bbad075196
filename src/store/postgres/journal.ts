/**
 * Journals on PostgreSQL (the contract is in store.ts): one table for every journal, a row per record.
 *
 * Appends are serialised per journal by the row of `tollgate_journal_seq` each one updates first: the
 * row stays locked until the append commits, and the next append waits for it. A reader's snapshot
 * therefore never holds a sequence number without every lower one that was committed, and reading
 * `after` a cursor in sequence order sees each entry exactly once. `last` comes from the same snapshot
 * as the entries, so a reader also knows how far it has read when the last numbers were duplicates
 * (they leave gaps). Appends of several nodes take turns; each is one multi-row statement, so a turn
 * is short next to its commit's flush.
 */
import type pg from 'pg';
import type { SchemaNames } from './schema.ts';
import type { Journal, JournalEntry, JournalRead, JournalReadOptions, JournalRecord, JournalTimeRange } from '../store.ts';

/** What a journal needs of its store: statements, and a durable (synchronously committed) transaction of one. */
export interface JournalAccess {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
  durably<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
  encode(text: string): string;
  decode(text: string): string;
}

interface EntryRow {
  seq: string;
  key: string;
  time: string;
  kind: string;
  stored_at: string;
  value: string;
}

const COLUMNS = 'seq, key, time, kind, stored_at, value';
/** No upper bound: beyond every sequence number (which stays below 2^53). */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

export class PostgresJournal implements Journal {
  private readonly sql: ReturnType<typeof statements>;

  constructor(
    private readonly db: JournalAccess,
    names: SchemaNames,
    /** The namespace whose journal this is. */
    private readonly log: string,
  ) {
    this.sql = statements(names);
  }

  async append(records: readonly JournalRecord[], storedAt: number): Promise<void> {
    if (records.length === 0) return;
    const { encode } = this.db;
    await this.db.durably({
      name: 'tg_journal_append',
      text: this.sql.append,
      values: [
        this.log,
        records.length,
        storedAt,
        records.map((r) => encode(r.key)),
        records.map((r) => r.time),
        records.map((r) => encode(r.kind)),
        records.map((r) => encode(r.value)),
      ],
    });
  }

  async read(after: number, options: JournalReadOptions): Promise<JournalRead> {
    let bound = options.upTo ?? UNBOUNDED;
    if (options.kind !== undefined) bound = Math.min(bound, after + options.limit);
    const { rows } = await this.db.query<EntryRow & { bound: string }>({
      name: 'tg_journal_read',
      text: this.sql.read,
      values: [this.log, after, bound, options.kind === undefined ? null : this.db.encode(options.kind), options.limit],
    });
    const entries = rows[0].seq === null ? [] : rows.map((r) => this.entry(r));
    const through = entries.length >= options.limit ? entries[entries.length - 1].seq : Math.max(after, Number(rows[0].bound));
    return { entries, through };
  }

  async last(): Promise<number> {
    const { rows } = await this.db.query<{ last: string }>({ name: 'tg_journal_last', text: this.sql.last, values: [this.log] });
    return rows.length === 0 ? 0 : Number(rows[0].last);
  }

  async byTime(range: JournalTimeRange): Promise<JournalEntry[]> {
    const [afterTime, afterSeq] = range.after ?? (range.reverse ? [UNBOUNDED, UNBOUNDED] : [-UNBOUNDED, 0]);
    const { rows } = await this.db.query<EntryRow>({
      name: range.reverse ? 'tg_journal_by_time_reverse' : 'tg_journal_by_time',
      text: range.reverse ? this.sql.byTimeReverse : this.sql.byTime,
      values: [this.log, range.from, range.to ?? UNBOUNDED, range.kind === undefined ? null : this.db.encode(range.kind), afterTime, afterSeq, range.limit],
    });
    return rows.map((r) => this.entry(r));
  }

  async deleteBefore(time: number, limit: number): Promise<number> {
    const { rowCount } = await this.db.query({ name: 'tg_journal_delete_before', text: this.sql.deleteBefore, values: [this.log, time, limit] });
    return rowCount ?? 0;
  }

  async import(entries: readonly JournalEntry[], floor: number): Promise<void> {
    const { encode } = this.db;
    await this.db.durably({
      name: 'tg_journal_import',
      text: this.sql.import,
      values: [
        this.log,
        Math.max(floor, ...entries.map((e) => e.seq)),
        entries.map((e) => e.seq),
        entries.map((e) => encode(e.key)),
        entries.map((e) => e.time),
        entries.map((e) => encode(e.kind)),
        entries.map((e) => e.storedAt),
        entries.map((e) => encode(e.value)),
      ],
    });
  }

  private entry(row: EntryRow): JournalEntry {
    const { decode } = this.db;
    return {
      seq: Number(row.seq),
      key: decode(row.key),
      time: Number(row.time),
      kind: decode(row.kind),
      storedAt: Number(row.stored_at),
      value: decode(row.value),
    };
  }
}

function statements(n: SchemaNames) {
  const byTime = (direction: 'ASC' | 'DESC', after: '>' | '<') =>
    `SELECT ${COLUMNS} FROM ${n.journal} WHERE log = $1 AND time >= $2 AND time < $3 AND ($4::text IS NULL OR kind = $4)
      AND (time, seq) ${after} ($5::bigint, $6::bigint) ORDER BY time ${direction}, seq ${direction} LIMIT $7`;
  return {
    // The sequence row first: locked until commit, it makes the next append of this journal wait.
    append: `WITH numbered AS (
        INSERT INTO ${n.journalSeq} AS s (log, last) VALUES ($1, $2) ON CONFLICT (log) DO UPDATE SET last = s.last + $2
        RETURNING last - $2 AS base
      )
      INSERT INTO ${n.journal} (log, seq, key, time, kind, stored_at, value)
      SELECT $1, numbered.base + r.n, r.key, r.time, r.kind, $3, r.value
      FROM numbered, unnest($4::text[], $5::bigint[], $6::text[], $7::text[]) WITH ORDINALITY AS r(key, time, kind, value, n)
      ON CONFLICT (log, key) DO NOTHING`,
    // One snapshot for the bound and the entries: every number up to the bound was committed or skipped.
    read: `WITH b AS (SELECT LEAST(COALESCE((SELECT last FROM ${n.journalSeq} WHERE log = $1), 0), $3::bigint) AS bound)
      SELECT e.*, b.bound FROM b LEFT JOIN LATERAL (
        SELECT ${COLUMNS} FROM ${n.journal} WHERE log = $1 AND seq > $2 AND seq <= b.bound AND ($4::text IS NULL OR kind = $4)
        ORDER BY seq LIMIT $5
      ) e ON true`,
    last: `SELECT last FROM ${n.journalSeq} WHERE log = $1`,
    byTime: byTime('ASC', '>'),
    byTimeReverse: byTime('DESC', '<'),
    deleteBefore: `DELETE FROM ${n.journal} WHERE log = $1 AND seq IN (SELECT seq FROM ${n.journal} WHERE log = $1 AND time < $2 LIMIT $3)`,
    import: `WITH imported AS (
        INSERT INTO ${n.journal} (log, seq, key, time, kind, stored_at, value)
        SELECT $1, * FROM unnest($3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::text[])
        ON CONFLICT DO NOTHING
      )
      INSERT INTO ${n.journalSeq} AS s (log, last) VALUES ($1, $2) ON CONFLICT (log) DO UPDATE SET last = GREATEST(s.last, $2)`,
  };
}

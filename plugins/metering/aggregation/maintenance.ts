/**
 * Background work of the writer, in bounded chunks so ingest keeps flowing between them, each chunk
 * one atomic batch: backfill of new meter generations over stored events (aggregates + progress
 * together, so a crash resumes exactly where the last committed chunk ended), deletion of retired
 * aggregate generations, and the retention purge of expired events and fully expired buckets.
 */
import type { Logger } from 'pino';
import type { BatchOp, Store } from '../../../src/pdk/index.ts';
import { LEVELS } from './aggregates.ts';
import type { StoredEvent } from '../shared/events.ts';
import { aggregatePrefix, aggregateSpace, escapePart, meterKey, padTime, rowPrefix, uniquePrefix } from '../shared/keys.ts';
import { addEvent, newDelta, type AggregateLedger } from './ledger.ts';
import type { MeterRecord, MeterRegistry } from '../meter/port.ts';
import type { StoredEvents } from '../storage/stored-events.ts';
import type { Writer } from '../storage/writer.ts';

export interface MaintenanceOptions {
  /** Events per backfill chunk. */
  backfillChunk: number;
  /** Deletions per clean-up or purge chunk. */
  deleteChunk: number;
  /** Time between retention purges, ms. */
  purgeIntervalMs: number;
}

const PROGRESS_LOG_INTERVAL_MS = 2_000;

export class Maintenance {
  /** Events older than this many days are purged (the longest retention of any metering instance). */
  retentionDays = 730;
  private loop: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private purgeTimer: NodeJS.Timeout | null = null;
  private lastProgressLog = 0;

  constructor(
    private readonly store: Store,
    private readonly events: StoredEvents,
    private readonly writer: Writer,
    private readonly ledger: AggregateLedger,
    private readonly meters: MeterRegistry,
    private readonly log: Logger,
    private readonly options: MaintenanceOptions,
  ) {}

  start(): void {
    this.purgeTimer = setInterval(() => this.purgeTick(), this.options.purgeIntervalMs);
    this.purgeTimer.unref();
    setTimeout(() => this.purgeTick(), 1_000).unref();
    this.kick();
  }

  /** Runs pending backfills and clean-ups in the background. */
  kick(): void {
    if (this.stopped) return;
    if (this.loop) {
      this.again = true;
      return;
    }
    this.loop = this.run().finally(() => {
      this.loop = null;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.purgeTimer) clearInterval(this.purgeTimer);
    await this.loop;
  }

  private async run(): Promise<void> {
    try {
      while (!this.stopped && (await this.step())) await new Promise((r) => setImmediate(r));
    } catch (err) {
      this.log.error({ err }, 'metering: background work failed; retrying later');
      setTimeout(() => this.kick(), 1_000).unref();
    }
  }

  private async step(): Promise<boolean> {
    const backfill = this.meters.pendingBackfills()[0];
    if (backfill) {
      await this.writer.exclusive(() => this.backfillChunk(backfill.id));
      return true;
    }
    const retired = this.meters.withRetired()[0];
    if (retired) {
      await this.writer.exclusive(() => this.cleanupChunk(retired.id));
      return true;
    }
    return false;
  }

  private async backfillChunk(id: string): Promise<void> {
    const record = this.meters.get(id);
    if (!record?.backfill || record.deleted_at) return;
    const progress = record.backfill;
    const compiled = this.meters.compiledOf(record);
    const delta = newDelta();
    const { events, through: cursor } = await this.events.ofType(escapePart(record.event_type), progress.cursor, progress.upTo, this.options.backfillChunk);
    for (const { seq, json } of events) addEvent(delta, compiled, seq, JSON.parse(json) as StoredEvent);
    const done = cursor >= progress.upTo;
    const aggregated = progress.aggregated + events.length;
    const next: MeterRecord = { ...record, backfill: done ? null : { ...progress, cursor, aggregated } };
    const batch = this.store.writeBatch();
    let committed: () => void;
    try {
      ({ committed } = await this.ledger.prepare(delta, batch));
      batch.put(meterKey(id), JSON.stringify(next));
    } catch (err) {
      await batch.discard();
      throw err;
    }
    try {
      await batch.write({ sync: true });
    } catch (err) {
      this.ledger.clear();
      throw err;
    }
    committed();
    this.meters.set(next);
    const now = Date.now();
    if (done || now - this.lastProgressLog >= PROGRESS_LOG_INTERVAL_MS) {
      this.lastProgressLog = now;
      const percent = progress.upTo === 0 ? 100 : Math.min(100, Math.round((done ? 1 : cursor / progress.upTo) * 100));
      this.log.info({ meter: record.key, generation: record.gen, events: aggregated, percent }, done ? 'metering: backfill complete' : 'metering: backfill progress');
    }
  }

  /** Deletes keys under prefixes, at most `budget`; returns how many. */
  private async deleteRange(ranges: { gte: string; lt: string }[], budget: number, ops: BatchOp[]): Promise<number> {
    let deleted = 0;
    for (const range of ranges) {
      if (deleted >= budget) break;
      for await (const [key] of this.store.scan({ ...range, limit: budget - deleted })) {
        ops.push({ type: 'del', key });
        deleted++;
      }
    }
    return deleted;
  }

  private async cleanupChunk(id: string): Promise<void> {
    const record = this.meters.get(id);
    if (!record || record.retired.length === 0) return;
    const space = aggregateSpace(id, record.retired[0]);
    const ops: BatchOp[] = [];
    const ranges = [`a/${space}/`, `r/${space}/`, `u/${space}/`].map((p) => ({ gte: p, lt: p + '\u{10FFFF}' }));
    const deleted = await this.deleteRange(ranges, this.options.deleteChunk, ops);
    this.ledger.forget(ops.map((o) => o.key));
    if (deleted < this.options.deleteChunk) {
      const next = { ...record, retired: record.retired.slice(1) };
      ops.push({ type: 'put', key: meterKey(id), value: JSON.stringify(next) });
      await this.store.batch(ops);
      this.meters.set(next);
    } else {
      await this.store.batch(ops);
    }
  }

  private purgeTick(): void {
    if (this.stopped) return;
    this.purgeExpired().catch((err) => this.log.error({ err }, 'metering: retention purge failed'));
  }

  /**
   * Deletes events whose time is older than the retention period, with their time index and dedupe
   * keys, and the aggregate buckets that lie entirely before it. Returns how many keys were deleted.
   */
  async purgeExpired(now = Date.now()): Promise<number> {
    const cutoff = Math.floor(now / 1000) - this.retentionDays * 86_400;
    let total = 0;
    for (;;) {
      const deleted = await this.writer.exclusive(() => this.purgeChunk(cutoff));
      total += deleted;
      if (deleted < this.options.deleteChunk || this.stopped) break;
      await new Promise((r) => setImmediate(r));
    }
    if (total > 0) this.log.info({ deleted: total, before: new Date(cutoff * 1000).toISOString() }, 'metering: purged expired events and aggregates');
    return total;
  }

  private async purgeChunk(cutoff: number): Promise<number> {
    const budget = this.options.deleteChunk;
    const ops: BatchOp[] = [];
    let deleted = await this.events.purge(cutoff, budget, ops);
    const ranges: { gte: string; lt: string }[] = [];
    for (const record of this.meters.all()) {
      const space = aggregateSpace(record.id, record.gen);
      for (const level of LEVELS) {
        const end = padTime(Math.max(0, cutoff - level.size + 1));
        for (const prefix of [
          aggregatePrefix(space, level.name),
          rowPrefix(space, level.name),
          uniquePrefix(space, level.name),
        ])
          ranges.push({ gte: prefix, lt: prefix + end });
      }
    }
    const before = ops.length;
    deleted += await this.deleteRange(ranges, budget - deleted, ops);
    this.ledger.forget(ops.slice(before).map((o) => o.key));
    if (ops.length > 0) await this.store.batch(ops);
    return deleted;
  }
}

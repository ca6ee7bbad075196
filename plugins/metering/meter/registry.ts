/**
 * The meters in memory: persisted records (`m/<id>`) with their aggregation state (generation of
 * their aggregates, backfill progress, generations to clean up), indexed by event type for the writer.
 * Only the writer's serial section changes records, so a record and the aggregates it describes are
 * always written in one batch.
 */
import type { Store } from '../../../src/pdk/index.ts';
import { METER_PREFIX } from '../shared/keys.ts';
import type { Meter } from './meter-model.ts';
import { compileMeter, type CompiledMeter } from './values.ts';

export interface Backfill {
  /** Events with a sequence number up to this one existed before the generation; the backfill covers them. */
  upTo: number;
  /** Last sequence number aggregated so far. */
  cursor: number;
  aggregated: number;
}

/** Share of the events stored before the generation that its backfill has covered, from 0 to 1. */
export function backfillRatio(backfill: Backfill): number {
  return backfill.upTo === 0 ? 1 : backfill.cursor / backfill.upTo;
}

export interface MeterRecord extends Meter {
  origin: 'api' | 'config';
  /** Generation of the aggregates in use (bumped when the aggregation changes, e.g. new dimensions). */
  gen: number;
  /** Progress of the current generation over stored events; null once complete. */
  backfill: Backfill | null;
  /** Generations whose aggregates are still to be deleted. */
  retired: number[];
}

const PUBLIC_FIELDS = [
  'id', 'key', 'name', 'description', 'labels', 'aggregation', 'event_type', 'events_from',
  'value_property', 'dimensions', 'created_at', 'updated_at', 'deleted_at',
] as const;

export function publicMeter(record: MeterRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of PUBLIC_FIELDS) {
    const v = record[f];
    if (v !== null && v !== undefined) out[f] = v;
  }
  if (Object.keys(record.labels ?? {}).length === 0) delete out.labels;
  return out;
}

export class MeterRegistry {
  private readonly records = new Map<string, MeterRecord>();
  private byType = new Map<string, CompiledMeter[]>();
  private readonly compiled = new Map<string, CompiledMeter>();
  private readonly readyWaiters = new Map<string, (() => void)[]>();

  /** Every stored meter record. */
  static async read(store: Store): Promise<MeterRecord[]> {
    const records: MeterRecord[] = [];
    for await (const [, value] of store.scan({ prefix: METER_PREFIX })) records.push(JSON.parse(value) as MeterRecord);
    return records;
  }

  async load(store: Store): Promise<void> {
    this.replace(await MeterRegistry.read(store));
  }

  /** The stored records, as a process that does not write them learns them (waiters of finished backfills are released). */
  replace(records: MeterRecord[]): void {
    for (const record of records) this.records.set(record.id, record);
    this.reindex();
    for (const record of records) if (!record.backfill || record.deleted_at) this.release(record.id);
  }

  all(): MeterRecord[] {
    return [...this.records.values()];
  }

  live(): MeterRecord[] {
    return this.all().filter((r) => r.deleted_at === null);
  }

  get(id: string): MeterRecord | undefined {
    return this.records.get(id);
  }

  /** By id (deleted ones too, as OpenMeter) or by key among live meters. */
  find(idOrKey: string): MeterRecord | undefined {
    return this.records.get(idOrKey) ?? this.live().find((r) => r.key === idOrKey);
  }

  liveByKey(key: string): MeterRecord | undefined {
    return this.live().find((r) => r.key === key);
  }

  /** Live meters whose aggregates take events of this type, compiled. */
  aggregating(type: string): CompiledMeter[] {
    return this.byType.get(type) ?? [];
  }

  compiledOf(record: MeterRecord): CompiledMeter {
    return this.compiled.get(record.id) ?? compileMeter(record, record.gen);
  }

  /** Records the new state of a meter (after it was committed). */
  set(record: MeterRecord): void {
    this.records.set(record.id, record);
    this.reindex();
    if (!record.backfill || record.deleted_at) this.release(record.id);
  }

  pendingBackfills(): MeterRecord[] {
    return this.live().filter((r) => r.backfill);
  }

  withRetired(): MeterRecord[] {
    return this.all().filter((r) => r.retired.length > 0);
  }

  /** Resolves true once the meter's aggregates cover every stored event, false after `timeoutMs`. */
  whenReady(id: string, timeoutMs: number): Promise<boolean> {
    const record = this.records.get(id);
    if (!record?.backfill || record.deleted_at) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref?.();
      const list = this.readyWaiters.get(id) ?? [];
      list.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
      this.readyWaiters.set(id, list);
    });
  }

  private release(id: string): void {
    const waiters = this.readyWaiters.get(id);
    this.readyWaiters.delete(id);
    waiters?.forEach((w) => w());
  }

  private reindex(): void {
    this.byType = new Map();
    this.compiled.clear();
    for (const record of this.live()) {
      const compiled = compileMeter(record, record.gen);
      this.compiled.set(record.id, compiled);
      const list = this.byType.get(record.event_type) ?? [];
      list.push(compiled);
      this.byType.set(record.event_type, list);
    }
  }
}

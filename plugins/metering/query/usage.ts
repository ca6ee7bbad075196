/**
 * The metering side of billing's usage interface (billing/shared/usage.ts): meters by id or key, the
 * quantity of a meter for a set of subjects over [from, to) through the query engine, and the
 * readings of every event the writer commits in this process.
 */
import type { CommittedReading, MeterInfo, RequestEvent, UsageQuery, UsageSource } from '../billing/port.ts';
import type { StoredEvent } from '../shared/events.ts';
import { formatQuantity } from '../shared/quantity.ts';
import { dimensionTexts, numericReading, type MeterRecord, type MeterRegistry } from '../meter/port.ts';
import type { CommittedListener, Writer } from '../storage/writer.ts';
import type { MeterQueries } from './customer-query.ts';
import { parseRfc3339 } from '../shared/time.ts';

type Readable = Pick<StoredEvent, 'type' | 'subject' | 'time' | 'data'>;

/** How long a billing read waits for a meter that is still aggregating stored events. */
const BACKFILL_WAIT_MS = 10_000;

/** What usage reads of the metering service. */
export interface UsageService extends MeterQueries {
  readonly meters: MeterRegistry;
  /** The writer of every event when this process is alone on its store, else null. */
  readonly soleWriter: Pick<Writer, 'exclusive'> | null;
  /** Called with each batch this process's single writer commits. */
  readonly committedListeners: Set<CommittedListener>;
}

export class MeterUsage implements UsageSource {
  constructor(private readonly service: UsageService) {}

  meter(idOrKey: string): MeterInfo | undefined {
    const record = this.service.meters.find(idOrKey);
    if (!record || record.deleted_at) return undefined;
    return { id: record.id, key: record.key, aggregation: record.aggregation, dimensions: Object.keys(record.dimensions).sort() };
  }

  async quantity(q: UsageQuery, options: { consistent?: boolean } = {}): Promise<string> {
    const record: MeterRecord | undefined = this.service.meters.get(q.meterId);
    // A deleted meter measures nothing any more (what it measured is on the invoices already issued).
    if (!record || record.deleted_at || q.from >= q.to) return '0';
    const query = (waitMs: number) =>
      this.service.query(record, { from: q.from, to: q.to, timeZone: 'UTC', groupBy: [], filters: { subject: { in: q.subjects }, ...q.filters } }, waitMs);
    const writer = options.consistent ? this.service.soleWriter : null;
    if (!writer) return (await query(BACKFILL_WAIT_MS)).data[0]?.value ?? '0';
    // A backfill runs in the writer's exclusive sections too: it is waited for outside this one.
    await this.service.meters.whenReady(record.id, BACKFILL_WAIT_MS);
    const result = await writer.exclusive(() => query(0));
    return result.data[0]?.value ?? '0';
  }

  readingsOf(events: readonly RequestEvent[], meterId: string): CommittedReading[] {
    const readings: CommittedReading[] = [];
    for (const e of events) {
      const time = parseRfc3339(e.time);
      if (time !== undefined) this.read({ type: e.type, subject: e.subject, time, data: e.data }, (id) => id === meterId, readings);
    }
    return readings;
  }

  /** What the meters `counted` names read from `e`, added to `readings` (as the aggregation will read it). */
  private read(e: Readable, counted: (meterId: string) => boolean, readings: CommittedReading[]): void {
    for (const m of this.service.meters.aggregating(e.type)) {
      if (!counted(m.meter.id) || e.time < m.eventsFrom) continue;
      const dims = dimensionTexts(m, e.data);
      const dimensions: Record<string, string> = {};
      m.dimensionNames.forEach((name, i) => (dimensions[name] = dims[i]));
      const quantity = numericReading(m, e.data);
      const value = quantity === undefined ? undefined : formatQuantity(quantity);
      readings.push({ meterId: m.meter.id, subject: e.subject, time: e.time, dimensions, value });
    }
  }

  onCommitted(watched: () => ReadonlySet<string>, listener: (readings: CommittedReading[]) => void): () => void {
    const onBatch: CommittedListener = (events) => {
      const meters = watched();
      if (meters.size === 0) return;
      const readings: CommittedReading[] = [];
      for (const { record } of events) this.read(record, (id) => meters.has(id), readings);
      if (readings.length > 0) {
        try {
          listener(readings);
        } catch {
          // Billing's cache must never fail the writer's commit path.
        }
      }
    };
    this.service.committedListeners.add(onBatch);
    return () => this.service.committedListeners.delete(onBatch);
  }
}

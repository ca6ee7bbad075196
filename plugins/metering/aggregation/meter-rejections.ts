/**
 * What meters could not take of the events they aggregate, counted per meter and reason, so that nothing
 * is left out of a meter silently (GET /metrics and the admin API's /metering/status, which the console
 * shows): `value_missing`, `value_invalid` — a sum, avg, min, max or latest meter found no usable value
 * (absent, not a number, out of the exact range); the event still counts in what the meter counts, not in
 * its value (OpenMeter's rule). Dimension values are never refused here: ingest refuses a posted one past
 * the limit, and request metering bounds every value a client chooses before the event is made.
 * Counted by the process that aggregates, once per committed event.
 */
import type { PreparedEvent } from '../shared/events.ts';
import { lookup, MISSING } from '../shared/jsonpath.ts';
import { numericReading, type CompiledMeter, type MeterRegistry } from '../meter/port.ts';

export type RejectionReason = 'value_missing' | 'value_invalid';

export interface Rejections {
  meter: string;
  reason: RejectionReason;
  events: number;
}

/** Why meter `m` cannot take the event's value, if it cannot. */
function reasonOf(m: CompiledMeter, e: PreparedEvent): RejectionReason | undefined {
  const data = e.record.data;
  if (!m.valuePath || m.aggregation === 'count' || m.aggregation === 'unique_count' || numericReading(m, data) !== undefined) return undefined;
  return lookup(data, m.valuePath) === MISSING ? 'value_missing' : 'value_invalid';
}

export class MeterRejections {
  private readonly counts = new Map<string, Rejections>();

  constructor(
    private readonly meters: MeterRegistry,
    /** Called for each rejection counted (the plugin's metric). */
    private readonly counted: (rejection: Omit<Rejections, 'events'>) => void,
  ) {}

  /** Counts what the meters could not take of a committed batch. */
  record(events: readonly PreparedEvent[]): void {
    for (const e of events) {
      for (const m of this.meters.aggregating(e.record.type)) {
        const reason = e.record.time < m.eventsFrom ? undefined : reasonOf(m, e);
        if (!reason) continue;
        const key = `${m.meter.key}\u0000${reason}`;
        const entry = this.counts.get(key) ?? { meter: m.meter.key, reason, events: 0 };
        entry.events++;
        this.counts.set(key, entry);
        this.counted({ meter: m.meter.key, reason });
      }
    }
  }

  /** This process's counts since it started. */
  snapshot(): Rejections[] {
    return [...this.counts.values()].map((r) => ({ ...r }));
  }
}

/** Several processes' counts as one (a node's). */
export function summed(snapshots: readonly Rejections[][]): Rejections[] {
  const total = new Map<string, Rejections>();
  for (const r of snapshots.flat()) {
    const key = `${r.meter}\u0000${r.reason}`;
    const entry = total.get(key) ?? { meter: r.meter, reason: r.reason, events: 0 };
    entry.events += r.events;
    total.set(key, entry);
  }
  return [...total.values()].sort((a, b) => (a.meter === b.meter ? (a.reason < b.reason ? -1 : 1) : a.meter < b.meter ? -1 : 1));
}

/**
 * Listing stored events (`GET /events`, OpenMeter's v1 `GET /api/v1/events`), newest event time first,
 * each with what every meter that matches its type cannot use of it.
 */
import type { StoredEvent } from '../shared/events.ts';
import type { StoredEvents } from '../storage/stored-events.ts';
import { eventProblem, type MeterRegistry } from '../meter/port.ts';
import { escapePart } from '../shared/keys.ts';
import { formatUtc } from '../shared/time.ts';

export interface EventFilters {
  subject?: string;
  type?: string;
  source?: string;
  id?: string;
  from?: number;
  to?: number;
}

export interface EventPage {
  items: Record<string, unknown>[];
  next: string | null;
}

/** What a listing asks of the service: read-your-writes, and the oldest event time still kept. */
export interface ListingHost {
  caughtUp(): Promise<void>;
  retentionStart(): number;
}

export class EventListing {
  constructor(
    private readonly events: StoredEvents,
    private readonly meters: MeterRegistry,
    private readonly host: ListingHost,
  ) {}

  /** Stored events, newest event time first, `after` = cursor of the previous page. */
  async list(filters: EventFilters, size: number, after?: string): Promise<EventPage> {
    await this.host.caughtUp();
    const range = {
      from: Math.max(filters.from ?? 0, this.host.retentionStart()),
      to: filters.to,
      typeEscaped: filters.type === undefined ? undefined : escapePart(filters.type),
    };
    const items: Record<string, unknown>[] = [];
    for await (const row of this.events.newestFirst(range, after)) {
      const event = JSON.parse(row.json) as StoredEvent;
      if (filters.subject !== undefined && event.subject !== filters.subject) continue;
      if (filters.source !== undefined && event.source !== filters.source) continue;
      if (filters.id !== undefined && event.id !== filters.id) continue;
      items.push(this.listedEvent(event, row.storedAt));
      if (items.length >= size) return { items, next: row.cursor };
    }
    return { items, next: null };
  }

  private listedEvent(event: StoredEvent, storedAt: number): Record<string, unknown> {
    const ce: Record<string, unknown> = {
      specversion: '1.0',
      id: event.id,
      source: event.source,
      type: event.type,
      subject: event.subject,
      time: formatUtc(event.time),
    };
    if (event.datacontenttype) ce.datacontenttype = event.datacontenttype;
    if (event.dataschema) ce.dataschema = event.dataschema;
    if (event.data !== undefined) ce.data = event.data;
    return {
      event: ce,
      ingested_at: new Date(event.ingested_at).toISOString(),
      stored_at: new Date(storedAt).toISOString(),
      validation_errors: this.validationErrors(event),
    };
  }

  private validationErrors(event: StoredEvent): { code: string; message: string }[] {
    // One error per matching meter that cannot use the event (none when no meter matches), as OpenMeter lists them.
    const errors: { code: string; message: string }[] = [];
    for (const m of this.meters.live()) {
      const problem = m.event_type === event.type ? eventProblem(m, event.data) : undefined;
      if (problem) errors.push({ code: 'validation_error', message: problem });
    }
    return errors;
  }
}

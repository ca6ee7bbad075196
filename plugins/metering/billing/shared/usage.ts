/**
 * The only way billing reaches usage: a narrow interface the metering query service implements
 * (plugins/metering/query/usage.ts). Billing never reads events or aggregate keys itself.
 */

/** What billing needs to know of a meter. */
export interface MeterInfo {
  id: string;
  key: string;
  aggregation: string;
  /** Dimension names a feature may filter on. */
  dimensions: string[];
}

/** A feature's filter on one dimension. */
export type DimensionFilter = { eq: string } | { in: string[] };

export interface UsageQuery {
  meterId: string;
  /** Events of any of these subjects. */
  subjects: string[];
  filters: Record<string, DimensionFilter>;
  /** Event times, whole seconds: [from, to). */
  from: number;
  to: number;
}

/** One event committed by this process, as one meter reads it. */
export interface CommittedReading {
  meterId: string;
  subject: string;
  /** Event time, seconds. */
  time: number;
  /** Dimension values by name. */
  dimensions: Record<string, string>;
  /** The value as decimal text (sum, latest); undefined when the meter takes none (count) or the event has none. */
  value: string | undefined;
}

/** An event not yet committed, as a producer in this process hands it to the metering store. */
export interface RequestEvent {
  type: string;
  subject: string;
  /** RFC 3339. */
  time: string;
  data?: Record<string, unknown> | null;
}

export interface UsageSource {
  /** A live meter by id or key. */
  meter(idOrKey: string): MeterInfo | undefined;
  /**
   * The meter's aggregate over the query, as an exact decimal string ('0' when nothing matched). With
   * `consistent`, where this process commits every event itself (alone on its store), no commit lands
   * while it reads: the answer holds exactly the commits `onCommitted` reported before it resolves.
   */
  quantity(query: UsageQuery, options?: { consistent?: boolean }): Promise<string>;
  /** What the meter will read from these events once committed (what `onCommitted` will report of them). */
  readingsOf(events: readonly RequestEvent[], meterId: string): CommittedReading[];
  /**
   * Calls `listener` after each commit of ingested events in this process with the readings of the
   * meters `watched()` names (read at each commit). Returns a function that stops it.
   */
  onCommitted(watched: () => ReadonlySet<string>, listener: (readings: CommittedReading[]) => void): () => void;
}

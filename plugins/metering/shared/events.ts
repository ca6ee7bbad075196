/**
 * An event as ingest validated it and storage keeps it: what ingest, the writer, the aggregation and the
 * queries all read.
 */

/** What is stored per event (`e/...`), times in Unix seconds / ms. */
export interface StoredEvent {
  id: string;
  source: string;
  type: string;
  subject: string;
  /** Event time, seconds. */
  time: number;
  datacontenttype?: string;
  dataschema?: string;
  data?: Record<string, unknown> | null;
  /** Receive time, ms. */
  ingested_at: number;
}

/** A validated event ready for the writer. */
export interface PreparedEvent {
  record: StoredEvent;
  /** JSON of `record`. */
  json: string;
  typeEscaped: string;
  dedupe: string;
  /** Its number in the journal, once appended there (storage/stored-events.ts): the aggregator folds it under this number. */
  seq?: number;
}

/**
 * The ingest domain's port: validating events and running collectors, for the HTTP mappings and the
 * composition. Ingestion commits through an EventSink (the metering service), not through storage/.
 */
export { Ingestion } from './ingest.ts';
export type { EventSink } from './ingest.ts';
export { prepareEvents } from './events.ts';
export { collectorProblems, Collectors, mappingLimits } from './collectors.ts';
export type { CollectorDefinition, CollectorRecord } from './collectors.ts';

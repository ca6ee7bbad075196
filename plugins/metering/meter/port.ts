/**
 * The meter domain's port: what other domains, the HTTP mappings and the composition (service.ts) may use
 * of meters. Everything else in meter/ is its own.
 */

// The model: definitions as the admin API and gateway.yaml give them.
export { AGGREGATIONS, meterDefinitionFrom, validateMeterCreate, validateMeterUpdate } from './meter-model.ts';
export type { Aggregation } from './meter-model.ts';
// The registry of this process's meters, and the catalogue that changes them (service.ts composes both).
export { backfillRatio, MeterRegistry, publicMeter } from './registry.ts';
export type { MeterRecord } from './registry.ts';
export { MeterCatalogue, METERS_TOPIC } from './catalogue.ts';
export { MeterCommands } from './meter-commands.ts';
// What a compiled meter reads of an event: ingest checks it, the aggregation and the queries count it.
export {
  boundedText, compileMeter, dimensionText, dimensionTexts, distinctReading, eventProblem, numericReading, readEvent,
  readingProblems,
} from './values.ts';
export type { CompiledMeter } from './values.ts';

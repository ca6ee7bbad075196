/**
 * The aggregation domain's port. The composition (service.ts) runs the aggregator, the ledger the single
 * writer folds events into and the maintenance; the admin API reads the meters' rejections; and the query
 * engine reads the stored roll-up states and windows (the read model the aggregation writes).
 */

// The aggregator and what works beside it (service.ts).
export { Aggregator, processOf } from './aggregator.ts';
export type { AggregatorStatus, Term } from './aggregator.ts';
export { AggregateLedger, writerAggregates } from './ledger.ts';
export { Maintenance } from './maintenance.ts';
export { MeterRejections, summed } from './meter-rejections.ts';
export type { Rejections } from './meter-rejections.ts';
// The read model: roll-up states as stored, and the windows that cover a query (query/).
export {
  BASE_SIZE, emptyState, eventState, LEVELS, merge, mergeArray, mergeEncoded, ROW_LEVELS, ROW_OVERFLOW, splitRow, valueOf,
} from './aggregates.ts';
export type { State, StoredState } from './aggregates.ts';
export { ceilMinute, coverSpan, floorMinute, GRANULARITIES, windowEnd, windowStart } from './windows.ts';
export type { Granularity, LevelRange } from './windows.ts';

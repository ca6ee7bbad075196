/**
 * The query domain's port: usage queries (their request, by customer, near the data), the event listing,
 * and billing's usage source (MeterUsage), for the HTTP mappings and the composition.
 */
export { CUSTOMER_DIMENSION, parseQuery } from './query-request.ts';
export type { MeterQuery } from './query-request.ts';
export { meteringProcedures } from './query.ts';
export type { QueryResult } from './query.ts';
export { UsageQueries } from './customer-query.ts';
export { EventListing } from './event-listing.ts';
export type { EventFilters } from './event-listing.ts';
export { MeterUsage } from './usage.ts';
export type { UsageService } from './usage.ts';

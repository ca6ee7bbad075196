/**
 * The entitlement domain's port: decisions and grants for billing's composition and scheduler, the access
 * cache and the admission ledgers the plugin wires, and the enforcer's types other plugins see.
 */
export { EntitlementService, grantsOf, usagePeriodAt } from './entitlements.ts';
export type { AccessValue, Grant } from './entitlements.ts';
export { AccessCache } from './access-cache.ts';
export type { AccessDecision, Admission, EntitlementEnforcer } from './access-cache.ts';
export { NodeLedger, ProcessLedger, StoreLedger } from './admissions.ts';
export type { AdmissionLedger, Reservation } from './admissions.ts';

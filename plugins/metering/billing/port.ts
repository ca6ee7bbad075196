/**
 * Billing's port, for metering and the plugin: the facade (Billing) and what the plugin wires around it
 * (declared entities, admission ledgers), the types other plugins see through public.ts, and the usage
 * interface billing owns and metering's query domain implements. Billing's HTTP mapping (http/) is
 * mounted by the plugin's handler.
 */
export { Billing } from './billing.ts';
export { BillingError } from './shared/errors.ts';
export { MAX_PORTAL_TOKEN_LIST, portalTokenExpired, validatePortalToken } from './customer/port.ts';
export type { PortalToken } from './customer/port.ts';
export { DeclaredSync } from './declared.ts';
export { billingEntities, collectionPeriodProblem } from './entities.ts';
export { parseCollectionPeriod } from './shared/calendar.ts';
export { NodeLedger, ProcessLedger, StoreLedger } from './entitlement/port.ts';
export type { AccessDecision, AccessValue, Admission, AdmissionLedger, EntitlementEnforcer, Grant, Reservation } from './entitlement/port.ts';
export type { CommittedReading, MeterInfo, RequestEvent, UsageQuery, UsageSource } from './shared/usage.ts';

/** The customer domain's port, for billing's other domains, its composition and its HTTP mapping. */
export { CustomerService, publicCustomer, usageSubjects, validateCustomer } from './customers.ts';
export type { Customer, CustomerDefinition, Origin } from './customers.ts';
export { liveSubscriptionOf } from './subscription-slot.ts';
export type { Slot } from './subscription-slot.ts';
export { SubjectService, validateSubjects } from './subjects.ts';
export type { SubjectDefinition, SubjectRecord } from './subjects.ts';
export { MAX_PORTAL_TOKEN_LIST, PortalTokenService, portalTokenExpired, validatePortalToken } from './portal-tokens.ts';
export type { PortalToken } from './portal-tokens.ts';

/**
 * The notification domain's port: the composition (Notifications) and what the plugin wires around it
 * (billing's facts, an interface this domain owns), and the records its v1 HTTP mapping answers with.
 */
export { Notifications } from './notification.ts';
export type { BillingFacts, EntitlementSnapshot, IssuedInvoice } from './evaluator.ts';
export type { EventFilter, EventView, NotificationService } from './notifications.ts';
export type { Channel, DeliveryStatus, Rule } from './model.ts';

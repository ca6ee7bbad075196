/** The subscription domain's port, for billing's other domains, its composition and its HTTP mapping. */
export { billingPeriod, billingPeriodAt, publicSubscription, SubscriptionService, subscriptionStatus } from './subscriptions.ts';
export type { BillingPeriod, CustomerRef, Item, Subscription, Timing } from './subscriptions.ts';

/**
 * The customer's subscription slot: one key per customer naming its latest subscription and when that
 * one ends. Creating a subscription takes the slot in the same commit as the subscription, and only
 * when the slot's subscription has ended, so of concurrent creates for one customer exactly one wins
 * on every node; deleting the customer reads the slot in its commit too.
 */
import { keys, type Transaction } from '../shared/store.ts';

export interface Slot {
  subscription_id: string;
  /** When the subscription ends (null: open-ended). */
  active_to: string | null;
}

/** The id of the customer's subscription that has not ended at `now`, if any (read into `tx`). */
export async function liveSubscriptionOf(tx: Transaction, customerId: string, now: number): Promise<string | undefined> {
  const slot = await tx.get<Slot>(keys.slot(customerId));
  if (!slot) return undefined;
  return slot.active_to === null || Date.parse(slot.active_to) > now ? slot.subscription_id : undefined;
}

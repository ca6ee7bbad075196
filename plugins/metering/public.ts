/**
 * What other plugins may use of the metering plugin (its services' types, the errors they throw, the
 * reservation a request carries): the rest of this folder can change without them noticing.
 */
import type { RequestView } from '../../src/pdk/index.ts';
import type { Reservation } from './billing/admissions.ts';

export type { AccessDecision, Admission, EntitlementEnforcer } from './billing/access-cache.ts';
export type { Reservation } from './billing/admissions.ts';
export type { LocalIngest, RefusedEvent } from './service.ts';
export { AggregationLagError, QueueFullError } from './errors.ts';
export { MAX_DIMENSION_VALUE_LENGTH, MAX_IDENTIFIER_LENGTH } from './limits.ts';
export { boundedText } from './values.ts';

/** Where entitlement-enforcement leaves a request's reservation, for the plugin that meters the request. */
const RESERVATION = 'billing:reservation';

export function holdReservation(ctx: RequestView, reservation: Reservation): void {
  ctx.shared[RESERVATION] = reservation;
}

/** The reservation an admitted request carries (none without a metered limit on its route). */
export function reservationOf(ctx: RequestView): Reservation | undefined {
  return ctx.shared[RESERVATION] as Reservation | undefined;
}

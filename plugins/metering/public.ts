/**
 * What other plugins may use of the metering plugin (its services' types, the codes of the errors they
 * throw, the reservation a request carries): the rest of this folder can change without them noticing.
 */
import type { RequestView } from '../../src/pdk/index.ts';
import type { Reservation } from './billing/port.ts';

export type { AccessDecision, Admission, EntitlementEnforcer, Reservation } from './billing/port.ts';
export type { LocalIngest, RefusedEvent } from './service.ts';
/** Compared with a rejection's `code` (the errors' classes stay metering's own). */
export { AGGREGATION_LAG_CODE, QUEUE_FULL_CODE } from './shared/errors.ts';
export { MAX_DIMENSION_VALUE_LENGTH, MAX_IDENTIFIER_LENGTH } from './shared/limits.ts';
export { boundedText } from './meter/port.ts';

/** Where entitlement-enforcement leaves a request's reservation, for the plugin that meters the request. */
const RESERVATION = 'billing:reservation';

export function holdReservation(ctx: RequestView, reservation: Reservation): void {
  ctx.shared[RESERVATION] = reservation;
}

/** The reservation an admitted request carries (none without a metered limit on its route). */
export function reservationOf(ctx: RequestView): Reservation | undefined {
  return ctx.shared[RESERVATION] as Reservation | undefined;
}

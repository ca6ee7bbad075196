/** Quota counters: usage reserved against a limit before the work it pays for, adjusted once its amount is known. */
export { adjustedOn, answerOf, difference, QuotaCounters, reserveOn, type QuotaAnswer } from '../process/quota-counters.ts';

/**
 * Admissions: what a metered entitlement's limit let through in its usage period, counted when each
 * request is decided, so that a hard limit is hard under any burst. A request reserves its amount (1 for
 * a count meter; 0 for a sum meter, whose amount is known only at the end) before it goes upstream; when
 * it ends, the reservation is settled with what its events add to the meter (0 for a request that was
 * refused later or not answered), so the counter holds exactly the usage admitted and still in flight.
 *
 * The counter is the node's or the cluster's, wherever the requests of one customer may land:
 * - one process: its memory (QuotaCounters, no promise on the request path);
 * - a node of worker processes on the embedded store: the primary's memory (NodeExchange.reserve);
 * - PostgreSQL, where other nodes share the database: a store entry changed only by commitIf.
 * A reservation also raises the counter to the usage the meter has committed (`floor`): usage the
 * counter never saw (posted events, a restart's earlier run) counts against the limit too.
 */
import type { Logger } from 'pino';
import type { NodeExchange, QuotaRequest, QuotaReservation, Store } from '../../../../src/pdk/index.ts';
import { adjustedOn, answerOf, difference, QuotaCounters, reserveOn, type QuotaAnswer } from '../../../../src/pdk/index.ts';
import { Decimal, ZERO } from '../shared/money.ts';
import type { RequestEvent } from '../shared/usage.ts';

export interface AdmissionLedger {
  /** Reserves one request's amount (`request.requests` is 1). */
  reserve(request: QuotaRequest): QuotaAnswer | Promise<QuotaAnswer>;
  /** Adds `delta` (decimal text; negative releases) to a counter until `expiresAt`; never fails the caller. */
  adjust(key: string, delta: string, expiresAt: number): void;
}

/** One process alone: its own counters, decided synchronously. */
export class ProcessLedger implements AdmissionLedger {
  private readonly counters = new QuotaCounters();

  reserve(request: QuotaRequest): QuotaAnswer {
    return answerOf(this.counters.reserve(request), 0, request);
  }

  adjust(key: string, delta: string): void {
    this.counters.adjust(key, delta);
  }
}

/** What waits for a counter's next round: reservations, and adjustments summed. */
interface Round {
  request: QuotaRequest | undefined;
  waiting: ((round: QuotaReservation) => void)[];
  failed: ((err: unknown) => void)[];
  delta: Decimal;
  expiresAt: number;
}

/** Attempts of a round whose store write keeps failing (the store is down): then its adjustment is logged and given up. */
const ROUND_ATTEMPTS = 5;

/**
 * Counters outside this process, changed in rounds: what arrives for one counter while a round is under
 * way waits and goes together in the next one. Under a burst a process costs one round trip per counter at
 * a time, not one per request; the n-th request of a round is reserved when n fit. An adjustment (a
 * settlement) goes in the round after it, so a request decided after another ended here sees its release.
 */
abstract class RoundLedger implements AdmissionLedger {
  private readonly next = new Map<string, Round>();
  private readonly busy = new Set<string>();

  constructor(private readonly log: Logger) {}

  /** Applies a round: the summed adjustment first, then the reservation of its requests (if any). */
  protected abstract apply(key: string, delta: string, request: QuotaRequest | undefined, expiresAt: number): Promise<QuotaReservation | undefined>;

  reserve(request: QuotaRequest): Promise<QuotaAnswer> {
    const round = this.roundOf(request.key, request.expiresAt);
    // The latest floor of the counter's requests stands for the round (it only grows).
    round.request = { ...request, requests: (round.request?.requests ?? 0) + 1 };
    const mine = round.request.requests - 1;
    const answer = new Promise<QuotaAnswer>((resolve, reject) => {
      round.waiting.push((all) => resolve(answerOf(all, mine, request)));
      round.failed.push(reject);
    });
    this.start(request.key);
    return answer;
  }

  adjust(key: string, delta: string, expiresAt: number): void {
    const round = this.roundOf(key, expiresAt);
    round.delta = round.delta.plus(delta);
    this.start(key);
  }

  private roundOf(key: string, expiresAt: number): Round {
    let round = this.next.get(key);
    if (!round) this.next.set(key, (round = { request: undefined, waiting: [], failed: [], delta: ZERO, expiresAt }));
    round.expiresAt = Math.max(round.expiresAt, expiresAt);
    return round;
  }

  private start(key: string): void {
    if (!this.busy.has(key)) void this.drain(key);
  }

  private async drain(key: string): Promise<void> {
    this.busy.add(key);
    for (let round; (round = this.next.get(key)); ) {
      this.next.delete(key);
      await this.run(key, round);
    }
    this.busy.delete(key);
  }

  private async run(key: string, round: Round): Promise<void> {
    for (let failures = 0; ; ) {
      try {
        const reservation = await this.apply(key, round.delta.toFixed(), round.request, round.expiresAt);
        for (const answer of round.waiting) answer(reservation!);
        return;
      } catch (err) {
        // Waiting requests are answered at once (undecided); an adjustment is tried again for a while.
        for (const fail of round.failed) fail(err);
        round.waiting = [];
        round.failed = [];
        round.request = undefined;
        if (round.delta.isZero()) return;
        if (++failures >= ROUND_ATTEMPTS) {
          // A release lost leaves the counter high (fewer admissions, never more); a settlement above the reservation, low.
          this.log.error({ err, counter: key, delta: round.delta.toFixed() }, 'billing: an admission counter could not be adjusted');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * failures));
      }
    }
  }
}

/** A node of several processes on the embedded store: the counters are the primary's (its messages keep their order). */
export class NodeLedger extends RoundLedger {
  constructor(
    private readonly node: NodeExchange,
    log: Logger,
  ) {
    super(log);
  }

  protected async apply(key: string, delta: string, request: QuotaRequest | undefined): Promise<QuotaReservation | undefined> {
    if (delta !== '0') this.node.adjust(key, delta);
    return request && this.node.reserve(request);
  }
}

/**
 * A store shared by several nodes (PostgreSQL): one entry per counter, changed only by commitIf from the
 * value just read, so no reservation or release of any process is lost or counted twice.
 */
export class StoreLedger extends RoundLedger {
  constructor(
    private readonly store: Store,
    log: Logger,
  ) {
    super(log);
  }

  protected async apply(key: string, delta: string, request: QuotaRequest | undefined, expiresAt: number): Promise<QuotaReservation | undefined> {
    for (;;) {
      const current = await this.store.get(key);
      // A counter gone has outlived its period: nothing decides on it any more, and nothing is left to release.
      const adjusted = current === undefined || delta === '0' ? current : adjustedOn(current, delta);
      const { next, reservation } = request ? reserveOn(adjusted, request) : { next: adjusted, reservation: undefined };
      if (next === current) return reservation;
      const ttlMs = Math.max(1, expiresAt - Date.now());
      if (await this.store.commitIf([{ key, value: current }], [{ type: 'put', key, value: next!, ttlMs }])) return reservation;
    }
  }
}

/**
 * One admitted request's reservation. The request's events, as they go into this gateway's metering store,
 * are told to it (metering-and-billing's log phase); once every plugin has logged the request it is settled:
 * the counter gets what those events add to the meter instead of what was reserved.
 */
export class Reservation {
  private readonly events: RequestEvent[] = [];
  /** What the counter holds for this request now (decimal text): the reserved amount, 0 once given back. */
  private held: string;
  private settled = false;

  constructor(
    private readonly ledger: AdmissionLedger,
    private readonly request: QuotaRequest,
    /** What events add to the counted meter (their readings that match the entitlement and its period), decimal text. */
    private readonly amountOf: (events: readonly RequestEvent[]) => string,
  ) {
    this.held = request.amount;
  }

  /**
   * The gateway answers the request itself (a later plugin refused it, the upstream could not be reached):
   * its place goes back before the answer does, so the client's next request, on whichever process of the
   * node, finds it free. Settling corrects it if the answer is metered after all (meter_gateway_answers).
   */
  unanswered(): void {
    if (this.settled || this.held === '0') return;
    this.ledger.adjust(this.request.key, difference('0', this.held), this.request.expiresAt);
    this.held = '0';
  }

  /** Events of the request that this gateway's metering store will count. */
  metered(events: readonly RequestEvent[]): void {
    this.events.push(...events);
  }

  settle(): void {
    if (this.settled) return;
    this.settled = true;
    const delta = difference(this.amountOf(this.events), this.held);
    if (delta !== '0') this.ledger.adjust(this.request.key, delta, this.request.expiresAt);
  }
}

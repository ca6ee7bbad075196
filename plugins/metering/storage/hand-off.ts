/**
 * Ingest on a node of worker processes on LevelDB. The primary owns the database and runs the single
 * writer (service.ts, the store procedure `metering.handOff`), so a worker hands each group commit of
 * its events over and acknowledges once the primary's batch is durable: one write per event, and one
 * crossing of the socket (an inbox entry would be written, read back by the aggregator and written again).
 * While the primary does not aggregate (its term is starting, e.g. an earlier run's lease has yet to
 * lapse), the events go into this process's inbox instead, which the primary drains once it does.
 */
import type { Store } from '../../../src/pdk/index.ts';
import type { PreparedEvent } from '../shared/events.ts';
import { AggregationLagError, EarlierBatchFailedError, LeaseLostError, QueueFullError, WriterClosedError } from '../shared/errors.ts';
import { linesOf, type ProcessInbox } from './inbox.ts';
import type { Inbox } from './writer.ts';

/** The store procedure that commits a hand-off in the primary: `[lines]` in, the indices of the events counted out. */
export const HAND_OFF_PROCEDURE = 'metering.handOff';

/** Hand-offs of one worker in flight at once. */
const HAND_OFFS_IN_FLIGHT = 4;

/** The refusals a hand-off may meet in the primary, by code: the same class here, so the producer gets the same answer. */
const RETRIED = new Map(
  [QueueFullError, AggregationLagError, EarlierBatchFailedError, WriterClosedError, LeaseLostError].map((Refusal) => [new Refusal().code as string, Refusal]),
);

export class PrimaryHandOff implements Inbox {
  /** The primary's writer orders and deduplicates them: a few in flight keep its group commit full. */
  readonly concurrentPuts = HAND_OFFS_IN_FLIGHT;

  constructor(
    private readonly store: Store,
    /** Where events go while the primary does not aggregate. */
    private readonly fallback: ProcessInbox,
  ) {}

  /** Only what waits in the fallback inbox can lag: a hand-off is counted when it is acknowledged. */
  refusal(adding: number, queueLimit: number): Promise<Error | undefined> {
    return this.fallback.refusal(adding, queueLimit);
  }

  async put(events: readonly PreparedEvent[]): Promise<readonly PreparedEvent[] | void> {
    let counted: number[];
    try {
      counted = (await this.store.nearData(HAND_OFF_PROCEDURE, [linesOf(events)])) as number[];
    } catch (err) {
      const Refusal = RETRIED.get(codeOf(err));
      if (Refusal === LeaseLostError) return this.fallback.put(events);
      throw Refusal ? new Refusal() : err;
    }
    return counted.map((index) => events[index]);
  }
}

/** The code of an error from the primary (the store's wire keeps it in `cause`). */
function codeOf(err: unknown): string {
  const { cause, code } = err as { cause?: { code?: unknown }; code?: unknown };
  const wired = cause?.code ?? code;
  return typeof wired === 'string' ? wired : '';
}

/**
 * The dead letters on the admin API, for operators and the console (the admin listener is the
 * operator's: no authentication of its own). Kong's list shape and paging, Kong's errors:
 *
 *   GET    /metering-and-billing/dead-letters[?queue=…]     the letters, oldest first, without their events
 *   GET    /metering-and-billing/dead-letters/{id}          one letter with its events
 *   POST   /metering-and-billing/dead-letters/{id}/redeliver  its events back at the head of its queue (202)
 *   DELETE /metering-and-billing/dead-letters/{id}          deleted: its events are never delivered (204;
 *                                                           logged, and counted as dropped with reason `deleted`)
 */
import type { Logger } from 'pino';
import { HttpError, NotFoundError, page, type AdminReply, type AdminRoute } from '../../src/pdk/index.ts';
import type { DeadLetter, DeadLetterStore } from './dead-letters.ts';
import type { RequestMeteringMetrics } from './metrics.ts';

const PATH = '/metering-and-billing/dead-letters';

/** Where a letter's events go back to: the queue of that name, when this process sends it to an endpoint. */
export interface Redelivery {
  redeliver(id: string): Promise<DeadLetter | undefined>;
}

/** A re-delivery into a queue no plugin instance sends to an ingest endpoint any more (the configuration changed). */
export class QueueNotServedError extends HttpError {
  override readonly name = 'QueueNotServedError';
  override readonly code = 'TOLLGATE_ERR_DEAD_LETTER_QUEUE_NOT_SERVED';

  constructor(queue: string) {
    super(
      409,
      `no metering-and-billing instance sends the queue '${queue}' to an ingest endpoint: its events would wait for ever ` +
        '(put the queue back in the configuration, or delete the letter)',
    );
  }

  override body(): object {
    return { code: this.code, message: this.message };
  }
}

export interface DeadLetterAdminDeps {
  letters: DeadLetterStore;
  queueNamed(name: string): Redelivery | undefined;
  metrics: RequestMeteringMetrics;
  log: Logger;
}

export function deadLetterAdminRoutes({ letters, queueNamed, metrics, log }: DeadLetterAdminDeps): AdminRoute[] {
  const existing = async (id: string): Promise<DeadLetter> => {
    const letter = await letters.get(id);
    if (!letter) throw new NotFoundError();
    return letter;
  };
  return [
    {
      method: 'GET',
      path: PATH,
      handler: async (req) => page((await letters.list(req.query.get('queue') ?? undefined)).map(view), req, PATH),
    },
    {
      method: 'GET',
      path: `${PATH}/:id`,
      handler: async (req) => {
        const letter = await existing(req.params.id);
        const events = await letters.events(letter.id);
        if (events === undefined) throw new NotFoundError();
        return { status: 200, body: { ...view(letter), events: events.split('\n').map((line) => JSON.parse(line)) } };
      },
    },
    {
      method: 'POST',
      path: `${PATH}/:id/redeliver`,
      handler: async (req): Promise<AdminReply> => {
        const { queue } = await existing(req.params.id);
        const into = queueNamed(queue);
        if (!into) throw new QueueNotServedError(queue);
        const letter = await into.redeliver(req.params.id);
        if (!letter) throw new NotFoundError();
        return { status: 202, body: view(letter) };
      },
    },
    {
      method: 'DELETE',
      path: `${PATH}/:id`,
      handler: async (req) => {
        const letter = await letters.take(req.params.id);
        if (!letter) throw new NotFoundError();
        metrics.dropped.inc({ queue: letter.queue, reason: 'deleted' }, letter.event_count);
        const what = `dead letter ${letter.id} deleted: its ${letter.event_count} events will not be delivered`;
        log.warn({ queue: letter.queue, dead_letter: letter.id, events: letter.event_count }, `queue ${letter.queue}: ${what}`);
        return { status: 204 };
      },
    },
  ];
}

function view(letter: DeadLetter) {
  return { ...letter, first_failure: new Date(letter.first_failure).toISOString(), last_failure: new Date(letter.last_failure).toISOString() };
}

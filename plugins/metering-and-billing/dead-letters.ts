/**
 * Dead letters: events bound for a remote ingest endpoint that it refused for good (a 4xx about the
 * events: each refused event, isolated by splitting its batch, is a letter of its own), or that could not
 * be delivered within `max_retry_time` (the whole batch is one letter). They are kept in the store
 * instead of being dropped, with the endpoint's status and reason, until an operator re-delivers them
 * (back at the head of their queue) or deletes them, on the admin API or in the console.
 *
 *   dead/m/<id>   the letter: its queue, event count, the endpoint's status and reason, first and last failure (JSON)
 *   dead/e/<id>   its events, one CloudEvent JSON per line
 *
 * Ids start with the time the letter was written, so a scan lists the oldest first. Like the queue, the
 * letters are shared by every process on the store: a letter is written by the commitIf that removes its
 * claim, and taken away (re-delivered, deleted, or dropped for room) by a commitIf on its record, so of two
 * processes or two admin calls exactly one takes it.
 *
 * Bounded per queue by the queue's own `max_entries`, in events: a letter that would make its queue's
 * letters hold more makes room by dropping that queue's oldest letters (counted and logged by the caller).
 */
import { randomBytes } from 'node:crypto';
import { entriesIn, type BatchOp, type Store } from '../../src/pdk/index.ts';

const LETTERS = 'dead/m/';
const EVENTS = 'dead/e/';
const TIME_WIDTH = 13;
/** The held counts behind the metrics gauge are counted again at most this often (other processes add and take letters). */
const RECOUNT_MS = 1000;

/** Why the events are letters: the endpoint refused them, or did not take them within max_retry_time. */
export type DeadLetterCause = 'refused' | 'retry_time';

export interface DeadLetter {
  id: string;
  queue: string;
  event_count: number;
  /** The endpoint's last HTTP status; null when it never answered (unreachable, timed out). */
  status: number | null;
  /** What the endpoint said (bounded), or why it could not be reached. */
  reason: string;
  cause: DeadLetterCause;
  /** ms: the first failed attempt to deliver these events, and the last. */
  first_failure: number;
  last_failure: number;
}

export interface HeldLetters {
  queue: string;
  events: number;
}

export class DeadLetterStore {
  private seq = 0;
  /** Events held per queue, as last counted, kept up to date with this process's own changes. */
  private held = new Map<string, number>();
  private countedAt = 0;

  constructor(
    private readonly store: Store,
    private readonly owner: string = randomBytes(8).toString('hex'),
  ) {}

  /** A new letter, and the writes that store it (applied by the caller with the removal of its claim). */
  letter(fields: Omit<DeadLetter, 'id' | 'event_count'>, events: string): { letter: DeadLetter; ops: BatchOp[] } {
    const id = `${String(fields.last_failure).padStart(TIME_WIDTH, '0')}-${this.owner}-${++this.seq}`;
    const letter: DeadLetter = { id, ...fields, event_count: entriesIn(events) };
    const ops: BatchOp[] = [
      { type: 'put', key: LETTERS + id, value: JSON.stringify(letter) },
      { type: 'put', key: EVENTS + id, value: events },
    ];
    return { letter, ops };
  }

  /** Counts a letter this process stored. */
  stored(letter: DeadLetter): void {
    this.adjust(letter.queue, letter.event_count);
  }

  /** Every letter (of one queue), oldest first. */
  async list(queue?: string): Promise<DeadLetter[]> {
    const letters: DeadLetter[] = [];
    for await (const [, value] of this.store.scan({ prefix: LETTERS })) {
      const letter = JSON.parse(value) as DeadLetter;
      if (queue === undefined || letter.queue === queue) letters.push(letter);
    }
    return letters;
  }

  async get(id: string): Promise<DeadLetter | undefined> {
    const value = await this.store.get(LETTERS + id);
    return value === undefined ? undefined : (JSON.parse(value) as DeadLetter);
  }

  /** A letter's events, one JSON per line; undefined once it is gone. */
  events(id: string): Promise<string | undefined> {
    return this.store.get(EVENTS + id);
  }

  /**
   * Takes a letter away, applying `then(letter, events)` in the same step (its events put back in a queue);
   * undefined when it is not there (never was, or another process or call took it first).
   */
  async take(id: string, then: (letter: DeadLetter, events: string) => BatchOp[] = () => []): Promise<DeadLetter | undefined> {
    const [stored, events] = await this.store.getMany([LETTERS + id, EVENTS + id]);
    if (stored === undefined || events === undefined) return undefined;
    const letter = JSON.parse(stored) as DeadLetter;
    // A letter is never rewritten: a failed commit means it was taken meanwhile.
    const ok = await this.store.commitIf(
      [{ key: LETTERS + id, value: stored }],
      [{ type: 'del', key: LETTERS + id }, { type: 'del', key: EVENTS + id }, ...then(letter, events)],
    );
    if (!ok) return undefined;
    this.adjust(letter.queue, -letter.event_count);
    return letter;
  }

  /**
   * Drops `queue`'s oldest letters until `adding` more events keep its letters within `max` events (or
   * none is left: one letter is at most a batch); returns how many events were dropped.
   */
  async makeRoom(queue: string, adding: number, max: number): Promise<number> {
    const letters = await this.list(queue);
    let held = letters.reduce((n, l) => n + l.event_count, 0);
    this.held.set(queue, held);
    let dropped = 0;
    for (const oldest of letters) {
      if (held + adding <= max) break;
      if (await this.take(oldest.id)) dropped += oldest.event_count;
      held -= oldest.event_count;
    }
    return dropped;
  }

  /** Events held per queue, for the metrics gauge (as last counted). */
  heldCounts(): HeldLetters[] {
    return [...this.held].map(([queue, events]) => ({ queue, events }));
  }

  /** Counts the letters again when the last count is older than RECOUNT_MS: other processes add and take them too. */
  async recount(): Promise<void> {
    if (Date.now() - this.countedAt < RECOUNT_MS) return;
    this.countedAt = Date.now();
    const held = new Map<string, number>([...this.held.keys()].map((queue) => [queue, 0]));
    for (const letter of await this.list()) held.set(letter.queue, (held.get(letter.queue) ?? 0) + letter.event_count);
    this.held = held;
  }

  private adjust(queue: string, events: number): void {
    this.held.set(queue, Math.max(0, (this.held.get(queue) ?? 0) + events));
  }
}

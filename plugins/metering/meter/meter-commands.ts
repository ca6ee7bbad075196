/**
 * Meter changes on a shared store: made by the aggregator only (a new aggregate generation starts at
 * the sequence number only it knows, and only it writes meter records, backfill progress included).
 * Any other process hands the change over through the store and waits for the answer: a command key,
 * a notice, the aggregator's answer under a reply key. Meter changes are rare, so a round trip of a
 * few milliseconds through the store costs nothing that matters.
 *
 * A change is made at most once per command key; if the aggregator dies after making it and before
 * answering, the next aggregator makes it again (a creation then answers 409: the meter exists).
 */
import type { Logger } from 'pino';
import type { Store } from '../../../src/pdk/index.ts';
import { DRAIN_WAIT_MS } from '../storage/inbox.ts';
import { MeterCommandTimeout, type MeteringErrorCode } from '../shared/errors.ts';
import { COMMAND_PREFIX, commandReplyKey, padSeq } from '../shared/keys.ts';
import type { MeterDefinition } from './meter-model.ts';
import type { MeterRecord } from './registry.ts';

export type MeterCommand =
  | { op: 'create'; def: MeterDefinition }
  | { op: 'update'; idOrKey: string; body: Record<string, any> }
  | { op: 'delete'; idOrKey: string }
  | { op: 'sync'; entities: Record<string, any>[] };

/** The change made, or the catalogue code and message of the rule that refused it (a ServiceError). */
export type MeterReply = { record: MeterRecord | null } | { error: { code: MeteringErrorCode; message: string } };

const COMMANDS_TOPIC = 'metering-meter-commands';
/** Answers nobody read (the asker gave up or died) expire after this. */
const REPLY_TTL_MS = 600_000;
const POLL_MAX_MS = 50;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export class MeterCommands {
  private sent = 0;
  private serving: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly store: Store,
    private readonly processId: string,
    private readonly log: Logger,
  ) {}

  /** Hands `command` to the aggregator and resolves with its answer; MeterCommandTimeout when none comes. */
  async send(command: MeterCommand): Promise<MeterReply> {
    const key = `${COMMAND_PREFIX}${this.processId}/${padSeq(++this.sent)}`;
    await this.store.put(key, JSON.stringify(command), { sync: true });
    this.store.notices.publish(COMMANDS_TOPIC, '');
    const replyKey = commandReplyKey(key);
    const deadline = performance.now() + DRAIN_WAIT_MS;
    for (let pause = 2; ; pause = Math.min(pause * 2, POLL_MAX_MS)) {
      const reply = await this.store.get(replyKey);
      if (reply !== undefined) {
        await this.store.del(replyKey);
        return JSON.parse(reply) as MeterReply;
      }
      if (performance.now() > deadline) {
        await this.store.del(key);
        throw new MeterCommandTimeout();
      }
      await sleep(pause);
    }
  }

  /**
   * The aggregator's side: makes every waiting change through `execute` (in key order) and answers it,
   * now and whenever a command is announced, until the returned function is called.
   */
  serve(fenced: Store, execute: (command: MeterCommand) => Promise<MeterReply>): () => Promise<void> {
    let stopped = false;
    const kick = () => {
      if (stopped) return;
      if (this.serving) {
        this.again = true;
        return;
      }
      this.serving = this.serveWaiting(fenced, execute)
        .catch((err) => this.log.error({ err }, 'metering: making a meter change failed; retrying'))
        .finally(() => {
          this.serving = null;
          if (this.again) {
            this.again = false;
            kick();
          }
        });
    };
    const unsubscribe = this.store.notices.subscribe(COMMANDS_TOPIC, kick);
    // A command whose notice was lost (or sent while no aggregator ran) is found by the next look.
    const timer = setInterval(kick, 1_000);
    timer.unref();
    kick();
    return async () => {
      stopped = true;
      unsubscribe();
      clearInterval(timer);
      await this.serving;
    };
  }

  private async serveWaiting(fenced: Store, execute: (command: MeterCommand) => Promise<MeterReply>): Promise<void> {
    const waiting: [string, string][] = [];
    for await (const entry of fenced.scan({ prefix: COMMAND_PREFIX })) waiting.push(entry);
    for (const [key, text] of waiting) {
      const reply = await execute(JSON.parse(text) as MeterCommand);
      await fenced.batch([{ type: 'put', key: commandReplyKey(key), value: JSON.stringify(reply), ttlMs: REPLY_TTL_MS }, { type: 'del', key }], { sync: true });
    }
  }
}

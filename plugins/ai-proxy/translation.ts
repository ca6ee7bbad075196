/**
 * The provider's answer turned into OpenAI's format as it streams downstream (ResponseHead.transformBody):
 * a JSON answer read whole (bounded) and translated at its end; a stream split into events (framing.ts)
 * and translated event by event, each sent on as an OpenAI `data:` chunk without waiting for the next.
 * Memory is bounded: a JSON answer past MAX_ANSWER_BYTES, or a stream event past MAX_EVENT_CHARS, cuts the
 * answer short (AiAnswerTooLargeError) rather than being held.
 */
import { parseUntrustedJson, type BodyTransform } from '../../src/pdk/index.ts';
import { AiAnswerTooLargeError } from './errors.ts';
import type { Framer, StreamEvent } from './framing.ts';
import type { Driver, Model, StreamTranslator, TranslatedRoute, Usage } from './providers/index.ts';

/** The largest JSON answer translated (as the core's REWRITABLE_BODY_LIMIT). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

const EMPTY = Buffer.alloc(0);

/** What a translation learnt of the answer, for the log phase. */
export interface AnswerFacts {
  usage?: Usage;
  model?: unknown;
}

/** A JSON answer, translated whole once it ended; one that cannot be is Kong's `{"error":{"message"}}`. */
export class JsonTranslation implements BodyTransform {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly driver: Driver,
    private readonly model: Model,
    private readonly route: TranslatedRoute,
    private readonly facts: AnswerFacts,
  ) {}

  write(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > MAX_ANSWER_BYTES) throw new AiAnswerTooLargeError(`the provider's answer is larger than ${MAX_ANSWER_BYTES} bytes`);
    this.chunks.push(chunk);
    return EMPTY;
  }

  end(): Buffer {
    const text = Buffer.concat(this.chunks, this.size).toString('utf8');
    this.chunks = [];
    return Buffer.from(JSON.stringify(this.translated(text)));
  }

  private translated(text: string): unknown {
    const { provider } = this.model;
    let answer: unknown;
    try {
      answer = parseUntrustedJson(text);
    } catch {
      return failure(`transformation failed from type ${provider}://${this.route}: failed to decode ${provider} response`);
    }
    const result = this.driver.fromProvider!(answer, this.model, this.route);
    if ('error' in result) return failure(`transformation failed from type ${provider}://${this.route}: ${result.error}`);
    this.facts.usage = result.usage;
    this.facts.model = result.body.model;
    return result.body;
  }
}

function failure(message: string): unknown {
  return { error: { message } };
}

/** A provider's stream, split into events by its framing, each translated and sent on at once. */
export class StreamTranslation implements BodyTransform {
  constructor(
    private readonly framer: Framer,
    private readonly translator: StreamTranslator,
    private readonly facts: AnswerFacts,
  ) {}

  write(chunk: Buffer): Buffer {
    return this.send(this.framer.push(chunk));
  }

  end(): Buffer {
    return this.send(this.framer.end(), this.translator.finish?.() ?? []);
  }

  private send(events: StreamEvent[], last: string[] = []): Buffer {
    const payloads = [...events.flatMap((event) => this.translator.translate(event)), ...last];
    this.facts.usage = this.translator.usage() ?? this.facts.usage;
    return payloads.length === 0 ? EMPTY : Buffer.from(payloads.map((p) => `data: ${p}\n\n`).join(''));
  }
}

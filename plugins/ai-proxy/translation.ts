/**
 * The provider's answer turned into OpenAI's format as it streams downstream (ResponseHead.transformBody):
 * a JSON answer read whole (bounded) and translated at its end; a stream (SSE events, or NDJSON lines)
 * translated event by event, each sent on as an OpenAI `data:` chunk without waiting for the next.
 * Memory is bounded: a JSON answer past MAX_ANSWER_BYTES, or a stream line past MAX_LINE_CHARS, cuts the
 * answer short (AiAnswerTooLargeError) rather than being held.
 */
import { StringDecoder } from 'node:string_decoder';
import { parseUntrustedJson, type BodyTransform } from '../../src/pdk/index.ts';
import { AiAnswerTooLargeError } from './errors.ts';
import type { Driver, Model, StreamTranslator, TranslatedRoute, Usage } from './providers/index.ts';

/** The largest JSON answer translated (as the core's REWRITABLE_BODY_LIMIT). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** The longest line of a provider's stream (an event's data line; chunks are a few hundred bytes). */
export const MAX_LINE_CHARS = 1024 * 1024;

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

/** A provider's stream, split into events (SSE) or lines (NDJSON), each translated and sent on at once. */
export class StreamTranslation implements BodyTransform {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';
  /** The SSE event being read: its type and data lines. */
  private event: string | undefined;
  private data: string[] = [];
  private dataChars = 0;

  constructor(
    private readonly framing: 'sse' | 'ndjson',
    private readonly translator: StreamTranslator,
    private readonly facts: AnswerFacts,
  ) {}

  write(chunk: Buffer): Buffer {
    const text = this.partial + this.decoder.write(chunk);
    const lines = text.split('\n');
    this.partial = lines.pop()!;
    if (this.partial.length > MAX_LINE_CHARS) throw new AiAnswerTooLargeError(`a line of the provider's stream is longer than ${MAX_LINE_CHARS} characters`);
    return this.send(lines.flatMap((line) => this.line(line.endsWith('\r') ? line.slice(0, -1) : line)));
  }

  end(): Buffer {
    const last = this.partial + this.decoder.end();
    this.partial = '';
    // The last event, unless a blank line closed it already.
    return this.send([...this.line(last), ...this.line('')]);
  }

  private send(payloads: string[]): Buffer {
    this.facts.usage = this.translator.usage() ?? this.facts.usage;
    return payloads.length === 0 ? EMPTY : Buffer.from(payloads.map((p) => `data: ${p}\n\n`).join(''));
  }

  private line(line: string): string[] {
    if (this.framing === 'ndjson') return line.trim() === '' ? [] : this.translator.translate({ data: line });
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return [];
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') this.event = value;
    else if (field === 'data') this.addData(value);
    return [];
  }

  private addData(value: string): void {
    this.dataChars += value.length;
    if (this.dataChars > MAX_LINE_CHARS) throw new AiAnswerTooLargeError(`an event of the provider's stream is longer than ${MAX_LINE_CHARS} characters`);
    this.data.push(value);
  }

  /** A blank line ends an SSE event. */
  private dispatch(): string[] {
    if (this.data.length === 0) {
      this.event = undefined;
      return [];
    }
    const event = { event: this.event, data: this.data.join('\n') };
    this.event = undefined;
    this.data = [];
    this.dataChars = 0;
    return this.translator.translate(event);
  }
}

/**
 * Token usage of OpenAI-compatible responses, read as the body streams past (ResponseHead.observeBody):
 * nothing is held back from the client, and memory stays bounded whatever the body's size.
 *
 * - `application/json` (a chat completion): `usage` closes the object, `model` opens it, so only the
 *   first HEAD_BYTES and the last TAIL_BYTES are kept; a body that fits in the tail is parsed whole.
 * - `text/event-stream` (`stream: true` with `stream_options.include_usage`): the usage arrives in the
 *   last chunk; events are read line by line, and only lines holding a `usage` object are parsed.
 *
 * Both the Chat Completions names (`prompt_tokens`, `completion_tokens`) and the Responses API names
 * (`input_tokens`, `output_tokens`, also nested as `response.usage` in its stream) are read.
 */
import { StringDecoder } from 'node:string_decoder';
import { parseUntrustedJson, type BodyObserver } from '../../src/pdk/index.ts';

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  model: string | undefined;
}

export interface UsageReader {
  observe: BodyObserver;
  /** The usage the body carried, once it has passed; undefined when it carried none. */
  result(): TokenUsage | undefined;
}

const HEAD_BYTES = 4 * 1024;
const TAIL_BYTES = 16 * 1024;
/** A longer event-stream line is skipped unread (usage chunks are a few hundred bytes). */
const MAX_LINE_CHARS = 64 * 1024;
/** A `usage` key whose value is an object (streams send `"usage":null` in every other chunk). */
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/** A reader for a response of this media type and encoding, or undefined when usage cannot be read from it. */
export function usageReaderFor(contentType: unknown, contentEncoding: unknown): UsageReader | undefined {
  if (contentEncoding !== undefined && String(contentEncoding).toLowerCase() !== 'identity') return undefined;
  const type = String(contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'text/event-stream') return new EventStreamUsage();
  if (type === 'application/json' || type.endsWith('+json')) return new JsonUsage();
  return undefined;
}

/** The usage of a parsed completion (or Responses API object), when it carries token counts. */
export function usageOf(body: unknown): TokenUsage | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const object = body as Record<string, unknown>;
  const nested = object.response as Record<string, unknown> | undefined;
  const usage = (object.usage ?? (typeof nested === 'object' && nested !== null ? nested.usage : undefined)) as Record<string, unknown> | undefined | null;
  if (typeof usage !== 'object' || usage === null) return undefined;
  const prompt = tokens(usage.prompt_tokens ?? usage.input_tokens);
  const completion = tokens(usage.completion_tokens ?? usage.output_tokens);
  if (prompt === undefined && completion === undefined) return undefined;
  const model = object.model ?? nested?.model;
  return { promptTokens: prompt ?? 0, completionTokens: completion ?? 0, model: typeof model === 'string' ? model : undefined };
}

function tokens(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

class JsonUsage implements UsageReader {
  private head = Buffer.alloc(0);
  private tail = Buffer.alloc(0);
  private size = 0;

  observe = (chunk: Buffer): void => {
    this.size += chunk.length;
    if (this.head.length < HEAD_BYTES) this.head = Buffer.concat([this.head, chunk.subarray(0, HEAD_BYTES - this.head.length)]);
    // Copied, never a view: a view would keep the whole chunk (and its pool) alive.
    if (chunk.length >= TAIL_BYTES) this.tail = Buffer.from(chunk.subarray(chunk.length - TAIL_BYTES));
    else this.tail = Buffer.concat([this.tail.subarray(Math.max(0, this.tail.length + chunk.length - TAIL_BYTES)), chunk]);
  };

  result(): TokenUsage | undefined {
    const tail = this.tail.toString('utf8');
    if (!tail.includes('"usage"')) return undefined;
    if (this.size <= TAIL_BYTES) return usageOf(parseOrUndefined(tail));
    const usage = usageOf({ usage: parseOrUndefined(objectAfterKey(tail, 'usage')) });
    if (usage) usage.model = stringAfterKey(this.head.toString('utf8'), 'model') ?? stringAfterKey(tail, 'model');
    return usage;
  }
}

class EventStreamUsage implements UsageReader {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';
  /** Inside a line longer than MAX_LINE_CHARS: dropped up to its end. */
  private skipping = false;
  private found: TokenUsage | undefined;

  observe = (chunk: Buffer): void => {
    const text = this.decoder.write(chunk);
    let start = 0;
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      const line = this.partial + text.slice(start, end);
      this.partial = '';
      if (!this.skipping) this.line(line);
      this.skipping = false;
      start = end + 1;
    }
    if (this.skipping) return;
    this.partial += text.slice(start);
    if (this.partial.length > MAX_LINE_CHARS) {
      this.partial = '';
      this.skipping = true;
    }
  };

  result(): TokenUsage | undefined {
    if (!this.skipping && this.partial) this.line(this.partial + this.decoder.end());
    this.partial = '';
    return this.found;
  }

  private line(line: string): void {
    if (!line.startsWith('data:') || !USAGE_OBJECT.test(line)) return;
    this.found = usageOf(parseOrUndefined(line.slice(5).trim())) ?? this.found;
  }
}

function parseOrUndefined(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return parseUntrustedJson(text);
  } catch {
    return undefined;
  }
}

/** The text of the JSON object that is the value of the last `"key":` in `text`, or undefined. */
function objectAfterKey(text: string, key: string): string | undefined {
  const at = text.lastIndexOf(`"${key}"`);
  if (at === -1) return undefined;
  const open = /^\s*:\s*\{/.exec(text.slice(at + key.length + 2));
  if (!open) return undefined;
  const start = at + key.length + 2 + open[0].length - 1;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return text.slice(start, i + 1);
  }
  return undefined;
}

/** The string value of the first `"key": "..."` in `text`, or undefined. */
function stringAfterKey(text: string, key: string): string | undefined {
  const match = new RegExp(`"${key}"\\s*:\\s*("(?:[^"\\\\]|\\\\.)*")`).exec(text);
  return match ? (parseOrUndefined(match[1]) as string | undefined) : undefined;
}

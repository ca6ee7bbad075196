/**
 * How providers frame a streamed answer, split into events as the bytes arrive (Kong's frame_to_events):
 * server-sent events, NDJSON lines (Ollama, Cohere), the elements of one JSON array sent piece by piece
 * (Gemini's streamGenerateContent), or AWS's binary event stream (Bedrock's converse-stream). Each framer
 * holds back only the unfinished event, and at most MAX_EVENT_CHARS of it (AiAnswerTooLargeError past that).
 */
import { StringDecoder } from 'node:string_decoder';
import { AiAnswerTooLargeError, AwsEventStreamError } from './errors.ts';

/** The longest event of a provider's stream (a chunk is a few hundred bytes). */
export const MAX_EVENT_CHARS = 1024 * 1024;

/** One event of a provider's stream: an SSE event (its `event` field and data), one NDJSON line or JSON element, or an AWS message. */
export interface StreamEvent {
  event?: string;
  data: string;
}

export type Framing = 'sse' | 'ndjson' | 'json-array' | 'aws-eventstream';

export interface Framer {
  /** The events this chunk completed. */
  push(chunk: Buffer): StreamEvent[];
  /** The events the end of the stream completed. */
  end(): StreamEvent[];
}

export function framerFor(framing: Framing): Framer {
  switch (framing) {
    case 'sse':
      return new LineFramer(new SseEvents());
    case 'ndjson':
      return new LineFramer({ line: (line) => (line.trim() === '' ? [] : [{ data: line }]) });
    case 'json-array':
      return new JsonArrayFramer();
    case 'aws-eventstream':
      return new AwsEventStreamFramer();
  }
}

function tooLarge(what: string): AiAnswerTooLargeError {
  return new AiAnswerTooLargeError(`${what} of the provider's stream is longer than ${MAX_EVENT_CHARS} characters`);
}

interface LineReader {
  line(line: string): StreamEvent[];
}

/** Text split into lines (LF or CRLF), each given to `reader`. */
class LineFramer implements Framer {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';

  constructor(private readonly reader: LineReader) {}

  push(chunk: Buffer): StreamEvent[] {
    const lines = (this.partial + this.decoder.write(chunk)).split('\n');
    this.partial = lines.pop()!;
    if (this.partial.length > MAX_EVENT_CHARS) throw tooLarge('a line');
    return lines.flatMap((line) => this.reader.line(line.endsWith('\r') ? line.slice(0, -1) : line));
  }

  end(): StreamEvent[] {
    const last = this.partial + this.decoder.end();
    this.partial = '';
    // The last event, unless a blank line closed it already.
    return [...this.reader.line(last), ...this.reader.line('')];
  }
}

/** The SSE format: `field: value` lines, an event ended by a blank line. */
class SseEvents implements LineReader {
  private event: string | undefined;
  private data: string[] = [];
  private dataChars = 0;

  line(line: string): StreamEvent[] {
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
    if (this.dataChars > MAX_EVENT_CHARS) throw tooLarge('an event');
    this.data.push(value);
  }

  private dispatch(): StreamEvent[] {
    const event = { event: this.event, data: this.data.join('\n') };
    const any = this.data.length > 0;
    this.event = undefined;
    this.data = [];
    this.dataChars = 0;
    return any ? [event] : [];
  }
}

/**
 * The elements of a top-level JSON array, each an event as soon as its text is complete: a scan that
 * tracks strings and nesting, so a comma or bracket inside an element does not end it.
 */
class JsonArrayFramer implements Framer {
  private readonly decoder = new StringDecoder('utf8');
  private started = false;
  private ended = false;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private element = '';

  push(chunk: Buffer): StreamEvent[] {
    return this.scan(this.decoder.write(chunk));
  }

  end(): StreamEvent[] {
    return this.scan(this.decoder.end());
  }

  private scan(text: string): StreamEvent[] {
    const events: StreamEvent[] = [];
    let from = 0;
    for (let i = 0; i < text.length && !this.ended; i++) {
      const char = text[i];
      if (!this.started) {
        if (char === '[') {
          this.started = true;
          from = i + 1;
        }
        continue;
      }
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (char === '\\') this.escaped = true;
        else if (char === '"') this.inString = false;
      } else if (char === '"') this.inString = true;
      else if (char === '{' || char === '[') this.depth++;
      else if ((char === '}' || char === ']') && this.depth > 0) this.depth--;
      else if ((char === ',' || char === ']') && this.depth === 0) {
        this.take(text.slice(from, i), events);
        from = i + 1;
        if (char === ']') this.ended = true;
      }
    }
    if (this.started && !this.ended) this.keep(text.slice(from));
    return events;
  }

  private keep(text: string): void {
    this.element += text;
    if (this.element.length > MAX_EVENT_CHARS) throw tooLarge('an element');
  }

  private take(tail: string, events: StreamEvent[]): void {
    this.keep(tail);
    const data = this.element.trim();
    this.element = '';
    if (data !== '') events.push({ data });
  }
}

/** AWS's event stream: binary messages of a prelude (total and headers lengths, CRC), headers, payload and CRC. */
class AwsEventStreamFramer implements Framer {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): StreamEvent[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const events: StreamEvent[] = [];
    while (this.pending.length >= 12) {
      const total = this.pending.readUInt32BE(0);
      const headersLength = this.pending.readUInt32BE(4);
      if (total > MAX_EVENT_CHARS) throw tooLarge('a message');
      if (total < 16 || headersLength > total - 16) throw new AwsEventStreamError(`a message of the provider's stream has impossible lengths (${total}, ${headersLength})`);
      if (this.pending.length < total) break;
      const headers = readHeaders(this.pending.subarray(12, 12 + headersLength));
      const payload = this.pending.subarray(12 + headersLength, total - 4).toString('utf8');
      this.pending = this.pending.subarray(total);
      events.push({ event: headers[':event-type'] ?? headers[':exception-type'], data: payload });
    }
    return events;
  }

  end(): StreamEvent[] {
    return [];
  }
}

function readHeaders(bytes: Buffer): Record<string, string> {
  try {
    return messageHeaders(bytes);
  } catch (err) {
    if (err instanceof RangeError) throw new AwsEventStreamError("a message header runs past the message's headers", { cause: err });
    throw err;
  }
}

/** The string headers of a message (the others are skipped by their type's length). */
function messageHeaders(bytes: Buffer): Record<string, string> {
  const headers: Record<string, string> = {};
  let at = 0;
  while (at < bytes.length) {
    const nameLength = bytes.readUInt8(at);
    const name = bytes.toString('utf8', at + 1, at + 1 + nameLength);
    at += 1 + nameLength;
    const type = bytes.readUInt8(at);
    at += 1;
    const fixed = FIXED_HEADER_LENGTHS[type];
    if (fixed !== undefined) {
      at += fixed;
      continue;
    }
    if (type !== STRING_TYPE && type !== BYTES_TYPE) throw new AwsEventStreamError(`a message header of unknown type ${type}`);
    const length = bytes.readUInt16BE(at);
    if (type === STRING_TYPE) headers[name] = bytes.toString('utf8', at + 2, at + 2 + length);
    at += 2 + length;
  }
  return headers;
}

const BYTES_TYPE = 6;
const STRING_TYPE = 7;
/** Header value types of a fixed length: true, false, byte, short, integer, long, timestamp, uuid. */
const FIXED_HEADER_LENGTHS: Record<number, number> = { 0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16 };

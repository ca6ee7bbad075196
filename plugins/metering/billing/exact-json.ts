/**
 * JSON bodies read with the text of every number kept. JSON.parse turns 12345678901234567890.5 into a
 * binary float that has lost digits, and 0.1 into a float that is not 0.1; a decimal field that takes
 * JSON numbers (OpenMeter's v3 API types an entitlement's limit as a number) must read what the client
 * wrote. The value is the one JSON.parse gives; each number's text is kept beside it, under the object
 * or array that holds it (numberText). Node 20 has no JSON.parse source text (the reviver's `context`
 * came with Node 21), hence this small reader over text JSON.parse has already validated.
 */

/** The text of each number member, by the object or array holding it and the member's key or index. */
const numberTexts = new WeakMap<object, Map<string, string>>();

/** Deeper bodies are refused: billing bodies are a few levels deep, and the reader recurses. */
const MAX_DEPTH = 64;
const LITERALS: [string, unknown][] = [['true', true], ['false', false], ['null', null]];
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WHITESPACE = /[ \t\n\r]*/y;

export class JsonTooDeepError extends SyntaxError {
  readonly code = 'BILLING_ERR_JSON_TOO_DEEP';

  constructor() {
    super(`JSON nested deeper than ${MAX_DEPTH} levels`);
    this.name = 'JsonTooDeepError';
  }
}

/** JSON.parse's value for `text` (and its SyntaxError when malformed), with every number's text kept. */
export function parseExactJson(text: string): unknown {
  JSON.parse(text);
  return new Reader(text).value(0);
}

/** The JSON text of the number at `container[key]`, when `container` was read by parseExactJson. */
export function numberText(container: object, key: string | number): string | undefined {
  return numberTexts.get(container)?.get(String(key));
}

/** Reads text that JSON.parse accepted, so it checks nothing JSON.parse checked already. */
class Reader {
  private at = 0;
  /** The text of the number `value` returned last. */
  private lastNumber = '';

  constructor(private readonly text: string) {}

  value(depth: number): unknown {
    this.skipSpace();
    const c = this.text[this.at];
    if (c === '{' || c === '[') {
      if (depth >= MAX_DEPTH) throw new JsonTooDeepError();
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    for (const [word, literal] of LITERALS) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return literal;
      }
    }
    NUMBER.lastIndex = this.at;
    this.lastNumber = NUMBER.exec(this.text)![0];
    this.at += this.lastNumber.length;
    return Number(this.lastNumber);
  }

  private object(depth: number): Record<string, unknown> {
    const result: Record<string, unknown> = {};
    this.at++;
    while (this.nextMember('}')) {
      const key = this.string();
      this.skipSpace();
      this.at++;
      // A data property even for "__proto__", as JSON.parse makes it; a repeated key keeps its last value.
      Object.defineProperty(result, key, { value: this.member(result, key, depth), enumerable: true, writable: true, configurable: true });
    }
    return result;
  }

  private array(depth: number): unknown[] {
    const result: unknown[] = [];
    this.at++;
    while (this.nextMember(']')) result.push(this.member(result, String(result.length), depth));
    return result;
  }

  /** The next member's value, its text kept when it is a number (and forgotten when a repeated key is not). */
  private member(container: object, key: string, depth: number): unknown {
    const value = this.value(depth);
    const texts = numberTexts.get(container);
    if (typeof value === 'number') {
      if (texts) texts.set(key, this.lastNumber);
      else numberTexts.set(container, new Map([[key, this.lastNumber]]));
    } else texts?.delete(key);
    return value;
  }

  /** Moves past a separating comma; false (past the closing bracket) when the container ends. */
  private nextMember(close: string): boolean {
    this.skipSpace();
    if (this.text[this.at] === ',') {
      this.at++;
      this.skipSpace();
    }
    if (this.text[this.at] !== close) return true;
    this.at++;
    return false;
  }

  private string(): string {
    const start = this.at;
    this.at++;
    while (this.text[this.at] !== '"') this.at += this.text[this.at] === '\\' ? 2 : 1;
    this.at++;
    return JSON.parse(this.text.slice(start, this.at)) as string;
  }

  private skipSpace(): void {
    WHITESPACE.lastIndex = this.at;
    WHITESPACE.exec(this.text);
    this.at = WHITESPACE.lastIndex;
  }
}

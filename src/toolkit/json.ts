/**
 * JSON from outside the gateway (client bodies, tokens, upstream answers) read with bounded nesting.
 * V8's JSON.parse reads 400,000 nested arrays (800 KB) without complaint, but what follows recurses —
 * JSON.stringify, structured clone, a walk over the value — and overflows the stack; the parse alone costs
 * a fraction of a second. A linear pre-scan refuses such text before any of that work.
 */
import { JsonTooDeepError } from '../errors.ts';

/**
 * The deepest nesting accepted: lua-cjson's `decode_max_depth` default, so Kong's plugins (which decode
 * bodies with cjson) refuse exactly what Tollgate refuses. Every recursive step after the parse stays far
 * from Node's stack limit at this depth.
 */
export const MAX_JSON_DEPTH = 1000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * True when arrays and objects in `text` nest deeper than `limit` (brackets inside strings do not count).
 * One pass, stopping at the first level past the limit; malformed text is left for JSON.parse to refuse.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  // Each level takes at least one character.
  if (text.length <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return false;
}

/**
 * `parse(text)` (JSON.parse, or a reader that keeps more of the text) for JSON from outside: throws
 * JsonTooDeepError, before parsing, when it nests deeper than MAX_JSON_DEPTH, and the parser's
 * SyntaxError when it is malformed.
 */
export function parseUntrustedJson(text: string, parse: (text: string) => unknown = JSON.parse): unknown {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw new JsonTooDeepError(MAX_JSON_DEPTH);
  return parse(text);
}

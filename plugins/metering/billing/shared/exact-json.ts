/**
 * JSON bodies read with the text of every number kept. JSON.parse turns 12345678901234567890.5 into a
 * binary float that has lost digits, and 0.1 into a float that is not 0.1; a decimal field that takes
 * JSON numbers (OpenMeter's v3 API types an entitlement's limit as a number) must read what the client
 * wrote. The value is the one JSON.parse gives; each number's text is kept beside it, under the object or
 * array that holds it (numberText). Node 20's JSON.parse cannot give a number's source text (the
 * reviver's `context` came with Node 21): lossless-json reads it.
 */
import { isLosslessNumber, parse } from 'lossless-json';
import { nestedDeeperThan } from '../../shared/json-depth.ts';
import { JsonTooDeepError } from './errors.ts';

/** The text of each number member, by the object or array holding it and the member's key or index. */
const numberTexts = new WeakMap<object, Map<string, string>>();

/** Deeper bodies are refused: billing bodies are a few levels deep, and the reader recurses. */
const MAX_DEPTH = 64;

/** JSON.parse's value for `text` (and its SyntaxError when malformed), with every number's text kept. */
export function parseExactJson(text: string): unknown {
  // JSON.parse's verdict and messages first; lossless-json then reads only text known to be JSON.
  const value = JSON.parse(text);
  if (nestedDeeperThan(value, MAX_DEPTH)) throw new JsonTooDeepError(MAX_DEPTH);
  try {
    return parse(text, keepNumberText);
  } catch {
    // lossless-json refuses a repeated key, which JSON.parse (and OpenMeter's Go decoder) takes, the last
    // one winning: such a body is read as they read it, its numbers as doubles.
    return value;
  }
}

function keepNumberText(this: object, key: string, value: unknown): unknown {
  if (!isLosslessNumber(value)) return value;
  const texts = numberTexts.get(this) ?? numberTexts.set(this, new Map()).get(this)!;
  texts.set(key, value.value);
  return Number(value.value);
}

/** The JSON text of the number at `container[key]`, when `container` was read by parseExactJson. */
export function numberText(container: object, key: string | number): string | undefined {
  return numberTexts.get(container)?.get(String(key));
}

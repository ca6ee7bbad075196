/**
 * The parts of Kong's hmac-auth access (kong/plugins/hmac-auth/access.lua) that read what the client
 * signed: the `hmac username="",algorithm="",headers="",signature=""` parameters, the Date it carries,
 * and the signature over the listed headers. Bounded: a header value is at most what Node admits for
 * all the headers (16 KiB), the header list at most MAX_SIGNED_HEADERS names, and the signing string is
 * hashed piece by piece, never built.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { findHeader, requestLine, type RequestView } from '../../src/pdk/index.ts';
import type { Algorithm } from './schema.ts';

/** More names than any client signs: each one hashes up to a header's worth of bytes. */
export const MAX_SIGNED_HEADERS = 50;

/** The Base64 of the longest digest (SHA-512, 64 bytes): a longer signature cannot match. */
const MAX_SIGNATURE_LENGTH = 88;

/** Base64 as nginx decodes it (ngx.decode_base64): its alphabet, padding optional. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface SignatureParameters {
  username: string;
  algorithm: string;
  /** The signed headers, in order, as Kong splits them (on each single space). */
  headers: string[];
  signature: string;
}

// The pieces of Kong's pattern `\s*[Hh]mac\s*username="(.+)",\s*algorithm="(.+)",\s*headers="(.+)",\s*signature="(.+)"`
// (PCRE's `\s`: no Unicode spaces). The three after the opening are sticky: tried where a `",` starts.
const OPENING = /[Hh]mac[ \t\n\v\f\r]*username="/g;
const ALGORITHM = /",[ \t\n\v\f\r]*algorithm="/y;
const HEADERS = /",[ \t\n\v\f\r]*headers="/y;
const SIGNATURE = /",[ \t\n\v\f\r]*signature="/y;

interface Span {
  start: number;
  end: number;
}

/**
 * The parameters of an `hmac` Authorization value, or undefined when it has none: what Kong's pattern
 * captures, unanchored with greedy groups (so a username may hold `",`). A backtracking engine takes
 * cubic time on such a pattern (seconds on a 16 KiB header), and the linear-time one (RE2) 100 ms; this
 * finds the same groups in one pass per piece, from the right: each greedy group ends at the last place
 * where the rest of the pattern can still match, the signature at the last quote.
 */
export function signatureParameters(value: string | undefined): SignatureParameters | undefined {
  if (value === undefined) return undefined;
  const lastQuote = value.lastIndexOf('"');
  // Each group holds at least one character: a piece must end before the next one starts.
  const signature = lastBefore(value, SIGNATURE, lastQuote);
  const headers = signature && lastBefore(value, HEADERS, signature.start);
  const algorithm = headers && lastBefore(value, ALGORITHM, headers.start);
  const opening = algorithm && openingBefore(value, algorithm.start);
  if (!opening) return undefined;
  return {
    username: value.slice(opening.end, algorithm.start),
    algorithm: value.slice(algorithm.end, headers.start),
    headers: value.slice(headers.end, signature.start).split(' '),
    signature: value.slice(signature.end, lastQuote),
  };
}

/**
 * The last match of the sticky `piece` that ends before `limit` with a character to spare. Matches are
 * tried at each `",` (which cannot overlap itself), so overlapping ones count; their ends grow with their
 * starts, since a piece's variable part is whitespace after its first two characters.
 */
function lastBefore(value: string, piece: RegExp, limit: number): Span | undefined {
  let last: Span | undefined;
  for (let i = value.indexOf('",'); i !== -1 && i < limit; i = value.indexOf('",', i + 2)) {
    piece.lastIndex = i;
    if (!piece.test(value)) continue;
    if (piece.lastIndex >= limit) break;
    last = { start: i, end: piece.lastIndex };
  }
  return last;
}

/** The leftmost opening (`hmac username="`), when it ends before `limit` with a character to spare. */
function openingBefore(value: string, limit: number): Span | undefined {
  OPENING.lastIndex = 0;
  const m = OPENING.exec(value);
  return m && OPENING.lastIndex < limit ? { start: m.index, end: OPENING.lastIndex } : undefined;
}

const NODE_DIGESTS: Record<Algorithm, string> = { 'hmac-sha1': 'sha1', 'hmac-sha256': 'sha256', 'hmac-sha384': 'sha384', 'hmac-sha512': 'sha512' };

/**
 * Whether `signature` is the HMAC, under `secret`, of the signing string of `headers`: for each name,
 * `name: value` of the request's header, else the request line for `request-line` (`GET /path?q HTTP/1.1`),
 * `@request-target: get /path?q` for `@request-target`, `name:` for a header not sent; joined by newlines.
 * Compared in constant time.
 */
export function signatureMatches(ctx: RequestView, params: SignatureParameters, algorithm: Algorithm, secret: string): boolean {
  if (params.signature.length > MAX_SIGNATURE_LENGTH || !BASE64.test(params.signature) || params.signature.replace(/=+$/, '').length % 4 === 1) return false;
  const mac = createHmac(NODE_DIGESTS[algorithm], secret);
  const line = requestLine(ctx);
  params.headers.forEach((name, i) => {
    if (i > 0) mac.update('\n');
    const header = findHeader(ctx, name);
    if (header) mac.update(`${name}: ${header.value}`);
    else if (name === '@request-target') mac.update(`${name}: ${ctx.method.toLowerCase()} ${line.target}`);
    else if (name === 'request-line') mac.update(`${ctx.method} ${line.target} HTTP/${line.httpVersion}`);
    else mac.update(`${name}:`);
  });
  const expected = mac.digest();
  const given = Buffer.from(params.signature, 'base64');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
/** The three forms of an HTTP date nginx reads (ngx_parse_http_time): RFC 1123, RFC 850 and asctime. */
const RFC_1123 = /^[A-Za-z]+, (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC_850 = /^[A-Za-z]+, (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^[A-Za-z]+ ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** Seconds since the epoch of an HTTP date, or undefined when it is none (as ngx.parse_http_time). */
function parseHttpDate(value: string): number | undefined {
  let parts: string[];
  let m: RegExpExecArray | null;
  if ((m = RFC_1123.exec(value))) parts = [m[3], m[2], m[1], m[4], m[5], m[6]];
  else if ((m = RFC_850.exec(value))) parts = [String(Number(m[3]) + (Number(m[3]) < 70 ? 2000 : 1900)), m[2], m[1], m[4], m[5], m[6]];
  else if ((m = ASCTIME.exec(value))) parts = [m[6], m[1], m[2].trim(), m[3], m[4], m[5]];
  else return undefined;
  const [year, day, hour, minute, second] = [parts[0], parts[2], parts[3], parts[4], parts[5]].map(Number);
  const month = MONTHS.indexOf(parts[1]);
  if (month < 0 || hour > 23 || minute > 59 || second > 59) return undefined;
  const time = Date.UTC(year, month, day, hour, minute, second);
  // 31 Feb and its kind: Date.UTC rolls them over into the next month.
  if (new Date(time).getUTCDate() !== day) return undefined;
  return time / 1000;
}

/** Whether `header` holds an HTTP date within `clockSkew` seconds of now. */
export function dateWithinSkew(ctx: RequestView, header: string, clockSkew: number): boolean {
  const value = findHeader(ctx, header)?.value;
  const time = value === undefined ? undefined : parseHttpDate(value);
  return time !== undefined && Math.abs(Math.floor(Date.now() / 1000) - time) <= clockSkew;
}

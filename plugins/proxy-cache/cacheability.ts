/**
 * What may be cached, as Kong's proxy-cache decides it: Cache-Control directives
 * (kong/tools/http.lua parse_directive_header, calculate_resource_ttl), media types
 * (kong/tools/mime_type.lua) and the response checks of its handler.
 */
import type { OutgoingHttpHeaders } from 'node:http';

/** Directives by lowercase name: a number when the value reads as one, else its text, `true` without a value. */
export type Directives = Record<string, number | string | true>;

/** Kong's parse_directive_header over one header (repeated headers joined by `, `). */
export function parseDirectives(header: string | string[] | number | undefined): Directives {
  const directives: Directives = Object.create(null);
  if (header === undefined) return directives;
  const text = Array.isArray(header) ? header.join(', ') : String(header);
  for (const part of text.split(',')) {
    const match = /^\s*([^=]+)(?:=(.+))?/.exec(part);
    if (!match) continue;
    const [, name, value] = match;
    directives[name.toLowerCase()] = value === undefined ? true : numberOrText(value);
  }
  return directives;
}

function numberOrText(value: string): number | string {
  const n = Number(value);
  return value.trim() !== '' && !Number.isNaN(n) ? n : value;
}

/** A directive's value when it is a number (a bare or textual one counts as absent). */
export function seconds(directives: Directives, name: string): number | undefined {
  const value = directives[name];
  return typeof value === 'number' ? value : undefined;
}

/** Kong's calculate_resource_ttl: s-maxage, else max-age, else what Expires leaves; never below 0. */
export function resourceTtl(directives: Directives, expires: OutgoingHttpHeaders[string], nowMs: number): number {
  const shared = directives['s-maxage'] ?? directives['max-age'];
  if (shared !== undefined) return typeof shared === 'number' ? Math.max(shared, 0) : 0;
  const last = Array.isArray(expires) ? expires[expires.length - 1] : expires;
  const at = last === undefined ? NaN : Date.parse(String(last));
  return Number.isNaN(at) ? 0 : Math.max(Math.floor((at - nowMs) / 1000), 0);
}

/** A media type as Kong's parser reads it: lowercase type and subtype, parameters by lowercase name. */
export interface MediaType {
  type: string;
  subtype: string;
  params: Map<string, string>;
}

/** RFC 2045 tokens (what Kong's grammar accepts); `*` is one. */
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const TYPES = new RegExp(`^(${TOKEN})/(${TOKEN})|^\\*`, 'y');
const PARAM = new RegExp(`[ \\t]*;[ \\t]*(${TOKEN})=(?:(${TOKEN})|"((?:[^"\\\\\\x00-\\x1f\\x7f]|\\\\[\\x00-\\x7f])*)")`, 'y');

/** Kong's parse_mime_type: undefined for anything its grammar refuses (`application/xml;`, a trailing space). */
export function parseMediaType(text: string): MediaType | undefined {
  TYPES.lastIndex = 0;
  const head = TYPES.exec(text);
  if (!head) return undefined;
  const media: MediaType = head[1] === undefined ? { type: '*', subtype: '*', params: new Map() } : { type: head[1].toLowerCase(), subtype: head[2].toLowerCase(), params: new Map() };
  let at = TYPES.lastIndex;
  while (at < text.length) {
    PARAM.lastIndex = at;
    const param = PARAM.exec(text);
    if (!param) return undefined;
    media.params.set(param[1].toLowerCase(), param[2] ?? param[3]);
    at = PARAM.lastIndex;
  }
  return media;
}

/**
 * Whether a response's Content-Type is one the config lists (Kong's exact match: type and subtype, or
 * `*`, and the very same parameters). Configured types the grammar refuses match nothing.
 */
export function contentTypeMatches(contentType: OutgoingHttpHeaders[string], accepted: readonly MediaType[]): boolean {
  if (typeof contentType !== 'string' || contentType === '') return false;
  const actual = parseMediaType(contentType);
  return accepted.some(
    (expected) =>
      (expected.type === '*' || actual?.type === expected.type) &&
      (expected.subtype === '*' || actual?.subtype === expected.subtype) &&
      (actual?.params.size ?? 0) === expected.params.size &&
      [...expected.params].every(([name, value]) => actual?.params.get(name) === value),
  );
}

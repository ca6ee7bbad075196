/**
 * The key layout inside the plugin's store namespace. Numbers are zero-padded so that keys sort
 * like the numbers; free text is escaped to ASCII without '/' so that keys split unambiguously.
 *
 *   meta/seq                                  last event sequence number used
 *   m/<meter id>                              meter record (public fields + aggregation state)
 *   e/<type>/<seq>                            stored event (JSON)
 *   t/<time>/<seq>                            time index -> "<type>/<dedupe hash>/<stored_at ms>"
 *   d/<dedupe hash>                           (source, id) seen -> seq
 *   s/<subject>                               a subject some stored event names (OpenMeter's v1 subject list)
 *   meta/subjects                             the subjects of events stored before that index existed are in it
 *   a/<meter>.<gen>/<level>/<bucket>/<series> aggregate state of one bucket and series (minutes, and
 *                                             buckets whose row overflows)
 *   r/<meter>.<gen>/<level>/<bucket>          every series of a bucket in one value (levels above minutes)
 *   u/<meter>.<gen>/<level>/<bucket>/<series>/<value>   distinct values (unique_count, see distinctPart)
 *
 * On a store several processes share (aggregation/aggregator.ts):
 *   i/<ms>/<process>/<n>                      inbox entry acknowledged, not yet aggregated -> its event count
 *   ib/<ms>/<process>/<n>                     its events: one line each, "<dedupe hash> <event JSON>"
 *   lease/aggregator                          the aggregator's lease (expires)
 *   meta/journal                              on PostgreSQL: events are in the journal (storage/stored-events.ts), none
 *                                             left in `e/` keys or an inbox
 *   cmd/<process>/<n>, cmdr/<process>/<n>     a meter change for the aggregator to make, and its answer
 */
import { createHash, hash } from 'node:crypto';
import { MAX_IDENTIFIER_LENGTH } from './limits.ts';

export const SEQ_KEY = 'meta/seq';
const SEQ_WIDTH = 12;
export const TIME_WIDTH = 12;

export const padSeq = (seq: number) => seq.toString(16).padStart(SEQ_WIDTH, '0');
export const parseSeq = (text: string) => parseInt(text, 16);
export const padTime = (seconds: number) => String(seconds).padStart(TIME_WIDTH, '0');

/** A-Z a-z 0-9 _ . ~ - : the characters keys keep as they are. */
function isSafe(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57) || code === 95 || code === 46 || code === 126 || code === 45;
}

/** ASCII escaping without '/' that also survives lone surrogates (unlike encodeURIComponent). */
export function escapePart(text: string): string {
  let i = 0;
  while (i < text.length && isSafe(text.charCodeAt(i))) i++;
  if (i === text.length) return text;
  let out = text.slice(0, i);
  for (; i < text.length; i++) {
    const code = text.charCodeAt(i);
    out += isSafe(code) ? text[i] : '%' + code.toString(16).padStart(4, '0');
  }
  return out;
}

export function unescapePart(text: string): string {
  return text.includes('%') ? text.replace(/%([0-9a-f]{4})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16))) : text;
}

/**
 * The key part of a distinct value (unique_count): escaped, or for a long value `#` and its hash, which
 * no escaped text starts with. Only the number of distinct values is ever read, so this stays exact.
 */
export function distinctPart(text: string): string {
  return text.length <= MAX_IDENTIFIER_LENGTH ? escapePart(text) : '#' + createHash('sha256').update(text, 'utf16le').digest('base64url');
}

export const meterKey = (id: string) => `m/${id}`;

export const INBOX_PREFIX = 'i/';
/** An inbox entry's key: time first, so that entries drain roughly in the order they were acknowledged. */
export const inboxKey = (ms: number, process: string, n: number) => `${INBOX_PREFIX}${String(ms).padStart(15, '0')}/${process}/${padSeq(n)}`;
/** The key holding the events of the inbox entry `key`. */
export const inboxBodyKey = (key: string) => 'ib/' + key.slice(INBOX_PREFIX.length);
/** What the aggregator last reported of itself (its dedupe filter), for /metering/status on the other processes. */
export const AGGREGATOR_STATUS_KEY = 'aggregator-status';
export const AGGREGATOR_LEASE_KEY = 'lease/aggregator';
export const COMMAND_PREFIX = 'cmd/';
export const commandReplyKey = (commandKey: string) => 'cmdr/' + commandKey.slice(COMMAND_PREFIX.length);
export const METER_PREFIX = 'm/';

export const eventTypePrefix = (typeEscaped: string) => `e/${typeEscaped}/`;
/** `padded`: padSeq(seq), when the caller has it already (the writer needs it three times per event). */
export const eventKey = (typeEscaped: string, seq: number, padded = padSeq(seq)) => `e/${typeEscaped}/${padded}`;
export const timeKey = (time: number, seq: number, padded = padSeq(seq)) => `t/${padTime(time)}/${padded}`;
export const TIME_PREFIX = 't/';
export const DEDUPE_PREFIX = 'd/';
export const SUBJECT_PREFIX = 's/';
export const SUBJECTS_INDEXED_KEY = 'meta/subjects';
export const JOURNAL_READY_KEY = 'meta/journal';
export const subjectKey = (subject: string) => SUBJECT_PREFIX + escapePart(subject);
export const dedupeKey = (hash: string) => DEDUPE_PREFIX + hash;

/** Identity of an event for deduplication: the (source, id) tuple (length-prefixed), hashed to a fixed-size key. */
export function dedupeHash(source: string, id: string): string {
  return hash('sha256', `${source.length}:${source}${id}`, 'base64url');
}

/** `t/<time>/<seq>` -> its parts. */
export function parseTimeKey(key: string): { time: number; seq: number } {
  return { time: Number(key.slice(2, 2 + TIME_WIDTH)), seq: parseSeq(key.slice(3 + TIME_WIDTH)) };
}

export const aggregateSpace = (meterId: string, gen: number) => `${meterId}.${gen}`;
export const aggregatePrefix = (space: string, level: string) => `a/${space}/${level}/`;
export const uniquePrefix = (space: string, level: string) => `u/${space}/${level}/`;
export const rowPrefix = (space: string, level: string) => `r/${space}/${level}/`;
/** Bucket start of a key under `a/<space>/<level>/` or `u/...` (prefix length given). */
export const bucketOf = (key: string, prefixLength: number) => Number(key.slice(prefixLength, prefixLength + TIME_WIDTH));
export const seriesOf = (key: string, prefixLength: number) => key.slice(prefixLength + TIME_WIDTH + 1);

/** The time index entry of an event: what purge, listing and raw reads need without the event. */
export function timeIndexValue(typeEscaped: string, dedupe: string, storedAt: number): string {
  return `${typeEscaped}/${dedupe}/${storedAt}`;
}

export function parseTimeIndexValue(value: string): { typeEscaped: string; dedupe: string; storedAt: number } {
  const first = value.indexOf('/');
  const second = value.indexOf('/', first + 1);
  return { typeEscaped: value.slice(0, first), dedupe: value.slice(first + 1, second), storedAt: Number(value.slice(second + 1)) };
}

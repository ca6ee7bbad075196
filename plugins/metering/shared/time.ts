/**
 * Instants (Unix seconds: events are stored at second precision, as OpenMeter does) and the
 * calendar of an IANA time zone through Intl, for DST-correct windows without a dependency.
 */
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  const leap = month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return leap ? 29 : DAYS_IN_MONTH[month - 1];
}

/** The number of `length` ASCII digits at `at`, or -1 (one pass over char codes: this runs for every ingested event). */
function digits(text: string, at: number, length: number): number {
  let n = 0;
  for (let i = at; i < at + length; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/**
 * RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, a zone offset required) to Unix
 * seconds, fractions truncated; undefined when invalid.
 */
export function parseRfc3339(text: string): number | undefined {
  if (text.length < 20 || text[4] !== '-' || text[7] !== '-' || text[13] !== ':' || text[16] !== ':' || (text[10] !== 'T' && text[10] !== 't')) return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (
    year < 0 ||
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour < 0 ||
    hour > 23 ||
    minute < 0 ||
    minute > 59 ||
    second < 0 ||
    second > 59
  )
    return undefined;
  let i = 19;
  if (text[i] === '.') {
    do i++;
    while (i < text.length && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57);
    if (i === 20) return undefined;
  }
  let offsetMinutes = 0;
  const zone = text[i];
  if (zone === 'Z' || zone === 'z') {
    if (i + 1 !== text.length) return undefined;
  } else if (zone === '+' || zone === '-') {
    const oh = digits(text, i + 1, 2);
    const om = digits(text, i + 4, 2);
    if (i + 6 !== text.length || text[i + 3] !== ':' || oh < 0 || oh > 23 || om < 0 || om > 59) return undefined;
    offsetMinutes = (zone === '-' ? -1 : 1) * (oh * 60 + om);
  } else return undefined;
  return daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60;
}

/**
 * The instants the API takes from callers and prints back (query bounds, a meter's `events_from`):
 * printed in any zone (offsets stay under a day) their year keeps four digits, as RFC 3339 requires.
 */
export const PRINTABLE_FROM = -62_135_596_800; // 0001-01-01T00:00:00Z
export const PRINTABLE_TO = 253_402_214_400; // 9999-12-31T00:00:00Z

export function isPrintable(seconds: number): boolean {
  return seconds >= PRINTABLE_FROM && seconds <= PRINTABLE_TO;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm; Date.UTC would read years 0–99 as 1900–1999). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** UTC RFC 3339 text with a `Z`, without fractions. */
export function formatUtc(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The formatter of a zone, or undefined when the zone is unknown. */
function formatterOf(timeZone: string): Intl.DateTimeFormat | undefined {
  let f = formatters.get(timeZone);
  if (f) return f;
  try {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
  } catch {
    return undefined;
  }
  if (formatters.size > 1000) formatters.clear();
  formatters.set(timeZone, f);
  return f;
}

export function isValidTimeZone(timeZone: string): boolean {
  return typeof timeZone === 'string' && timeZone.length > 0 && formatterOf(timeZone) !== undefined;
}

export interface LocalTime {
  year: number;
  /** 1–12 */
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** Wall-clock fields of an instant in a zone (year 0 is 1 BC). */
export function localTime(seconds: number, timeZone: string): LocalTime {
  const d = new Date((seconds + offsetAt(seconds, timeZone)) * 1000);
  return {
    year: d.getUTCFullYear(),
    month: d.getUTCMonth() + 1,
    day: d.getUTCDate(),
    hour: d.getUTCHours(),
    minute: d.getUTCMinutes(),
    second: d.getUTCSeconds(),
  };
}

/** The offset from Intl (slow: one formatToParts), in seconds. */
function offsetFromIntl(seconds: number, timeZone: string): number {
  const parts = formatterOf(timeZone)!.formatToParts(new Date(seconds * 1000));
  const get = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  const era = parts.find((p) => p.type === 'era')?.value;
  const year = era === 'BC' || era === 'B' ? 1 - get('year') : get('year');
  return Date.UTC(year, get('month') - 1, get('day'), get('hour'), get('minute'), get('second')) / 1000 - seconds;
}

const DAY = 86_400;
/** Per zone: the offset of each UTC day that has no transition in it. */
const dayOffsets = new Map<string, Map<number, number>>();
const MAX_CACHED_DAYS = 200_000;

/**
 * The zone's offset from UTC at an instant, in seconds. Zone rules change offsets at most twice a
 * year: a UTC day whose first and last second have the same offset has it throughout, and is
 * remembered (a year of day windows asks Intl ~700 times instead of ~6,000).
 */
export function offsetAt(seconds: number, timeZone: string): number {
  if (timeZone === 'UTC') return 0;
  const day = Math.floor(seconds / DAY);
  let days = dayOffsets.get(timeZone);
  const known = days?.get(day);
  if (known !== undefined) return known;
  const first = offsetFromIntl(day * DAY, timeZone);
  if (first !== offsetFromIntl(day * DAY + DAY - 1, timeZone)) return offsetFromIntl(seconds, timeZone);
  if (!days || days.size >= MAX_CACHED_DAYS) dayOffsets.set(timeZone, (days = new Map()));
  days.set(day, first);
  return first;
}

/**
 * The instant a wall-clock time names in a zone. Ambiguous times (a repeated hour) resolve to the
 * first occurrence; times that do not exist (skipped by DST) to the first instant after the gap.
 */
export function fromLocal(l: LocalTime, timeZone: string): number {
  const wall = Date.UTC(l.year, l.month - 1, l.day, l.hour, l.minute, l.second) / 1000;
  if (timeZone === 'UTC') return wall;
  // The offset of the instant can only be one of the offsets around `wall`.
  const candidates = new Set([offsetAt(wall - 86_400, timeZone), offsetAt(wall, timeZone), offsetAt(wall + 86_400, timeZone)]);
  const matches = [...candidates].map((o) => wall - o).filter((t) => offsetAt(t, timeZone) === wall - t);
  if (matches.length > 0) return Math.min(...matches);
  // In a gap: the transition instant, where the wall clock jumps past `wall`.
  let lo = wall - Math.max(...candidates);
  let hi = wall - Math.min(...candidates);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid + offsetAt(mid, timeZone) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** RFC 3339 text with the zone's offset at that instant (`Z` for UTC). */
export function formatInZone(seconds: number, timeZone: string): string {
  if (timeZone === 'UTC') return formatUtc(seconds);
  const offset = offsetAt(seconds, timeZone);
  if (offset === 0) return formatUtc(seconds);
  const local = new Date((seconds + offset) * 1000).toISOString().slice(0, 19);
  const sign = offset < 0 ? '-' : '+';
  const abs = Math.abs(offset);
  const hh = String(Math.floor(abs / 3600)).padStart(2, '0');
  const mm = String(Math.floor((abs % 3600) / 60)).padStart(2, '0');
  return `${local}${sign}${hh}:${mm}`;
}

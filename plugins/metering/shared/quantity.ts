/**
 * Exact decimal quantities, as OpenMeter's decimal-precision mode computes them (ClickHouse
 * `toDecimal128OrNull(value, 19)` in openmeter/streaming/clickhouse/meter_query.go): an event's value
 * has at most 19 digits before the point and 19 after it; sums are exact at any size.
 *
 * On the ingest path a quantity is a plain number while it is an integer that a double holds exactly
 * (counts, tokens, bytes: the usual case), so adding it allocates nothing; anything else is a bigint
 * of 10^-19 units. Division (averages) and old float states are handled by decimal.js, off that path.
 */
import { Decimal } from 'decimal.js';

/** A safe integer (number), or a whole number of 10^-19 units (bigint). */
export type Quantity = number | bigint;

export const SCALE = 19;
const UNITS_PER_ONE = 10n ** BigInt(SCALE);
/** Most digits before the point an event's value may have. */
export const MAX_INTEGER_DIGITS = 19;
/** Strings of at most this many digits are safe integers: parsed without a bigint. */
const SAFE_DIGITS = 15;

/** A numeric value that no quantity represents exactly (too large, too many decimals, infinite). */
export const OUT_OF_RANGE: unique symbol = Symbol('out of range');

const INTEGER_TEXT = /^[+-]?\d{1,15}$/;
/** What ClickHouse's toDecimal/toFloat read as a number: sign, digits, optional point and exponent. */
export const DECIMAL_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const DECIMAL_PARTS = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/** Enough significant digits for any average: sums reach ~10^35 (2^53 events of 10^19) plus 19 decimals. */
const Exact = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_DOWN });

function toUnits(q: Quantity): bigint {
  return typeof q === 'bigint' ? q : BigInt(q) * UNITS_PER_ONE;
}

export function addQuantities(a: Quantity, b: Quantity): Quantity {
  if (typeof a === 'number' && typeof b === 'number') {
    const sum = a + b;
    if (Number.isSafeInteger(sum)) return sum;
  }
  return toUnits(a) + toUnits(b);
}

export function compareQuantities(a: Quantity, b: Quantity): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  const x = toUnits(a);
  const y = toUnits(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * `digits` × 10^`exponent` as a quantity. With `bounded` (an event's value), OUT_OF_RANGE beyond 19
 * digits on either side of the point; otherwise (stored sums) any size, rounded to 19 decimals.
 */
function fromDigits(negative: boolean, allDigits: string, exponent: number, bounded: boolean): Quantity | typeof OUT_OF_RANGE {
  const leading = allDigits.length - allDigits.replace(/^0+/, '').length;
  let digits = allDigits.slice(leading);
  if (digits === '') return 0;
  const significant = digits.replace(/0+$/, '');
  exponent += digits.length - significant.length;
  digits = significant;
  if (bounded && (exponent < -SCALE || digits.length + exponent > MAX_INTEGER_DIGITS)) return OUT_OF_RANGE;
  if (exponent >= 0 && digits.length + exponent <= SAFE_DIGITS) {
    const n = Number(digits) * 10 ** exponent;
    return negative ? -n : n;
  }
  if (exponent < -SCALE) return fromDecimal(new Exact(`${negative ? '-' : ''}${digits}e${exponent}`).toDecimalPlaces(SCALE, Decimal.ROUND_HALF_UP));
  const units = BigInt(digits + '0'.repeat(exponent + SCALE));
  return negative ? -units : units;
}

function parseDecimalText(text: string, bounded: boolean): Quantity | typeof OUT_OF_RANGE {
  const [, sign, integer = '', fraction = '', exponent = '0'] = DECIMAL_PARTS.exec(text)!;
  return fromDigits(sign === '-', integer + fraction, Number(exponent) - fraction.length, bounded);
}

/**
 * The quantity an event's value stands for (numbers and numeric strings, as ClickHouse reads
 * `JSON_VALUE` text); undefined when it is no number at all (ignored, as OpenMeter does), OUT_OF_RANGE
 * when it is one that no quantity holds exactly. Runs for every event and value meter.
 */
export function parseQuantity(raw: unknown): Quantity | undefined | typeof OUT_OF_RANGE {
  if (typeof raw === 'number') {
    if (Number.isSafeInteger(raw)) return raw || 0;
    // JSON.parse reads 1e400 as Infinity (stored as null): a value, but beyond any range.
    if (!Number.isFinite(raw)) return OUT_OF_RANGE;
    const text = String(raw);
    return plainDecimal(text) ?? parseDecimalText(text, true);
  }
  if (typeof raw !== 'string') return undefined;
  if (raw.length <= SAFE_DIGITS + 1 && INTEGER_TEXT.test(raw)) return Number(raw) || 0;
  const plain = plainDecimal(raw);
  if (plain !== undefined) return plain;
  return DECIMAL_TEXT.test(raw) ? parseDecimalText(raw, true) : undefined;
}

/** True when a value is a number that no quantity holds exactly (refused at ingest); cheap for the usual ones. */
export function isOutOfRange(raw: unknown): boolean {
  if (typeof raw === 'number') {
    const magnitude = Math.abs(raw);
    // The shortest text of a double in this span has at most 19 digits on either side of the point.
    if (magnitude === 0 || (magnitude >= 0.01 && magnitude < 1e19)) return false;
  } else if (typeof raw === 'string') {
    if (raw.length <= MAX_INTEGER_DIGITS && !raw.includes('e') && !raw.includes('E')) return false;
  } else {
    return false;
  }
  return parseQuantity(raw) === OUT_OF_RANGE;
}

const ZEROS = Array.from({ length: SCALE + 1 }, (_, n) => '0'.repeat(n));

/**
 * The usual decimal, `-123.25`, read in one pass over its characters into one bigint (the general
 * parser's regular expressions and string edits cost more than the rest of an event's aggregation);
 * undefined for any other form (exponents, leading zeros, a bare point), which the general one reads.
 */
function plainDecimal(text: string): Quantity | typeof OUT_OF_RANGE | undefined {
  const end = text.length;
  let i = text.charCodeAt(0) === 45 /* - */ ? 1 : 0;
  const integerStart = i;
  while (i < end && isDigit(text.charCodeAt(i))) i++;
  const integerEnd = i;
  if (integerEnd === integerStart || (text.charCodeAt(integerStart) === 48 /* 0 */ && integerEnd - integerStart > 1)) return undefined;
  if (i === end || text.charCodeAt(i) !== 46 /* . */) return undefined;
  const fractionStart = ++i;
  while (i < end && isDigit(text.charCodeAt(i))) i++;
  let fractionEnd = i;
  if (i !== end || fractionEnd === fractionStart) return undefined;
  while (fractionEnd > fractionStart && text.charCodeAt(fractionEnd - 1) === 48) fractionEnd--;
  const integerDigits = text.charCodeAt(integerStart) === 48 ? 0 : integerEnd - integerStart;
  const fractionDigits = fractionEnd - fractionStart;
  if (integerDigits > MAX_INTEGER_DIGITS || fractionDigits > SCALE) return OUT_OF_RANGE;
  if (fractionDigits === 0) return undefined;
  const units = BigInt(text.slice(integerStart, integerEnd) + text.slice(fractionStart, fractionEnd) + ZEROS[SCALE - fractionDigits]);
  return integerStart === 1 ? -units : units;
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/** Decimal text without exponent (Konnect's `^-?[0-9]+(\.[0-9]+)?$`). */
export function formatQuantity(q: Quantity): string {
  if (typeof q === 'number') return String(q);
  const negative = q < 0n;
  const digits = (negative ? -q : q).toString().padStart(SCALE + 1, '0');
  const integer = digits.slice(0, -SCALE);
  const fraction = digits.slice(-SCALE).replace(/0+$/, '');
  return (negative ? '-' : '') + integer + (fraction ? '.' + fraction : '');
}

/**
 * A stored quantity. States written before quantities were exact hold doubles: each reads as the
 * decimal its shortest text shows (what the query printed then); `null`, which such states held for
 * a sum past the double range, was read as 0 then and still is (that total is lost).
 */
export function decodeQuantity(stored: number | string | null): Quantity {
  if (typeof stored === 'number') return Number.isSafeInteger(stored) ? stored || 0 : (parseDecimalText(String(stored), false) as Quantity);
  if (typeof stored === 'string') return parseDecimalText(stored, false) as Quantity;
  return 0;
}

function fromDecimal(d: Decimal): Quantity {
  return parseDecimalText(d.toFixed(), false) as Quantity;
}

/** `total` / `count`, rounded half away from zero to 19 decimals (AVG). */
export function divideQuantity(total: Quantity, count: number): Quantity {
  return fromDecimal(new Exact(formatQuantity(total)).div(count).toDecimalPlaces(SCALE, Decimal.ROUND_HALF_UP));
}

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

export function toUnits(q: Quantity): bigint {
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
    return parseDecimalText(String(raw), true);
  }
  if (typeof raw !== 'string') return undefined;
  if (raw.length <= SAFE_DIGITS + 1 && INTEGER_TEXT.test(raw)) return Number(raw) || 0;
  return DECIMAL_TEXT.test(raw) ? parseDecimalText(raw, true) : undefined;
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

/** The stored form: a JSON number for a safe integer, decimal text otherwise. */
export function encodeQuantity(q: Quantity): number | string {
  return typeof q === 'number' ? q : formatQuantity(q);
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

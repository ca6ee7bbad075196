/**
 * Money and quantities: arbitrary-precision decimals (decimal.js), never binary floating point.
 * Amounts are rounded to the currency's ISO 4217 minor unit, half away from zero, as OpenMeter's
 * `currencyx.Calculator.RoundToPrecision` does; quantities and unit prices are never rounded.
 */
import { Decimal as DecimalJs } from 'decimal.js';
import currencyCodes from 'currency-codes';

/** A private configuration: other users of decimal.js in the process keep theirs. */
export const Decimal = DecimalJs.clone({ precision: 60, rounding: DecimalJs.ROUND_HALF_UP, toExpNeg: -60, toExpPos: 60 });
export type Decimal = DecimalJs;

export const ZERO = new Decimal(0);

/** A decimal string as the API accepts it (OpenMeter's Numeric: `-?digits(.digits)?`). */
const DECIMAL_TEXT = /^-?[0-9]+(\.[0-9]+)?$/;
/** Longest decimal text accepted: bounds the work on hostile input and leaves room within the precision. */
export const MAX_DECIMAL_LENGTH = 40;

/** The decimal a text denotes, or undefined when it is not a plain decimal string. */
export function parseDecimal(text: unknown): Decimal | undefined {
  if (typeof text !== 'string' || text.length > MAX_DECIMAL_LENGTH || !DECIMAL_TEXT.test(text)) return undefined;
  return new Decimal(text);
}

/** Normalised text: no exponent, no trailing zeros ("0.10" reads back as "0.1"). */
export function formatDecimal(value: Decimal): string {
  return value.isZero() ? '0' : value.toFixed();
}

export interface Currency {
  code: string;
  /** Digits after the decimal point of the minor unit (USD 2, JPY 0, BHD 3). */
  minorDigits: number;
}

/** ISO 4217 entries that are no money (gold, SDR, bond units, testing, no currency) belong to no country. */
function isFiat(entry: { countries: string[] }): boolean {
  return entry.countries.length > 0 && !entry.countries.every((c) => c.startsWith('Zz'));
}

/** `'unknown'` for no ISO 4217 code, `'not_fiat'` for a code that is no money (e.g. XAU). */
export function currencyOf(code: unknown): Currency | 'unknown' | 'not_fiat' {
  if (typeof code !== 'string' || !/^[A-Z]{3}$/.test(code)) return 'unknown';
  const entry = currencyCodes.code(code);
  if (!entry) return 'unknown';
  if (!isFiat(entry)) return 'not_fiat';
  return { code, minorDigits: entry.digits };
}

/** Rounds an amount to the currency's minor unit, half away from zero. */
export function roundAmount(amount: Decimal, currency: Currency): Decimal {
  return amount.toDecimalPlaces(currency.minorDigits, Decimal.ROUND_HALF_UP);
}

export function sum(values: Decimal[]): Decimal {
  return values.reduce((a, b) => a.plus(b), ZERO);
}

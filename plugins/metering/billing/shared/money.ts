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

/** The decimal a JSON number's text denotes (exponents allowed), or undefined when its plain text is too long. */
export function parseNumberText(text: string): Decimal | undefined {
  if (text.length > MAX_DECIMAL_LENGTH) return undefined;
  const d = new Decimal(text);
  // The exponent first: the plain text of 1e39 is 40 digits, and of 1e-400 the work of writing 400.
  return Math.abs(d.e) < MAX_DECIMAL_LENGTH && formatDecimal(d).length <= MAX_DECIMAL_LENGTH ? d : undefined;
}

/** A decimal of at most this many significant digits survives a double: the double's shortest text is the decimal. */
export const EXACT_NUMBER_DIGITS = 15;

/**
 * The decimal of a number whose text is gone (a YAML number): only one of at most 15 significant
 * digits, which is then exactly what was written; a longer one may already have lost digits.
 */
export function parseNumber(n: number): Decimal | undefined {
  if (!Number.isFinite(n)) return undefined;
  const d = new Decimal(n);
  return d.sd() <= EXACT_NUMBER_DIGITS ? parseNumberText(String(n)) : undefined;
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

/** Every fiat ISO 4217 currency, by code: its name and the digits of its minor unit. */
export function fiatCurrencies(): { code: string; name: string; minorDigits: number }[] {
  return currencyCodes.data.filter(isFiat).map((entry) => ({ code: entry.code, name: entry.currency, minorDigits: entry.digits }));
}

/** Rounds an amount to the currency's minor unit, half away from zero. */
export function roundAmount(amount: Decimal, currency: Currency): Decimal {
  return amount.toDecimalPlaces(currency.minorDigits, Decimal.ROUND_HALF_UP);
}

export function sum(values: Decimal[]): Decimal {
  return values.reduce((a, b) => a.plus(b), ZERO);
}

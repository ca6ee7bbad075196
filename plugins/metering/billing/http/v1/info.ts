/**
 * OpenMeter v1's info: the currencies plans and customers take (every fiat ISO 4217 code, the same
 * check as their validation), and the progress of a query by client id. Tollgate answers a query only
 * once it is complete, so no query is ever in progress: every client id's progress is empty.
 */
import { fiatCurrencies } from '../../shared/money.ts';
import { operation, type V1Routes } from '../../../http/v1/router.ts';

/** The symbol the Unicode data (Intl) gives a currency, its code when there is none. */
function symbolOf(code: string): string {
  return new Intl.NumberFormat('en', { style: 'currency', currency: code, currencyDisplay: 'narrowSymbol' }).formatToParts(0).find((p) => p.type === 'currency')?.value ?? code;
}

export function infoRoutes(): V1Routes {
  const currencies = fiatCurrencies().map((c) => ({ code: c.code, name: c.name, symbol: symbolOf(c.code), subunits: 10 ** c.minorDigits }));
  return {
    'v1/info/currencies': { GET: operation('read', (ctx) => ctx.respond(200, currencies)) },
    'v1/info/progress/*': { GET: operation('read', (ctx) => ctx.respond(200, { success: 0, failed: 0, total: 0, updatedAt: new Date().toISOString() })) },
  };
}

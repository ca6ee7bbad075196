/**
 * Query results as CSV (`Accept: text/csv`), in OpenMeter v3's column order
 * (api/v3/handlers/meters/query_csv.go), safe to open in a spreadsheet.
 */
import { CUSTOMER_DIMENSION, type MeterQuery, type QueryResult } from '../query/port.ts';
import type { UsageCustomer } from '../shared/customer-directory.ts';

/**
 * What makes a spreadsheet read a cell as a formula: OWASP's "CSV Injection" list (= + - @ tab CR), LF and
 * NUL (ASVS 5.0 V1.2.10), and the same characters after leading spaces, which some importers trim.
 */
const FORMULA_START = /^(?:[\t\r\n\0]| *[=+\-@])/;
/** A number as spreadsheets read it (`-5`, `+5`, `1.5e-3`): a number there, never a formula, so harmless. */
const PLAIN_NUMBER = /^[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/**
 * RFC 4180 quotes fields holding `"`, `,`, CR or LF; `;` and tab too, which spreadsheets in many locales
 * split cells on (the text after one would start a cell of its own, unchecked).
 */
const NEEDS_QUOTES = /[",;\t\r\n]/;

/**
 * One cell: text a spreadsheet would run as a formula gets a leading `'`, which makes it plain text there,
 * as OWASP recommends; plain numbers stay as they are. Then quoted where needed.
 */
function cell(text: string): string {
  const safe = FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
  return NEEDS_QUOTES.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/**
 * CSV: `from,to,[subject,][customer_id,customer_key,customer_name,]<dimensions in request order…>,value`
 * (OpenMeter v3's column order); `customers` by id, for the key and name of a row's customer.
 */
export function toCsv(query: MeterQuery, result: QueryResult, customers: ReadonlyMap<string, UsageCustomer> = new Map()): string {
  const has = (name: string) => query.groupBy.includes(name);
  const dimensions = query.groupBy.filter((d) => d !== 'subject' && d !== CUSTOMER_DIMENSION);
  const customerColumns = has(CUSTOMER_DIMENSION) ? [CUSTOMER_DIMENSION, 'customer_key', 'customer_name'] : [];
  const header = [...(has('subject') ? ['subject'] : []), ...customerColumns, ...dimensions];
  // Every cell goes through the same rule, so no column is left out (dimension names come from meters).
  const lines = [['from', 'to', ...header, 'value'].map(cell).join(',')];
  for (const row of result.data) {
    const customer = customers.get(row.dimensions[CUSTOMER_DIMENSION] ?? '');
    const customerCells = has(CUSTOMER_DIMENSION) ? [customer?.id ?? '', customer?.key ?? '', customer?.name ?? ''] : [];
    const subjectCells = has('subject') ? [row.dimensions.subject ?? ''] : [];
    lines.push([row.from, row.to, ...subjectCells, ...customerCells, ...dimensions.map((d) => row.dimensions[d] ?? ''), row.value].map(cell).join(','));
  }
  return lines.join('\n') + '\n';
}

/**
 * Query results as CSV (`Accept: text/csv`), in OpenMeter v3's column order
 * (api/v3/handlers/meters/query_csv.go), safe to open in a spreadsheet.
 */
import type { QueryResult } from './query.ts';
import type { MeterQuery } from './query-request.ts';

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

/** CSV: `from,to,[subject,]<dimensions in request order…>,value` (OpenMeter v3's column order). */
export function toCsv(query: MeterQuery, result: QueryResult): string {
  const columns = query.groupBy.includes('subject') ? ['subject', ...query.groupBy.filter((d) => d !== 'subject')] : query.groupBy;
  // Every cell goes through the same rule, so no column is left out (dimension names come from meters).
  const lines = [['from', 'to', ...columns, 'value'].map(cell).join(',')];
  for (const row of result.data) {
    lines.push([row.from, row.to, ...columns.map((d) => row.dimensions[d] ?? ''), row.value].map(cell).join(','));
  }
  return lines.join('\n') + '\n';
}

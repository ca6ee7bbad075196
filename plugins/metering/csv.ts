/**
 * Query results as CSV (`Accept: text/csv`), in OpenMeter v3's column order
 * (api/v3/handlers/meters/query_csv.go), safe to open in a spreadsheet.
 */
import type { QueryResult } from './query.ts';
import type { MeterQuery } from './query-request.ts';

function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** What makes a spreadsheet read a cell as a formula (OWASP "CSV Injection"; ASVS 5.0 V1.2.10 adds NUL). */
const FORMULA_START = /^[=+\-@\t\r\0]/;
const PLAIN_NUMBER = /^[+-]?\d+(?:\.\d+)?$/;

/**
 * A cell of producer-chosen text (subject, dimension value): one a spreadsheet would run as a formula
 * gets a leading `'`, which makes it plain text there, as OWASP recommends. Plain numbers (`-5`) are
 * no formulas and stay as they are.
 */
function textCell(text: string): string {
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}

/** CSV: `from,to,[subject,]<dimensions in request order…>,value` (OpenMeter v3's column order). */
export function toCsv(query: MeterQuery, result: QueryResult): string {
  const columns = query.groupBy.includes('subject') ? ['subject', ...query.groupBy.filter((d) => d !== 'subject')] : query.groupBy;
  const lines = [['from', 'to', ...columns, 'value'].join(',')];
  for (const row of result.data) {
    lines.push([row.from, row.to, ...columns.map((d) => textCell(row.dimensions[d] ?? '')), row.value].map(csvField).join(','));
  }
  return lines.join('\n') + '\n';
}

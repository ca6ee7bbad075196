/**
 * The plugin's pure building blocks: RFC 3339 parsing, zone calendars (DST gaps and overlaps,
 * half-hour offsets), window bounds and their cover by roll-up buckets, exact decimal quantities, JSONPath,
 * key escaping, the stored form of events and the config schema.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileJsonPath, jsonValueText, lookup } from '../../../plugins/metering/shared/jsonpath.ts';
import { storedEventJson } from '../../../plugins/metering/ingest/events.ts';
import type { StoredEvent } from '../../../plugins/metering/shared/events.ts';
import { escapePart, unescapePart } from '../../../plugins/metering/shared/keys.ts';
import { configSchema } from '../../../plugins/metering/schema.ts';
import { addQuantities, decodeQuantity, divideQuantity, formatQuantity, isOutOfRange, OUT_OF_RANGE, parseQuantity, type Quantity } from '../../../plugins/metering/shared/quantity.ts';
import { formatInZone, fromLocal, parseRfc3339 } from '../../../plugins/metering/shared/time.ts';
import { coverSpan, windowEnd, windowStart, type Granularity } from '../../../plugins/metering/aggregation/windows.ts';
import { validate } from '../../../src/pdk/index.ts';

/** Window starts covering [from, to), plus the end of the last one. */
function windowBounds(from: number, to: number, granularity: Granularity, timeZone: string): number[] {
  const bounds = [windowStart(from, granularity, timeZone)];
  while (bounds[bounds.length - 1] < to) bounds.push(windowEnd(bounds[bounds.length - 1], granularity, timeZone));
  return bounds;
}

const at = (text: string) => parseRfc3339(text)!;

test('RFC 3339: offsets, fractions truncated, invalid dates refused', () => {
  assert.equal(at('2024-01-01T12:00:59.999Z'), Date.UTC(2024, 0, 1, 12, 0, 59) / 1000);
  assert.equal(at('2024-01-01T02:00:00+02:00'), Date.UTC(2024, 0, 1) / 1000);
  assert.equal(at('2024-02-29T23:59:59.5-23:59'), Date.UTC(2024, 1, 29, 23, 59, 59) / 1000 + (23 * 60 + 59) * 60);
  assert.equal(at('9999-12-31T23:59:59z'), Date.UTC(9999, 11, 31, 23, 59, 59) / 1000);
  // Years below 100 are those years (Date.UTC would read them as 1900–1999).
  assert.equal(at('0075-06-01T00:00:00Z'), new Date('0075-06-01T00:00:00Z').getTime() / 1000);
  for (const bad of ['2024-01-01 00:00:00Z', '2024-02-30T00:00:00Z', '2023-02-29T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01T00:00:00', 'yesterday',
    '2024-01-01T00:00:00.Z', '2024-01-01T00:00:00+0100', '2024-01-01T00:00:00+01:00 ', '2024-1-01T00:00:00Z', '2024-01-01T00:00:60Z', '2024-01-01T00:00:00+24:00']) {
    assert.equal(parseRfc3339(bad), undefined, bad);
  }
});

test('local times: a skipped midnight resolves after the gap, a repeated hour to its first occurrence', () => {
  // Santiago skipped 2024-09-08 00:00 -> 01:00.
  assert.equal(formatInZone(fromLocal({ year: 2024, month: 9, day: 8, hour: 0, minute: 0, second: 0 }, 'America/Santiago'), 'America/Santiago'), '2024-09-08T01:00:00-03:00');
  // Los Angeles repeated 01:00 on 2025-11-02.
  assert.equal(formatInZone(fromLocal({ year: 2025, month: 11, day: 2, hour: 1, minute: 30, second: 0 }, 'America/Los_Angeles'), 'America/Los_Angeles'), '2025-11-02T01:30:00-07:00');
});

test('window bounds: DST days are 23 and 25 hours, local hours keep half-hour offsets, months follow the calendar', () => {
  const la = windowBounds(at('2025-03-08T12:00:00-08:00'), at('2025-03-10T12:00:00-07:00'), 'P1D', 'America/Los_Angeles');
  assert.deepEqual(la.map((t) => formatInZone(t, 'America/Los_Angeles')), ['2025-03-08T00:00:00-08:00', '2025-03-09T00:00:00-08:00', '2025-03-10T00:00:00-07:00', '2025-03-11T00:00:00-07:00']);
  assert.equal(la[2] - la[1], 23 * 3600);
  const fall = windowBounds(at('2025-11-02T00:00:00-07:00'), at('2025-11-02T23:00:00-08:00'), 'P1D', 'America/Los_Angeles');
  assert.equal(fall[1] - fall[0], 25 * 3600);
  const kolkata = windowBounds(at('2025-01-01T10:00:00Z'), at('2025-01-01T11:00:00Z'), 'PT1H', 'Asia/Kolkata');
  assert.deepEqual(kolkata.map((t) => new Date(t * 1000).toISOString()), ['2025-01-01T09:30:00.000Z', '2025-01-01T10:30:00.000Z', '2025-01-01T11:30:00.000Z']);
  const months = windowBounds(at('2024-02-10T00:00:00Z'), at('2024-03-02T00:00:00Z'), 'P1M', 'UTC');
  assert.deepEqual(months.map((t) => new Date(t * 1000).toISOString().slice(0, 10)), ['2024-02-01', '2024-03-01', '2024-04-01']);
});

test('a local day is covered by a few roll-up blocks that tile it exactly', () => {
  const start = at('2025-06-01T00:00:00+05:30');
  const end = at('2025-06-02T00:00:00+05:30');
  const blocks: [string, number, number][] = [];
  coverSpan(start, end, (r) => blocks.push([r.level, r.start, r.end]));
  assert.ok(blocks.length <= 8, JSON.stringify(blocks));
  assert.equal(blocks[0][1], start);
  assert.equal(blocks[blocks.length - 1][2], end);
  for (let i = 1; i < blocks.length; i++) assert.equal(blocks[i][1], blocks[i - 1][2]);
});

test('quantities: exact decimal text without exponents, 19 digits either side of the point', () => {
  const quantity = (raw: unknown): Quantity => {
    const q = parseQuantity(raw);
    assert.ok(q !== undefined && q !== OUT_OF_RANGE, `${raw} is a quantity`);
    return q;
  };
  const text = (raw: unknown) => formatQuantity(quantity(raw));
  assert.equal(text(123.45678901234568), '123.45678901234568');
  assert.equal(text('1e18'), '1000000000000000000');
  assert.equal(text(1.5e-7), '0.00000015');
  assert.equal(text(-2.5), '-2.5');
  assert.equal(text(-0), '0');
  assert.equal(text('-9999999999999999999.9999999999999999999'), '-9999999999999999999.9999999999999999999');
  assert.equal(formatQuantity(addQuantities(quantity(5.001), quantity('3'))), '8.001');
  assert.equal(formatQuantity(addQuantities(Number.MAX_SAFE_INTEGER, quantity('0.5'))), '9007199254740991.5');
  assert.equal(formatQuantity(divideQuantity(quantity(2), 3)), '0.6666666666666666667', 'averages round half away from zero at 19 decimals');
  for (const outside of ['1e19', '10000000000000000000', '1e-20', '0.00000000000000000001', 1.7e308, 1e19, 1e-20, 0.00012345678901234567, Infinity]) {
    assert.equal(parseQuantity(outside), OUT_OF_RANGE, String(outside));
    assert.ok(isOutOfRange(outside), String(outside));
  }
  for (const inside of [0, 0.01, 0.0123456789012345678, 9.999999999999998e18, '9999999999999999999', '0.0000000000000000001', 'abc', null]) assert.ok(!isOutOfRange(inside), String(inside));
  for (const ignored of ['abc', 'NaN', 'Inf', true, null, {}]) assert.equal(parseQuantity(ignored), undefined, String(ignored));
  // States stored as doubles read as the decimal their text shows.
  assert.equal(formatQuantity(decodeQuantity(8.001000000000001)), '8.001000000000001');
  assert.equal(formatQuantity(decodeQuantity(1e21)), '1000000000000000000000');
});

test('JSONPath subset and JSON_VALUE text', () => {
  const data = { a: { 'b c': [10, { d: null }] }, t: true };
  assert.equal(jsonValueText(lookup(data, compileJsonPath("$.a['b c'][0]")!)), '10');
  assert.equal(jsonValueText(lookup(data, compileJsonPath('$.a["b c"][1].d')!)), 'null');
  assert.equal(jsonValueText(lookup(data, compileJsonPath('$.a')!)), '');
  assert.equal(jsonValueText(lookup(data, compileJsonPath('$.missing.x')!)), '');
  assert.equal(jsonValueText(lookup(data, compileJsonPath('$.t')!)), 'true');
  for (const bad of ['$.a[', 'a.b', '$..a', '$.a[*]']) assert.equal(compileJsonPath(bad), undefined, bad);
});

test('key escaping round-trips any text, lone surrogates included, without "/"', () => {
  for (const text of ['plain', 'a/b', '50%', 'ünï', '\ud800x', '', 'safe-prefix then unsafe: é/%', '~._-AZaz09']) {
    const escaped = escapePart(text);
    assert.ok(!escaped.includes('/') && /^[\x20-\x7e]*$/.test(escaped));
    assert.equal(unescapePart(escaped), text);
  }
});

test('stored events are the JSON of their record, whatever their strings hold', () => {
  const hostile = ['plain', 'quote " and \\ backslash', 'new\nline\ttab\u0000nul\u001f', 'emoji 😀', 'lone \ud800 surrogate', 'ünï / 50%', '</script>'];
  for (const text of hostile) {
    const record: StoredEvent = { id: text, source: text, type: text, subject: text, time: 1_700_000_000, ingested_at: 1_700_000_000_123 };
    for (const extra of [{}, { datacontenttype: 'application/json', dataschema: text, data: { [text]: text, n: 1.5, nested: [null, true] } }, { data: null }]) {
      const full = { ...record, ...extra };
      const json = storedEventJson(full);
      assert.deepEqual(JSON.parse(json), JSON.parse(JSON.stringify(full)), text);
      if (text.includes('\ud800 ')) assert.ok(json.includes('\\ud800'), 'lone surrogates are escaped, as JSON.stringify does');
    }
  }
});

test('config: settings left out take their defaults; an explicit null is refused, not run with', () => {
  const filled = validate(configSchema, {});
  assert.deepEqual(filled.issues, []);
  assert.equal(filled.value.retention_days, 730);
  assert.deepEqual(filled.value.billing, { collection_period: 'PT1H' });
  assert.deepEqual(validate(configSchema, { billing: {} }).value.billing, { collection_period: 'PT1H' });
  assert.deepEqual(validate(configSchema, { retention_days: null, billing: null, max_body_size: null }).issues, [
    { path: ['retention_days'], message: 'required field missing' },
    { path: ['billing'], message: 'required field missing' },
    { path: ['max_body_size'], message: 'required field missing' },
  ]);
  assert.deepEqual(validate(configSchema, { billing: { collection_period: null } }).issues, [{ path: ['billing', 'collection_period'], message: 'required field missing' }]);
});

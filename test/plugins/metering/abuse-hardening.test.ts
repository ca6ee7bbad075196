/**
 * Attacks an outside review made on metering values and identifiers, and their siblings: each is refused
 * with a 400 that names the field (nothing of the request stored), or handled exactly.
 * - sizes: identifiers and dimension values are bounded at ingest; a roll-up row stays bounded in bytes
 *   however long the series it holds (a batch rewrites it, so it must not grow with history);
 * - values: quantities are exact decimals (5.001 + 3 = 8.001); values a sum cannot hold exactly
 *   (1.7e308, 1e-20) are refused instead of turning a stored total into JSON null;
 * - identity: lone surrogates and invalid UTF-8 (which would read as U+FFFD and share a dedupe key) are
 *   refused, wherever they are in an event;
 * - CSV exports neutralise formula cells (OWASP), and `Accept: text/*` gets CSV;
 * - time: events dated more than a year ahead, and query or meter times that would print as `+010000-…`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LevelStore } from '../../../src/store/level.ts';
import { startGateway, TEST_DATABASE, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, CE_SINGLE, DAY, event, MeteringApi, ROUTE_PATH, unique } from './catalogue-support.ts';

const ROW_MAX_BYTES = 64 * 1024;

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway({
    routes: [{ name: 'metering', paths: [ROUTE_PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
  });
  api = new MeteringApi(gateway.http + ROUTE_PATH, 'unused');
});
after(() => gateway?.stop());

/** A fresh meter on its own event type; returns the type. */
async function meter(aggregation: string, extra: Record<string, unknown> = {}): Promise<{ key: string; type: string }> {
  const key = unique(aggregation);
  const type = unique('t');
  const valueProperty = aggregation === 'count' ? {} : { value_property: '$.value' };
  await api.createMeterOk({ key, name: key, event_type: type, aggregation, ...valueProperty, ...extra });
  return { key, type };
}

async function refusedNaming(res: Promise<import('./catalogue-support.ts').Reply>, field: string): Promise<void> {
  assertProblem(await res, 400, field);
}

async function valueOf(key: string, body: Record<string, unknown> = {}): Promise<string | undefined> {
  const result = await api.queryOk(key, body);
  return result.data[0]?.value;
}

describe('sizes: identifiers and dimension values are bounded', () => {
  test('a 10,000,000-character subject is refused at once, naming the field, and nothing is stored', async () => {
    const { key, type } = await meter('count');
    const huge = event({ type, subject: 's'.repeat(10_000_000) });
    await refusedNaming(api.ingest(huge), 'subject');
    assert.deepEqual(await api.listAllEvents({ id: huge.id }), []);
    assert.equal(await valueOf(key), '0');
  });

  test('id, source and type longer than 256 characters are refused; 256 are accepted', async () => {
    const { key, type } = await meter('count');
    for (const field of ['id', 'source', 'type']) await refusedNaming(api.ingest(event({ type, [field]: 'x'.repeat(257) })), field);
    await api.ingestOk(event({ type, id: 'i'.repeat(256), source: 's'.repeat(256), subject: 'u'.repeat(256) }));
    assert.equal(await valueOf(key), '1');
  });

  test('a dimension value longer than 1024 characters is refused for a meter that reads it', async () => {
    const { key, type } = await meter('count', { dimensions: { region: '$.region', zone: "$['zone name']" } });
    const res = await api.ingest([event({ type, data: { region: 'eu' } }), event({ type, data: { region: 'r'.repeat(1025) } }), event({ type, data: { 'zone name': 'z'.repeat(2000) } })]);
    const problem = assertProblem(res, 400, '[1].data.region');
    assert.ok(problem.invalid_parameters.some((p: any) => p.field === "[2].data['zone name']"), res.text);
    await api.ingestOk(event({ type, data: { region: 'r'.repeat(1024), notes: 'n'.repeat(100_000) } }));
    assert.equal(await valueOf(key), '1', 'only the accepted event counts; data no meter reads is not bounded');
  });

  test('meters: event types, dimension names, JSONPaths, labels and the number of dimensions are bounded', async () => {
    const base = { key: unique('bounded'), name: 'bounded', event_type: 't', aggregation: 'count' };
    await refusedNaming(api.createMeter({ ...base, event_type: 'e'.repeat(257) }), 'event_type');
    await refusedNaming(api.createMeter({ ...base, dimensions: { ['d'.repeat(64)]: '$.d' } }), 'dimensions.');
    await refusedNaming(api.createMeter({ ...base, dimensions: { d: `$${'.a'.repeat(600)}` } }), 'dimensions.d');
    await refusedNaming(api.createMeter({ ...base, dimensions: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`d${i}`, `$.d${i}`])) }), 'dimensions');
    await refusedNaming(api.createMeter({ ...base, labels: { team: 'x'.repeat(64) } }), 'labels.team');
    await api.createMeterOk({ ...base, dimensions: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`d${i}`, `$.d${i}`])) });
  });

  test('a roll-up row stays within its byte bound however long its series, and every series still counts', { skip: TEST_DATABASE === 'postgres' && 'reads the rows from the LevelDB files' }, async () => {
    const { key, type } = await meter('count', { dimensions: { a: '$.a', b: '$.b' } });
    // 60 series of ~2,000 characters each in one bucket: ~120 kB if one row held them all.
    const long = (i: number, c: string) => `${i}`.padStart(4, '0') + c.repeat(1000);
    for (let round = 0; round < 3; round++) {
      await api.ingestOk(Array.from({ length: 20 }, (_, j) => event({ type, subject: `s${round * 20 + j}`, data: { a: long(round * 20 + j, 'a'), b: long(j, 'b') } })));
    }
    const grouped = await api.queryOk(key, { group_by_dimensions: ['subject', 'a'] });
    assert.equal(grouped.data.length, 60);
    assert.ok(grouped.data.every((row) => row.value === '1'));
    assert.equal(await valueOf(key), '60');
    const longest = await longestRow(gateway);
    assert.ok(longest > 0 && longest <= ROW_MAX_BYTES, `longest roll-up row: ${longest} bytes`);
  });
});

/** The longest stored roll-up row (`r/` keys of the metering namespace): the gateway is stopped to read its store, then started again on it. */
async function longestRow(gw: TestGateway): Promise<number> {
  await gw.stop();
  const store = new LevelStore(`${gw.dataDir}/store`);
  await store.open();
  let longest = 0;
  try {
    for await (const [, value] of store.namespace('plugin.metering').scan({ prefix: 'r/' })) longest = Math.max(longest, value.length);
  } finally {
    await store.close();
  }
  gateway = await startGateway({
    routes: [{ name: 'metering', paths: [ROUTE_PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
  }, { dataDir: gw.dataDir });
  api = new MeteringApi(gateway.http + ROUTE_PATH, 'unused');
  return longest;
}

describe('values: exact decimals within a documented range', () => {
  test('sums, averages, min, max and latest are exact decimal strings', async () => {
    const values = ['5.001', 3, '0.1', 0.2, '12345678901234567.89'];
    const expected: Record<string, string> = {
      sum: '12345678901234576.191',
      avg: '2469135780246915.2382',
      min: '0.1',
      max: '12345678901234567.89',
      latest: '12345678901234567.89',
    };
    const start = Date.now() - 60 * 60_000;
    for (const [aggregation, value] of Object.entries(expected)) {
      const { key, type } = await meter(aggregation);
      await api.ingestOk(values.map((v, i) => event({ type, time: new Date(start + i * 1000).toISOString(), data: { value: v } })));
      assert.equal(await valueOf(key), value, aggregation);
    }
    const { key, type } = await meter('sum');
    await api.ingestOk([event({ type, data: { value: 5.001 } }), event({ type, data: { value: 3 } })]);
    assert.equal(await valueOf(key, { granularity: 'P1D' }), '8.001');
    const big = await meter('sum');
    await api.ingestOk([event({ type: big.type, data: { value: '9007199254740992' } }), event({ type: big.type, data: { value: '1' } })]);
    assert.equal(await valueOf(big.key), '9007199254740993', 'past 2^53, where doubles skip integers');
  });

  test('values no sum can hold exactly are refused; a stored total is never lost', async () => {
    const { key, type } = await meter('sum');
    const day = new Date(Date.now() - DAY).toISOString();
    await api.ingestOk([event({ type, time: day, data: { value: 100 } }), event({ type, time: day, data: { value: 250 } })]);
    for (const value of [1.7e308, -1.7e308, '1e19', '-10000000000000000000', '1e-20', '0.00000000000000000001']) {
      await refusedNaming(api.ingest([event({ type, time: day, data: { value: 1 } }), event({ type, time: day, data: { value } })]), '[1].data.value');
    }
    // 1e400 is read as Infinity: a number, beyond any range.
    const infinite = JSON.stringify(event({ type, time: day, data: { value: 0 } })).replace('"value":0', '"value":1e400');
    await refusedNaming(api.send('POST', '/events', infinite, { 'content-type': CE_SINGLE }), 'data.value');
    assert.equal(await valueOf(key, { granularity: 'P1D' }), '350');
    await api.ingestOk(event({ type, time: day, data: { value: '-9999999999999999999.9999999999999999999' } }));
    assert.equal(await valueOf(key), '-9999999999999999649.9999999999999999999');
  });

  test('an unusable value that is not a number is still ignored (OpenMeter), not refused', async () => {
    const { key, type } = await meter('sum');
    await api.ingestOk([event({ type, data: { value: 'NaN' } }), event({ type, data: { value: 'abc' } }), event({ type, data: { value: 2 } })]);
    assert.equal(await valueOf(key), '2');
  });
});

test('a meter created after its events ignores their out-of-range values and counts long dimension values under a bounded stand-in', async () => {
  const type = unique('later');
  const long = 'L'.repeat(5000);
  await api.ingestOk([
    event({ type, data: { value: '1e-20', region: 'eu' } }),
    event({ type, data: { value: 2, region: long } }),
    event({ type, data: { value: '3.5', region: long } }),
  ]);
  const key = unique('later');
  await api.createMeterOk({ key, name: key, event_type: type, aggregation: 'sum', value_property: '$.value', dimensions: { region: '$.region' } });
  const result = await api.queryOk(key, { group_by_dimensions: ['region'] });
  assert.equal(result.data.length, 1, JSON.stringify(result.data).slice(0, 300));
  const [row] = result.data;
  assert.equal(row.value, '5.5');
  assert.ok(row.dimensions.region.length <= 1024 && row.dimensions.region.startsWith('LLL'), `stand-in of ${row.dimensions.region.length} characters`);
  const listed = await api.listAllEvents({ type });
  const errors = listed.flatMap((item) => (item.validation_errors ?? []).map((e: { message: string }) => e.message));
  assert.ok(errors.some((m) => m.includes('out of range')), JSON.stringify(errors));
});

describe('identity: what cannot be keyed exactly is refused', () => {
  test('lone surrogates in an id are refused; U+FFFD and surrogate pairs are ids of their own', async () => {
    const { key, type } = await meter('count');
    const source = unique('src');
    for (const id of ['\ud800', '\udbff', 'a\udc00b']) await refusedNaming(api.ingest(event({ type, source, id })), 'id');
    await api.ingestOk(event({ type, source, id: '\ufffd' }));
    await api.ingestOk(event({ type, source, id: '\ud83d\ude00' }));
    await api.ingestOk(event({ type, source, id: '\ufffd' }));
    assert.equal(await valueOf(key), '2');
  });

  test('lone surrogates anywhere in an event are refused, naming where', async () => {
    const { type } = await meter('count');
    await refusedNaming(api.ingest(event({ type, source: 'x\ud800' })), 'source');
    await refusedNaming(api.ingest(event({ type, subject: '\udfff' })), 'subject');
    await refusedNaming(api.ingest([event({ type }), event({ type, data: { nested: [{ text: 'ok' }, { text: '\ud800' }] } })]), '[1].data.nested[1].text');
    await refusedNaming(api.ingest(event({ type, data: { ['key\udc00']: 1 } })), 'data');
    // The text "\ud800" (an escaped backslash) is plain ASCII.
    await api.ingestOk(event({ type, data: { text: '\\ud800' } }));
  });

  test('bodies that are not UTF-8 are refused (they would read as U+FFFD)', async () => {
    const { key, type } = await meter('count');
    for (const bytes of [[0xff], [0xfe], [0xed, 0xa0, 0x80]]) {
      const [head, tail] = JSON.stringify(event({ type, id: 'MARK' })).split('MARK');
      const body = Buffer.concat([Buffer.from(head), Buffer.from(bytes), Buffer.from(tail)]);
      assertProblem(await api.send('POST', '/events', body, { 'content-type': CE_SINGLE }), 400, 'body');
    }
    assertProblem(await api.send('POST', '/meters', Buffer.from([0x7b, 0xff, 0x7d]), { 'content-type': 'application/json' }), 400, 'body');
    assert.equal(await valueOf(key), '0');
  });
});

/** RFC 4180 fields of each record. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [[]];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') field += text[++i];
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') records[records.length - 1].push(field), (field = '');
    else if (c === '\n') records[records.length - 1].push(field), (field = ''), records.push([]);
    else field += c;
  }
  return records.filter((r) => r.length > 0);
}

describe('CSV exports', () => {
  test('formula cells are neutralised with a leading quote; numbers stay numbers', async () => {
    const { key, type } = await meter('sum', { dimensions: { note: '$.note' } });
    const hostile = ['=HYPERLINK("https://evil.example","x")', '@SUM(1+1)', '+1+1', '-2+3', '\tcmd', '\rcmd', '-5'];
    await api.ingestOk(hostile.map((note, i) => event({ type, subject: i === 0 ? '=cmd|"/c calc"!A1' : 'plain', data: { note, value: -1.5 } })));
    const res = await api.query(key, { group_by_dimensions: ['subject', 'note'] }, { accept: 'text/csv' });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/csv/);
    const rows = parseCsv(res.text).slice(1);
    const texts = rows.flatMap((row) => row.slice(2, 4));
    for (const text of texts) assert.ok(!/^[=+\-@\t\r]/.test(text) || text === '-5', `cell ${JSON.stringify(text)} could run as a formula`);
    assert.ok(texts.includes(`'=cmd|"/c calc"!A1`), res.text);
    for (const note of hostile.slice(0, -1)) assert.ok(texts.includes(`'${note}`), `${JSON.stringify(note)} is neutralised: ${res.text}`);
    assert.ok(texts.includes('-5'), 'a plain number stays a number');
    assert.ok(rows.every((row) => row[4] === '-1.5'), 'values stay numbers');
  });

  test('subjects: plain numbers stay, formulas hidden behind numbers, spaces or line breaks get the quote', async () => {
    const { key, type } = await meter('count');
    const expected: Record<string, string> = {
      '+5': '+5',
      '-5': '-5',
      '-1.5E+3': '-1.5E+3',
      "+5+cmd|' /C calc'!A0": "'+5+cmd|' /C calc'!A0",
      "-1+1|cmd '/C calc'!A0": "'-1+1|cmd '/C calc'!A0",
      '=1+1': "'=1+1",
      '@SUM(1)': "'@SUM(1)",
      '\t=1+1': "'\t=1+1",
      '\r=1+1': "'\r=1+1",
      '\n=1+1': "'\n=1+1",
      '  =1+1': "'  =1+1",
      'a;=1+1': 'a;=1+1',
      plain: 'plain',
    };
    await api.ingestOk(Object.keys(expected).map((subject) => event({ type, subject })));
    const res = await api.query(key, { group_by_dimensions: ['subject'] }, { accept: 'text/csv' });
    assert.equal(res.status, 200);
    const [header, ...rows] = parseCsv(res.text);
    assert.deepEqual(header, ['from', 'to', 'subject', 'value']);
    assert.deepEqual(rows.map((row) => row[2]).sort(), Object.values(expected).sort(), res.text);
    // Split on `;` or tab (as many locales do), a cell must still be one cell.
    for (const text of ['"a;=1+1"', `"'\t=1+1"`]) assert.ok(res.text.includes(`,${text},`), `${JSON.stringify(text)} is quoted: ${res.text}`);
  });

  test('Accept: text/* prefers CSV; */* and application/json stay JSON', async () => {
    const { key, type } = await meter('count');
    await api.ingestOk(event({ type }));
    const contentType = async (accept: string) => String((await api.query(key, {}, { accept })).headers['content-type']);
    assert.match(await contentType('text/*'), /^text\/csv/);
    assert.match(await contentType('text/csv;q=0.9, application/json;q=0.5'), /^text\/csv/);
    assert.match(await contentType('*/*'), /^application\/json/);
    assert.match(await contentType('application/json, text/csv'), /^application\/json/);
  });
});

describe('time: a documented window', () => {
  test('an event dated in year 10000 (or more than 365 days ahead) is refused; within a year it is accepted', async () => {
    const { key, type } = await meter('count');
    await refusedNaming(api.ingest(event({ type, time: '9999-12-31T23:59:59-23:59' })), 'time');
    await refusedNaming(api.ingest([event({ type }), event({ type, time: new Date(Date.now() + 366 * DAY).toISOString() })]), '[1].time');
    await api.ingestOk(event({ type, time: new Date(Date.now() + 300 * DAY).toISOString() }));
    const result = await api.queryOk(key);
    assert.equal(result.data[0].value, '1');
    assert.match(result.data[0].to, /^\d{4}-/);
  });

  test('query bounds and events_from that would print with a five-digit year are refused', async () => {
    const { key } = await meter('count');
    await refusedNaming(api.query(key, { to: '9999-12-31T23:59:59-23:59' }), 'to');
    await refusedNaming(api.query(key, { from: '0000-01-01T00:00:00+01:00' }), 'from');
    const ok = await api.queryOk(key, { from: '1970-01-01T00:00:00Z', to: '9999-12-31T00:00:00Z', time_zone: 'Pacific/Kiritimati' });
    assert.match(ok.to!, /^9999-/);
    await refusedNaming(api.createMeter({ key: unique('from'), name: 'from', event_type: 't', aggregation: 'count', events_from: '9999-12-31T23:59:59-23:59' }), 'events_from');
  });
});

test('query filters: in/nin take at most 100 values (OpenMeter)', async () => {
  const { key } = await meter('count', { dimensions: { region: '$.region' } });
  await refusedNaming(api.query(key, { filters: { dimensions: { region: { in: Array.from({ length: 101 }, (_, i) => `r${i}`) } } } }), 'filters.dimensions.region.in');
  await api.queryOk(key, { filters: { dimensions: { region: { nin: Array.from({ length: 100 }, (_, i) => `r${i}`) } } } });
});

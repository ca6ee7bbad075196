/**
 * Hostile and broken input against the metering endpoints of a gateway running as its own process: every
 * request gets a clear 4xx problem, nothing of a rejected request is stored, and the process keeps
 * answering (TEAM-BRIEF: bad input never crashes the process).
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, type SpawnedGateway } from '../../helpers/gateway.ts';
import { assertProblem, CE_BATCH, CE_SINGLE, event, JSON_TYPE, MeteringApi, meteringConfig, ROUTE_PATH, totalOf, unique, type Reply } from './catalogue-support.ts';

const METERS = [
  { key: 'abuse_count', name: 'Abuse count', event_type: 'abuse', aggregation: 'count' },
  { key: 'abuse_sum', name: 'Abuse sum', event_type: 'abuse', aggregation: 'sum', value_property: '$.value', dimensions: { region: '$.region' } },
];
/** The metering plugin's default `max_body_size` is 10 MiB; this is comfortably above it. */
const OVERSIZED = 11 * 1024 * 1024;

let gateway: SpawnedGateway;
let api: MeteringApi;
let exitCode: number | null | undefined;

before(async () => {
  gateway = await spawnGateway(meteringConfig({ meters: METERS }));
  gateway.exited.then((code) => (exitCode = code));
  api = await MeteringApi.connect(gateway.https);
});
after(async () => {
  gateway?.kill('SIGTERM');
  await gateway?.exited;
});

/** The process is alive and serving: an authenticated read answers 200. */
async function assertAlive(): Promise<void> {
  assert.equal(exitCode, undefined, `the gateway exited (${exitCode})`);
  const res = await api.listMeters();
  assert.equal(res.status, 200, `the gateway still answers (${res.status})`);
}

/** A hostile request answered with a 4xx problem, after which the gateway is still alive. */
async function refused(send: () => Promise<Reply>, statuses: number[] = [400]): Promise<Reply> {
  const res = await send();
  assert.ok(statuses.includes(res.status), `expected ${statuses.join('/')}, got ${res.status}: ${res.text.slice(0, 300)}`);
  assertProblem(res, res.status);
  await assertAlive();
  return res;
}

/**
 * A raw POST to the events endpoint: `declaredLength` set sends only a first chunk under that declared
 * Content-Length; otherwise `body` goes out chunked (no Content-Length).
 */
function rawPost(options: { declaredLength: number } | { chunked: Buffer }): Promise<Reply> {
  const headers: Record<string, string | number> = { authorization: `Bearer ${api.token}`, 'content-type': CE_SINGLE };
  if ('declaredLength' in options) headers['content-length'] = options.declaredLength;
  else headers['transfer-encoding'] = 'chunked';
  return new Promise((resolve, reject) => {
    const req = https.request(`${api.base}/events`, { method: 'POST', rejectUnauthorized: false, agent: false, headers });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        const text = body.toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json: () => JSON.parse(text) });
        req.destroy();
      });
    });
    req.on('error', reject);
    if ('declaredLength' in options) req.write('[{"specversion":"1.0",');
    else req.end(options.chunked);
  });
}

const nested = (depth: number, open: string, close: string, inner = '1') => open.repeat(depth) + inner + close.repeat(depth);

describe('a request with an invalid event stores nothing', () => {
  test('one bad event in a batch rejects the whole batch, every problem listed, nothing stored', async () => {
    const type = unique('atomic');
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    const good = [event({ type }), event({ type }), event({ type })];
    const bad = event({ type, time: 'not a time' });
    const worse = event({ type });
    delete worse.subject;
    const res = await refused(() => api.ingest([good[0], bad, good[1], worse, good[2]]));
    const problem = res.json();
    const fields = problem.invalid_parameters.map((p: any) => String(p.field));
    assert.ok(fields.some((f: string) => f.includes('1') && f.includes('time')), `the time of event 1 is listed: ${fields}`);
    assert.ok(fields.some((f: string) => f.includes('3') && f.includes('subject')), `the subject of event 3 is listed: ${fields}`);

    assert.deepEqual(await api.listAllEvents({ type }), [], 'no event of the rejected request is stored');
    assert.equal(totalOf(await api.queryOk(type)), 0);
    // The valid events were not claimed by the dedupe index either: sent alone, they count.
    await api.ingestOk(good);
    assert.equal(await api.totalWhen(type, 3), 3);
  });

  test('an event older than the retention is rejected with 400 and not stored', async () => {
    const old = event({ type: 'abuse', time: new Date(Date.now() - 3 * 365 * 86_400_000).toISOString() });
    await refused(() => api.ingest(old));
    assert.deepEqual(await api.listAllEvents({ id: old.id }), []);
  });
});

describe('limits', () => {
  test('a declared body length above the limit is refused with 413 before the body is read', async () => {
    // Only the first bytes are sent: the answer must come from the declared length alone. (A client that
    // pushes the whole body races the close that follows the early 413; curl reads the 413, Node's client
    // may report EPIPE.)
    const res = await rawPost({ declaredLength: OVERSIZED });
    assertProblem(res, 413);
    await assertAlive();
  });

  test('a chunked body above the limit is refused with 413', async () => {
    const body = Buffer.from(JSON.stringify(event({ type: 'abuse', data: { filler: 'x'.repeat(OVERSIZED) } })));
    assertProblem(await rawPost({ chunked: body }), 413);
    await assertAlive();
  });

  test('5000 events in one request within the body limit are accepted', async () => {
    const type = unique('many');
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    await api.ingestOk(Array.from({ length: 5000 }, () => event({ type })));
    assert.equal(await api.totalWhen(type, 5000), 5000);
  });
});

describe('hostile input never crashes the process', () => {
  const bodies: [name: string, contentType: string, body: string | Buffer][] = [
    ['not JSON', CE_SINGLE, 'invalid'],
    ['truncated JSON', CE_BATCH, '[{"specversion":"1.0",'],
    ['empty body', CE_SINGLE, ''],
    ['binary garbage', JSON_TYPE, Buffer.from([0x00, 0xff, 0xfe, 0x7b, 0x80, 0x81])],
    ['JSON null', CE_SINGLE, 'null'],
    ['a number', JSON_TYPE, '42'],
    ['a string', JSON_TYPE, '"event"'],
    ['an array of numbers', CE_BATCH, '[1,2,3]'],
    ['an array with null', CE_BATCH, '[null]'],
    ['an object as a batch', CE_BATCH, JSON.stringify(event())],
    ['an array as a single event', CE_SINGLE, JSON.stringify([event()])],
    ['an empty object', CE_SINGLE, '{}'],
    ['100k nested arrays', CE_BATCH, nested(100_000, '[', ']')],
    ['100k nested objects as data', CE_SINGLE, JSON.stringify(event()).replace(/}$/, `,"data":${nested(100_000, '{"a":', '}', '{}')}}`)],
    ['100k nested arrays as an attribute', JSON_TYPE, JSON.stringify(event()).replace(/}$/, `,"dataschema":${nested(100_000, '[', ']')}}`)],
    ['attributes of the wrong types', CE_SINGLE, JSON.stringify({ ...event(), id: 1, source: {}, type: [], subject: true, time: 0 })],
    ['a __proto__ attribute', CE_SINGLE, JSON.stringify(event()).replace(/}$/, ',"__proto__":{"polluted":true}}')],
    ['5000 invalid events', CE_BATCH, JSON.stringify(Array.from({ length: 5000 }, () => ({ specversion: '1.0' })))],
    ['a 2 MB id in an event with a bad time', CE_SINGLE, JSON.stringify(event({ id: 'i'.repeat(2 * 1024 * 1024), time: 'bad' }))],
    ['a lone surrogate in the subject of an event with a bad time', CE_SINGLE, JSON.stringify(event()).replace(/"subject":"[^"]*"/, '"subject":"\\ud800"').replace(/"time":"[^"]*"/, '"time":"x"')],
  ];
  for (const [name, contentType, body] of bodies) {
    test(`events: ${name}`, async () => {
      await refused(() => api.send('POST', '/events', body, { 'content-type': contentType }), [400, 413]);
    });
  }

  const contentTypes = ['text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/cloudevents+xml', 'application/jsonx', ''];
  for (const contentType of contentTypes) {
    test(`events with content type "${contentType || '(none)'}" are refused`, async () => {
      const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {};
      await refused(() => api.send('POST', '/events', JSON.stringify(event()), headers), [400, 415]);
    });
  }

  test('huge but valid strings are stored or refused, never a 5xx', async () => {
    const e = event({ type: 'abuse', subject: 's'.repeat(1024 * 1024), data: { region: 'r'.repeat(1024 * 1024), value: 1 } });
    const res = await api.ingest(e);
    assert.ok(res.status === 202 || (res.status >= 400 && res.status < 500), `answered ${res.status}`);
    await assertAlive();
  });

  test('a __proto__ key inside data is plain data', async () => {
    const type = unique('proto');
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'sum', value_property: '$.value', dimensions: { polluted: '$.polluted' } });
    const body = JSON.stringify(event({ type, data: { value: 1 } })).replace('"data":{', '"data":{"__proto__":{"polluted":"yes","value":100},');
    await api.ingestOk(JSON.parse(body));
    await api.ingestOk(event({ type, data: { value: 2 } }));
    const result = await api.queryWhen(type, { group_by_dimensions: ['polluted'] }, (r) => r.data.reduce((s, row) => s + Number(row.value), 0) >= 3);
    assert.deepEqual(result.data.map((r) => [r.dimensions.polluted, r.value]), [['', '3']]);
    await assertAlive();
  });

  test('a number beyond double range (1e400) reads the same for a live meter and for one created later', async () => {
    const type = unique('overflow');
    const meter = (key: string) => ({ key, name: key, event_type: type, aggregation: 'unique_count', value_property: '$.value', dimensions: { size: '$.size' } });
    const live = unique('live');
    await api.createMeterOk(meter(live));
    const body = JSON.stringify(event({ type, data: { value: 0, size: 0 } })).replace('"value":0,"size":0', '"value":1e400,"size":-1e400');
    const res = await api.send('POST', '/events', body, { 'content-type': CE_SINGLE });
    assert.equal(res.status, 202, res.text);
    const later = unique('later');
    await api.createMeterOk(meter(later));
    const grouped = async (key: string) => (await api.queryOk(key, { group_by_dimensions: ['size'] })).data.map((r) => [r.dimensions.size, r.value]);
    const [listed] = await api.listAllEvents({ id: JSON.parse(body).id });
    assert.deepEqual(await grouped(live), await grouped(later), 'aggregated alike at ingest and by the backfill');
    assert.deepEqual(await grouped(live), [[String(listed.event.data.size), '0']], 'as the stored event reads');
    await assertAlive();
  });

  const queries: [name: string, body: string][] = [
    ['not JSON', '{"from":'],
    ['an array', '[]'],
    ['wrong types', JSON.stringify({ from: 1, to: {}, granularity: ['PT1H'], group_by_dimensions: 'region' })],
    ['deeply nested filters', JSON.stringify({ filters: { dimensions: { region: JSON.parse(nested(50, '{"and":[', ']}', '{"eq":"x"}')) } } })],
    ['100k nested arrays', nested(100_000, '[', ']')],
    ['an unknown field', JSON.stringify({ window_size: 'HOUR' })],
  ];
  for (const [name, body] of queries) {
    test(`query: ${name}`, async () => {
      await refused(() => api.send('POST', '/meters/abuse_sum/query', body, { 'content-type': JSON_TYPE }));
    });
  }

  test('meters: a deeply nested create body is refused', async () => {
    await refused(() => api.send('POST', '/meters', nested(100_000, '[', ']'), { 'content-type': JSON_TYPE }));
  });

  test('meters: a 200 kB value property and 10k dimensions are handled (created or refused, never a 5xx)', async () => {
    const long = { key: unique('long'), name: 'long', event_type: 't', aggregation: 'sum', value_property: `$${'.a'.repeat(100_000)}` };
    const wide = { key: unique('wide'), name: 'wide', event_type: 't', aggregation: 'count', dimensions: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`d${i}`, `$.d${i}`])) };
    for (const meter of [long, wide]) {
      const res = await api.createMeter(meter);
      assert.ok(res.status === 201 || (res.status >= 400 && res.status < 500), `answered ${res.status}`);
    }
    await api.ingestOk(event({ type: 't', data: { a: 1 } }));
    await assertAlive();
  });

  test('events: a forged cursor or bad filters are refused', async () => {
    await refused(() => api.listEvents({ 'page[after]': 'forged-cursor' }));
    await refused(() => api.listEvents({ 'page[after]': Buffer.from('{"t":"x","k":"../../"}').toString('base64url') }));
    await refused(() => api.listEvents({ to: 'tomorrow' }));
    await refused(() => api.listEvents({ 'page[size]': '1e9' }));
  });

  test('unknown paths and methods under the route are 4xx', async () => {
    for (const [method, path] of [['GET', '/nope'], ['PATCH', '/events'], ['DELETE', '/events'], ['POST', '/meters/abuse_sum'], ['GET', '/meters/abuse_sum/query/extra'], ['GET', `/meters/${'%ff'.repeat(100)}`]]) {
      const res = await api.send(method, path);
      assert.ok(res.status >= 400 && res.status < 500, `${method} ${path}: ${res.status}`);
    }
    await assertAlive();
  });

  test('without a token, or with a bad one, nothing is accepted (401)', async () => {
    const url = `${gateway.https}${ROUTE_PATH}/events`;
    const body = JSON.stringify(event({ type: 'abuse' }));
    const anonymous = await request(url, { method: 'POST', headers: { 'content-type': CE_SINGLE }, body });
    assert.equal(anonymous.status, 401);
    const forged = await request(url, { method: 'POST', headers: { 'content-type': CE_SINGLE, authorization: 'Bearer forged' }, body });
    assert.equal(forged.status, 401);
    assert.deepEqual(await api.listAllEvents({ id: JSON.parse(body).id }), []);
    await assertAlive();
  });
});

/**
 * OpenMeter catalogue §7.1 (ingestion), ported to Tollgate's v3 API of INTERFACE §5: 202 instead of v1's 204,
 * `application/problem+json` errors with `invalid_parameters`, snake_case, paths under `/v3/metering`.
 * Events are produced with the official CloudEvents SDK wherever a producer would use it.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, describe, test } from 'node:test';
import { CloudEvent, HTTP } from 'cloudevents';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import {
  assertProblem,
  CE_BATCH,
  CE_SINGLE,
  DAY,
  event,
  inParallel,
  iso,
  JSON_TYPE,
  MeteringApi,
  meteringConfig,
  MINUTE,
  rows,
  totalOf,
  unique,
  utcDayAgo,
} from './catalogue-support.ts';

const sumOfDuration = (key: string, eventType = key) => ({
  key,
  name: key,
  event_type: eventType,
  aggregation: 'sum',
  value_property: '$.duration_ms',
});

/** Fixture meters M_ingest, M_batch, M_json, M_invalid, declared in gateway.yaml as an operator would. */
const DECLARED_METERS = [
  sumOfDuration('ingest'),
  sumOfDuration('batchingest'),
  sumOfDuration('ingest_content_type_application_json'),
  sumOfDuration('ingest_invalid'),
];

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ meters: DECLARED_METERS }));
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

/** Sends a CloudEvent the way the SDK's HTTP binding serializes it (structured mode). */
function sendStructured(ce: CloudEvent<unknown>) {
  const message = HTTP.structured(ce);
  return api.send('POST', '/events', String(message.body), message.headers as Record<string, string>);
}

/** Second-precision ISO time (Tollgate, as OpenMeter, stores event times in whole seconds). */
function wholeSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString();
}

describe('§7.1 ingestion', () => {
  test('ING-01 one structured-mode CloudEvent is accepted with 202 and listed with its attributes', async () => {
    const time = wholeSeconds(Date.now() - 60 * MINUTE);
    const ce = new CloudEvent({
      id: unique('ing01'),
      source: 'ing01-source',
      type: 'ing01',
      subject: 'ing01-subject',
      time,
      data: { duration_ms: 1 },
    });
    const res = await sendStructured(ce);
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.length, 0, 'empty body');

    const items = await api.eventsWhen({ id: ce.id }, 1);
    assert.equal(items.length, 1);
    const listed = items[0].event;
    assert.equal(listed.id, ce.id);
    assert.equal(listed.source, 'ing01-source');
    assert.equal(listed.subject, 'ing01-subject');
    assert.equal(listed.type, 'ing01');
    assert.equal(iso(listed.time), time);
    assert.deepEqual(listed.data, { duration_ms: 1 });
  });

  test('ING-02 a batch of 10 CloudEvents is accepted and every event is stored intact', async () => {
    const type = unique('ing02');
    const start = Math.floor(Date.now() / 1000) * 1000 - 30 * MINUTE;
    const batch = Array.from(
      { length: 10 },
      (_, i) =>
        new CloudEvent({
          id: `id${i + 1}`,
          source: `test${i + 1}`,
          type,
          subject: `sub${i + 1}`,
          time: new Date(start + i * 1000).toISOString(),
          data: { n: i + 1 },
        }),
    );
    const res = await api.send('POST', '/events', JSON.stringify(batch), { 'content-type': CE_BATCH });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.length, 0);

    const items = await api.eventsWhen({ type }, 10);
    assert.equal(items.length, 10);
    const byId = new Map(items.map((item) => [item.event.id, item.event]));
    for (let i = 1; i <= 10; i++) {
      const listed = byId.get(`id${i}`);
      assert.ok(listed, `id${i} listed`);
      assert.equal(listed.source, `test${i}`);
      assert.equal(listed.subject, `sub${i}`);
      assert.equal(iso(listed.time), new Date(start + (i - 1) * 1000).toISOString());
      assert.deepEqual(listed.data, { n: i });
    }
  });

  test('ING-03 a body that is not JSON is a 400 problem', async () => {
    const res = await api.send('POST', '/events', 'invalid', { 'content-type': CE_SINGLE });
    assertProblem(res, 400);
  });

  test('ING-04 1000 single-event requests over ±30 days all count, future events included', async () => {
    const now = Date.now();
    let expected = 0;
    const events = Array.from({ length: 1000 }, () => {
      const duration = 1 + Math.floor(Math.random() * 100);
      expected += duration;
      return new CloudEvent({
        id: unique('ing04'),
        source: 'ing04',
        type: 'ingest',
        subject: 'ing04',
        time: new Date(now + (Math.random() * 2 - 1) * 30 * DAY).toISOString(),
        data: { duration_ms: String(duration) },
      });
    });
    await inParallel(events, 16, async (ce) => {
      const res = await sendStructured(ce);
      assert.equal(res.status, 202, res.text);
    });
    assert.equal(await api.totalWhen('ingest', expected), expected);
    const result = await api.queryOk('ingest');
    assert.equal(result.data.length, 1, 'one total row');
  });

  test('ING-05 one event as application/json (an object) is accepted', async () => {
    const res = await api.ingest(
      event({ type: 'ingest_content_type_application_json', time: iso(Date.now() - 60 * MINUTE), data: { duration_ms: '100' } }),
      JSON_TYPE,
    );
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.length, 0);
  });

  test('ING-06 an array of two events as application/json is accepted; the total is 300', async () => {
    const two = [1, 2].map(() =>
      event({ type: 'ingest_content_type_application_json', time: iso(Date.now() - 60 * MINUTE), data: { duration_ms: '100' } }),
    );
    await api.ingestOk(two, JSON_TYPE);
    const total = await api.totalWhen('ingest_content_type_application_json', 300);
    assert.equal(total, 300);
  });

  test('ING-07 1000 events in one batch request are all summed', async () => {
    const batch = Array.from({ length: 1000 }, (_, i) =>
      new CloudEvent({
        id: unique('ing07'),
        source: 'ing07',
        type: 'batchingest',
        subject: 'ing07',
        time: new Date(Date.now() - i * 1000).toISOString(),
        data: { duration_ms: String(i + 1) },
      }),
    );
    const res = await api.send('POST', '/events', JSON.stringify(batch), { 'content-type': CE_BATCH });
    assert.equal(res.status, 202, res.text);
    assert.equal(await api.totalWhen('batchingest', 500_500), 500_500);
  });

  describe('ING-08..16 invalid and unusable events of M_invalid (each one minute older than the last)', () => {
    const subject = 'ingest_invalid';
    let time = Date.now() - 10 * MINUTE;
    const nextInvalid = (fields: Record<string, unknown>) => {
      time -= MINUTE;
      return event({ type: 'ingest_invalid', subject, time: wholeSeconds(time), ...fields });
    };

    test('ING-08 datacontenttype application/xml is rejected with 400', async () => {
      assertProblem(await api.ingest(nextInvalid({ datacontenttype: 'application/xml', data: '<xml></xml>' })), 400, 'datacontenttype');
    });
    test('ING-09 data that is a string is rejected with 400', async () => {
      assertProblem(await api.ingest(nextInvalid({ data: 'string' })), 400, 'data');
    });
    test('ING-10 data null is accepted', async () => {
      await api.ingestOk(nextInvalid({ data: null }));
    });
    test('ING-11 no data is accepted', async () => {
      const e = nextInvalid({});
      assert.equal('data' in e, false);
      await api.ingestOk(e);
    });
    test('ING-12 empty data object is accepted', async () => {
      await api.ingestOk(nextInvalid({ data: {} }));
    });
    test('ING-13 duration "NaN" is accepted', async () => {
      await api.ingestOk(nextInvalid({ data: { duration_ms: 'NaN' } }));
    });
    test('ING-14 duration "Inf" is accepted', async () => {
      await api.ingestOk(nextInvalid({ data: { duration_ms: 'Inf' } }));
    });
    test('ING-15 a valid event counts and the unusable ones contribute nothing', async () => {
      await api.ingestOk(nextInvalid({ data: { duration_ms: '100' } }));
      const result = await api.queryWhen('ingest_invalid', {}, (r) => totalOf(r) >= 100);
      assert.equal(result.data.length, 1);
      assert.equal(Number(result.data[0].value), 100);
    });
    test('ING-16 listing shows the 6 stored events newest first with their validation errors', async () => {
      const items = await api.eventsWhen({ subject }, 6);
      assert.equal(items.length, 6, 'the two rejected events are absent');
      const times = items.map((item) => Date.parse(item.event.time));
      assert.deepEqual(times, [...times].sort((a, b) => b - a), 'newest first');
      const messages = items.map((item) => (item.validation_errors ?? []).map((e) => e.message).join('\n'));
      const expected = [
        'invalid event: null and missing value property',
        'invalid event: null and missing value property',
        'invalid event: missing value property: "$.duration_ms"',
        'invalid event: value cannot be NaN',
        'invalid event: value cannot be infinity',
      ];
      expected.forEach((message, i) => assert.ok(messages[i].includes(message), `item ${i}: ${messages[i]} has ${message}`));
      assert.deepEqual(items[5].validation_errors ?? [], [], 'the valid event has no validation error');
      for (const item of items) {
        for (const error of item.validation_errors ?? []) assert.equal(typeof error.code, 'string');
      }
    });
  });

  test('ING-17 an event without subject is rejected with 400', async () => {
    const e = event();
    delete e.subject;
    assertProblem(await api.ingest(e), 400, 'subject');
  });

  describe('ING-18 each of id, source, type missing or empty is rejected with 400', () => {
    for (const field of ['id', 'source', 'type']) {
      test(`missing ${field}`, async () => {
        const e = event();
        delete e[field];
        assertProblem(await api.ingest(e), 400, field);
      });
      test(`empty ${field}`, async () => {
        assertProblem(await api.ingest(event({ [field]: '' })), 400, field);
      });
    }
    test('empty subject', async () => {
      assertProblem(await api.ingest(event({ subject: '' })), 400, 'subject');
    });
  });

  test('ING-19 specversion "2.0" and a missing specversion are both rejected with 400', async () => {
    assertProblem(await api.ingest(event({ specversion: '2.0' })), 400, 'specversion');
    const e = event();
    delete e.specversion;
    assertProblem(await api.ingest(e), 400, 'specversion');
  });

  test('ING-20 a time that is not RFC 3339 is rejected with 400', async () => {
    assertProblem(await api.ingest(event({ time: '2023-01-01 00:00:00' })), 400, 'time');
  });

  test('ING-21 an event without time gets the receive time', async () => {
    const e = event({ type: 'ingest', subject: 'ing21' });
    delete e.time;
    const before = Math.floor(Date.now() / 1000) * 1000;
    await api.ingestOk(e);
    const afterwards = Date.now();
    const [item] = await api.eventsWhen({ id: e.id }, 1);
    assert.ok(item, 'listed');
    const time = Date.parse(item.event.time);
    assert.ok(time >= before && time <= afterwards, `${item.event.time} is the receive time`);
  });

  test('ING-22 a time with a +02:00 offset is stored as the same instant in UTC', async () => {
    const day = utcDayAgo(1).toISOString().slice(0, 10);
    const e = event({ time: `${day}T02:00:00+02:00`, subject: 'ing22' });
    await api.ingestOk(e);
    const [item] = await api.eventsWhen({ id: e.id }, 1);
    assert.ok(item, 'listed');
    assert.equal(iso(item.event.time), `${day}T00:00:00.000Z`);
    assert.match(item.event.time, /Z$/, 'rendered in UTC');
  });

  test('ING-23 sub-second times are truncated: 12:00:59.999 is in the 12:00 minute and after from=12:00:59.5', async () => {
    const key = unique('ing23');
    await api.createMeterOk(sumOfDuration(key));
    const day = utcDayAgo(1).toISOString().slice(0, 10);
    await api.ingestOk(event({ type: key, time: `${day}T12:00:59.999Z`, data: { duration_ms: 5 } }));
    const minute = await api.queryWhen(key, { granularity: 'PT1M' }, (r) => r.data.length > 0);
    assert.deepEqual(rows(minute), [{ from: `${day}T12:00:00.000Z`, to: `${day}T12:01:00.000Z`, value: 5 }]);
    const fromHalf = await api.queryOk(key, { from: `${day}T12:00:59.5Z` });
    assert.equal(totalOf(fromHalf), 5);
  });

  test('ING-24 Content-Type text/plain is rejected with 400', async () => {
    assertProblem(await api.send('POST', '/events', JSON.stringify(event()), { 'content-type': 'text/plain' }), 400);
  });

  test('ING-25 application/json with an empty array is rejected with 400 (no events found)', async () => {
    assertProblem(await api.ingest([], JSON_TYPE), 400);
  });

  test('ING-26 the batch content type with an empty array is accepted', async () => {
    await api.ingestOk([], CE_BATCH);
  });

  test('ING-27 charset parameters on the content type are tolerated', async () => {
    await api.ingestOk(event({ subject: 'ing27' }), 'application/json; charset=utf-8');
    await api.ingestOk([event({ subject: 'ing27' })], 'application/cloudevents-batch+json; charset=UTF-8');
  });

  test('ING-28 the v3 event schema is sealed: an unknown top-level attribute is rejected with 400', async () => {
    assertProblem(await api.ingest(event({ foo: 'bar' })), 400, 'foo');
  });

  test('ING-29 an event whose type no meter uses is accepted and listed without validation errors', async () => {
    const e = event({ type: 'nomatch', subject: 'ing29' });
    await api.ingestOk(e);
    const [item] = await api.eventsWhen({ id: e.id }, 1);
    assert.ok(item, 'listed');
    // INTERFACE §5: one validation error per *matching* meter that cannot use the event; none match here.
    assert.deepEqual(item.validation_errors ?? [], []);
  });

  test('ING-30 one event moves every meter of its type (count, two sums)', async () => {
    const type = unique('request');
    const count = unique('api_requests_total');
    const seconds = unique('request_duration_seconds');
    const bytes = unique('request_ingress_bytes');
    await api.createMeterOk({ key: count, name: 'API requests', event_type: type, aggregation: 'count' });
    await api.createMeterOk({ key: seconds, name: 'Duration', event_type: type, aggregation: 'sum', value_property: '$.duration_seconds' });
    await api.createMeterOk({ key: bytes, name: 'Ingress', event_type: type, aggregation: 'sum', value_property: '$.ingress_bytes' });
    await api.ingestOk(event({ type, data: { duration_seconds: '123', ingress_bytes: '456' } }));
    assert.equal(await api.totalWhen(count, 1), 1);
    assert.equal(await api.totalWhen(seconds, 123), 123);
    assert.equal(await api.totalWhen(bytes, 456), 456);
  });
});

describe('CloudEvents SDK producers', () => {
  test('an SDK event declaring datacontenttype application/json is accepted', async () => {
    const ce = new CloudEvent({
      id: unique('sdk'),
      source: 'sdk',
      type: 'sdk',
      subject: 'sdk',
      datacontenttype: 'application/json',
      data: { duration_ms: 3 },
    });
    const res = await sendStructured(ce);
    assert.equal(res.status, 202, res.text);
    const [item] = await api.eventsWhen({ id: ce.id }, 1);
    assert.deepEqual(item?.event.data, { duration_ms: 3 });
  });

  test('binary content mode (attributes in ce-* headers) is not an accepted shape: 400, nothing stored', async () => {
    const ce = new CloudEvent({ id: unique('binary'), source: 'sdk', type: 'sdk', subject: 'binary', data: { duration_ms: 3 } });
    const message = HTTP.binary(ce);
    const res = await api.send('POST', '/events', String(message.body), message.headers as Record<string, string>);
    assert.match(assertProblem(res, 400, 'ce-specversion').detail, /binary content mode .* not supported.*application\/cloudevents\+json/);
    const listed = await api.listAllEvents({ id: ce.id });
    assert.equal(listed.length, 0);
  });

  test('a batch serialized from SDK events (application/cloudevents-batch+json) is accepted whole', async () => {
    const type = unique('sdkbatch');
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    const batch = Array.from({ length: 25 }, (_, i) => new CloudEvent({ id: `b${i}`, source: type, type, subject: 'sdk', data: {} }));
    const res = await api.send('POST', '/events', JSON.stringify(batch), { 'content-type': CE_BATCH });
    assert.equal(res.status, 202, res.text);
    assert.equal(await api.totalWhen(type, 25), 25);
  });
});

describe('transport', () => {
  /** One request on an HTTP/2 session (ALPN h2 on the TLS listener), as h2-capable producers send. */
  function h2Request(session: http2.ClientHttp2Session, headers: Record<string, string>, body: string) {
    return new Promise<{ status: number; contentType: string; text: string }>((resolve, reject) => {
      const req = session.request({ ':method': 'POST', ...headers });
      let status = 0;
      let contentType = '';
      let text = '';
      req.on('response', (h) => {
        status = Number(h[':status']);
        contentType = String(h['content-type'] ?? '');
      });
      req.setEncoding('utf8');
      req.on('data', (chunk) => (text += chunk));
      req.on('end', () => resolve({ status, contentType, text }));
      req.on('error', reject);
      req.end(body);
    });
  }

  test('over HTTP/2 a batch is accepted with 202 and a broken body is a 400 problem', async () => {
    const type = unique('h2');
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    const session = http2.connect(gateway.https, { rejectUnauthorized: false });
    try {
      const headers = { ':path': '/v3/metering/events', authorization: `Bearer ${api.token}` };
      const accepted = await h2Request(session, { ...headers, 'content-type': CE_BATCH }, JSON.stringify([event({ type }), event({ type })]));
      assert.deepEqual([accepted.status, accepted.text], [202, '']);
      const broken = await h2Request(session, { ...headers, 'content-type': CE_SINGLE }, '{"specversion":');
      assert.equal(broken.status, 400);
      assert.match(broken.contentType, /^application\/problem\+json/);
    } finally {
      session.close();
    }
    assert.equal(await api.totalWhen(type, 2), 2);
  });
});

/**
 * Collectors: a declared collector rewriting matching events posted to /events before
 * validation and dedupe (a derived cost), a webhook collector created through the API turning any JSON
 * into CloudEvents (deduped when delivered twice), the collectors API (list, get, 409, 405, 404, delete),
 * names with hyphens and dots (URL path segments, not meter keys) end to end and names needing encoding refused,
 * a syntax error as a config error with its position, and every failure rejecting the whole request
 * with a 400 naming the collector: a failing mapping, an invalid result, a mapping past its time budget
 * (infinite recursion); nothing of such a request is stored, and the gateway keeps answering meanwhile;
 * a regular expression the linear-time engine cannot run refused with its position. (Mappings that would
 * pin the process or fill its memory: collector-bounds.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConfigLoadError } from '../../../src/errors.ts';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { meteringConfig, MeteringApi } from './catalogue-support.ts';

const COST = {
  name: 'llm_cost',
  description: 'prompt events get their cost',
  match: { type: 'prompt' },
  mapping: '$merge([$, {"data": $merge([data, {"cost": data.tokens * 0.002}])}])',
};

const WEBHOOK = {
  name: 'payments',
  mapping: 'data.object.{"type": "payment", "id": id, "subject": customer, "time": created, "data": {"amount": amount}}',
};

function event(id: string, extra: Record<string, unknown> = {}) {
  return { specversion: '1.0', id, source: 'app', type: 'prompt', subject: 'cust-1', data: { tokens: 1000 }, ...extra };
}

describe('collectors', () => {
  let gw: TestGateway;
  let api: MeteringApi;
  before(async () => {
    const config: Record<string, any> = meteringConfig({
      // Wide enough that an ordinary mapping on a loaded machine stays within it; the looping one never does.
      metering: { collector_timeout_ms: 500 },
      meters: [
        { key: 'cost', name: 'Cost', event_type: 'prompt', aggregation: 'sum', value_property: '$.cost' },
        { key: 'payments', name: 'Payments', event_type: 'payment', aggregation: 'sum', value_property: '$.amount' },
      ],
    });
    config.collectors = [COST];
    gw = await startGateway(config);
    api = await MeteringApi.connect(gw.https);
  });
  after(() => gw.stop());

  test('a declared collector rewrites matching events before they are stored; others pass untouched', async () => {
    await api.ingestOk([event('c1'), event('c2', { type: 'other' })]);
    const [rewritten] = await api.eventsWhen({ id: 'c1' }, 1);
    assert.deepEqual(rewritten.event.data, { tokens: 1000, cost: 2 });
    const [untouched] = await api.eventsWhen({ id: 'c2' }, 1);
    assert.deepEqual(untouched.event.data, { tokens: 1000 });
    assert.equal(await api.totalWhen('cost', 2), 2);
  });

  test('the collectors API lists, shows, refuses duplicates and changes to declared ones', async () => {
    const list = await api.send('GET', '/collectors');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json().data.map((c: any) => [c.name, c.origin]), [['llm_cost', 'config']]);
    assert.equal((await api.send('GET', '/collectors/llm_cost')).json().match.type, 'prompt');
    assert.equal((await api.sendJson('POST', '/collectors', COST)).status, 409);
    assert.equal((await api.send('DELETE', '/collectors/llm_cost')).status, 405);
    assert.equal((await api.send('GET', '/collectors/nope')).status, 404);
  });

  test('a webhook collector turns any JSON into events, and the same webhook twice into one', async () => {
    const created = await api.sendJson('POST', '/collectors', WEBHOOK);
    assert.equal(created.status, 201, created.text);
    const webhook = { data: { object: [
      { id: 'pay_1', customer: 'cust-9', amount: 1250, created: '2026-11-20T10:00:00Z' },
      { id: 'pay_2', customer: 'cust-9', amount: 250, created: '2026-11-20T11:00:00Z' },
    ] } };
    for (let i = 0; i < 2; i++) {
      const res = await api.sendJson('POST', '/collectors/payments/events', webhook);
      assert.equal(res.status, 202, res.text);
    }
    const [stored] = await api.eventsWhen({ id: 'pay_1' }, 1);
    assert.equal(stored.event.source, 'collector/payments');
    assert.equal(stored.event.subject, 'cust-9');
    assert.equal(await api.totalWhen('payments', 1500), 1500);
    // Zero events is a valid result too.
    assert.equal((await api.sendJson('POST', '/collectors/payments/events', { data: {} })).status, 202);
    assert.equal((await api.sendJson('POST', '/collectors/llm_cost/events', {})).status, 409, 'a match collector takes no webhook');
    assert.equal((await api.sendJson('POST', '/collectors/unknown/events', {})).status, 404);
    assert.equal((await api.send('DELETE', '/collectors/payments')).status, 204);
    assert.equal((await api.sendJson('POST', '/collectors/payments/events', webhook)).status, 404);
  });

  test('a collector name is a URL path segment: hyphens and dots are fine, what needs encoding is refused', async () => {
    const hyphenated = { name: 'llm-cost.v2', mapping: '{"type": "payment", "id": id, "subject": customer, "data": {"amount": amount}}' };
    const created = await api.sendJson('POST', '/collectors', hyphenated);
    assert.equal(created.status, 201, created.text);
    assert.equal((await api.send('GET', '/collectors/llm-cost.v2')).json().name, 'llm-cost.v2');
    const res = await api.sendJson('POST', '/collectors/llm-cost.v2/events', { id: 'hyphen_1', customer: 'cust-h', amount: 7 });
    assert.equal(res.status, 202, res.text);
    const [stored] = await api.eventsWhen({ id: 'hyphen_1' }, 1);
    assert.equal(stored.event.source, 'collector/llm-cost.v2');
    assert.equal(stored.event.subject, 'cust-h');
    assert.equal((await api.send('DELETE', '/collectors/llm-cost.v2')).status, 204);
    assert.equal((await api.send('GET', '/collectors/llm-cost.v2')).status, 404);

    for (const name of ['LLM-cost', '-cost', 'cost-', 'llm--cost', 'llm-.cost', 'llm cost', 'llm/cost', 'llm~cost', '', 'x'.repeat(65)]) {
      const refused = await api.sendJson('POST', '/collectors', { ...hyphenated, name });
      assert.equal(refused.status, 400, `${JSON.stringify(name)}: ${refused.text}`);
      assert.match(refused.json().detail, /name: must be 1 to 64 lower-case letters and digits, joined by single hyphens, underscores or dots/);
    }
    assert.equal((await api.sendJson('POST', '/collectors', { ...hyphenated, name: 'x'.repeat(64) })).status, 201);
    assert.equal((await api.send('DELETE', `/collectors/${'x'.repeat(64)}`)).status, 204);
  });

  const failures: [string, Record<string, unknown>, RegExp][] = [
    ['a mapping that fails', { mapping: '$error("no customer")' }, /collector bad_\w+: the mapping failed .*no customer/],
    ['a result that is no event', { mapping: '"just a string"' }, /collector bad_\w+: the mapping yields string/],
    ['an invalid event', { mapping: '$merge([$, {"subject": null}])' }, /collector bad_\w+: the mapping yields an invalid event: .*subject/],
    ['infinite recursion past the time budget', { mapping: '($loop := function($n) { $loop($n + 1) }; $loop(0))' }, /collector bad_\w+: the mapping (ran past its time budget|failed)/],
  ];
  for (const [what, collector, message] of failures) {
    test(`${what}: the whole request is refused with 400 naming the collector, nothing stored`, async () => {
      const name = `bad_${what.replace(/\W+/g, '_').slice(0, 20).replace(/_+$/, '')}`;
      const created = await api.sendJson('POST', '/collectors', { name, match: { type: name }, ...collector });
      assert.equal(created.status, 201, created.text);
      const good = `good-${name}`;
      const [res, alive] = await Promise.all([
        api.ingest([event(good), event(`bad-${name}`, { type: name })]),
        api.send('GET', '/meters'),
      ]);
      assert.equal(alive.status, 200, 'the gateway answers others meanwhile');
      assert.equal(res.status, 400, res.text);
      assert.equal(res.headers['content-type'], 'application/problem+json');
      assert.match(res.json().detail, message);
      assert.equal(res.json().invalid_parameters[0].collector, name);
      assert.equal((await api.listAllEvents({ id: good })).length, 0, 'nothing of the request is stored');
      assert.equal((await api.send('DELETE', `/collectors/${name}`)).status, 204);
    });
  }

  test('mappings that cannot compile, or whose regular expression needs backtracking, are refused with the position', async () => {
    const syntax = await api.sendJson('POST', '/collectors', { name: 'broken', mapping: 'data.{"a": }' });
    assert.equal(syntax.status, 400);
    assert.match(syntax.json().detail, /mapping: syntax error at position \d+/);
    const lookahead = await api.sendJson('POST', '/collectors', { name: 'lookahead', mapping: '$match(subject, /^cust-(?=\\d)/)' });
    assert.equal(lookahead.status, 400);
    assert.match(lookahead.json().detail, /mapping: the regular expression \/\^cust-\(\?=\\d\)\/ is refused: a lookahead is not supported by the linear-time engine \(RE2\), at position 6/);
    // Nested quantifiers are no reason to refuse a pattern any more: RE2 runs them in linear time.
    assert.equal((await api.sendJson('POST', '/collectors', { name: 'nested', mapping: '$match(subject, /^(a+)+$/)' })).status, 201);
    assert.equal((await api.send('DELETE', '/collectors/nested')).status, 204);
  });
});

test('a syntax error in a declared collector is a config error with its position', async () => {
  const config: Record<string, any> = meteringConfig();
  config.collectors = [{ name: 'broken', match: { type: 'x' }, mapping: '$merge([$, {"data": }])' }];
  const err = await startGateway(config).then(
    (gw) => gw.stop().then(() => assert.fail('the config loaded')),
    (e) => e,
  );
  assert.ok(err instanceof ConfigLoadError, String(err));
  assert.match(String(err), /gateway\.yaml:\d+:\d+: collectors\[0\]\.mapping: syntax error at position \d+/);
});

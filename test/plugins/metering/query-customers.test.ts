/**
 * Meter queries by customer (issue 33), through the real HTTP API: customers made with the billing API,
 * events posted for their subjects, then v3 `filters.dimensions.customer_id` / `group_by_dimensions:
 * [customer_id]` and v1 `filterCustomerId` / `groupBy=customer_id`. A customer's usage is that of its
 * `usage_attribution.subject_keys` (its key when it lists none); the usage of a subject no customer
 * claims is one group without a customer. Also: a total's window is the requested range.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TestGateway } from '../../helpers/gateway.ts';
import { startBillingGateway, type BillingApi } from './billing/support.ts';
import { assertProblem, DAY, event, HOUR, iso, rows, unique, type QueryResult } from './catalogue-support.ts';

/** Whole hours, three days back: far enough to be settled, well inside retention. */
const t0 = Math.floor((Date.now() - 3 * DAY) / HOUR) * HOUR;
const type = unique('customer_usage');
const SUM = unique('sum');
const AVG = unique('avg');

let gateway: TestGateway;
let api: BillingApi;
/** Two subjects. */
let alpha: { id: string; key: string; name: string };
/** No subject keys: its key is its subject. */
let beta: { id: string; key: string; name: string };
let gamma: { id: string; key: string; name: string };
/** Subjects named as Object.prototype's members must be plain keys (this gateway is this file's alone). */
const subjects = { a1: unique('a1'), a2: unique('a2'), proto: '__proto__', orphan: 'constructor' };

before(async () => {
  ({ gateway, api } = await startBillingGateway());
  alpha = await api.customer({ name: 'Alpha Inc', usage_attribution: { subject_keys: [subjects.a1, subjects.a2] } });
  beta = await api.customer({ name: 'Beta Ltd' });
  gamma = await api.customer({ name: 'Gamma', usage_attribution: { subject_keys: [subjects.proto] } });
  await api.createMeterOk({ key: SUM, name: 'Sum', event_type: type, aggregation: 'sum', value_property: '$.n' });
  await api.createMeterOk({ key: AVG, name: 'Average', event_type: type, aggregation: 'avg', value_property: '$.n' });
  const usage: [string, number, number][] = [
    [subjects.a1, 1, t0],
    [subjects.a1, 1, t0 + HOUR],
    [subjects.a2, 4, t0 + 2 * HOUR],
    [beta.key, 8, t0 + 3 * HOUR],
    [subjects.orphan, 16, t0 + 4 * HOUR],
    [subjects.proto, 32, t0 + 5 * HOUR],
  ];
  await api.ingestOk(usage.map(([subject, n, at]) => event({ type, subject, time: iso(at), data: { n } })));
  await api.totalWhen(SUM, 62);
});
after(() => gateway?.stop());

/** Rows as `[customer_id, value]`, ordered by customer id ('-' for no customer). */
function byCustomer(result: QueryResult): [string, string][] {
  return result.data.map((r): [string, string] => [r.dimensions.customer_id ?? '-', r.value]).sort();
}

describe('v3 queries by customer', () => {
  test('a filter by one customer totals its subjects and names it in customer_id', async () => {
    const result = await api.queryOk(SUM, { filters: { dimensions: { customer_id: { eq: alpha.id } } } });
    assert.deepEqual(result.data.map((r) => [r.dimensions, r.value]), [[{ customer_id: alpha.id }, '6']]);
  });

  test('a customer may be named by its key; one without subject keys is its key\'s usage', async () => {
    const result = await api.queryOk(SUM, { filters: { dimensions: { customer_id: { in: [alpha.key, beta.key] } } } });
    assert.deepEqual(byCustomer(result), [[alpha.id, '6'], [beta.id, '8']].sort());
  });

  test('grouping by customer: one row per customer, and one without customer_id for subjects no customer claims', async () => {
    const result = await api.queryOk(SUM, { group_by_dimensions: ['customer_id'] });
    assert.deepEqual(byCustomer(result), [[alpha.id, '6'], [beta.id, '8'], [gamma.id, '32'], ['-', '16']].sort());
    const orphanRow = result.data.find((r) => r.value === '16')!;
    assert.deepEqual(orphanRow.dimensions, {}, 'no customer_id (nor an empty one) for the unclaimed subject');
  });

  test('a customer\'s average is over its events, not an average of its subjects', async () => {
    // alpha: 1, 1 (a1) and 4 (a2): 2, where averaging the subjects' averages would give 2.5.
    const result = await api.queryOk(AVG, { filters: { dimensions: { customer_id: { eq: alpha.id } } } });
    assert.deepEqual(byCustomer(result), [[alpha.id, '2']]);
  });

  test('customer with subject and windows: per subject, per hour', async () => {
    const result = await api.queryOk(SUM, { group_by_dimensions: ['subject', 'customer_id'], granularity: 'PT1H', filters: { dimensions: { customer_id: { eq: alpha.id } } } });
    assert.deepEqual(rows(result, ['subject', 'customer_id']), [
      { from: iso(t0), to: iso(t0 + HOUR), value: 1, subject: subjects.a1, customer_id: alpha.id },
      { from: iso(t0 + HOUR), to: iso(t0 + 2 * HOUR), value: 1, subject: subjects.a1, customer_id: alpha.id },
      { from: iso(t0 + 2 * HOUR), to: iso(t0 + 3 * HOUR), value: 4, subject: subjects.a2, customer_id: alpha.id },
    ]);
  });

  test('a subject filter and a customer filter both apply', async () => {
    const result = await api.queryOk(SUM, { filters: { dimensions: { customer_id: { eq: alpha.id }, subject: { in: [subjects.a2, subjects.orphan] } } } });
    assert.deepEqual(result.data.map((r) => [r.dimensions, r.value]), [[{ subject: subjects.a2, customer_id: alpha.id }, '4']]);
  });

  test('an unknown customer is 404 customer_not_found; other operators than eq and in are refused', async () => {
    const ghost = unique('ghost');
    const problem = assertProblem(await api.query(SUM, { filters: { dimensions: { customer_id: { in: [alpha.id, ghost] } } } }), 404);
    assert.match(problem.detail, new RegExp(`customer not found: ${ghost}`));
    assert.equal(problem.invalid_parameters[0].rule, 'customer_not_found');
    assertProblem(await api.query(SUM, { filters: { dimensions: { customer_id: { neq: alpha.id } } } }), 400, 'filters.dimensions.customer_id.neq');
  });

  test('CSV adds customer_id, customer_key and customer_name columns', async () => {
    const res = await api.query(SUM, { filters: { dimensions: { customer_id: { eq: alpha.key } } } }, { accept: 'text/csv' });
    assert.equal(res.status, 200, res.text);
    const [header, line] = res.text.trim().split('\n');
    assert.equal(header, 'from,to,customer_id,customer_key,customer_name,value');
    assert.deepEqual(line.split(',').slice(2), [alpha.id, alpha.key, 'Alpha Inc', '6']);
  });
});

describe('v1 queries by customer', () => {
  const v1 = async (query: string): Promise<any> => {
    const res = await api.get(`/api/v1/meters/${SUM}/query?${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json();
  };

  test('filterCustomerId filters and groups by customer: rows carry customerId', async () => {
    const result = await v1(`filterCustomerId=${alpha.id}`);
    assert.deepEqual(result.data.map((r: any) => [r.customerId, r.subject, r.value, r.groupBy]), [[alpha.id, null, 6, {}]]);
  });

  test('groupBy=customer_id: a row per customer, customerId null for unclaimed subjects', async () => {
    const result = await v1('groupBy=customer_id');
    const got = result.data.map((r: any) => [r.customerId ?? '-', r.value]).sort();
    assert.deepEqual(got, [[alpha.id, 6], [beta.id, 8], [gamma.id, 32], ['-', 16]].sort());
    assert.equal(result.data.find((r: any) => r.value === 16).customerId, null);
  });

  test('POST with filterCustomerId, and an unknown customer is a 404 naming filterCustomerId', async () => {
    const res = await api.post(`/api/v1/meters/${SUM}/query`, { filterCustomerId: [beta.id] });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json().data.map((r: any) => [r.customerId, r.value]), [[beta.id, 8]]);
    const ghost = await api.get(`/api/v1/meters/${SUM}/query?filterCustomerId=${unique('ghost')}`);
    assert.equal(ghost.status, 404, ghost.text);
    assert.equal(ghost.json().invalidParameters[0].field, 'filterCustomerId');
  });
});

describe('the window of a total is the requested range', () => {
  const from = t0 - DAY;
  const to = t0 + 2 * DAY;

  test('v3: from and to given: every customer\'s row spans them, not its data', async () => {
    const result = await api.queryOk(SUM, { from: iso(from), to: iso(to), group_by_dimensions: ['customer_id'] });
    assert.equal(result.data.length, 4);
    for (const row of result.data) assert.deepEqual([iso(row.from), iso(row.to)], [iso(from), iso(to)]);
  });

  test('v1: windowStart and windowEnd are from and to', async () => {
    const res = await api.get(`/api/v1/meters/${SUM}/query?from=${iso(from)}&to=${iso(to)}&filterCustomerId=${beta.id}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json().data.map((r: any) => [iso(r.windowStart), iso(r.windowEnd), r.value]), [[iso(from), iso(to), 8]]);
  });

  test('a bound not given is the data\'s (OpenMeter: the minute of the first event, the minute after the last)', async () => {
    const result = await api.queryOk(SUM, { from: iso(from), filters: { dimensions: { customer_id: { eq: alpha.id } } } });
    assert.deepEqual(rows(result), [{ from: iso(from), to: iso(t0 + 2 * HOUR + 60_000), value: 6 }]);
  });
});

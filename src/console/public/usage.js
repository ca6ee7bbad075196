/**
 * Meters and their usage: a chart and a table of one meter's query (the admin API's read-only
 * `/metering/meters/{key}/query`, the same query as the metering route's), by hour, day, minute or
 * month in a chosen time zone, per subject, per customer or per dimension, filtered by subject or
 * customer. A customer's usage is that of its subjects (`usage_attribution.subject_keys`, else its key).
 */
import { every, meteringList, postJson } from './api.js';
import { barChart, COLORS } from './chart.js';
import { failure, h, list, show, table } from './dom.js';

const POLL_MS = 30_000;
const HOUR = 3_600_000;
const RANGES = { '24h': 24 * HOUR, '7d': 7 * 24 * HOUR, '30d': 30 * 24 * HOUR, '90d': 90 * 24 * HOUR, '365d': 365 * 24 * HOUR };
/** The window that suits each range (a few dozen bars). */
const DEFAULT_GRANULARITY = { '24h': 'PT1H', '7d': 'PT1H', '30d': 'P1D', '90d': 'P1D', '365d': 'P1M' };
/** Minute windows over more than a day would be thousands of bars. */
const MAX_MINUTE_RANGE = 24 * HOUR;
/** Series drawn; the table still lists every group. */
const MAX_SERIES = COLORS.length;
/** Customers queried one by one when grouping by customer. */
const MAX_CUSTOMER_GROUPS = 20;
const MAX_TABLE_ROWS = 500;

const subjectsOf = (customer) => (customer.usage_attribution?.subject_keys?.length ? customer.usage_attribution.subject_keys : [customer.key]);
const customerLabel = (c) => (c.name && c.name !== c.key ? `${c.name} (${c.key})` : c.key);

function isTimeZone(name) {
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** How a window start reads in the chosen zone: a month, a day, or a time. */
function windowLabel(iso, granularity, timeZone) {
  const options = { P1M: { year: 'numeric', month: 'long' }, P1D: { dateStyle: 'medium' } }[granularity] ?? { dateStyle: 'medium', timeStyle: 'short' };
  return new Intl.DateTimeFormat(undefined, { ...options, timeZone }).format(new Date(iso));
}

/** The subject filter of a query: a subject, a customer's subjects, or both (their intersection). */
function subjectFilter(subject, customer) {
  if (!customer) return subject ? { eq: subject } : undefined;
  const keys = subjectsOf(customer);
  if (!subject) return { in: keys };
  return { in: keys.includes(subject) ? [subject] : [] };
}

/** Rows `{from, to, group, value}` of the query the form describes. */
async function queryUsage(meter, request, customers) {
  const base = { from: request.from, to: request.to, granularity: request.granularity, time_zone: request.timeZone };
  const path = `/metering/meters/${encodeURIComponent(meter.key)}/query`;
  const run = async (groupBy, subjects, labelOf) => {
    const body = { ...base, group_by_dimensions: groupBy ? [groupBy] : [] };
    if (subjects) {
      if (subjects.in?.length === 0) return [];
      body.filters = { dimensions: { subject: subjects } };
    }
    const result = await postJson(path, body);
    return result.data.map((row) => ({ from: row.from, to: row.to, value: row.value, group: labelOf(row) }));
  };
  if (request.groupBy === 'customer') {
    const chosen = (request.customer ? [request.customer] : customers).slice(0, MAX_CUSTOMER_GROUPS);
    const parts = await Promise.all(chosen.map((c) => run(undefined, subjectFilter(request.subject, c), () => customerLabel(c))));
    return { rows: parts.flat(), note: customers.length > MAX_CUSTOMER_GROUPS && !request.customer ? `the first ${MAX_CUSTOMER_GROUPS} of ${customers.length} customers` : '' };
  }
  const filter = subjectFilter(request.subject, request.customer);
  if (!request.groupBy) return { rows: await run(undefined, filter, () => meter.name ?? meter.key), note: '' };
  return { rows: await run(request.groupBy, filter, (row) => row.dimensions?.[request.groupBy] ?? '(none)'), note: '' };
}

/** The chart's data: window starts, and one series per group (the largest totals first). */
function chartData(rows) {
  const xs = [...new Set(rows.map((r) => Date.parse(r.from) / 1000))].sort((a, b) => a - b);
  const column = new Map(xs.map((x, i) => [x, i]));
  const byGroup = new Map();
  for (const r of rows) {
    if (!byGroup.has(r.group)) byGroup.set(r.group, { label: r.group, total: 0, values: xs.map(() => null) });
    const series = byGroup.get(r.group);
    series.total += Number(r.value);
    series.values[column.get(Date.parse(r.from) / 1000)] = Number(r.value);
  }
  const groups = [...byGroup.values()].sort((a, b) => b.total - a.total);
  // The shortest window sets the bars' width (days and months vary in length; a lone window has no neighbour to measure).
  const windowSeconds = rows.reduce((min, r) => Math.min(min, (Date.parse(r.to) - Date.parse(r.from)) / 1000), Infinity);
  return { xs, series: groups.slice(0, MAX_SERIES), windowSeconds: Number.isFinite(windowSeconds) ? windowSeconds : 3600, hidden: Math.max(groups.length - MAX_SERIES, 0) };
}

export function startUsage(root) {
  const form = root.querySelector('#usage-form');
  const fields = form.elements;
  const status = root.querySelector('#usage-status');
  const chart = root.querySelector('#usage-chart');
  const rowsBox = root.querySelector('#usage-table');
  const metersBox = root.querySelector('#meters-table');
  let meters = [];
  let customers = [];
  let drawn = false;

  fields.time_zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone;
  show(root.querySelector('#time-zones'), Intl.supportedValuesOf('timeZone').map((zone) => h('option', { value: zone })));
  fields.range.addEventListener('change', () => (fields.granularity.value = DEFAULT_GRANULARITY[fields.range.value]));
  fields.meter.addEventListener('change', () => fillGroupBy());

  const selectedMeter = () => meters.find((m) => m.key === fields.meter.value);

  const fillGroupBy = () => {
    const current = fields.group_by.value;
    const dimensions = Object.keys(selectedMeter()?.dimensions ?? {});
    show(
      fields.group_by,
      h('option', { value: '' }, 'nothing (one total)'),
      h('option', { value: 'subject' }, 'subject'),
      h('option', { value: 'customer' }, 'customer'),
      dimensions.map((d) => h('option', { value: d }, `dimension: ${d}`)),
    );
    fields.group_by.value = [...fields.group_by.options].some((o) => o.value === current) ? current : '';
  };

  const fillChoices = () => {
    const current = fields.meter.value;
    show(fields.meter, meters.map((m) => h('option', { value: m.key }, m.name && m.name !== m.key ? `${m.name} (${m.key})` : m.key)));
    if (meters.some((m) => m.key === current)) fields.meter.value = current;
    const customer = fields.customer.value;
    show(fields.customer, h('option', { value: '' }, 'any'), customers.map((c) => h('option', { value: c.key }, customerLabel(c))));
    if (customers.some((c) => c.key === customer)) fields.customer.value = customer;
    fillGroupBy();
  };

  const readForm = () => {
    const timeZone = fields.time_zone.value.trim();
    if (!isTimeZone(timeZone)) throw new Error(`unknown time zone: ${timeZone}`);
    const span = RANGES[fields.range.value];
    if (fields.granularity.value === 'PT1M' && span > MAX_MINUTE_RANGE) throw new Error('minute windows cover at most the last 24 hours');
    const to = Date.now();
    return {
      from: new Date(to - span).toISOString(),
      to: new Date(to).toISOString(),
      granularity: fields.granularity.value,
      timeZone,
      groupBy: fields.group_by.value,
      subject: fields.subject.value.trim(),
      customer: customers.find((c) => c.key === fields.customer.value),
    };
  };

  const draw = async () => {
    drawn = true;
    const meter = selectedMeter();
    if (!meter) return show(status, 'No meter to show: declare one in gateway.yaml or create one with POST /meters on the metering route.');
    let request;
    try {
      request = readForm();
    } catch (error) {
      return show(status, failure(error));
    }
    show(status, 'Querying…');
    chart.dataset.state = 'loading';
    try {
      const { rows, note } = await queryUsage(meter, request, customers);
      const data = chartData(rows);
      const range = [Date.parse(request.from) / 1000, Date.parse(request.to) / 1000];
      barChart(chart, { ...data, timeZone: request.timeZone, range, unit: meter.value_property ? `${meter.aggregation} of ${meter.value_property}` : meter.aggregation });
      chart.dataset.state = rows.length ? 'drawn' : 'empty';
      const notes = [note, data.hidden ? `${data.hidden} smaller groups are in the table only` : '', rows.length > MAX_TABLE_ROWS ? `the table shows the first ${MAX_TABLE_ROWS} of ${rows.length} rows` : ''].filter(Boolean);
      show(status, `${meter.key}: ${rows.length} windows with usage, ${request.granularity} windows in ${request.timeZone}${notes.length ? ` (${notes.join('; ')})` : ''}.`);
      const sorted = rows.sort((a, b) => Date.parse(a.from) - Date.parse(b.from) || (a.group < b.group ? -1 : a.group > b.group ? 1 : 0)).slice(0, MAX_TABLE_ROWS);
      show(rowsBox, table(usageColumns(request), sorted, { empty: 'No usage in this range' }));
    } catch (error) {
      chart.dataset.state = 'failed';
      show(status, failure(error));
    }
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    draw();
  });

  const selectMeter = (meter) => {
    fields.meter.value = meter.key;
    fillGroupBy();
    draw();
  };

  every(POLL_MS, async () => {
    try {
      [meters, customers] = await Promise.all([meteringList('/metering/meters'), meteringList('/metering/customers')]);
      fillChoices();
      show(metersBox, table(meterColumns, meters, { empty: 'No meters', onSelect: selectMeter, rowKey: (m) => m.key }));
      // The first meter's usage as soon as there is one, without a click.
      if (!drawn && meters.length) draw();
    } catch (error) {
      show(metersBox, failure(error));
    }
  });
}

const usageColumns = (request) => [
  { label: 'Window', cell: (r) => windowLabel(r.from, request.granularity, request.timeZone) },
  { label: 'Group', cell: (r) => r.group },
  { label: 'Value', numeric: true, cell: (r) => r.value },
];

const meterColumns = [
  { label: 'Key', cell: (m) => h('code', {}, m.key) },
  { label: 'Name', cell: (m) => m.name ?? '–' },
  { label: 'Event type', cell: (m) => m.event_type },
  { label: 'Aggregation', cell: (m) => (m.value_property ? `${m.aggregation} of ${m.value_property}` : m.aggregation) },
  { label: 'Dimensions', cell: (m) => list(Object.keys(m.dimensions ?? {})) },
];

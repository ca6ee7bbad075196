/**
 * Meters and their usage: a chart and a table of one meter's query (the admin API's read-only
 * `/metering/meters/{key}/query`, the same query as the metering route's), by hour, day, minute or
 * month in a chosen time zone, per subject, per customer (`customer_id`) or per dimension, filtered by
 * subject or customer. The server attributes subjects to customers (`usage_attribution.subject_keys`).
 *
 * A console tab of the metering plugin (index.ts): the page loads it from
 * `/console/<build>/plugins/metering/`, so `../../` names the console's own modules.
 */
import { every, meteringList, postJson } from '../../api.js';
import { barChart, COLORS } from '../../chart.js';
import { failure, h, list, show, table } from '../../dom.js';

const POLL_MS = 30_000;
const HOUR = 3_600_000;
const RANGES = { '24h': 24 * HOUR, '7d': 7 * 24 * HOUR, '30d': 30 * 24 * HOUR, '90d': 90 * 24 * HOUR, '365d': 365 * 24 * HOUR };
/** The window that suits each range (a few dozen bars). */
const DEFAULT_GRANULARITY = { '24h': 'PT1H', '7d': 'PT1H', '30d': 'P1D', '90d': 'P1D', '365d': 'P1M' };
/** A window's length as bars are drawn: the full window, even where the query cut one short at its start or end (28 days for months, the shortest). */
const WINDOW_SECONDS = { PT1M: 60, PT1H: 3600, P1D: 86_400, P1M: 28 * 86_400 };
/** Minute windows over more than a day would be thousands of bars. */
const MAX_MINUTE_RANGE = 24 * HOUR;
/** Series drawn; the table still lists every group. */
const MAX_SERIES = COLORS.length;
const MAX_TABLE_ROWS = 500;

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

/** What a row is grouped under, as the table and the legend show it. */
function groupLabel(meter, groupBy, customers) {
  if (!groupBy) return () => meter.name ?? meter.key;
  if (groupBy === 'customer') {
    const byId = new Map(customers.map((c) => [c.id, c]));
    return (row) => {
      const id = row.dimensions?.customer_id;
      if (id === undefined) return '(no customer)';
      return byId.has(id) ? customerLabel(byId.get(id)) : id;
    };
  }
  return (row) => row.dimensions?.[groupBy] ?? '(none)';
}

/** Rows `{from, to, group, value}` of the query the form describes: one query, customers resolved by the server. */
async function queryUsage(meter, request, customers) {
  const body = { from: request.from, to: request.to, granularity: request.granularity, time_zone: request.timeZone };
  body.group_by_dimensions = request.groupBy ? [request.groupBy === 'customer' ? 'customer_id' : request.groupBy] : [];
  const dimensions = {};
  if (request.subject) dimensions.subject = { eq: request.subject };
  if (request.customer) dimensions.customer_id = { eq: request.customer.id };
  if (Object.keys(dimensions).length) body.filters = { dimensions };
  const result = await postJson(`/metering/meters/${encodeURIComponent(meter.key)}/query`, body);
  const labelOf = groupLabel(meter, request.groupBy, customers);
  return result.data.map((row) => ({ from: row.from, to: row.to, value: row.value, group: labelOf(row) }));
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
  return { xs, series: groups.slice(0, MAX_SERIES), hidden: Math.max(groups.length - MAX_SERIES, 0) };
}

export default function startUsage(root) {
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
      const rows = await queryUsage(meter, request, customers);
      const data = chartData(rows);
      const windowSeconds = WINDOW_SECONDS[request.granularity];
      // The current window, cut short at now by the query, is drawn whole: a bar as wide as the others, not a sliver at the edge.
      const lastEnd = data.xs.length ? data.xs[data.xs.length - 1] + windowSeconds : 0;
      const range = [Date.parse(request.from) / 1000, Math.max(Date.parse(request.to) / 1000, lastEnd)];
      barChart(chart, { ...data, windowSeconds, timeZone: request.timeZone, range, unit: meter.value_property ? `${meter.aggregation} of ${meter.value_property}` : meter.aggregation });
      chart.dataset.state = rows.length ? 'drawn' : 'empty';
      const notes = [data.hidden ? `${data.hidden} smaller groups are in the table only` : '', rows.length > MAX_TABLE_ROWS ? `the table shows the first ${MAX_TABLE_ROWS} of ${rows.length} rows` : ''].filter(Boolean);
      show(status, `${meter.key}: ${rows.length} windows with usage, ${request.granularity} windows in ${request.timeZone}${notes.length ? ` (${notes.join('; ')})` : ''}.`);
      const sorted = rows
        .sort((a, b) => Date.parse(a.from) - Date.parse(b.from) || (a.group < b.group ? -1 : a.group > b.group ? 1 : 0))
        .slice(0, MAX_TABLE_ROWS);
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

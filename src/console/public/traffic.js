/**
 * Routes and services with live request rates and error ratios, and the node's traffic over the last
 * hour or day. The gateway counts requests per route, service and status code (GET /status/traffic);
 * the page reads the counters every few seconds and turns the differences into rates over the last half
 * minute. The chart is the node's own history (GET /status/traffic/history: requests by status class in
 * 10 s or one-minute buckets, summed over its processes), so it shows what came before the page opened;
 * the same answer has each route's last hour, drawn as a sparkline per route with its counts beside it.
 */
import { every, getJson, kongList } from './api.js';
import { COLORS, lineChart, sparkline } from './chart.js';
import { failure, h, list, number, percent, show, table } from './dom.js';

const POLL_MS = 2_000;
const CONFIG_POLL_MS = 15_000;
/** The history's shortest bucket: reading it more often would redraw the same chart. */
const HISTORY_POLL_MS = 10_000;
/** Rates and ratios cover this much of the recent past. */
const WINDOW_MS = 30_000;
/** The chart's lines: status classes of the history, and their colours (success green, client errors amber, server errors red). */
const HISTORY_LINES = [
  { status: '2xx', label: 'success (2xx)', color: COLORS[2] },
  { status: '4xx', label: 'client errors (4xx)', color: COLORS[3] },
  { status: '5xx', label: 'server errors (5xx)', color: COLORS[1] },
];
const RANGE_NAMES = { hour: 'last hour', day: 'last day' };
/** A sparkline's bars, stacked from the bottom: the chart's colours, and grey for the rest (1xx, 3xx). */
const SPARKLINE_LAYERS = [
  { name: '2xx', classes: ['2xx'], color: COLORS[2] },
  { name: 'other', classes: ['1xx', '3xx'], color: COLORS[7] },
  { name: '4xx', classes: ['4xx'], color: COLORS[3] },
  { name: '5xx', classes: ['5xx'], color: COLORS[1] },
];
/** The row of requests that matched no route (the gateway counts them under route ''). */
const UNMATCHED = '';

/** Totals of one counter read: all requests, 4xx and 5xx answers. */
function tally(requests) {
  const t = { total: 0, client: 0, server: 0 };
  for (const [code, n] of Object.entries(requests)) {
    t.total += n;
    if (code.startsWith('4')) t.client += n;
    else if (code.startsWith('5')) t.server += n;
  }
  return t;
}

function add(into, t) {
  into.total += t.total;
  into.client += t.client;
  into.server += t.server;
}

/** One read of the counters: when, whose (the node's processes), and tallies by route label, by service label, and overall. */
function sample(counts) {
  const routes = new Map();
  const services = new Map();
  const all = { total: 0, client: 0, server: 0 };
  for (const entry of counts.routes) {
    const t = tally(entry.requests);
    for (const [map, key] of [[routes, entry.route], [services, entry.service]]) {
      if (!map.has(key)) map.set(key, { total: 0, client: 0, server: 0 });
      add(map.get(key), t);
    }
    add(all, t);
  }
  return { at: Date.now(), processes: counts.processes.join(','), routes, services, all };
}

/** Rate (per second), 4xx and 5xx ratios between two tallies; undefined where nothing happened. */
function change(now, before, seconds) {
  const zero = { total: 0, client: 0, server: 0 };
  const a = now ?? zero;
  const b = before ?? zero;
  const total = a.total - b.total;
  return {
    rate: seconds > 0 ? total / seconds : undefined,
    client: total > 0 ? (a.client - b.client) / total : undefined,
    server: total > 0 ? (a.server - b.server) / total : undefined,
    since: a.total,
  };
}

function serviceUrl(s) {
  const port = s.port ? `:${s.port}` : '';
  return `${s.protocol}://${s.host}${port}${s.path ?? ''}`;
}

const labelOf = (entity) => entity.name ?? entity.id;

export function startTraffic(root) {
  const summary = root.querySelector('#traffic-summary');
  const chart = root.querySelector('#traffic-chart');
  const routesBox = root.querySelector('#routes-table');
  const servicesBox = root.querySelector('#services-table');
  const rangeSelect = root.querySelector('#traffic-range');
  const historySummary = root.querySelector('#traffic-history-summary');
  const sparklinesSummary = root.querySelector('#route-sparklines-summary');
  const sparklinesBox = root.querySelector('#route-sparklines');
  let config;
  let samples = [];
  /** The last hour of the latest history read, for the sparklines (drawn again when the configuration is read). */
  let hour;

  const loadConfig = async () => {
    try {
      const [routes, services, plugins] = await Promise.all([kongList('/routes'), kongList('/services'), kongList('/plugins')]);
      config = { routes, services, plugins };
    } catch (error) {
      show(routesBox, failure(error));
    }
  };

  const pluginsOf = (route) => {
    const applies = (p) => p.enabled !== false && !p.consumer && (p.route ? p.route.id === route.id : p.service ? p.service.id === route.service?.id : true);
    return [...new Set(config.plugins.filter(applies).map((p) => p.name))];
  };

  const render = () => {
    const latest = samples[samples.length - 1];
    const base = samples.find((s) => s.at >= latest.at - WINDOW_MS) ?? latest;
    const seconds = base === latest ? 0 : (latest.at - base.at) / 1000;
    const stats = (map, key) => change(latest[map].get(key), base[map].get(key), seconds);
    const overall = change(latest.all, base.all, seconds);
    show(summary, `${number(overall.rate)} requests/s, ${percent(overall.server)} server errors (5xx), ${percent(overall.client)} client errors (4xx) over the last ${WINDOW_MS / 1000} s; ${number(overall.since)} requests since the gateway started.`);
    if (!config) return;
    const routeRows = config.routes.map((r) => ({ route: r, service: config.services.find((s) => s.id === r.service?.id), ...stats('routes', labelOf(r)) }));
    if (latest.routes.has(UNMATCHED)) routeRows.push({ route: null, ...stats('routes', UNMATCHED) });
    show(routesBox, table(routeColumns(pluginsOf), routeRows, { empty: 'No routes configured', rowKey: (row) => (row.route ? labelOf(row.route) : '(no route)') }));
    const serviceRows = config.services.map((s) => ({ service: s, routes: config.routes.filter((r) => r.service?.id === s.id).length, ...stats('services', labelOf(s)) }));
    show(servicesBox, table(serviceColumns, serviceRows, { empty: 'No services configured', rowKey: (row) => labelOf(row.service) }));
  };

  const drawSparklines = () => {
    if (!config || !hour) return;
    const { rows, max } = routeHours(config.routes, hour);
    show(sparklinesSummary, `By ${hour.step_seconds} s, one scale for every route: a full-height bar is ${number(max)} ${max === 1 ? 'request' : 'requests'} in ${hour.step_seconds} s.`);
    show(sparklinesBox, table(sparklineColumns(max), rows, { empty: 'No routes configured', rowKey: (row) => labelOf(row.route) }));
  };

  const drawHistory = async () => {
    const range = rangeSelect.value;
    try {
      const history = await getJson('/status/traffic/history');
      hour = history.hour;
      drawSparklines();
      const series = history[range];
      const step = series.step_seconds;
      const xs = series.requests['2xx'].map((_, i) => series.from + i * step);
      lineChart(chart, {
        xs,
        range: [series.from, series.from + xs.length * step],
        unit: 'requests/s',
        series: HISTORY_LINES.map((line) => ({ label: line.label, color: line.color, values: series.requests[line.status].map((n) => n / step) })),
      });
      const totals = Object.fromEntries(Object.entries(series.requests).map(([status, counts]) => [status, counts.reduce((a, b) => a + b, 0)]));
      const all = Object.values(totals).reduce((a, b) => a + b, 0);
      const processes = history.processes.length;
      show(
        historySummary,
        `${RANGE_NAMES[range]}, by ${step} s, summed over the node's ${processes} ${processes === 1 ? 'process' : 'processes'}: ${number(all)} requests, ` +
          ['2xx', '3xx', '4xx', '5xx'].map((status) => `${number(totals[status])} ${status}`).join(', '),
      );
      chart.dataset.state = 'drawn';
    } catch (error) {
      show(historySummary, failure(error));
    }
  };

  const poll = async () => {
    try {
      const next = sample(await getJson('/status/traffic'));
      // The node's sums: once one of its processes was replaced, they are not comparable with earlier ones.
      if (samples.length && next.processes !== samples[samples.length - 1].processes) samples = [];
      samples.push(next);
      samples = samples.filter((s) => s.at >= next.at - WINDOW_MS - POLL_MS);
      render();
    } catch (error) {
      show(summary, failure(error));
    }
  };

  every(CONFIG_POLL_MS, async () => {
    await loadConfig();
    if (samples.length) render();
    drawSparklines();
  });
  every(POLL_MS, poll);
  const redraw = every(HISTORY_POLL_MS, drawHistory);
  rangeSelect.addEventListener('change', redraw);
}

/** Each configured route's last hour (`hour.routes` lists those with requests), and the largest bucket of any. */
function routeHours(routes, hour) {
  const byLabel = new Map(hour.routes.map((r) => [r.route, r.requests]));
  const buckets = hour.requests['2xx'].length;
  let max = 0;
  const rows = routes.map((route) => {
    const requests = byLabel.get(labelOf(route));
    const layers = SPARKLINE_LAYERS.map((layer) => ({
      ...layer,
      values: Array.from({ length: buckets }, (_, i) => layer.classes.reduce((sum, c) => sum + (requests?.[c][i] ?? 0), 0)),
    }));
    const perBucket = layers[0].values.map((_, i) => layers.reduce((sum, layer) => sum + layer.values[i], 0));
    max = Math.max(max, ...perBucket);
    const total = (name) => layers.find((layer) => layer.name === name).values.reduce((a, b) => a + b, 0);
    return { route, layers, total: perBucket.reduce((a, b) => a + b, 0), '2xx': total('2xx'), '4xx': total('4xx'), '5xx': total('5xx') };
  });
  return { rows, max };
}

function sparklineColumns(max) {
  return [
    { label: 'Route', cell: (row) => labelOf(row.route) },
    {
      label: 'Last hour',
      cell: (row) => sparkline({ layers: row.layers, max, label: `${labelOf(row.route)}: ${row.total} requests in the last hour` }),
      title: 'requests by 10 s: 2xx green, 4xx amber, 5xx red, others grey',
    },
    { label: 'requests', numeric: true, cell: (row) => number(row.total), title: 'in the last hour' },
    { label: '2xx', numeric: true, cell: (row) => number(row['2xx']), title: 'successes in the last hour' },
    { label: '4xx', numeric: true, cell: (row) => number(row['4xx']), title: 'client errors in the last hour' },
    { label: '5xx', numeric: true, cell: (row) => number(row['5xx']), title: 'server errors in the last hour' },
  ];
}

function ratesColumns() {
  return [
    { label: 'req/s', numeric: true, cell: (row) => number(row.rate), title: `over the last ${WINDOW_MS / 1000} s` },
    { label: '5xx', numeric: true, cell: (row) => percent(row.server), title: 'share of server errors' },
    { label: '4xx', numeric: true, cell: (row) => percent(row.client), title: 'share of client errors' },
    { label: 'requests', numeric: true, cell: (row) => number(row.since), title: 'since the gateway started' },
  ];
}

function routeColumns(pluginsOf) {
  return [
    { label: 'Route', cell: (row) => (row.route ? labelOf(row.route) : h('em', {}, 'no route matched')) },
    { label: 'Service', cell: (row) => (row.service ? labelOf(row.service) : '–') },
    { label: 'Protocols', cell: (row) => list(row.route?.protocols) },
    { label: 'Paths and hosts', cell: (row) => list([...(row.route?.paths ?? []), ...(row.route?.hosts ?? [])]) },
    { label: 'Plugins', cell: (row) => (row.route ? list(pluginsOf(row.route)) : '–') },
    ...ratesColumns(),
  ];
}

const serviceColumns = [
  { label: 'Service', cell: (row) => labelOf(row.service) },
  { label: 'Upstream', cell: (row) => serviceUrl(row.service) },
  { label: 'Routes', numeric: true, cell: (row) => number(row.routes) },
  ...ratesColumns(),
];

/**
 * Routes and services with live request rates and error ratios, and the node's traffic over the last
 * hour or day. The gateway counts requests per route, service and status code (GET /status/traffic);
 * the page reads the counters every few seconds and turns the differences into rates over the last half
 * minute. The chart is the node's own history (GET /status/traffic/history: requests by status class in
 * 10 s or one-minute buckets, summed over its processes), so it shows what came before the page opened.
 */
import { every, getJson, kongList } from './api.js';
import { COLORS, lineChart } from './chart.js';
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
  let config;
  let samples = [];

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

  const drawHistory = async () => {
    const range = rangeSelect.value;
    try {
      const history = await getJson('/status/traffic/history');
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
  });
  every(POLL_MS, poll);
  const redraw = every(HISTORY_POLL_MS, drawHistory);
  rangeSelect.addEventListener('change', redraw);
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

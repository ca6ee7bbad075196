/**
 * Prometheus metrics for GET /metrics: requests by route/service/status code and by consumer, latency
 * histograms, and connections; the metrics plugins register; plus prom-client's process metrics.
 *
 * The per-request series are kept here rather than in prom-client because prom-client hashes the
 * label set on every observation (even through `labels()` children): a series lookup here is one Map
 * get per request, and the text is rendered only when scraped.
 */
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram as PromHistogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { LocalExchange, type NodeExchange } from './process/exchange.ts';
import type { GaugeSpec, HistogramSpec, MetricSpec, PluginMetrics } from './pdk/types.ts';
import { sumHistories, sumRouteHistories, TrafficHistory, type HistorySnapshot, type RouteSeries, type TrafficSeries } from './traffic-history.ts';

const LATENCY_BUCKETS_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

class Histogram {
  readonly counts = new Float64Array(LATENCY_BUCKETS_MS.length);
  sum = 0;
  count = 0;

  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < LATENCY_BUCKETS_MS.length; i++) {
      if (value <= LATENCY_BUCKETS_MS[i]) {
        this.counts[i]++;
        return;
      }
    }
  }

  /** Adds another process's histogram of the same buckets. */
  add(other: HistogramSnapshot): void {
    for (let i = 0; i < this.counts.length; i++) this.counts[i] += other.counts[i] ?? 0;
    this.sum += other.sum;
    this.count += other.count;
  }

  snapshot(): HistogramSnapshot {
    return { counts: [...this.counts], sum: this.sum, count: this.count };
  }

  render(name: string, labels: string, out: string[]): void {
    let cumulative = 0;
    for (let i = 0; i < LATENCY_BUCKETS_MS.length; i++) {
      cumulative += this.counts[i];
      out.push(`${name}_bucket{${labels},le="${LATENCY_BUCKETS_MS[i]}"} ${cumulative}`);
    }
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count}`, `${name}_sum{${labels}} ${this.sum}`, `${name}_count{${labels}} ${this.count}`);
  }
}

interface HistogramSnapshot {
  counts: number[];
  sum: number;
  count: number;
}

interface Series {
  route: string;
  service: string;
  labels: string;
  codes: Map<number, number>;
  latency: Histogram;
  upstream: Histogram;
}

function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** Requests of one consumer, by status code. */
interface ConsumerSeries {
  consumer: string;
  labels: string;
  codes: Map<number, number>;
}

/**
 * Requests by status code, per route and service (route '' = matched none) and per consumer, summed over
 * `processes` since each started: when one is replaced, the sums start again from its successor's.
 */
export interface RequestCounts {
  /** The process that answered. */
  pid: number;
  processes: number[];
  routes: { route: string; service: string; requests: Record<string, number>; latency_ms_sum: number }[];
  consumers: { consumer: string; requests: Record<string, number> }[];
}

/** Each process's registered series, summed at a scrape. */
const REGISTRY_TOPIC = 'metrics.registry';
/** Each process's request series and connections, summed at a scrape. */
const REQUESTS_TOPIC = 'metrics.requests';
/** Each process's recent requests by status class in time buckets, summed when the console asks. */
const HISTORY_TOPIC = 'metrics.history';

/** The node's recent requests by status class: the last hour by 10 s (also per route), the last day by minute. */
export interface TrafficHistoryReply {
  pid: number;
  processes: number[];
  hour: TrafficSeries & { routes: RouteSeries[] };
  day: TrafficSeries;
}

/** How the series name a route: its name, else its id ('' for a request that matched none). */
export function routeLabel(route: { name: string | null; id: string } | undefined): string {
  return route?.name ?? route?.id ?? '';
}

/** One process's request series and connections, as another process reads them. */
interface RequestSnapshot {
  pid: number;
  series: { route: string; service: string; codes: [number, number][]; latency: HistogramSnapshot; upstream: HistogramSnapshot }[];
  consumers: { consumer: string; codes: [number, number][] }[];
  connectionsActive: number;
  connectionsAccepted: number;
  requestsStarted: number;
}

/** The request series of several processes added up (a node's, whichever of its workers is scraped). */
class RequestTotals {
  readonly pids: number[] = [];
  readonly series = new Map<string, Series>();
  readonly consumers = new Map<string, ConsumerSeries>();
  connectionsActive = 0;
  connectionsAccepted = 0;
  requestsStarted = 0;

  add(snapshot: RequestSnapshot): void {
    this.pids.push(snapshot.pid);
    for (const s of snapshot.series) {
      const into = routeSeries(this.series, s.route, s.service);
      addCodes(into.codes, s.codes);
      into.latency.add(s.latency);
      into.upstream.add(s.upstream);
    }
    for (const c of snapshot.consumers) addCodes(consumerSeries(this.consumers, c.consumer).codes, c.codes);
    this.connectionsActive += snapshot.connectionsActive;
    this.connectionsAccepted += snapshot.connectionsAccepted;
    this.requestsStarted += snapshot.requestsStarted;
  }
}

function addCodes(into: Map<number, number>, codes: [number, number][]): void {
  for (const [code, n] of codes) into.set(code, (into.get(code) ?? 0) + n);
}

function routeSeries(series: Map<string, Series>, route: string, service: string): Series {
  const key = route + '\u0000' + service;
  let s = series.get(key);
  if (!s) {
    s = { route, service, labels: `route="${labelValue(route)}",service="${labelValue(service)}"`, codes: new Map(), latency: new Histogram(), upstream: new Histogram() };
    series.set(key, s);
  }
  return s;
}

function consumerSeries(consumers: Map<string, ConsumerSeries>, consumer: string): ConsumerSeries {
  let s = consumers.get(consumer);
  if (!s) {
    s = { consumer, labels: `consumer="${labelValue(consumer)}"`, codes: new Map() };
    consumers.set(consumer, s);
  }
  return s;
}

export class Metrics {
  private readonly processRegistry = new Registry();
  private readonly series = new Map<string, Series>();
  private readonly consumers = new Map<string, ConsumerSeries>();
  private readonly history = new TrafficHistory();
  /** Where plugins register theirs (prom-client: they are observed per batch or per scrape, not per request). */
  readonly plugins: PluginMetrics = {
    counter: (spec) => new Counter({ ...this.checked(spec), registers: [this.processRegistry] }),
    gauge: (spec) => this.gauge(spec),
    histogram: (spec) => new PromHistogram({ ...this.checked(spec), buckets: [...spec.buckets], registers: [this.processRegistry] }),
    exposition: (prefix, render) => {
      if (!/^[a-z][a-z0-9]*_$/.test(prefix) || prefix === 'tollgate_') throw new Error(`metric prefix ${prefix}: a plugin's own family, such as kong_`);
      this.expositions.push(render);
    },
  };
  /** Text plugins render themselves at each scrape. */
  private readonly expositions: (() => string | Promise<string>)[] = [];
  connectionsActive = 0;
  connectionsAccepted = 0;
  /** Requests begun (counted on arrival; the series count them once answered). */
  requestsStarted = 0;
  private exchange!: NodeExchange;

  constructor() {
    collectDefaultMetrics({ register: this.processRegistry, prefix: 'tollgate_' });
    // Until the gateway shares them with its node, this process's figures are the node's.
    this.shareThrough(new LocalExchange());
  }

  /**
   * The request series and the registered ones (plugins' and the process's) of every process of the
   * node, summed at each scrape as prom-client's AggregatorRegistry sums cluster workers: whichever
   * worker answers, the figures are the node's.
   */
  shareThrough(exchange: NodeExchange): void {
    this.exchange = exchange;
    exchange.offer(REGISTRY_TOPIC, () => this.processRegistry.getMetricsAsJSON());
    exchange.offer(REQUESTS_TOPIC, () => this.requestSnapshot());
    exchange.offer(HISTORY_TOPIC, () => ({ pid: process.pid, history: this.history.snapshot() }));
  }

  get contentType(): string {
    return this.processRegistry.contentType;
  }

  private checked(spec: MetricSpec): { name: string; help: string; labelNames: string[] } {
    if (!spec.name.startsWith('tollgate_')) throw new Error(`metric ${spec.name}: plugin metric names start with tollgate_`);
    return { name: spec.name, help: spec.help, labelNames: [...(spec.labelNames ?? [])] };
  }

  private gauge(spec: GaugeSpec): Gauge {
    const read = spec.read;
    return new Gauge({
      ...this.checked(spec),
      registers: [this.processRegistry],
      aggregator: spec.aggregate ?? 'sum',
      // Read when scraped: the gauge shows the state at that moment, for no cost in between.
      collect: read && function (this: Gauge) {
        this.reset();
        for (const { labels, value } of read()) {
          if (labels) this.set(labels, value);
          else this.set(value);
        }
      },
    });
  }

  observe(route: string, service: string, code: number, latencyMs: number, upstreamMs: number | undefined, consumer?: string): void {
    if (consumer !== undefined) {
      const c = consumerSeries(this.consumers, consumer);
      c.codes.set(code, (c.codes.get(code) ?? 0) + 1);
    }
    const s = routeSeries(this.series, route, service);
    s.codes.set(code, (s.codes.get(code) ?? 0) + 1);
    this.history.record(code, route);
    s.latency.observe(latencyMs);
    if (upstreamMs !== undefined) s.upstream.observe(upstreamMs);
  }

  private requestSnapshot(): RequestSnapshot {
    return {
      pid: process.pid,
      series: [...this.series.values()].map((s) => ({
        route: s.route,
        service: s.service,
        codes: [...s.codes],
        latency: s.latency.snapshot(),
        upstream: s.upstream.snapshot(),
      })),
      consumers: [...this.consumers.values()].map((c) => ({ consumer: c.consumer, codes: [...c.codes] })),
      connectionsActive: this.connectionsActive,
      connectionsAccepted: this.connectionsAccepted,
      requestsStarted: this.requestsStarted,
    };
  }

  /** The request series of every process of the node, added up. */
  private async nodeTotals(): Promise<RequestTotals> {
    const snapshots = (await this.exchange.gather(REQUESTS_TOPIC)) as RequestSnapshot[];
    const totals = new RequestTotals();
    for (const snapshot of snapshots) totals.add(snapshot);
    return totals;
  }

  /** The node's connections and requests, as Kong's /status reports its server's. */
  async serverCounts(): Promise<{ active: number; accepted: number; totalRequests: number }> {
    const totals = await this.nodeTotals();
    return { active: totals.connectionsActive, accepted: totals.connectionsAccepted, totalRequests: totals.requestsStarted };
  }

  /** The node's request counters as JSON (what the console turns into rates and error ratios between two reads). */
  async requestCounts(): Promise<RequestCounts> {
    const totals = await this.nodeTotals();
    const codes = (m: Map<number, number>) => Object.fromEntries(m);
    return {
      pid: process.pid,
      processes: [...totals.pids].sort((a, b) => a - b),
      routes: [...totals.series.values()].map((s) => ({ route: s.route, service: s.service, requests: codes(s.codes), latency_ms_sum: s.latency.sum })),
      consumers: [...totals.consumers.values()].map((s) => ({ consumer: s.consumer, requests: codes(s.codes) })),
    };
  }

  /** The routes of the configuration now applied (their labels): the only ones whose history is kept. */
  keepRoutes(routes: readonly { name: string | null; id: string }[]): void {
    this.history.keepRoutes(routes.map(routeLabel));
  }

  /** The node's recent requests by status class, and each route's last hour (what the console's traffic chart and sparklines show). */
  async trafficHistory(): Promise<TrafficHistoryReply> {
    const snapshots = (await this.exchange.gather(HISTORY_TOPIC)) as { pid: number; history: HistorySnapshot }[];
    const histories = snapshots.map((s) => s.history);
    const now = Date.now();
    return {
      pid: process.pid,
      processes: snapshots.map((s) => s.pid).sort((a, b) => a - b),
      hour: { ...sumHistories(histories, 'hour', now), routes: sumRouteHistories(histories, this.history.configuredRoutes(), now) },
      day: sumHistories(histories, 'day', now),
    };
  }

  async render(): Promise<string> {
    const totals = await this.nodeTotals();
    const out: string[] = [
      '# HELP tollgate_http_requests_total HTTP requests by route, service and status code',
      '# TYPE tollgate_http_requests_total counter',
    ];
    for (const s of totals.series.values()) for (const [code, n] of s.codes) out.push(`tollgate_http_requests_total{${s.labels},code="${code}"} ${n}`);
    out.push('# HELP tollgate_consumer_requests_total Requests of authenticated consumers by consumer (username, else id) and status code', '# TYPE tollgate_consumer_requests_total counter');
    for (const s of totals.consumers.values()) for (const [code, n] of s.codes) out.push(`tollgate_consumer_requests_total{${s.labels},code="${code}"} ${n}`);
    out.push('# HELP tollgate_request_latency_ms Time from the first byte of the request to the end of the response, in ms', '# TYPE tollgate_request_latency_ms histogram');
    for (const s of totals.series.values()) s.latency.render('tollgate_request_latency_ms', s.labels, out);
    out.push('# HELP tollgate_upstream_latency_ms Time the upstream took to send the first byte of its response, in ms', '# TYPE tollgate_upstream_latency_ms histogram');
    for (const s of totals.series.values()) if (s.upstream.count > 0) s.upstream.render('tollgate_upstream_latency_ms', s.labels, out);
    out.push(
      '# HELP tollgate_connections_active Open downstream connections',
      '# TYPE tollgate_connections_active gauge',
      `tollgate_connections_active ${totals.connectionsActive}`,
      '# HELP tollgate_connections_accepted_total Accepted downstream connections',
      '# TYPE tollgate_connections_accepted_total counter',
      `tollgate_connections_accepted_total ${totals.connectionsAccepted}`,
    );
    for (const render of this.expositions) {
      const text = (await render()).trimEnd();
      if (text) out.push(text);
    }
    const registries = (await this.exchange.gather(REGISTRY_TOPIC)) as MetricObjectWithValues<MetricValue<string>>[][];
    return out.join('\n') + '\n' + (await AggregatorRegistry.aggregate(registries).metrics());
  }
}

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
import type { GaugeSpec, HistogramSpec, MetricSpec, PluginMetrics } from './pipeline/plugin-api.ts';

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

  render(name: string, labels: string, out: string[]): void {
    let cumulative = 0;
    for (let i = 0; i < LATENCY_BUCKETS_MS.length; i++) {
      cumulative += this.counts[i];
      out.push(`${name}_bucket{${labels},le="${LATENCY_BUCKETS_MS[i]}"} ${cumulative}`);
    }
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count}`, `${name}_sum{${labels}} ${this.sum}`, `${name}_count{${labels}} ${this.count}`);
  }
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

/** Requests since start by status code: per route and service (route '' = matched none), and per consumer. */
export interface RequestCounts {
  routes: { route: string; service: string; requests: Record<string, number>; latency_ms_sum: number }[];
  consumers: { consumer: string; requests: Record<string, number> }[];
}

/** Each process's registered series, summed at a scrape. */
const REGISTRY_TOPIC = 'metrics.registry';

export class Metrics {
  private readonly processRegistry = new Registry();
  private readonly series = new Map<string, Series>();
  private readonly consumers = new Map<string, ConsumerSeries>();
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
  private exchange: NodeExchange = new LocalExchange();

  constructor() {
    collectDefaultMetrics({ register: this.processRegistry, prefix: 'tollgate_' });
  }

  /**
   * The registered series (plugins' and the process's) of every process of the node, summed at each
   * scrape as prom-client's AggregatorRegistry sums cluster workers: whichever worker answers, the
   * figures are the node's.
   */
  shareThrough(exchange: NodeExchange): void {
    this.exchange = exchange;
    exchange.offer(REGISTRY_TOPIC, () => this.processRegistry.getMetricsAsJSON());
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
    if (consumer !== undefined) this.countConsumer(consumer, code);
    const key = route + '\u0000' + service;
    let s = this.series.get(key);
    if (!s) {
      s = { route, service, labels: `route="${labelValue(route)}",service="${labelValue(service)}"`, codes: new Map(), latency: new Histogram(), upstream: new Histogram() };
      this.series.set(key, s);
    }
    s.codes.set(code, (s.codes.get(code) ?? 0) + 1);
    s.latency.observe(latencyMs);
    if (upstreamMs !== undefined) s.upstream.observe(upstreamMs);
  }

  private countConsumer(consumer: string, code: number): void {
    let s = this.consumers.get(consumer);
    if (!s) {
      s = { consumer, labels: `consumer="${labelValue(consumer)}"`, codes: new Map() };
      this.consumers.set(consumer, s);
    }
    s.codes.set(code, (s.codes.get(code) ?? 0) + 1);
  }

  /** The request counters as JSON (what the console turns into rates and error ratios between two reads). */
  requestCounts(): RequestCounts {
    const codes = (m: Map<number, number>) => Object.fromEntries(m);
    return {
      routes: [...this.series.values()].map((s) => ({ route: s.route, service: s.service, requests: codes(s.codes), latency_ms_sum: s.latency.sum })),
      consumers: [...this.consumers.values()].map((s) => ({ consumer: s.consumer, requests: codes(s.codes) })),
    };
  }

  async render(): Promise<string> {
    const out: string[] = [
      '# HELP tollgate_http_requests_total HTTP requests by route, service and status code',
      '# TYPE tollgate_http_requests_total counter',
    ];
    for (const s of this.series.values()) for (const [code, n] of s.codes) out.push(`tollgate_http_requests_total{${s.labels},code="${code}"} ${n}`);
    out.push('# HELP tollgate_consumer_requests_total Requests of authenticated consumers by consumer (username, else id) and status code', '# TYPE tollgate_consumer_requests_total counter');
    for (const s of this.consumers.values()) for (const [code, n] of s.codes) out.push(`tollgate_consumer_requests_total{${s.labels},code="${code}"} ${n}`);
    out.push('# HELP tollgate_request_latency_ms Time from the first byte of the request to the end of the response, in ms', '# TYPE tollgate_request_latency_ms histogram');
    for (const s of this.series.values()) s.latency.render('tollgate_request_latency_ms', s.labels, out);
    out.push('# HELP tollgate_upstream_latency_ms Time the upstream took to send the first byte of its response, in ms', '# TYPE tollgate_upstream_latency_ms histogram');
    for (const s of this.series.values()) if (s.upstream.count > 0) s.upstream.render('tollgate_upstream_latency_ms', s.labels, out);
    out.push(
      '# HELP tollgate_connections_active Open downstream connections',
      '# TYPE tollgate_connections_active gauge',
      `tollgate_connections_active ${this.connectionsActive}`,
      '# HELP tollgate_connections_accepted_total Accepted downstream connections',
      '# TYPE tollgate_connections_accepted_total counter',
      `tollgate_connections_accepted_total ${this.connectionsAccepted}`,
    );
    for (const render of this.expositions) {
      const text = (await render()).trimEnd();
      if (text) out.push(text);
    }
    const registries = (await this.exchange.gather(REGISTRY_TOPIC)) as MetricObjectWithValues<MetricValue<string>>[][];
    const registered = registries.length > 0 ? AggregatorRegistry.aggregate(registries) : this.processRegistry;
    return out.join('\n') + '\n' + (await registered.metrics());
  }
}

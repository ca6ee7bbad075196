/**
 * Kong's per-request Prometheus series (kong/plugins/prometheus/exporter.lua), kept in maps keyed by their
 * label values (one lookup per observation) and rendered in the text format when scraped. Each process
 * counts its own requests; a scrape sums the snapshots of every process of the node, as Kong's workers
 * count into one shared dictionary.
 */

/** Kong's buckets, in ms. */
const KONG_LATENCY_BUCKETS = [1, 2, 5, 7, 10, 15, 20, 30, 50, 75, 100, 200, 500, 750, 1000, 3000, 6000];
const UPSTREAM_LATENCY_BUCKETS = [25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000];

/** Kong OSS has one workspace, and its series carry its name. */
const WORKSPACE = 'default';

function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function labels(pairs: [string, string][]): string {
  return pairs.map(([k, v]) => `${k}="${labelValue(v)}"`).join(',');
}

/** A histogram's figures: counts per bucket (not cumulative), sum and count. */
export interface HistogramData {
  counts: number[];
  sum: number;
  count: number;
}

class Histogram implements HistogramData {
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(private readonly buckets: number[]) {
    this.counts = buckets.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    const at = this.buckets.findIndex((b) => value <= b);
    if (at !== -1) this.counts[at]++;
  }
}

/** A copy of a histogram's figures. */
function figures(h: HistogramData): HistogramData {
  return { counts: [...h.counts], sum: h.sum, count: h.count };
}

function addHistogram(into: HistogramData, more: HistogramData): void {
  for (let i = 0; i < into.counts.length; i++) into.counts[i] += more.counts[i] ?? 0;
  into.sum += more.sum;
  into.count += more.count;
}

function renderHistogram(h: HistogramData, buckets: number[], name: string, labelText: string, out: string[]): void {
  let cumulative = 0;
  for (let i = 0; i < buckets.length; i++) {
    cumulative += h.counts[i];
    out.push(`${name}_bucket{${labelText},le="${buckets[i]}"} ${cumulative}`);
  }
  out.push(`${name}_bucket{${labelText},le="+Inf"} ${h.count}`, `${name}_sum{${labelText}} ${h.sum}`, `${name}_count{${labelText}} ${h.count}`);
}

/** One process's series as plain data (what the node's processes exchange), by label text. */
export interface SeriesSnapshot {
  requests: [string, number][];
  bandwidth: [string, number][];
  latencies: [string, { kong: HistogramData; upstream: HistogramData; request: HistogramData }][];
}

type LatencyKind = 'kong' | 'upstream' | 'request';
const LATENCY_BUCKETS: Record<LatencyKind, number[]> = { kong: KONG_LATENCY_BUCKETS, upstream: UPSTREAM_LATENCY_BUCKETS, request: UPSTREAM_LATENCY_BUCKETS };

interface Counted {
  labels: string;
  value: number;
}

interface Latencies {
  labels: string;
  kong: Histogram;
  upstream: Histogram;
  request: Histogram;
}

export interface RequestFacts {
  service: string;
  route: string;
  consumer: string;
}

export class KongSeries {
  private readonly requests = new Map<string, Counted>();
  private readonly latencies = new Map<string, Latencies>();
  private readonly bandwidth = new Map<string, Counted>();

  constructor(private readonly nodeId: string, private readonly version: string) {}

  countStatus(r: RequestFacts, code: number, source: 'service' | 'kong'): void {
    const key = `${r.service}\0${r.route}\0${code}\0${source}\0${r.consumer}`;
    let c = this.requests.get(key);
    if (!c) {
      c = { labels: labels([['service', r.service], ['route', r.route], ['code', String(code)], ['source', source], ['workspace', WORKSPACE], ['consumer', r.consumer]]), value: 0 };
      this.requests.set(key, c);
    }
    c.value++;
  }

  observeLatencies(r: RequestFacts, request: number, kong: number, upstream: number | undefined): void {
    const key = `${r.service}\0${r.route}`;
    let l = this.latencies.get(key);
    if (!l) {
      l = { labels: labels([['service', r.service], ['route', r.route], ['workspace', WORKSPACE]]), kong: new Histogram(KONG_LATENCY_BUCKETS), upstream: new Histogram(UPSTREAM_LATENCY_BUCKETS), request: new Histogram(UPSTREAM_LATENCY_BUCKETS) };
      this.latencies.set(key, l);
    }
    if (request >= 0) l.request.observe(request);
    if (upstream !== undefined && upstream >= 0) l.upstream.observe(upstream);
    if (kong >= 0) l.kong.observe(kong);
  }

  addBandwidth(r: RequestFacts, direction: 'ingress' | 'egress', bytes: number): void {
    if (bytes <= 0) return;
    const key = `${r.service}\0${r.route}\0${direction}\0${r.consumer}`;
    let c = this.bandwidth.get(key);
    if (!c) {
      c = { labels: labels([['service', r.service], ['route', r.route], ['direction', direction], ['workspace', WORKSPACE], ['consumer', r.consumer]]), value: 0 };
      this.bandwidth.set(key, c);
    }
    c.value += bytes;
  }

  snapshot(): SeriesSnapshot {
    return {
      requests: [...this.requests.values()].map((c) => [c.labels, c.value]),
      bandwidth: [...this.bandwidth.values()].map((c) => [c.labels, c.value]),
      latencies: [...this.latencies.values()].map((l) => [l.labels, { kong: figures(l.kong), upstream: figures(l.upstream), request: figures(l.request) }]),
    };
  }

  /** The text of the series summed over `snapshots` (one per process of the node), after the node's own `nodeLines`. */
  render(snapshots: SeriesSnapshot[], nodeLines: string[]): string {
    const requests = sumCounters(snapshots.map((s) => s.requests));
    const bandwidth = sumCounters(snapshots.map((s) => s.bandwidth));
    const latencies = new Map<string, Record<LatencyKind, HistogramData>>();
    for (const [labelText, part] of snapshots.flatMap((s) => s.latencies)) {
      const sum = latencies.get(labelText);
      if (!sum) latencies.set(labelText, { kong: figures(part.kong), upstream: figures(part.upstream), request: figures(part.request) });
      else for (const kind of ['kong', 'upstream', 'request'] as const) addHistogram(sum[kind], part[kind]);
    }
    const out: string[] = [
      '# HELP kong_node_info Kong Node metadata information',
      '# TYPE kong_node_info gauge',
      `kong_node_info{${labels([['node_id', this.nodeId], ['version', this.version]])}} 1`,
      ...nodeLines,
    ];
    if (requests.size > 0) {
      out.push('# HELP kong_http_requests_total HTTP status codes per consumer/service/route in Kong', '# TYPE kong_http_requests_total counter');
      for (const [labelText, value] of requests) out.push(`kong_http_requests_total{${labelText}} ${value}`);
    }
    if (latencies.size > 0) {
      const histograms: [string, string, LatencyKind][] = [
        ['kong_kong_latency_ms', 'Latency added by Kong and enabled plugins for each service/route in Kong', 'kong'],
        ['kong_upstream_latency_ms', 'Latency added by upstream response for each service/route in Kong', 'upstream'],
        ['kong_request_latency_ms', 'Total latency incurred during requests for each service/route in Kong', 'request'],
      ];
      for (const [name, help, kind] of histograms) {
        out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
        for (const [labelText, l] of latencies) if (l[kind].count > 0) renderHistogram(l[kind], LATENCY_BUCKETS[kind], name, labelText, out);
      }
    }
    if (bandwidth.size > 0) {
      out.push('# HELP kong_bandwidth_bytes Total bandwidth (ingress/egress) throughput in bytes', '# TYPE kong_bandwidth_bytes counter');
      for (const [labelText, value] of bandwidth) out.push(`kong_bandwidth_bytes{${labelText}} ${value}`);
    }
    return out.join('\n');
  }
}

function sumCounters(parts: [string, number][][]): Map<string, number> {
  const sums = new Map<string, number>();
  for (const [labelText, value] of parts.flat()) sums.set(labelText, (sums.get(labelText) ?? 0) + value);
  return sums;
}

/**
 * Kong's per-request Prometheus series (kong/plugins/prometheus/exporter.lua), kept in maps keyed by their
 * label values (one lookup per observation) and rendered in the text format when scraped.
 */

/** Kong's buckets, in ms. */
const KONG_LATENCY_BUCKETS = [1, 2, 5, 7, 10, 15, 20, 30, 50, 75, 100, 200, 500, 750, 1000, 3000, 6000];
const UPSTREAM_LATENCY_BUCKETS = [25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000];

/** Kong OSS has one workspace, and its series carry its name. */
const WORKSPACE = 'default';

function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labels(pairs: [string, string][]): string {
  return pairs.map(([k, v]) => `${k}="${labelValue(v)}"`).join(',');
}

class Histogram {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly buckets: number[]) {
    this.counts = new Float64Array(buckets.length);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    const at = this.buckets.findIndex((b) => value <= b);
    if (at !== -1) this.counts[at]++;
  }

  render(name: string, labelText: string, out: string[]): void {
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += this.counts[i];
      out.push(`${name}_bucket{${labelText},le="${this.buckets[i]}"} ${cumulative}`);
    }
    out.push(`${name}_bucket{${labelText},le="+Inf"} ${this.count}`, `${name}_sum{${labelText}} ${this.sum}`, `${name}_count{${labelText}} ${this.count}`);
  }
}

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

  render(): string {
    const out: string[] = [
      '# HELP kong_node_info Kong Node metadata information',
      '# TYPE kong_node_info gauge',
      `kong_node_info{${labels([['node_id', this.nodeId], ['version', this.version]])}} 1`,
    ];
    if (this.requests.size > 0) {
      out.push('# HELP kong_http_requests_total HTTP status codes per consumer/service/route in Kong', '# TYPE kong_http_requests_total counter');
      for (const c of this.requests.values()) out.push(`kong_http_requests_total{${c.labels}} ${c.value}`);
    }
    if (this.latencies.size > 0) {
      const histograms: [string, string, keyof Omit<Latencies, 'labels'>][] = [
        ['kong_kong_latency_ms', 'Latency added by Kong and enabled plugins for each service/route in Kong', 'kong'],
        ['kong_upstream_latency_ms', 'Latency added by upstream response for each service/route in Kong', 'upstream'],
        ['kong_request_latency_ms', 'Total latency incurred during requests for each service/route in Kong', 'request'],
      ];
      for (const [name, help, which] of histograms) {
        out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
        for (const l of this.latencies.values()) if (l[which].count > 0) l[which].render(name, l.labels, out);
      }
    }
    if (this.bandwidth.size > 0) {
      out.push('# HELP kong_bandwidth_bytes Total bandwidth (ingress/egress) throughput in bytes', '# TYPE kong_bandwidth_bytes counter');
      for (const c of this.bandwidth.values()) out.push(`kong_bandwidth_bytes{${c.labels}} ${c.value}`);
    }
    return out.join('\n');
  }
}

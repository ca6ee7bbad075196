/**
 * Prometheus metrics for GET /metrics: requests by route/service/status, latency histograms, and
 * connections. Label children are cached so a request costs a map lookup, not label hashing.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const LATENCY_BUCKETS_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'tollgate_http_requests_total',
    help: 'HTTP requests by route, service and status code',
    labelNames: ['route', 'service', 'code'] as const,
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: 'tollgate_request_latency_ms',
    help: 'Time from the first byte of the request to the end of the response, in ms',
    labelNames: ['route', 'service'] as const,
    buckets: LATENCY_BUCKETS_MS,
    registers: [this.registry],
  });
  private readonly upstreamLatency = new Histogram({
    name: 'tollgate_upstream_latency_ms',
    help: 'Time the upstream took to send the first byte of its response, in ms',
    labelNames: ['route', 'service'] as const,
    buckets: LATENCY_BUCKETS_MS,
    registers: [this.registry],
  });
  readonly connectionsActive = new Gauge({ name: 'tollgate_connections_active', help: 'Open downstream connections', registers: [this.registry] });
  readonly connectionsAccepted = new Counter({ name: 'tollgate_connections_accepted_total', help: 'Accepted downstream connections', registers: [this.registry] });
  private readonly children = new Map<string, { count: Counter; latency: Histogram; upstream: Histogram }>();

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'tollgate_' });
  }

  observe(route: string, service: string, code: number, latencyMs: number, upstreamMs: number | undefined): void {
    const key = `${route}\u0000${service}\u0000${code}`;
    let child = this.children.get(key);
    if (!child) {
      child = {
        count: this.requests.labels(route, service, String(code)) as unknown as Counter,
        latency: this.latency.labels(route, service) as unknown as Histogram,
        upstream: this.upstreamLatency.labels(route, service) as unknown as Histogram,
      };
      this.children.set(key, child);
    }
    child.count.inc();
    child.latency.observe(latencyMs);
    if (upstreamMs !== undefined) child.upstream.observe(upstreamMs);
  }
}

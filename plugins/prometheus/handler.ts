/**
 * Kong's prometheus handler.lua: each request of its routes is counted in Kong's series after its response
 * (status codes with their source, latencies, bandwidth, as the config flags ask; the consumer label with
 * `per_consumer`), served on the admin API's /metrics beside Tollgate's own, summed over the node's processes.
 */
import type { PluginApi, PluginRuntime } from '../../src/pdk/index.ts';
import type { PrometheusConfig } from './schema.ts';
import { KongSeries, type RequestFacts, type SeriesSnapshot } from './series.ts';

/** The Kong version whose series these are. */
const KONG_VERSION = '3.10.0';
/** Each process's series, summed at a scrape. */
const SERIES_TOPIC = 'prometheus.kong-series';

export function createRuntime(api: PluginApi): PluginRuntime<PrometheusConfig> {
  const series = new KongSeries(api.nodeId, KONG_VERSION);
  api.node.offer(SERIES_TOPIC, () => series.snapshot());
  // A scrape of any process reports the node's totals.
  api.metrics.exposition('kong_', async () => series.render((await api.node.gather(SERIES_TOPIC)) as SeriesSnapshot[]));
  return {
    log(ctx, config) {
      const outcome = ctx.outcome;
      const facts: RequestFacts = {
        // Kong's labels: the service's name, else its host; the route's name, else its id.
        service: ctx.service ? (ctx.service.name ?? ctx.service.host) : '',
        route: ctx.route.name ?? ctx.route.id,
        consumer: config.per_consumer && ctx.consumer ? (ctx.consumer.username ?? '') : '',
      };
      if (config.status_code_metrics) series.countStatus(facts, outcome.status, outcome.source === 'service' ? 'service' : 'kong');
      if (config.latency_metrics) series.observeLatencies(facts, outcome.latencies.request, outcome.latencies.kong, outcome.latencies.upstream);
      if (config.bandwidth_metrics) {
        series.addBandwidth(facts, 'ingress', outcome.requestBytes);
        series.addBandwidth(facts, 'egress', outcome.responseBytes);
      }
    },
  };
}

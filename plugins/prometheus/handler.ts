/**
 * Kong's prometheus handler.lua: each request of its routes is counted in Kong's series after its response
 * (status codes with their source, latencies, bandwidth, as the config flags ask; the consumer label with
 * `per_consumer`), served on the admin API's /metrics beside Tollgate's own, summed over the node's processes,
 * after the node-level series Kong always exports.
 */
import { requestHeadLength, responseHeadLength, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { renderNodeSeries, type NodeFacts, type ProcessMemory } from './node-series.ts';
import type { PrometheusConfig } from './schema.ts';
import { KongSeries, type RequestFacts, type SeriesSnapshot } from './series.ts';

/** The Kong version whose series these are. */
const KONG_VERSION = '3.10.0';
/** Each process's series, summed at a scrape. */
const SERIES_TOPIC = 'prometheus.kong-series';
/** Each process's memory, one series per process. */
const MEMORY_TOPIC = 'prometheus.memory';
/** The answer's head length, noted in the response phase for the log phase's egress. */
const RESPONSE_HEAD = 'prometheus.response-head';

export function createRuntime(api: PluginApi): PluginRuntime<PrometheusConfig> {
  const series = new KongSeries(api.nodeId, KONG_VERSION);
  // As Kong's exporter.configure: target health is exported once any instance asks for it.
  let exportTargetHealth = false;
  api.node.offer(SERIES_TOPIC, () => series.snapshot());
  api.node.offer(MEMORY_TOPIC, (): ProcessMemory => ({ pid: process.pid, heapUsed: process.memoryUsage().heapUsed }));
  const nodeFacts = async (): Promise<NodeFacts> => {
    const [server, databaseReachable, memory, targets] = await Promise.all([
      api.status.server(),
      api.status.databaseReachable(),
      api.node.gather(MEMORY_TOPIC) as Promise<ProcessMemory[]>,
      exportTargetHealth ? api.status.targetHealth() : undefined,
    ]);
    return { nodeId: api.nodeId, server, databaseReachable, memory, targets };
  };
  // A scrape of any process reports the node's totals.
  api.metrics.exposition('kong_', async () => {
    const [snapshots, facts] = await Promise.all([api.node.gather(SERIES_TOPIC) as Promise<SeriesSnapshot[]>, nodeFacts()]);
    return series.render(snapshots, renderNodeSeries(facts));
  });
  return {
    configure(view) {
      exportTargetHealth = view.instances.some((i) => i.config.upstream_health_metrics);
    },
    response(ctx, config, head) {
      if (config.bandwidth_metrics) ctx.shared[RESPONSE_HEAD] = responseHeadLength(head);
    },
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
        // Kong's are nginx's $request_length and $bytes_sent: the heads count with the bodies.
        series.addBandwidth(facts, 'ingress', requestHeadLength(ctx) + outcome.requestBytes);
        series.addBandwidth(facts, 'egress', ((ctx.shared[RESPONSE_HEAD] as number | undefined) ?? 0) + outcome.responseBytes);
      }
    },
  };
}

/**
 * The runtime: one queue per destination (Kong's queue name: `queue.name`, else one made from the legacy
 * parameters, so instances with the same log server share a queue), fed in the log phase with Kong's
 * serialized request as JSON.
 */
import { createHash } from 'node:crypto';
import { reconcileResources, type PluginApi, type PluginMetrics, type PluginRuntime, type QueueCounters } from '../../src/pdk/index.ts';
import type { HttpLogConfig } from './schema.ts';
import { HttpLogQueue, type Destination } from './sender.ts';

/** An instance's destination and the name of its queue. */
export interface PreparedLog {
  queueName: string;
  destination: Destination;
}

/** Kong's Queue.get_plugin_params: legacy fields that differ from their old defaults override the queue's. */
export function prepare(config: HttpLogConfig): PreparedLog {
  const queue = { ...config.queue };
  if (config.queue_size != null && config.queue_size !== 1) queue.max_batch_size = config.queue_size;
  if (config.flush_timeout != null && config.flush_timeout !== 2) queue.max_coalescing_delay = config.flush_timeout;
  const url = new URL(config.http_endpoint);
  const userinfo = url.password ? `${url.username}:${url.password}` : url.username;
  url.username = url.password = '';
  const headers: Record<string, string> = { 'content-type': config.content_type };
  if (userinfo) headers.authorization = 'Basic ' + Buffer.from(userinfo).toString('base64');
  for (const [name, value] of Object.entries(config.headers ?? {})) headers[name.toLowerCase()] ??= value;
  // Kong's make_queue_name, digested: the endpoint may carry credentials, which the name (a store key, a log field) must not.
  const kongName = [config.http_endpoint, config.method, config.content_type, config.timeout, config.keepalive, config.retry_count ?? 'nil'].join(':');
  const queueName = config.queue.name ?? 'http-log-' + createHash('sha256').update(kongName).digest('hex').slice(0, 16);
  return { queueName, destination: { queue, timeout: config.timeout, keepalive: config.keepalive, method: config.method, url, headers } };
}

/** Kong's warnings for the legacy fields, once per configuration that uses them. */
function legacyWarnings(config: HttpLogConfig): string[] {
  const warnings: string[] = [];
  if (config.retry_count != null && config.retry_count !== 10) warnings.push('the retry_count parameter no longer works, please update your configuration to use initial_retry_delay and max_retry_time instead');
  if (config.queue_size != null && config.queue_size !== 1) warnings.push('the queue_size parameter is deprecated, please update your configuration to use queue.max_batch_size instead');
  if (config.flush_timeout != null && config.flush_timeout !== 2) warnings.push('the flush_timeout parameter is deprecated, please update your configuration to use queue.max_coalescing_delay instead');
  return warnings;
}

export function createRuntime(api: PluginApi): PluginRuntime<HttpLogConfig, PreparedLog> {
  const queues = new Map<string, HttpLogQueue>();
  const counters = httpLogCounters(api.metrics, () => [...queues.values()]);

  return {
    async configure(view) {
      const wanted = new Map<string, Destination>();
      for (const instance of view.instances) {
        wanted.set(instance.prepared.queueName, instance.prepared.destination);
        for (const warning of legacyWarnings(instance.config)) api.log.warn({ plugin: instance.id }, `http-log: ${warning}`);
      }
      await reconcileResources(queues, wanted, async (name, destination) => {
        const queue = new HttpLogQueue(name, api.store, destination, counters(name), api.log);
        await queue.start();
        return queue;
      });
    },

    log(ctx, _config, plugin) {
      queues.get(plugin.prepared.queueName)?.enqueue([JSON.stringify(ctx.serialize())]);
    },

    async close() {
      await Promise.all([...queues.values()].map((queue) => queue.close()));
    },
  };
}

/** The plugin's series on `GET /metrics`, by queue name. */
function httpLogCounters(metrics: PluginMetrics, queues: () => HttpLogQueue[]): (queue: string) => QueueCounters {
  const dropped = metrics.counter({
    name: 'tollgate_http_log_dropped_entries_total',
    help: 'Log entries dropped: queue_full (max_entries or max_bytes reached: the oldest go), retry_time (max_retry_time passed), store (the on-disk queue could not be written)',
    labelNames: ['queue', 'reason'],
  });
  const deliveries = metrics.counter({ name: 'tollgate_http_log_deliveries_total', help: 'Batches the log server acknowledged with a 2xx', labelNames: ['queue'] });
  const retries = metrics.counter({ name: 'tollgate_http_log_retries_total', help: 'Failed sends, each retried after a backoff', labelNames: ['queue'] });
  metrics.gauge({
    name: 'tollgate_http_log_queue_entries',
    help: 'Log entries waiting to be sent, in memory and in the on-disk queue (shared by the processes of the node)',
    labelNames: ['queue', 'where'],
    aggregate: 'max',
    read: () =>
      queues().flatMap((q) => {
        const depth = q.depth();
        return [
          { labels: { queue: depth.queue, where: 'memory' }, value: depth.memory },
          { labels: { queue: depth.queue, where: 'disk' }, value: depth.disk },
        ];
      }),
  });
  return (queue) => ({
    dropped: (reason, count) => dropped.inc({ queue, reason }, count),
    retried: () => retries.inc({ queue }),
    delivered: () => deliveries.inc({ queue }),
  });
}

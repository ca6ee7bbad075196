/** Kong's `prometheus` plugin: Kong's kong_* request series on the admin API's /metrics. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type PrometheusConfig } from './schema.ts';

const prometheus: PluginDefinition<PrometheusConfig> = {
  name: 'prometheus',
  version: '0.1.0',
  // Kong's PRIORITY: among the last, as a logging plugin.
  priority: 13,
  configSchema,
  // Its counters are each process's, summed over the node at every scrape; per node, as Kong's.
  multiProcess: true,
  create: createRuntime,
};

export default prometheus;

/** Kong's `statsd` plugin: each request's metrics to a StatsD server over UDP (or TCP). */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { checkConfig, configSchema, type StatsdConfig } from './schema.ts';

const statsd: PluginDefinition<StatsdConfig> = {
  name: 'statsd',
  version: '0.1.0',
  // Kong's PRIORITY: a logging plugin, after prometheus (13).
  priority: 11,
  configSchema,
  checkConfig,
  // Each process sends its own requests' metrics; the StatsD server adds them up.
  multiProcess: true,
  create: createRuntime,
};

export default statsd;

/** Kong's `bot-detection` plugin: refuses known bots and configured User-Agents. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareDetector, type Detector } from './handler.ts';
import { configSchema, type BotDetectionConfig } from './schema.ts';

const botDetection: PluginDefinition<BotDetectionConfig, Detector> = {
  name: 'bot-detection',
  version: '0.1.0',
  // Kong's PRIORITY: before authentication, so a bot costs no credential check.
  priority: 2500,
  multiProcess: true,
  // Kong's schema: typedefs.no_consumer.
  noConsumer: true,
  configSchema,
  prepare: prepareDetector,
  create: createRuntime,
};

export default botDetection;

/** Kong's `response-transformer` plugin: the answer's headers and JSON body rewritten by config. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { configSchema, type ResponseTransformerConfig } from './schema.ts';

const responseTransformer: PluginDefinition<ResponseTransformerConfig> = {
  name: 'response-transformer',
  version: '0.1.0',
  // Kong's PRIORITY: its response phase runs after request-transformer's neighbours, before logging plugins.
  priority: 800,
  multiProcess: true,
  configSchema,
  create: createRuntime,
};

export default responseTransformer;

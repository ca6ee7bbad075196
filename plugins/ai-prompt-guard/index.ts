/** Kong's `ai-prompt-guard` plugin: allow and deny patterns over the prompts of OpenAI-format requests. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareGuard, type Guard } from './handler.ts';
import { configSchema, unsupportedHere, type AiPromptGuardConfig } from './schema.ts';

const aiPromptGuard: PluginDefinition<AiPromptGuardConfig, Guard> = {
  name: 'ai-prompt-guard',
  version: '0.1.0',
  // Kong's PRIORITY: just before ai-proxy (770), so a refused prompt never reaches the provider.
  priority: 771,
  multiProcess: true,
  configSchema,
  checkConfig: unsupportedHere,
  prepare: prepareGuard,
  create: createRuntime,
};

export default aiPromptGuard;

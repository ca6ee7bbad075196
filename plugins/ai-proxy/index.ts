/** Kong's `ai-proxy` plugin: an OpenAI-format API in front of the models of Kong's providers (OpenAI, Azure, Anthropic, Cohere, Mistral, Llama2/Ollama, Gemini, Bedrock, Hugging Face). */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepare, type Prepared } from './handler.ts';
import { configSchema, type AiProxyConfig } from './schema.ts';
import { unsupportedHere } from './unsupported.ts';

const aiProxy: PluginDefinition<AiProxyConfig, Prepared> = {
  name: 'ai-proxy',
  version: '0.1.0',
  // Kong's PRIORITY: after the transformers (800) and ai-prompt-guard (771).
  priority: 770,
  // No state: each request is translated on its own.
  multiProcess: true,
  configSchema,
  checkConfig: unsupportedHere,
  prepare,
  create: createRuntime,
};

export default aiProxy;

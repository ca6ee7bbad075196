/** The driver for a configured model: the provider, and for mistral and llama2 the format they speak. */
import type { ModelConfig } from '../schema.ts';
import { anthropic } from './anthropic.ts';
import { bedrock } from './bedrock.ts';
import { cohere } from './cohere.ts';
import type { Driver } from './driver.ts';
import { gemini } from './gemini.ts';
import { huggingface } from './huggingface.ts';
import { ollamaFormat } from './ollama.ts';
import { azure, openAiFormat } from './openai.ts';

/** Kong's upstream_url_format for the providers of a fixed origin; llama2 is always self-hosted. */
const OPENAI = openAiFormat('https://api.openai.com:443');
const MISTRAL_OPENAI = openAiFormat('https://api.mistral.ai:443');
const MISTRAL_OLLAMA = ollamaFormat('https://api.mistral.ai:443');
const SELF_HOSTED_OPENAI = openAiFormat(undefined);
const SELF_HOSTED_OLLAMA = ollamaFormat(undefined);

const BY_PROVIDER: Record<string, Driver> = { openai: OPENAI, azure, anthropic, cohere, gemini, bedrock, huggingface };

export function driverFor(model: ModelConfig): Driver {
  switch (model.provider) {
    case 'mistral':
      return model.options?.mistral_format === 'ollama' ? MISTRAL_OLLAMA : MISTRAL_OPENAI;
    case 'llama2':
      return model.options?.llama2_format === 'ollama' ? SELF_HOSTED_OLLAMA : SELF_HOSTED_OPENAI;
    default:
      return BY_PROVIDER[model.provider];
  }
}

export type { Driver, Model, OpenAiRequest, OutgoingRequest, StreamTranslator, TranslatedRoute, Usage } from './driver.ts';

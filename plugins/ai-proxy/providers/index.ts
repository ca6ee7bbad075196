/** The driver for a configured model: the provider, and for mistral and llama2 the format they speak. */
import type { ModelConfig } from '../schema.ts';
import { anthropic } from './anthropic.ts';
import type { Driver } from './driver.ts';
import { ollamaFormat } from './ollama.ts';
import { openAiFormat } from './openai.ts';

/** Kong's upstream_url_format for the providers served here; llama2 is always self-hosted. */
const OPENAI = openAiFormat('https://api.openai.com:443');
const MISTRAL_OPENAI = openAiFormat('https://api.mistral.ai:443');
const MISTRAL_OLLAMA = ollamaFormat('https://api.mistral.ai:443');
const SELF_HOSTED_OPENAI = openAiFormat(undefined);
const SELF_HOSTED_OLLAMA = ollamaFormat(undefined);

/** Undefined for a provider the schema's checks refuse here. */
export function driverFor(model: ModelConfig): Driver | undefined {
  switch (model.provider) {
    case 'openai':
      return OPENAI;
    case 'anthropic':
      return anthropic;
    case 'mistral':
      return model.options?.mistral_format === 'ollama' ? MISTRAL_OLLAMA : MISTRAL_OPENAI;
    case 'llama2':
      return model.options?.llama2_format === 'ollama' ? SELF_HOSTED_OLLAMA : SELF_HOSTED_OPENAI;
    default:
      return undefined;
  }
}

export type { Driver, Model, OpenAiRequest, StreamTranslator, TranslatedRoute, Usage } from './driver.ts';

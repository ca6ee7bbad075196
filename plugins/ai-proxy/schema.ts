/**
 * Kong's ai-proxy config (kong/plugins/ai-proxy/schema.lua over kong/llm/schemas/init.lua): the route
 * type, the provider's model and auth, logging, streaming and the body size read. Kong's fields all
 * load; the formats and auth this gateway does not serve are refused by name.
 */
import type { Infer, Issue, RecordSchema } from '../../src/pdk/index.ts';

export const ROUTE_TYPES = ['llm/v1/chat', 'llm/v1/completions', 'preserve'] as const;
export type RouteType = (typeof ROUTE_TYPES)[number];

/** Kong's provider list. */
const KONG_PROVIDERS = ['openai', 'azure', 'anthropic', 'cohere', 'mistral', 'llama2', 'gemini', 'bedrock', 'huggingface'] as const;

const httpUrl = (value: string) => {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? undefined : 'unsupported scheme';
  } catch {
    return 'missing host in url';
  }
};

const authSchema = {
  type: 'record',
  fields: {
    header_name: { type: 'string', referenceable: true },
    header_value: { type: 'string', referenceable: true },
    param_name: { type: 'string', referenceable: true },
    param_value: { type: 'string', referenceable: true },
    param_location: { type: 'string', one_of: ['query', 'body'] },
    gcp_use_service_account: { type: 'boolean', default: false },
    gcp_service_account_json: { type: 'string', referenceable: true },
    aws_access_key_id: { type: 'string', referenceable: true },
    aws_secret_access_key: { type: 'string', referenceable: true },
    allow_override: { type: 'boolean', default: false },
  },
} as const satisfies RecordSchema;

const optionsSchema = {
  type: 'record',
  fields: {
    max_tokens: { type: 'integer' },
    input_cost: { type: 'number', gt: 0 },
    output_cost: { type: 'number', gt: 0 },
    temperature: { type: 'number', between: [0, 5] },
    top_p: { type: 'number', between: [0, 1] },
    top_k: { type: 'integer', between: [0, 500] },
    anthropic_version: { type: 'string' },
    azure_instance: { type: 'string' },
    azure_api_version: { type: 'string', default: '2023-05-15' },
    azure_deployment_id: { type: 'string' },
    llama2_format: { type: 'string', one_of: ['raw', 'openai', 'ollama'] },
    mistral_format: { type: 'string', one_of: ['openai', 'ollama'] },
    upstream_url: { type: 'string', custom: httpUrl },
    upstream_path: { type: 'string' },
    gemini: { type: 'record', fields: { api_endpoint: { type: 'string' }, project_id: { type: 'string' }, location_id: { type: 'string' } } },
    bedrock: { type: 'record', fields: { aws_region: { type: 'string' } } },
    huggingface: { type: 'record', fields: { use_cache: { type: 'boolean' }, wait_for_model: { type: 'boolean' } } },
  },
} as const satisfies RecordSchema;

export const configSchema = {
  type: 'record',
  fields: {
    route_type: { type: 'string', required: true, one_of: ROUTE_TYPES },
    auth: authSchema,
    model: {
      type: 'record',
      required: true,
      fields: {
        provider: { type: 'string', required: true, one_of: KONG_PROVIDERS },
        name: { type: 'string' },
        options: optionsSchema,
      },
    },
    logging: {
      type: 'record',
      required: true,
      fields: {
        log_statistics: { type: 'boolean', required: true, default: false },
        log_payloads: { type: 'boolean', required: true, default: false },
      },
    },
    response_streaming: { type: 'string', default: 'allow', one_of: ['allow', 'deny', 'always'] },
    max_request_body_size: { type: 'integer', default: 8 * 1024, gt: 0 },
    model_name_header: { type: 'boolean', default: true },
    llm_format: { type: 'string', default: 'openai', one_of: ['openai', 'bedrock', 'gemini'] },
  },
  entity_checks: [kongEntityChecks],
} as const satisfies RecordSchema;

export type AiProxyConfig = Infer<typeof configSchema>;
export type ModelConfig = AiProxyConfig['model'];

/** Kong's entity checks (kong/llm/schemas/init.lua and ai-proxy's), in its order and with its messages. */
function kongEntityChecks(config: Record<string, any>): Issue[] {
  const issues: Issue[] = [];
  const fail = (message: string) => issues.push({ path: [], message });
  const { provider, options = {} } = config.model ?? {};
  const auth = config.auth ?? {};
  if ((provider === 'bedrock' || provider === 'gemini') && auth.allow_override) fail('bedrock and gemini only support auth.allow_override = false');
  const set = (value: unknown) => value !== undefined && value !== null;
  const allOrNone = (fields: string[], values: unknown[]) => {
    if (values.some(set) && !values.every(set)) fail(`all or none of these fields must be set: ${fields.map((f) => `'auth.${f}'`).join(', ')}`);
  };
  allOrNone(['header_name', 'header_value'], [auth.header_name, auth.header_value]);
  allOrNone(['param_name', 'param_value', 'param_location'], [auth.param_name, auth.param_value, auth.param_location]);
  const needs = (forProvider: string, option: string, message = `for ${forProvider} provider`) => {
    if (provider === forProvider && !set(options[option])) fail(`must set 'model.options.${option}' ${message}`);
  };
  needs('llama2', 'llama2_format');
  needs('mistral', 'mistral_format');
  needs('anthropic', 'anthropic_version');
  needs('azure', 'azure_instance');
  needs('azure', 'azure_api_version');
  needs('azure', 'azure_deployment_id');
  needs('llama2', 'upstream_url', 'for self-hosted providers/models');
  if (config.logging?.log_statistics && config.route_type === 'llm/v1/completions' && provider === 'anthropic') {
    fail('anthropic does not support statistics when route_type is llm/v1/completions');
  }
  if ((config.llm_format === 'bedrock' || config.llm_format === 'gemini') && config.route_type !== 'llm/v1/chat') {
    fail("native provider options in llm_format can only be used with the 'llm/v1/chat' route_type");
  }
  if (config.llm_format === 'bedrock' && provider !== 'bedrock') fail("native llm_format 'bedrock' can only be used with the 'bedrock' model.provider");
  if (config.llm_format === 'gemini' && provider !== 'gemini') fail("native llm_format 'gemini' can only be used with the 'gemini' model.provider");
  return issues;
}

/**
 * Kong's ai-prompt-guard config (kong/plugins/ai-prompt-guard/schema.lua): at most ten patterns of at
 * most 500 characters each way, checked here at load for the linear-time regex engine.
 */
import { operatorRegexProblem, type Infer, type Issue, type OperatorRegexOptions, type RecordSchema } from '../../src/pdk/index.ts';

/** Kong's `ngx.re.find(prompt, pattern, "jo")`: anywhere in the prompt, case-sensitive. */
export const PROMPT_REGEX: OperatorRegexOptions = { anchored: false, ignoreCase: false };

function regexProblem(pattern: string): string | undefined {
  const problem = operatorRegexProblem(pattern, PROMPT_REGEX);
  return problem === undefined ? undefined : `not a valid regex: ${pattern} (${problem})`;
}

const PATTERNS = { type: 'array', len_max: 10, elements: { type: 'string', len_min: 1, len_max: 500, custom: regexProblem } } as const;

export const configSchema = {
  type: 'record',
  fields: {
    allow_patterns: PATTERNS,
    deny_patterns: PATTERNS,
    allow_all_conversation_history: { type: 'boolean', required: true, default: false },
    max_request_body_size: { type: 'integer', default: 8 * 1024, gt: 0 },
    match_all_roles: { type: 'boolean', required: true, default: false },
    llm_format: { type: 'string', default: 'openai', one_of: ['openai', 'bedrock', 'gemini'] },
  },
  entity_checks: [somePatterns, historyWithAllRoles],
} as const satisfies RecordSchema;

export type AiPromptGuardConfig = Infer<typeof configSchema>;

function somePatterns(config: Record<string, any>): Issue[] {
  const nonEmpty = (list: unknown) => Array.isArray(list) && list.length > 0;
  return nonEmpty(config.allow_patterns) || nonEmpty(config.deny_patterns)
    ? []
    : [{ path: [], message: "at least one of these fields must be non-empty: 'config.allow_patterns', 'config.deny_patterns'" }];
}

/** Kong's conditional check: matching every role reads the whole history. */
function historyWithAllRoles(config: Record<string, any>): Issue[] {
  if (!config.match_all_roles || !config.allow_all_conversation_history) return [];
  return [
    { path: [], message: "failed conditional validation given value of field 'config.match_all_roles'" },
    { path: ['allow_all_conversation_history'], message: 'value must be false' },
  ];
}

/** Kong's native formats (bedrock, gemini) are not read here: the config says so at load. */
export function unsupportedHere(config: AiPromptGuardConfig): Issue[] {
  return config.llm_format === 'openai' ? [] : [{ path: ['llm_format'], message: `the '${config.llm_format}' format is not supported by this gateway (use 'openai')` }];
}

/** Kong's bot-detection config (kong/plugins/bot-detection/schema.lua): regexes on the User-Agent. */
import { operatorRegexProblem, type Infer, type OperatorRegexOptions, type RecordSchema } from '../../src/pdk/index.ts';

/** Kong's `ngx.re.find(…, "jo")`: anywhere in the text, case-sensitive; here on the linear-time engine. */
export const USER_AGENT_REGEX: OperatorRegexOptions = { anchored: false, ignoreCase: false };

/** Kong's `is_regex` message, with the reason the engine gives. */
function regexProblem(pattern: string): string | undefined {
  const problem = operatorRegexProblem(pattern, USER_AGENT_REGEX);
  return problem === undefined ? undefined : `not a valid regex: ${pattern} (${problem})`;
}

const REGEXES = { type: 'array', elements: { type: 'string', custom: regexProblem }, default: [] } as const;

export const configSchema = {
  type: 'record',
  fields: {
    allow: REGEXES,
    deny: REGEXES,
  },
} as const satisfies RecordSchema;

export type BotDetectionConfig = Infer<typeof configSchema>;

/**
 * Kong's ai-prompt-guard (kong/plugins/ai-prompt-guard/filters/guard-prompt.lua): the prompt of an
 * OpenAI-format request (a completion's `prompt`, or the chat's user messages: the latest only with
 * allow_all_conversation_history, every role's with match_all_roles) is refused when a deny pattern
 * matches it, or when allow patterns are set and none does; the client only learns "bad request".
 * Patterns run on the linear-time regex engine: a bad one is refused at load (Kong answers 500 then).
 */
import { compileOperatorRegex, mediaType, parseUntrustedJson, type AccessContext, type OperatorRegex, type PluginRuntime } from '../../src/pdk/index.ts';
import { PROMPT_REGEX, type AiPromptGuardConfig } from './schema.ts';

export interface Guard {
  allow: OperatorRegex[];
  deny: OperatorRegex[];
}

/** Kong's default max_request_body_size, for a config that sets it to null. */
const DEFAULT_BODY_SIZE = 8 * 1024;

export function prepareGuard(config: AiPromptGuardConfig): Guard {
  const compile = (patterns: string[] | null | undefined) => (patterns ?? []).map((p) => compileOperatorRegex(p, PROMPT_REGEX));
  return { allow: compile(config.allow_patterns), deny: compile(config.deny_patterns) };
}

export function createRuntime(): PluginRuntime<AiPromptGuardConfig, Guard> {
  return {
    async access(ctx, config, plugin) {
      const request = await jsonBody(ctx, config);
      if (request === undefined) return refuse(ctx, 'this LLM route only supports application/json requests');
      const prompt = promptOf(request, config);
      // Kong does not tell the client why: "don't let users know 'ai-prompt-guard' is in use".
      if (prompt === undefined || !allowed(prompt, plugin.prepared)) refuse(ctx, 'bad request');
    },
  };
}

/** The body as Kong's parse-request filter reads it: JSON (the default type), at most max_request_body_size. */
async function jsonBody(ctx: AccessContext, config: AiPromptGuardConfig): Promise<Record<string, unknown> | undefined> {
  const type = mediaType(ctx.headers['content-type']) || 'application/json';
  if (type !== 'application/json' && !type.endsWith('+json')) return undefined;
  const body = await ctx.readBodyWithin(config.max_request_body_size ?? DEFAULT_BODY_SIZE);
  if (body === undefined) return undefined;
  try {
    const parsed = parseUntrustedJson(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The text the patterns see, or undefined for a request that is neither a chat nor a completion: the
 * chat's messages newest first, joined by spaces (so that words of two messages do not run together).
 */
function promptOf(request: Record<string, unknown>, config: AiPromptGuardConfig): string | undefined {
  const { messages } = request;
  if (Array.isArray(messages)) {
    const parts: string[] = [];
    for (let i = messages.length - 1; i >= 0; i--) {
      const message = messages[i] as Record<string, unknown> | null;
      if (typeof message?.role !== 'string') return undefined;
      if (message.role !== 'user' && !config.match_all_roles) continue;
      if (typeof message.content !== 'string') return undefined;
      parts.push(message.content);
      if (config.allow_all_conversation_history) break;
    }
    return parts.join(' ');
  }
  return typeof request.prompt === 'string' ? request.prompt : undefined;
}

function allowed(prompt: string, guard: Guard): boolean {
  if (guard.deny.some((regex) => regex.test(prompt))) return false;
  return guard.allow.length === 0 || guard.allow.some((regex) => regex.test(prompt));
}

function refuse(ctx: AccessContext, message: string): void {
  ctx.respond(400, { error: { message } });
}

/**
 * Kong's ai-prompt-guard (kong/plugins/ai-prompt-guard/filters/guard-prompt.lua): the prompt of an
 * OpenAI-format request (a completion's `prompt`, or the chat's user messages: the latest only with
 * allow_all_conversation_history, every role's with match_all_roles) is refused when a deny pattern
 * matches it, or when allow patterns are set and none does; the client only learns "bad request".
 * Patterns run on the linear-time regex engine: a bad one is refused at load (Kong answers 500 then).
 */
import { compileOperatorRegex, type AccessContext, type OperatorRegex, type PluginRuntime } from '../../src/pdk/index.ts';
import { readOpenAiRequest, type OpenAiRequest } from '../ai-proxy/public.ts';
import { PROMPT_REGEX, type AiPromptGuardConfig } from './schema.ts';

export interface Guard {
  allow: OperatorRegex[];
  deny: OperatorRegex[];
}

export function prepareGuard(config: AiPromptGuardConfig): Guard {
  const compile = (patterns: string[] | null | undefined) => (patterns ?? []).map((p) => compileOperatorRegex(p, PROMPT_REGEX));
  return { allow: compile(config.allow_patterns), deny: compile(config.deny_patterns) };
}

export function createRuntime(): PluginRuntime<AiPromptGuardConfig, Guard> {
  return {
    async access(ctx, config, plugin) {
      const read = await readOpenAiRequest(ctx, config.max_request_body_size);
      if (read === undefined) return refuse(ctx, 'this LLM route only supports application/json requests');
      const prompt = promptOf(read.request, config);
      // Kong does not tell the client why: "don't let users know 'ai-prompt-guard' is in use".
      if (prompt === undefined || !allowed(prompt, plugin.prepared)) refuse(ctx, 'bad request');
    },
  };
}

/**
 * The text the patterns see, or undefined for a request that is neither a chat nor a completion: the
 * chat's messages newest first, joined by spaces (so that words of two messages do not run together).
 */
function promptOf(request: OpenAiRequest, config: AiPromptGuardConfig): string | undefined {
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

/** An OpenAI-format request body as Kong's AI plugins read it (kong.request.get_body with a size limit). */
import { mediaType, parseUntrustedJson, type AccessContext } from '../../src/pdk/index.ts';

export type OpenAiRequest = Record<string, unknown>;

/**
 * The body, its text and its JSON object, when it is JSON (the default type) of at most `maxBytes`;
 * undefined otherwise (not JSON, malformed, nested too deep, not an object, or larger: left unread).
 */
export async function readOpenAiRequest(ctx: AccessContext, maxBytes: number): Promise<{ body: Buffer; text: string; request: OpenAiRequest } | undefined> {
  const type = mediaType(ctx.headers['content-type']) || 'application/json';
  if (type !== 'application/json' && !type.endsWith('+json')) return undefined;
  const body = await ctx.readBodyWithin(maxBytes);
  if (body === undefined) return undefined;
  const text = body.toString('utf8');
  try {
    const parsed = parseUntrustedJson(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? { body, text, request: parsed as OpenAiRequest } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Refuses request bodies larger than the configured size (Kong's request-size-limiting handler.lua): a
 * declared Content-Length at once, a chunked body while it streams upstream — counted, never held whole
 * (Kong reads it into memory or a temporary file first). A client that asked `Expect: 100-continue` gets
 * 417 instead of 413, as on Kong.
 */
import type { AccessContext, PluginRuntime } from '../../src/pdk/index.ts';
import { UNIT_BYTES, type RequestSizeLimitingConfig } from './schema.ts';

const TOO_LARGE = 'Request size limit exceeded';

export function allowedBytes(config: RequestSizeLimitingConfig): number {
  return (config.allowed_payload_size ?? 128) * UNIT_BYTES[config.size_unit as keyof typeof UNIT_BYTES];
}

export function createRuntime(): PluginRuntime<RequestSizeLimitingConfig, number> {
  return {
    access(ctx, config, plugin) {
      const declared = ctx.headers['content-length'];
      const status = refusalStatus(ctx);
      if (declared !== undefined && declared !== '') {
        if (Number(declared) > plugin.prepared) ctx.error(status, TOO_LARGE);
        return;
      }
      if (config.require_content_length && !isChunked(ctx)) return ctx.error(411, 'A valid Content-Length header is required');
      ctx.limitRequestBody(plugin.prepared, status);
    },
  };
}

function refusalStatus(ctx: AccessContext): number {
  return ctx.headers.expect?.trim().toLowerCase() === '100-continue' ? 417 : 413;
}

function isChunked(ctx: AccessContext): boolean {
  return ctx.headers['transfer-encoding'] === 'chunked';
}

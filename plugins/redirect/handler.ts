/**
 * Answers every request with a redirect (Kong's redirect handler.lua): `status_code` with `location` in
 * Location and the text "redirecting"; with `keep_incoming_path`, the location's path and query are the
 * request's.
 */
import type { AccessContext, PluginRuntime } from '../../src/pdk/index.ts';
import type { RedirectConfig } from './schema.ts';

export function createRuntime(): PluginRuntime<RedirectConfig> {
  return {
    access(ctx, config) {
      const location = config.keep_incoming_path ? withIncomingPath(config.location, ctx) : config.location;
      ctx.respond(config.status_code, 'redirecting', { location });
    },
  };
}

/** The location with the request's path and query in place of its own (an empty query removes its `?`). */
function withIncomingPath(location: string, ctx: AccessContext): string {
  const url = new URL(location);
  url.pathname = ctx.path;
  url.search = ctx.rawQuery;
  return url.href;
}

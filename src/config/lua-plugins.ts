/**
 * Kong's serverless plugins, `pre-function` and `post-function`, run Lua code from the configuration
 * (kong/plugins/pre-function, post-function). Tollgate runs no Lua: a file naming them is refused with
 * one line that says so and what to use instead, not with the generic "not enabled".
 */
const LUA_PLUGINS = new Set(['pre-function', 'post-function']);

/** The refusal for a plugin that runs Lua, or undefined for any other name. */
export function luaPluginRefusal(name: string): string | undefined {
  if (!LUA_PLUGINS.has(name)) return undefined;
  return (
    `plugin '${name}' runs Lua code, which Tollgate does not execute; use request-transformer or ` +
    'response-transformer, or write the logic as a TypeScript plugin (docs/plugin-development.md)'
  );
}

/**
 * Kong's `typedefs.lua_code` (a map of names to Lua expressions, e.g. the logging plugins'
 * `custom_fields_by_lua`). Tollgate runs no Lua: a file that leaves the map empty or null loads, one
 * with code in it is refused with a line that says so, rather than logging without the fields.
 */
import type { MapSchema } from './schema.ts';

export const LUA_FIELD = {
  type: 'map',
  keys: { type: 'string', len_min: 1 },
  values: { type: 'string', len_min: 1 },
  custom: (code: Record<string, unknown>) =>
    Object.keys(code).length === 0 ? undefined : 'Tollgate does not run Lua: remove these fields (values a plugin sets with setLogValue are logged as they are)',
} as const satisfies MapSchema;

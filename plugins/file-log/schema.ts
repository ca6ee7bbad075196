/** Kong's file-log config (kong/plugins/file-log/schema.lua): the path with Kong's pattern and message, `reopen`, and Lua refused. */
import { LUA_FIELD, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    // Kong's pattern: no `*`, `&`, `%`, `\` or backtick anywhere, no white space at either end.
    path: { type: 'string', required: true, match: /^[^\s*&%\\`][^*&%\\`]*[^\s*&%\\`]$/, match_message: 'not a valid filename' },
    /** Close and open the file again before each write (the file was rotated meanwhile). */
    reopen: { type: 'boolean', required: true, default: false },
    custom_fields_by_lua: LUA_FIELD,
  },
} as const satisfies RecordSchema;

export type FileLogConfig = Infer<typeof configSchema>;

/**
 * Kong's syslog config (kong/plugins/syslog/schema.lua): the level below which nothing is sent, a severity per
 * class of response, the facility, and Lua refused. `socket_path` is Tollgate's own: where the syslog daemon
 * listens (Kong always writes to the system's, /dev/log).
 */
import { LUA_FIELD, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

/** syslog(3)'s severity numbers (<syslog.h>: 0 is the most severe), in the order of Kong's `one_of`. */
export const SEVERITIES = { debug: 7, info: 6, notice: 5, warning: 4, err: 3, crit: 2, alert: 1, emerg: 0 } as const;

/** syslog(3)'s facility numbers (<syslog.h>; a line's PRI is facility * 8 + severity), in Kong's order. */
export const FACILITIES = {
  auth: 4, authpriv: 10, cron: 9, daemon: 3, ftp: 11, kern: 0, lpr: 6, mail: 2, news: 7, syslog: 5, user: 1, uucp: 8,
  local0: 16, local1: 17, local2: 18, local3: 19, local4: 20, local5: 21, local6: 22, local7: 23,
} as const;

const namesOf = <T extends object>(numbers: T) => Object.keys(numbers) as (keyof T & string)[];

const severity = { type: 'string', required: true, default: 'info', one_of: namesOf(SEVERITIES) } as const;

/** The longest path a Unix socket address holds (sun_path is 108 bytes with its terminating NUL). */
const MAX_SOCKET_PATH = 107;

export const configSchema = {
  type: 'record',
  fields: {
    log_level: severity,
    successful_severity: severity,
    client_errors_severity: severity,
    server_errors_severity: severity,
    custom_fields_by_lua: LUA_FIELD,
    facility: { type: 'string', required: true, default: 'user', one_of: namesOf(FACILITIES) },
    /** The syslog daemon's Unix datagram socket; a relative path is the configuration file's directory's. */
    socket_path: { type: 'string', required: true, default: '/dev/log', len_min: 1, len_max: MAX_SOCKET_PATH },
  },
} as const satisfies RecordSchema;

export type SyslogConfig = Infer<typeof configSchema>;

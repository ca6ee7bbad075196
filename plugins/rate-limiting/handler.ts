/**
 * Kong's rate-limiting handler.lua: who the request counts for (`limit_by`, with Kong's fallbacks), the
 * usage of each configured period, Kong's headers (X-RateLimit-Limit/Remaining-<Period>, RateLimit-Limit/
 * Remaining/Reset, Retry-After when refused) on whatever answer the request gets, and the refusal
 * (`error_code`, `{"message": error_message}`). Refused requests are not counted, as in Kong.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { AccessContext, PluginApi, PluginEntity, PluginRuntime } from '../../src/pdk/index.ts';
import { countersByPolicy, type WindowLimits } from './counters.ts';
import { PERIOD_SECONDS, PERIODS, windowStart, type Period } from './periods.ts';
import type { RateLimitingConfig } from './schema.ts';

/** Kong's EMPTY_UUID: the scope part of a plugin without a route or a service. */
const EMPTY_UUID = '00000000-0000-0000-0000-000000000000';
/** Longer identifiers (a header value) are keyed by their digest, so a key stays small whatever is sent. */
const MAX_PLAIN_IDENTIFIER = 128;

const HEADER = {
  limit: Object.fromEntries(PERIODS.map((p) => [p, `x-ratelimit-limit-${p}`])) as Record<Period, string>,
  remaining: Object.fromEntries(PERIODS.map((p) => [p, `x-ratelimit-remaining-${p}`])) as Record<Period, string>,
};

/** The limits of one instance, computed once per configuration. */
export interface Limits extends WindowLimits {
  periods: Period[];
  values: number[];
  /** The values as header text. */
  texts: string[];
}

export function prepareLimits(config: RateLimitingConfig): Limits {
  const periods = PERIODS.filter((p) => typeof config[p] === 'number');
  const values = periods.map((p) => config[p] as number);
  return { periods, values, id: `${periods.join(',')}#${values.join(',')}`, texts: values.map(String) };
}

export function createRuntime(api: PluginApi): PluginRuntime<RateLimitingConfig, Limits> {
  const policies = countersByPolicy(api, 'rate-limiting|');
  return {
    access(ctx, config, plugin) {
      const counters = policies[config.policy === 'cluster' ? 'cluster' : 'local'];
      const limits = plugin.prepared;
      const key = counterKey(plugin, identifierOf(ctx, config));
      const now = Date.now();
      const usage = counters.consume(key, limits, now);
      if (!(usage instanceof Promise)) return decide(ctx, config, limits, usage, now);
      return usage.then(
        (counted) => decide(ctx, config, limits, counted, now),
        (err) => unavailable(ctx, config, api.log, err),
      );
    },
  };
}

/** What identifies a caller: `limit_by` and, for `header` and `path`, the header or path. */
export type LimitBy = Pick<RateLimitingConfig, 'limit_by'> & Partial<Pick<RateLimitingConfig, 'header_name' | 'path'>>;

/** Kong's get_identifier: the configured entity, falling back to the consumer's credential, then the client address. */
export function identifierOf(ctx: AccessContext, config: LimitBy): string {
  let identifier: string | undefined;
  switch (config.limit_by) {
    case 'service':
      identifier = ctx.service?.id;
      break;
    case 'consumer':
      identifier = ctx.consumer?.id ?? ctx.credential?.id;
      break;
    case 'credential':
      identifier = ctx.credential?.id;
      break;
    case 'header': {
      const value = ctx.headers[config.header_name!.toLowerCase()];
      identifier = Array.isArray(value) ? value[0] : value;
      break;
    }
    case 'path':
      if (ctx.path === config.path) identifier = ctx.path;
      break;
  }
  return identifier || ctx.clientIp;
}

/** Counters of one plugin instance are its own (Kong keys them by the plugin's route and service). */
export function counterKey(plugin: PluginEntity, identifier: string): string {
  const encoded = encodeURIComponent(identifier);
  const id = encoded.length <= MAX_PLAIN_IDENTIFIER ? encoded : '#' + createHash('sha256').update(identifier).digest('base64url');
  return `${plugin.route?.id ?? EMPTY_UUID}|${plugin.service?.id ?? EMPTY_UUID}|${id}`;
}

/** Headers, and the refusal when a window was full (the counters have not counted this request then). */
function decide(ctx: AccessContext, config: RateLimitingConfig, limits: Limits, usage: number[], now: number): void {
  const { periods, values } = limits;
  let stop = -1;
  for (let i = 0; i < periods.length; i++) if (values[i] - usage[i] <= 0) stop = i;
  const reset = config.hide_client_headers ? 0 : setHeaders(ctx, limits, usage, stop, now);
  if (stop !== -1) {
    if (!config.hide_client_headers) ctx.setResponseHeader('retry-after', String(reset));
    return ctx.error(config.error_code, config.error_message);
  }
}

/**
 * Kong's headers: each period's limit and remaining (this request counted, unless another period refused
 * it), and RateLimit-* for the period with the fewest remaining (on a tie, the longer one). Returns the
 * seconds until that period's window resets (Kong counts them from its fixed period lengths).
 */
function setHeaders(ctx: AccessContext, { periods, values, texts }: Limits, usage: number[], stop: number, now: number): number {
  let limit = 0;
  let remaining = Infinity;
  let window = 0;
  let reset = 1;
  for (let i = 0; i < periods.length; i++) {
    const period = periods[i];
    let left = values[i] - usage[i];
    if (stop === -1 || stop === i) left -= 1;
    left = Math.max(0, left);
    const seconds = PERIOD_SECONDS[period];
    if (left < remaining || (left === remaining && seconds > window)) {
      limit = values[i];
      remaining = left;
      window = seconds;
      reset = Math.max(1, seconds - Math.floor((now - windowStart(period, now)) / 1000));
    }
    ctx.setResponseHeader(HEADER.limit[period], texts[i]);
    ctx.setResponseHeader(HEADER.remaining[period], String(left));
  }
  ctx.setResponseHeader('ratelimit-limit', String(limit));
  ctx.setResponseHeader('ratelimit-remaining', String(remaining));
  ctx.setResponseHeader('ratelimit-reset', String(reset));
  return reset;
}

/** The counters could not be read: with `fault_tolerant` the request goes on uncounted, else Kong's 500. */
function unavailable(ctx: AccessContext, config: RateLimitingConfig, log: Logger, err: unknown): void {
  log.error({ err, request_id: ctx.id }, 'rate-limiting: failed to get usage');
  if (!config.fault_tolerant) throw err;
}

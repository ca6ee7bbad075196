/**
 * Kong's response-ratelimiting (access.lua, header_filter.lua, log.lua): the upstream tells how much of
 * each named usage a request used (`X-Kong-Limit: video=1, image=2`). The access phase reads each usage's
 * counts, refuses with `block_on_first_violation` once one is used up, and tells the upstream what is
 * left (`X-RateLimit-Remaining-<name>`); the response phase reads the upstream's header, strips it, adds
 * `X-RateLimit-Limit-<name>-<period>` and `X-RateLimit-Remaining-<name>-<period>`, and answers 429 when a
 * usage the response used was used up already; the log phase counts what the response used.
 */
import { HttpError, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { counterKey, countersByPolicy, identifierOf, PERIODS, type Counters, type Period } from '../rate-limiting/public.ts';
import type { ResponseRateLimitingConfig } from './schema.ts';

/** One named usage's limits, computed once per configuration. */
export interface UsageLimits {
  name: string;
  periods: Period[];
  values: number[];
}

export function prepareLimits(config: ResponseRateLimitingConfig): UsageLimits[] {
  return Object.entries(config.limits).map(([name, limits]) => {
    const periods = PERIODS.filter((p) => typeof limits[p] === 'number');
    return { name, periods, values: periods.map((p) => limits[p] as number) };
  });
}

/** What access learnt, for the response and log phases: each usage's remaining counts, per period. */
interface Usage {
  key: string;
  remaining: Map<string, number[]>;
  /** What the upstream said the request used, by usage name. */
  increments?: Map<string, number>;
  /** The request was refused after the upstream answered: nothing is counted. */
  refused?: boolean;
}

const USAGE = 'responseRateLimiting';
/** An X-Kong-Limit increment larger than this is taken as this (the counters stay safe integers). */
const MAX_INCREMENT = 1_000_000_000;

export function createRuntime(api: PluginApi): PluginRuntime<ResponseRateLimitingConfig, UsageLimits[]> {
  const policies = countersByPolicy(api, 'response-ratelimiting|');
  const countersOf = (config: ResponseRateLimitingConfig): Counters => policies[config.policy === 'cluster' ? 'cluster' : 'local'];
  return {
    async access(ctx, config, plugin) {
      const key = counterKey(plugin, identifierOf(ctx, config));
      let counts: number[][];
      try {
        counts = await Promise.all(plugin.prepared.map((usage) => countersOf(config).add(usageKey(key, usage.name), usage.periods, 0, Date.now())));
      } catch (err) {
        // fault_tolerant: the request goes on, neither limited nor counted.
        api.log.error({ err, request_id: ctx.id }, 'response-ratelimiting: failed to get usage');
        if (!config.fault_tolerant) throw err;
        return;
      }
      const remaining = new Map(plugin.prepared.map((usage, i) => [usage.name, usage.values.map((value, p) => value - counts[i][p])]));
      for (const [name, left] of remaining) {
        if (config.block_on_first_violation && left.some((n) => n <= 0)) return ctx.error(429, `API rate limit exceeded for '${name}'`);
        ctx.setUpstreamHeader(`x-ratelimit-remaining-${name}`, String(Math.min(...left)));
      }
      ctx.shared[USAGE] = { key, remaining } satisfies Usage;
    },

    response(ctx, config, head, plugin) {
      const reported = head.headers[config.header_name.toLowerCase()];
      // Never shown downstream, whatever else happens (Kong leaves it when usage could not be read).
      delete head.headers[config.header_name.toLowerCase()];
      const usage = ctx.shared[USAGE] as Usage | undefined;
      if (!usage) return;
      const increments = parseIncrements(reported, plugin.prepared);
      usage.increments = increments;
      const headers: Record<string, string> = {};
      let usedUp = false;
      for (const { name, periods, values } of plugin.prepared) {
        const used = increments.get(name) ?? 0;
        usage.remaining.get(name)!.forEach((left, i) => {
          headers[`x-ratelimit-limit-${name}-${periods[i]}`] = String(values[i]);
          headers[`x-ratelimit-remaining-${name}-${periods[i]}`] = String(Math.max(0, left - used));
          if (used > 0 && left <= 0) usedUp = true;
        });
      }
      if (!config.hide_client_headers) Object.assign(head.headers, headers);
      if (!usedUp) return;
      usage.refused = true;
      // Kong's header_filter answers `kong.response.exit(429)`: no body.
      throw new HttpError(429, 'API rate limit exceeded', config.hide_client_headers ? undefined : headers, true);
    },

    log(ctx, config, plugin) {
      const usage = ctx.shared[USAGE] as Usage | undefined;
      if (!usage?.increments || usage.refused) return;
      for (const { name, periods } of plugin.prepared) {
        const used = usage.increments.get(name);
        if (!used) continue;
        Promise.resolve()
          .then(() => countersOf(config).add(usageKey(usage.key, name), periods, used, Date.now()))
          .catch((err: unknown) => api.log.error({ err, request_id: ctx.id }, 'response-ratelimiting: could not increment a counter'));
      }
    },
  };
}

/** Each usage name counts apart, within the instance's key for the caller. */
function usageKey(key: string, name: string): string {
  return `${key}|${encodeURIComponent(name)}`;
}

/**
 * Kong's parse_header: `name=amount` items separated by commas (or repeated headers), for configured
 * names only, the last one of a name winning. An amount that is not a whole number of at least 0 is
 * ignored (Kong's would count a negative one back).
 */
export function parseIncrements(header: string | number | string[] | undefined, limits: readonly UsageLimits[]): Map<string, number> {
  const increments = new Map<string, number>();
  if (header === undefined) return increments;
  const names = new Set(limits.map((usage) => usage.name));
  const items = Array.isArray(header) ? header.flatMap((value) => value.split(',')) : String(header).split(',');
  // As many items as the upstream's headers hold: Node bounds a response's headers (16 KiB).
  for (const item of items) {
    const parts = item.split('=');
    if (parts.length !== 2) continue;
    const [name, amount] = parts.map((part) => part.trim());
    if (names.has(name) && /^\d+$/.test(amount)) increments.set(name, Math.min(Number(amount), MAX_INCREMENT));
  }
  return increments;
}

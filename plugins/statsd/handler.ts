/**
 * Kong's statsd handler: after each response whose status is allowed, the request's metrics go to the
 * StatsD server. The response's size counts its head as nginx's `$bytes_sent` does, so the response
 * phase notes the head's length for the log phase.
 */
import { hostname } from 'node:os';
import { requestHeadLength, responseHeadLength, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { requestLines } from './metrics.ts';
import type { StatsdConfig } from './schema.ts';
import { StatsdSender } from './sender.ts';

const RESPONSE_HEAD = 'statsd.response-head';

/** Kong's allow_status_codes ranges (`200-299`): a status within one of them, or any without a list. */
function allowed(ranges: string[] | null | undefined, status: number): boolean {
  if (!ranges) return true;
  return ranges.some((range) => {
    const [from, to] = range.split('-').map(Number);
    return status >= from && status <= to;
  });
}

export function createRuntime(api: PluginApi): PluginRuntime<StatsdConfig> {
  const sender = new StatsdSender(api.log);
  const host = hostname().replace(/\./g, '_');
  return {
    response(ctx, _config, head) {
      ctx.shared[RESPONSE_HEAD] = responseHeadLength(head);
    },
    log(ctx, config) {
      const { outcome } = ctx;
      if (!allowed(config.allow_status_codes, outcome.status)) return;
      const lines = requestLines(config, {
        status: outcome.status,
        requestSize: requestHeadLength(ctx) + outcome.requestBytes,
        responseSize: ((ctx.shared[RESPONSE_HEAD] as number | undefined) ?? 0) + outcome.responseBytes,
        latency: outcome.latencies.request,
        kongLatency: outcome.latencies.kong,
        upstreamLatency: outcome.latencies.upstream,
        service: ctx.service,
        route: ctx.route,
        consumer: ctx.consumer,
        hostname: host,
      });
      sender.send(config, lines);
    },
    async close() {
      sender.close();
    },
  };
}

/** Helpers of the balancer's end-to-end tests: a route `/` to a service on a fresh upstream, targets, sequential requests. */
import { request } from '../../helpers/gateway.ts';
import { startTargetServer, type TargetServer, type TargetServerOptions } from '../../fixtures/target-server.ts';

/** Kong's tests go round a balancer of 10 slots twice. */
export const SLOTS = 10;

/** A target address, or an address and its weight. */
export type TargetSpec = string | [string, number];

let sequence = 0;

/** A name no other upstream of this test process has (health is kept across reloads by name). */
export function newUpstreamName(): string {
  return `upstream-${++sequence}.test`;
}

/** A configuration with one route `/` to service `svc`, whose host is a new upstream; and that upstream's name. */
export function balancedConfig(
  upstream: Record<string, unknown>,
  targets: TargetSpec[],
  service: Record<string, unknown> = {},
): { name: string; config: Record<string, unknown> } {
  const name = newUpstreamName();
  return {
    name,
    config: {
      services: [{ name: 'svc', host: name, ...service, routes: [{ name: 'r', paths: ['/'] }] }],
      upstreams: [
        {
          name,
          ...upstream,
          targets: targets.map((t) => (typeof t === 'string' ? { target: t } : { target: t[0], weight: t[1] })),
        },
      ],
    },
  };
}

/** `n` requests one after the other; how many got 200, how many not, and the last status. */
export async function clientRequests(base: string, n: number, headers: Record<string, string> = {}, path = '/'): Promise<{ oks: number; fails: number; last: number }> {
  let oks = 0;
  let fails = 0;
  let last = 0;
  for (let i = 0; i < n; i++) {
    last = (await request(base + path, { headers })).status;
    if (last === 200) oks++;
    else fails++;
  }
  return { oks, fails, last };
}

export function startTargets(n: number, options: TargetServerOptions = {}): Promise<TargetServer[]> {
  return Promise.all(Array.from({ length: n }, () => startTargetServer(options)));
}

export async function stopAll(servers: TargetServer[]): Promise<void> {
  await Promise.all(servers.map((s) => s.stop()));
}

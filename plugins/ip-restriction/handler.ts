/**
 * Refuses clients by address (Kong's ip-restriction handler.lua): a client in `deny` is refused, then,
 * when `allow` is set, one outside it. The address is the client's as the gateway sees it: the peer, or
 * X-Real-IP from a trusted peer (Kong's realip rule).
 */
import { isIP } from 'node:net';
import { AddressRanges, type PluginRuntime } from '../../src/pdk/index.ts';
import type { IpRestrictionConfig } from './schema.ts';

/** An instance's lists, built once per configuration. */
export interface Lists {
  allow: AddressRanges | null;
  deny: AddressRanges | null;
}

export function prepareLists(config: IpRestrictionConfig): Lists {
  return { allow: ranges(config.allow), deny: ranges(config.deny) };
}

export function createRuntime(): PluginRuntime<IpRestrictionConfig, Lists> {
  return {
    access(ctx, config, plugin) {
      const family = isIP(ctx.clientIp);
      if (family === 0) return ctx.error(403, 'Cannot identify the client IP address, unix domain sockets are not supported.');
      const { allow, deny } = plugin.prepared;
      if (deny?.has(ctx.clientIp) || (allow && !allow.has(ctx.clientIp))) {
        ctx.error(config.status ?? 403, config.message ?? `IP address not allowed: ${ctx.clientIp}`);
      }
    },
  };
}

function ranges(entries: string[] | null | undefined): AddressRanges | null {
  return entries && entries.length > 0 ? new AddressRanges(entries) : null;
}

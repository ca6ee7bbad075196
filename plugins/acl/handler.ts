/**
 * Kong's acl handler (kong/plugins/acl/handler.lua, groups.lua): after the authentication plugins, the
 * caller's groups (its consumer's `acls`, or the groups an authentication plugin put in
 * `ctx.shared.authenticated_groups`) are checked against `allow` or `deny`; the groups go upstream in
 * X-Consumer-Groups (or X-Authenticated-Groups) unless `hide_groups_header`. Works with any
 * authentication plugin and with the `anonymous` consumer, which has groups like any consumer.
 */
import type { AccessContext, PluginApi, PluginRuntime } from '../../src/pdk/index.ts';
import { aclEntity, type Acl, type AclConfig } from './schema.ts';

const FORBIDDEN = 'You cannot consume this service';
const CONSUMER_GROUPS = 'x-consumer-groups';
const AUTHENTICATED_GROUPS = 'x-authenticated-groups';

/** A config read once per configuration: which list it checks and how. */
export interface Rule {
  deny: boolean;
  groups: ReadonlySet<string>;
}

export function prepareRule(config: AclConfig): Rule {
  const deny = (config.deny ?? []).length > 0;
  return { deny, groups: new Set(deny ? config.deny : config.allow) };
}

export function createRuntime(api: PluginApi): PluginRuntime<AclConfig, Rule> {
  const acls = api.entities<Acl>(aclEntity.name);

  return {
    access(ctx, config, plugin) {
      const rule = plugin.prepared;
      const authenticated = authenticatedGroups(ctx);
      const consumer = ctx.consumer;
      // Groups an authentication plugin vouched for count when there is no consumer, or only the
      // anonymous one, or when the config says they always do.
      if (authenticated && (!consumer || !ctx.credential || config.always_use_authenticated_groups)) {
        return decide(ctx, config, rule, authenticated, AUTHENTICATED_GROUPS);
      }
      if (!consumer) return ctx.credential ? ctx.error(403, FORBIDDEN) : ctx.error(401, 'Unauthorized');
      const groups = acls.childrenOf(consumer.id).map((acl) => acl.group);
      // A consumer without groups is in no allow list, and in no deny list either.
      if (groups.length === 0 && !rule.deny) return ctx.credential ? ctx.error(403, FORBIDDEN) : ctx.error(401, 'Unauthorized');
      decide(ctx, config, rule, groups, CONSUMER_GROUPS);
    },
  };
}

function decide(ctx: AccessContext, config: AclConfig, rule: Rule, groups: string[], header: string): void {
  const inGroup = groups.some((group) => rule.groups.has(group));
  if (rule.deny ? inGroup : !inGroup) return ctx.error(403, FORBIDDEN);
  if (!config.hide_groups_header && groups.length > 0) ctx.setUpstreamHeader(header, groups.join(', '));
}

/** `ctx.shared.authenticated_groups` when an authentication plugin set it to a list of names. */
function authenticatedGroups(ctx: AccessContext): string[] | undefined {
  const groups = ctx.shared.authenticated_groups;
  return Array.isArray(groups) ? groups.filter((group): group is string => typeof group === 'string') : undefined;
}

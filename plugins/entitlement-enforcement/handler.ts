/**
 * Decides each request from billing's entitlement decisions (the plugin service `billing.entitlements`):
 * 403 for an unknown customer or one without the feature, 429 with Retry-After once a metered hard
 * limit is used up, X-Usage-Limit and X-Usage-Remaining (this request counted) on every answer of a
 * metered feature. An admitted request reserves its usage on the limit's counter; once every plugin has
 * logged the request, the reservation is settled with what its metered events add (nothing for a request
 * refused later or not answered, whose place goes back as soon as the gateway answers it itself), so the
 * limit counts exactly what it let through.
 */
import { holdReservation, reservationOf, type AccessDecision, type Admission, type EntitlementEnforcer } from '../metering/public.ts';
import type { AccessContext, PluginApi, PluginRuntime } from '../../src/pdk/index.ts';
import type { EnforcementConfig } from './schema.ts';

/** Where the access phase leaves the decision for the response phase (its usage headers). */
const DECISION = 'entitlement-enforcement:decision';
const UNDECIDED: Admission = { decision: { kind: 'undecided' } };

function identifiers(ctx: AccessContext, config: EnforcementConfig): (string | null | undefined)[] {
  const { look_up_value_in: source, field } = config.customer;
  if (source === 'header') {
    const value = ctx.headers[field!.toLowerCase()];
    return [Array.isArray(value) ? value[0] : value];
  }
  const consumer = ctx.consumer;
  if (!consumer) return [];
  if (field) return [consumer[field as 'username' | 'id' | 'custom_id']];
  return [consumer.username, consumer.id, consumer.custom_id];
}

function usageHeaders(d: AccessDecision): Record<string, string> | undefined {
  if (d.kind === 'limit_reached' || (d.kind === 'allowed' && d.limit !== undefined)) return { 'x-usage-limit': d.limit!, 'x-usage-remaining': d.remaining! };
  return undefined;
}

/** Milliseconds since the Unix epoch at which the request arrived (the time its events carry). */
function arrivedAt(ctx: AccessContext): number {
  return performance.timeOrigin + ctx.startedAt;
}

export function createRuntime(api: PluginApi): PluginRuntime<EnforcementConfig> {
  let enforcer: EntitlementEnforcer | undefined;

  function enforce(ctx: AccessContext, config: EnforcementConfig, { decision, reservation }: Admission): void {
    if (reservation) {
      holdReservation(ctx, reservation);
      ctx.afterLog(() => reservation.settle());
    }
    switch (decision.kind) {
      case 'allowed':
        if (decision.limit !== undefined) ctx.shared[DECISION] = decision;
        return;
      case 'limit_reached': {
        const retryAfter = String(Math.max(1, Math.ceil((decision.resetAt - Date.now()) / 1000)));
        return ctx.error(429, `usage_limit_reached: the usage limit of feature ${config.feature.key} is reached`, { 'retry-after': retryAfter, ...usageHeaders(decision) });
      }
      case 'no_feature':
        return ctx.error(403, `feature_unavailable: the customer has no access to feature ${config.feature.key}`);
      case 'unknown_customer':
        if (config.deny_unknown_customers) ctx.error(403, 'customer_not_found: the request names no known customer');
        return;
      case 'undecided':
        if (config.fail_policy === 'deny') ctx.error(503, 'entitlements cannot be checked right now; retry', { 'retry-after': '1' });
    }
  }

  return {
    configure() {
      enforcer = api.services.get<EntitlementEnforcer>('billing.entitlements');
    },
    access(ctx, config) {
      const admission = enforcer ? enforcer.admit(identifiers(ctx, config), config.feature.key, arrivedAt(ctx)) : UNDECIDED;
      if (!(admission instanceof Promise)) return enforce(ctx, config, admission);
      return admission.then((decided) => enforce(ctx, config, decided));
    },
    response(ctx, _config, response) {
      // An answer of the gateway's own: no upstream work to pay for (settled once logged, should it be metered).
      if (response.source !== 'service') reservationOf(ctx)?.unanswered();
      const decision = ctx.shared[DECISION] as AccessDecision | undefined;
      if (decision) Object.assign(response.headers, usageHeaders(decision));
    },
  };
}

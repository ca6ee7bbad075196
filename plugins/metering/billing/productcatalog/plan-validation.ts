/**
 * The plan rules that need features, with OpenMeter's codes (productcatalog/errors.go): critical ones
 * reject a create or update (400), warnings are saved on the draft as `validation_errors` and block
 * publishing (400 with the same codes).
 */
import { parseCadence } from '../shared/calendar.ts';
import type { Feature } from './features.ts';
import type { Problems } from '../shared/fields.ts';
import { critical, USAGE_PRICES, type PlanDefinition, type RateCard } from './plan-model.ts';

export interface PlanIssue {
  code: string;
  message: string;
  field: string;
  severity: 'critical' | 'warning';
}

export interface PlanCheck {
  /** The definition with every rate card's feature resolved to its id and key. */
  definition: PlanDefinition;
  critical: Problems;
  warnings: PlanIssue[];
}

type FeatureLookup = (ref: { id: string | null; key: string | null }) => Promise<Feature | undefined>;

const warning = (field: string, code: string, message: string): PlanIssue => ({ code, message, field, severity: 'warning' });

export async function checkPlan(def: PlanDefinition, lookup: FeatureLookup): Promise<PlanCheck> {
  const criticalProblems: Problems = [];
  const warnings: PlanIssue[] = [];
  const phaseKeys = new Set<string>();
  const phases = [];
  if (def.phases.length > 1) warnings.push(warning('phases', 'plan_has_more_than_one_phase', 'plans with more than one phase cannot be published yet: use one phase'));
  for (const [i, phase] of def.phases.entries()) {
    const at = `phases[${i}]`;
    if (phaseKeys.has(phase.key)) criticalProblems.push(critical(`${at}.key`, 'plan_phase_duplicated_key', `duplicated phase key: ${phase.key}`));
    phaseKeys.add(phase.key);
    const last = i === def.phases.length - 1;
    if (phase.rate_cards.length === 0) warnings.push(warning(`${at}.rate_cards`, 'plan_phase_has_no_rate_cards', `phase ${phase.key} has no rate cards`));
    if (!last && phase.duration === null) warnings.push(warning(`${at}.duration`, 'plan_has_non_last_phase_with_no_duration', `phase ${phase.key} is not the last one and has no duration`));
    if (last && phase.duration !== null) warnings.push(warning(`${at}.duration`, 'plan_has_last_phase_with_duration', `the last phase ${phase.key} must have no duration`));
    const cardKeys = new Set<string>();
    const rateCards = [];
    for (const [j, card] of phase.rate_cards.entries()) {
      const cardAt = `${at}.rate_cards[${j}]`;
      if (cardKeys.has(card.key)) criticalProblems.push(critical(`${cardAt}.key`, 'rate_card_duplicated_key', `duplicated rate card key: ${card.key}`));
      cardKeys.add(card.key);
      rateCards.push(await checkRateCard(card, cardAt, def, lookup, criticalProblems, warnings));
    }
    phases.push({ ...phase, rate_cards: rateCards });
  }
  return { definition: { ...def, phases }, critical: criticalProblems, warnings };
}

async function checkRateCard(card: RateCard, at: string, plan: PlanDefinition, lookup: FeatureLookup, out: Problems, warnings: PlanIssue[]): Promise<RateCard> {
  let feature: Feature | undefined;
  if (card.feature) {
    feature = await lookup(card.feature);
    const label = card.feature.key ?? card.feature.id;
    if (!feature) out.push(critical(`${at}.feature`, 'rate_card_feature_not_found', `feature not found: ${label}`));
    else if (feature.archived_at) out.push(critical(`${at}.feature`, 'rate_card_feature_archived', `feature ${feature.key} is archived`));
    else if (feature.key !== card.key) out.push(critical(`${at}.key`, 'rate_card_key_feature_key_mismatch', `rate card key ${card.key} must equal its feature key ${feature.key}`));
  }
  const metered = feature?.meter != null;
  if (USAGE_PRICES.includes(card.price.type) && !metered) {
    warnings.push(warning(`${at}.price`, 'usage_based_price_with_no_feature', `rate card ${card.key} has a usage-based price and no metered feature`));
  }
  if (card.billing_cadence !== null && !sameCadence(card.billing_cadence, plan.billing_cadence)) {
    warnings.push(warning(`${at}.billing_cadence`, 'rate_card_billing_cadence_unaligned', `rate card cadence ${card.billing_cadence} differs from the plan's ${plan.billing_cadence}`));
  }
  const e = card.entitlement;
  if (e && !card.feature) out.push(critical(`${at}.entitlement`, 'entitlement_template_requires_feature', 'an entitlement needs a feature on its rate card'));
  else if (e?.type === 'metered') {
    if (feature && !metered) out.push(critical(`${at}.entitlement`, 'entitlement_template_requires_metered_feature', `feature ${feature.key} has no meter: a metered entitlement needs one`));
    if (e.limit === null) warnings.push(warning(`${at}.entitlement.limit`, 'entitlement_template_issue_after_reset_required', 'a metered entitlement needs a limit'));
  }
  return { ...card, feature: feature ? { id: feature.id, key: feature.key } : card.feature };
}

function sameCadence(a: string, b: string): boolean {
  const x = parseCadence(a)!;
  const y = parseCadence(b)!;
  return x.years === y.years && x.months === y.months && x.approximateMs === y.approximateMs;
}

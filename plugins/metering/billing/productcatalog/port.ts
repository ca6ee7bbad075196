/** The product catalogue's port (features and plans), for billing's other domains, its composition and HTTP. */
export { FeatureService, publicFeature, validateFeature } from './features.ts';
export type { Feature, FeatureDefinition, FeatureMeter } from './features.ts';
export { PlanService, planStatus, publicPlan } from './plans.ts';
export type { Plan, PlanRef } from './plans.ts';
export { parsePlan } from './plan-model.ts';
export type { PlanDefinition, Price, RateCard, Tier } from './plan-model.ts';

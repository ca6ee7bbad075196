/**
 * Plan versions. Creating a plan with a key makes version n+1 as a draft (one draft per key); publishing
 * makes it active from now and archives the key's previous active version in the same commit; only an
 * active version can be subscribed, and subscriptions keep the version they bought. The key's head
 * record (draft, active, last version number) is the compare-and-set point of all of this.
 */
import { ulid } from '../../shared/ids.ts';
import { formatInstant } from '../shared/calendar.ts';
import type { Origin } from '../customer/port.ts';
import { conflict, invalid, notFound, readOnly, ruleBroken, validationFailed } from '../shared/errors.ts';
import type { Feature, FeatureService } from './features.ts';
import type { PlanDefinition } from './plan-model.ts';
import { checkPlan, type PlanIssue } from './plan-validation.ts';
import { keys, PREFIXES, type BillingStore, type Transaction } from '../shared/store.ts';

export type PlanStatus = 'draft' | 'scheduled' | 'active' | 'archived';

export interface Plan extends PlanDefinition {
  id: string;
  version: number;
  effective_from: string | null;
  effective_to: string | null;
  validation_errors: PlanIssue[];
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  origin: Origin;
}

interface PlanHead {
  last_version: number;
  draft: string | null;
  active: string | null;
}

const EMPTY_HEAD: PlanHead = { last_version: 0, draft: null, active: null };
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** Status is computed from the effective interval, never stored (OpenMeter's productcatalog/plan.go). */
export function planStatus(p: Pick<Plan, 'effective_from' | 'effective_to'>, now = Date.now()): PlanStatus {
  if (p.effective_from === null) return 'draft';
  if (Date.parse(p.effective_from) > now) return 'scheduled';
  if (p.effective_to !== null && Date.parse(p.effective_to) <= now) return 'archived';
  return 'active';
}

export function publicPlan(p: Plan): Record<string, unknown> {
  const { origin: _origin, deleted_at, ...rest } = p;
  return { ...rest, status: planStatus(p), ...(deleted_at ? { deleted_at } : {}) };
}

/** A reference to a plan as a subscription request gives it. */
export interface PlanRef {
  id?: string;
  key?: string;
  version?: number;
}

export class PlanService {
  constructor(
    private readonly db: BillingStore,
    private readonly features: FeatureService,
  ) {}

  private lookup = (ref: { id: string | null; key: string | null }): Promise<Feature | undefined> => this.features.find((ref.id ?? ref.key)!);

  /** Checks a definition against the features; critical problems throw (400), warnings are returned. */
  private async validate(def: PlanDefinition): Promise<{ definition: PlanDefinition; warnings: PlanIssue[] }> {
    const check = await checkPlan(def, this.lookup);
    if (check.critical.length > 0) throw validationFailed(check.critical);
    return check;
  }

  async find(id: string, tx?: Transaction): Promise<Plan | undefined> {
    if (!ULID.test(id)) return undefined;
    return tx ? tx.get<Plan>(keys.plan(id)) : this.db.get<Plan>(keys.plan(id));
  }

  async get(id: string, tx?: Transaction): Promise<Plan> {
    const plan = await this.find(id, tx);
    if (!plan || plan.deleted_at) throw notFound('plan', id);
    return plan;
  }

  list(): Promise<Plan[]> {
    return this.db.list<Plan>(PREFIXES.plans);
  }

  /** The head of every plan key: which versions are active (for the feature-in-use check). */
  async activeVersions(tx: Transaction): Promise<Plan[]> {
    const plans: Plan[] = [];
    for (const key of await this.db.keysUnder('plan-key/')) {
      const head = await tx.get<PlanHead>(keys.planKey(key));
      if (head?.active) {
        const plan = await this.db.get<Plan>(keys.plan(head.active));
        if (plan && planStatus(plan) === 'active') plans.push(plan);
      }
    }
    return plans;
  }

  async create(def: PlanDefinition, origin: Origin = 'api', id = ulid()): Promise<Plan> {
    const { definition, warnings } = await this.validate(def);
    return this.db.transact(async (tx) => {
      const head = (await tx.get<PlanHead>(keys.planKey(def.key))) ?? EMPTY_HEAD;
      if (head.draft) throw conflict(`plan ${def.key} already has a draft version (${head.draft}); update or publish it`);
      const now = formatInstant(Date.now());
      const plan: Plan = {
        id, ...definition, version: head.last_version + 1, effective_from: null, effective_to: null,
        validation_errors: warnings, created_at: now, updated_at: now, deleted_at: null, origin,
      };
      tx.put(keys.plan(id), plan);
      tx.put(keys.planKey(def.key), { ...head, last_version: plan.version, draft: id });
      return plan;
    }, 'plan');
  }

  async update(id: string, def: PlanDefinition, origin: Origin = 'api'): Promise<Plan> {
    const { definition, warnings } = await this.validate(def);
    return this.db.transact(async (tx) => {
      const current = await this.mutable(tx, id, origin);
      if (definition.key !== current.key) throw validationFailed([invalid('key', 'the key of a plan cannot change', 'immutable')]);
      const status = planStatus(current);
      if (status !== 'draft' && status !== 'scheduled') throw ruleBroken('plan_not_editable', `only Plans in [draft scheduled] can be updated; this one is ${status}`);
      const next: Plan = { ...current, ...definition, validation_errors: warnings, updated_at: formatInstant(Date.now()) };
      tx.put(keys.plan(id), next);
      return next;
    }, 'plan');
  }

  private async mutable(tx: Transaction, id: string, origin: Origin): Promise<Plan> {
    const plan = await this.get(id, tx);
    if (plan.origin !== origin) throw readOnly('plan', `${plan.key} v${plan.version}`);
    return plan;
  }

  /**
   * Makes a draft active from now and archives the key's active version in the same commit. `at` is
   * the clock, given only by benchmarks and tests that need a plan as it was published in the past.
   */
  async publish(id: string, origin: Origin = 'api', at = Date.now()): Promise<Plan> {
    const stored = await this.get(id);
    const check = await checkPlan(stored, this.lookup);
    const issues = [...check.critical, ...check.warnings.map((w) => invalid(w.field, w.message, w.code, { code: w.code, severity: w.severity }))];
    if (issues.length > 0) throw validationFailed(issues);
    return this.db.transact(async (tx) => {
      const plan = await this.mutable(tx, id, origin);
      const status = planStatus(plan);
      if (status !== 'draft' && status !== 'scheduled') throw ruleBroken('plan_not_publishable', `only Plans in [draft scheduled] can be published; this one is ${status}`);
      // The features must still be live at the commit (an archive racing the publish loses, or wins and this retries).
      for (const card of plan.phases.flatMap((p) => p.rate_cards)) {
        if (!card.feature?.id) continue;
        const feature = await tx.get<Feature>(keys.feature(card.feature.id));
        if (!feature || feature.archived_at) throw ruleBroken('rate_card_feature_archived', `feature ${card.feature.key} is archived`);
      }
      const head = (await tx.get<PlanHead>(keys.planKey(plan.key))) ?? EMPTY_HEAD;
      const now = formatInstant(at);
      if (head.active && head.active !== id) {
        const previous = await tx.get<Plan>(keys.plan(head.active));
        if (previous && planStatus(previous) === 'active') tx.put(keys.plan(previous.id), { ...previous, effective_to: now, updated_at: now });
      }
      const published: Plan = { ...plan, effective_from: now, effective_to: null, validation_errors: [], updated_at: now };
      tx.put(keys.plan(id), published);
      tx.put(keys.planKey(plan.key), { ...head, draft: head.draft === id ? null : head.draft, active: id });
      return published;
    }, 'plan');
  }

  /** Ends an active version now; its subscribers keep it. */
  archive(id: string, origin: Origin = 'api'): Promise<Plan> {
    return this.db.transact(async (tx) => {
      const plan = await this.mutable(tx, id, origin);
      const status = planStatus(plan);
      if (status !== 'active') throw ruleBroken('plan_not_archivable', `only active Plans can be archived; this one is ${status}`);
      const head = (await tx.get<PlanHead>(keys.planKey(plan.key))) ?? EMPTY_HEAD;
      const now = formatInstant(Date.now());
      const archived: Plan = { ...plan, effective_to: now, updated_at: now };
      tx.put(keys.plan(id), archived);
      if (head.active === id) tx.put(keys.planKey(plan.key), { ...head, active: null });
      return archived;
    }, 'plan');
  }

  /** Soft delete of a draft, scheduled or archived version; an active one must be archived first. */
  delete(id: string, origin: Origin = 'api'): Promise<void> {
    return this.db.transact(async (tx) => {
      const plan = await this.mutable(tx, id, origin);
      if (planStatus(plan) === 'active') throw ruleBroken('plan_delete_active', 'an active Plan cannot be deleted; archive it first');
      const head = (await tx.get<PlanHead>(keys.planKey(plan.key))) ?? EMPTY_HEAD;
      const now = formatInstant(Date.now());
      tx.put(keys.plan(id), { ...plan, deleted_at: now, updated_at: now });
      if (head.draft === id) tx.put(keys.planKey(plan.key), { ...head, draft: null });
    }, 'plan');
  }

  /**
   * The version a subscription buys: by id, by key and version, or the key's active version (never a
   * draft). It must be active now (OpenMeter: "plan K@V is not active at T").
   */
  async subscribable(ref: PlanRef, tx: Transaction, now: number): Promise<Plan> {
    let plan: Plan | undefined;
    if (ref.id) plan = await this.find(ref.id, tx);
    else if (ref.version !== undefined) {
      const versions = (await this.list()).filter((p) => p.key === ref.key && p.version === ref.version);
      plan = versions[0] && (await tx.get<Plan>(keys.plan(versions[0].id)));
    } else {
      const head = await tx.get<PlanHead>(keys.planKey(ref.key!));
      plan = head?.active ? await tx.get<Plan>(keys.plan(head.active)) : undefined;
      if (!plan && head) throw ruleBroken('plan_not_active', `plan ${ref.key} has no active version`, 'plan');
    }
    const label = ref.id ?? `${ref.key}${ref.version !== undefined ? `@${ref.version}` : ''}`;
    if (!plan || plan.deleted_at) throw notFound('plan', label);
    if (planStatus(plan, now) !== 'active') throw ruleBroken('plan_not_active', `plan ${plan.key}@${plan.version} is not active at ${formatInstant(now)}`, 'plan');
    return plan;
  }
}

/**
 * Makes the store match the customers, features and plans of gateway.yaml, on start and on every
 * reload, as the metering plugin does for declared meters: declared entities get ids derived from
 * their keys (the same on every node), are created or changed to match the file, and are deleted
 * (customers), archived (features, plans) when they leave it. A declared plan is published as
 * declared; a changed one becomes a new published version (subscribers keep theirs). What cannot be
 * applied (e.g. a key an API-made entity already has, an unknown meter) is logged and skipped.
 *
 * Every process of a node, and every node of a cluster, loads the same file; the changes are made by
 * one of them, under a lease in the store, and only when the declarations last applied in full were
 * other ones. (Made by all at once, each change would be refused as a conflict in all but the first.)
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { stableId } from '../shared/ids.ts';
import type { Billing } from './billing.ts';
import { validateCustomer, type Customer, type CustomerDefinition } from './customer/port.ts';
import { parsePlan, planStatus, validateFeature, type FeatureDefinition, type PlanDefinition } from './productcatalog/port.ts';
import { DeclaredLeaseLostError } from './shared/errors.ts';
import { keys, Lease } from './shared/store.ts';

type Entity = Record<string, unknown>;

interface Declarations {
  customers: CustomerDefinition[];
  features: FeatureDefinition[];
  plans: PlanDefinition[];
}

/** Held while applying, renewed before each change: a holder that died is replaced once it expires. */
const LEASE_MS = 10_000;
/** How often a process waiting for the lease looks again. */
const WAIT_MS = 100;

const digest = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);

/** The entity as written in the file (the loader adds an id billing does not use). */
function declared(entity: Entity): Entity {
  const { id: _id, ...rest } = entity;
  return rest;
}

export class DeclaredSync {
  private readonly lease: Lease;
  /** Declarations refused in the pass being applied. */
  private refused = 0;

  constructor(
    private readonly billing: Billing,
    private readonly log: Logger,
  ) {
    this.lease = new Lease(billing.db.store, keys.lease('declared'), LEASE_MS);
  }

  /** Resolves once the store holds the file's declarations, applied here or by another process. */
  async sync(entities: (name: string) => Entity[]): Promise<void> {
    const declarations: Declarations = {
      customers: entities('customers').map((e) => validateCustomer(declared(e)).definition!),
      features: entities('features').map((e) => validateFeature(declared(e)).definition!),
      plans: entities('plans').map((e) => parsePlan(declared(e)).definition!),
    };
    // Of what the file means, not of its text: a release that reads a declaration differently applies it again.
    const version = digest(declarations);
    await this.holdingLease(async () => {
      if ((await this.billing.db.get<string>(keys.declared)) !== version) await this.apply(declarations, version);
    });
  }

  private async holdingLease(work: () => Promise<void>): Promise<void> {
    while (!(await this.lease.hold())) await sleep(WAIT_MS);
    try {
      await work();
    } catch (err) {
      if (!(err instanceof DeclaredLeaseLostError)) throw err;
      this.log.warn({ code: err.code }, err.message);
    } finally {
      await this.lease.release();
    }
  }

  private async apply(declarations: Declarations, version: string): Promise<void> {
    this.refused = 0;
    await this.customers(declarations.customers);
    await this.features(declarations.features);
    await this.plans(declarations.plans);
    // A refused declaration (e.g. its key taken by an API-made entity) is tried again by the next sync.
    if (this.refused === 0) await this.billing.db.transact(async (tx) => tx.put(keys.declared, JSON.stringify(version)), 'declared');
    const counts = {
      customers: declarations.customers.length,
      features: declarations.features.length,
      plans: declarations.plans.length,
      refused: this.refused,
    };
    this.log.info(counts, 'billing: applied the customers, features and plans of gateway.yaml');
  }

  /** Runs one change; a refusal is logged with the entity it concerns and the sync goes on. */
  private async attempt(what: string, change: () => Promise<unknown>): Promise<void> {
    if (!(await this.lease.hold())) throw new DeclaredLeaseLostError();
    try {
      await change();
    } catch (err) {
      this.refused++;
      const { message, code } = err as Error & { code?: unknown };
      this.log.error({ entity: what, error: message, code }, 'billing: a gateway.yaml entity cannot be applied; skipped');
    }
  }

  private async customers(defs: CustomerDefinition[]): Promise<void> {
    const { customers } = this.billing;
    const ids = new Set<string>();
    for (const def of defs) {
      const id = stableId(`tollgate-customer:${def.key}`);
      ids.add(id);
      const current = await customers.find(id);
      if (!current || current.deleted_at) await this.attempt(`customers ${def.key}`, () => customers.create(def, 'config', id));
      else if (!sameCustomer(current, def)) await this.attempt(`customers ${def.key}`, () => customers.update(id, def, new Set(Object.keys(def)), 'config'));
    }
    for (const c of await customers.list()) {
      if (c.origin === 'config' && c.deleted_at === null && !ids.has(c.id)) await this.attempt(`customers ${c.key}`, () => customers.delete(c.id, 'config'));
    }
  }

  /** A feature's meter never changes: a declared feature whose meter changed is a new feature (new id). */
  private async features(defs: FeatureDefinition[]): Promise<void> {
    const { features } = this.billing;
    const ids = new Set<string>();
    for (const def of defs) {
      const id = stableId(`tollgate-feature:${def.key}:${digest(def)}`);
      ids.add(id);
      const current = await features.find(id);
      if (current && !current.archived_at) continue;
      const holder = await features.find(def.key);
      if (holder && holder.origin === 'config' && holder.id !== id) await this.attempt(`features ${def.key}`, () => features.archive(holder.id, 'config'));
      await this.attempt(`features ${def.key}`, () => features.create(def, 'config', id));
    }
    for (const f of await features.list()) {
      if (f.origin === 'config' && f.archived_at === null && !ids.has(f.id)) await this.attempt(`features ${f.key}`, () => features.archive(f.id, 'config'));
    }
  }

  /** Each distinct declaration of a plan key is one version, published when it is first seen. */
  private async plans(defs: PlanDefinition[]): Promise<void> {
    const { plans } = this.billing;
    const ids = new Set<string>();
    for (const def of defs) {
      const id = stableId(`tollgate-plan:${def.key}:${digest(def)}`);
      ids.add(id);
      const current = await plans.find(id);
      if (current && !current.deleted_at && planStatus(current) !== 'draft') continue;
      await this.attempt(`plans ${def.key}`, async () => {
        if (!current) await plans.create(def, 'config', id);
        await plans.publish(id, 'config');
      });
    }
    for (const p of await plans.list()) {
      if (p.origin === 'config' && p.deleted_at === null && !ids.has(p.id) && planStatus(p) === 'active') await this.attempt(`plans ${p.key}`, () => plans.archive(p.id, 'config'));
    }
  }
}

function sameCustomer(c: Customer, def: CustomerDefinition): boolean {
  const { key, name, description, labels, usage_attribution, currency, primary_email } = c;
  return JSON.stringify({ key, name, description, labels, usage_attribution, currency, primary_email }) === JSON.stringify(def);
}

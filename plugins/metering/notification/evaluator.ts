/**
 * Turns billing's facts into notification events: entitlement balances against balance-threshold
 * rules, usage-period resets against reset rules, issued invoices against invoice rules.
 *
 * Who notices: any process. The metering aggregator's process hears each commit of events (the
 * committed listener: the composition calls `usageCommitted` with the subjects) and looks at those
 * subjects' entitlements at once; one process (holding a lease in the store) also sweeps everything
 * every few seconds, which covers what no listener heard (an aggregator killed between its commit and its look, a usage period
 * that rolled over, an invoice issued by the scheduler, a rule created after usage was reached). Which
 * of them makes the event is decided by the store: the event is one conditional commit on the fact's
 * key (NotificationService.fire), so two processes or nodes that notice the same fact at once make one
 * event between them. That holds whatever the leases, fail-overs and clocks do, which running only in
 * the aggregator would not: its listener runs after the commit, in memory, and a kill -9 in between
 * would lose the crossing.
 *
 * Values are billing's (the entitlement domain's usage, limit and balance of the current usage
 * period, exact decimals): the same numbers the gateway enforces.
 */
import { Decimal } from 'decimal.js';
import type { Logger } from 'pino';
import { Lease } from '../shared/lease.ts';
import type { Rule, Threshold } from './model.ts';
import { keys } from './keys.ts';
import type { Fact, NotificationService } from './notifications.ts';
import { levelsOf, reached, type Level } from './thresholds.ts';

/** A metered entitlement of a customer's active subscription, as billing computes it now. */
export interface EntitlementSnapshot {
  /** Stable for the subscription's grant of the feature. */
  id: string;
  customer: { id: string; key: string; name: string };
  subjects: string[];
  feature: { id: string; key: string; name: string };
  /** Exact decimal texts of the current usage period. */
  value: { usage: string; limit: string; balance: string; overage: string; hasAccess: boolean; isSoftLimit: boolean };
  /** The current usage period (RFC 3339), and when the subscription started. */
  period: { from: string; to: string };
  activeFrom: string;
  /** The usage period's length, ISO 8601. */
  usagePeriod: string;
}

export interface IssuedInvoice {
  id: string;
  issuedAt: string;
  customerKey: string;
  /** The invoice as the API shows it. */
  data: Record<string, unknown>;
}

/** What the evaluator reads of billing (implemented by the composition on billing's port). */
export interface BillingFacts {
  /** Metered entitlements active at `now`: of the customers with one of `subjects` among theirs, or of all. */
  entitlements(now: number, subjects?: ReadonlySet<string>): Promise<EntitlementSnapshot[]>;
  invoices(): Promise<IssuedInvoice[]>;
}

const SWEEP_MS = 3_000;
/** The sweep's lease outlives a few missed renewals; a process that died is replaced after it. */
const SWEEP_LEASE_MS = 10_000;
/**
 * Commits close together share one look, at most one look waits at a time, and looks are this far
 * apart at least: under a flood of commits the evaluator reads each subject's usage a few times a
 * second, not once per commit.
 */
const LOOK_EVERY_MS = 50;

const thresholdLabel = (t: Threshold) => `${t.type}:${t.value}`;

/** What watches one entitlement in one usage period at one limit, made once per read of the rules. */
interface Watch {
  thresholds: { rule: Rule; levels: Level[] }[];
  resets: Rule[];
  /** The lowest usage at which any threshold is reached (none: no threshold can be). */
  lowest: Decimal | undefined;
}

/** Entries kept of the watches and of the facts known made, before they are dropped and rebuilt. */
const MAX_REMEMBERED = 100_000;

export class Evaluator {
  private timer: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private dirty = new Set<string>();
  /** A look at the dirty subjects, or a sweep, is waiting for its turn: later requests join it instead of queueing more. */
  private lookWaiting = false;
  private sweepWaiting = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  /** The live, enabled rules, read again after each change notice (or a notice that notices were missed), not on every look. */
  private rules: Promise<Rule[]> | undefined;
  /** By entitlement, usage period and limit: so a look at a usage below every threshold is one comparison, whatever the number of rules. */
  private watches = new Map<string, Watch>();
  /** Facts this process made, or found made: not asked of the store again. */
  private known = new Set<string>();
  /** Whether the rules last read hold an entitlement rule (until they are read: maybe). */
  private entitlementRulesLive = true;

  /** One process of those sharing the store sweeps at a time. */
  private readonly lease: Lease;

  constructor(
    private readonly notifications: NotificationService,
    private readonly facts: BillingFacts,
    private readonly log: Logger,
  ) {
    this.lease = new Lease(notifications.store, keys.sweepLease, SWEEP_LEASE_MS);
  }

  start(): void {
    this.timer = setInterval(() => this.requestSweep(), SWEEP_MS);
    this.timer.unref();
    this.requestSweep();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.debounce);
    await this.running;
    await this.lease.release().catch(() => undefined);
  }

  /** A rule changed somewhere: the next look reads them again. */
  rulesChanged(): void {
    this.rules = undefined;
    this.watches.clear();
  }

  /** Whether commits of usage can make events (an entitlement rule is live): the committer skips `usageCommitted` otherwise. */
  get watchingUsage(): boolean {
    return this.entitlementRulesLive || this.rules === undefined;
  }

  /** Events of these subjects were committed: their entitlements are looked at shortly. */
  usageCommitted(subjects: Iterable<string>): void {
    for (const subject of subjects) this.dirty.add(subject);
    if (this.lookWaiting) return;
    this.lookWaiting = true;
    this.debounce = setTimeout(() => {
      this.schedule(() => {
        this.lookWaiting = false;
        const dirty = this.dirty;
        this.dirty = new Set();
        return this.entitlementRules(Date.now(), dirty);
      });
    }, LOOK_EVERY_MS);
  }

  private requestSweep(): void {
    if (this.sweepWaiting) return;
    this.sweepWaiting = true;
    this.schedule(() => {
      this.sweepWaiting = false;
      return this.sweep();
    });
  }

  /** Runs `work` after the work in progress (one look at a time per process). */
  private schedule(work: () => Promise<void>): void {
    if (this.stopped) return;
    this.running = this.running.then(work).catch((err) => this.log.warn({ err }, 'notifications: evaluating rules failed; retrying on the next sweep'));
  }

  private async sweep(): Promise<void> {
    if (!(await this.lease.hold())) return;
    const now = Date.now();
    await this.entitlementRules(now);
    await this.invoiceRules(now);
  }

  private async activeRules(types: readonly string[]): Promise<Rule[]> {
    this.rules ??= this.notifications.listRules({ includeDisabled: false });
    try {
      return (await this.rules).filter((r) => types.includes(r.type));
    } catch (err) {
      this.rulesChanged();
      throw err;
    }
  }

  private async entitlementRules(now: number, subjects?: ReadonlySet<string>): Promise<void> {
    const rules = await this.activeRules(['entitlements.balance.threshold', 'entitlements.reset']);
    this.entitlementRulesLive = rules.length > 0;
    if (rules.length === 0 || this.stopped) return;
    for (const entitlement of await this.facts.entitlements(now, subjects)) {
      for (const fact of this.factsOf(entitlement, this.watchOf(entitlement, rules))) await this.fire(fact, now);
    }
  }

  private watchOf(e: EntitlementSnapshot, rules: Rule[]): Watch {
    const key = `${e.id}|${e.period.from}|${e.value.limit}`;
    let watch = this.watches.get(key);
    if (watch) return watch;
    const limit = new Decimal(e.value.limit);
    const mine = rules.filter((r) => !r.features?.length || r.features.includes(e.feature.id) || r.features.includes(e.feature.key));
    const thresholds = mine.filter((r) => r.type === 'entitlements.balance.threshold').map((rule) => ({ rule, levels: levelsOf(rule.thresholds ?? [], limit) }));
    const all = thresholds.flatMap((t) => t.levels.map((l) => l.at));
    watch = { thresholds, resets: mine.filter((r) => r.type === 'entitlements.reset'), lowest: all.length ? Decimal.min(...all) : undefined };
    if (this.watches.size >= MAX_REMEMBERED) this.watches.clear();
    this.watches.set(key, watch);
    return watch;
  }

  private factsOf(e: EntitlementSnapshot, watch: Watch): Fact[] {
    const facts = watch.resets.flatMap((rule) => resetFacts(rule, e));
    const usage = new Decimal(e.value.usage);
    if (!watch.lowest || usage.lessThan(watch.lowest)) return facts;
    for (const { rule, levels } of watch.thresholds) facts.push(...thresholdFacts(rule, e, reached(levels, usage)));
    return facts;
  }

  /** Makes the fact's event unless it is known made; logs the events this process made. */
  private async fire(fact: Fact, now: number): Promise<void> {
    if (this.known.has(fact.key)) return;
    const event = await this.notifications.fire(fact, now);
    if (this.known.size >= MAX_REMEMBERED) this.known.clear();
    this.known.add(fact.key);
    if (event) this.log.info({ event: event.id, rule: fact.rule.id, type: fact.type, subjects: fact.subjects, features: fact.features }, 'notifications: event created');
  }

  /** Invoices issued since each invoice rule was made. */
  private async invoiceRules(now: number): Promise<void> {
    const rules = await this.activeRules(['invoice.created']);
    if (rules.length === 0 || this.stopped) return;
    for (const invoice of await this.facts.invoices()) {
      for (const rule of rules) {
        if (Date.parse(invoice.issuedAt) < Date.parse(rule.createdAt)) continue;
        await this.fire({ key: `invoice/${rule.id}/${invoice.id}`, rule, type: 'invoice.created', data: invoice.data, subjects: [], features: [] }, now);
      }
    }
  }
}

/** OpenMeter's entitlement payload data (NotificationEventEntitlementValuePayloadBase). */
function entitlementData(e: EntitlementSnapshot): Record<string, unknown> {
  return {
    entitlement: {
      id: e.id,
      type: 'metered',
      featureId: e.feature.id,
      featureKey: e.feature.key,
      subjectKey: e.subjects[0],
      isSoftLimit: e.value.isSoftLimit,
      issueAfterReset: Number(e.value.limit),
      usagePeriod: { interval: e.usagePeriod, anchor: e.activeFrom },
      currentUsagePeriod: e.period,
      measureUsageFrom: e.activeFrom,
      lastReset: e.period.from,
    },
    feature: e.feature,
    subject: { key: e.subjects[0] },
    customer: e.customer,
    value: {
      hasAccess: e.value.hasAccess,
      balance: Number(e.value.balance),
      usage: Number(e.value.usage),
      overage: Number(e.value.overage),
      totalAvailableGrantAmount: Number(e.value.limit),
    },
  };
}

function baseFact(rule: Rule, e: EntitlementSnapshot): Pick<Fact, 'rule' | 'subjects' | 'features'> {
  return { rule, subjects: e.subjects, features: [e.feature.id, e.feature.key] };
}

/** One fact per threshold reached (at most one per kind), each once per usage period. */
function thresholdFacts(rule: Rule, e: EntitlementSnapshot, thresholds: Threshold[]): Fact[] {
  return thresholds.map((threshold) => ({
    ...baseFact(rule, e),
    key: `threshold/${rule.id}/${e.id}/${e.period.from}/${thresholdLabel(threshold)}`,
    type: 'entitlements.balance.threshold',
    data: { ...entitlementData(e), threshold },
  }));
}

/** A usage period that began after the subscription's start (a reset, not a start) and after the rule was made. */
function resetFacts(rule: Rule, e: EntitlementSnapshot): Fact[] {
  const from = Date.parse(e.period.from);
  if (from <= Date.parse(e.activeFrom) || from < Date.parse(rule.createdAt)) return [];
  return [{ ...baseFact(rule, e), key: `reset/${rule.id}/${e.id}/${e.period.from}`, type: 'entitlements.reset', data: entitlementData(e) }];
}

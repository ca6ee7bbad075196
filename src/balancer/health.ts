/**
 * Health checks of one balancer, with lua-resty-healthcheck's rules (Kong's checker):
 * - each target counts successes, HTTP failures, TCP failures and timeouts; a success clears the
 *   failure counts and a failure clears the success count;
 * - a count reaching its threshold (`successes`, `http_failures`, `tcp_failures`, `timeouts`) makes
 *   the target healthy or unhealthy; a threshold of 0 turns that transition off;
 * - a status in `healthy.http_statuses` is a success, one in `unhealthy.http_statuses` (or no valid
 *   status line) an HTTP failure, any other status counts for nothing;
 * - active probes run every `healthy.interval` seconds on healthy targets and every
 *   `unhealthy.interval` seconds on unhealthy ones (0: not probed), `concurrency` at a time;
 * - passive checks count what real traffic meets; the admin API can set a status outright.
 */
import type { Healthchecks, Upstream } from '../config/types.ts';
import type { Balancer } from './balancer.ts';
import { probe, type ProbeCredentials, type ProbeOutcome } from './probe.ts';
import type { TargetState } from './target-state.ts';

/** Kong's internal states: "mostly" ones still route as before but have started counting the other way. */
type Health = 'healthy' | 'unhealthy' | 'mostly_healthy' | 'mostly_unhealthy';
type Counter = 'success' | 'http' | 'tcp' | 'timeout';
type Source = 'active' | 'passive';

/** Kong's checker wakes every 0.1 s; a smaller interval still must not spin the event loop. */
const MIN_PROBE_INTERVAL_MS = 10;

export class TargetHealth {
  state: Health = 'healthy';
  success = 0;
  http = 0;
  tcp = 0;
  timeout = 0;
}

/** Kong's is_upstream_using_healthcheck: some probe interval or passive failure threshold is set. */
export function usesHealthchecks(upstream: Upstream): boolean {
  const { active, passive } = upstream.healthchecks;
  return active.healthy.interval !== 0 || active.unhealthy.interval !== 0 ||
    passive.unhealthy.tcp_failures !== 0 || passive.unhealthy.timeouts !== 0 || passive.unhealthy.http_failures !== 0;
}

export interface CheckerOptions {
  /** The Host header a probe sends to a target. */
  hostHeader(target: TargetState): string;
  credentials: ProbeCredentials;
  /** A target became healthy or unhealthy (for the log). */
  changed?(target: TargetState, healthy: boolean, why: string): void;
}

export class HealthChecker {
  private readonly health = new Map<TargetState, TargetHealth>();
  private readonly checks: Healthchecks;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<'healthy' | 'unhealthy'>();
  private stopped = false;

  constructor(
    private readonly balancer: Balancer,
    private readonly options: CheckerOptions,
    /** What each target's health was in the previous configuration. */
    previous: (target: TargetState) => TargetHealth | undefined = () => undefined,
  ) {
    this.checks = balancer.upstream.healthchecks;
    for (const target of balancer.targets) {
      const kept = previous(target);
      const health = new TargetHealth();
      if (kept) health.state = kept.state;
      this.health.set(target, health);
      balancer.setAvailable(target, isAvailable(health.state));
    }
  }

  /** Starts the active probes (none when both intervals are 0). */
  start(): void {
    for (const mode of ['healthy', 'unhealthy'] as const) {
      const interval = this.checks.active[mode].interval;
      if (interval <= 0) continue;
      const timer = setInterval(() => void this.probeAll(mode), Math.max(interval * 1000, MIN_PROBE_INTERVAL_MS));
      timer.unref();
      this.timers.push(timer);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
  }

  healthOf(target: TargetState): TargetHealth | undefined {
    return this.health.get(target);
  }

  reportStatus(target: TargetState, status: number, source: Source = 'passive'): void {
    const checks = this.checks[source];
    if (checks.healthy.http_statuses.includes(status)) this.count(target, 'healthy', checks.healthy.successes, 'success', `HTTP ${status}`);
    else if (status === 0 || checks.unhealthy.http_statuses.includes(status)) {
      this.count(target, 'unhealthy', checks.unhealthy.http_failures, 'http', status === 0 ? 'no valid HTTP status line' : `HTTP ${status}`);
    }
  }

  reportTcpFailure(target: TargetState, source: Source = 'passive'): void {
    this.count(target, 'unhealthy', this.checks[source].unhealthy.tcp_failures, 'tcp', 'TCP failure');
  }

  reportTimeout(target: TargetState, source: Source = 'passive'): void {
    this.count(target, 'unhealthy', this.checks[source].unhealthy.timeouts, 'timeout', 'timeout');
  }

  /** Sets a status outright (the admin API), clearing the counts. */
  setStatus(target: TargetState, healthy: boolean): void {
    const health = this.health.get(target);
    if (!health) return;
    Object.assign(health, new TargetHealth(), { state: healthy ? 'healthy' : 'unhealthy' });
    this.apply(target, healthy, 'set through the admin API');
  }

  private count(target: TargetState, towards: 'healthy' | 'unhealthy', limit: number, counter: Counter, why: string): void {
    const health = this.health.get(target);
    // A threshold of 0 turns the transition off; a fully healthy target does not count successes.
    if (!health || limit === 0 || health.state === towards) return;
    health[counter]++;
    if (counter === 'success') health.http = health.tcp = health.timeout = 0;
    else health.success = 0;
    const failures = health.http + health.tcp + health.timeout;
    let next: Health | undefined;
    if (health[counter] >= limit) next = towards;
    else if (health.state === 'healthy' && failures > 0) next = 'mostly_healthy';
    else if (health.state === 'unhealthy' && health.success > 0) next = 'mostly_unhealthy';
    if (!next || next === health.state) return;
    health.state = next;
    if (next === towards) this.apply(target, towards === 'healthy', `${health[counter]} × ${why}`);
  }

  private apply(target: TargetState, healthy: boolean, why: string): void {
    const before = target.available;
    this.balancer.setAvailable(target, healthy);
    if (before !== healthy) this.options.changed?.(target, healthy, why);
  }

  /** One round of probes over the targets in `mode`; a round still running skips the next. */
  private async probeAll(mode: 'healthy' | 'unhealthy'): Promise<void> {
    if (this.running.has(mode)) return;
    this.running.add(mode);
    try {
      const due = this.balancer.targets.filter((t) => t.weight > 0 && isAvailable(this.health.get(t)!.state) === (mode === 'healthy'));
      const workers = Array.from({ length: Math.min(this.checks.active.concurrency, due.length) }, async () => {
        for (let t = due.shift(); t && !this.stopped; t = due.shift()) this.record(t, await this.probeOne(t));
      });
      await Promise.all(workers);
    } finally {
      this.running.delete(mode);
    }
  }

  private probeOne(target: TargetState): Promise<ProbeOutcome> {
    return probe({ host: target.host, port: target.port, hostHeader: this.options.hostHeader(target) }, this.checks.active, this.options.credentials);
  }

  private record(target: TargetState, outcome: ProbeOutcome): void {
    if (this.stopped) return;
    if (outcome.kind === 'success') this.count(target, 'healthy', this.checks.active.healthy.successes, 'success', 'probe success');
    else if (outcome.kind === 'status') this.reportStatus(target, outcome.status, 'active');
    else if (outcome.kind === 'timeout') this.reportTimeout(target, 'active');
    else this.reportTcpFailure(target, 'active');
  }
}

function isAvailable(state: Health): boolean {
  return state === 'healthy' || state === 'mostly_healthy';
}

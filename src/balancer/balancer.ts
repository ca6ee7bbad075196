/**
 * One upstream's balancer (kong/runloop/balancer/balancers.lua): its targets, how much of their
 * weight is available, whether that is enough to take traffic (`healthchecks.threshold`), and the
 * algorithm that picks a target for each try of a request.
 */
import type { Target, Upstream } from '../config/types.ts';
import { createAlgorithm, type Algorithm } from './algorithms.ts';
import { TargetState, type PickHandle } from './target-state.ts';

export interface WeightReport {
  total: number;
  unavailable: number;
  available: number;
}

/** Why a balancer has no target for a request (Kong's ERR_BALANCER_UNHEALTHY and ERR_NO_PEERS_AVAILABLE). */
export type NoPeer = 'unhealthy' | 'none';

export class Balancer {
  readonly targets: TargetState[];
  private readonly algorithm: Algorithm;
  private readonly totalWeight: number;
  private unavailableWeight = 0;

  constructor(
    readonly upstream: Upstream,
    targets: readonly Target[],
  ) {
    this.targets = targets.map((t) => new TargetState(t));
    this.totalWeight = this.targets.reduce((sum, t) => sum + t.weight, 0);
    this.algorithm = createAlgorithm(upstream, this.targets);
  }

  /** Total weight, and the part of it unavailable. */
  weight(): WeightReport {
    return { total: this.totalWeight, unavailable: this.unavailableWeight, available: this.totalWeight - this.unavailableWeight };
  }

  /** Healthy when the available share of the weight is above the threshold (an empty balancer never is). */
  get healthy(): boolean {
    const total = this.totalWeight;
    return total > 0 && ((total - this.unavailableWeight) / total) * 100 > this.upstream.healthchecks.threshold;
  }

  setAvailable(target: TargetState, available: boolean): void {
    if (target.available === available) return;
    target.available = available;
    this.unavailableWeight += available ? -target.weight : target.weight;
    this.algorithm.update();
  }

  find(address: string): TargetState | undefined {
    return this.targets.find((t) => t.address === address);
  }

  /** The target for the handle's next try. */
  pick(handle: PickHandle, hashValue: string): TargetState | NoPeer {
    if (!this.healthy) return 'unhealthy';
    let target = this.algorithm.pick(handle, hashValue);
    if (!target && handle.failed && this.algorithm.retriesFailedTargets) {
      // Every target failed this request: its remaining tries go round them again.
      handle.failed = null;
      target = this.algorithm.pick(handle, hashValue);
    }
    handle.target = target;
    return target ?? 'none';
  }

  /** The handle's current try is over; `failed`: it may not be tried again for this request. */
  endTry(handle: PickHandle, failed: boolean): void {
    const target = handle.target;
    if (!target) return;
    if (failed) (handle.failed ??= new Set()).add(target);
    this.algorithm.release?.(target);
    handle.target = null;
  }

  observe(target: TargetState, ms: number): void {
    this.algorithm.observe?.(target, ms);
  }
}

/**
 * Kong's four balancing algorithms (kong/runloop/balancer/round_robin.lua, consistent_hashing.lua,
 * least_connections.lua, latency.lua). Each chooses among the targets that have weight, are
 * available, and have not failed this request already.
 */
import type { Upstream } from '../config/types.ts';
import type { PickHandle, TargetState } from './target-state.ts';
import { xxhash32 } from './xxhash32.ts';

export interface Algorithm {
  /** Targets' availability changed: rebuild what depends on it. */
  update(): void;
  /** The target for the handle's next try, or null when none is left. */
  pick(handle: PickHandle, hashValue: string): TargetState | null;
  /** After every target failed a request, try them again (all but latency, as Kong). */
  readonly retriesFailedTargets: boolean;
  /** A request's use of `target` is over. */
  release?(target: TargetState): void;
  /** `target` answered after `ms` milliseconds. */
  observe?(target: TargetState, ms: number): void;
}

export function createAlgorithm(upstream: Upstream, targets: readonly TargetState[]): Algorithm {
  switch (upstream.algorithm) {
    case 'consistent-hashing':
      return new ConsistentHashing(targets, upstream.slots);
    case 'least-connections':
      return new LeastConnections(targets);
    case 'latency':
      return new Latency(targets);
    default:
      return new RoundRobin(targets);
  }
}

const usable = (t: TargetState, handle: PickHandle) => t.weight > 0 && t.available && !handle.failed?.has(t);

/** The wheel is bounded whatever the weights (Kong's grows with their sum): proportions are kept within one slot. */
const MAX_WHEEL = 65536;

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/**
 * Weighted round-robin: a wheel where each target holds weight/gcd slots, shuffled, walked one slot
 * per request. Over every turn of the wheel each target gets exactly its share.
 */
class RoundRobin implements Algorithm {
  readonly retriesFailedTargets = true;
  private wheel: TargetState[] = [];
  private pointer = -1;

  constructor(private readonly targets: readonly TargetState[]) {
    this.build();
  }

  /** The wheel holds unavailable targets too (skipped when walked): availability changes keep it. */
  update(): void {}

  private build(): void {
    const weighted = this.targets.filter((t) => t.weight > 0);
    const divisor = weighted.reduce((d, t) => gcd(d, t.weight), 0);
    const total = weighted.reduce((sum, t) => sum + t.weight / divisor, 0);
    const scale = total > MAX_WHEEL ? MAX_WHEEL / total : 1;
    const wheel: TargetState[] = [];
    for (const t of weighted) {
      const slots = Math.max(1, Math.round((t.weight / divisor) * scale));
      for (let i = 0; i < slots; i++) wheel.push(t);
    }
    for (let i = wheel.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [wheel[i], wheel[j]] = [wheel[j], wheel[i]];
    }
    this.wheel = wheel;
  }

  pick(handle: PickHandle): TargetState | null {
    const wheel = this.wheel;
    for (let n = 0; n < wheel.length; n++) {
      this.pointer = (this.pointer + 1) % wheel.length;
      const t = wheel[this.pointer];
      if (usable(t, handle)) return t;
    }
    return null;
  }
}

/** Points each target gets on the continuum when all weigh the same (Kong's SERVER_POINTS). */
const SERVER_POINTS = 160;
const MIN_CONTINUUM = 1000;

/**
 * Consistent hashing (Ketama): targets own points on a continuum of `slots` positions, by their
 * weight; a request's hash value lands on a position and takes the first usable target at or before
 * it. Adding or removing a target moves only the values that land near its points.
 */
class ConsistentHashing implements Algorithm {
  readonly retriesFailedTargets = true;
  private readonly continuum: (TargetState | undefined)[];

  constructor(
    targets: readonly TargetState[],
    slots: number,
  ) {
    this.continuum = new Array(slots >= MIN_CONTINUUM ? slots : MIN_CONTINUUM);
    this.place(targets);
  }

  update(): void {}

  /** The same targets always give the same continuum: they are placed in sorted order, collisions moved forward. */
  private place(targets: readonly TargetState[]): void {
    const points = this.continuum.length;
    const totalWeight = targets.reduce((sum, t) => sum + t.weight, 0);
    const sorted = [...targets].sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : a.port - b.port));
    for (const t of sorted) {
      let entries = Math.floor((t.weight / totalWeight) * targets.length * SERVER_POINTS);
      if (t.weight > 0 && entries === 0) entries = 1;
      // Kong's key: "<ip>:" .. ":<port>" .. " <n>", the doubled colon included.
      for (let i = 1; i <= entries && i <= points; i++) {
        const index = xxhash32(`${t.host}::${t.port} ${i}`) % points;
        if (this.continuum[index] === undefined) this.continuum[index] = t;
        else entries++;
      }
    }
  }

  pick(handle: PickHandle, hashValue: string): TargetState | null {
    const points = this.continuum.length;
    const start = (handle.hashIndex ??= xxhash32(hashValue) % points);
    for (let n = 0; n < points; n++) {
      const t = this.continuum[(start - n + points) % points];
      if (t && usable(t, handle)) return t;
    }
    return null;
  }
}

/** Least connections: the target with the fewest requests in progress for its weight. */
class LeastConnections implements Algorithm {
  readonly retriesFailedTargets = true;

  constructor(private readonly targets: readonly TargetState[]) {}

  update(): void {}

  pick(handle: PickHandle): TargetState | null {
    let best: TargetState | null = null;
    let bestScore = Infinity;
    for (const t of this.targets) {
      if (!usable(t, handle)) continue;
      // +1: among idle targets the heaviest goes first.
      const score = (t.connections + 1) / t.weight;
      if (score < bestScore) {
        best = t;
        bestScore = score;
      }
    }
    if (best) best.connections++;
    return best;
  }

  release(target: TargetState): void {
    target.connections--;
  }
}

/** Seconds over which a response time's influence fades by 1/e (Kong's DECAY_TIME). */
const DECAY_SECONDS = 10;

/**
 * Latency (peak EWMA, as Finagle): the target with the lowest decaying average response time for its
 * weight. A target that becomes available starts at the average of the others, not at zero, so it
 * is not flooded.
 */
export class Latency implements Algorithm {
  /** Kong ends a request whose tries failed on every target. */
  readonly retriesFailedTargets = false;

  constructor(
    private readonly targets: readonly TargetState[],
    private readonly now: () => number = Date.now,
  ) {
    this.update();
  }

  update(): void {
    const known = this.targets.filter((t) => t.available && t.ewma !== undefined);
    const start = known.length === 0 ? 0 : known.reduce((sum, t) => sum + t.ewma!, 0) / known.length;
    for (const t of this.targets) {
      if (!t.available) t.ewma = undefined;
      else if (t.ewma === undefined) {
        t.ewma = start;
        t.ewmaAt = this.now();
      }
    }
  }

  pick(handle: PickHandle): TargetState | null {
    let best: TargetState | null = null;
    let bestScore = Infinity;
    for (const t of this.targets) {
      if (!usable(t, handle)) continue;
      const score = this.decayed(t, 0) / t.weight;
      if (score < bestScore) {
        best = t;
        bestScore = score;
      }
    }
    return best;
  }

  observe(target: TargetState, ms: number): void {
    if (target.ewma === undefined) return;
    target.ewma = this.decayed(target, ms);
    target.ewmaAt = this.now();
  }

  private decayed(t: TargetState, sampleMs: number): number {
    const elapsedSeconds = Math.max(0, (this.now() - t.ewmaAt) / 1000);
    const weight = Math.exp(-elapsedSeconds / DECAY_SECONDS);
    return (t.ewma ?? 0) * weight + sampleMs * (1 - weight);
  }
}

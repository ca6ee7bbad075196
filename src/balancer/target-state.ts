/** One target of a running balancer: its address, weight, availability and the algorithms' counters. */
import type { Target } from '../config/types.ts';
import { parseTarget } from '../config/upstreams.ts';

export class TargetState {
  readonly host: string;
  readonly port: number;
  readonly type: 'name' | 'ipv4' | 'ipv6';
  /** Health: an unavailable target takes no traffic (set by health checks or the admin API). */
  available = true;
  /** Requests in progress on it (least-connections). */
  connections = 0;
  /** Exponentially weighted moving average of its response times in ms, and when it last changed (latency). */
  ewma: number | undefined;
  ewmaAt = 0;

  constructor(readonly entity: Target) {
    const address = parseTarget(entity.target)!;
    this.host = address.host;
    this.port = address.port;
    this.type = address.type;
  }

  get weight(): number {
    return this.entity.weight;
  }

  /** `host:port` as Kong formats it (IPv6 in brackets). */
  get address(): string {
    return this.entity.target;
  }
}

/** What one request has used of a balancer, across its tries. */
export interface PickHandle {
  /** The target of the current try. */
  target: TargetState | null;
  /** Targets whose try failed (made on the first failure: most requests have none). */
  failed: Set<TargetState> | null;
  /** The continuum position of the request's hash value (consistent-hashing), once computed. */
  hashIndex?: number;
}

export function newHandle(): PickHandle {
  return { target: null, failed: null };
}

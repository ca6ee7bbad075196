/**
 * Where the tries of one request go. The proxies (HTTP engine, gRPC, WebSocket) see only this: a
 * host and port per try, never the balancer behind it. A service that names an upstream gets its
 * peers from that upstream's balancer; any other service is its own single peer.
 */
import { isIP } from 'node:net';
import type { Service, Upstream } from '../config/types.ts';
import { hostWithPort } from '../proxy/headers.ts';
import type { FailureKind } from '../proxy/respond.ts';
import type { Balancer, NoPeer } from './balancer.ts';
import type { HashValue } from './hash-value.ts';
import type { HealthChecker } from './health.ts';
import { newHandle, type PickHandle, type TargetState } from './target-state.ts';

export interface Peer {
  /** Name or address to connect to (IPv6 without brackets). */
  host: string;
  port: number;
  /** Host header (`:authority` for gRPC) when the route does not preserve the client's. */
  hostHeader: string;
  /** TLS server name: the host of `hostHeader` when it is a name (SNI carries no addresses). */
  servername: string | undefined;
}

export interface PeerSource {
  /** The peer of the first try. */
  readonly first: Peer;
  /** Kong (nginx's proxy_next_upstream) also retries a timeout, on another target: only balancers have one. */
  readonly retriesTimeouts: boolean;
  /** A Set-Cookie for the response (consistent hashing on a cookie the client did not have). */
  readonly setCookie: string | undefined;
  /** The current try failed before any response (reported to passive health checks). */
  failed(failure: FailureKind): void;
  /** The peer of the next try, or null when none is left. */
  next(): Peer | null;
  /** The current try's peer answered with `status` after `ms` milliseconds. */
  answered(status: number, ms: number): void;
  /** The request is over. */
  release(): void;
}

function peer(host: string, port: number, hostHeader: string): Peer {
  const name = hostHeader.startsWith('[') ? hostHeader.slice(1, hostHeader.indexOf(']')) : hostHeader.replace(/:\d+$/, '');
  return { host, port, hostHeader, servername: isIP(name) ? undefined : name };
}

const peersOfTargets = new WeakMap<TargetState, Map<string, Peer>>();

/** A service without an upstream: every try goes to its own host and port. */
export class ServicePeers implements PeerSource {
  readonly first: Peer;
  readonly retriesTimeouts = false;
  readonly setCookie = undefined;

  constructor(service: Service) {
    this.first = peer(service.host, service.port, hostWithPort(service.host, service.port, service.protocol));
  }

  next(): Peer {
    return this.first;
  }

  failed(): void {}
  answered(): void {}
  release(): void {}
}

/** Peers from a balancer, reporting what each try met to its passive health checks. */
export class BalancedPeers implements PeerSource {
  readonly retriesTimeouts = true;
  private released = false;

  private constructor(
    private readonly balancer: Balancer,
    private readonly checker: HealthChecker | undefined,
    private readonly protocol: string,
    private readonly hashValue: string,
    readonly setCookie: string | undefined,
    private readonly handle: PickHandle,
    private current: TargetState,
  ) {}

  /** The peers of one request, or why there is none. */
  static pick(balancer: Balancer, checker: HealthChecker | undefined, protocol: string, hash: HashValue): BalancedPeers | NoPeer {
    const handle = newHandle();
    const first = balancer.pick(handle, hash.value);
    if (typeof first === 'string') return first;
    return new BalancedPeers(balancer, checker, protocol, hash.value, hash.setCookie, handle, first);
  }

  get first(): Peer {
    return this.peerOf(this.current);
  }

  failed(failure: FailureKind): void {
    if (failure === 'timeout') this.checker?.reportTimeout(this.current);
    else this.checker?.reportTcpFailure(this.current);
  }

  next(): Peer | null {
    this.balancer.endTry(this.handle, true);
    const next = this.balancer.pick(this.handle, this.hashValue);
    if (typeof next === 'string') {
      this.released = true;
      return null;
    }
    this.current = next;
    return this.peerOf(next);
  }

  answered(status: number, ms: number): void {
    this.checker?.reportStatus(this.current, status);
    this.balancer.observe(this.current, ms);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.balancer.endTry(this.handle, false);
  }

  /** A target's peer is the same for every request of a protocol: made once. */
  private peerOf(target: TargetState): Peer {
    let byProtocol = peersOfTargets.get(target);
    if (!byProtocol) peersOfTargets.set(target, (byProtocol = new Map()));
    let made = byProtocol.get(this.protocol);
    if (!made) {
      const hostHeader = this.balancer.upstream.host_header ?? hostWithPort(target.host, target.port, this.protocol);
      byProtocol.set(this.protocol, (made = peer(target.host, target.port, hostHeader)));
    }
    return made;
  }
}

/** The Host header a target gets, for active probes: the upstream's host_header or the target's own name, no port. */
export function probeHostHeader(upstream: Upstream, target: TargetState): string {
  return upstream.host_header ?? (target.type === 'ipv6' ? `[${target.host}]` : target.host);
}

/**
 * The tries of one request as Kong's log serializer shows them (`ctx.balancer_data.tries`): each peer
 * tried, when, and how a failed one failed. A PeerSource wrapped around the request's own, so that the
 * proxies report to it unchanged.
 */
import { FAILURE_ANSWERS, type FailureKind } from '../proxy/respond.ts';
import type { UpstreamTry } from '../pdk/types.ts';
import type { Peer, PeerSource } from './peers.ts';

export class RecordedTries implements PeerSource {
  readonly tries: UpstreamTry[];
  /** The status nginx notes for each try that failed before any answer (502, 504). */
  private readonly failedStatuses: number[] = [];

  constructor(private readonly source: PeerSource) {
    this.tries = [tryOf(source.first, Date.now(), 0)];
  }

  get first(): Peer {
    return this.source.first;
  }

  get retriesTimeouts(): boolean {
    return this.source.retriesTimeouts;
  }

  get setCookie(): string | undefined {
    return this.source.setCookie;
  }

  failed(failure: FailureKind): void {
    this.tries[this.tries.length - 1].state = 'failed';
    this.failedStatuses.push(FAILURE_ANSWERS[failure][0]);
    this.source.failed(failure);
  }

  next(): Peer | null {
    const start = Date.now();
    const peer = this.source.next();
    if (peer) this.tries.push(tryOf(peer, start, Date.now() - start));
    return peer;
  }

  answered(status: number, ms: number): void {
    this.source.answered(status, ms);
  }

  release(): void {
    this.source.release();
  }

  /** nginx's `$upstream_status`: each try's status, the failed ones' first (`502, 200`). */
  upstreamStatus(answered: number | undefined): string {
    return (answered === undefined ? this.failedStatuses : [...this.failedStatuses, answered]).join(', ');
  }

  /**
   * Kong marks the last try failed with the status the gateway answered (5xx) when every retry was
   * spent: here, when that try failed before any answer.
   */
  concluded(status: number): UpstreamTry[] {
    const last = this.tries[this.tries.length - 1];
    if (last.state === 'failed' && status > 499) last.code = status;
    return this.tries;
  }
}

function tryOf(peer: Peer, start: number, latency: number): UpstreamTry {
  return { ip: peer.host, port: peer.port, balancer_start: start, balancer_latency: latency };
}

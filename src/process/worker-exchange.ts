import { LocalExchange, type Admission, type QuotaRequest, type QuotaReservation } from './exchange.ts';
import { GATHER_TIMEOUT_MS, type QuotaOp, type ToPrimary, type ToWorker } from './messages.ts';

/** A worker's side of the node's exchange: gathers go through the primary, which asks every worker. */
export class WorkerExchange extends LocalExchange {
  private readonly pending = new Map<number, (values: unknown[]) => void>();
  private gatherSeq = 0;
  private readonly admissions = new Map<number, { resolve(admission: Admission): void; reject(err: Error): void }>();
  private admitSeq = 0;
  private readonly reservations = new Map<number, (reservation: QuotaReservation) => void>();
  /** Quota operations of this turn of the event loop, sent together once it ends. */
  private quotaOps: QuotaOp[] = [];

  /** Counted in the primary; when it is gone (the node is stopping) this process's own counters stand in. */
  override admit(keys: readonly string[], limits: readonly number[], ttlsMs: readonly number[], requests: number): Promise<Admission> {
    if (!process.connected) return super.admit(keys, limits, ttlsMs, requests);
    const id = ++this.admitSeq;
    return new Promise((resolve, reject) => {
      this.admissions.set(id, { resolve, reject });
      process.send!({ type: 'admit', id, keys, limits, ttlsMs, requests } satisfies ToPrimary);
    });
  }

  /** Reserved in the primary, like admit. */
  override reserve(request: QuotaRequest): Promise<QuotaReservation> {
    if (!process.connected) return super.reserve(request);
    const id = ++this.admitSeq;
    return new Promise((resolve) => {
      this.reservations.set(id, resolve);
      this.sendQuota({ reserve: request, id });
    });
  }

  override adjust(key: string, delta: string): void {
    if (!process.connected) return super.adjust(key, delta);
    // At once, with what waits before it: a place given back is free for the next request on any worker.
    this.quotaOps.push({ adjust: key, delta });
    this.flushQuota();
  }

  /**
   * Queues a reservation for the message that ends this turn of the event loop: under load a worker
   * decides many requests per turn, and each message costs both processes a serialisation and a write.
   */
  private sendQuota(op: QuotaOp): void {
    this.quotaOps.push(op);
    if (this.quotaOps.length === 1) setImmediate(() => this.flushQuota());
  }

  private flushQuota(): void {
    if (this.quotaOps.length === 0) return;
    const ops = this.quotaOps;
    this.quotaOps = [];
    if (process.connected) process.send!({ type: 'quota', ops } satisfies ToPrimary);
  }

  override gather(topic: string, argument?: string): Promise<unknown[]> {
    if (!process.connected) return super.gather(topic, argument);
    const id = ++this.gatherSeq;
    return new Promise((resolve) => {
      // The primary answers within its own timeout; without an answer (it is going away) this process's value stands alone.
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve(super.gather(topic, argument));
      }, GATHER_TIMEOUT_MS * 2);
      this.pending.set(id, (values) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(values);
      });
      process.send!({ type: 'gather', id, topic, argument } satisfies ToPrimary);
    });
  }

  received(message: ToWorker & { type: 'collect' | 'gathered' | 'admitted' | 'reserved' }): void {
    if (message.type === 'reserved') {
      for (const [id, reservation] of message.reservations) {
        this.reservations.get(id)?.(reservation);
        this.reservations.delete(id);
      }
      return;
    }
    if (message.type === 'admitted') {
      this.admissions.get(message.id)?.resolve(message.admission);
      this.admissions.delete(message.id);
      return;
    }
    if (message.type === 'gathered') return this.pending.get(message.id)?.(message.values);
    // A value that cannot be read is left out (undefined), not left waiting for the primary's timeout.
    void this.read(message.topic, message.argument)
      .catch(() => undefined)
      .then((value) => {
        if (process.connected) process.send!({ type: 'collected', id: message.id, value } satisfies ToPrimary);
      });
  }
}

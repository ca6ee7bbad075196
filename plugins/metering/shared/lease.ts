/**
 * A lease in the store: work that one process at a time may do among those sharing the store (nodes
 * of a PostgreSQL cluster included), such as billing's scheduler and the notification sweep. Taken and
 * renewed by compare-and-set; a holder that stops renewing (it crashed, or hangs) loses it when it
 * expires.
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '../../../src/pdk/index.ts';

export class Lease {
  private readonly owner = randomUUID();

  constructor(
    private readonly store: Store,
    private readonly key: string,
    private readonly ttlMs: number,
  ) {}

  /** Takes the lease, or renews it when this process holds it; false while another one does. */
  async hold(): Promise<boolean> {
    const holder = await this.store.get(this.key);
    if (holder !== undefined && holder !== this.owner) return false;
    return this.store.commitIf([{ key: this.key, value: holder }], [{ type: 'put', key: this.key, value: this.owner, ttlMs: this.ttlMs }], { sync: false });
  }

  /** Gives the lease up at once, so that the next holder need not wait for it to expire. */
  async release(): Promise<void> {
    await this.store.commitIf([{ key: this.key, value: this.owner }], [{ type: 'del', key: this.key }]);
  }
}

/**
 * What the processes of one node share on demand, as Kong's workers share a dictionary: each process
 * offers a value under a topic (read when asked), and any of them gathers every process's value (the
 * prometheus plugin sums its counters so that a scrape of any worker reports the node's totals).
 */
export interface NodeExchange {
  /**
   * Offers this process's value of `topic`; `read` (which may resolve later) is called each time a
   * process gathers it, with the gatherer's `argument`.
   */
  offer(topic: string, read: (argument?: string) => unknown): void;
  /** The value of `topic` of every process of the node that answered (this one's included). */
  gather(topic: string, argument?: string): Promise<unknown[]>;
}

/** One process: its own values are the node's. */
export class LocalExchange implements NodeExchange {
  private readonly offered = new Map<string, (argument?: string) => unknown>();

  offer(topic: string, read: (argument?: string) => unknown): void {
    if (this.offered.has(topic)) throw new Error(`exchange topic ${topic} is offered twice`);
    this.offered.set(topic, read);
  }

  /** This process's value of `topic` (undefined when it offers none). */
  async read(topic: string, argument?: string): Promise<unknown> {
    return this.offered.get(topic)?.(argument);
  }

  async gather(topic: string, argument?: string): Promise<unknown[]> {
    return this.offered.has(topic) ? [await this.read(topic, argument)] : [];
  }
}

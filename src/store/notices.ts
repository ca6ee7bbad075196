/**
 * Notices between the processes sharing a store (cache invalidation). `LocalNotices` serves one
 * process; adapters shared by several processes deliver the same calls across them.
 */
import type { NoticeListener, Notices } from './store.ts';

/** How long a publisher waits for the node's other processes to apply a notice before it goes on anyway. */
export const SETTLE_TIMEOUT_MS = 3_000;

const SETTLED = Promise.resolve();

export class LocalNotices implements Notices {
  private readonly listeners = new Map<string, Set<NoticeListener>>();

  publish(topic: string, message: string): void {
    void this.deliver(topic, message);
  }

  publishAndWait(topic: string, message: string): Promise<void> {
    return atMost(this.deliver(topic, message), SETTLE_TIMEOUT_MS);
  }

  subscribe(topic: string, listener: NoticeListener): () => void {
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(topic);
    };
  }

  /**
   * Hands a notice to this process's listeners (a cross-process adapter calls it for what arrives);
   * resolves once what they started settled.
   */
  deliver(topic: string, message: string | null): Promise<void> {
    const started: Promise<unknown>[] = [];
    for (const listener of this.listeners.get(topic) ?? []) {
      try {
        const result = listener(message);
        // A listener's failure must not keep the notice from the others, nor go unhandled.
        if (result instanceof Promise) started.push(result.catch(() => undefined));
      } catch {
        // As above.
      }
    }
    return started.length === 0 ? SETTLED : Promise.all(started).then(() => undefined);
  }

  /** Every topic may have missed notices (e.g. the connection carrying them was lost). */
  deliverLoss(): void {
    for (const topic of [...this.listeners.keys()]) void this.deliver(topic, null);
  }
}

/** A namespace's view: its topics are prefixed like its keys. */
export class NamespacedNotices implements Notices {
  constructor(
    private readonly root: Notices,
    private readonly base: string,
  ) {}

  publish(topic: string, message: string): void {
    this.root.publish(this.base + topic, message);
  }

  publishAndWait(topic: string, message: string): Promise<void> {
    return this.root.publishAndWait(this.base + topic, message);
  }

  subscribe(topic: string, listener: NoticeListener): () => void {
    return this.root.subscribe(this.base + topic, listener);
  }
}

/** Resolves when `work` does or after `ms`, whichever is first (a notice's wait never holds its caller for long). */
export function atMost(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms).unref()));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Notices between the processes sharing a store (cache invalidation). `LocalNotices` serves one
 * process; adapters shared by several processes deliver the same calls across them.
 */
import type { Notices } from './store.ts';

type Listener = (message: string | null) => void;

export class LocalNotices implements Notices {
  private readonly listeners = new Map<string, Set<Listener>>();

  publish(topic: string, message: string): void {
    this.deliver(topic, message);
  }

  subscribe(topic: string, listener: Listener): () => void {
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(topic);
    };
  }

  /** Hands a notice to this process's listeners (a cross-process adapter calls it for what arrives). */
  deliver(topic: string, message: string | null): void {
    for (const listener of this.listeners.get(topic) ?? []) {
      try {
        listener(message);
      } catch {
        // A listener's failure must not keep the notice from the others.
      }
    }
  }

  /** Every topic may have missed notices (e.g. the connection carrying them was lost). */
  deliverLoss(): void {
    for (const topic of [...this.listeners.keys()]) this.deliver(topic, null);
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

  subscribe(topic: string, listener: Listener): () => void {
    return this.root.subscribe(this.base + topic, listener);
  }
}

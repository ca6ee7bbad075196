/**
 * Consumers: those declared in gateway.yaml (read-only) and those created through the admin API,
 * which persist in the store and survive restarts and reloads.
 */
import { randomUUID } from 'node:crypto';
import { headerValueProblem, isUuid } from './config/entities.ts';
import type { Consumer } from './config/types.ts';
import type { ConsumerDirectory } from './pipeline/plugin-api.ts';
import type { Store } from './store/store.ts';

const KEY_PREFIX = 'consumers/';

/**
 * A consumer named by a client or an operator, by id or username: a UUID-shaped reference is looked up
 * as an id only, anything else as a username only. One lookup for both would let a consumer whose
 * username is another's id stand in for it.
 */
export function consumerByReference(directory: ConsumerDirectory, reference: string): Consumer | undefined {
  return isUuid(reference) ? directory.byId(reference) : directory.byUsername(reference);
}

export class Consumers implements ConsumerDirectory {
  private declared: Consumer[] = [];
  private readonly runtime = new Map<string, Consumer>();
  private ids = new Map<string, Consumer>();
  private usernames = new Map<string, Consumer>();

  constructor(private readonly store: Store) {}

  async load(): Promise<void> {
    for await (const [, value] of this.store.scan({ prefix: KEY_PREFIX })) {
      const consumer = JSON.parse(value) as Consumer;
      this.runtime.set(consumer.id, consumer);
    }
    this.reindex();
  }

  /** Replaces the declarative consumers (on start and reload). */
  setDeclared(consumers: Consumer[]): void {
    this.declared = consumers;
    this.reindex();
  }

  isDeclared(id: string): boolean {
    return this.declared.some((c) => c.id === id);
  }

  byId(id: string): Consumer | undefined {
    return this.ids.get(id);
  }

  byUsername(username: string): Consumer | undefined {
    return this.usernames.get(username);
  }

  list(): Consumer[] {
    return [...this.declared, ...this.runtime.values()];
  }

  /** Creates a runtime consumer; returns an error message when it clashes with an existing one. */
  async create(input: { username?: unknown; custom_id?: unknown; tags?: unknown }): Promise<Consumer | string> {
    const username = typeof input.username === 'string' && input.username ? input.username : null;
    const customId = typeof input.custom_id === 'string' && input.custom_id ? input.custom_id : null;
    if (!username && !customId) return "at least one of these fields must be non-empty: 'custom_id', 'username'";
    const problem = fieldProblem('username', username) ?? fieldProblem('custom_id', customId);
    if (problem) return problem;
    const clash = this.list().find((c) => (username && c.username === username) || (customId && c.custom_id === customId));
    if (clash) return `UNIQUE violation detected on '{${username && clash.username === username ? `username="${username}"` : `custom_id="${customId}"`}}'`;
    const tags = Array.isArray(input.tags) ? input.tags.filter((t): t is string => typeof t === 'string') : null;
    const consumer: Consumer = { id: randomUUID(), username, custom_id: customId, tags, created_at: Math.floor(Date.now() / 1000) };
    await this.store.put(KEY_PREFIX + consumer.id, JSON.stringify(consumer), { sync: true });
    this.runtime.set(consumer.id, consumer);
    this.reindex();
    return consumer;
  }

  /** Deletes a runtime consumer; false when there is none with that id. */
  async delete(id: string): Promise<boolean> {
    if (!this.runtime.has(id)) return false;
    await this.store.del(KEY_PREFIX + id, { sync: true });
    this.runtime.delete(id);
    this.reindex();
    return true;
  }

  private reindex(): void {
    const ids = new Map<string, Consumer>();
    const usernames = new Map<string, Consumer>();
    // Declared last, so that gateway.yaml wins a username a runtime consumer also has.
    for (const c of [...this.runtime.values(), ...this.declared]) {
      if (c.username) usernames.set(c.username, c);
      ids.set(c.id, c);
    }
    this.ids = ids;
    this.usernames = usernames;
  }
}

/** Usernames and custom ids go upstream as headers (X-Consumer-Username, X-Consumer-Custom-ID). */
function fieldProblem(field: string, value: string | null): string | undefined {
  const problem = value === null ? undefined : headerValueProblem(value);
  return problem === undefined ? undefined : `${field}: ${problem}`;
}

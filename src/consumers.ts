/**
 * Consumers: those declared in gateway.yaml (read-only) and those created through the admin API,
 * which persist in the store and survive restarts and reloads.
 *
 * Several processes and nodes share the runtime ones: a username or custom_id is claimed with
 * `commitIf` (two nodes creating the same one at once: one gets 409), and every change is announced
 * on the `consumers` notice topic, on which each process re-reads that consumer (or, on `null`,
 * all of them), one refresh after the other so that a slow read never overwrites a newer one.
 */
import { randomUUID } from 'node:crypto';
import { headerValueProblem, isUuid } from './config/entities.ts';
import type { Consumer } from './config/types.ts';
import type { ConsumerDirectory } from './pipeline/plugin-api.ts';
import type { Store } from './store/store.ts';

const KEY_PREFIX = 'consumers/';
/** Claims of a username / custom_id by a runtime consumer (value: its id). */
const USERNAME_PREFIX = 'consumer-usernames/';
const CUSTOM_ID_PREFIX = 'consumer-custom-ids/';
const TOPIC = 'consumers';

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
  private refreshing: Promise<void> = Promise.resolve();

  constructor(private readonly store: Store) {
    store.notices.subscribe(TOPIC, (id) => this.queueRefresh(() => (id === null ? this.load() : this.refresh(id))));
  }

  async load(): Promise<void> {
    const runtime = new Map<string, Consumer>();
    for await (const [, value] of this.store.scan({ prefix: KEY_PREFIX })) {
      const consumer = JSON.parse(value) as Consumer;
      runtime.set(consumer.id, consumer);
    }
    this.runtime.clear();
    for (const [id, consumer] of runtime) this.runtime.set(id, consumer);
    this.reindex();
  }

  private queueRefresh(refresh: () => Promise<void>): void {
    this.refreshing = this.refreshing.then(refresh).catch(() => {
      // The store is unreachable: the next notice (or the `null` after a reconnect) refreshes again.
    });
  }

  /** Re-reads one consumer another process created or deleted. */
  private async refresh(id: string): Promise<void> {
    const value = await this.store.get(KEY_PREFIX + id);
    if (value === undefined) this.runtime.delete(id);
    else this.runtime.set(id, JSON.parse(value) as Consumer);
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
    const claims = this.claims(consumer);
    const created = await this.store.commitIf(
      claims.map(([key]) => ({ key, value: undefined })),
      [{ type: 'put', key: KEY_PREFIX + consumer.id, value: JSON.stringify(consumer) }, ...claims.map(([key]) => ({ type: 'put' as const, key, value: consumer.id }))],
      { sync: true },
    );
    if (!created) {
      // Another process claimed the name in the meantime.
      const taken = username && (await this.store.get(USERNAME_PREFIX + username)) !== undefined;
      return `UNIQUE violation detected on '{${taken ? `username="${username}"` : `custom_id="${customId}"`}}'`;
    }
    this.runtime.set(consumer.id, consumer);
    this.reindex();
    this.store.notices.publish(TOPIC, consumer.id);
    return consumer;
  }

  /** The claim keys of a consumer's username and custom_id. */
  private claims(consumer: Consumer): [key: string, owner: string][] {
    const claims: [string, string][] = [];
    if (consumer.username) claims.push([USERNAME_PREFIX + consumer.username, consumer.id]);
    if (consumer.custom_id) claims.push([CUSTOM_ID_PREFIX + consumer.custom_id, consumer.id]);
    return claims;
  }

  /** Deletes a runtime consumer; false when there is none with that id. */
  async delete(id: string): Promise<boolean> {
    const consumer = this.runtime.get(id);
    if (!consumer) return false;
    // Claim keys change only through commitIf (the store's rule for keys guarded by it).
    const ops = [KEY_PREFIX + id, ...this.claims(consumer).map(([key]) => key)].map((key) => ({ type: 'del' as const, key }));
    await this.store.commitIf([], ops, { sync: true });
    this.runtime.delete(id);
    this.reindex();
    this.store.notices.publish(TOPIC, id);
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

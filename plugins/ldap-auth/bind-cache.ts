/**
 * The verdicts of binds, keyed as Kong's (`ldap_auth_cache:` and the SHA-256 of the directory, the search
 * settings, `cache_ttl`, the username and the password): accepted and refused ones alike, for `cache_ttl`
 * seconds (Kong's ttl and neg_ttl). No password is kept, only that digest. Kong keeps them in the node's
 * shared dictionary; here each process keeps its own and, lacking one, asks the node's other processes
 * before it asks the directory. Concurrent requests with the same credentials share one bind.
 */
import { createHash } from 'node:crypto';
import type { PluginApi } from '../../src/pdk/index.ts';
import type { LdapAuthConfig } from './schema.ts';

const TOPIC = 'ldap-auth:verdict';
/** Verdicts kept per process at most; the oldest go first (a flood of guesses cannot grow the cache without end). */
const MAX_VERDICTS = 10_000;
/** How long a request waits for another process's verdict before it binds itself: a busy process must not hold it. */
const NODE_WAIT_MS = 200;
/** An expiry that never comes, and survives JSON on its way between processes (Infinity would not). */
const NEVER = Number.MAX_SAFE_INTEGER;

export interface Verdict {
  accepted: boolean;
  /** Epoch milliseconds; NEVER for `cache_ttl: 0` (Kong's "never expires"). */
  expiresAt: number;
}

/** Kong's cache key (kong/plugins/ldap-auth/access.lua, cache_key). */
export function cacheKey(config: LdapAuthConfig, username: string, password: string): string {
  const material = [config.ldap_host.toLowerCase(), config.ldap_port, config.base_dn, config.attribute, Math.trunc(config.cache_ttl), username, password].join(':');
  return `ldap_auth_cache:${createHash('sha256').update(material).digest('hex')}`;
}

export class BindCache {
  private readonly verdicts = new Map<string, Verdict>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(private readonly api: PluginApi) {
    api.node.offer(TOPIC, (key) => (key === undefined ? null : (this.fresh(key) ?? null)));
  }

  /** The verdict for `key`, remembered or settled by `bind`; synchronous when this process remembers it. */
  verdict(key: string, ttlSeconds: number, bind: () => Promise<boolean>): boolean | Promise<boolean> {
    const known = this.fresh(key);
    if (known) return known.accepted;
    let settling = this.pending.get(key);
    if (!settling) {
      settling = this.settle(key, ttlSeconds, bind).finally(() => this.pending.delete(key));
      this.pending.set(key, settling);
    }
    return settling;
  }

  private async settle(key: string, ttlSeconds: number, bind: () => Promise<boolean>): Promise<boolean> {
    const fromNode = this.api.processesOnNode > 1 ? await this.fromNode(key) : undefined;
    if (fromNode) {
      this.remember(key, fromNode);
      return fromNode.accepted;
    }
    const accepted = await bind();
    this.remember(key, { accepted, expiresAt: ttlSeconds > 0 ? Date.now() + ttlSeconds * 1000 : NEVER });
    return accepted;
  }

  private async fromNode(key: string): Promise<Verdict | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<unknown[]>((resolve) => (timer = setTimeout(() => resolve([]), NODE_WAIT_MS)));
    const answers = await Promise.race([this.api.node.gather(TOPIC, key), late]).finally(() => clearTimeout(timer));
    return answers.find((answer): answer is Verdict => answer != null && (answer as Verdict).expiresAt > Date.now());
  }

  private fresh(key: string): Verdict | undefined {
    const verdict = this.verdicts.get(key);
    if (verdict && verdict.expiresAt <= Date.now()) this.verdicts.delete(key);
    return verdict && verdict.expiresAt > Date.now() ? verdict : undefined;
  }

  private remember(key: string, verdict: Verdict): void {
    this.verdicts.delete(key);
    if (this.verdicts.size >= MAX_VERDICTS) this.verdicts.delete(this.verdicts.keys().next().value!);
    this.verdicts.set(key, verdict);
  }
}

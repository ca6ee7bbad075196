/**
 * Throttling of secret guesses that never locks a secret's owner out. A credential's name is no secret
 * (a basic-auth username, an oauth2 client_id), so a limit keyed by the credential alone lets anyone
 * deny its owner: eleven wrong passwords a minute and the right one was refused too. Here:
 *
 * - Failures are counted per client address (an IPv6 /64 counts as one address: it is what one
 *   subscriber gets), over every credential: past ADDRESS_MAX_FAILURES in a window, that address's
 *   checks are refused at once (429). A guesser locks itself out, not the owners it guesses at, whichever
 *   usernames it rotates through.
 * - Failures are counted per credential too, over every address, against a far higher bound: past it (a
 *   guesser spread over many addresses), addresses the credential verified from before are still checked
 *   as usual, and the others share one check per PROBE_INTERVAL_MS, so the right secret keeps getting
 *   through from anywhere while guesses slow down to that rate.
 * - One address has at most ADDRESS_MAX_IN_FLIGHT checks in progress per process: a burst of guesses
 *   sent at once cannot all be checked before the first failures are counted.
 *
 * Counts, known addresses and probe slots live in the store with expiry, so they hold for every worker
 * and every node sharing it, and across restarts. An address lock seen here is remembered until it ends,
 * so a flood from a locked address never reaches the store.
 */
import { createHash } from 'node:crypto';
import { isIPv6 } from 'node:net';
import { LRUCache } from 'lru-cache';
import { putIfAbsent, type Store } from '../store/store.ts';
import { RequestLimitError } from './limits.ts';

const ADDRESS_MAX_FAILURES = 10;
/** Ten times the address bound: a guesser needs ten addresses to reach it, the owner is never stopped by it. */
const CREDENTIAL_MAX_FAILURES = 100;
const FAILURE_WINDOW_MS = 60_000;
/** While a credential is past its bound: one check this often from an address it never verified from. */
const PROBE_INTERVAL_MS = 1000;
/** Distinct secrets one address may have checked at once in a process (one secret sent many times is checked once). */
const ADDRESS_MAX_IN_FLIGHT = 4;
/** How long an address a credential verified from stays known; refreshed by a use once a day per process. */
const KNOWN_ADDRESS_TTL_MS = 30 * 24 * 3600_000;
const KNOWN_ADDRESS_REFRESH_MS = 24 * 3600_000;
/** Compare-and-set rounds of one failure count before it is left uncounted (only a storm of failures races so). */
const MAX_COUNT_ATTEMPTS = 5;
/** Locks, probe slots and noted addresses remembered per process; the store has them all. */
const CACHE_SIZE = 10_000;

const ADDRESS_FAILURES = 'guesses:address:';
const CREDENTIAL_FAILURES = 'guesses:credential:';
const KNOWN_ADDRESS = 'guesses:known:';
const PROBE = 'guesses:probe:';

interface FailureWindow {
  count: number;
  endsAt: number;
}

/** What a check needs to know before it runs: whether its address verified this credential before. */
export interface Clearance {
  knownAddress: boolean;
}

export class GuessThrottle {
  /** Addresses known to be locked, until when: a flood from one costs no store read. */
  private readonly lockedAddresses = new LRUCache<string, number>({ max: CACHE_SIZE });
  /** Credentials whose probe slot this process saw taken (or took), until it is free again. */
  private readonly probeTaken = new LRUCache<string, true>({ max: CACHE_SIZE, ttl: PROBE_INTERVAL_MS });
  /** Known-address keys this process wrote lately: a caller's every request need not write. */
  private readonly noted = new LRUCache<string, true>({ max: CACHE_SIZE, ttl: KNOWN_ADDRESS_REFRESH_MS });
  private readonly inFlight = new Map<string, number>();

  /** `store`: where counts are kept (the plugin's own, shared by every process using it). */
  constructor(private readonly store: Store) {}

  /**
   * Runs `check` (true: the right secret) for `credentialId` from `clientIp` unless the address or the
   * credential is refused (RequestLimitError, 429); counts its failure, or notes its address on success.
   */
  async guard(credentialId: string, clientIp: string, check: (clearance: Clearance) => Promise<boolean>): Promise<boolean> {
    const address = addressKey(clientIp);
    this.refuseIfLocked(address, this.lockedAddresses.get(address));
    this.reserve(address);
    try {
      const clearance = await this.clear(credentialId, address);
      const matches = await check(clearance);
      await (matches ? this.noteAddress(credentialId, address) : this.countFailure(credentialId, address));
      return matches;
    } finally {
      this.release(address);
    }
  }

  /** An owner's request that needed no check (its secret was remembered): its address stays known. */
  usedFrom(credentialId: string, clientIp: string): void {
    // Not awaited: the caller answers without waiting for the store, and a lost write only costs the address its priority.
    this.noteAddress(credentialId, addressKey(clientIp)).catch(() => undefined);
  }

  private async clear(credentialId: string, address: string): Promise<Clearance> {
    const keys = [ADDRESS_FAILURES + address, CREDENTIAL_FAILURES + credentialId, knownKey(credentialId, address)];
    const [addressWindow, credentialWindow, known] = await this.store.getMany(keys);
    const addressLockedUntil = lockedUntil(addressWindow, ADDRESS_MAX_FAILURES);
    if (addressLockedUntil !== undefined) this.lockedAddresses.set(address, addressLockedUntil);
    this.refuseIfLocked(address, addressLockedUntil);
    const knownAddress = known !== undefined;
    if (!knownAddress && lockedUntil(credentialWindow, CREDENTIAL_MAX_FAILURES) !== undefined && !(await this.takeProbe(credentialId))) {
      throw RequestLimitError.credentialLocked(Math.ceil(PROBE_INTERVAL_MS / 1000));
    }
    return { knownAddress };
  }

  /** RequestLimitError.addressLocked while `until` (the end of the address's lock, if any) is ahead. */
  private refuseIfLocked(address: string, until: number | undefined): void {
    if (until === undefined) return;
    const seconds = Math.ceil((until - Date.now()) / 1000);
    if (seconds > 0) throw RequestLimitError.addressLocked(seconds);
    this.lockedAddresses.delete(address);
  }

  /** The credential's one check of this interval for unknown addresses, across every process: true when this caller got it. */
  private async takeProbe(credentialId: string): Promise<boolean> {
    if (this.probeTaken.has(credentialId)) return false;
    this.probeTaken.set(credentialId, true);
    return putIfAbsent(this.store, PROBE + credentialId, '1', { ttlMs: PROBE_INTERVAL_MS, sync: false });
  }

  private reserve(address: string): void {
    const running = this.inFlight.get(address) ?? 0;
    if (running >= ADDRESS_MAX_IN_FLIGHT) throw RequestLimitError.addressBusy();
    this.inFlight.set(address, running + 1);
  }

  private release(address: string): void {
    const running = this.inFlight.get(address)! - 1;
    if (running === 0) this.inFlight.delete(address);
    else this.inFlight.set(address, running);
  }

  private async noteAddress(credentialId: string, address: string): Promise<void> {
    const key = knownKey(credentialId, address);
    if (this.noted.has(key)) return;
    this.noted.set(key, true);
    await this.store.put(key, '1', { ttlMs: KNOWN_ADDRESS_TTL_MS });
  }

  private async countFailure(credentialId: string, address: string): Promise<void> {
    await Promise.all([this.countIn(ADDRESS_FAILURES + address), this.countIn(CREDENTIAL_FAILURES + credentialId)]);
  }

  /** One more failure in the open window of `key` (a new window when none is open). */
  private async countIn(key: string): Promise<void> {
    for (let attempt = 0; attempt < MAX_COUNT_ATTEMPTS; attempt++) {
      const stored = await this.store.get(key);
      const now = Date.now();
      const open = parseWindow(stored);
      const window = open && open.endsAt > now ? { count: open.count + 1, endsAt: open.endsAt } : { count: 1, endsAt: now + FAILURE_WINDOW_MS };
      const ttlMs = Math.max(1, window.endsAt - now);
      if (await this.store.commitIf([{ key, value: stored }], [{ type: 'put', key, value: JSON.stringify(window), ttlMs }])) return;
    }
  }
}

/** When the window `stored` ends, if it is open and holds `max` failures or more. */
function lockedUntil(stored: string | undefined, max: number): number | undefined {
  const window = parseWindow(stored);
  return window && window.count >= max && window.endsAt > Date.now() ? window.endsAt : undefined;
}

/**
 * The key of a client address: an IPv4 address as it is, an IPv6 address by its /64 (one subscriber's
 * prefix: otherwise each guess could come from another of its 2^64 addresses). Digested, as an address
 * from a trusted proxy's X-Real-IP may be any text.
 */
function addressKey(clientIp: string): string {
  const address = isIPv6(clientIp) ? ipv6Prefix64(clientIp) : clientIp;
  return createHash('sha256').update(address).digest('base64url').slice(0, 22);
}

/** The first four groups of an IPv6 address (its zone, as in `fe80::1%eth0`, left out). */
function ipv6Prefix64(address: string): string {
  // The URL parser writes IPv6 canonically: lowercase, no leading zeros, a dotted IPv4 tail in hex.
  const canonical = new URL(`http://[${address.split('%')[0]}]/`).hostname.slice(1, -1);
  const [head, tail] = canonical.split('::');
  const groups = head ? head.split(':') : [];
  if (tail !== undefined) {
    const tailGroups = tail ? tail.split(':') : [];
    groups.push(...Array<string>(8 - groups.length - tailGroups.length).fill('0'), ...tailGroups);
  }
  return groups.slice(0, 4).join(':');
}

function knownKey(credentialId: string, address: string): string {
  return `${KNOWN_ADDRESS}${credentialId}:${address}`;
}

function parseWindow(stored: string | undefined): FailureWindow | undefined {
  return stored === undefined ? undefined : (JSON.parse(stored) as FailureWindow);
}

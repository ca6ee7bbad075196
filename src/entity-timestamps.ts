/**
 * Timestamps of the entities gateway.yaml declares without any. Kong's database sets `created_at` when it
 * inserts an entity and `updated_at` whenever it changes; a file has neither, and a reload must not make
 * every entity look new. So the first process that sees an entity records when, with a digest of its
 * content, in the store its node's processes (and nodes, on PostgreSQL) share; every process shows that
 * time on every load, and `updated_at` moves only when the entity's content does.
 *
 * Records of entities dropped from the file stay: an entity that comes back unchanged keeps its times.
 */
import { createHash } from 'node:crypto';
import type { Logger } from './log.ts';
import type { UnstampedEntity } from './config/types.ts';
import type { BatchOp, Expectation, Store } from './store/store.ts';

interface KeptTimes {
  digest: string;
  created_at: number;
  updated_at: number;
}

/** Records written by one `commitIf`: a file of thousands of new entities takes a few. */
const CHUNK = 500;
/** Rounds of read-then-write: another process stamping the same entities makes one fail, the next adopts theirs. */
const ATTEMPTS = 3;

/** Gives each entity the times kept for it, recording those of entities new or changed. */
export async function keepTimestamps(unstamped: readonly UnstampedEntity[], store: Store, now = Date.now()): Promise<void> {
  for (let i = 0; i < unstamped.length; i += CHUNK) await keepChunk(unstamped.slice(i, i + CHUNK), store, now);
}

/** As keepTimestamps, logging instead of failing: a store that cannot answer leaves the load's times, it does not stop a load. */
export async function keepTimestampsOrLog(unstamped: readonly UnstampedEntity[], store: Store, log: Logger): Promise<void> {
  try {
    await keepTimestamps(unstamped, store);
  } catch (err) {
    log.warn({ err }, "entity timestamps could not be kept: the file's entities show when this load happened");
  }
}

async function keepChunk(chunk: readonly UnstampedEntity[], store: Store, now: number): Promise<void> {
  let pending = chunk.map((item) => ({ item, key: `timestamps:${item.kind}:${item.entity.id}`, digest: contentDigest(item.entity) }));
  for (let attempt = 0; attempt < ATTEMPTS && pending.length > 0; attempt++) {
    const stored = await store.getMany(pending.map((p) => p.key));
    const expectations: Expectation[] = [];
    const writes: BatchOp[] = [];
    const staged: { item: UnstampedEntity; times: KeptTimes }[] = [];
    pending.forEach(({ item, key, digest }, i) => {
      const kept = parseTimes(stored[i]);
      if (kept?.digest === digest) return stamp(item, kept);
      const at = timeOf(item.kind, now);
      const times = { digest, created_at: kept?.created_at ?? at, updated_at: at };
      expectations.push({ key, value: stored[i] });
      writes.push({ type: 'put', key, value: JSON.stringify(times) });
      staged.push({ item, times });
    });
    if (writes.length === 0) return;
    if (await store.commitIf(expectations, writes)) return staged.forEach(({ item, times }) => stamp(item, times));
    const unsettled = new Set(staged.map((s) => s.item));
    pending = pending.filter((p) => unsettled.has(p.item));
  }
}

function stamp({ entity }: UnstampedEntity, times: KeptTimes): void {
  entity.created_at = times.created_at;
  if ('updated_at' in entity) entity.updated_at = times.updated_at;
}

/** Kong's seconds; targets to the millisecond (their DAO's `auto_timestamp_ms`). */
function timeOf(kind: string, nowMs: number): number {
  return kind === 'targets' ? nowMs / 1000 : Math.floor(nowMs / 1000);
}

function parseTimes(value: string | undefined): KeptTimes | undefined {
  if (value === undefined) return undefined;
  try {
    const times = JSON.parse(value) as KeptTimes;
    return typeof times.digest === 'string' && typeof times.created_at === 'number' ? times : undefined;
  } catch {
    return undefined;
  }
}

/** The entity's content, its timestamps aside, with keys in order: the same entity digests the same in every process. */
function contentDigest(entity: UnstampedEntity['entity']): string {
  const { created_at: _created, updated_at: _updated, ...content } = entity;
  return createHash('sha256').update(sortedJson(content)).digest('base64url');
}

function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
  const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sortedJson(v)}`).join(',')}}`;
}

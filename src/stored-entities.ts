/**
 * The core entities (services, routes, plugins, upstreams, targets, certificates, SNIs, CA certificates) created through the admin API on a node whose store is
 * shared (Kong's traditional mode): one document in the store, with a version. Every write replaces the
 * whole document at once with `commitIf` on the version, so a write is applied whole or not at all, and
 * of two writes made from the same version only one lands. Every process of every node rebuilds its
 * configuration from gateway.yaml and this document when the version moves (a notice, or at the latest
 * the next poll, every `db_update_frequency`), as SIGHUP rebuilds it from the file.
 */
import type { ApiEntities } from './config/load.ts';
import type { Store } from './store/store.ts';

const VERSION_KEY = 'config/version';
const DOCUMENT_KEY = 'config/entities';
const TOPIC = 'config';
/** The document is rewritten whole by every write: this bounds what a write costs (Kong DB-less's own limit is the body size). */
export const MAX_API_ENTITIES = 10_000;

export interface EntityDocument extends ApiEntities {
  version: number;
}

/**
 * An entity as the document keeps it: as the loader built it (references as `{id}`, a plugin's config
 * with its vault references), absent fields rather than nulls (the loader reads both alike).
 */
export function storedRecord(entity: object): Record<string, any> & { id: string } {
  return Object.fromEntries(Object.entries(JSON.parse(JSON.stringify(entity))).filter(([, v]) => v !== null)) as Record<string, any> & { id: string };
}

export const EMPTY_DOCUMENT: EntityDocument = {
  version: 0,
  services: [],
  routes: [],
  plugins: [],
  upstreams: [],
  targets: [],
  certificates: [],
  snis: [],
  ca_certificates: [],
};

/** A document as read: `expected` is what a write made from it expects the version key to hold. */
export interface ReadDocument {
  document: EntityDocument;
  expected: string | undefined;
}

export class StoredEntities {
  /** `store`: the core's namespace. */
  constructor(private readonly store: Store) {}

  /** The version alone: what the poll reads. */
  async version(): Promise<number> {
    return Number((await this.store.get(VERSION_KEY)) ?? 0);
  }

  async read(): Promise<ReadDocument> {
    // The two keys change together (commitIf), but a read of both may straddle a write: read again then.
    for (;;) {
      const [version, text] = await this.store.getMany([VERSION_KEY, DOCUMENT_KEY]);
      // A kind added in a later version is absent from a document written before it.
      const document: EntityDocument = text === undefined ? EMPTY_DOCUMENT : { ...EMPTY_DOCUMENT, ...JSON.parse(text) };
      if (Number(version ?? 0) === document.version) return { document, expected: version };
    }
  }

  /** Stores `next` with the version after the one read; false when another write came first (nothing written). */
  async replace(read: ReadDocument, next: ApiEntities): Promise<EntityDocument | undefined> {
    const document: EntityDocument = { ...next, version: read.document.version + 1 };
    const ops = [
      { type: 'put' as const, key: VERSION_KEY, value: String(document.version) },
      { type: 'put' as const, key: DOCUMENT_KEY, value: JSON.stringify(document) },
    ];
    return (await this.store.commitIf([{ key: VERSION_KEY, value: read.expected }], ops, { sync: true })) ? document : undefined;
  }

  /** Tells every process; resolves once those of this node applied it (read-your-writes on this node). */
  announce(version: number): Promise<void> {
    return this.store.notices.publishAndWait(TOPIC, String(version));
  }

  /** Calls `changed` on every announced change (and when notices may have been lost); returns the unsubscribe. */
  follow(changed: () => Promise<unknown>): () => void {
    return this.store.notices.subscribe(TOPIC, () => changed());
  }
}

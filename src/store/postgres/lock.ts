import type pg from 'pg';
import { connectedClient, type PostgresSettings } from './connection.ts';
import { lockKey } from './schema.ts';

/**
 * A lock one node holds on the database while it runs plugins that keep state in one process (they
 * would corrupt each other's data from two nodes). A session advisory lock on a connection of its own:
 * held as long as that connection lives, released by PostgreSQL when the node dies.
 */
export class SoleNodeLock {
  private client: pg.Client | null = null;

  constructor(
    private readonly settings: PostgresSettings,
    private readonly log: (message: string, err?: unknown) => void,
  ) {}

  get held(): boolean {
    return this.client !== null;
  }

  /** True when this node holds the lock now (it may already have). */
  async acquire(): Promise<boolean> {
    if (this.client) return true;
    const client = await connectedClient(this.settings);
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.client = null;
      this.log('postgres: the connection holding this node\'s sole-node lock was lost; another node may now start on this database', err);
    });
    const { rows } = await client.query('SELECT pg_try_advisory_lock($1) AS locked', [lockKey(`tollgate-sole-node:${this.settings.schema}`)]);
    if (!rows[0].locked) {
      await client.end();
      return false;
    }
    this.client = client;
    return true;
  }

  async release(): Promise<void> {
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}

import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { atMost, LocalNotices, SETTLE_TIMEOUT_MS } from '../notices.ts';
import type { NoticeListener, Notices } from '../store.ts';
import type { NodeExchange } from '../../process/exchange.ts';
import { connectionConfig, unreachable, type PostgresSettings } from './connection.ts';

/** The node exchange's topic carrying notices between a node's worker processes. */
const NODE_NOTICE_TOPIC = 'store-notice';
/** NOTIFY payloads are limited to 8000 bytes; a longer notice is sent as `null` (drop the topic's cache). */
const MAX_NOTICE_BYTES = 7_900;
/** Notices waiting while the connection is down; beyond, they collapse into one `null` per topic. */
const MAX_OUTBOX = 10_000;

/** Notices over LISTEN/NOTIFY, on a connection that is watched and re-established when lost. */
export class PostgresNotices implements Notices {
  private readonly local = new LocalNotices();
  /** Sent with every notice, so this process skips its own (it delivered them when publishing). */
  private readonly sender = randomUUID();
  private readonly channel: string;
  private client: pg.Client | null = null;
  private outbox: string[] = [];
  private sending = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  /** The connection whose liveness check has not answered yet. */
  private pinging: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  /** Hands a notice to the node's other processes and resolves once they applied it (see shareWithinNode). */
  private withinNode: (topic: string, message: string) => Promise<void> = () => Promise.resolve();

  constructor(
    private readonly settings: PostgresSettings,
    private readonly log: (message: string, err?: unknown) => void,
  ) {
    // One channel per schema: deployments in two schemas of one database do not hear each other.
    this.channel = `tollgate:${settings.schema}`;
  }

  /** Whether notices can flow right now. */
  get connected(): boolean {
    return this.client !== null;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
    this.timer = setInterval(() => this.tick(), this.settings.updateFrequencyMs).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  /**
   * The node's other worker processes (when there are) hear this process's `publishAndWait` notices
   * through `exchange` at once and confirm they applied them; NOTIFY still carries them to other nodes.
   */
  shareWithinNode(exchange: NodeExchange): void {
    exchange.offer(NODE_NOTICE_TOPIC, (argument) => {
      const [pid, topic, message] = JSON.parse(argument ?? '[]') as [number, string, string];
      return pid === process.pid || typeof topic !== 'string' ? undefined : this.local.deliver(topic, message);
    });
    this.withinNode = (topic, message) => exchange.gather(NODE_NOTICE_TOPIC, JSON.stringify([process.pid, topic, message])).then(() => undefined);
  }

  publishAndWait(topic: string, message: string): Promise<void> {
    const here = this.local.deliver(topic, message);
    this.send(topic, message);
    return atMost(Promise.all([here, this.withinNode(topic, message)]).then(() => undefined), SETTLE_TIMEOUT_MS);
  }

  publish(topic: string, message: string): void {
    void this.local.deliver(topic, message);
    this.send(topic, message);
  }

  private send(topic: string, message: string): void {
    let payload = JSON.stringify([this.sender, topic, message]);
    if (Buffer.byteLength(payload) > MAX_NOTICE_BYTES) payload = JSON.stringify([this.sender, topic, null]);
    this.outbox.push(payload);
    if (this.outbox.length > MAX_OUTBOX) this.collapseOutbox();
    void this.flush();
  }

  subscribe(topic: string, listener: NoticeListener): () => void {
    return this.local.subscribe(topic, listener);
  }

  /** Too many notices waiting: one `null` per topic says as much as all of them. */
  private collapseOutbox(): void {
    const topics = new Set(this.outbox.map((p) => JSON.parse(p)[1] as string));
    this.outbox = [...topics].map((t) => JSON.stringify([this.sender, t, null]));
  }

  private async flush(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.outbox.length > 0 && this.client) {
        await this.client.query('SELECT pg_notify($1, $2)', [this.channel, this.outbox[0]]);
        this.outbox.shift();
      }
    } catch (err) {
      // Kept in the outbox; sent once the connection is back.
      this.lost(err);
    } finally {
      this.sending = false;
    }
  }

  private connect(): Promise<void> {
    this.connecting ??= this.connectNow().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async connectNow(): Promise<void> {
    const client = new pg.Client(connectionConfig(this.settings));
    client.on('error', (err) => this.lost(err, client));
    client.on('end', () => this.lost(undefined, client));
    client.on('notification', (n) => this.received(n.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw unreachable(this.settings, err, 'listen for notices on');
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    void this.flush();
  }

  private received(payload: string | undefined): void {
    if (!payload) return;
    let sender: string, topic: string, message: string | null;
    try {
      [sender, topic, message] = JSON.parse(payload);
    } catch {
      return;
    }
    if (sender !== this.sender && typeof topic === 'string') void this.local.deliver(topic, message);
  }

  /** The notice connection failed: caches drop what notices keep fresh, and a reconnect is due. */
  private lost(err: unknown, client: pg.Client | null = this.client): void {
    if (client !== this.client || this.client === null) return;
    this.client = null;
    if (!this.stopped) this.log('postgres: the notice connection was lost; caches are dropped until it is back', err);
    void client?.end().catch(() => undefined);
    this.local.deliverLoss();
  }

  /** Each db_update_frequency: reconnect when down (dropping caches again), or check the connection is alive. */
  private tick(): void {
    if (this.stopped) return;
    if (!this.client) {
      this.local.deliverLoss();
      this.connect().then(
        () => {
          // Notices sent while we were away are lost: everything cached since the loss is suspect.
          this.local.deliverLoss();
          this.log('postgres: the notice connection is back');
        },
        () => undefined,
      );
      return;
    }
    const client = this.client;
    if (this.pinging === client) {
      // The last check has not answered within a whole period: the connection is as good as lost.
      this.lost(new Error('the notice connection stopped answering'));
      return;
    }
    this.pinging = client;
    const answered = () => {
      if (this.pinging === client) this.pinging = null;
    };
    client.query('SELECT 1').then(answered, (err) => {
      answered();
      this.lost(err, client);
    });
  }
}

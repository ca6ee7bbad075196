/** What the local and the remote queue share, for the handler: Kong's queue settings (src/queue/settings.ts) applied to metering events. */
import type { QueueDepth } from '../../src/pdk/index.ts';
import type { MeteringEvent } from './events.ts';
import type { RequestMeteringConfig } from './schema.ts';
export interface EventQueue {
  readonly name: string;
  add(events: MeteringEvent[]): void;
  /** The settings of the instance using this queue changed (a reload). */
  reconfigure(config: RequestMeteringConfig): void;
  depth(): QueueDepth;
  /**
   * The store refuses every write (a full disk: StoreUnwritableError) since this queue's last attempt,
   * so the usage of a request served now could never be recorded: the plugin refuses such requests.
   */
  readonly cannotRecord: boolean;
  /** Hands over or stores everything it holds, then stops. */
  close(): Promise<void>;
}

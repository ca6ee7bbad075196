/** Kong's queue for plugins that batch entries and send them on: its settings, and the on-disk queue shared by a node's processes. */
export { PersistentQueue, type PersistentQueueSettings, type QueueCounters, type QueueDepth } from '../queue/persistent-queue.ts';
export { eventsIn as entriesIn, type Claim as QueueClaim } from '../queue/disk-queue.ts';
export { FullQueueLog, QUEUE_SCHEMA, queueSettingsProblems, retryDelayMs, type QueueSettings } from '../queue/settings.ts';

/** What logging plugins build on: Kong's queue (its settings, the on-disk queue shared by a node's processes), and resources kept per key across reloads. */
export { PersistentQueue, type PersistentQueueSettings, type QueueCounters, type QueueDepth } from '../queue/persistent-queue.ts';
export { eventsIn as entriesIn, type Claim as QueueClaim } from '../queue/disk-queue.ts';
export { FullQueueLog, QUEUE_SCHEMA, queueSettingsProblems, retryDelayMs, type QueueSettings } from '../queue/settings.ts';
export { reconcileResources, type KeyedResource } from '../toolkit/keyed-resources.ts';

/**
 * What logging plugins and other senders build on: Kong's queue (its settings, the on-disk queue shared by a
 * node's processes), resources kept per key across reloads, and a bounded read of a receiver's answer.
 */
export { PersistentQueue, type PersistentQueueSettings, type QueueCounters, type QueueDepth } from '../queue/persistent-queue.ts';
export { eventsIn as entriesIn, type Claim as QueueClaim } from '../queue/disk-queue.ts';
export { FullQueueLog, QUEUE_SCHEMA, queueSettingsProblems, retryDelayMs, type QueueSettings } from '../queue/settings.ts';
export { reconcileResources, type KeyedResource } from '../toolkit/keyed-resources.ts';
export { boundedText } from '../toolkit/receiver-answer.ts';

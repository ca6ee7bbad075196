/** What plugins that batch and send entries build on: Kong's queue settings. */
export { FullQueueLog, QUEUE_SCHEMA, queueSettingsProblems, retryDelayMs, type QueueSettings } from '../queue/settings.ts';

/**
 * The notification namespace of the metering plugin's store:
 *   channel/<id>, rule/<id>          records (soft-deleted: `deletedAt`)
 *   event/<id>                       an event (ULID ids: key order is creation order)
 *   status/<event id>/<channel id>   its delivery to one channel
 *   fired/<fact>                     the fact an event was made of (a threshold reached in a usage period, an invoice) -> event id
 *   q/notification-<channel id>/...  the channel's delivery queue (delivery.ts)
 *   lease/sweep                      which process sweeps every rule (evaluator.ts)
 */
import { stableId } from '../shared/ids.ts';

/** Announced on every channel or rule change: each process brings its queues and rule cache up to date. */
export const CHANGES_TOPIC = 'notification.changes';

export const keys = {
  channel: (id: string) => `channel/${id}`,
  rule: (id: string) => `rule/${id}`,
  event: (id: string) => `event/${id}`,
  status: (eventId: string, channelId: string) => `status/${eventId}/${channelId}`,
  statuses: (eventId: string) => `status/${eventId}/`,
  fired: (fact: string) => `fired/${stableId(fact)}`,
  sweepLease: 'lease/sweep',
  /** The name of a channel's delivery queue (the core's persistent queue keeps it under `q/<name>/`). */
  queueName: (channelId: string) => `notification-${channelId}`,
};

export const PREFIXES = { channels: 'channel/', rules: 'rule/', events: 'event/' };


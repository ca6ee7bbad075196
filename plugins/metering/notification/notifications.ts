/**
 * Channels, rules and events in the notification namespace of the metering plugin's store, and the
 * one step that makes an event: a single durable commit that writes the event, its delivery statuses
 * and one queue entry per channel, on condition that the fact's key is still absent. Whichever process
 * or node notices a fact first wins that commit; every other one finds the key there and does nothing,
 * so each fact makes one event, delivered at least once under its id. Its keys: keys.ts.
 */
import type { BatchOp, Store } from '../../../src/pdk/index.ts';
import { channelInUse, invalidParameters, notificationNotFound } from '../shared/errors.ts';
import { ulid } from '../shared/ids.ts';
import type { Deliveries } from './delivery.ts';
import {
  validateChannel, validateRule, type Channel, type DeliveryStatus, type EventType, type NotificationEvent, type Payload, type Rule,
} from './model.ts';
import { CHANGES_TOPIC, keys, PREFIXES } from './keys.ts';
import { newSigningSecret } from './signature.ts';

/** A fact a rule matched, as the evaluator (evaluator.ts) hands it over. */
export interface Fact {
  /** Names the fact for good (rule, what, which period): the same fact always makes the same key. */
  key: string;
  rule: Rule;
  type: EventType;
  data: Record<string, unknown>;
  subjects: string[];
  features: string[];
}

export interface EventFilter {
  from?: number;
  to?: number;
  rules?: string[];
  channels?: string[];
  subjects?: string[];
  features?: string[];
}

export interface EventView extends NotificationEvent {
  rule: Rule;
  deliveryStatus: DeliveryStatus[];
}

export class NotificationService {
  constructor(
    readonly store: Store,
    private readonly deliveries: Deliveries,
  ) {}

  private async read<T>(key: string): Promise<T | undefined> {
    const text = await this.store.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  private async all<T>(prefix: string, options: { reverse?: boolean } = {}): Promise<T[]> {
    const out: T[] = [];
    for await (const [, value] of this.store.scan({ prefix, reverse: options.reverse })) out.push(JSON.parse(value) as T);
    return out;
  }

  private async save(key: string, record: unknown): Promise<void> {
    await this.store.put(key, JSON.stringify(record), { sync: true });
    await this.store.notices.publishAndWait(CHANGES_TOPIC, key);
  }

  async createChannel(body: unknown): Promise<Channel> {
    const def = validateChannel(body);
    const now = new Date().toISOString();
    const channel: Channel = { id: ulid(), type: 'WEBHOOK', ...def, signingSecret: def.signingSecret ?? newSigningSecret(), createdAt: now, updatedAt: now };
    await this.save(keys.channel(channel.id), channel);
    return channel;
  }

  /** A live channel (deleted ones only with `deleted`). */
  async getChannel(id: string, options: { deleted?: boolean } = {}): Promise<Channel> {
    const channel = await this.read<Channel>(keys.channel(id));
    if (!channel || (channel.deletedAt && !options.deleted)) throw notificationNotFound('channel', id);
    return channel;
  }

  async listChannels(options: { includeDisabled?: boolean; includeDeleted?: boolean } = {}): Promise<Channel[]> {
    const wanted = (c: Channel) => (options.includeDeleted || !c.deletedAt) && (options.includeDisabled !== false || !c.disabled);
    return (await this.all<Channel>(PREFIXES.channels)).filter(wanted);
  }

  async updateChannel(id: string, body: unknown): Promise<Channel> {
    const def = validateChannel(body);
    const current = await this.getChannel(id);
    const channel: Channel = { ...current, ...def, signingSecret: def.signingSecret ?? current.signingSecret, updatedAt: new Date().toISOString() };
    await this.save(keys.channel(id), channel);
    return channel;
  }

  /** OpenMeter's rule: a channel a live rule sends to cannot be deleted. */
  async deleteChannel(id: string): Promise<void> {
    const channel = await this.getChannel(id);
    const users = await this.listRules({ includeDisabled: true, channels: [id] });
    if (users.length) throw channelInUse(id, users.map((r) => r.id));
    const now = new Date().toISOString();
    await this.save(keys.channel(id), { ...channel, disabled: true, deletedAt: now, updatedAt: now });
  }

  private async checkChannels(ids: string[]): Promise<void> {
    const missing: string[] = [];
    for (const id of ids) {
      const channel = await this.read<Channel>(keys.channel(id));
      if (!channel || channel.deletedAt) missing.push(id);
    }
    if (missing.length) throw invalidParameters(missing.map((id) => ({ field: 'channels', reason: `channel not found: ${id}`, rule: 'not_found', source: 'body' })));
  }

  async createRule(body: unknown): Promise<Rule> {
    const def = validateRule(body);
    await this.checkChannels(def.channels);
    const now = new Date().toISOString();
    const rule: Rule = { id: ulid(), ...def, createdAt: now, updatedAt: now };
    await this.save(keys.rule(rule.id), rule);
    return rule;
  }

  async getRule(id: string, options: { deleted?: boolean } = {}): Promise<Rule> {
    const rule = await this.read<Rule>(keys.rule(id));
    if (!rule || (rule.deletedAt && !options.deleted)) throw notificationNotFound('rule', id);
    return rule;
  }

  async listRules(options: { includeDisabled?: boolean; includeDeleted?: boolean; channels?: string[]; features?: string[] } = {}): Promise<Rule[]> {
    return (await this.all<Rule>(PREFIXES.rules)).filter(
      (r) =>
        (options.includeDeleted || !r.deletedAt) &&
        (options.includeDisabled !== false || !r.disabled) &&
        (!options.channels?.length || r.channels.some((c) => options.channels!.includes(c))) &&
        (!options.features?.length || (r.features ?? []).some((f) => options.features!.includes(f))),
    );
  }

  /** Rule and channel types are immutable, as OpenMeter's. */
  async updateRule(id: string, body: unknown): Promise<Rule> {
    const def = validateRule(body);
    const current = await this.getRule(id);
    if (def.type !== current.type) throw invalidParameters([{ field: 'type', reason: `a rule's type cannot change (it is ${current.type})`, rule: 'immutable', source: 'body' }]);
    await this.checkChannels(def.channels);
    const rule: Rule = { ...def, id, createdAt: current.createdAt, updatedAt: new Date().toISOString() };
    await this.save(keys.rule(id), rule);
    return rule;
  }

  async deleteRule(id: string): Promise<void> {
    const rule = await this.getRule(id);
    const now = new Date().toISOString();
    await this.save(keys.rule(id), { ...rule, disabled: true, deletedAt: now, updatedAt: now });
  }

  /**
   * Makes the fact's event, unless some process already did: the event, a PENDING status and a queue
   * entry per live channel of the rule, and the fact's key, in one durable commit that requires the key
   * to be absent. Returns the event when this call made it.
   */
  async fire(fact: Fact, now = Date.now()): Promise<NotificationEvent | undefined> {
    const factKey = keys.fired(fact.key);
    if ((await this.store.get(factKey)) !== undefined) return undefined;
    const channels: string[] = [];
    for (const id of fact.rule.channels) {
      const channel = await this.read<Channel>(keys.channel(id));
      if (channel && !channel.deletedAt && !channel.disabled) channels.push(id);
    }
    const id = ulid(now);
    const createdAt = new Date(now).toISOString();
    const payload: Payload = { id, type: fact.type, timestamp: createdAt, data: fact.data };
    const { type, subjects, features } = fact;
    const event: NotificationEvent = { id, type, createdAt, ruleId: fact.rule.id, channels, payload, subjects, features };
    const ops: BatchOp[] = [
      { type: 'put', key: factKey, value: id },
      { type: 'put', key: keys.event(id), value: JSON.stringify(event) },
    ];
    const queued = new Map<string, BatchOp[]>();
    for (const channelId of channels) {
      const status: DeliveryStatus = { channelId, state: 'PENDING', reason: 'waiting for delivery', updatedAt: createdAt, attempts: [] };
      const entry = this.deliveries.entryWrite(channelId, id, now);
      queued.set(channelId, [entry]);
      ops.push({ type: 'put', key: keys.status(id, channelId), value: JSON.stringify(status) }, entry);
    }
    if (!(await this.store.commitIf([{ key: factKey, value: undefined }], ops, { sync: true }))) return undefined;
    for (const [channelId, writes] of queued) this.deliveries.committed(channelId, writes);
    return event;
  }

  /** Sends an event again (to the channels named, else to all of its rule's), under the same id. */
  async resend(eventId: string, channelIds?: string[]): Promise<void> {
    const event = await this.getEvent(eventId);
    const targets = channelIds?.length ? channelIds : event.rule.channels;
    const unknown = targets.filter((c) => !event.rule.channels.includes(c));
    if (unknown.length) {
      throw invalidParameters(unknown.map((c) => ({ field: 'channels', reason: `channel ${c} is not assigned to the event's rule`, rule: 'invalid', source: 'body' })));
    }
    await this.checkChannels(targets);
    const now = Date.now();
    const ops: BatchOp[] = [];
    const queued = new Map<string, BatchOp[]>();
    for (const channelId of targets) {
      const previous = event.deliveryStatus.find((s) => s.channelId === channelId);
      const status: DeliveryStatus = { channelId, state: 'RESENDING', reason: 'resend requested', updatedAt: new Date(now).toISOString(), attempts: previous?.attempts ?? [] };
      const entry = this.deliveries.entryWrite(channelId, eventId, now);
      queued.set(channelId, [entry]);
      ops.push({ type: 'put', key: keys.status(eventId, channelId), value: JSON.stringify(status) }, entry);
    }
    await this.store.batch(ops, { sync: true });
    for (const [channelId, writes] of queued) this.deliveries.committed(channelId, writes);
  }

  async getEvent(id: string): Promise<EventView> {
    const event = await this.read<NotificationEvent>(keys.event(id));
    if (!event) throw notificationNotFound('event', id);
    return this.view(event);
  }

  private async view(event: NotificationEvent): Promise<EventView> {
    const rule = await this.getRule(event.ruleId, { deleted: true });
    const deliveryStatus = await this.all<DeliveryStatus>(keys.statuses(event.id));
    return { ...event, rule, deliveryStatus };
  }

  /** Events newest first, filtered; `offset` and `limit` page them. */
  async listEvents(filter: EventFilter, page: { offset: number; limit: number }): Promise<{ items: EventView[]; total: number }> {
    const matching: NotificationEvent[] = [];
    for (const event of await this.all<NotificationEvent>(PREFIXES.events, { reverse: true })) {
      const time = Date.parse(event.createdAt);
      if (filter.from !== undefined && time < filter.from) continue;
      if (filter.to !== undefined && time >= filter.to) continue;
      if (filter.rules?.length && !filter.rules.includes(event.ruleId)) continue;
      if (filter.channels?.length && !event.channels.some((c) => filter.channels!.includes(c))) continue;
      if (filter.subjects?.length && !event.subjects.some((s) => filter.subjects!.includes(s))) continue;
      if (filter.features?.length && !event.features.some((f) => filter.features!.includes(f))) continue;
      matching.push(event);
    }
    const items = await Promise.all(matching.slice(page.offset, page.offset + page.limit).map((e) => this.view(e)));
    return { items, total: matching.length };
  }
}

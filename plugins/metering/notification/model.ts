/**
 * Notifications as OpenMeter models them (openmeter/notification): a channel is where deliveries go (a
 * webhook), a rule selects one event type, its conditions and one to five channels, an event records
 * that a rule matched one fact (its payload a snapshot), and a delivery status is kept per event and
 * channel. Notifications exist only in OpenMeter's v1 API, so the records keep its field names.
 *
 * This file holds the records and the checks of what a caller may create or change; every size a
 * caller controls is bounded here, before anything is stored.
 */
import { headerNameProblem, isPlainObject } from '../../../src/pdk/index.ts';
import { invalidParameters, type InvalidParameter } from '../shared/errors.ts';
import { isSigningSecret } from './signature.ts';

export const EVENT_TYPES = ['entitlements.balance.threshold', 'entitlements.reset', 'invoice.created', 'invoice.updated'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** `NUMBER` and `PERCENT` are OpenMeter's deprecated names of `usage_value` and `usage_percentage`. */
export const THRESHOLD_TYPES = ['usage_value', 'usage_percentage', 'balance_value', 'NUMBER', 'PERCENT'] as const;
export type ThresholdType = (typeof THRESHOLD_TYPES)[number];

export interface Threshold {
  value: number;
  type: ThresholdType;
}

export type Metadata = Record<string, string> | null;

interface Managed {
  id: string;
  createdAt: string;
  updatedAt: string;
  deletedAt?: string;
}

export interface Channel extends Managed {
  type: 'WEBHOOK';
  name: string;
  disabled: boolean;
  url: string;
  customHeaders: Record<string, string>;
  /** `whsec_` and base64: the key deliveries are signed with (Standard Webhooks, as Svix signs OpenMeter's). */
  signingSecret: string;
  metadata: Metadata;
}

export interface Rule extends Managed {
  type: EventType;
  name: string;
  disabled: boolean;
  /** Channel ids. */
  channels: string[];
  metadata: Metadata;
  /** Balance thresholds only. */
  thresholds?: Threshold[];
  /** Entitlement rules: feature ids or keys the rule is scoped to (none: every feature). */
  features?: string[];
}

export type DeliveryState = 'PENDING' | 'SENDING' | 'SUCCESS' | 'FAILED' | 'RESENDING';

export interface DeliveryAttempt {
  state: DeliveryState;
  timestamp: string;
  response: { statusCode?: number; body: string; durationMs: number; url: string };
}

/** One event's delivery to one channel (the store key names both). */
export interface DeliveryStatus {
  channelId: string;
  state: DeliveryState;
  reason: string;
  updatedAt: string;
  /** When the next attempt is due; absent once no more are made. */
  nextAttempt?: string;
  attempts: DeliveryAttempt[];
}

/** What a webhook receives: OpenMeter's payload, `id` the event's (the receiver dedupes on it). */
export interface Payload {
  id: string;
  type: EventType;
  timestamp: string;
  data: Record<string, unknown>;
}

export interface NotificationEvent {
  id: string;
  type: EventType;
  createdAt: string;
  ruleId: string;
  channels: string[];
  payload: Payload;
  /** What the event list filters on: the subjects and the feature (id and key) of an entitlement event. */
  subjects: string[];
  features: string[];
}

export const MAX_CHANNELS_PER_RULE = 5;
const MAX_THRESHOLDS = 10;
const MAX_FEATURES = 100;
const MAX_NAME = 256;
const MAX_URL = 2048;
const MAX_HEADERS = 20;
const MAX_HEADER_VALUE = 1024;
const MAX_METADATA = 50;
const MAX_METADATA_TEXT = 256;
/** Headers a delivery sets itself: a channel may not replace them. */
const RESERVED_HEADERS = /^(webhook-.*|content-type|content-length|host|connection|transfer-encoding)$/i;

type Body = Record<string, unknown>;
type Problems = InvalidParameter[];

const problem = (field: string, reason: string, rule = 'invalid'): InvalidParameter => ({ field, reason, rule, source: 'body' });

function sealed(body: Body, allowed: readonly string[], out: Problems): void {
  for (const key of Object.keys(body)) if (!allowed.includes(key)) out.push(problem(key, 'unknown property', 'unknown_property'));
}

function name(body: Body, out: Problems): string {
  const v = body.name;
  if (typeof v !== 'string' || v.trim() === '' || v.length > MAX_NAME) out.push(problem('name', `must be a non-empty string of at most ${MAX_NAME} characters`, 'required'));
  return String(v ?? '');
}

function flag(body: Body, field: string, out: Problems): boolean {
  const v = body[field] ?? false;
  if (typeof v !== 'boolean') out.push(problem(field, 'must be a boolean', 'type'));
  return v === true;
}

/** A flat object of short strings (metadata, custom headers). */
function strings(body: Body, field: string, max: number, maxText: number, out: Problems): Record<string, string> | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v) || Object.keys(v).length > max) {
    out.push(problem(field, `must be an object of at most ${max} string values`, 'type'));
    return null;
  }
  for (const [k, value] of Object.entries(v)) {
    if (typeof value !== 'string' || k.length > maxText || value.length > maxText) out.push(problem(`${field}.${k}`, `must be a string of at most ${maxText} characters`, 'type'));
  }
  return v as Record<string, string>;
}

function webhookUrl(body: Body, out: Problems): string {
  const v = body.url;
  let url: URL | undefined;
  try {
    url = typeof v === 'string' && v.length <= MAX_URL ? new URL(v) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) out.push(problem('url', `must be an http or https URL of at most ${MAX_URL} characters`, 'invalid_url'));
  return String(v ?? '');
}

function customHeaders(body: Body, out: Problems): Record<string, string> {
  const headers = strings(body, 'customHeaders', MAX_HEADERS, MAX_HEADER_VALUE, out) ?? {};
  for (const [header, value] of Object.entries(headers)) {
    const wrong = headerNameProblem(header) ?? (RESERVED_HEADERS.test(header) ? 'is set by the delivery itself' : undefined) ?? (/[\r\n\0]/.test(value) ? 'value holds a line break' : undefined);
    if (wrong) out.push(problem(`customHeaders.${header}`, wrong, 'invalid_header'));
  }
  return headers;
}

/** What a caller may set on a channel (create, or the whole of it on update). */
export type ChannelDefinition = Pick<Channel, 'name' | 'disabled' | 'url' | 'customHeaders' | 'metadata'> & { signingSecret?: string };

export function validateChannel(body: unknown): ChannelDefinition {
  if (!isPlainObject(body)) throw invalidParameters([problem('', 'the body must be a JSON object', 'type')]);
  const out: Problems = [];
  sealed(body, ['type', 'name', 'disabled', 'url', 'customHeaders', 'signingSecret', 'metadata'], out);
  if (body.type !== 'WEBHOOK') out.push(problem('type', 'must be WEBHOOK', 'enum'));
  const def: ChannelDefinition = {
    name: name(body, out),
    disabled: flag(body, 'disabled', out),
    url: webhookUrl(body, out),
    customHeaders: customHeaders(body, out),
    metadata: strings(body, 'metadata', MAX_METADATA, MAX_METADATA_TEXT, out),
  };
  const secret = body.signingSecret;
  if (secret !== undefined && secret !== null) {
    if (typeof secret !== 'string' || !isSigningSecret(secret)) out.push(problem('signingSecret', 'must be base64 of 24 to 64 bytes, optionally prefixed with whsec_', 'invalid_signing_secret'));
    else def.signingSecret = secret;
  }
  return checked(def, out);
}

/** What a caller may set on a rule. */
export type RuleDefinition = Pick<Rule, 'type' | 'name' | 'disabled' | 'channels' | 'metadata' | 'thresholds' | 'features'>;

function idList(body: Body, field: string, min: number, max: number, out: Problems): string[] | undefined {
  const v = body[field];
  if (v === undefined || v === null) {
    if (min > 0) out.push(problem(field, `at least ${min} required`, 'required'));
    return undefined;
  }
  if (!Array.isArray(v) || v.length < min || v.length > max || v.some((x) => typeof x !== 'string' || x.length === 0 || x.length > MAX_NAME)) {
    out.push(problem(field, `must be a list of ${min} to ${max} non-empty strings`, 'invalid'));
    return undefined;
  }
  return [...new Set(v as string[])];
}

function thresholds(body: Body, out: Problems): Threshold[] | undefined {
  const v = body.thresholds;
  if (!Array.isArray(v) || v.length < 1 || v.length > MAX_THRESHOLDS) {
    out.push(problem('thresholds', `must be a list of 1 to ${MAX_THRESHOLDS} thresholds`, 'required'));
    return undefined;
  }
  return v.map((t: unknown, i) => {
    const at = `thresholds[${i}]`;
    if (!isPlainObject(t)) {
      out.push(problem(at, 'must be an object', 'type'));
      return undefined;
    }
    const type = t.type as ThresholdType;
    if (!THRESHOLD_TYPES.includes(type)) out.push(problem(`${at}.type`, `must be one of ${THRESHOLD_TYPES.join(', ')}`, 'enum'));
    const value = t.value;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1e15) out.push(problem(`${at}.value`, 'must be a number from 0 to 1e15', 'type'));
    if (value === 0 && type !== 'balance_value') out.push(problem(`${at}.value`, 'must be above 0', 'range'));
    return { value: value as number, type };
  }) as Threshold[];
}

export function validateRule(body: unknown): RuleDefinition {
  if (!isPlainObject(body)) throw invalidParameters([problem('', 'the body must be a JSON object', 'type')]);
  const out: Problems = [];
  const type = body.type as EventType;
  if (!EVENT_TYPES.includes(type)) out.push(problem('type', `must be one of ${EVENT_TYPES.join(', ')}`, 'enum'));
  const entitlement = type === 'entitlements.balance.threshold' || type === 'entitlements.reset';
  const allowed = ['type', 'name', 'disabled', 'channels', 'metadata', ...(entitlement ? ['features'] : []), ...(type === 'entitlements.balance.threshold' ? ['thresholds'] : [])];
  sealed(body, allowed, out);
  const def: RuleDefinition = {
    type,
    name: name(body, out),
    disabled: flag(body, 'disabled', out),
    channels: idList(body, 'channels', 1, MAX_CHANNELS_PER_RULE, out) ?? [],
    metadata: strings(body, 'metadata', MAX_METADATA, MAX_METADATA_TEXT, out),
  };
  if (entitlement) def.features = idList(body, 'features', 0, MAX_FEATURES, out) ?? [];
  if (type === 'entitlements.balance.threshold') def.thresholds = thresholds(body, out);
  return checked(def, out);
}

function checked<T>(value: T, out: Problems): T {
  if (out.length) throw invalidParameters(out);
  return value;
}

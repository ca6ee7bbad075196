/**
 * Sizes every attacker-chosen identifier and dimension value is held to. They become parts of store
 * keys and of roll-up rows that later batches rewrite, so an unbounded one would make every later
 * write of its meter pay for it. OpenMeter bounds external keys (customer keys, which events name as
 * their subject) at 256 characters (`ExternalResourceKey`, api/spec/packages/aip/src/shared/properties.tsp)
 * and Konnect labels at 63; ClickHouse and Kafka set no smaller limit for the other attributes.
 */

/** The key of a meter, and of billing's features and plans (OpenMeter's key pattern). */
export const KEY_PATTERN = /^[a-z0-9]+(?:_[a-z0-9]+)*$/;

/** `id`, `source`, `type` and `subject` of an event; a meter's `event_type`. */
export const MAX_IDENTIFIER_LENGTH = 256;
/** The text of one dimension value of an event (room for a request URI, as Kong's request events carry). */
export const MAX_DIMENSION_VALUE_LENGTH = 1024;
/** Dimensions of one meter: a series key holds one value of each. */
export const MAX_DIMENSIONS = 20;
/** A dimension's name, and a label's key and value (Konnect: 1–63 characters). */
export const MAX_NAME_LENGTH = 63;
/** A JSONPath (`value_property`, each dimension's path). */
export const MAX_JSONPATH_LENGTH = 1024;

/**
 * What other plugins may use of rate-limiting (response-ratelimiting counts the same way): the counters
 * of each policy, Kong's periods, who a request counts for, and Kong's shared schema parts.
 */
export { countersByPolicy, type Counters } from './counters.ts';
export { counterKey, identifierOf } from './handler.ts';
export { PERIOD_SECONDS, PERIODS, type Period } from './periods.ts';
export { checkConfig as refuseRedisPolicy, periodOrderProblem, redisSchema, redisShorthands } from './schema.ts';

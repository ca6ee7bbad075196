/** Schemas for plugin configs and entities (Kong's messages), and the field patterns the core's own entities use. */
export { atLeastOneOf, describedAs, isPlainObject, validate } from '../config/schema.ts';
export { LUA_FIELD } from '../config/lua.ts';
export { HEADER_NAME, headerNameProblem, headerValueProblem, IP_OR_CIDR, isUuid, PATH } from '../config/entities.ts';
export { canonicalName, validateServiceHost as hostProblem } from '../config/hostnames.ts';
export { upstreamHeaderNameProblem } from '../proxy/headers.ts';

/**
 * The plugin development kit: the one module a plugin imports from the core. Named exports only, and
 * only what plugins use; each part is a file of its own beside this one. The core imports the types
 * from ./types.ts and everything else from the module that defines it, never from here.
 */
export type {
  AccessContext,
  AdminMethod,
  AdminReply,
  AdminRequest,
  AdminRoute,
  AuthenticatedCredential,
  BatchOp,
  BodyObserver,
  BodyTransform,
  ConfigView,
  ConsoleTab,
  Consumer,
  ConsumerChild,
  ConsumerDirectory,
  Entity,
  EntityDefinition,
  Expectation,
  FieldSchema,
  GrpcCallAnswer,
  GrpcTranscoder,
  Infer,
  Issue,
  Journal,
  JournalEntry,
  KeptEntities,
  LogContext,
  NodeExchange,
  NodeStatus,
  Notices,
  PluginApi,
  PluginDefinition,
  PluginEntity,
  PluginInstance,
  PluginMetrics,
  PluginRuntime,
  PluginScope,
  QuotaRequest,
  QuotaReservation,
  RecordSchema,
  RemovedListener,
  RequestOutcome,
  RequestView,
  ResponseContext,
  ResponseHead,
  SerializedRequest,
  Route,
  Service,
  Store,
  ProcedureHost,
  StoreProcedure,
  TargetHealthReport,
  TargetHealthState,
  UnmatchedRequest,
  WriteBatch,
} from './types.ts';
export { authenticate, authenticateAnonymous, authenticateWith, challenge, consumerByReference, identifiedEarlier, type AuthenticationFailure, type AuthenticationOutcome } from './auth.ts';
export { clearBodyParam, clearQueryArg, credentialBodyParams, decodeArg, findHeader, headerValues, MAX_PARAMETERS, mediaType, parseArgs, readBodyParams, requestHeadLength, requestLine, responseHeadLength, type Params } from './params.ts';
export { alphanumericFrom, hashDeclaredSecret, isHashedSecret, randomAlphanumeric, randomToken, SecretVerifier, safeEqual, tokenDigest } from './secrets.ts';
export { page, pageSize } from './entities.ts';
export { atLeastOneOf, canonicalName, describedAs, HEADER_NAME, headerNameProblem, headerValueProblem, hostProblem, IP_OR_CIDR, isPlainObject, isUuid, LUA_FIELD, PATH, upstreamHeaderNameProblem, validate } from './schema.ts';
export { AddressRanges, compileOperatorRegex, operatorRegexProblem, type OperatorRegex, type OperatorRegexOptions } from './patterns.ts';
export { ConfigCompileError, ForeignKeyViolationError, HttpError, NotFoundError, RegexRefusedError, RequestLimitError, SchemaViolationError, StoreClosedError, StoreUnavailableError, StoreUnwritableError, UniqueViolationError } from './errors.ts';
export { putIfAbsent, registerStoreProcedures, take } from './store.ts';
export { adjustedOn, answerOf, difference, QuotaCounters, reserveOn, type QuotaAnswer } from './quota.ts';
export { parseUntrustedJson } from './json.ts';
export { awsUriEncode, environmentAwsCredentials, signAwsRequest, type AwsCredentials, type AwsSignedRequest } from './sigv4.ts';
export { PACKAGE_ROOT, SERVER_TOKEN } from './package.ts';
export { boundedText, entriesIn, FullQueueLog, PersistentQueue, QUEUE_SCHEMA, queueSettingsProblems, reconcileResources, retryDelayMs, type KeyedResource, type PersistentQueueSettings, type QueueClaim, type QueueCounters, type QueueDepth, type QueueSettings } from './queue.ts';

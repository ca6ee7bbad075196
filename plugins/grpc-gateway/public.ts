/** What grpc-web shares of grpc-gateway: gRPC's message frames, a proto's methods, JSON ↔ message. */
export { frame, TRAILER_FLAG, unframe } from './frames.ts';
export { decodeMessage, encodeMessage } from './json-message.ts';
export { loadMethods, type MethodTypes } from './proto.ts';

/** Authentication as Kong's plugins do it: the caller, the identity headers, `anonymous`, logical OR, challenges. */
export { authenticate, authenticateAnonymous, authenticateWith, challenge, identifiedEarlier } from '../toolkit/authenticate.ts';
export type { AuthenticationFailure, AuthenticationOutcome } from '../toolkit/authenticate.ts';
export { consumerByReference } from '../consumers.ts';

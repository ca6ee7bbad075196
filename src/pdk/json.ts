/** JSON from outside the gateway (client bodies, tokens, upstream answers), parsed with bounded nesting. */
export { parseUntrustedJson } from '../toolkit/json.ts';

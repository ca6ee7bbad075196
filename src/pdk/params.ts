/** Request parameters as Kong's plugins read them: query arguments, body parameters, headers by any spelling. */
export {
  clearBodyParam,
  clearQueryArg,
  credentialBodyParams,
  decodeArg,
  findHeader,
  headerValues,
  mediaType,
  parseArgs,
  readBodyParams,
  requestLine,
  requestHeadLength,
  responseHeadLength,
  type Params,
} from '../toolkit/params.ts';
export { MAX_PARAMETERS } from '../toolkit/limits.ts';

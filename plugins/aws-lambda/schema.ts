/** Kong's aws-lambda config (kong/plugins/aws-lambda/schema.lua), and its entity checks. */
import { type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

const HOST = /^[A-Za-z0-9.-]+$/;

export const configSchema = {
  type: 'record',
  fields: {
    timeout: { type: 'number', required: true, default: 60000 },
    keepalive: { type: 'number', required: true, default: 60000 },
    aws_key: { type: 'string', referenceable: true },
    aws_secret: { type: 'string', referenceable: true },
    // Kong's role assumption through STS: accepted in the file, refused by checkConfig (not supported here).
    aws_assume_role_arn: { type: 'string', referenceable: true },
    aws_role_session_name: { type: 'string', default: 'kong' },
    aws_sts_endpoint_url: { type: 'string' },
    aws_region: { type: 'string', match: HOST, match_message: 'invalid value' },
    function_name: { type: 'string' },
    qualifier: { type: 'string' },
    invocation_type: { type: 'string', required: true, default: 'RequestResponse', one_of: ['RequestResponse', 'Event', 'DryRun'] },
    log_type: { type: 'string', required: true, default: 'Tail', one_of: ['Tail', 'None'] },
    host: { type: 'string', match: HOST, match_message: 'invalid value' },
    port: { type: 'integer', default: 443, between: [0, 65535] },
    disable_https: { type: 'boolean', default: false },
    unhandled_status: { type: 'integer', between: [100, 999] },
    forward_request_method: { type: 'boolean', default: false },
    forward_request_uri: { type: 'boolean', default: false },
    forward_request_headers: { type: 'boolean', default: false },
    forward_request_body: { type: 'boolean', default: false },
    is_proxy_integration: { type: 'boolean', default: false },
    awsgateway_compatible: { type: 'boolean', default: false },
    proxy_url: { type: 'string' },
    skip_large_bodies: { type: 'boolean', default: true },
    base64_encode_body: { type: 'boolean', default: true },
    aws_imds_protocol_version: { type: 'string', required: true, default: 'v1', one_of: ['v1', 'v2'] },
    empty_arrays_mode: { type: 'string', required: true, default: 'legacy', one_of: ['legacy', 'correct'] },
  },
} as const satisfies RecordSchema;

export type AwsLambdaConfig = Infer<typeof configSchema>;

/** Kong's entity checks (aws_key and aws_secret together; an http proxy_url), and what Tollgate cannot do. */
export function checkConfig(config: AwsLambdaConfig): Issue[] {
  const issues: Issue[] = [];
  if ((config.aws_key == null) !== (config.aws_secret == null)) {
    issues.push({ path: [], message: "all or none of these fields must be set: 'config.aws_key', 'config.aws_secret'" });
  }
  const scheme = config.proxy_url?.match(/^([^:]+):\/\//)?.[1];
  if (scheme && scheme !== 'http') issues.push({ path: [], message: 'proxy_url scheme must be http' });
  else if (config.proxy_url != null) issues.push({ path: ['proxy_url'], message: 'a forward proxy is not supported by Tollgate' });
  if (config.aws_assume_role_arn != null) issues.push({ path: ['aws_assume_role_arn'], message: 'assuming a role through STS is not supported by Tollgate: give aws_key and aws_secret' });
  return issues;
}


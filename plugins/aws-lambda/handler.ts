/**
 * Kong's aws-lambda (kong/plugins/aws-lambda/handler.lua): the request invokes a Lambda function instead
 * of going upstream, and the function's answer is the client's. The gateway's own failures (no region,
 * no credentials, the Lambda service unreachable, slow or refusing the call) are Kong's 500.
 */
import { environmentAwsCredentials, SERVER_TOKEN, type AwsCredentials, type PluginRuntime } from '../../src/pdk/index.ts';
import { clientAnswer } from './answer.ts';
import { LambdaInvokeError, ProxyResponseError } from './errors.ts';
import { invoke, type LambdaEndpoint } from './invoke.ts';
import { requestPayload } from './payload.ts';
import type { AwsLambdaConfig } from './schema.ts';

export interface Prepared {
  region: string | undefined;
  endpoint: LambdaEndpoint | undefined;
}

export function createRuntime(): PluginRuntime<AwsLambdaConfig, Prepared> {
  return {
    async access(ctx, config, plugin) {
      const { region, endpoint } = plugin.prepared;
      if (!region || !endpoint) throw new LambdaInvokeError('no region specified');
      const payload = Buffer.from(JSON.stringify(await requestPayload(ctx, config)));
      const answer = await invoke(endpoint, config, region, credentialsOf(config), payload);
      if (answer.status >= 400) throw new LambdaInvokeError(`the Lambda service refused the call (${answer.status}): ${serviceMessage(answer.body)}`);
      let out;
      try {
        out = clientAnswer(config, answer);
      } catch (err) {
        if (!(err instanceof ProxyResponseError)) throw err;
        return ctx.respond(502, { message: 'Bad Gateway', error: `could not JSON decode Lambda function response: ${err.message}` });
      }
      const via = `${ctx.httpVersion === '2' ? '2' : '1.1'} ${SERVER_TOKEN}`;
      out.headers.via = out.headers.via ? `${out.headers.via}, ${via}` : via;
      ctx.respond(out.status, out.body, out.headers);
    },
  };
}

/** The config's key, else the environment's (as the AWS SDKs read it). */
function credentialsOf(config: AwsLambdaConfig): AwsCredentials {
  if (config.aws_key && config.aws_secret) return { accessKeyId: config.aws_key, secretAccessKey: config.aws_secret };
  const credentials = environmentAwsCredentials();
  if (!credentials) throw new LambdaInvokeError('no AWS credentials: set aws_key and aws_secret, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  return credentials;
}

/** The `Message` of the Lambda service's error answer, for the log. */
function serviceMessage(body: Buffer): string {
  try {
    return String((JSON.parse(body.toString('utf8')) as { Message?: unknown }).Message ?? body.toString('utf8').slice(0, 200));
  } catch {
    return body.toString('utf8').slice(0, 200);
  }
}

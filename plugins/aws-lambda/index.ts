/** Kong's `aws-lambda` plugin: a route's requests invoke an AWS Lambda function (SigV4-signed Invoke). */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, type Prepared } from './handler.ts';
import { endpointOf } from './invoke.ts';
import { checkConfig, configSchema, type AwsLambdaConfig } from './schema.ts';

const awsLambda: PluginDefinition<AwsLambdaConfig, Prepared> = {
  name: 'aws-lambda',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication, rate limiting and the request transformers; it answers itself.
  priority: 750,
  multiProcess: true,
  configSchema,
  checkConfig,
  prepare(config) {
    // The config's region first, then the environment's, as Kong reads it.
    const region = config.aws_region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
    return { region, endpoint: endpointOf(config, region) };
  },
  create: createRuntime,
};

export default awsLambda;

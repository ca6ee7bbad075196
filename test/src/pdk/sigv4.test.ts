/** The PDK's AWS SigV4 signer (aws-lambda, ai-proxy's bedrock) against AWS's published test vectors. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { signAwsRequest } from '../../../src/pdk/index.ts';

describe('the SigV4 signer (AWS test vectors)', () => {
  const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
  const at = new Date('2015-08-30T12:36:00Z');
  const vector = (query: Record<string, string>) => signAwsRequest({ method: 'GET', host: 'example.amazonaws.com', path: '/', query, headers: {}, body: Buffer.alloc(0) }, credentials, 'us-east-1', 'service', at).authorization;

  test('get-vanilla', () => {
    assert.equal(vector({}), 'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31');
  });

  test('get-vanilla-query-order-key-case', () => {
    assert.match(vector({ Param2: 'value2', Param1: 'value1' }), /Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500$/);
  });
});

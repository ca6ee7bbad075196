/**
 * The signature is Standard Webhooks' (and Svix's) to the byte: the specification's published example
 * (secret, message id, timestamp, body) gives its published signature, and the example receiver accepts
 * what the gateway signs and refuses a changed body, id, secret or stale timestamp.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isSigningSecret, newSigningSecret, signatureHeaders } from '../../../../plugins/metering/notification/signature.ts';
import { verifyWebhook } from '../../../../examples/webhook-receiver.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

test('the Standard Webhooks example signs to its published signature', () => {
  const headers = signatureHeaders(SECRET, 'msg_p5jXN8AQM9LWM0D4loKWxJek', '{"test": 2432232314}', 1614265330_000);
  assert.deepEqual(headers, {
    'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    'webhook-timestamp': '1614265330',
    'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  });
});

test('the receiver accepts what is signed and refuses anything changed', () => {
  const body = '{"id":"01J","type":"entitlements.reset"}';
  const headers = signatureHeaders(SECRET, '01J', body);
  assert.equal(verifyWebhook(SECRET, headers, body), true);
  assert.equal(verifyWebhook(SECRET, headers, body.replace('reset', 'resex')), false, 'another body');
  assert.equal(verifyWebhook(SECRET, { ...headers, 'webhook-id': '01K' }, body), false, 'another id');
  assert.equal(verifyWebhook(newSigningSecret(), headers, body), false, 'another secret');
  assert.equal(verifyWebhook(SECRET, headers, body, Date.now() + 600_000), false, 'a timestamp ten minutes off');
});

test('secrets: made ones are valid; short, long or non-base64 ones are not', () => {
  assert.ok(isSigningSecret(newSigningSecret()));
  assert.ok(isSigningSecret(SECRET.slice('whsec_'.length)), 'the prefix is optional');
  assert.ok(!isSigningSecret('whsec_c2hvcnQ='), 'under 24 bytes');
  assert.ok(!isSigningSecret(`whsec_${Buffer.alloc(65).toString('base64')}`), 'over 64 bytes');
  assert.ok(!isSigningSecret('whsec_not base64!!'));
});

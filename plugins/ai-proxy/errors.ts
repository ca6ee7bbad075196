/** ai-proxy's own error (docs/errors.md): its other refusals are Kong's `{"error":{"message"}}` bodies. */

/** A provider's answer too large to translate in bounded memory: the answer is cut short and this is logged. */
export class AiAnswerTooLargeError extends Error {
  override readonly name = 'AiAnswerTooLargeError';
  readonly code = 'AI_PROXY_ERR_ANSWER_TOO_LARGE';
}

/** A provider's AWS event stream (Bedrock) that cannot be read as one: the answer is cut short and this is logged. */
export class AwsEventStreamError extends Error {
  override readonly name = 'AwsEventStreamError';
  readonly code = 'AI_PROXY_ERR_BAD_EVENT_STREAM';
}

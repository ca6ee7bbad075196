/**
 * What a sender keeps of a receiver's answer (a log server's, a webhook's): at most `limit` characters
 * of its body, for a log line or a delivery record; the rest is discarded unread, so a receiver that
 * answers with a huge body costs nothing more.
 */
export async function boundedText(body: AsyncIterable<Buffer> & { destroy(): void }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, limit);
}
